//! Where a rolling or recursive least-squares run goes (docs/algorithms.md#rolling-least-squares):
//! the CPU, or a GPU by the cost model of [`AUTO_GPU_MIN_WORK`].
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex};

use crate::backend::device::Device;
use crate::base::error::Result;
use crate::base::rolling::Layout;
use crate::gpu::algo::rolling::unsupported;
use crate::gpu::runtime::Gpu;

/// Work, nobs · series · k², from which [`Device::Auto`] runs on a GPU. Below it the
/// CPU wins: a GPU walk of few series is one long dependent chain a thread (about 5 µs a
/// step for k = 5, where one CPU core takes about 1 µs), and the data must travel; from
/// a few thousand series on, the GPU walks all of them at once (0.27 ns a series-step at
/// k = 5 on an H200 against about 1 µs a step on one core), which pays for the transfer
/// from about 10⁶ series-steps of k = 5 (docs/performance.md#rolling-least-squares).
pub const AUTO_GPU_MIN_WORK: f64 = 2.5e7;

/// The device a run takes.
pub(super) enum Route {
    /// The CPU, with the reason when another device was asked for.
    Cpu(Option<String>),
    /// A GPU, opened.
    Gpu(Arc<Gpu>),
}

/// GPUs opened by earlier runs, kept for the process: opening one loads the kernel module,
/// which costs far more than a walk.
static OPENED: Mutex<Vec<(usize, Arc<Gpu>)>> = Mutex::new(Vec::new());

/// GPU `ordinal`, opened once per process.
fn open(ordinal: usize) -> Result<Arc<Gpu>> {
    let mut all = OPENED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, g)) = all.iter().find(|(o, _)| *o == ordinal) {
        return Ok(g.clone());
    }
    let g = Arc::new(Gpu::new(ordinal)?);
    all.push((ordinal, g.clone()));
    Ok(g)
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
            None => Ok(Route::Gpu(open(i)?)),
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
            Ok(match open(0) {
                Ok(g) => Route::Gpu(g),
                Err(e) => Route::Cpu(Some(format!("auto: no GPU ({e}); ran on the CPU"))),
            })
        }
    }
}
