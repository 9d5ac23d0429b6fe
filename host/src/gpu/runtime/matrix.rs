//! Device matrices and vectors. [`DevMat`] is column-major with its leading
//! dimension padded to a multiple of 128 bytes
//! (docs/algorithms.md#padded-transpose-and-composite-layout: every warp's access
//! to a column is one aligned segment). [`DevMatView`] / [`DevMatViewMut`]
//! are sub-blocks (pointer + ld) for launches; [`DevVec`] holds vectors and
//! scalars. Transfers run on [`Gpu::stream`] and complete before returning.

use core::ops::Range;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, PinnedHostSlice};

use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

/// Leading dimensions are padded to a multiple of this many bytes
/// (docs/algorithms.md#padded-transpose-and-composite-layout).
pub const LD_ALIGN_BYTES: usize = 128;

/// The padded leading dimension for `nrows` rows of `T`: the smallest multiple
/// of 128 bytes that is ≥ max(nrows, 1) elements.
pub fn padded_ld<T>(nrows: usize) -> usize {
    let per = (LD_ALIGN_BYTES / core::mem::size_of::<T>()).max(1);
    nrows.max(1).div_ceil(per) * per
}

/// Leading dimension and element count (at least 1) of the device allocation for an
/// `nrows × ncols` [`DevMat`] of `T`, checked on the host before any device work:
/// a byte size that overflows `usize` would otherwise wrap to a short allocation
/// that kernels launched for the full shape would overrun.
///
/// # Errors
/// [`Error::InvalidParam`] when the padded size in bytes overflows `usize`.
fn mat_alloc_len<T>(nrows: usize, ncols: usize) -> Result<(usize, usize)> {
    let per = (LD_ALIGN_BYTES / core::mem::size_of::<T>()).max(1);
    let size = core::mem::size_of::<T>();
    nrows
        .max(1)
        .div_ceil(per)
        .checked_mul(per)
        .and_then(|ld| {
            let len = ld.checked_mul(ncols)?.max(1);
            len.checked_mul(size)?;
            Some((ld, len))
        })
        .ok_or_else(|| Error::InvalidParam {
            op: "DevMat",
            what: "shape",
            why: format!("{nrows}×{ncols} elements of {size} bytes overflow usize"),
        })
}

/// Element count (at least 1) of the device allocation for a [`DevVec`] of `len`
/// `T`s, checked as [`mat_alloc_len`].
fn vec_alloc_len<T>(len: usize) -> Result<usize> {
    let size = core::mem::size_of::<T>();
    let len = len.max(1);
    match len.checked_mul(size) {
        Some(_) => Ok(len),
        None => Err(Error::InvalidParam {
            op: "DevVec",
            what: "length",
            why: format!("{len} elements of {size} bytes overflow usize"),
        }),
    }
}

/// Elements a column-major `rows × cols` block with leading dimension `ld` spans.
fn span(rows: usize, cols: usize, ld: usize) -> usize {
    if rows == 0 || cols == 0 {
        0
    } else {
        ld * (cols - 1) + rows
    }
}

fn shape_err(op: &'static str, what: &'static str, got: usize, expected: usize) -> Error {
    Error::Shape {
        op,
        what,
        got,
        expected,
    }
}

/// A column-major `nrows × ncols` matrix in device memory with leading
/// dimension `ld` = `padded_ld(nrows)`. The padding rows are part of the
/// allocation (zero after [`DevMat::zeros`]) and no cuqr kernel writes them.
#[derive(Debug)]
pub struct DevMat<T> {
    buf: CudaSlice<T>,
    nrows: usize,
    ncols: usize,
    ld: usize,
}

/// A borrowed column-major block of device memory: rows × cols with leading
/// dimension `ld`; the view's buffer starts at element (0, 0) of the block.
#[derive(Debug)]
pub struct DevMatView<'a, T> {
    buf: CudaView<'a, T>,
    nrows: usize,
    ncols: usize,
    ld: usize,
}

/// A mutably borrowed column-major block of device memory (see [`DevMatView`]).
#[derive(Debug)]
pub struct DevMatViewMut<'a, T> {
    buf: CudaViewMut<'a, T>,
    nrows: usize,
    ncols: usize,
    ld: usize,
}

/// The `nrows`, `ncols` and `ld` accessors of a matrix or view type.
macro_rules! view_dims {
    ($ld_doc:literal) => {
        /// Rows.
        pub fn nrows(&self) -> usize {
            self.nrows
        }
        /// Columns.
        pub fn ncols(&self) -> usize {
            self.ncols
        }
        #[doc = $ld_doc]
        pub fn ld(&self) -> usize {
            self.ld
        }
    };
}

impl<T: GpuScalar> DevMat<T> {
    /// A matrix over `buf` with these dimensions, not checked: every caller allocates
    /// `buf` with at least ld·ncols elements.
    fn from_parts(buf: CudaSlice<T>, nrows: usize, ncols: usize, ld: usize) -> Self {
        Self {
            buf,
            nrows,
            ncols,
            ld,
        }
    }

