//! What cuqr's own benchmarks and tests reach below the public API (feature `internals`):
//! device matrices and CUDA-event timing, the cuBLAS enums, the cuSOLVER baselines the
//! benchmarks compare with, the Givens schedules and their launch types, and the CPU
//! kernels and serial references used as oracles. Not a stable API: it follows the
//! library's internals.
#![forbid(unsafe_code)]

pub use crate::base::dims::Dims;
pub use crate::base::splice;

pub mod chains;

/// CPU kernels: Householder vectors, Givens rotations, compact WY, serial references.
pub mod cpu {
    pub use crate::cpu::{givens, householder, reference, wy};
}

/// GPU internals: device memory, timing, cuBLAS/cuSOLVER wrappers, Givens schedules.
pub mod gpu {
    pub use crate::gpu::algo::householder::QrPhaseTimes;
    pub use crate::gpu::algo::{givens_two_phase, givens_wavefront};
    pub use crate::gpu::ffi::blas::{Diag, GeqrfBatched, Op, Side, Uplo};
    pub use crate::gpu::ffi::{cusolver, irs};
    pub use crate::gpu::launch::two_phase as two_phase_launch;
    pub use crate::gpu::runtime::{
        timing, DevMat, DevMatView, DevMatViewMut, DevVec, Dtype, GpuScalar,
    };
    pub use crate::state::gpu::GpuQr;
    pub use cudarc::driver::{CudaSlice, CudaStream, CudaView, CudaViewMut, PinnedHostSlice};
}
