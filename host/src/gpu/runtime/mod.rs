//! The GPU runtime: the device context with its streams, library handles and loaded
//! kernel modules ([`Gpu`]), device matrices and vectors ([`DevMat`], [`DevVec`]; leading
//! dimension padded to 128 bytes), page-locked staging, per-device caches and CUDA-event
//! timing. Raw driver calls it needs live in `gpu::ffi::driver`.

pub mod cache;
pub mod device;
pub mod matrix;
pub mod module;
pub mod timing;

pub use device::Gpu;
pub use matrix::{DevMat, DevMatView, DevMatViewMut, DevVec};
pub use module::{KernelSet, Kernels, Sm90KernelSet, Sm90Kernels};

use crate::base::error::Error;
use crate::base::scalar::Scalar;
use cudarc::driver::{DeviceRepr, DriverError, ValidAsZeroBits};

/// Element type of a device buffer, for per-dtype dispatch of kernels,
/// cuBLAS and cuSOLVER.
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
/// cuSOLVER routines (`GpuScalar: Scalar + DeviceRepr`).
/// Sealed: implemented for `f32` and `f64` only, which the dispatch relies on.
pub trait GpuScalar:
    Scalar + DeviceRepr + ValidAsZeroBits + crate::gpu::ffi::driver::Pod + sealed::Sealed
{
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

mod field_sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for crate::base::field::c32 {}
    impl Sealed for crate::base::field::c64 {}
}

/// An element of explicit-factor updates on the GPU (f32, f64, c32, c64): a
/// [`Field`](crate::base::field::Field) whose real type is a [`GpuScalar`]. Device buffers
/// hold its real parts ([`Field::PARTS`](crate::base::field::Field::PARTS) per element,
/// real part first), so a complex m×n matrix is a 2m×n matrix of its real type.
/// Sealed: the four types above.
pub trait GpuField: crate::base::field::Field<Real: GpuScalar> + field_sealed::Sealed {
    /// This type's `rotation_chain_apply` kernel.
    fn rotation_chain_kernel(k: &Kernels) -> &cudarc::driver::CudaFunction;
}

impl GpuField for f32 {
    fn rotation_chain_kernel(k: &Kernels) -> &cudarc::driver::CudaFunction {
        &k.f32.rotation_chain_apply
    }
}
impl GpuField for f64 {
    fn rotation_chain_kernel(k: &Kernels) -> &cudarc::driver::CudaFunction {
        &k.f64.rotation_chain_apply
    }
}
impl GpuField for crate::base::field::c32 {
    fn rotation_chain_kernel(k: &Kernels) -> &cudarc::driver::CudaFunction {
        &k.complex.c32.rotation_chain_apply
    }
}
impl GpuField for crate::base::field::c64 {
    fn rotation_chain_kernel(k: &Kernels) -> &cudarc::driver::CudaFunction {
        &k.complex.c64.rotation_chain_apply
    }
}

/// Maps a driver error to [`Error::Driver`], naming what was being done.
pub(crate) fn driver_err(what: &str) -> impl FnOnce(DriverError) -> Error + '_ {
    move |e| Error::driver(what, e)
}

/// Maps an allocation failure: out-of-memory becomes [`Error::OutOfMemory`],
/// anything else [`Error::Driver`].
pub(crate) fn alloc_err(what: &'static str, bytes: usize) -> impl FnOnce(DriverError) -> Error {
    move |e| {
        if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory { what, bytes }
        } else {
            Error::driver(format!("allocating {what} ({bytes} bytes)"), e)
        }
    }
}
