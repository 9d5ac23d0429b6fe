//! Device matrices and vectors. [`DevMat`] is column-major with its leading
//! dimension padded to a multiple of 128 bytes (spec §1.6: every warp's access
//! to a column is one aligned segment). [`DevMatView`] / [`DevMatViewMut`]
//! are sub-blocks (pointer + ld) for launches; [`DevVec`] holds vectors and
//! scalars. Transfers run on [`Gpu::stream`] and complete before returning.

use core::ops::Range;

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, PinnedHostSlice};

use super::{alloc_err, driver_err, Gpu, GpuScalar};
use crate::error::{Error, Result};
use crate::mat::{Mat, MatRef};

/// Leading dimensions are padded to a multiple of this many bytes (spec §1.6).
pub const LD_ALIGN_BYTES: usize = 128;

/// The padded leading dimension for `nrows` rows of `T`: the smallest multiple
/// of 128 bytes that is ≥ max(nrows, 1) elements.
pub fn padded_ld<T>(nrows: usize) -> usize {
    let per = (LD_ALIGN_BYTES / core::mem::size_of::<T>()).max(1);
    nrows.max(1).div_ceil(per) * per
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
/// dimension `ld` = [`padded_ld`]`(nrows)`. The padding rows are part of the
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

impl<T: GpuScalar> DevMat<T> {
    /// An `nrows × ncols` matrix of zeros (padding included).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn zeros(gpu: &Gpu, nrows: usize, ncols: usize) -> Result<Self> {
        let ld = padded_ld::<T>(nrows);
        let len = (ld * ncols).max(1);
        let buf = gpu
            .stream
            .alloc_zeros::<T>(len)
            .map_err(alloc_err("DevMat", len * core::mem::size_of::<T>()))?;
        Ok(Self {
            buf,
            nrows,
            ncols,
            ld,
        })
    }

    /// An `nrows × ncols` matrix whose contents are left unset (no fill pass over
    /// the allocation): for outputs that a kernel writes in full before anything
    /// reads them.
    ///
    /// # Safety
    /// Every element that is read (through views, copies or kernels) must have been
    /// written first; reading an unset element gives arbitrary values.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) unsafe fn uninit(gpu: &Gpu, nrows: usize, ncols: usize) -> Result<Self> {
        let ld = padded_ld::<T>(nrows);
        let len = (ld * ncols).max(1);
        // SAFETY: the contents are unset; the caller writes before reading (contract).
        let buf = unsafe { gpu.stream.alloc::<T>(len) }
            .map_err(alloc_err("DevMat", len * core::mem::size_of::<T>()))?;
        Ok(Self {
            buf,
            nrows,
            ncols,
            ld,
        })
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

    /// Rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Leading dimension in elements (a multiple of 128 bytes).
    pub fn ld(&self) -> usize {
        self.ld
    }
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
    /// transfers run at full PCIe/NVLink speed (spec §3.9 TUS protocol).
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
        gpu.stream
            .memcpy_htod(staging, &mut self.buf)
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
        gpu.stream
            .memcpy_dtoh(&self.buf, staging)
            .map_err(driver_err("DevMat pinned download"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("DevMat pinned download"))?;
        let host = staging.as_slice().map_err(driver_err("pinned staging"))?;
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
        DevMatView {
            buf: self.buf.slice(r),
            nrows: rows,
            ncols: cols,
            ld: self.ld,
        }
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
        DevMatViewMut {
            buf: self.buf.slice_mut(r),
            nrows: rows,
            ncols: cols,
            ld,
        }
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

impl<'a, T> DevMatView<'a, T> {
    /// A column-major rows × cols view of `buf` with leading dimension `ld`.
    ///
    /// # Errors
    /// [`Error::Shape`] if `ld < rows` or `buf` is shorter than the block spans.
    pub fn new(buf: CudaView<'a, T>, rows: usize, cols: usize, ld: usize) -> Result<Self> {
        if ld < rows.max(1) {
            return Err(shape_err(
                "DevMatView::new",
                "leading dimension",
                ld,
                rows.max(1),
            ));
        }
        if buf.len() < span(rows, cols, ld) {
            return Err(shape_err(
                "DevMatView::new",
                "buffer length",
                buf.len(),
                span(rows, cols, ld),
            ));
        }
        Ok(Self {
            buf,
            nrows: rows,
            ncols: cols,
            ld,
        })
    }
    /// Rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Leading dimension.
    pub fn ld(&self) -> usize {
        self.ld
    }
    /// The buffer, starting at element (0, 0), spanning ld·(ncols−1)+nrows elements.
    pub fn buf(&self) -> &CudaView<'a, T> {
        &self.buf
    }
}

impl<'a, T> DevMatViewMut<'a, T> {
    /// A mutable column-major rows × cols view of `buf` with leading dimension `ld`.
    ///
    /// # Errors
    /// [`Error::Shape`] if `ld < rows` or `buf` is shorter than the block spans.
    pub fn new(buf: CudaViewMut<'a, T>, rows: usize, cols: usize, ld: usize) -> Result<Self> {
        if ld < rows.max(1) {
            return Err(shape_err(
                "DevMatViewMut::new",
                "leading dimension",
                ld,
                rows.max(1),
            ));
        }
        if buf.len() < span(rows, cols, ld) {
            return Err(shape_err(
                "DevMatViewMut::new",
                "buffer length",
                buf.len(),
                span(rows, cols, ld),
            ));
        }
        Ok(Self {
            buf,
            nrows: rows,
            ncols: cols,
            ld,
        })
    }
    /// Rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// Leading dimension.
    pub fn ld(&self) -> usize {
        self.ld
    }
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
        DevMatView {
            buf: self.buf.as_view(),
            nrows: self.nrows,
            ncols: self.ncols,
            ld: self.ld,
        }
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
        let buf = gpu
            .stream
            .alloc_zeros::<T>(len.max(1))
            .map_err(alloc_err("DevVec", len.max(1) * core::mem::size_of::<T>()))?;
        Ok(Self { buf, len })
    }

    /// `len` elements left unset (see [`DevMat::uninit`]).
    ///
    /// # Safety
    /// Every element that is read must have been written first.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) unsafe fn uninit(gpu: &Gpu, len: usize) -> Result<Self> {
        // SAFETY: the contents are unset; the caller writes before reading (contract).
        let buf = unsafe { gpu.stream.alloc::<T>(len.max(1)) }
            .map_err(alloc_err("DevVec", len.max(1) * core::mem::size_of::<T>()))?;
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
        DevMatView {
            buf: self.view(),
            nrows: self.len,
            ncols: 1,
            ld: self.len.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
