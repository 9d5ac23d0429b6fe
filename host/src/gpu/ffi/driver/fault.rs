//! Fault injection for tests (feature `fault-injection`): makes the Nth device
//! allocation, the Nth cuBLAS/cuSOLVER call or the Nth kernel launch from now fail, as a
//! full device, a failed library call or a refused launch would. Every allocation,
//! library status and launch of the library passes one of the hooks below; without the
//! feature they compile to nothing.
//!
//! The injected errors are the recoverable kinds (out of memory, a library's execution
//! failure, a launch out of resources): the context stays usable, so a test can check
//! that the state is unchanged and that the next call works (docs/reliability.md).
//!
//! The armed fault is process-wide: one test at a time may arm it.

#[cfg(feature = "fault-injection")]
mod armed {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;

    use super::{FaultCounts, FaultPoint};

    /// Fast path: false while nothing is armed or counted.
    static ACTIVE: AtomicBool = AtomicBool::new(false);

    struct Plan {
        /// The point and the 0-based ordinal that fails; `None` only counts.
        fail: Option<(FaultPoint, u64)>,
        counts: FaultCounts,
        fired: bool,
    }

    static PLAN: Mutex<Option<Plan>> = Mutex::new(None);

    fn lock() -> std::sync::MutexGuard<'static, Option<Plan>> {
        PLAN.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn start(fail: Option<(FaultPoint, u64)>) {
        *lock() = Some(Plan {
            fail,
            counts: FaultCounts::default(),
            fired: false,
        });
        ACTIVE.store(true, Ordering::SeqCst);
    }

    pub(super) fn stop() -> (FaultCounts, bool) {
        ACTIVE.store(false, Ordering::SeqCst);
        lock()
            .take()
            .map_or((FaultCounts::default(), false), |p| (p.counts, p.fired))
    }

    /// Counts one event at `point`; true when it is the one that must fail.
    pub(super) fn hit(point: FaultPoint) -> bool {
        if !ACTIVE.load(Ordering::Relaxed) {
            return false;
        }
        let mut guard = lock();
        let Some(plan) = guard.as_mut() else {
            return false;
        };
        let slot = match point {
            FaultPoint::Alloc => &mut plan.counts.alloc,
            FaultPoint::Library => &mut plan.counts.library,
            FaultPoint::Launch => &mut plan.counts.launch,
        };
        let ordinal = *slot;
        *slot += 1;
        let fails = plan.fail == Some((point, ordinal));
        plan.fired |= fails;
        fails
    }
}

/// Where a fault can be injected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// A device (or pinned host) allocation: fails with `CUDA_ERROR_OUT_OF_MEMORY`.
    Alloc,
    /// A cuBLAS or cuSOLVER call: its status becomes `*_STATUS_EXECUTION_FAILED`.
    /// The call itself has run (its outputs may be written), so the fault comes as
    /// late as a real one can.
    Library,
    /// A kernel launch: fails with `CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES` and the
    /// kernel does not run.
    Launch,
}

/// How many events of each point passed the hooks since `arm` or `count`.
#[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Allocations.
    pub alloc: u64,
    /// cuBLAS and cuSOLVER calls.
    pub library: u64,
    /// Kernel launches.
    pub launch: u64,
}

#[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
impl FaultCounts {
    /// The count of `point`.
    pub fn of(&self, point: FaultPoint) -> u64 {
        match point {
            FaultPoint::Alloc => self.alloc,
            FaultPoint::Library => self.library,
            FaultPoint::Launch => self.launch,
        }
    }
}

/// Makes the `nth` (0-based) event at `point` from now fail, once, and counts every
/// event until [`disarm`].
#[cfg(feature = "fault-injection")]
pub fn arm(point: FaultPoint, nth: u64) {
    armed::start(Some((point, nth)));
}

/// Counts the events at every point from now, failing none, until [`disarm`].
#[cfg(feature = "fault-injection")]
pub fn count() {
    armed::start(None);
}

/// Stops counting; returns the counts since [`arm`]/[`count`] and whether the armed
/// fault fired.
#[cfg(feature = "fault-injection")]
pub fn disarm() -> (FaultCounts, bool) {
    armed::stop()
}

#[cfg(feature = "fault-injection")]
fn fails(point: FaultPoint) -> bool {
    armed::hit(point)
}

#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
fn fails(_point: FaultPoint) -> bool {
    false
}

/// The allocation hook: `Err(CUDA_ERROR_OUT_OF_MEMORY)` when an injected fault is due.
#[inline]
pub(crate) fn alloc() -> Result<(), cudarc::driver::DriverError> {
    if fails(FaultPoint::Alloc) {
        return Err(cudarc::driver::DriverError(
            cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        ));
    }
    Ok(())
}

/// The launch hook: `Err(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)` when an injected fault is
/// due (call it before the launch).
#[inline]
pub(crate) fn launch() -> Result<(), cudarc::driver::DriverError> {
    if fails(FaultPoint::Launch) {
        return Err(cudarc::driver::DriverError(
            cudarc::driver::sys::CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        ));
    }
    Ok(())
}

/// The cuBLAS status hook: the status the caller sees.
#[inline]
pub(crate) fn cublas(
    s: cudarc::cublas::sys::cublasStatus_t,
) -> cudarc::cublas::sys::cublasStatus_t {
    if fails(FaultPoint::Library) {
        return cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_EXECUTION_FAILED;
    }
    s
}

/// The cuSOLVER status hook: the status the caller sees.
#[inline]
pub(crate) fn cusolver(
    s: cudarc::cusolver::sys::cusolverStatus_t,
) -> cudarc::cusolver::sys::cusolverStatus_t {
    if fails(FaultPoint::Library) {
        return cudarc::cusolver::sys::cusolverStatus_t::CUSOLVER_STATUS_EXECUTION_FAILED;
    }
    s
}
