//! Launchers of the single-block reductions `reduce_dot`, `reduce_nrm2` and the tiled
//! `reduce_double_sum` (gpu-kernels `reduce.rs`).
// Some of these serve only cuqr's benchmarks and kernel tests, which reach them through the
// `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use cudarc::driver::{CudaView, CudaViewMut};

use crate::base::error::Result;
use crate::gpu::launch::launch_kernel;
use crate::gpu::launch::*;
use crate::gpu::runtime::matrix::DevMatViewMut;
use crate::gpu::runtime::{Gpu, GpuScalar};

impl Gpu {
    /// `reduce_dot`: `out[0] := Σ x[i]·y[i]`, n = `x.len()` = `y.len()`.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the lengths differ or `out` is empty (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn reduce_dot<T: GpuScalar>(
        &self,
        x: &CudaView<'_, T>,
        y: &CudaView<'_, T>,
        out: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        assert!(x.len() == y.len() && !out.is_empty());
        let n = x.len();
        let f = &T::kernel_set(&self.kernels).reduce_dot;
        let config = launch_config((1, 1), (REDUCE_BLOCK, 1), REDUCE_BLOCK as usize * 8);
        // SAFETY: matches reduce_dot_{f32,f64}(x: *const T, y: *const T, n: usize,
        // out: *mut T): x and y hold n elements (asserted equal), out ≥ 1; out is a
        // &mut view so it aliases neither input; grid 1, block 256, smem 256·8.
        unsafe { launch_kernel!(self, f, config, "reduce_dot"; x, y, &n, &mut *out) }?;
        Ok(())
    }

    /// `reduce_nrm2`: `out[0] := ‖x‖₂` (scaled two pass), n = `x.len()`.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `out` is empty (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn reduce_nrm2<T: GpuScalar>(
        &self,
        x: &CudaView<'_, T>,
        out: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        assert!(!out.is_empty());
        let n = x.len();
        let f = &T::kernel_set(&self.kernels).reduce_nrm2;
        let config = launch_config((1, 1), (REDUCE_BLOCK, 1), REDUCE_BLOCK as usize * 8);
        // SAFETY: matches reduce_nrm2_{f32,f64}(x: *const T, n: usize, out: *mut T):
        // x holds n elements, out ≥ 1 and does not alias x (&mut view);
        // grid 1, block 256, smem 256·8.
        unsafe { launch_kernel!(self, f, config, "reduce_nrm2"; x, &n, &mut *out) }?;
        Ok(())
    }

    /// `reduce_double_sum` (docs/algorithms.md#padded-transpose-and-composite-layout,
    /// docs/algorithms.md#double-sum-arguments): cm += a + b where a and b are dense cm.nrows()
    /// × cm.ncols() column-major (ld = cm.nrows()).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `a` or `b` is shorter than r·c, or ⌈c/32⌉ > 65535 (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn reduce_double_sum<T: GpuScalar>(
        &self,
        a: &CudaView<'_, T>,
        b: &CudaView<'_, T>,
        cm: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (r, c) = (cm.nrows(), cm.ncols());
        assert!(a.len() >= r * c && b.len() >= r * c);
        if r == 0 || c == 0 {
            return Ok(());
        }
        assert!(c.div_ceil(TILE as usize) <= MAX_GRID_YZ);
        let ldc = cm.ld();
        let f = &T::kernel_set(&self.kernels).reduce_double_sum;
        let config = launch_config(
            (grid_blocks(r, TILE), grid_blocks(c, TILE)),
            (TILE, TILE_ROWS),
            0,
        );
        // SAFETY: matches reduce_double_sum_{f32,f64}(a: *const T, b: *const T, r, c,
        // cm: *mut T, ldc): reads a, b at i + j·r < r·c ≤ their lengths (asserted);
        // writes cm[i + j·ldc], i < r, j < c, inside the view; cm is a &mut view so
        // it aliases neither input; grid (⌈r/32⌉, ⌈c/32⌉), block (32, 8).
        unsafe {
            launch_kernel!(self, f, config, "reduce_double_sum"; a, b, &r, &c, cm.buf_mut(),
                &ldc)
        }?;
        Ok(())
    }
}
