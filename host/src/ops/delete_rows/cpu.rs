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
        return crate::ops::reduced::delete_rows(st, k0, p, None);
    }
    let Plan { m, n, .. } = plan;
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
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
