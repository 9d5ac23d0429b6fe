//! The CPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Deletes rows k0..k0+p of A, producing Q̃ ((m−p)×(m−p)), R̃ and d̃
/// (docs/algorithms.md#row-deletion).
/// Works on new buffers and swaps them in only after the rank check.
///
/// # Errors
/// Those of `plan` (above), and [`Error::RankDeficient`] when the remaining rows are
/// numerically rank deficient. On error the state is unchanged.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, p: usize) -> Result<()> {
    let plan = plan(st.dims, k0, p)?;
    if st.dims.policy != QPolicy::Full {
        return crate::cpu::reduced::delete_rows(st.factors_mut(), k0, p, None);
    }
    let Plan { m, n, .. } = plan;
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
    if !crate::cpu::reference::active() {
        let next = delete_rows_blocked(st, q_old, &plan);
        next.check_rank()?;
        *st = next;
        return Ok(());
    }
    let rot = rotate_out(q_old, &st.r, &st.d, &plan);
    let mp = m - p;
    // Q̃ = Q(rows ∉ block, p:m): rows of the deleted block are [Δ, 0] = [I, 0] and the
    // other rows of Q(:, 0:p) are zero (orthogonality), so both are dropped.
    let q = Mat::from_fn(mp, mp, |i, j| {
        let row = if i < k0 { i } else { i + p };
        rot.q[(row, j + p)]
    });
    // R̃ = (GᵀR)(p:m, :); its strictly lower part is rounding residue: cleared to exact 0.
    let r = Mat::from_fn(
        mp,
        n,
        |i, j| if i > j { T::ZERO } else { rot.r[(i + p, j)] },
    );
    let d = Mat::from_fn(mp, st.dims.q, |i, j| rot.d[(i + p, j)]);
    let next = CpuQr {
        dims: Dims { m: mp, ..st.dims },
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

/// The full-Q row deletion on blocked building blocks: the rotations generated on Q's
/// deleted rows alone, then applied once to Q's kept rows and once to [Rᵀ; dᵀ], in row
/// blocks (docs/algorithms.md#blocked-column-transformations). The same rotations as
/// [`rotate_out`], so the same result up to rounding.
fn delete_rows_blocked<T: Scalar>(st: &CpuQr<T>, q_old: &Mat<T>, plan: &Plan) -> CpuQr<T> {
    use crate::cpu::dense::{view, view_mut};
    let Plan { m, n, p, k0 } = *plan;
    let q = st.dims.q;
    let mut zr = Mat::from_fn(p, m, |i, j| q_old[(k0 + i, j)]);
    let steps = crate::cpu::thin_blocked::downdate_rotations(&mut zr);
    let mut rd = Mat::from_fn(n + q, m, |i, j| {
        if i < n {
            st.r[(j, i)]
        } else {
            st.d[(j, i - n)]
        }
    });
    steps.apply(view_mut(&mut rd));
    let mp = m - p;
    // Q̃ = (Q's kept rows)·G without its first p columns, row range by row range.
    let mut q_new = Mat::<T>::zeros(mp, mp);
    let (top, bottom) = view_mut(&mut q_new).split_at_row_mut(k0);
    steps.apply_into(view(q_old).subrows(0, k0), top, p);
    steps.apply_into(view(q_old).subrows(k0 + p, m - k0 - p), bottom, p);
    CpuQr {
        dims: Dims { m: mp, ..st.dims },
        r: Mat::from_fn(mp, n, |i, j| if i > j { T::ZERO } else { rd[(j, i + p)] }),
        d: Mat::from_fn(mp, q, |i, k| rd[(n + k, i + p)]),
        q: Some(q_new),
        rho: Vec::new(),
        data: None,
        params: st.params,
        rank_tol: st.rank_tol,
        drift: st.drift,
    }
}
