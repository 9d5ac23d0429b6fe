//! Rank-one update A + u vᵀ (spec §1.11; not in the seeds: Golub & Van Loan §12.5.1).
//! w = Qᵀu (2m²); stage A reduces w to ±‖w‖e₁ (variant A2 when m > n+1: one Householder
//! on w(n:m), then n rotations; A1 otherwise: m−1 rotations), making R upper Hessenberg;
//! R(0,:) += w(0)·vᵀ; stage B restores triangularity with min(n, m−1) rotations.
//! ≈ 2m² + 6m(m+n) + O(n²) flops. Needs Q.
#![forbid(unsafe_code)]

use crate::cpu::givens::{givens, rot, rot_pair};
use crate::cpu::householder::{apply_left, house};
use crate::cpu::{CpuQr, Dims};
use crate::error::{Error, Result};
use crate::mat::{Mat, MatRef};
use crate::params::QPolicy;
use crate::scalar::Scalar;

const OP: &str = "rank_one";

/// A validated rank-one update (spec §1.11): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows m (unchanged).
    pub m: usize,
    /// Columns n (unchanged).
    pub n: usize,
    /// Stage A variant A2 (Householder on w(n:m) first): chosen when m > n + 1.
    pub householder_first: bool,
}

/// Validates A + u vᵀ with u of length m and v of length n (spec §1.11).
///
/// # Errors
/// [`Error::Shape`] (wrong lengths), [`Error::NeedsQ`] (Q-less state),
/// [`Error::NonFinite`] (NaN or ±∞ in u or v).
pub(crate) fn plan<T: Scalar>(dims: Dims, u: &[T], v: &[T]) -> Result<Plan> {
    if u.len() != dims.m {
        return Err(Error::Shape {
            op: OP,
            what: "length of u",
            got: u.len(),
            expected: dims.m,
        });
    }
    if v.len() != dims.n {
        return Err(Error::Shape {
            op: OP,
            what: "length of v",
            got: v.len(),
            expected: dims.n,
        });
    }
    if dims.policy == QPolicy::None {
        return Err(Error::NeedsQ {
            op: OP,
            policy: dims.policy,
        });
    }
    for (what, x) in [("u", u), ("v", v)] {
        if let Some((row, col)) = MatRef::from_col(x).first_non_finite() {
            return Err(Error::NonFinite {
                op: OP,
                what,
                row,
                col,
            });
        }
    }
    Ok(Plan {
        m: dims.m,
        n: dims.n,
        householder_first: dims.m > dims.n + 1,
    })
}

/// Replaces A by A + u vᵀ, updating R, d and Q serially (spec §1.11). Works on new
/// buffers and swaps them in only after the rank check.
///
/// # Errors
/// Those of `plan` (above), and [`Error::RankDeficient`] when A + u vᵀ is numerically rank
/// deficient (e.g. the update cancels a column). On error the state is unchanged.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, u: &[T], v: &[T]) -> Result<()> {
    let Plan {
        m,
        n,
        householder_first,
    } = plan(st.dims, u, v)?;
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
    let (mut q, mut r, mut d) = (q_old.clone(), st.r.clone(), st.d.clone());
    let nrhs = d.ncols();

    // w = Qᵀu.
    let mut w: Vec<T> = (0..m)
        .map(|i| {
            let mut acc = T::ZERO;
            for (a, b) in q.col(i).iter().zip(u) {
                acc = a.mul_add(*b, acc);
            }
            acc
        })
        .collect();

    // Stage A. Variant A2: H on w(n:m); rows n..m of R are zero, so R is untouched.
    let top = if householder_first {
        let (beta, tau) = {
            let (head, tail) = w[n..].split_first_mut().expect("m > n");
            house(*head, tail)
        };
        let vt = &w[n + 1..];
        // Q(:, n:m) := Q(:, n:m)·H: z = Q(:, n:m)·v, then Q(:, n+l) −= τ v_l z.
        let mut z = q.col(n).to_vec();
        for (l, &vl) in vt.iter().enumerate() {
            for (o, a) in z.iter_mut().zip(q.col(n + 1 + l)) {
                *o = a.mul_add(vl, *o);
            }
        }
        for (o, a) in q.col_mut(n).iter_mut().zip(&z) {
            *o = (-tau).mul_add(*a, *o);
        }
        for (l, &vl) in vt.iter().enumerate() {
            let tv = tau * vl;
            for (o, a) in q.col_mut(n + 1 + l).iter_mut().zip(&z) {
                *o = (-tv).mul_add(*a, *o);
            }
        }
        for k in 0..nrhs {
            apply_left(vt, tau, &mut d.col_mut(k)[n..m]);
        }
        w[n] = beta;
        w[n + 1..].fill(T::ZERO);
        n
    } else {
        m.saturating_sub(1)
    };
    // Rotations on planes (i, i+1), i = top−1 down to 0, zeroing w(i+1) against w(i).
    // Row i of R is nonzero from column i (row i+1 got fill at column i only now), so
    // the rotation acts on columns i..n, and not at all when i ≥ n.
    for i in (0..top).rev() {
        let (c, s, rho) = givens(w[i], w[i + 1]);
        w[i] = rho;
        w[i + 1] = T::ZERO;
        rot_rows(&mut r, i, i + 1, c, s, i.min(n)..n);
        let (x, y) = q.two_cols_mut(i, i + 1);
        rot(c, s, x, y);
        rot_rows(&mut d, i, i + 1, c, s, 0..nrhs);
    }
    // H = R + w(0) e₀ vᵀ stays upper Hessenberg.
    for (j, &vj) in v.iter().enumerate() {
        r[(0, j)] = w[0].mul_add(vj, r[(0, j)]);
    }
    // Stage B: zero H(i+1, i) against H(i, i).
    for i in 0..n.min(m.saturating_sub(1)) {
        let (c, s, rho) = givens(r[(i, i)], r[(i + 1, i)]);
        r[(i, i)] = rho;
        r[(i + 1, i)] = T::ZERO;
        rot_rows(&mut r, i, i + 1, c, s, i + 1..n);
        let (x, y) = q.two_cols_mut(i, i + 1);
        rot(c, s, x, y);
        rot_rows(&mut d, i, i + 1, c, s, 0..nrhs);
    }
    let next = CpuQr {
        dims: st.dims,
        r,
        d,
        q: Some(q),
        params: st.params,
        rank_tol: st.rank_tol,
    };
    next.check_rank()?;
    *st = next;
    Ok(())
}

