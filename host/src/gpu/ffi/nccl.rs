//! The NCCL library probe: whether `libnccl` can be loaded before any communicator is made
//! (cudarc's dynamically loaded NCCL panics on a missing library; the distributed state
//! asks first and reports [`Error::NoDevice`]).

use crate::base::error::{Error, Result};

/// [`Error::NoDevice`] unless the NCCL library can be loaded.
///
/// # Errors
/// [`Error::NoDevice`] with the library's name and the variable to check.
pub(crate) fn probe() -> Result<()> {
    // SAFETY: `is_culib_present` only tries `dlopen` on NCCL's candidate library names and
    // drops what it opened; it has no preconditions and touches no CUDA state.
    let present = unsafe { cudarc::nccl::sys::is_culib_present() };
    if present {
        Ok(())
    } else {
        Err(Error::NoDevice(
            "the NCCL library (libnccl.so) cannot be loaded; check LD_LIBRARY_PATH".into(),
        ))
    }
}
