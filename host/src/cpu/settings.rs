//! The CPU backend's thread count: every faer call (factorisation, products, block
//! reflectors) and every blocked rotation pass runs on this many threads of rayon's
//! global pool. `0` (the default) means all cores.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

/// The requested thread count; 0 = all cores.
static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Sets the number of threads the CPU backend uses from now on (all threads of the
/// process); `0` restores the default, all cores.
///
/// # Examples
/// ```
/// cuqr::cpu::set_threads(1);
/// assert_eq!(cuqr::cpu::threads(), 1);
/// cuqr::cpu::set_threads(0);
/// assert!(cuqr::cpu::threads() >= 1);
/// ```
pub fn set_threads(n: usize) {
    THREADS.store(n, Ordering::Relaxed);
}

/// The number of threads the CPU backend uses: the value of [`set_threads`], or the
/// number of cores when none was set.
pub fn threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// faer's parallelism for [`threads`]: sequential for one thread.
pub(crate) fn par() -> faer::Par {
    match threads() {
        1 => faer::Par::Seq,
        n => faer::Par::rayon(n),
    }
}

/// Work (in flops) below which a call stays on the calling thread: waking the pool
/// costs more than it saves there (measured on two cores: a 2000×200 GEMV went from
/// 0.2 ms to several ms when handed to a busy second core).
pub(crate) const PARALLEL_MIN_FLOPS: f64 = 4.0e6;

/// [`par`] for a call of `flops` work: sequential below [`PARALLEL_MIN_FLOPS`].
pub(crate) fn par_for(flops: f64) -> faer::Par {
    if flops < PARALLEL_MIN_FLOPS {
        faer::Par::Seq
    } else {
        par()
    }
}
