//! Stream-taking launchers for the Wavefront design (docs/algorithms.md#givens-rotations,
//! docs/algorithms.md#padded-transpose-and-composite-layout;
//! docs/algorithms.md#wavefront-schedule): the same kernels and launch shapes as
//! [`Gpu::givens_make_wavefront`], [`Gpu::givens_apply_wavefront`] and
//! [`Gpu::transpose_padded`] (docs/kernels.md), but on a caller-chosen stream of this `Gpu`,
//! plus the 2-D device copy that packs and unpacks the composite matrix
//! (docs/algorithms.md#padded-transpose-and-composite-layout). One `unsafe` block per launch or
//! driver call.
// The wavefront launchers serve the published design's stages, the benchmarks and the
// kernel tests (through the `internals` feature).
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use core::ops::Range;
use std::sync::Arc;

use cudarc::driver::{sys, CudaStream, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use crate::base::error::{Error, Result};
use crate::gpu::launch::launch_kernel;
use crate::gpu::launch::{grid_blocks, last_row, launch_config};
use crate::gpu::launch::{APPLY_GIVENS_BLOCK, MAKE_GIVENS_BLOCK, TILE, TILE_ROWS};
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Largest grid y dimension.
const MAX_GRID_Y: usize = 65_535;

/// Panics unless `stream` belongs to this device's context (a cuqr bug otherwise).
fn check_stream(gpu: &Gpu, stream: &CudaStream) {
    assert!(
        Arc::ptr_eq(stream.context(), gpu.context()),
        "stream of another context"
    );
}

impl Gpu {
    /// `givens_make_wavefront` (docs/algorithms.md#givens-rotations) on `stream`: for i < `count`,
    /// rotation i zeroes pitched entry (r, col0+i) against (r−1, col0+i), r = row0 + 2i,
    /// writing `c[i]`, `s[i]`. Pitched convention of [`Gpu::givens_make_wavefront`]:
    /// pitched element (r, col) is `a(col, r)`, pitch `a.ld()`.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a touched entry is outside `a`, `row0 == 0`, `c`/`s` are shorter than
    /// `count`, or `stream` is not this device's (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn givens_make_wavefront_on<T: GpuScalar>(
        &self,
        stream: &Arc<CudaStream>,
        a: &DevMatView<'_, T>,
        row0: usize,
        col0: usize,
        count: usize,
        c: &mut CudaViewMut<'_, T>,
        s: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        if count == 0 {
            return Ok(());
        }
        check_stream(self, stream);
        assert!(row0 >= 1 && last_row(row0, count) < a.ncols() && col0 + count <= a.nrows());
        assert!(c.len() >= count && s.len() >= count);
        let pitch = a.ld();
        let f = &T::kernel_set(&self.kernels).givens_make_wavefront;
        let config = launch_config(
            (grid_blocks(count, MAKE_GIVENS_BLOCK), 1),
            (MAKE_GIVENS_BLOCK, 1),
            0,
        );
        // SAFETY: matches givens_make_wavefront_{f32,f64}(a: *const T, pitch, row0, col0,
        // count, c: *mut T, s: *mut T) of docs/kernels.md: thread i < count reads
        // a[r·pitch + col] for r ≤ row0+2(count−1) < a.ncols() and col = col0+i <
        // a.nrows() ≤ pitch (asserted), inside the view's span; c and s hold ≥ count
        // elements and are distinct &mut views, aliasing neither each other nor `a`;
        // launch shape grid ⌈count/32⌉, block 32 as the contract says; the stream
        // belongs to this context, where the kernel was loaded (asserted).
        unsafe {
            launch_kernel!(self, on stream, f, config, "givens_make_wavefront"; a.buf(),
                &pitch, &row0, &col0, &count, &mut *c, &mut *s)
        }?;
        Ok(())
    }

    /// `givens_apply_wavefront` (docs/algorithms.md#givens-rotations,
    /// docs/algorithms.md#complete-rotation-application, docs/algorithms.md#live-column-range)
    /// on `stream`: rotation i acts on pitched rows (r−1, r), r = row0 + 2i, over pitched
    /// columns [cols.start + i·col_step, cols.end). Pitched convention as above.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a touched entry is outside `a`, `row0 == 0`, `count > 65535`, `c`/`s` are
    /// shorter than `count`, or `stream` is not this device's (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn givens_apply_wavefront_on<T: GpuScalar>(
        &self,
        stream: &Arc<CudaStream>,
        a: &mut DevMatViewMut<'_, T>,
        row0: usize,
        count: usize,
        cols: Range<usize>,
        col_step: usize,
        c: &CudaView<'_, T>,
        s: &CudaView<'_, T>,
    ) -> Result<()> {
        if count == 0 || cols.start >= cols.end {
            return Ok(());
        }
        check_stream(self, stream);
        assert!(row0 >= 1 && last_row(row0, count) < a.ncols() && cols.end <= a.nrows());
        assert!(c.len() >= count && s.len() >= count && count <= MAX_GRID_Y);
        let (pitch, col_begin, col_end) = (a.ld(), cols.start, cols.end);
        let f = &T::kernel_set(&self.kernels).givens_apply_wavefront;
        let config = launch_config(
            (
                grid_blocks(col_end - col_begin, APPLY_GIVENS_BLOCK),
                count as u32,
            ),
            (APPLY_GIVENS_BLOCK, 1),
            0,
        );
        // SAFETY: matches givens_apply_wavefront_{f32,f64}(a: *mut T, pitch, row0, count,
        // col_begin, col_step, col_end, c: *const T, s: *const T) of docs/kernels.md:
        // block (x, i) touches a[r·pitch + x] for r ≤ row0+2(count−1) < a.ncols() and
        // x < col_end ≤ a.nrows() ≤ pitch (asserted), inside the view; rotations of one
        // launch touch distinct row pairs (stride 2); c and s hold ≥ count and cannot
        // alias the &mut view `a`; grid (⌈(col_end−col_begin)/128⌉, count ≤ 65535),
        // block 128; the stream belongs to this context (asserted).
        unsafe {
            launch_kernel!(self, on stream, f, config, "givens_apply_wavefront"; a.buf_mut(),
                &pitch, &row0, &count, &col_begin, &col_step, &col_end, c, s)
        }?;
        Ok(())
    }

    /// `transpose_padded` (docs/algorithms.md#padded-transpose-and-composite-layout,
    /// docs/algorithms.md#transpose-tile-padding) on `stream`: dst(j, i) := src(i, j) for i <
    /// src.nrows(), j < src.ncols(); dst must be src.ncols() × src.nrows().
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the shapes do not match, ⌈src.ncols()/32⌉ > 65535, or `stream` is not this
    /// device's (a cuqr bug).
    pub(crate) fn transpose_padded_on<T: GpuScalar>(
        &self,
        stream: &Arc<CudaStream>,
        src: &DevMatView<'_, T>,
        dst: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, cols) = (src.nrows(), src.ncols());
        assert!(dst.nrows() == cols && dst.ncols() == rows);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        check_stream(self, stream);
        assert!(cols.div_ceil(TILE as usize) <= MAX_GRID_Y);
        let (lds, ldd) = (src.ld(), dst.ld());
        let f = &T::kernel_set(&self.kernels).transpose_padded;
        let config = launch_config(
            (grid_blocks(rows, TILE), grid_blocks(cols, TILE)),
            (TILE, TILE_ROWS),
            (TILE * (TILE + 1)) as usize * core::mem::size_of::<T>(),
        );
        // SAFETY: matches transpose_padded_{f32,f64}(src: *const T, lds, rows, cols,
        // dst: *mut T, ldd) of docs/kernels.md: reads src[i + j·lds], i < rows, j < cols,
        // inside the src view; writes dst[j + i·ldd], j < cols = dst.nrows(), i < rows =
        // dst.ncols(), inside the dst view (asserted); dst is a &mut view and cannot alias
        // src; grid (⌈rows/32⌉, ⌈cols/32⌉), block (32, 8), smem 32·33·size_of T; the
        // stream belongs to this context (asserted).
        unsafe {
            launch_kernel!(self, on stream, f, config, "transpose_padded"; src.buf(), &lds,
                &rows, &cols, dst.buf_mut(), &ldd)
        }?;
        Ok(())
    }

    /// dst := src for two column-major blocks of equal shape and possibly different leading
    /// dimensions, as one asynchronous 2-D copy on `stream` (`cuMemcpy2DAsync`): packs Q into
    /// the composite matrix and back
    /// (docs/algorithms.md#padded-transpose-and-composite-layout).
    ///
    /// # Errors
    /// [`Error::Driver`] if the copy cannot be queued.
    ///
    /// # Panics
    /// If the shapes differ or `stream` is not this device's (a cuqr bug).
    pub(crate) fn copy_2d_on<T: GpuScalar>(
        &self,
        stream: &Arc<CudaStream>,
        src: &DevMatView<'_, T>,
        dst: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, cols) = (src.nrows(), src.ncols());
        assert!(dst.nrows() == rows && dst.ncols() == cols);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        check_stream(self, stream);
        self.ctx
            .bind_to_thread()
            .map_err(|e| Error::driver("2-D copy", e))?;
        let size = core::mem::size_of::<T>();
        let (src_pitch, dst_pitch) = (src.ld() * size, dst.ld() * size);
        let (src_ptr, _src_guard) = src.buf().device_ptr(stream);
        let (dst_ptr, _dst_guard) = dst.buf_mut().device_ptr_mut(stream);
        let params = sys::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: core::ptr::null(),
            srcDevice: src_ptr,
            srcArray: core::ptr::null_mut(),
            srcPitch: src_pitch,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: core::ptr::null_mut(),
            dstDevice: dst_ptr,
            dstArray: core::ptr::null_mut(),
            dstPitch: dst_pitch,
            WidthInBytes: rows * size,
            Height: cols,
        };
        self.count_launch();
        // SAFETY: cuMemcpy2DAsync_v2 contract: both operands are device memory of this
        // context (bound above); the source reads column j at src + j·lds·size for
        // rows·size bytes, j < cols, which is the src view's span ld·(cols−1)+rows
        // elements, likewise for dst (shapes asserted equal, rows ≤ ld for both views
        // by DevMatView's invariant, so WidthInBytes ≤ each pitch); dst is a &mut view
        // and cannot overlap src; `params` lives until the call returns, and the guards
        // keep the buffers' cross-stream events until the copy is queued.
        unsafe { sys::cuMemcpy2DAsync_v2(&params, stream.cu_stream()) }
            .result()
            .map_err(|e| Error::driver("2-D copy", e))?;
        Ok(())
    }
}

