//! [`Meter`]: how the kernel cases are timed and reported (`cuqr bench kernels` prints
//! them, `benches/kernels.rs` hands them to criterion).

use super::cases::Case;

/// Times and reports the cases.
pub trait Meter {
    /// Times `run` on the value of an untimed `setup` made before each run (the value
    /// lives until the next setup, so that freeing it is not timed) and reports the
    /// time as `case`.
    ///
    /// # Errors
    /// Those of `setup`, `run` or the timing.
    fn measure<S>(
        &mut self,
        case: Case,
        setup: impl FnMut() -> cuqr::Result<S>,
        run: impl FnMut(&mut S) -> cuqr::Result<()>,
    ) -> cuqr::Result<()>;
}
