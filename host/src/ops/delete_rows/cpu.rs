//! The CPU path: validation, then the thin and R-only bodies (`cpu/reduced.rs`) or the
//! full kind's (`cpu/delete_rows.rs`).
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Deletes rows k0..k0+p of A, producing Q̃ ((m−p)×(m−p)), R̃ and d̃
/// (docs/algorithms.md#row-deletion).
/// R̃ and d̃ are built and pass the rank test before Q changes (in its own buffer,
/// docs/algorithms.md#factors-in-place).
///
/// # Errors
/// Those of `plan` (above), and [`Error::RankDeficient`] when the remaining rows are
/// numerically rank deficient. On error the state is unchanged.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, p: usize) -> Result<()> {
    let plan = plan(st.dims, k0, p)?;
    if st.dims.policy != QPolicy::Full {
        return crate::cpu::reduced::delete_rows(st.factors_mut(), k0, p, None);
    }
    if st.q.is_none() {
        return Err(Error::NeedsQ {
            op: OP,
            policy: st.dims.policy,
        });
    }
    crate::cpu::delete_rows::delete_rows_full(st.factors_mut(), plan.k0, plan.p)
}
