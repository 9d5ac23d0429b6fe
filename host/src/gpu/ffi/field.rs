//! The raw calls of explicit-factor updates on the GPU in any [`GpuField`] (f32, f64, c32,
//! c64; docs/algorithms.md#explicit-factors-on-the-gpu): cuBLAS GEMV with Q or Qᴴ, and 2-D
//! block copies between device matrices and between host and device. Matrices hold the
//! elements' real parts ([`DevMat`] of `T::Real`, a complex m×n matrix as 2m×n reals, its
//! leading dimension even), so block copies count parts, not elements.

use cudarc::cublas::sys as blas_sys;
use cudarc::driver::sys as drv;
use cudarc::driver::{CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::{int, status};
use crate::gpu::ffi::{by_dtype, by_field};
use crate::gpu::runtime::{driver_err, DevMat, Gpu, GpuField, GpuScalar};

/// `Err` unless `ok` (a shape that does not fit: a cuqr bug or a caller's wrong size).
fn fits(op: &'static str, what: &'static str, ok: bool, got: usize, need: usize) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::shape(op, what, got, need))
    }
}

/// One end of a 2-D copy.
enum End {
    /// Device memory at this address, column pitch in bytes.
    Device(u64, usize),
    /// Host memory, column pitch in bytes.
    Host(*const u8, usize),
    /// Writable host memory, column pitch in bytes.
    HostMut(*mut u8, usize),
}

