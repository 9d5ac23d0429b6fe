//! Launcher of `householder_house` (gpu-kernels `householder.rs`; docs/algorithms.md#householder-vectors).
// Some of these serve only cuqr's benchmarks and kernel tests, which reach them through the
// `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use cudarc::driver::CudaViewMut;

use crate::base::error::Result;
use crate::gpu::launch::launch_kernel;
use crate::gpu::launch::*;
use crate::gpu::runtime::{Gpu, GpuScalar};

impl Gpu {
    /// `householder_house`: robust reflector of (α, x) in place
    /// (docs/algorithms.md#householder-vectors): `alpha[0]` := β, `x` := v tail, `tau[0]` := τ;
    /// n = `x.len()` (may be 0).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `alpha` or `tau` is empty (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn householder_house<T: GpuScalar>(
        &self,
        alpha: &mut CudaViewMut<'_, T>,
        x: &mut CudaViewMut<'_, T>,
        tau: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        assert!(!alpha.is_empty() && !tau.is_empty());
        let n = x.len();
        let f = &T::kernel_set(&self.kernels).householder_house;
        let config = launch_config((1, 1), (REDUCE_BLOCK, 1), REDUCE_BLOCK as usize * 8);
        // SAFETY: matches householder_house_{f32,f64}(alpha: *mut T, x: *mut T,
        // n: usize, tau: *mut T): alpha and tau hold ≥ 1 element (asserted),
        // x holds exactly n; three distinct &mut views cannot overlap; launch
        // shape grid 1, block 256, dyn smem 256·8 as the contract says.
        unsafe {
            launch_kernel!(self, f, config, "householder_house"; &mut *alpha, &mut *x, &n,
                &mut *tau)
        }?;
        Ok(())
    }
}
