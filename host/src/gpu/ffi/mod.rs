//! The only raw CUDA driver, cuBLAS and cuSOLVER calls of the library. `driver` sits below
//! the runtime (allocation, copies, probes); `blas` and `cusolver` above it, as methods on
//! [`Gpu`](crate::gpu::runtime::Gpu) that take device views.

pub mod blas;
pub mod blas_device;
pub mod cusolver;
pub mod driver;
pub mod foreign;
#[cfg(any(test, feature = "internals"))]
pub mod irs;
pub mod nccl;
