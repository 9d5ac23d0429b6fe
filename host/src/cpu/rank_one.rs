//! The rank-one update A + u vᵀ on the CPU for the full kind
//! (docs/algorithms.md#rank-one-update): w = Qᵀu reduced to a multiple of e₀ (a reflector
//! and rotations), the outer product added to R's first row, and rotations restoring
//! triangularity; serially (the reference) or with Q's transformations recorded and
//! applied in row blocks. The operation (`ops/rank_one/`) validates and dispatches.
#![forbid(unsafe_code)]

use crate::base::dims::check_rank_of;
use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::dense::{gemm_add, product, view, view_mut};
use crate::cpu::factors::FactorsMut;
use crate::cpu::givens::{givens, rot, rot_rows};
use crate::cpu::householder::{apply_left, house};
use crate::cpu::reference;
use crate::cpu::rotations::ColumnTransforms;

/// Replaces a full-kind state's A by A + u vᵀ, updating R, d and Q
/// (docs/algorithms.md#rank-one-update). Works on new buffers and swaps them in only after
/// the rank check. Steps ([`RankOneWork`]): w = Qᵀu; stage A (variant A2's reflector on
/// w(n:m) when `householder_first`, then rotations zeroing w below row 0, applied to R and
/// d); H = R + w(0)e₀vᵀ; stage B (rotations restoring triangularity); the rank check and Q.
///
/// # Errors
/// [`crate::Error::RankDeficient`] when A + u vᵀ is numerically rank deficient (e.g. the
/// update cancels a column). On error the state is unchanged.
pub(crate) fn rank_one_full<T: Scalar>(
    st: FactorsMut<'_, T>,
    u: &[T],
    v: &[T],
    householder_first: bool,
) -> Result<()> {
    let (m, n) = (st.dims.m, st.dims.n);
    let q_old = st.q.as_ref().expect("a full state holds Q");
    let mut work = RankOneWork::new(st.r, st.d, q_old, u, m);
    let top = if householder_first {
        work.stage_a_reflector(n, m);
        n
    } else {
        m.saturating_sub(1)
    };
    work.stage_a_rotations(top, n);
    work.add_outer_product(v);
    work.stage_b(n, m);
    work.finish(st, n, m)
}

/// The working copies of a CPU rank-one update. The blocked path (`fast`): products on
/// faer, Q's reflector and rotations recorded and applied to Q in place once R has passed
/// the rank test (nothing can fail after it), the rotations in row blocks
/// (docs/algorithms.md#blocked-column-transformations). The reference works on a copy of Q.
struct RankOneWork<T: Scalar> {
    fast: bool,
    /// The reference's copy of Q (empty on the blocked path).
    q: Mat<T>,
    r: Mat<T>,
    d: Mat<T>,
    nrhs: usize,
    /// The blocked path's recorded rotations and reflector (v, τ) on Q(:, n:m).
    steps: ColumnTransforms<T>,
    reflector: Option<(Vec<T>, T)>,
    /// w = Qᵀu, reduced to w(0)e₀.
    w: Vec<T>,
}

impl<T: Scalar> RankOneWork<T> {
    /// Copies of R, d (and Q for the reference) and w = Qᵀu.
    fn new(r: &Mat<T>, d: &Mat<T>, q_old: &Mat<T>, u: &[T], m: usize) -> Self {
        let fast = !reference::active();
        let q = if fast {
            Mat::zeros(0, 0)
        } else {
            q_old.clone()
        };
        let (r, d) = (r.clone(), d.clone());
        let nrhs = d.ncols();
        let w: Vec<T> = if fast {
            product(
                view(q_old).transpose(),
                faer::MatRef::from_column_major_slice(u, m, 1),
            )
            .into_vec()
        } else {
            (0..m)
                .map(|i| {
                    let mut acc = T::ZERO;
                    for (a, b) in q.col(i).iter().zip(u) {
                        acc = a.mul_add(*b, acc);
                    }
                    acc
                })
                .collect()
        };
        Self {
            fast,
            q,
            r,
            d,
            nrhs,
            steps: ColumnTransforms::new(),
            reflector: None,
            w,
        }
    }