    /// An `nrows × ncols` matrix of zeros (padding included).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn zeros(gpu: &Gpu, nrows: usize, ncols: usize) -> Result<Self> {
        let (ld, len) = mat_alloc_len::<T>(nrows, ncols)?;
        let buf = gpu
            .stream
            .alloc_zeroed::<T>(len)
            .map_err(alloc_err("DevMat", len * core::mem::size_of::<T>()))?;
        Ok(Self::from_parts(buf, nrows, ncols, ld))
    }

    /// An `nrows × ncols` matrix whose contents are left unset (no fill pass over
    /// the allocation): for outputs that a kernel writes in full before anything
    /// reads them.
    ///
    /// # Contract
    /// Every element that is read (through views, copies or kernels) must have been
    /// written first; reading an unset element gives arbitrary values.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn uninit(gpu: &Gpu, nrows: usize, ncols: usize) -> Result<Self> {
        let (ld, len) = mat_alloc_len::<T>(nrows, ncols)?;
        // SAFETY: the contents are unset; the caller writes before reading (contract).
        let buf = crate::gpu::ffi::driver::alloc_uninit::<T>(&gpu.stream, len)
            .map_err(alloc_err("DevMat", len * core::mem::size_of::<T>()))?;
        Ok(Self::from_parts(buf, nrows, ncols, ld))
    }

    /// An `nrows × ncols` matrix for work on [`Gpu::stream`] that writes every element
    /// of rows 0..nrows: the padding rows are zeroed (one 2D memset of ld − nrows rows,
    /// none when there are none), the rest is left unset. The state matrices' padding
    /// stays zero as after [`DevMat::zeros`], without a fill pass over the whole
    /// allocation (0.4 ms for the 12000×12000 f64 Q that row deletion makes).
    ///
    /// # Contract
    /// Every element of rows 0..nrows must be written by work queued on `gpu.stream`
    /// after this call before anything reads it.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn for_overwrite(gpu: &Gpu, nrows: usize, ncols: usize) -> Result<Self> {
        if nrows == 0 || ncols == 0 {
            return Self::zeros(gpu, nrows, ncols);
        }
        // Rows 0..nrows are the caller's to write before any read (contract);
        // the padding is zeroed below.
        let mut m = Self::uninit(gpu, nrows, ncols)?;
        if m.ld > nrows {
            gpu.ctx
                .bind_to_thread()
                .map_err(driver_err("zeroing DevMat padding"))?;
            gpu.count_launch();
            crate::gpu::ffi::driver::zero_padding_rows(
                &gpu.stream,
                &mut m.buf,
                nrows,
                m.ld,
                ncols,
            )?;
        }
        Ok(m)
    }

    /// Uploads a host matrix (padding rows zero).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn from_host(gpu: &Gpu, a: MatRef<'_, T>) -> Result<Self> {
        let mut m = Self::zeros(gpu, a.nrows(), a.ncols())?;
        m.upload(gpu, a)?;
        Ok(m)
    }

    /// [`DevMat::from_host`] without waiting (the updates' inputs): the
    /// matrix is packed (padding rows zero) into the page-locked [`UploadStaging`] kept
    /// on [`Gpu`] and copied by one asynchronous copy on [`Gpu::stream`], so later work
    /// on that stream sees it; no memset (the copy writes every element), no
    /// synchronisation unless the staging is full or too small.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn from_host_async(gpu: &Gpu, a: MatRef<'_, T>) -> Result<Self> {
        let (nrows, ncols) = (a.nrows(), a.ncols());
        let (ld, len) = mat_alloc_len::<T>(nrows, ncols)?;
        // SAFETY: uninitialised device memory; the staged copy below writes all `len`
        // elements (padding rows and the one element of an empty matrix included)
        // before any later work on the stream can read them.
        let buf = crate::gpu::ffi::driver::alloc_uninit::<T>(&gpu.stream, len)
            .map_err(alloc_err("DevMat", len * core::mem::size_of::<T>()))?;
        let mut m = Self::from_parts(buf, nrows, ncols, ld);
        // Large blocks go in chunks of columns, each packed over rayon's pool and copied
        // as soon as it is packed, so the copy of one chunk runs while the next is packed
        // (docs/algorithms.md#host-uploads).
        let chunk_cols = staged_chunk_cols::<T>(ld, ncols);
        let mut j0 = 0;
        loop {
            let j1 = (j0 + chunk_cols).min(ncols);
            // the last chunk also holds the element of an empty matrix
            let end = if j1 == ncols { len } else { j1 * ld };
            stage_upload(gpu, (&mut m.buf, j0 * ld), end - j0 * ld, len, |host| {
                pack_columns(a, (j0, j1), ld, host);
            })?;
            if j1 == ncols {
                break;
            }
            j0 = j1;
        }
        Ok(m)
    }

    /// A device copy (same shape and ld, padding included): one allocation and one
    /// device-to-device copy, no memset (the copy writes the whole allocation).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn dup(&self, gpu: &Gpu) -> Result<Self> {
        let len = self.buf.len();
        // SAFETY: uninitialised device memory of the source's length; the copy below
        // overwrites all of it before any later work on the stream reads it.
        let mut buf = crate::gpu::ffi::driver::alloc_uninit::<T>(&gpu.stream, len)
            .map_err(alloc_err("DevMat", len * core::mem::size_of::<T>()))?;
        gpu.count_launch();
        gpu.stream
            .memcpy_dtod(&self.buf, &mut buf)
            .map_err(driver_err("DevMat copy"))?;
        Ok(Self::from_parts(buf, self.nrows, self.ncols, self.ld))
    }

    /// A device copy on [`Gpu::stream`] (same shape and layout).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn try_clone(&self, gpu: &Gpu) -> Result<Self> {
        self.dup(gpu)
    }

    /// The single column of an `nrows × 1` matrix as a [`DevVec`] of `nrows` elements, in
    /// the same allocation (no copy).
    ///
    /// # Errors
    /// [`Error::Shape`] when the matrix has more than one column.
    pub fn into_column_vec(self) -> Result<DevVec<T>> {
        if self.ncols != 1 {
            return Err(Error::Shape {
                op: "DevMat::into_column_vec",
                what: "columns",
                got: self.ncols,
                expected: 1,
            });
        }
        Ok(DevVec {
            buf: self.buf,
            len: self.nrows,
        })
    }

    view_dims!("Leading dimension in elements (a multiple of 128 bytes).");
    /// The whole allocation (ld·ncols elements, at least 1).
    pub fn buf(&self) -> &CudaSlice<T> {
        &self.buf
    }
    /// The whole allocation, mutable.
    pub fn buf_mut(&mut self) -> &mut CudaSlice<T> {
        &mut self.buf
    }

    /// Packs `a` into the padded layout (padding rows zero).
    fn pack(&self, a: MatRef<'_, T>, out: &mut [T]) {
        for j in 0..self.ncols {
            let col = &mut out[j * self.ld..(j + 1) * self.ld];
            col[..self.nrows].copy_from_slice(a.col(j));
            col[self.nrows..].fill(T::ZERO);
        }
    }

    fn check_same_shape(&self, op: &'static str, a: MatRef<'_, T>) -> Result<()> {
        if a.nrows() != self.nrows {
            return Err(shape_err(op, "rows", a.nrows(), self.nrows));
        }
        if a.ncols() != self.ncols {
            return Err(shape_err(op, "columns", a.ncols(), self.ncols));
        }
        Ok(())
    }

    /// Overwrites the matrix (and zeroes its padding) with `a` (same shape),
    /// through a pageable host buffer.
    ///
    /// # Errors
    /// [`Error::Shape`] if the shapes differ; [`Error::Driver`].
    pub fn upload(&mut self, gpu: &Gpu, a: MatRef<'_, T>) -> Result<()> {
        self.check_same_shape("DevMat::upload", a)?;
        let mut host = vec![T::ZERO; self.buf.len()];
        self.pack(a, &mut host);
        gpu.count_launch();
        gpu.stream
            .memcpy_htod(&host, &mut self.buf)
            .map_err(driver_err("DevMat upload"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("DevMat upload"))
    }

    /// Like [`DevMat::upload`], staging through page-locked memory (≥ ld·ncols
    /// elements, e.g. from [`Gpu::alloc_pinned`]), which is what makes large
    /// transfers run at full PCIe/NVLink speed (TUS protocol).
    ///
    /// # Errors
    /// [`Error::Shape`] if the shapes differ or `staging` is too short; [`Error::Driver`].
    pub fn upload_pinned(
        &mut self,
        gpu: &Gpu,
        a: MatRef<'_, T>,
        staging: &mut PinnedHostSlice<T>,
    ) -> Result<()> {
        self.check_same_shape("DevMat::upload_pinned", a)?;
        let len = self.buf.len();
        if staging.len() < len {
            return Err(shape_err(
                "DevMat::upload_pinned",
                "staging length",
                staging.len(),
                len,
            ));
        }
        let host = staging
            .as_mut_slice()
            .map_err(driver_err("pinned staging"))?;
        self.pack(a, &mut host[..len]);
        gpu.count_launch();
        // Exactly the allocation's length: cudarc copies as many elements as the host
        // side holds, and a longer staging buffer would fail its length assert. The
        // slice is page-locked memory all the same; the wait below completes the copy
        // before `staging` can be touched again.
        gpu.stream
            .memcpy_htod(&host[..len], &mut self.buf)
            .map_err(driver_err("DevMat pinned upload"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("DevMat pinned upload"))
    }

    fn unpack(&self, host: &[T]) -> Mat<T> {
        Mat::from_fn(self.nrows, self.ncols, |i, j| host[i + j * self.ld])
    }

    /// Downloads the matrix (without padding).
    ///
    /// # Errors
    /// [`Error::Driver`] (including an earlier asynchronous fault).
    pub fn to_host(&self, gpu: &Gpu) -> Result<Mat<T>> {
        let host = self.download_raw(gpu)?;
        Ok(self.unpack(&host))
    }

    /// Downloads through page-locked staging (≥ ld·ncols elements).
    ///
    /// # Errors
    /// [`Error::Shape`] if `staging` is too short; [`Error::Driver`].
    pub fn download_pinned(&self, gpu: &Gpu, staging: &mut PinnedHostSlice<T>) -> Result<Mat<T>> {
        let len = self.buf.len();
        if staging.len() < len {
            return Err(shape_err(
                "DevMat::download_pinned",
                "staging length",
                staging.len(),
                len,
            ));
        }
        gpu.count_launch();
        let host = staging
            .as_mut_slice()
            .map_err(driver_err("pinned staging"))?;
        // Exactly the allocation's length: cudarc copies as many elements as the host
        // side holds, so a longer staging buffer would read past the device buffer.
        gpu.stream
            .memcpy_dtoh(&self.buf, &mut host[..len])
            .map_err(driver_err("DevMat pinned download"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("DevMat pinned download"))?;
        Ok(self.unpack(&host[..len]))
    }

    /// The whole allocation, padding included (ld·ncols elements, at least 1),
    /// e.g. to check that padding stays untouched.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn download_raw(&self, gpu: &Gpu) -> Result<Vec<T>> {
        gpu.count_launch();
        let v = gpu
            .stream
            .clone_dtoh(&self.buf)
            .map_err(driver_err("DevMat download"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("DevMat download"))?;
        Ok(v)
    }

    /// Overwrites the whole allocation, padding included, with `data`
    /// (ld·ncols elements, at least 1; element (i, j) at `data[i + j·ld]`),
    /// e.g. to place sentinels in the padding that kernels must not touch.
    ///
    /// # Errors
    /// [`Error::Shape`] if `data` has the wrong length; [`Error::Driver`].
    pub fn upload_raw(&mut self, gpu: &Gpu, data: &[T]) -> Result<()> {
        if data.len() != self.buf.len() {
            return Err(shape_err(
                "DevMat::upload_raw",
                "data length",
                data.len(),
                self.buf.len(),
            ));
        }
        gpu.count_launch();
        gpu.stream
            .memcpy_htod(data, &mut self.buf)
            .map_err(driver_err("DevMat raw upload"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("DevMat raw upload"))
    }

    /// Sets every element, padding included, to `value` (e.g. NaN to poison
    /// outputs before a launch in tests).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn fill(&mut self, gpu: &Gpu, value: T) -> Result<()> {
        let host = vec![value; self.buf.len()];
        gpu.count_launch();
        gpu.stream
            .memcpy_htod(&host, &mut self.buf)
            .map_err(driver_err("DevMat fill"))?;
        gpu.stream.synchronize().map_err(driver_err("DevMat fill"))
    }

    /// The whole matrix as a view.
    pub fn view(&self) -> DevMatView<'_, T> {
        self.block(0, 0, self.nrows, self.ncols)
    }

    /// The whole matrix as a mutable view.
    pub fn view_mut(&mut self) -> DevMatViewMut<'_, T> {
        let (r, c) = (self.nrows, self.ncols);
        self.block_mut(0, 0, r, c)
    }

    fn block_range(&self, row0: usize, col0: usize, rows: usize, cols: usize) -> Range<usize> {
        assert!(
            row0 + rows <= self.nrows && col0 + cols <= self.ncols,
            "block ({row0}, {col0}, {rows}, {cols}) outside {}×{}",
            self.nrows,
            self.ncols
        );
        let off = (row0 + col0 * self.ld).min(self.buf.len());
        off..off + span(rows, cols, self.ld)
    }

    /// The sub-block rows row0..row0+rows, columns col0..col0+cols
    /// (pointer offset row0 + col0·ld, same ld).
    ///
    /// # Panics
    /// If the block does not fit.
    pub fn block(&self, row0: usize, col0: usize, rows: usize, cols: usize) -> DevMatView<'_, T> {
        let r = self.block_range(row0, col0, rows, cols);
        DevMatView::from_parts(self.buf.slice(r), rows, cols, self.ld)
    }

    /// The sub-block as a mutable view.
    ///
    /// # Panics
    /// If the block does not fit.
    pub fn block_mut(
        &mut self,
        row0: usize,
        col0: usize,
        rows: usize,
        cols: usize,
    ) -> DevMatViewMut<'_, T> {
        let r = self.block_range(row0, col0, rows, cols);
        let ld = self.ld;
        DevMatViewMut::from_parts(self.buf.slice_mut(r), rows, cols, ld)
    }

    /// Keeps the first `ncols` columns in place: no allocation, no copy, no device
    /// work (column deletion at the end). The matrix becomes nrows × ncols
    /// over the same allocation, whose buffer is re-described as its first ld·ncols
    /// elements; the trailing columns' memory stays allocated, unused, until the
    /// matrix is freed (the free releases the whole allocation by its base pointer).
    ///
    /// # Panics
    /// If `ncols` is 0 or more than the current column count. Should cudarc fail to
    /// create the buffer's tracking events (it panics there) the process aborts: the
    /// buffer is between its old and new descriptions at that point.
    pub(crate) fn truncate_cols(&mut self, ncols: usize) {
        assert!(
            ncols >= 1 && ncols <= self.ncols,
            "truncate_cols({ncols}) of {} columns",
            self.ncols
        );
        if ncols == self.ncols {
            return;
        }
        crate::gpu::ffi::driver::shrink_in_place(&mut self.buf, self.ld * ncols);
        self.ncols = ncols;
    }

    /// Rows `rows` of column `j` as a vector view.
    ///
    /// # Panics
    /// If out of range.
    pub fn col(&self, j: usize, rows: Range<usize>) -> CudaView<'_, T> {
        assert!(j < self.ncols && rows.start <= rows.end && rows.end <= self.nrows);
        self.buf
            .slice(j * self.ld + rows.start..j * self.ld + rows.end)
    }

    /// Rows `rows` of column `j` as a mutable vector view.
    ///
    /// # Panics
    /// If out of range.
    pub fn col_mut(&mut self, j: usize, rows: Range<usize>) -> CudaViewMut<'_, T> {
        assert!(j < self.ncols && rows.start <= rows.end && rows.end <= self.nrows);
        let ld = self.ld;
        self.buf.slice_mut(j * ld + rows.start..j * ld + rows.end)
    }
}

