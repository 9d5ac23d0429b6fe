//! Typed launchers of the precision-conversion kernels (gpu-kernels/src/convert.rs;
//! docs/algorithms.md#mixed-precision): an f32 copy of a working-precision matrix for the
//! mixed-precision factorisation, and the f32 factor widened back for refinement.
//! Launches go on [`Gpu::stream`] and count themselves.

use cudarc::driver::{CudaFunction, CudaSlice, LaunchConfig};

use crate::base::error::Result;
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::launch_kernel;
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut};
use crate::gpu::runtime::{alloc_err, Gpu, GpuScalar};

/// Threads per block (x) of the elementwise conversion kernels.
const BLOCK: u32 = 128;
/// Largest grid y; the kernels loop over columns with this stride.
const MAX_GRID_Y: usize = 65_535;

/// Grid (⌈rows/128⌉, min(cols, 65535)), block 128, and the column stride (= grid y).
fn cfg(rows: usize, cols: usize) -> (LaunchConfig, usize) {
    let gx = u32::try_from(rows.div_ceil(BLOCK as usize)).expect("grid x fits u32");
    let gy = cols.min(MAX_GRID_Y);
    (
        LaunchConfig {
            grid_dim: (gx, gy as u32, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        },
        gy,
    )
}

impl Gpu {
    /// `convert_to_f32`: dst := scale·src rounded to f32 (to nearest), same shape, any
    /// lds. Pass a power of two as `scale` to keep the scaling exact.
    ///
    /// # Errors
    /// [`Error::Driver`](crate::Error::Driver) if the launch fails.
    ///
    /// # Panics
    /// If the shapes differ (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn convert_to_f32<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        scale: T,
        dst: &mut DevMatViewMut<'_, f32>,
    ) -> Result<()> {
        let f = &T::kernel_set(&self.kernels).convert_to_f32;
        self.convert_launch(f, "convert_to_f32", src, scale, dst)
    }

    /// `convert_from_f32`: dst := scale·src (src widened exactly from f32), same shape,
    /// any lds.
    ///
    /// # Errors
    /// [`Error::Driver`](crate::Error::Driver) if the launch fails.
    ///
    /// # Panics
    /// If the shapes differ (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn convert_from_f32<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, f32>,
        scale: T,
        dst: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let f = &T::kernel_set(&self.kernels).convert_from_f32;
        self.convert_launch(f, "convert_from_f32", src, scale, dst)
    }

    /// Launches the scaled conversion kernel `f` (named `name`) on [`Gpu::stream`]:
    /// dst := scale·src elementwise from the S block `src` to the D block `dst` of the same
    /// shape, any leading dimensions. `f` must be `convert_to_f32_{f32,f64}` of T (S = T,
    /// D = f32) or `convert_from_f32_{f32,f64}` of T (S = f32, D = T), as the two callers
    /// above pass it.
    ///
    /// # Panics
    /// If the shapes differ (a cuqr bug).
    fn convert_launch<S, D, T: GpuScalar>(
        &self,
        f: &CudaFunction,
        name: &str,
        src: &DevMatView<'_, S>,
        scale: T,
        dst: &mut DevMatViewMut<'_, D>,
    ) -> Result<()> {
        let (rows, cols) = (src.nrows(), src.ncols());
        assert!(dst.nrows() == rows && dst.ncols() == cols);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let (lds, ldd) = (src.ld(), dst.ld());
        let (c, ystride) = cfg(rows, cols);
        // SAFETY: f is one of the two kernels named above, whose (S, D) matches the views'
        // element types; both take (src: *const S, lds, rows, cols, scale: T, dst: *mut D,
        // ldd, ystride): read src[i + j·lds], write dst[i + j·ldd] for i < rows, j < cols,
        // inside the two views (equal shapes asserted); dst is a &mut view and cannot alias
        // src; grid (⌈rows/128⌉, min(cols, 65535)), block 128, ystride = grid y.
        unsafe {
            launch_kernel!(self, f, c, name; src.buf(), &lds, &rows, &cols, &scale,
                dst.buf_mut(), &ldd, &ystride)
        }?;
        Ok(())
    }

    /// `convert_to_half`: a fresh u16 buffer with the bit patterns of `src` rounded to
    /// bf16 (`format` 0) or f16 (`format` 1), to nearest even, laid out with `src`'s
    /// leading dimension (padding zero): explicit tensor-core GEMM operands.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`](crate::Error::OutOfMemory) or [`Error::Driver`](crate::Error::Driver).
    ///
    /// # Panics
    /// If `format` is not 0 or 1 (a cuqr bug).
    pub(crate) fn convert_to_half<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        format: u32,
    ) -> Result<CudaSlice<u16>> {
        assert!(format <= 1);
        let (rows, cols, ld) = (src.nrows(), src.ncols(), src.ld());
        let len = (ld * cols).max(1);
        let mut dst = self
            .stream
            .alloc_zeroed::<u16>(len)
            .map_err(alloc_err("half-precision GEMM operand", 2 * len))?;
        if rows == 0 || cols == 0 {
            return Ok(dst);
        }
        let (c, ystride) = cfg(rows, cols);
        let f = &T::kernel_set(&self.kernels).convert_to_half;
        // SAFETY: matches convert_to_half_{f32,f64}(src: *const T, lds, rows, cols,
        // dst: *mut u16, ldd, format: u32, ystride): reads src[i + j·ld] inside the view,
        // writes dst[i + j·ld] for i < rows ≤ ld, j < cols, inside the ld·cols elements
        // just allocated (a distinct buffer); grid (⌈rows/128⌉, min(cols, 65535)),
        // block 128, ystride = grid y.
        unsafe {
            launch_kernel!(self, f, c, "convert_to_half"; src.buf(), &ld, &rows, &cols,
                &mut dst, &ld, &format, &ystride)
        }?;
        Ok(dst)
    }
}
