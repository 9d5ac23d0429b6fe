//! Launchers of `wy_set_tau` and `wy_build_t` (gpu-kernels `wy.rs`; docs/algorithms.md#blocked-reflectors).
// Some of these serve only cuqr's benchmarks and kernel tests, which reach them through the
// `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use cudarc::driver::CudaView;

use crate::base::error::Result;
use crate::gpu::launch::launch_kernel;
use crate::gpu::launch::*;
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut};
use crate::gpu::runtime::{Gpu, GpuScalar};

impl Gpu {
    /// `wy_set_tau` (docs/algorithms.md#blocked-reflectors): t(i, i) := τᵢ for i < k, t being k×k.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `t` is not square or `tau` is shorter than k (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn wy_set_tau<T: GpuScalar>(
        &self,
        tau: &CudaView<'_, T>,
        t: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let k = t.ncols();
        assert!(t.nrows() == k && tau.len() >= k);
        if k == 0 {
            return Ok(());
        }
        let ldt = t.ld();
        let f = &T::kernel_set(&self.kernels).wy_set_tau;
        let config = launch_config((grid_blocks(k, SET_TAU_BLOCK), 1), (SET_TAU_BLOCK, 1), 0);
        // SAFETY: matches wy_set_tau_{f32,f64}(tau: *const T, t: *mut T, k, ldt):
        // reads tau[i], writes t[i + i·ldt] for i < k, both in bounds (asserted);
        // t is a &mut view and cannot alias tau; grid ⌈k/128⌉, block 128.
        unsafe { launch_kernel!(self, f, config, "wy_set_tau"; tau, t.buf_mut(), &k, &ldt) }?;
        Ok(())
    }

    /// `wy_build_t` (LAPACK larft forward columnwise, docs/algorithms.md#blocked-reflectors,
    /// docs/algorithms.md#block-reflector-sign): the k×k upper-triangular T with H₀⋯H_{k−1} = I
    /// − V T Vᵀ, from V (rows×k, unit diagonal and zeros stored explicitly) and τ ≥ 0. k ≤ 256.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `t` is not k×k, `tau` is shorter than k, or k > 256 (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn wy_build_t<T: GpuScalar>(
        &self,
        v: &DevMatView<'_, T>,
        tau: &CudaView<'_, T>,
        t: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, k) = (v.nrows(), v.ncols());
        assert!(t.nrows() == k && t.ncols() == k && tau.len() >= k && k <= BUILD_T_MAX_K);
        if k == 0 {
            return Ok(());
        }
        let (ldv, ldt) = (v.ld(), t.ld());
        let f = &T::kernel_set(&self.kernels).wy_build_t;
        let config = launch_config((1, 1), (REDUCE_BLOCK, 1), (REDUCE_BLOCK as usize + k) * 8);
        // SAFETY: matches wy_build_t_{f32,f64}(v: *const T, ldv, rows, k, tau: *const T,
        // t: *mut T, ldt): reads v[i + j·ldv], i < rows, j < k, inside the v view;
        // tau[j], j < k (asserted); writes t[i + j·ldt], i, j < k, inside the k×k t
        // view (asserted); t is a &mut view and aliases neither input; k ≤ 256;
        // grid 1, block 256, smem (256 + k)·8.
        unsafe {
            launch_kernel!(self, f, config, "wy_build_t"; v.buf(), &ldv, &rows, &k, tau,
                t.buf_mut(), &ldt)
        }?;
        Ok(())
    }
}
