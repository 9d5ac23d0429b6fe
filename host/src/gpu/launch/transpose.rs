//! Launcher of `transpose_padded` (gpu-kernels `transpose.rs`;
//! docs/algorithms.md#padded-transpose-and-composite-layout).
// Some of these serve only cuqr's benchmarks and kernel tests, which reach them through the
// `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use crate::base::error::Result;
use crate::gpu::launch::launch_kernel;
use crate::gpu::launch::*;
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut};
use crate::gpu::runtime::{Gpu, GpuScalar};

impl Gpu {
    /// `transpose_padded` (docs/algorithms.md#padded-transpose-and-composite-layout,
    /// docs/algorithms.md#transpose-tile-padding): dst(j, i) := src(i, j) for all i <
    /// src.nrows(), j < src.ncols(); dst must be src.ncols() × src.nrows().
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the shapes do not match or ⌈src.ncols()/32⌉ > 65535 (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn transpose_padded<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        dst: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, cols) = (src.nrows(), src.ncols());
        assert!(dst.nrows() == cols && dst.ncols() == rows);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        assert!(cols.div_ceil(TILE as usize) <= MAX_GRID_YZ);
        let (lds, ldd) = (src.ld(), dst.ld());
        let f = &T::kernel_set(&self.kernels).transpose_padded;
        let config = launch_config(
            (grid_blocks(rows, TILE), grid_blocks(cols, TILE)),
            (TILE, TILE_ROWS),
            (TILE * (TILE + 1)) as usize * core::mem::size_of::<T>(),
        );
        // SAFETY: matches transpose_padded_{f32,f64}(src: *const T, lds, rows, cols,
        // dst: *mut T, ldd): reads src[i + j·lds], i < rows, j < cols, inside the
        // src view; writes dst[j + i·ldd], j < cols = dst.nrows(), i < rows =
        // dst.ncols(), inside the dst view (asserted); dst is a &mut view and cannot
        // alias src; grid (⌈rows/32⌉, ⌈cols/32⌉), block (32, 8), smem 32·33·size_of T.
        unsafe {
            launch_kernel!(self, f, config, "transpose_padded"; src.buf(), &lds, &rows, &cols,
                dst.buf_mut(), &ldd)
        }?;
        Ok(())
    }
}
