//! The CPU path: validation, then the thin and R-only bodies (`cpu/reduced.rs`) or the
//! full kind's (`cpu/delete_cols.rs`).
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Deletes columns k0..k0+p of A, updating R (m×(n−p)), d and, when held, Q
/// (docs/algorithms.md#column-deletion). R's strictly lower part stays exactly 0.
///
/// # Errors
/// The errors of `plan`; [`Error::InvalidParam`] for a block size of 0 in the state's
/// params; [`Error::RankDeficient`] if the updated R fails the state's rank test. On
/// any error the state is unchanged (the result is computed in new buffers first).
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
/// let a = Mat::<f64>::from_fn(7, 4, |i, j| ((2 * i + 3 * j) % 5) as f64 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(7, 1, |i, _| i as f64);
/// let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::None, FactorParams::default()).unwrap();
/// st.delete_cols(1, 2).unwrap();
/// assert_eq!((st.nrows(), st.ncols()), (7, 2));
/// ```
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, p: usize) -> Result<()> {
    let plan = plan(st.dims, k0, p)?;
    if st.dims.policy != QPolicy::Full {
        return crate::cpu::reduced::delete_cols(st.factors_mut(), k0, p);
    }
    let nb = resolve_block_size(OP, st.params.block_size, plan.n_new - k0)?;
    crate::cpu::delete_cols::delete_cols_full(st.factors_mut(), k0, p, nb)
}