/// `Ok` when a column-major rows × cols view with leading dimension `ld` fits a buffer of
/// `len` elements, else [`Error::Shape`] for `op`.
fn check_view(op: &'static str, len: usize, rows: usize, cols: usize, ld: usize) -> Result<()> {
    if ld < rows.max(1) {
        return Err(shape_err(op, "leading dimension", ld, rows.max(1)));
    }
    if len < span(rows, cols, ld) {
        return Err(shape_err(op, "buffer length", len, span(rows, cols, ld)));
    }
    Ok(())
}

impl<'a, T> DevMatView<'a, T> {
    /// A view of `buf` with these dimensions, not checked: every caller passes a buffer
    /// that spans ld·(ncols−1)+nrows elements (or a checked one, in `new`).
    fn from_parts(buf: CudaView<'a, T>, nrows: usize, ncols: usize, ld: usize) -> Self {
        Self {
            buf,
            nrows,
            ncols,
            ld,
        }
    }
    /// A column-major rows × cols view of `buf` with leading dimension `ld`.
    ///
    /// # Errors
    /// [`Error::Shape`] if `ld < rows` or `buf` is shorter than the block spans.
    pub fn new(buf: CudaView<'a, T>, rows: usize, cols: usize, ld: usize) -> Result<Self> {
        check_view("DevMatView::new", buf.len(), rows, cols, ld)?;
        Ok(Self::from_parts(buf, rows, cols, ld))
    }
    view_dims!("Leading dimension.");
    /// The buffer, starting at element (0, 0), spanning ld·(ncols−1)+nrows elements.
    pub fn buf(&self) -> &CudaView<'a, T> {
        &self.buf
    }
    /// The sub-block rows row0..row0+rows, columns col0..col0+cols of this view.
    ///
    /// # Panics
    /// If the block does not fit.
    pub fn block(&self, row0: usize, col0: usize, rows: usize, cols: usize) -> DevMatView<'_, T> {
        assert!(
            row0 + rows <= self.nrows && col0 + cols <= self.ncols,
            "block {row0}+{rows} x {col0}+{cols} outside a {}x{} view",
            self.nrows,
            self.ncols
        );
        let off = (row0 + col0 * self.ld).min(self.buf.len());
        let end = off + span(rows, cols, self.ld);
        DevMatView::from_parts(self.buf.slice(off..end), rows, cols, self.ld)
    }
    /// Downloads the block into a host matrix.
    ///
    /// # Errors
    /// [`Error::Driver`] (including an earlier asynchronous fault).
    pub fn to_host(&self, gpu: &Gpu) -> Result<Mat<T>>
    where
        T: GpuScalar,
    {
        let mut own = DevMat::<T>::for_overwrite(gpu, self.nrows, self.ncols)?;
        if self.nrows > 0 && self.ncols > 0 {
            gpu.panel_copy(self, &mut own.view_mut())?;
        }
        own.to_host(gpu)
    }
    /// The same block, borrowed for a shorter time.
    pub fn reborrow(&self) -> DevMatView<'_, T> {
        DevMatView::from_parts(self.buf.slice(..), self.nrows, self.ncols, self.ld)
    }
}

