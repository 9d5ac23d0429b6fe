//! The CPU path: validation, then the thin and R-only bodies (`cpu/reduced.rs`) or the
//! full kind's (`cpu/insert_cols.rs`).
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::cpu::insert_cols::{insert_cols_full, InsertColsParams};

/// Inserts the m×p block `u` as columns k0..k0+p of A, updating R, d and Q serially
/// (docs/algorithms.md#column-insertion). Works on new buffers and swaps them in only after the
/// rank check.
///
/// # Errors
/// Those of `plan` (above), and [`Error::RankDeficient`] when the new matrix is numerically
/// rank deficient (e.g. `u` repeats a column of A). On error the state is unchanged.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, u: MatRef<'_, T>) -> Result<()> {
    let plan = plan(st.dims, k0, u, st.params.block_size)?;
    if st.dims.policy != QPolicy::Full {
        return crate::cpu::reduced::insert_cols(st.factors_mut(), k0, u);
    }
    if st.q.is_none() {
        return Err(Error::NeedsQ {
            op: OP,
            policy: st.dims.policy,
        });
    }
    let Plan { m, n, p, k0, nb } = plan;
    let params = InsertColsParams { m, n, p, k0, nb };
    insert_cols_full(st.factors_mut(), u, &params)
}
