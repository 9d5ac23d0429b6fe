//! Device memory that another library owns (CuPy, PyTorch, anything that speaks
//! DLPack): copying a strided matrix of it into a [`DevMat`], and the address of a
//! [`DevMat`] to hand out. The raw pointer is the caller's promise, so the copy is
//! `unsafe`; everything else is checked.

use cudarc::cublas::sys as blas_sys;
use cudarc::driver::sys as drv;
use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::{int, status};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{driver_err, Dtype, Gpu, GpuScalar};

fn layout_err(why: String) -> Error {
    Error::InvalidParam {
        op: "DevMat::copy_from_foreign",
        what: "strides",
        why,
    }
}

impl<T: GpuScalar> DevMat<T> {
    /// Copies the `rows × cols` matrix at device address `ptr`, whose element (i, j) lies at
    /// `ptr + (i·row_stride + j·col_stride)·size_of::<T>()`, into a new [`DevMat`] on
    /// [`Gpu::stream`] (device to device, no host copy). A column-major source
    /// (`row_stride` = 1) takes one 2D copy; a row-major one (`col_stride` = 1) a 2D copy
    /// and one cuBLAS transpose (`xGEAM`). Other layouts are refused.
    ///
    /// # Safety
    /// `ptr` must be an allocation of this device, readable in the CUDA context that
    /// [`Gpu`] uses (the device's primary context), holding every element addressed above;
    /// nothing may write it until [`Gpu::stream`] has passed this copy (the caller orders
    /// the owner's work before the stream, e.g. through DLPack's stream argument).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for a layout that is neither column- nor row-major (or a
    /// negative or overlapping stride); [`Error::OutOfMemory`], [`Error::Driver`],
    /// [`Error::Cublas`].
    pub unsafe fn copy_from_foreign(
        gpu: &Gpu,
        ptr: u64,
        rows: usize,
        cols: usize,
        row_stride: isize,
        col_stride: isize,
    ) -> Result<Self> {
        let mut out = DevMat::<T>::zeros(gpu, rows, cols)?;
        if rows == 0 || cols == 0 {
            return Ok(out);
        }
        // A stride of a dimension of extent 1 never moves the address: treat it as packed.
        let rs = if rows == 1 { 1 } else { row_stride };
        let cs = if cols == 1 { rows as isize } else { col_stride };
        if rs == 1 && cs >= rows as isize {
            // SAFETY: the caller guarantees the source; `out` holds rows × cols with ld ≥ rows.
            unsafe { copy_2d::<T>(gpu, ptr, cs as usize, rows, cols, &mut out) }?;
            return Ok(out);
        }
        let rs = if rows == 1 { cols as isize } else { row_stride };
        let cs = if cols == 1 { 1 } else { col_stride };
        if cs == 1 && rs >= cols as isize {
            // The source read as a column-major cols × rows matrix with leading dimension
            // `rs` is the transpose: copy it, then transpose on the device.
            let mut t = DevMat::<T>::zeros(gpu, cols, rows)?;
            // SAFETY: as above, with the roles of rows and columns exchanged.
            unsafe { copy_2d::<T>(gpu, ptr, rs as usize, cols, rows, &mut t) }?;
            transpose_into(gpu, &t, &mut out)?;
            return Ok(out);
        }
        Err(layout_err(format!(
            "a {rows}×{cols} matrix with element strides ({row_stride}, {col_stride}) is \
             neither column- nor row-major; pass a contiguous array"
        )))
    }

    /// The device address of element (0, 0); element (i, j) is at
    /// `address + (i + j·ld)·size_of::<T>()`, valid while `self` lives. Work that cuqr
    /// queued on [`Gpu::stream`] may still be writing it: synchronise (or order after
    /// the stream) before another library reads it.
    pub fn device_address(&self, gpu: &Gpu) -> u64 {
        let (p, _sync) = self.buf().device_ptr(&gpu.stream);
        p
    }
}

