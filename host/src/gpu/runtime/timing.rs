//! CUDA-event timing for benchmarks:
//! untimed setup per repetition, warm-up runs, then the median (and spread) of ≥ 5
//! timed runs, each bracketed by events recorded on [`Gpu::stream`]. Work a timed
//! closure queues on other streams must be joined back into [`Gpu::stream`] before
//! it returns. Timing never goes into a test assertion.
// Used by the tests and, through `internals`, by the benchmarks.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::CudaEvent;

use crate::base::error::{Error, Result};
use crate::gpu::runtime::{driver_err, Gpu};

/// The samples of one timed operation, in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Timing {
    /// Every timed repetition, in run order.
    pub samples_ms: Vec<f64>,
}

impl Timing {
    /// Median of the samples (mean of the two middle ones for an even count).
    pub fn median_ms(&self) -> f64 {
        let mut s = self.samples_ms.clone();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        if n == 0 {
            return f64::NAN;
        }
        if n % 2 == 1 {
            s[n / 2]
        } else {
            0.5 * (s[n / 2 - 1] + s[n / 2])
        }
    }

    /// Smallest sample.
    pub fn min_ms(&self) -> f64 {
        self.samples_ms
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min)
    }

    /// Largest sample.
    pub fn max_ms(&self) -> f64 {
        self.samples_ms
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max)
    }
}

/// A pair of timing events on one device.
pub struct EventTimer {
    start: CudaEvent,
    end: CudaEvent,
}

impl EventTimer {
    /// Creates two events with timing enabled.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn new(gpu: &Gpu) -> Result<Self> {
        let mk = || {
            gpu.context()
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(driver_err("creating a timing event"))
        };
        Ok(Self {
            start: mk()?,
            end: mk()?,
        })
    }

    /// Records the start event on [`Gpu::stream`].
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn start(&self, gpu: &Gpu) -> Result<()> {
        self.start
            .record(gpu.stream())
            .map_err(driver_err("recording the start event"))
    }

    /// Records the end event on [`Gpu::stream`], waits for it, and returns the
    /// elapsed milliseconds since [`EventTimer::start`].
    ///
    /// # Errors
    /// [`Error::Driver`], including an asynchronous fault of the timed work.
    pub fn stop(&self, gpu: &Gpu) -> Result<f64> {
        self.end
            .record(gpu.stream())
            .map_err(driver_err("recording the end event"))?;
        let ms = self
            .start
            .elapsed_ms(&self.end)
            .map_err(driver_err("reading the event timer"))?;
        Ok(ms as f64)
    }
}

/// Times `run` on fresh state from `setup`: `warmup` untimed runs, then `reps`
/// timed runs (`reps` ≥ 5 required), each preceded by an untimed `setup` (e.g.
/// a fresh device copy of an input the operation overwrites) and a device
/// synchronisation.
///
/// # Errors
/// [`Error::InvalidParam`] if `reps` < 5; any error of `setup`, `run` or the
/// events.
pub fn time_with_setup<S>(
    gpu: &Gpu,
    warmup: usize,
    reps: usize,
    mut setup: impl FnMut() -> Result<S>,
    mut run: impl FnMut(S) -> Result<()>,
) -> Result<Timing> {
    if reps < 5 {
        return Err(Error::InvalidParam {
            op: "time_with_setup",
            what: "reps",
            why: format!("{reps} < 5: a median needs at least 5 samples"),
        });
    }
    let t = EventTimer::new(gpu)?;
    for _ in 0..warmup {
        let s = setup()?;
        gpu.synchronize()?;
        run(s)?;
    }
    gpu.synchronize()?;
    let mut samples_ms = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = setup()?;
        gpu.synchronize()?;
        t.start(gpu)?;
        run(s)?;
        samples_ms.push(t.stop(gpu)?);
    }
    Ok(Timing { samples_ms })
}

/// [`time_with_setup`] without per-run state.
///
/// # Errors
/// As [`time_with_setup`].
pub fn time_median(
    gpu: &Gpu,
    warmup: usize,
    reps: usize,
    mut run: impl FnMut() -> Result<()>,
) -> Result<Timing> {
    time_with_setup(gpu, warmup, reps, || Ok(()), |()| run())
}

/// CUDA-event pairs around the phases of one operation, recorded on [`Gpu::stream`]
/// (the phase splits of the benchmarks): `N` phases, each summed over every time it
/// ran, with the flops the caller counts to each. Work timed this way must run on the
/// main stream (a profiled factorisation has no look-ahead), or the pairs would not
/// bracket it.
pub(crate) struct PhaseClock<const N: usize> {
    pairs: [Vec<(CudaEvent, CudaEvent)>; N],
    flops: [f64; N],
}

impl<const N: usize> PhaseClock<N> {
    /// A clock with no phase recorded yet.
    pub(crate) fn new() -> Self {
        Self {
            pairs: core::array::from_fn(|_| Vec::new()),
            flops: [0.0; N],
        }
    }

    /// Counts `flops` to `phase` (nothing without a clock).
    pub(crate) fn add_flops(clock: Option<&mut Self>, phase: usize, flops: f64) {
        if let Some(c) = clock {
            c.flops[phase] += flops;
        }
    }

    /// The flops counted to each phase.
    pub(crate) fn flops(&self) -> [f64; N] {
        self.flops
    }

    fn mark(gpu: &Gpu) -> Result<CudaEvent> {
        gpu.stream()
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_err("recording a phase event"))
    }

    /// Runs `f`; with a clock, between two events counted to `phase` (< N).
    ///
    /// # Errors
    /// `f`'s error, or [`Error::Driver`] for an event.
    pub(crate) fn time<R>(
        clock: Option<&mut Self>,
        gpu: &Gpu,
        phase: usize,
        f: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let Some(c) = clock else { return f() };
        let start = Self::mark(gpu)?;
        let out = f()?;
        c.pairs[phase].push((start, Self::mark(gpu)?));
        Ok(out)
    }

    /// The milliseconds of each phase (waits for the last event).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub(crate) fn totals_ms(&self) -> Result<[f64; N]> {
        let mut out = [0.0; N];
        for (o, pairs) in out.iter_mut().zip(&self.pairs) {
            for (a, b) in pairs {
                *o += f64::from(
                    a.elapsed_ms(b)
                        .map_err(driver_err("reading a phase event"))?,
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        let t = Timing {
            samples_ms: vec![5.0, 1.0, 3.0, 9.0, 2.0],
        };
        assert_eq!(t.median_ms(), 3.0);
        assert_eq!(t.min_ms(), 1.0);
        assert_eq!(t.max_ms(), 9.0);
        let t = Timing {
            samples_ms: vec![4.0, 1.0, 3.0, 2.0, 8.0, 6.0],
        };
        assert_eq!(t.median_ms(), 3.5);
    }
}