/// Rotates rows (i, k) of `a` over the columns `cols` (x ← c·x + s·y, y ← −s·x + c·y).
fn rot_rows<T: Scalar>(
    a: &mut Mat<T>,
    i: usize,
    k: usize,
    c: T,
    s: T,
    cols: core::ops::Range<usize>,
) {
    for j in cols {
        let (mut x, mut y) = (a[(i, j)], a[(k, j)]);
        rot_pair(c, s, &mut x, &mut y);
        a[(i, j)] = x;
        a[(k, j)] = y;
    }
}

/// Replaces A by A + u vᵀ on the device (spec §1.11; docs/design.md): w = Qᵀu by
/// cuBLAS GEMV, then stages A and B on copies of R, Q and d (`params.givens`: two-phase,
/// or the seed wavefront), the rank check, and the swap. R keeps exact zeros below its
/// diagonal.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    u: &[T],
    v: &[T],
) -> Result<()> {
    use crate::gpu::{givens_two_phase as tp, givens_wavefront as wf, DevVec, Op};
    use crate::params::Givens;
    let Plan { m, n, .. } = plan(st.dims, u, v)?;
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
    let (r, q, d) = st.guarded(|| {
        let gpu = &*st.gpu;
        let ud = DevVec::from_slice_async(gpu, u)?;
        let vd = DevVec::from_slice_async(gpu, v)?;
        let mut w = DevVec::zeros(gpu, m)?;
        gpu.stage_mark("upload");
        gpu.gemv(
            Op::T,
            T::ONE,
            &q_old.view(),
            &ud.view(),
            T::ZERO,
            &mut w.view_mut(),
        )?;
        gpu.stage_mark("w = Q^T u");
        let mut q = tp::dup(gpu, q_old)?;
        let mut r = tp::dup(gpu, &st.r)?;
        let mut d = tp::dup(gpu, &st.d)?;
        gpu.stage_mark("copies");
        match st.params.givens {
            Givens::Wavefront => {
                wf::rank_one_rotate_wavefront(gpu, &w, &vd, &mut r, &mut q, &mut d)?
            }
            Givens::TwoPhase => {
                tp::rank_one_rotate_two_phase(gpu, &mut w, &vd, &mut r, &mut q, &mut d)?
            }
        }
        tp::check_rank(gpu, &r, n, st.rank_tol)?;
        Ok((r, q, d))
    })?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::update::insert_cols::testkit::*;

    /// A + u vᵀ.
    fn updated<T: Scalar>(a: &Mat<T>, u: &[T], v: &[T]) -> Mat<T> {
        Mat::from_fn(a.nrows(), a.ncols(), |i, j| u[i].mul_add(v[j], a[(i, j)]))
    }

    fn case<T: Scalar>(seed: u64, m: usize, n: usize) {
        let mut g = rng(seed);
        let a = rand_mat::<T>(&mut g, m, n);
        let b = rand_mat::<T>(&mut g, m, 2);
        let u = rand_vec::<T>(&mut g, m);
        let v = rand_vec::<T>(&mut g, n);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        st.rank_one(&u, &v).unwrap();
        let at = updated(&a, &u, &v);
        check_properties(&st, &at, &b, m);
        check_against_refactor(&st, &at, &b, m);
    }

    fn sweep<T: Scalar>() {
        // m = n (A1, no Householder), m = n + 1 (A1), m > n + 1 (A2).
        for &(m, n) in &[
            (1, 1),
            (2, 1),
            (2, 2),
            (3, 1),
            (3, 2),
            (3, 3),
            (31, 31),
            (32, 31),
            (33, 7),
            (127, 33),
            (257, 127),
        ] {
            case::<T>((m * 1000 + n) as u64, m, n);
        }
    }

    #[test]
    fn matches_refactorisation_f64() {
        sweep::<f64>();
    }

    #[test]
    fn matches_refactorisation_f32() {
        sweep::<f32>();
    }

    #[test]
    fn repeated_updates_stay_accurate() {
        let (m, n) = (61, 29);
        let mut g = rng(77);
        let mut a = rand_mat::<f64>(&mut g, m, n);
        let b = rand_mat::<f64>(&mut g, m, 1);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        for _ in 0..5 {
            let u = rand_vec::<f64>(&mut g, m);
            let v = rand_vec::<f64>(&mut g, n);
            st.rank_one(&u, &v).unwrap();
            a = updated(&a, &u, &v);
        }
        // Five updates: the error may add up, at most 5 × the per-update target.
        check_properties(&st, &a, &b, 5 * m);
    }

    #[test]
    fn plan_rejects_bad_arguments() {
        let dims = Dims {
            m: 10,
            n: 4,
            q: 1,
            policy: QPolicy::Full,
        };
        let u = rand_vec::<f64>(&mut rng(5), 10);
        let v = rand_vec::<f64>(&mut rng(6), 4);
        assert_eq!(
            plan(dims, &u, &v).unwrap(),
            Plan {
                m: 10,
                n: 4,
                householder_first: true
            }
        );
        assert!(matches!(
            plan(dims, &u[..9], &v),
            Err(Error::Shape {
                got: 9,
                expected: 10,
                ..
            })
        ));
        assert!(matches!(
            plan(dims, &u, &v[..3]),
            Err(Error::Shape {
                got: 3,
                expected: 4,
                ..
            })
        ));
        let mut bad = v.clone();
        bad[2] = f64::INFINITY;
        assert!(matches!(
            plan(dims, &u, &bad),
            Err(Error::NonFinite {
                what: "v",
                row: 2,
                ..
            })
        ));
        let mut badu = u.clone();
        badu[9] = f64::NAN;
        assert!(matches!(
            plan(dims, &badu, &v),
            Err(Error::NonFinite {
                what: "u",
                row: 9,
                ..
            })
        ));
        let qless = Dims {
            policy: QPolicy::None,
            ..dims
        };
        assert!(matches!(plan(qless, &u, &v), Err(Error::NeedsQ { .. })));
        let square = Dims { m: 5, n: 4, ..dims };
        assert!(!plan(square, &u[..5], &v).unwrap().householder_first);
    }

    #[test]
    fn qless_state_is_refused_and_unchanged() {
        let mut g = rng(91);
        let a = rand_mat::<f64>(&mut g, 33, 7);
        let b = rand_mat::<f64>(&mut g, 33, 1);
        let (u, v) = (rand_vec::<f64>(&mut g, 33), rand_vec::<f64>(&mut g, 7));
        let mut st = factor(&a, &b, QPolicy::None).unwrap();
        let snap = st.clone();
        assert!(matches!(st.rank_one(&u, &v), Err(Error::NeedsQ { .. })));
        assert!(same_state(&st, &snap));
    }

    fn zero_column_case<T: Scalar>(seed: u64, m: usize, n: usize, j: usize) {
        // u = −A(:, j), v = e_j: A + u vᵀ has a zero column j.
        let mut g = rng(seed);
        let a = rand_mat::<T>(&mut g, m, n);
        let b = rand_mat::<T>(&mut g, m, 1);
        let u: Vec<T> = a.col(j).iter().map(|&x| -x).collect();
        let v: Vec<T> = (0..n)
            .map(|k| if k == j { T::ONE } else { T::ZERO })
            .collect();
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        let snap = st.clone();
        let err = st.rank_one(&u, &v).unwrap_err();
        assert!(
            matches!(err, Error::RankDeficient { column, .. } if column == j),
            "{err}"
        );
        assert!(same_state(&st, &snap));
    }

    #[test]
    fn cancelled_column_is_rank_deficient_and_unchanged() {
        for (m, n, j) in [(31, 9, 0), (33, 33, 16), (32, 31, 30)] {
            zero_column_case::<f64>(m as u64 + j as u64, m, n, j);
            zero_column_case::<f32>(m as u64 + j as u64, m, n, j);
        }
    }
}