/// One `cuMemcpy2DAsync` on [`Gpu::stream`]: `cols` columns of `rows` elements from
/// `src` (column pitch `src_ld` elements) into `out`.
///
/// # Safety
/// `src` must hold `(cols − 1)·src_ld + rows` elements of T readable in the device's
/// context, unchanged until the stream has passed the copy.
unsafe fn copy_2d<T: GpuScalar>(
    gpu: &Gpu,
    src: u64,
    src_ld: usize,
    rows: usize,
    cols: usize,
    out: &mut DevMat<T>,
) -> Result<()> {
    debug_assert!(out.nrows() == rows && out.ncols() == cols && src_ld >= rows);
    let size = core::mem::size_of::<T>();
    gpu.ctx
        .bind_to_thread()
        .map_err(driver_err("binding the context for a foreign copy"))?;
    let ld = out.ld();
    let (dst, _sync) = out.buf_mut().device_ptr_mut(&gpu.stream);
    let copy = drv::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: drv::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        srcHost: core::ptr::null(),
        srcDevice: src,
        srcArray: core::ptr::null_mut(),
        srcPitch: src_ld * size,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: drv::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: core::ptr::null_mut(),
        dstDevice: dst,
        dstArray: core::ptr::null_mut(),
        dstPitch: ld * size,
        WidthInBytes: rows * size,
        Height: cols,
    };
    gpu.count_launch();
    // SAFETY: the source span is the caller's promise (this function's contract); the
    // destination is `out`'s allocation of ld·cols ≥ rows·cols elements with pitch ld,
    // borrowed mutably for the call; the descriptor lives across the call, which reads
    // it before returning.
    let r = unsafe { drv::cuMemcpy2DAsync_v2(&copy, gpu.stream.cu_stream()) };
    r.result()
        .map_err(driver_err("copying a foreign device matrix"))
}

/// `out` := tᵀ by cuBLAS `xGEAM` (α = 1, β = 0) on [`Gpu::stream`].
fn transpose_into<T: GpuScalar>(gpu: &Gpu, t: &DevMat<T>, out: &mut DevMat<T>) -> Result<()> {
    const OP: &str = "transpose";
    let (m, n) = (out.nrows(), out.ncols());
    debug_assert!(t.nrows() == n && t.ncols() == m);
    let (mi, ni) = (int(OP, "rows", m)?, int(OP, "columns", n)?);
    let (lda, ldc) = (int(OP, "lda", t.ld())?, int(OP, "ldc", out.ld())?);
    let h = *gpu.blas.handle();
    let (pa, _ga) = t.buf().device_ptr(&gpu.stream);
    let (pc, _gc) = out.buf_mut().device_ptr_mut(&gpu.stream);
    gpu.count_launch();
    let op_t = blas_sys::cublasOperation_t::CUBLAS_OP_T;
    let op_n = blas_sys::cublasOperation_t::CUBLAS_OP_N;
    let st = match T::DTYPE {
        // SAFETY: cublasSgeam: C (m×n, ldc ≥ m) := 1·Aᵀ + 0·B with A n×m (lda ≥ n), both
        // f32 allocations of the right spans (DevMat invariants); with β = 0, B is not read
        // and is passed as C, which cuBLAS allows (ldb = ldc); A and C are distinct buffers.
        Dtype::F32 => unsafe {
            let (one, zero) = (1.0f32, 0.0f32);
            blas_sys::cublasSgeam(
                h,
                op_t,
                op_n,
                mi,
                ni,
                &one,
                pa as *const f32,
                lda,
                &zero,
                pc as *const f32,
                ldc,
                pc as *mut f32,
                ldc,
            )
        },
        // SAFETY: as for f32 with cublasDgeam and T = f64.
        Dtype::F64 => unsafe {
            let (one, zero) = (1.0f64, 0.0f64);
            blas_sys::cublasDgeam(
                h,
                op_t,
                op_n,
                mi,
                ni,
                &one,
                pa as *const f64,
                lda,
                &zero,
                pc as *const f64,
                ldc,
                pc as *mut f64,
                ldc,
            )
        },
    };
    status(OP, st)
}

impl Gpu {
    /// The raw handle of [`Gpu::stream`] (a `CUstream`) as an integer: what DLPack's
    /// `__dlpack__(stream=…)` expects, so that the owner of an array orders its work
    /// before cuqr's.
    pub fn stream_handle(&self) -> usize {
        self.stream.cu_stream() as usize
    }

    /// The device's ordinal (what [`Gpu::new`] opened).
    pub fn device_ordinal(&self) -> usize {
        self.ordinal()
    }

    /// Waits for the work queued on [`Gpu::stream`] (not the device's other streams, nor
    /// other libraries' work on the device).
    ///
    /// # Errors
    /// [`Error::Driver`] if queued work failed (an asynchronous fault).
    pub fn synchronize_stream(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(driver_err("waiting for the stream"))
    }
}
