//! The GPU window step.
#![forbid(unsafe_code)]

use crate::base::error::Result;
use crate::base::mat::MatRef;
use crate::gpu::runtime::GpuScalar;
use crate::state::gpu::GpuQr;

/// One window step on the device (docs/algorithms.md#sliding-window).
///
/// # Errors
/// As [`super::run`].
pub(crate) fn run_gpu<T: GpuScalar>(
    st: &mut GpuQr<T>,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    drop: usize,
) -> Result<()> {
    super::run(st, rows, rhs, drop)
}
