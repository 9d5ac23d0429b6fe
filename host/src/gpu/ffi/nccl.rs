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

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use cudarc::nccl::result::{self as nccl, NcclError};
use cudarc::nccl::{sys, NcclType};

/// An NCCL communicator (`ncclComm_t`) that another library made and owns — PyTorch's
/// `ProcessGroupNCCL` (`_comm_ptr()`), or any code holding one — for
/// [`crate::distributed::RankComm::from_nccl`]. Making one is the promise that makes it
/// usable, hence `unsafe`.
#[derive(Debug)]
pub struct ForeignNccl(*mut core::ffi::c_void);

impl ForeignNccl {
    /// Wraps the communicator at `comm`.
    ///
    /// # Safety
    /// `comm` is a live `ncclComm_t` of the NCCL library that this process loads (the same
    /// shared object as its owner's), and it stays alive, undestroyed and unaborted, for as
    /// long as any [`crate::distributed::RankComm`] made from it or any state factorised in
    /// that `RankComm` exists; its owner issues no collective on it while cuqr's are in
    /// flight (synchronise the owner's stream before handing it over and before using it
    /// again).
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(ptr: usize) -> cuqr::Result<()> {
    /// use std::sync::Arc;
    /// use cuqr::distributed::{ForeignNccl, RankComm};
    /// let gpu = Arc::new(cuqr::Gpu::new(0)?);
    /// // SAFETY: `ptr` is torch's live communicator for this rank, and torch's stream is idle.
    /// let comm = RankComm::from_nccl(&gpu, unsafe { ForeignNccl::new(ptr as *mut _) })?;
    /// # Ok(()) }
    /// ```
    pub unsafe fn new(comm: *mut core::ffi::c_void) -> Self {
        Self(comm)
    }
}

/// A communicator that another library made and owns, with the stream cuqr issues its
/// collectives on; never destroyed here.
#[derive(Debug)]
pub(crate) struct ForeignComm {
    comm: sys::ncclComm_t,
    stream: Arc<CudaStream>,
    rank: usize,
    world: usize,
    device: usize,
}

impl ForeignComm {
    /// Wraps `comm`, reading its rank, size and device from NCCL.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for a null pointer; [`Error::NoDevice`] without the NCCL
    /// library; [`Error::Driver`] if NCCL cannot read the communicator.
    pub(crate) fn new(comm: ForeignNccl, stream: Arc<CudaStream>) -> Result<Self> {
        let comm = comm.0;
        if comm.is_null() {
            return Err(Error::InvalidParam {
                op: "RankComm::from_nccl",
                what: "comm",
                why: "a null communicator".into(),
            });
        }
        probe()?;
        let comm = comm as sys::ncclComm_t;
        let read = |what: &'static str, e: NcclError| {
            Error::Driver(format!("NCCL reading the communicator's {what}: {e:?}").into())
        };
        // SAFETY: ForeignNccl's contract: `comm` is a live communicator of this NCCL library;
        // the three queries only read its fields into local integers.
        let (rank, world, device) = unsafe {
            (
                nccl::comm_user_rank(comm).map_err(|e| read("rank", e))?,
                nccl::comm_count(comm).map_err(|e| read("size", e))?,
                nccl::comm_cu_device(comm).map_err(|e| read("device", e))?,
            )
        };
        let as_index = |v: i32| usize::try_from(v).unwrap_or(usize::MAX);
        Ok(Self {
            comm,
            stream,
            rank: as_index(rank),
            world: as_index(world),
            device: as_index(device),
        })
    }

    /// (rank, ranks, device ordinal) as NCCL reports them.
    pub(crate) fn place(&self) -> (usize, usize, usize) {
        (self.rank, self.world, self.device)
    }

    /// Sums `buf` over every rank, in place.
    pub(crate) fn all_reduce_sum<T: NcclType>(
        &self,
        buf: &mut CudaSlice<T>,
    ) -> core::result::Result<(), NcclError> {
        let len = buf.len();
        let (p, _g) = buf.device_ptr_mut(&self.stream);
        // SAFETY: `p` is `len` elements of T on this communicator's device, alive and
        // exclusively borrowed until the guard records the stream's use; in-place is
        // allowed by NCCL; `comm` is live (ForeignNccl's contract).
        unsafe {
            nccl::all_reduce(
                p as *const _,
                p as *mut _,
                len,
                T::as_nccl_type(),
                sys::ncclRedOp_t::ncclSum,
                self.comm,
                self.stream.cu_stream() as _,
            )
        }
        .map(|_| ())
    }

    /// Copies rank `root`'s `buf` into every rank's `buf`.
    pub(crate) fn broadcast<T: NcclType>(
        &self,
        buf: &mut CudaSlice<T>,
        root: usize,
    ) -> core::result::Result<(), NcclError> {
        let len = buf.len();
        let (p, _g) = buf.device_ptr_mut(&self.stream);
        // SAFETY: as in all_reduce_sum; NCCL broadcasts in place when send and receive
        // buffers are equal.
        unsafe {
            nccl::broadcast(
                p as *const _,
                p as *mut _,
                len,
                T::as_nccl_type(),
                root as i32,
                self.comm,
                self.stream.cu_stream() as _,
            )
        }
        .map(|_| ())
    }

    /// Gathers every rank's `send` into `recv` (ranks × `send.len()`), rank by rank.
    pub(crate) fn all_gather<T: NcclType>(
        &self,
        send: &CudaSlice<T>,
        recv: &mut CudaSlice<T>,
    ) -> core::result::Result<(), NcclError> {
        let len = send.len();
        if recv.len() < len * self.world {
            return Err(NcclError(sys::ncclResult_t::ncclInvalidArgument));
        }
        let (s, _gs) = send.device_ptr(&self.stream);
        let (r, _gr) = recv.device_ptr_mut(&self.stream);
        // SAFETY: `s` holds `len` elements and `r` at least world·len (checked), both on
        // this device and alive until the guards drop; `comm` is live.
        unsafe {
            nccl::all_gather(
                s as *const _,
                r as *mut _,
                len,
                T::as_nccl_type(),
                self.comm,
                self.stream.cu_stream() as _,
            )
        }
        .map(|_| ())
    }

    /// Sends `buf` to rank `peer`.
    pub(crate) fn send<T: NcclType>(
        &self,
        buf: &CudaSlice<T>,
        peer: usize,
    ) -> core::result::Result<(), NcclError> {
        let len = buf.len();
        let (s, _g) = buf.device_ptr(&self.stream);
        // SAFETY: `s` holds `len` elements on this device, alive until the guard drops;
        // `comm` is live.
        unsafe {
            nccl::send(
                s as *const _,
                len,
                T::as_nccl_type(),
                peer as i32,
                self.comm,
                self.stream.cu_stream() as _,
            )
        }
        .map(|_| ())
    }

    /// Receives rank `peer`'s message into `buf`.
    pub(crate) fn recv<T: NcclType>(
        &self,
        buf: &mut CudaSlice<T>,
        peer: usize,
    ) -> core::result::Result<(), NcclError> {
        let len = buf.len();
        let (r, _g) = buf.device_ptr_mut(&self.stream);
        // SAFETY: `r` holds `len` elements on this device, exclusively borrowed until the
        // guard drops; `comm` is live.
        unsafe {
            nccl::recv(
                r as *mut _,
                len,
                T::as_nccl_type(),
                peer as i32,
                self.comm,
                self.stream.cu_stream() as _,
            )
        }
        .map(|_| ())
    }
}