impl<'a, T> DevMatViewMut<'a, T> {
    /// A view of `buf` with these dimensions, not checked: every caller passes a buffer
    /// that spans ld·(ncols−1)+nrows elements (or a checked one, in `new`).
    fn from_parts(buf: CudaViewMut<'a, T>, nrows: usize, ncols: usize, ld: usize) -> Self {
        Self {
            buf,
            nrows,
            ncols,
            ld,
        }
    }
    /// A mutable column-major rows × cols view of `buf` with leading dimension `ld`.
    ///
    /// # Errors
    /// [`Error::Shape`] if `ld < rows` or `buf` is shorter than the block spans.
    pub fn new(buf: CudaViewMut<'a, T>, rows: usize, cols: usize, ld: usize) -> Result<Self> {
        check_view("DevMatViewMut::new", buf.len(), rows, cols, ld)?;
        Ok(Self::from_parts(buf, rows, cols, ld))
    }
    view_dims!("Leading dimension.");
    /// The buffer, starting at element (0, 0).
    pub fn buf(&self) -> &CudaViewMut<'a, T> {
        &self.buf
    }
    /// The buffer, mutable.
    pub fn buf_mut(&mut self) -> &mut CudaViewMut<'a, T> {
        &mut self.buf
    }
    /// A read-only reborrow.
    pub fn as_view(&self) -> DevMatView<'_, T> {
        DevMatView::from_parts(self.buf.as_view(), self.nrows, self.ncols, self.ld)
    }
}

