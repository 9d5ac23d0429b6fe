//! The CPU path: validation, then the thin and R-only bodies (`cpu/reduced.rs`) or the
//! full kind's (`cpu/insert_rows.rs`).
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Inserts the rows `u` (p×n) and right-hand-side rows `e` (p×q) so that they become rows
/// k0..k0+p of Ã and b̃ (docs/algorithms.md#row-insertion). Afterwards R̃ is (m+p)×n, d̃ = Q̃ᵀb̃
/// (the residual includes the transformed e) and, when held, Q̃ is (m+p)×(m+p) with Q̃R̃ = Ã.
///
/// # Errors
/// The errors of `plan`; [`Error::InvalidParam`] for a block size of 0 in the state's
/// params; [`Error::RankDeficient`] if the updated R fails the state's rank test. On
/// any error the state is unchanged (R and d are built and checked before Q changes).
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
/// let a = Mat::<f64>::from_fn(6, 3, |i, j| ((i + 2 * j) % 4) as f64 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(6, 1, |i, _| i as f64);
/// let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default()).unwrap();
/// st.insert_row(2, &[1.0, -2.0, 0.5], &[3.0]).unwrap();
/// assert_eq!(st.nrows(), 7);
/// ```
pub fn run_cpu<T: Scalar>(
    st: &mut CpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    plan(st.dims, k0, u, e)?;
    if st.dims.policy != QPolicy::Full {
        return crate::cpu::reduced::insert_rows(st.factors_mut(), k0, u, e);
    }
    let nb = resolve_block_size(OP, st.params.block_size, st.dims.n)?;
    crate::cpu::insert_rows::insert_rows_full(st.factors_mut(), k0, u, e, nb)
}