impl Gpu {
    /// y := α·op(A)·x + β·y for the m×n element matrix A held in `a`'s first m element
    /// rows and columns `col0..col0 + n` (op(A) = Aᴴ when `adjoint`, else A; Aᴴ = Aᵀ for
    /// real types); x and y are vectors of elements in parts layout, of lengths n and m
    /// (m and n when `adjoint`).
    ///
    /// # Errors
    /// [`Error::Shape`] when a block or vector is too short; [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemv_field<T: GpuField>(
        &self,
        adjoint: bool,
        (m, n, col0): (usize, usize, usize),
        alpha: T,
        a: &DevMat<T::Real>,
        x: &CudaView<'_, T::Real>,
        beta: T,
        y: &mut CudaViewMut<'_, T::Real>,
    ) -> Result<()> {
        const OP: &str = "gemv (explicit factors)";
        let parts = T::PARTS;
        fits(
            OP,
            "rows of A",
            a.nrows() >= parts * m,
            a.nrows(),
            parts * m,
        )?;
        fits(
            OP,
            "columns of A",
            a.ncols() >= col0 + n,
            a.ncols(),
            col0 + n,
        )?;
        fits(
            OP,
            "leading dimension of A",
            a.ld() % parts == 0,
            a.ld(),
            parts,
        )?;
        let (xl, yl) = if adjoint { (m, n) } else { (n, m) };
        fits(
            OP,
            "length of x",
            x.len() >= parts * xl,
            x.len(),
            parts * xl,
        )?;
        fits(
            OP,
            "length of y",
            y.len() >= parts * yl,
            y.len(),
            parts * yl,
        )?;
        if yl == 0 {
            return Ok(());
        }
        let (mi, ni) = (int(OP, "m", m)?, int(OP, "n", n)?);
        let lda = int(OP, "lda", (a.ld() / parts).max(1))?;
        let trans = match (adjoint, T::IS_COMPLEX) {
            (false, _) => blas_sys::cublasOperation_t::CUBLAS_OP_N,
            (true, false) => blas_sys::cublasOperation_t::CUBLAS_OP_T,
            (true, true) => blas_sys::cublasOperation_t::CUBLAS_OP_C,
        };
        let h = *self.blas.handle();
        let (pa0, _ga) = a.buf().device_ptr(&self.stream);
        let pa = pa0 + (col0 * a.ld() * core::mem::size_of::<T::Real>()) as u64;
        let (px, _gx) = x.device_ptr(&self.stream);
        let (py, _gy) = y.device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D,C,Z}gemv_v2 contract: A is m×n elements with ld lda (elements)
        // from column col0 inside `a` (rows, columns and ld checked above in parts), x and y hold the lengths
        // checked above with stride 1; y is a distinct &mut allocation; α and β are host
        // values of T, whose layout is the routine's element type (f32, f64, or two parts
        // real first); handle bound to self.stream.
        let st = unsafe {
            by_field!(
                T,
                [
                    blas_sys::cublasSgemv_v2,
                    blas_sys::cublasDgemv_v2,
                    blas_sys::cublasCgemv_v2,
                    blas_sys::cublasZgemv_v2
                ],
                [f32, f64, blas_sys::cuComplex, blas_sys::cuDoubleComplex],
                |E| (
                    h,
                    trans,
                    mi,
                    ni,
                    &alpha as *const T as *const E,
                    pa as *const E,
                    lda,
                    px as *const E,
                    1,
                    &beta as *const T as *const E,
                    py as *mut E,
                    1
                )
            )
        };
        status(OP, st)
    }

    /// A := A + α·x·yᴴ for the m×n element matrix A in `a`'s first m element rows and
    /// columns `col0..col0 + n` (yᵀ for real types: cuBLAS GER, GERC for complex); x and y
    /// are parts vectors of lengths m and n.
    ///
    /// # Errors
    /// [`Error::Shape`] when a block or vector is too short; [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gerc_field<T: GpuField>(
        &self,
        (m, n, col0): (usize, usize, usize),
        alpha: T,
        x: &CudaView<'_, T::Real>,
        y: &CudaView<'_, T::Real>,
        a: &mut DevMat<T::Real>,
    ) -> Result<()> {
        const OP: &str = "gerc (explicit factors)";
        let parts = T::PARTS;
        fits(
            OP,
            "rows of A",
            a.nrows() >= parts * m,
            a.nrows(),
            parts * m,
        )?;
        fits(
            OP,
            "columns of A",
            a.ncols() >= col0 + n,
            a.ncols(),
            col0 + n,
        )?;
        fits(
            OP,
            "leading dimension of A",
            a.ld() % parts == 0,
            a.ld(),
            parts,
        )?;
        fits(OP, "length of x", x.len() >= parts * m, x.len(), parts * m)?;
        fits(OP, "length of y", y.len() >= parts * n, y.len(), parts * n)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (mi, ni) = (int(OP, "m", m)?, int(OP, "n", n)?);
        let lda = int(OP, "lda", a.ld() / parts)?;
        let h = *self.blas.handle();
        let (px, _gx) = x.device_ptr(&self.stream);
        let (py, _gy) = y.device_ptr(&self.stream);
        let ld = a.ld();
        let (pa0, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
        let pa = pa0 + (col0 * ld * core::mem::size_of::<T::Real>()) as u64;
        self.count_launch();
        // SAFETY: cublas{S,D}ger_v2 / {C,Z}gerc_v2 contract: A is m×n elements with ld lda
        // from column col0 inside `a` (checked above in parts), x and y hold m and n
        // elements with stride 1 and are distinct from `a` (borrowed mutably); α is a host
        // value of T, laid out as the routine's element type.
        let st = unsafe {
            by_field!(
                T,
                [
                    blas_sys::cublasSger_v2,
                    blas_sys::cublasDger_v2,
                    blas_sys::cublasCgerc_v2,
                    blas_sys::cublasZgerc_v2
                ],
                [f32, f64, blas_sys::cuComplex, blas_sys::cuDoubleComplex],
                |E| (
                    h,
                    mi,
                    ni,
                    &alpha as *const T as *const E,
                    px as *const E,
                    1,
                    py as *const E,
                    1,
                    pa as *mut E,
                    lda
                )
            )
        };
        status(OP, st)
    }

    /// Row `row` (an element row) of the first `t` columns of the element matrix in `a`,
    /// into the parts vector `y` (PARTS·t parts, element after element): one strided
    /// cuBLAS COPY per part.
    ///
    /// # Errors
    /// [`Error::Shape`]; [`Error::Cublas`].
    pub(crate) fn read_row_field<T: GpuField>(
        &self,
        a: &DevMat<T::Real>,
        row: usize,
        t: usize,
        y: &mut CudaViewMut<'_, T::Real>,
    ) -> Result<()> {
        const OP: &str = "read_row (explicit factors)";
        let parts = T::PARTS;
        fits(
            OP,
            "row",
            parts * (row + 1) <= a.nrows(),
            parts * (row + 1),
            a.nrows(),
        )?;
        fits(OP, "columns", t <= a.ncols(), t, a.ncols())?;
        fits(OP, "length of y", y.len() >= parts * t, y.len(), parts * t)?;
        if t == 0 {
            return Ok(());
        }
        let (n, inc) = (int(OP, "t", t)?, int(OP, "ld", a.ld())?);
        let size = core::mem::size_of::<T::Real>() as u64;
        let h = *self.blas.handle();
        let (pa, _ga) = a.buf().device_ptr(&self.stream);
        let (py, _gy) = y.device_ptr_mut(&self.stream);
        for q in 0..parts {
            let x = pa + (parts * row + q) as u64 * size;
            self.count_launch();
            // SAFETY: cublas{S,D}copy_v2 reads t parts from x with stride ld: the last,
            // (parts·row + q) + (t − 1)·ld, lies inside `a` (row and t checked above); writes
            // t parts to y + q with stride parts, inside y (length checked); y is a distinct
            // &mut view.
            let st = unsafe {
                by_dtype!(
                    T::Real,
                    blas_sys::cublasScopy_v2,
                    blas_sys::cublasDcopy_v2,
                    |E| (
                        h,
                        n,
                        x as *const E,
                        inc,
                        (py + q as u64 * size) as *mut E,
                        parts as i32
                    )
                )
            };
            status(OP, st)?;
        }
        Ok(())
    }

    /// Sets row `row` (an element row) of the first `t` columns of the element matrix in
    /// `a` to zero (finite entries: cuBLAS SCAL by 0, one strided call per part).
    ///
    /// # Errors
    /// [`Error::Shape`]; [`Error::Cublas`].
    pub(crate) fn zero_row_field<T: GpuField>(
        &self,
        a: &mut DevMat<T::Real>,
        row: usize,
        t: usize,
    ) -> Result<()> {
        const OP: &str = "zero_row (explicit factors)";
        let parts = T::PARTS;
        fits(
            OP,
            "row",
            parts * (row + 1) <= a.nrows(),
            parts * (row + 1),
            a.nrows(),
        )?;
        fits(OP, "columns", t <= a.ncols(), t, a.ncols())?;
        if t == 0 {
            return Ok(());
        }
        let (n, inc) = (int(OP, "t", t)?, int(OP, "ld", a.ld())?);
        let size = core::mem::size_of::<T::Real>() as u64;
        let h = *self.blas.handle();
        let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
        let zero = <T::Real as crate::base::scalar::Scalar>::ZERO;
        for q in 0..parts {
            let x = pa + (parts * row + q) as u64 * size;
            self.count_launch();
            // SAFETY: cublas{S,D}scal_v2 scales t parts from x with stride ld, the last
            // inside `a` (row and t checked above); α is a host value of the part type.
            let st = unsafe {
                by_dtype!(
                    T::Real,
                    blas_sys::cublasSscal_v2,
                    blas_sys::cublasDscal_v2,
                    |E| (h, n, &zero as *const T::Real as *const E, x as *mut E, inc)
                )
            };
            status(OP, st)?;
        }
        Ok(())
    }

    /// Copies the `rows`×`cols` block of parts at (`from.0`, `from.1`) of `src` to
    /// (`to.0`, `to.1`) of `dst`, on [`Gpu::stream`].
    ///
    /// # Errors
    /// [`Error::Shape`] when a block leaves its matrix; [`Error::Driver`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub(crate) fn copy_block<P: GpuScalar>(
        &self,
        src: &DevMat<P>,
        from: (usize, usize),
        dst: &mut DevMat<P>,
        to: (usize, usize),
        (rows, cols): (usize, usize),
    ) -> Result<()> {
        const OP: &str = "copy_block";
        inside(OP, "source block", src, from, (rows, cols))?;
        inside(OP, "destination block", dst, to, (rows, cols))?;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let size = core::mem::size_of::<P>();
        let (s_ld, d_ld) = (src.ld(), dst.ld());
        let (ps, _gs) = src.buf().device_ptr(&self.stream);
        let (pd, _gd) = dst.buf_mut().device_ptr_mut(&self.stream);
        let s = End::Device(ps + ((from.0 + from.1 * s_ld) * size) as u64, s_ld * size);
        let d = End::Device(pd + ((to.0 + to.1 * d_ld) * size) as u64, d_ld * size);
        // SAFETY: both blocks lie inside their allocations (checked), and `dst` is borrowed
        // mutably, so it is a different allocation from `src`.
        unsafe { self.copy_2d(s, d, rows * size, cols) }
    }

    /// Writes the column-major `rows`×`cols` parts of `data` into the block at `to` of
    /// `dst` (the host data is copied before the call returns).
    ///
    /// # Errors
    /// [`Error::Shape`]; [`Error::Driver`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn write_block<P: GpuScalar>(
        &self,
        data: &[P],
        dst: &mut DevMat<P>,
        to: (usize, usize),
        (rows, cols): (usize, usize),
    ) -> Result<()> {
        const OP: &str = "write_block";
        fits(
            OP,
            "host data",
            data.len() == rows * cols,
            data.len(),
            rows * cols,
        )?;
        inside(OP, "destination block", dst, to, (rows, cols))?;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let size = core::mem::size_of::<P>();
        let d_ld = dst.ld();
        let (pd, _gd) = dst.buf_mut().device_ptr_mut(&self.stream);
        let s = End::Host(data.as_ptr().cast(), rows * size);
        let d = End::Device(pd + ((to.0 + to.1 * d_ld) * size) as u64, d_ld * size);
        // SAFETY: `data` holds rows·cols parts (checked) and lives across the call, which
        // returns once pageable source memory has been staged; the device block is inside
        // `dst` (checked).
        unsafe { self.copy_2d(s, d, rows * size, cols) }
    }

    /// The `rows`×`cols` block of parts at `from` of `src`, column-major (waits for
    /// [`Gpu::stream`]).
    ///
    /// # Errors
    /// [`Error::Shape`]; [`Error::Driver`].
    pub(crate) fn read_block<P: GpuScalar>(
        &self,
        src: &DevMat<P>,
        from: (usize, usize),
        (rows, cols): (usize, usize),
    ) -> Result<Vec<P>> {
        const OP: &str = "read_block";
        inside(OP, "source block", src, from, (rows, cols))?;
        let mut out = vec![P::ZERO; rows * cols];
        if out.is_empty() {
            return Ok(out);
        }
        let size = core::mem::size_of::<P>();
        let s_ld = src.ld();
        let (ps, _gs) = src.buf().device_ptr(&self.stream);
        let s = End::Device(ps + ((from.0 + from.1 * s_ld) * size) as u64, s_ld * size);
        let d = End::HostMut(out.as_mut_ptr().cast(), rows * size);
        // SAFETY: the device block is inside `src` (checked); `out` holds rows·cols parts
        // and is not touched until the stream has been synchronised below.
        unsafe { self.copy_2d(s, d, rows * size, cols)? };
        self.stream
            .synchronize()
            .map_err(driver_err("reading a block back"))?;
        Ok(out)
    }

    /// One `cuMemcpy2DAsync` of `height` columns of `width` bytes on [`Gpu::stream`].
    ///
    /// # Safety
    /// Each end spans (height − 1)·pitch + width valid bytes (writable for the
    /// destination); the two do not overlap; host memory outlives the copy.
    unsafe fn copy_2d(&self, src: End, dst: End, width: usize, height: usize) -> Result<()> {
        let null = core::ptr::null_mut();
        let mut copy = drv::CUDA_MEMCPY2D {
            srcXInBytes: 0,
            srcY: 0,
            srcMemoryType: drv::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            srcHost: core::ptr::null(),
            srcDevice: 0,
            srcArray: null,
            srcPitch: 0,
            dstXInBytes: 0,
            dstY: 0,
            dstMemoryType: drv::CUmemorytype::CU_MEMORYTYPE_DEVICE,
            dstHost: null.cast(),
            dstDevice: 0,
            dstArray: null,
            dstPitch: 0,
            WidthInBytes: width,
            Height: height,
        };
        match src {
            End::Device(p, pitch) => (copy.srcDevice, copy.srcPitch) = (p, pitch),
            End::Host(p, pitch) => {
                copy.srcMemoryType = drv::CUmemorytype::CU_MEMORYTYPE_HOST;
                (copy.srcHost, copy.srcPitch) = (p.cast(), pitch);
            }
            End::HostMut(p, pitch) => {
                copy.srcMemoryType = drv::CUmemorytype::CU_MEMORYTYPE_HOST;
                (copy.srcHost, copy.srcPitch) = (p.cast_const().cast(), pitch);
            }
        }
        match dst {
            End::Device(p, pitch) => (copy.dstDevice, copy.dstPitch) = (p, pitch),
            End::Host(..) => unreachable!("a copy into read-only host memory"),
            End::HostMut(p, pitch) => {
                copy.dstMemoryType = drv::CUmemorytype::CU_MEMORYTYPE_HOST;
                (copy.dstHost, copy.dstPitch) = (p.cast(), pitch);
            }
        }
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("binding the context for a 2-D copy"))?;
        self.count_launch();
        // SAFETY: the spans are the caller's promise (this function's contract); the
        // descriptor lives across the call, which reads it before returning.
        let r = unsafe { drv::cuMemcpy2DAsync_v2(&copy, self.stream.cu_stream()) };
        r.result().map_err(driver_err("a 2-D block copy"))
    }
}

/// `Err` unless the `size` block at `at` lies inside `m`.
fn inside<P: GpuScalar>(
    op: &'static str,
    what: &'static str,
    m: &DevMat<P>,
    at: (usize, usize),
    size: (usize, usize),
) -> Result<()> {
    fits(
        op,
        what,
        at.0 + size.0 <= m.nrows(),
        at.0 + size.0,
        m.nrows(),
    )?;
    fits(
        op,
        what,
        at.1 + size.1 <= m.ncols(),
        at.1 + size.1,
        m.ncols(),
    )
}
