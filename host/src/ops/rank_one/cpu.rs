//! The CPU path: validation, then the thin and R-only bodies (`cpu/reduced.rs`) or the
//! full kind's (`cpu/rank_one.rs`).
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Replaces A by A + u vᵀ, updating R, d and Q (docs/algorithms.md#rank-one-update). Works
/// on new buffers and swaps them in only after the rank check.
///
/// # Errors
/// Those of `plan` (above), and [`Error::RankDeficient`] when A + u vᵀ is numerically rank
/// deficient (e.g. the update cancels a column). On error the state is unchanged.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, u: &[T], v: &[T]) -> Result<()> {
    let Plan {
        householder_first, ..
    } = plan(st.dims, u, v)?;
    if st.dims.policy != QPolicy::Full {
        return crate::cpu::reduced::rank_one(st.factors_mut(), u, v);
    }
    if st.q.is_none() {
        return Err(Error::NeedsQ {
            op: OP,
            policy: st.dims.policy,
        });
    }
    crate::cpu::rank_one::rank_one_full(st.factors_mut(), u, v, householder_first)
}
