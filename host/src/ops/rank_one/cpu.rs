//! The CPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::base::dims::check_rank_of;
use crate::cpu::dense::{gemm_add, product, view, view_mut};
use crate::cpu::reference;
use crate::cpu::rotations::ColumnTransforms;

/// Replaces A by A + u vᵀ, updating R, d and Q serially (docs/algorithms.md#rank-one-update). Works
/// on new buffers and swaps them in only after the rank check.
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
    if st.dims.policy != QPolicy::Full {
        return crate::ops::reduced::rank_one(st, u, v);
    }
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
    // The blocked path: products on faer, Q's reflector and rotations recorded and
    // applied to Q in place once R has passed the rank test (nothing can fail after it),
    // the rotations in row blocks (docs/algorithms.md#blocked-column-transformations).
    // The reference works on a copy of Q.
    let fast = !reference::active();
    let mut q = if fast {
        Mat::zeros(0, 0)
    } else {
        q_old.clone()
    };
    let (mut r, mut d) = (st.r.clone(), st.d.clone());
    let nrhs = d.ncols();
    let mut steps = ColumnTransforms::new();
    let mut reflector = None;
    // w = Qᵀu.
    let mut w: Vec<T> = if fast {
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

    // Stage A. Variant A2: H on w(n:m); rows n..m of R are zero, so R is untouched.
    let top = if householder_first {
        let (beta, tau) = {
            let (head, tail) = w[n..].split_first_mut().expect("m > n");
            house(*head, tail)
        };
        let vt = &w[n + 1..];
        if fast {
            let mut v = vec![T::ONE];
            v.extend_from_slice(vt);
            reflector = Some((v, tau));
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
        if fast {
            steps.rotate(i, i + 1, c, s);
        } else {
            let (x, y) = q.two_cols_mut(i, i + 1);
            rot(c, s, x, y);
        }
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
        if fast {
            steps.rotate(i, i + 1, c, s);
        } else {
            let (x, y) = q.two_cols_mut(i, i + 1);
            rot(c, s, x, y);
        }
        rot_rows(&mut d, i, i + 1, c, s, 0..nrhs);
    }
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
        st.r = r;
        st.d = d;
        return Ok(());
    }
    let next = CpuQr {
        dims: st.dims,
        r,
        d,
        q: Some(q),
        rho: Vec::new(),
        data: None,
        params: st.params,
        rank_tol: st.rank_tol,
        drift: st.drift,
    };
    next.check_rank()?;
    *st = next;
    Ok(())
}

/// Rotates rows (i, k) of `a` over the columns `cols` (x ← c·x + s·y, y ← −s·x + c·y).
pub(super) fn rot_rows<T: Scalar>(
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
