//! The GPU layer (architecture.md "Layout", style §2.1–§2.4): the cudarc
//! context, streams and library handles ([`Gpu`]), the embedded PTX with one
//! typed launcher per kernel (docs/kernels.md), device matrices ([`DevMat`],
//! ld padded to 128 bytes, spec §1.6), cuBLAS wrappers and the cuSOLVER
//! baseline (spec §3.9). All `unsafe` of the host crate lives in this module.

pub mod blas;
pub mod device;
pub mod givens_two_phase;
/// Seed Wavefront Givens stages (docs/design.md); public only for tests/gpu_wavefront.rs.
#[doc(hidden)]
pub mod givens_wavefront;
pub mod householder;
pub mod irs;
pub mod kernels;
mod kernels_convert;
pub(crate) mod kernels_fused;
pub mod kernels_lu;
pub mod kernels_panel;
pub(crate) mod kernels_row_insert;
pub mod kernels_sm90;
pub(crate) mod kernels_small_panel;
pub(crate) mod kernels_ts_gemm;
pub(crate) mod kernels_tsqr;
pub mod kernels_two_phase;
mod kernels_wavefront;
pub mod matrix;
pub mod qr;
pub mod solver;
pub mod timing;

pub use blas::{Diag, Op, Side, Uplo};
pub use device::Gpu;
pub use householder::QrPhaseTimes;
pub use kernels::{KernelSet, Kernels, KERNELS, PTX};
pub use kernels_sm90::{Sm90KernelSet, Sm90Kernels, PTX_SM90, SM90_KERNELS};
pub use matrix::{DevMat, DevMatView, DevMatViewMut, DevVec};
pub use qr::GpuQr;

/// Re-exported cudarc types that appear in the GPU layer's signatures.
pub use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, PinnedHostSlice};

use crate::error::Error;
use crate::scalar::Scalar;
use cudarc::driver::{DeviceRepr, DriverError, ValidAsZeroBits};

/// Element type of a device buffer, for per-dtype dispatch of kernels,
/// cuBLAS and cuSOLVER (style §2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// `f32`: `*_f32` kernels, `cublasS*`, `cusolverDnS*`.
    F32,
    /// `f64`: `*_f64` kernels, `cublasD*`, `cusolverDnD*`.
    F64,
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// A [`Scalar`] that can live in device memory and has kernels, cuBLAS and
/// cuSOLVER routines (style §2.1: `GpuScalar: Scalar + DeviceRepr`).
/// Sealed: implemented for `f32` and `f64` only, which the dispatch relies on.
pub trait GpuScalar: Scalar + DeviceRepr + ValidAsZeroBits + sealed::Sealed {
    /// The dtype tag used for dispatch.
    const DTYPE: Dtype;
    /// This dtype's kernels out of the per-device table.
    fn kernel_set(k: &Kernels) -> &KernelSet;
    /// This precision's half of the sm_90 kernels.
    fn sm90_set(k: &Sm90Kernels) -> &Sm90KernelSet;
}

impl GpuScalar for f32 {
    const DTYPE: Dtype = Dtype::F32;
    fn kernel_set(k: &Kernels) -> &KernelSet {
        &k.f32
    }
    fn sm90_set(k: &Sm90Kernels) -> &Sm90KernelSet {
        &k.f32
    }
}

impl GpuScalar for f64 {
    const DTYPE: Dtype = Dtype::F64;
    fn kernel_set(k: &Kernels) -> &KernelSet {
        &k.f64
    }
    fn sm90_set(k: &Sm90Kernels) -> &Sm90KernelSet {
        &k.f64
    }
}

/// Maps a driver error to [`Error::Driver`], naming what was being done.
pub(crate) fn driver_err(what: &str) -> impl FnOnce(DriverError) -> Error + '_ {
    move |e| Error::Driver(format!("{what}: {e}"))
}

/// Maps an allocation failure: out-of-memory becomes [`Error::OutOfMemory`],
/// anything else [`Error::Driver`].
pub(crate) fn alloc_err(what: &'static str, bytes: usize) -> impl FnOnce(DriverError) -> Error {
    move |e| {
        if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory { what, bytes }
        } else {
            Error::Driver(format!("allocating {what} ({bytes} bytes): {e}"))
        }
    }
}
