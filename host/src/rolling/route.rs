//! Where a rolling or recursive least-squares run goes (docs/algorithms.md#rolling-least-squares):
//! the CPU, or a GPU by the cost model of [`AUTO_GPU_MIN_WORK`].
#![forbid(unsafe_code)]

use crate::backend::device::Device;
use crate::base::error::Result;
use crate::base::rolling::Layout;
use crate::gpu::algo::rolling::unsupported;
use crate::gpu::runtime::Gpu;

/// Work, nobs · series · k², from which [`Device::Auto`] runs on a GPU. Below it the
/// CPU wins: opening the GPU and moving the data cost more than the walk. The walk does
/// about 10·k² flops a step on either device; the CPU runs about 1 µs a step for k = 5 on
/// one core, the GPU about 5·10⁵ series-steps per millisecond once its data are there,
/// so they break even near 10⁶ steps of k = 5 once the transfer is counted
/// (docs/performance.md#rolling-least-squares).
pub const AUTO_GPU_MIN_WORK: f64 = 2.5e7;

/// The device a run takes.
pub(super) enum Route {
    /// The CPU, with the reason when another device was asked for.
    Cpu(Option<String>),
    /// A GPU, opened.
    Gpu(Gpu),
}

/// Chooses the device for `layout` under `device`.
///
/// # Errors
/// [`Device::Gpu`] whose GPU does not open: as [`Gpu::new`].
pub(super) fn route(device: Device, layout: &Layout) -> Result<Route> {
    let work = layout.nobs as f64 * layout.series as f64 * (layout.k * layout.k) as f64;
    match device {
        Device::Cpu => Ok(Route::Cpu(None)),
        Device::Gpu(i) => match unsupported(layout.k) {
            Some(why) => Ok(Route::Cpu(Some(format!(
                "GPU {i} was asked for, but {why}; ran on the CPU"
            )))),
            None => Ok(Route::Gpu(Gpu::new(i)?)),
        },
        Device::Auto => {
            if work < AUTO_GPU_MIN_WORK {
                return Ok(Route::Cpu(Some(format!(
                    "auto: nobs·series·k² = {work:.3e} is below {AUTO_GPU_MIN_WORK:.1e}, where the CPU is faster; ran on the CPU"
                ))));
            }
            if let Some(why) = unsupported(layout.k) {
                return Ok(Route::Cpu(Some(format!("auto: {why}; ran on the CPU"))));
            }
            Ok(match Gpu::new(0) {
                Ok(g) => Route::Gpu(g),
                Err(e) => Route::Cpu(Some(format!("auto: no GPU ({e}); ran on the CPU"))),
            })
        }
    }
}