    /// Stage A, variant A2: H on w(n:m); rows n..m of R are zero, so R is untouched.
    fn stage_a_reflector(&mut self, n: usize, m: usize) {
        let Self {
            fast,
            q,
            d,
            nrhs,
            reflector,
            w,
            ..
        } = self;
        let fast = *fast;
        let (beta, tau) = {
            let (head, tail) = w[n..].split_first_mut().expect("m > n");
            house(*head, tail)
        };
        let vt = &w[n + 1..];
        if fast {
            let mut v = vec![T::ONE];
            v.extend_from_slice(vt);
            *reflector = Some((v, tau));
        }
        // Q(:, n:m) := Q(:, n:m)·H: z = Q(:, n:m)·v, then Q(:, n+l) −= τ v_l z.
        let mut z = if fast { Vec::new() } else { q.col(n).to_vec() };
        for (l, &vl) in vt.iter().enumerate().filter(|_| !fast) {
            for (o, a) in z.iter_mut().zip(q.col(n + 1 + l)) {
                *o = a.mul_add(vl, *o);
            }
        }
        if !fast {
            for (o, a) in q.col_mut(n).iter_mut().zip(&z) {
                *o = (-tau).mul_add(*a, *o);
            }
        }
        for (l, &vl) in vt.iter().enumerate().filter(|_| !fast) {
            let tv = tau * vl;
            for (o, a) in q.col_mut(n + 1 + l).iter_mut().zip(&z) {
                *o = (-tv).mul_add(*a, *o);
            }
        }
        for k in 0..*nrhs {
            apply_left(vt, tau, &mut d.col_mut(k)[n..m]);
        }
        w[n] = beta;
        w[n + 1..].fill(T::ZERO);
    }

    /// The rotation (c, s) on planes (i, i+1) of Q (recorded, or applied to the copy) and d.
    fn rotate_q_d(&mut self, i: usize, c: T, s: T) {
        if self.fast {
            self.steps.rotate(i, i + 1, c, s);
        } else {
            let (x, y) = self.q.two_cols_mut(i, i + 1);
            rot(c, s, x, y);
        }
        rot_rows(&mut self.d, i, i + 1, c, s, 0..self.nrhs);
    }

    /// Rotations on planes (i, i+1), i = top−1 down to 0, zeroing w(i+1) against w(i).
    /// Row i of R is nonzero from column i (row i+1 got fill at column i only now), so
    /// the rotation acts on columns i..n, and not at all when i ≥ n.
    fn stage_a_rotations(&mut self, top: usize, n: usize) {
        for i in (0..top).rev() {
            let (c, s, rho) = givens(self.w[i], self.w[i + 1]);
            self.w[i] = rho;
            self.w[i + 1] = T::ZERO;
            rot_rows(&mut self.r, i, i + 1, c, s, i.min(n)..n);
            self.rotate_q_d(i, c, s);
        }
    }

    /// H = R + w(0) e₀ vᵀ stays upper Hessenberg.
    fn add_outer_product(&mut self, v: &[T]) {
        for (j, &vj) in v.iter().enumerate() {
            self.r[(0, j)] = self.w[0].mul_add(vj, self.r[(0, j)]);
        }
    }

    /// Stage B: zero H(i+1, i) against H(i, i).
    fn stage_b(&mut self, n: usize, m: usize) {
        for i in 0..n.min(m.saturating_sub(1)) {
            let r = &mut self.r;
            let (c, s, rho) = givens(r[(i, i)], r[(i + 1, i)]);
            r[(i, i)] = rho;
            r[(i + 1, i)] = T::ZERO;
            rot_rows(r, i, i + 1, c, s, i + 1..n);
            self.rotate_q_d(i, c, s);
        }
    }

    /// The rank check, then Q (the recorded reflector and rotations applied in place, or the
    /// reference's copy) and the swap.
    ///
    /// # Errors
    /// [`crate::Error::RankDeficient`]; the state is unchanged then.
    fn finish(self, mut st: FactorsMut<'_, T>, n: usize, m: usize) -> Result<()> {
        let Self {
            fast,
            q,
            r,
            d,
            steps,
            reflector,
            ..
        } = self;
        if fast {
            check_rank_of(&r, n, st.rank_tol)?;
            let q = st.q.as_mut().expect("checked above");
            if let Some((v, tau)) = reflector {
                // Q(:, n:m) −= τ (Q(:, n:m) v) vᵀ by two faer products.
                let vv = faer::MatRef::from_column_major_slice(&v, m - n, 1);
                let z = product(view(q).subcols(n, m - n), vv);
                gemm_add(
                    view_mut(q).subcols_mut(n, m - n),
                    view(&z),
                    vv.transpose(),
                    -tau,
                );
            }
            steps.apply(view_mut(q));
            *st.r = r;
            *st.d = d;
            return Ok(());
        }
        let dims = *st.dims;
        st.replace_full(dims, r, d, q)
    }
}