/// A vector in device memory (also used for device scalars: τ, results of
/// reductions).
#[derive(Debug)]
pub struct DevVec<T> {
    buf: CudaSlice<T>,
    len: usize,
}

impl<T: GpuScalar> DevVec<T> {
    /// `len` zeros.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn zeros(gpu: &Gpu, len: usize) -> Result<Self> {
        let n = vec_alloc_len::<T>(len)?;
        let buf = gpu
            .stream
            .alloc_zeroed::<T>(n)
            .map_err(alloc_err("DevVec", n * core::mem::size_of::<T>()))?;
        Ok(Self { buf, len })
    }

    /// `len` elements left unset (see [`DevMat::uninit`]).
    ///
    /// # Safety
    /// Every element that is read must have been written first.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn uninit(gpu: &Gpu, len: usize) -> Result<Self> {
        let n = vec_alloc_len::<T>(len)?;
        // SAFETY: the contents are unset; the caller writes before reading (contract).
        let buf = crate::gpu::ffi::driver::alloc_uninit::<T>(&gpu.stream, n)
            .map_err(alloc_err("DevVec", n * core::mem::size_of::<T>()))?;
        Ok(Self { buf, len })
    }

    /// Uploads a host slice.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn from_slice(gpu: &Gpu, x: &[T]) -> Result<Self> {
        let mut v = Self::zeros(gpu, x.len())?;
        v.upload(gpu, x)?;
        Ok(v)
    }

    /// [`DevVec::from_slice`] without waiting: staged through the page-locked
    /// [`UploadStaging`] on [`Gpu`] and copied asynchronously on [`Gpu::stream`]
    /// (as [`DevMat::from_host_async`]).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn from_slice_async(gpu: &Gpu, x: &[T]) -> Result<Self> {
        let len = vec_alloc_len::<T>(x.len())?;
        // SAFETY: uninitialised device memory; the staged copy below writes all `len`
        // elements (a zero for the one element of an empty vector).
        let mut buf = crate::gpu::ffi::driver::alloc_uninit::<T>(&gpu.stream, len)
            .map_err(alloc_err("DevVec", len * core::mem::size_of::<T>()))?;
        stage_upload(gpu, (&mut buf, 0), len, len, |host| {
            host[..x.len()].copy_from_slice(x);
            host[x.len()..].fill(T::ZERO);
        })?;
        Ok(Self { buf, len: x.len() })
    }

    /// Overwrites the vector with `x` (same length).
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::Driver`].
    pub fn upload(&mut self, gpu: &Gpu, x: &[T]) -> Result<()> {
        if x.len() != self.len {
            return Err(shape_err("DevVec::upload", "length", x.len(), self.len));
        }
        if x.is_empty() {
            return Ok(());
        }
        let mut dst = self.buf.slice_mut(0..self.len);
        gpu.count_launch();
        gpu.stream
            .memcpy_htod(x, &mut dst)
            .map_err(driver_err("DevVec upload"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("DevVec upload"))
    }

    /// Downloads the vector.
    ///
    /// # Errors
    /// [`Error::Driver`] (including an earlier asynchronous fault).
    pub fn to_vec(&self, gpu: &Gpu) -> Result<Vec<T>> {
        gpu.count_launch();
        let mut v = gpu
            .stream
            .clone_dtoh(&self.buf)
            .map_err(driver_err("DevVec download"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("DevVec download"))?;
        v.truncate(self.len);
        Ok(v)
    }

    /// Sets every element to `value` (e.g. NaN poisoning).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn fill(&mut self, gpu: &Gpu, value: T) -> Result<()> {
        let host = vec![value; self.buf.len()];
        gpu.count_launch();
        gpu.stream
            .memcpy_htod(&host, &mut self.buf)
            .map_err(driver_err("DevVec fill"))?;
        gpu.stream.synchronize().map_err(driver_err("DevVec fill"))
    }

    /// Length.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The whole vector as a view.
    pub fn view(&self) -> CudaView<'_, T> {
        self.buf.slice(0..self.len)
    }
    /// The whole vector as a mutable view.
    pub fn view_mut(&mut self) -> CudaViewMut<'_, T> {
        self.buf.slice_mut(0..self.len)
    }
    /// Elements `r` as a view.
    ///
    /// # Panics
    /// If out of range.
    pub fn slice(&self, r: Range<usize>) -> CudaView<'_, T> {
        assert!(r.start <= r.end && r.end <= self.len);
        self.buf.slice(r)
    }
    /// Elements `r` as a mutable view.
    ///
    /// # Panics
    /// If out of range.
    pub fn slice_mut(&mut self, r: Range<usize>) -> CudaViewMut<'_, T> {
        assert!(r.start <= r.end && r.end <= self.len);
        self.buf.slice_mut(r)
    }
    /// The vector as a column-major len × 1 matrix view.
    pub fn as_col(&self) -> DevMatView<'_, T> {
        DevMatView::from_parts(self.view(), self.len, 1, self.len.max(1))
    }
}

/// Bytes of one staged chunk of a large upload ([`DevMat::from_host_async`]).
const STAGED_CHUNK_BYTES: usize = 4 << 20;
/// Bytes of a chunk from which its packing is spread over rayon's pool.
const PARALLEL_PACK_MIN_BYTES: usize = 1 << 20;

/// Columns per staged chunk of a matrix of `ncols` columns of `ld` elements: all of them
/// below two chunks' worth, else about [`STAGED_CHUNK_BYTES`] (at least one column).
fn staged_chunk_cols<T>(ld: usize, ncols: usize) -> usize {
    let col_bytes = (ld * core::mem::size_of::<T>()).max(1);
    if col_bytes.saturating_mul(ncols) < 2 * STAGED_CHUNK_BYTES {
        return ncols.max(1);
    }
    (STAGED_CHUNK_BYTES / col_bytes).max(1)
}

/// Packs columns j0..j1 of `a` into `out` (column j at `(j − j0)·ld`, its padding rows
/// zero; anything past the last column zero, as the element of an empty matrix): one
/// pass over `out` (a fill of the whole buffer first doubled the host's share of an
/// update's upload), over rayon's pool when `out` is large.
fn pack_columns<T: GpuScalar>(
    a: MatRef<'_, T>,
    (j0, j1): (usize, usize),
    ld: usize,
    out: &mut [T],
) {
    let rows = a.nrows();
    let (cols, tail) = out.split_at_mut((j1 - j0) * ld);
    tail.fill(T::ZERO);
    let pack = |(k, col): (usize, &mut [T])| {
        col[..rows].copy_from_slice(a.col(j0 + k));
        col[rows..].fill(T::ZERO);
    };
    debug_assert!(ld > 0, "a padded leading dimension");
    if core::mem::size_of_val(cols) >= PARALLEL_PACK_MIN_BYTES && j1 - j0 > 1 {
        use rayon::prelude::*;
        cols.par_chunks_mut(ld).enumerate().for_each(pack);
    } else {
        cols.chunks_mut(ld).enumerate().for_each(pack);
    }
}

pub(crate) use crate::gpu::ffi::driver::UploadStaging;

/// Copies `len` elements of T, written into page-locked staging by `fill`, into
/// `dst` from element `at` on with one asynchronous copy on [`Gpu::stream`]; the staging
/// is grown to hold `whole` elements (the whole upload this copy is a chunk of).
fn stage_upload<T: GpuScalar>(
    gpu: &Gpu,
    (dst, at): (&mut CudaSlice<T>, usize),
    len: usize,
    whole: usize,
    fill: impl FnOnce(&mut [T]),
) -> Result<()> {
    let need = (whole.max(len) * core::mem::size_of::<T>()).div_ceil(8);
    let mut guard = gpu.upload_staging.lock().unwrap_or_else(|e| e.into_inner());
    if guard.as_ref().is_none_or(|s| s.len() < need) {
        // Dropping the old staging waits for its copies.
        *guard = None;
        let cap = need.next_power_of_two().max(UploadStaging::MIN_LEN);
        *guard = Some(UploadStaging::new(&gpu.ctx, cap)?);
    }
    let st = guard.as_mut().expect("made above");
    gpu.ctx
        .bind_to_thread()
        .map_err(driver_err("upload staging"))?;
    gpu.count_launch();
    st.upload(&gpu.stream, (dst, at), len, LD_ALIGN_BYTES / 8, fill)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Device allocation sizes are checked on the host: shapes whose padded byte
    /// size overflows usize are refused before any device work (the products
    /// `ld · ncols` and `len · size_of::<T>()` wrapped in release builds, giving a
    /// short allocation for a huge shape, and panicked in debug builds).
    #[test]
    fn allocation_sizes_that_overflow_are_errors() {
        assert_eq!(mat_alloc_len::<f64>(17, 3).unwrap(), (32, 96));
        assert_eq!(mat_alloc_len::<f32>(0, 0).unwrap(), (32, 1));
        assert_eq!(vec_alloc_len::<f64>(0).unwrap(), 1);
        for (m, n) in [
            (usize::MAX, 1),
            (1 << 32, 1 << 32),
            (16, usize::MAX / 16 + 1),
            (16, usize::MAX / 64),
        ] {
            let e = mat_alloc_len::<f64>(m, n).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidParam {
                        op: "DevMat",
                        what: "shape",
                        ..
                    }
                ),
                "{m}x{n}: {e:?}"
            );
        }
        assert!(matches!(
            vec_alloc_len::<f32>(usize::MAX / 2),
            Err(Error::InvalidParam { op: "DevVec", .. })
        ));
        assert_eq!(
            vec_alloc_len::<f32>(usize::MAX / 4).unwrap(),
            usize::MAX / 4
        );
    }

    #[test]
    fn ld_is_padded_to_128_bytes() {
        assert_eq!(padded_ld::<f32>(1), 32);
        assert_eq!(padded_ld::<f32>(33), 64);
        assert_eq!(padded_ld::<f64>(16), 16);
        assert_eq!(padded_ld::<f64>(17), 32);
        assert_eq!(padded_ld::<f64>(0), 16);
        for n in [1usize, 31, 33, 1000, 4097] {
            assert_eq!(padded_ld::<f64>(n) * 8 % LD_ALIGN_BYTES, 0);
            assert!(padded_ld::<f64>(n) >= n && padded_ld::<f64>(n) < n + 16);
        }
    }

    #[test]
    fn span_counts_the_last_partial_column() {
        assert_eq!(span(5, 3, 16), 37);
        assert_eq!(span(0, 3, 16), 0);
        assert_eq!(span(5, 0, 16), 0);
    }

    /// A large upload's chunks, packed one after the other into the regions a staging
    /// would hold them in, give the padded layout of the whole matrix: every element in
    /// place, padding rows zero, for views with ld > rows and the one element of an
    /// empty matrix; chunks hold whole columns and cover them all.
    #[test]
    fn chunked_packing_gives_the_padded_layout() {
        for (rows, cols, src_ld) in [
            (1500usize, 1400usize, 1503usize),
            (3000, 700, 3000),
            (5, 0, 5),
            (0, 3, 1),
        ] {
            let data: Vec<f64> = (0..src_ld * cols.max(1)).map(|k| 1.0 + k as f64).collect();
            let a = MatRef::new(&data, rows, cols, src_ld).unwrap();
            let (ld, len) = mat_alloc_len::<f64>(rows, cols).unwrap();
            let per = staged_chunk_cols::<f64>(ld, cols);
            assert!(per >= 1);
            if ld * 8 * cols >= 2 * STAGED_CHUNK_BYTES {
                assert!(per < cols && per * ld * 8 <= STAGED_CHUNK_BYTES);
            }
            let mut out = vec![f64::NAN; len];
            let mut j0 = 0;
            loop {
                let j1 = (j0 + per).min(cols);
                let end = if j1 == cols { len } else { j1 * ld };
                pack_columns(a, (j0, j1), ld, &mut out[j0 * ld..end]);
                if j1 == cols {
                    break;
                }
                j0 = j1;
            }
            for j in 0..cols {
                assert_eq!(
                    &out[j * ld..j * ld + rows],
                    a.col(j),
                    "{rows}x{cols}: column {j}"
                );
                assert!(out[j * ld + rows..(j + 1) * ld].iter().all(|x| *x == 0.0));
            }
            assert!(out[cols * ld..].iter().all(|x| *x == 0.0));
        }
    }

    fn gpu() -> Option<Gpu> {
        crate::gpu::algo::householder::tests_gate()
    }

    fn host_mat<T: GpuScalar>(seed: u64, rows: usize, cols: usize) -> Mat<T> {
        // Never zero: 1 + (a hash of the position and the seed) / 2^20.
        Mat::from_fn(rows, cols, |i, j| {
            let h = (i as u64 * 2_654_435_761 + j as u64 * 40_503 + seed * 97) % (1 << 20);
            T::from_f64(1.0 + h as f64 / (1u64 << 20) as f64)
        })
    }

    /// Staged uploads (the updates' inputs) arrive exactly, padding zero, through many
    /// uploads in a row: regions side by side, wrap-around of the staging once it is
    /// full, and growth for one upload larger than it; interleaved with a device copy.
    fn staged_uploads_case<T: GpuScalar>(g: &Gpu) {
        let shapes = [
            (1200usize, 20usize),
            (7, 3),
            (1, 1),
            (2, 4),
            (513, 257),
            (31, 1),
        ];
        let mut kept = Vec::new();
        for round in 0..6u64 {
            for (k, &(r, c)) in shapes.iter().enumerate() {
                let a = host_mat::<T>(round * 10 + k as u64, r, c);
                let d = DevMat::from_host_async(g, a.as_ref()).unwrap();
                kept.push((a, d));
            }
            // larger than the smallest staging (1 MiB): makes it grow
            if round == 3 {
                let a = host_mat::<T>(999, 700, 400);
                let d = DevMat::from_host_async(g, a.as_ref()).unwrap();
                kept.push((a, d));
            }
            // past two chunks (8 MiB): copied in chunks of columns, each packed over
            // the pool, the staging grown first and its regions wrapping mid-upload in
            // the later rounds
            if round == 4 || round == 5 {
                let a = host_mat::<T>(round, 2100 + round as usize, 1100);
                let d = DevMat::from_host_async(g, a.as_ref()).unwrap();
                kept.push((a, d));
            }
        }
        for (a, d) in &kept {
            let copy = d.dup(g).unwrap();
            assert!(copy.to_host(g).unwrap() == *a);
            let raw = d.download_raw(g).unwrap();
            for j in 0..a.ncols() {
                assert!(raw[j * d.ld() + a.nrows()..(j + 1) * d.ld()]
                    .iter()
                    .all(|x| *x == T::ZERO));
            }
        }
        let v: Vec<T> = (0..1001).map(|i| T::from_f64(0.5 + i as f64)).collect();
        for len in [0usize, 1, 1001] {
            let dv = DevVec::from_slice_async(g, &v[..len]).unwrap();
            assert_eq!(dv.len(), len);
            assert!(dv.to_vec(g).unwrap() == v[..len]);
        }
    }

    #[test]
    fn staged_uploads_for_updates_arrive_exactly() {
        let Some(g) = gpu() else { return };
        staged_uploads_case::<f64>(&g);
        staged_uploads_case::<f32>(&g);
    }

    /// `for_overwrite` leaves zero padding after a pool allocation that held other data
    /// (the pool reuses memory, so the padding would otherwise be stale), and a copy
    /// that writes its rows gives exactly the source; padded and unpadded heights, one
    /// column, f32 and f64.
    fn for_overwrite_case<T: GpuScalar>(g: &Gpu) {
        for &(r, c) in &[(37usize, 11usize), (32, 3), (1, 1), (513, 2)] {
            // Fill and free an allocation of the same size first, with non-zero data.
            drop(DevMat::from_host(g, host_mat::<T>(7, r + 40, c).as_ref()).unwrap());
            let a = host_mat::<T>(r as u64, r, c);
            let src = DevMat::from_host(g, a.as_ref()).unwrap();
            // SAFETY: the copy below writes every element of the r rows.
            let mut d = DevMat::<T>::for_overwrite(g, r, c).unwrap();
            g.two_phase_copy(&src.view(), &mut d.view_mut(), 0..0, false)
                .unwrap();
            assert!(d.to_host(g).unwrap() == a, "{r}x{c}");
            let raw = d.download_raw(g).unwrap();
            for j in 0..c {
                assert!(
                    raw[j * d.ld() + r..(j + 1) * d.ld()]
                        .iter()
                        .all(|x| *x == T::ZERO),
                    "{r}x{c}: padding of column {j}"
                );
            }
        }
    }

    #[test]
    fn for_overwrite_zeroes_the_padding_only() {
        let Some(g) = gpu() else { return };
        for_overwrite_case::<f64>(&g);
        for_overwrite_case::<f32>(&g);
    }

    /// Column truncation in place (column deletion at the end): the first columns
    /// unchanged, the matrix usable by copies, downloads, views and a later drop.
    #[test]
    fn truncate_cols_for_updates_keeps_the_leading_columns() {
        let Some(g) = gpu() else { return };
        let a = host_mat::<f64>(5, 37, 11);
        let mut d = DevMat::from_host(&g, a.as_ref()).unwrap();
        d.truncate_cols(11);
        assert_eq!(d.ncols(), 11);
        d.truncate_cols(5);
        assert_eq!((d.nrows(), d.ncols(), d.buf().len()), (37, 5, d.ld() * 5));
        let want = Mat::from_fn(37, 5, |i, j| a[(i, j)]);
        assert!(d.to_host(&g).unwrap() == want);
        assert!(d.dup(&g).unwrap().to_host(&g).unwrap() == want);
        d.truncate_cols(1);
        let mut e = DevMat::<f64>::zeros(&g, 37, 1).unwrap();
        g.stream
            .memcpy_dtod(&d.col(0, 0..37), &mut e.col_mut(0, 0..37))
            .unwrap();
        assert!(e.to_host(&g).unwrap() == Mat::from_fn(37, 1, |i, _| a[(i, 0)]));
        drop(d);
        g.synchronize().unwrap();
    }
}