/// The wavefront launchers on the main stream.
impl Gpu {
    /// `givens_make_wavefront` (docs/algorithms.md#givens-rotations): for i < `count`,
    /// rotation i zeroes pitched entry (r, col0+i) against (r−1, col0+i),
    /// r = row0 + 2i, writing `c[i]`, `s[i]`.
    ///
    /// `a` is the row-major pitched buffer seen as its column-major transpose:
    /// pitched element (r, col) is `a(col, r)` and the pitch is `a.ld()`
    /// (so pitched rows = `a.ncols()`, pitched columns = `a.nrows()`).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a touched row or column is outside `a`, `row0 == 0`, or `c`/`s` are
    /// shorter than `count` (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn givens_make_wavefront<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
        row0: usize,
        col0: usize,
        count: usize,
        c: &mut CudaViewMut<'_, T>,
        s: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        self.givens_make_wavefront_on(&self.stream, a, row0, col0, count, c, s)
    }

    /// `givens_apply_wavefront` (docs/algorithms.md#givens-rotations,
    /// docs/algorithms.md#complete-rotation-application, docs/algorithms.md#live-column-range):
    /// rotation i acts on pitched rows (r−1, r), r = row0 + 2i, over pitched columns
    /// [cols.start + i·col_step, cols.end). Same pitched convention as
    /// [`Gpu::givens_make_wavefront`].
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a touched row or column is outside `a`, `row0 == 0`, `count > 65535`,
    /// or `c`/`s` are shorter than `count` (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn givens_apply_wavefront<T: GpuScalar>(
        &self,
        a: &mut DevMatViewMut<'_, T>,
        row0: usize,
        count: usize,
        cols: core::ops::Range<usize>,
        col_step: usize,
        c: &CudaView<'_, T>,
        s: &CudaView<'_, T>,
    ) -> Result<()> {
        self.givens_apply_wavefront_on(&self.stream, a, row0, count, cols, col_step, c, s)
    }
}
