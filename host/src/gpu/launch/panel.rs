//! Typed launchers of the panel kernels (gpu-kernels/src/panel.rs, docs/kernels.md): the
//! machinery of the device blocked Householder QR (docs/algorithms.md#blocked-householder-qr)
//! and of the block updates (docs/algorithms.md#column-deletion,
//! docs/algorithms.md#row-insertion). Launches go on [`Gpu::stream`]; each checks its bounds
//! with `assert!` (a failure is a cuqr bug) and counts itself.
//!
//! Where a kernel reads one column of a matrix and writes other columns of the same
//! matrix, the launcher takes the owning [`DevMat`] and indices and passes raw device
//! pointers derived from the one buffer; the column ranges are asserted disjoint.
// Some of these serve only cuqr's benchmarks and kernel tests (the published algorithms'
// reference kernels, stage profiling), which reach them through the `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use core::ops::Range;

use cudarc::driver::{CudaViewMut, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::launch_kernel;
use crate::gpu::runtime::matrix::{DevMat, DevMatView, DevMatViewMut, DevVec};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Threads per block of the one-block-per-column kernels (`panel_apply`, `panel_col_norms`).
pub const PANEL_BLOCK: u32 = 256;
/// Threads per block of the elementwise 2-D kernels.
pub const ELEM_BLOCK: u32 = 128;
/// Largest grid y dimension; the 2-D kernels loop over columns with this stride.
const MAX_GRID_Y: usize = 65_535;

/// Blocks of an elementwise 2-D launch beyond which each thread takes several columns:
/// a 16384×4096 f32 copy as 524288 blocks of one 128-element column segment each ran at
/// 57 % of the copy bandwidth on an H100 (`cuqr bench kernels`), block
/// scheduling bound; f64, with twice the bytes a block, at 97 %.
const ELEM_MAX_BLOCKS: usize = 1 << 16;

/// Launch shape of the elementwise 2-D kernels: grid (⌈rows/128⌉, g), block 128, with
/// g = min(cols, 65535, max(1, [`ELEM_MAX_BLOCKS`] / ⌈rows/128⌉)); returns it with the
/// column stride (= grid y).
fn elem_cfg(rows: usize, cols: usize) -> (LaunchConfig, usize) {
    let bx = rows.div_ceil(ELEM_BLOCK as usize);
    let gx = u32::try_from(bx).expect("grid x fits u32");
    let gy = cols
        .min(MAX_GRID_Y)
        .min((ELEM_MAX_BLOCKS / bx.max(1)).max(1));
    (
        LaunchConfig {
            grid_dim: (gx, gy as u32, 1),
            block_dim: (ELEM_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        },
        gy,
    )
}

/// Rows a block of `panel_first_non_finite` scans: tall columns spread over many blocks.
const NON_FINITE_CHUNK: usize = 1 << 15;

/// One block of [`PANEL_BLOCK`] threads per column, with the reductions' shared memory.
fn col_cfg(cols: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (u32::try_from(cols).expect("grid x fits u32"), 1, 1),
        block_dim: (PANEL_BLOCK, 1, 1),
        shared_mem_bytes: PANEL_BLOCK * 8,
    }
}

/// Byte offset of element `i` of a `T` buffer.
fn off<T>(i: usize) -> u64 {
    (i * core::mem::size_of::<T>()) as u64
}

impl Gpu {
    /// `householder_house` on column `col` of `a`: α = a(row, col), tail
    /// a(row+1 .. row+1+len, col), τ into `tau[k]` (docs/algorithms.md#householder-vectors).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the column segment or `k` is out of range (a cuqr bug).
    pub(crate) fn house_at<T: GpuScalar>(
        &self,
        a: &mut DevMat<T>,
        row: usize,
        col: usize,
        len: usize,
        tau: &mut DevVec<T>,
        k: usize,
    ) -> Result<()> {
        let mut seg = a.col_mut(col, row..row + 1 + len);
        let (mut alpha, mut x) = seg.split_at_mut(1);
        let mut t = tau.slice_mut(k..k + 1);
        self.householder_house(&mut alpha, &mut x, &mut t)
    }

    /// Raw `panel_apply` launch (see [`Gpu::panel_apply_in`]).
    #[allow(clippy::too_many_arguments)]
    fn panel_apply_raw<T: GpuScalar>(
        &self,
        v: u64,
        tau: u64,
        head: u64,
        ldh: usize,
        tail: u64,
        ldt: usize,
        len: usize,
        ncols: usize,
    ) -> Result<()> {
        let f = &T::kernel_set(&self.kernels).panel_apply;
        // SAFETY: matches panel_apply_{f32,f64}(v: *const T, tau: *const T, head: *mut T,
        // ldh, tail: *mut T, ldt, len, ncols) (device pointers are 64-bit); the callers
        // assert that v[0..len), *tau, and for c < ncols head[c·ldh] and
        // tail[c·ldt..+len) lie inside their allocations, that the written columns are
        // disjoint from v's column, and hold the buffers' write guards across this call;
        // grid ncols, block 256, dyn smem 256·8 as the contract says.
        unsafe {
            launch_kernel!(self, f, col_cfg(ncols), "panel_apply"; &v, &tau, &head, &ldh,
                &tail, &ldt, &len, &ncols)
        }?;
        Ok(())
    }

    /// `panel_apply` within one matrix: the reflector stored as a(row, vcol) = head
    /// (implicit 1) and tail v = a(row+1 .. row+1+len, vcol), with τ = `tau[k]`, applied
    /// to rows row .. row+1+len of the columns `cols` (panel step,
    /// docs/algorithms.md#panel-variants-on-the-gpu).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a range is out of bounds or `vcol` lies in `cols` (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn panel_apply_in<T: GpuScalar>(
        &self,
        a: &mut DevMat<T>,
        vcol: usize,
        row: usize,
        len: usize,
        cols: Range<usize>,
        tau: &DevVec<T>,
        k: usize,
    ) -> Result<()> {
        if cols.is_empty() {
            return Ok(());
        }
        assert!(row + 1 + len <= a.nrows() && cols.end <= a.ncols() && vcol < a.ncols());
        assert!(!cols.contains(&vcol) && k < tau.len());
        let ld = a.ld();
        let tv = tau.slice(k..k + 1);
        let (pt, _gt) = tv.device_ptr(&self.stream);
        let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
        let v = pa + off::<T>(row + 1 + vcol * ld);
        let head = pa + off::<T>(row + cols.start * ld);
        let tail = pa + off::<T>(row + 1 + cols.start * ld);
        self.panel_apply_raw::<T>(v, pt, head, ld, tail, ld, len, cols.len())
    }

    /// `panel_apply` across two matrices (row insertion, docs/algorithms.md#row-insertion):
    /// reflector [1; v] with v = u(0..p, vcol) and τ = `tau[k]` applied to the columns `cols`
    /// of the stacked [r(row, ·); u(0..p, ·)].
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a range is out of bounds or `vcol` lies in `cols` (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn panel_apply_split<T: GpuScalar>(
        &self,
        r: &mut DevMat<T>,
        row: usize,
        u: &mut DevMat<T>,
        vcol: usize,
        cols: Range<usize>,
        tau: &DevVec<T>,
        k: usize,
    ) -> Result<()> {
        if cols.is_empty() {
            return Ok(());
        }
        assert!(row < r.nrows() && cols.end <= r.ncols() && cols.end <= u.ncols());
        assert!(vcol < u.ncols() && !cols.contains(&vcol) && k < tau.len());
        let (ldr, ldu, len) = (r.ld(), u.ld(), u.nrows());
        let tv = tau.slice(k..k + 1);
        let (pt, _gt) = tv.device_ptr(&self.stream);
        let (pr, _gr) = r.buf_mut().device_ptr_mut(&self.stream);
        let (pu, _gu) = u.buf_mut().device_ptr_mut(&self.stream);
        let v = pu + off::<T>(vcol * ldu);
        let head = pr + off::<T>(row + cols.start * ldr);
        let tail = pu + off::<T>(cols.start * ldu);
        self.panel_apply_raw::<T>(v, pt, head, ldr, tail, ldu, len, cols.len())
    }

    /// `panel_extract_v`: V (rows×k, into `v(0.., 0..)`) from the block of `a` at (row0, col0)
    /// with explicit unit diagonal and zeros above, then exact zeros below the block's diagonal
    /// in `a` (docs/algorithms.md#blocked-reflectors,
    /// docs/algorithms.md#exact-zeros-below-the-diagonal).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a block is out of bounds (a cuqr bug).
    pub(crate) fn panel_extract_v<T: GpuScalar>(
        &self,
        a: &mut DevMatViewMut<'_, T>,
        v: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, k) = (a.nrows(), a.ncols());
        assert!(v.nrows() == rows && v.ncols() == k);
        if rows == 0 || k == 0 {
            return Ok(());
        }
        let (lda, ldv) = (a.ld(), v.ld());
        let (c, ystride) = elem_cfg(rows, k);
        let f = &T::kernel_set(&self.kernels).panel_extract_v;
        // SAFETY: matches panel_extract_v_{f32,f64}(a: *mut T, lda, rows, k, v: *mut T,
        // ldv, ystride): touches a[i + j·lda] and v[i + j·ldv] for i < rows, j < k,
        // inside the two views (equal shapes asserted); two &mut views cannot overlap;
        // grid (⌈rows/128⌉, g ≤ min(k, 65535)), block 128, ystride = grid y.
        unsafe {
            launch_kernel!(self, f, c, "panel_extract_v"; a.buf_mut(), &lda, &rows, &k,
                v.buf_mut(), &ldv, &ystride)
        }?;
        Ok(())
    }

    /// `panel_zero_lower`: exact zeros strictly below the diagonal of the block `a`.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn panel_zero_lower<T: GpuScalar>(
        &self,
        a: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, cols) = (a.nrows(), a.ncols());
        if rows <= 1 || cols == 0 {
            return Ok(());
        }
        let lda = a.ld();
        let (c, ystride) = elem_cfg(rows, cols);
        let f = &T::kernel_set(&self.kernels).panel_zero_lower;
        // SAFETY: matches panel_zero_lower_{f32,f64}(a: *mut T, lda, rows, cols, ystride):
        // writes a[i + j·lda], i < rows, j < cols, inside the &mut view;
        // grid (⌈rows/128⌉, g ≤ min(cols, 65535)), block 128, ystride = grid y.
        unsafe {
            launch_kernel!(self, f, c, "panel_zero_lower"; a.buf_mut(), &lda, &rows, &cols,
                &ystride)
        }?;
        Ok(())
    }

    /// `panel_set_identity`: a := I on the block (ones on its diagonal, zeros elsewhere).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn panel_set_identity<T: GpuScalar>(
        &self,
        a: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, cols) = (a.nrows(), a.ncols());
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let lda = a.ld();
        let (c, ystride) = elem_cfg(rows, cols);
        let f = &T::kernel_set(&self.kernels).panel_set_identity;
        // SAFETY: matches panel_set_identity_{f32,f64}(a: *mut T, lda, rows, cols,
        // ystride): writes a[i + j·lda], i < rows, j < cols, inside the &mut view;
        // grid (⌈rows/128⌉, g ≤ min(cols, 65535)), block 128, ystride = grid y.
        unsafe {
            launch_kernel!(self, f, c, "panel_set_identity"; a.buf_mut(), &lda, &rows, &cols,
                &ystride)
        }?;
        Ok(())
    }

    /// `panel_copy`: dst := src (same shape; any leading dimensions).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the shapes differ (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn panel_copy<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        dst: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, cols) = (src.nrows(), src.ncols());
        assert!(dst.nrows() == rows && dst.ncols() == cols);
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let (lds, ldd) = (src.ld(), dst.ld());
        let (c, ystride) = elem_cfg(rows, cols);
        let f = &T::kernel_set(&self.kernels).panel_copy;
        // SAFETY: matches panel_copy_{f32,f64}(src: *const T, lds, rows, cols, dst: *mut T,
        // ldd, ystride): reads src[i + j·lds], writes dst[i + j·ldd], i < rows, j < cols,
        // inside the two views (equal shapes asserted); dst is a &mut view and cannot alias
        // src; grid (⌈rows/128⌉, g ≤ min(cols, 65535)), block 128, ystride = grid y.
        unsafe {
            launch_kernel!(self, f, c, "panel_copy"; src.buf(), &lds, &rows, &cols,
                dst.buf_mut(), &ldd, &ystride)
        }?;
        Ok(())
    }

    /// `panel_embed_q`: dst ((m+p)×(m+p)) := Pᵀ·diag(Q, I_p), the rows m..m+p moved to
    /// k0..k0+p (docs/algorithms.md#row-insertion, with Q).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If Q is not square, dst is not (m+p)×(m+p), or k0 > m (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn panel_embed_q<T: GpuScalar>(
        &self,
        q: &DevMatView<'_, T>,
        k0: usize,
        dst: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        let m = q.nrows();
        assert!(q.ncols() == m && dst.nrows() == dst.ncols() && dst.nrows() >= m && k0 <= m);
        let p = dst.nrows() - m;
        let (ldq, ldd) = (q.ld(), dst.ld());
        let (c, ystride) = elem_cfg(m + p, m + p);
        let f = &T::kernel_set(&self.kernels).panel_embed_q;
        // SAFETY: matches panel_embed_q_{f32,f64}(q: *const T, ldq, m, p, k0, dst: *mut T,
        // ldd, ystride): reads q[s + j·ldq] only for s, j < m (inside the m×m view), writes
        // dst[i + j·ldd] for i, j < m+p (inside the (m+p)² view, asserted); dst is a &mut
        // view and cannot alias q; k0 ≤ m; grid (⌈(m+p)/128⌉, g ≤ min(m+p, 65535)), block 128.
        unsafe {
            launch_kernel!(self, f, c, "panel_embed_q"; q.buf(), &ldq, &m, &p, &k0,
                dst.buf_mut(), &ldd, &ystride)
        }?;
        Ok(())
    }

    /// `panel_col_norms`: `out[c]` = ‖a(0:min(c+1, rows), c)‖₂ and `out[cols + c]` = a(c, c),
    /// for the rank check of an upper-trapezoidal R (docs/algorithms.md#rank-test).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `out` is shorter than 2·cols (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn panel_col_norms<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
        out: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        let (rows, cols) = (a.nrows(), a.ncols());
        assert!(out.len() >= 2 * cols);
        if cols == 0 {
            return Ok(());
        }
        let lda = a.ld();
        let f = &T::kernel_set(&self.kernels).panel_col_norms;
        // SAFETY: matches panel_col_norms_{f32,f64}(a: *const T, lda, rows, cols,
        // out: *mut T): reads a[i + c·lda], i ≤ min(c, rows−1), c < cols, inside the view;
        // writes out[c], out[cols + c] < 2·cols ≤ out.len() (asserted); out is a &mut view
        // and cannot alias a; grid cols, block 256, dyn smem 256·8.
        unsafe {
            launch_kernel!(self, f, col_cfg(cols), "panel_col_norms"; a.buf(), &lda, &rows,
                &cols, &mut *out)
        }?;
        Ok(())
    }

    /// The first non-finite entry of `a` (±∞ or NaN), in column-major order: (row,
    /// column), or `None`. One launch (`panel_first_non_finite`: each column's first
    /// non-finite row in each chunk of 32,768 rows, a block a chunk and column, so that a
    /// tall column is scanned by many multiprocessors) and a download of one `u32` a
    /// chunk and column (waits). The device
    /// counterpart of the host's `MatRef::first_non_finite`, for update data already
    /// on the device.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if `a` has 2³² − 1 rows or more, or 2³² − 1 chunks and
    /// columns or more; [`Error::OutOfMemory`],
    /// [`Error::Driver`] (including an earlier asynchronous fault).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn first_non_finite<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
    ) -> Result<Option<(usize, usize)>> {
        let (rows, cols) = (a.nrows(), a.ncols());
        if rows == 0 || cols == 0 {
            return Ok(None);
        }
        if rows >= u32::MAX as usize {
            return Err(Error::InvalidParam {
                op: "first_non_finite",
                what: "rows",
                why: format!("{rows} rows; at most 2³² − 2 are checked on the device"),
            });
        }
        let chunks = rows.div_ceil(NON_FINITE_CHUNK);
        let blocks = u32::try_from(cols * chunks).map_err(|_| Error::InvalidParam {
            op: "first_non_finite",
            what: "size",
            why: format!("{rows}×{cols}: more than 2³² − 1 blocks of {NON_FINITE_CHUNK} rows"),
        })?;
        let mut out = self.stream.alloc_zeroed::<u32>(cols * chunks).map_err(
            crate::gpu::runtime::alloc_err("non-finite scan", cols * chunks * 4),
        )?;
        let lda = a.ld();
        let f = &T::kernel_set(&self.kernels).panel_first_non_finite;
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (PANEL_BLOCK, 1, 1),
            shared_mem_bytes: PANEL_BLOCK * 8,
        };
        // SAFETY: matches panel_first_non_finite_{f32,f64}(a: *const T, lda, rows, cols,
        // chunk: usize, out: *mut u32): reads a[i + j·lda], i < rows, j < cols, inside the
        // view; writes out[c·cols + j], c < chunks, j < cols, an allocation of its own of
        // that length; rows < 2³² − 1 (checked), chunk ≥ 1; grid cols·chunks (fits u32,
        // checked), block PANEL_BLOCK (a multiple of 32), dynamic shared memory
        // PANEL_BLOCK·8 ≥ 32 f64.
        unsafe {
            launch_kernel!(self, f, config, "panel_first_non_finite"; a.buf(), &lda,
                &rows, &cols, &NON_FINITE_CHUNK, &mut out)
        }?;
        let host = self
            .stream
            .clone_dtoh(&out)
            .map_err(crate::gpu::runtime::driver_err("non-finite scan download"))?;
        self.stream
            .synchronize()
            .map_err(crate::gpu::runtime::driver_err("non-finite scan download"))?;
        // the first column with a hit, and in it the smallest row over the chunks
        Ok((0..cols).find_map(|j| {
            let row = (0..chunks).map(|c| host[c * cols + j]).min()?;
            (row != u32::MAX).then_some((row as usize, j))
        }))
    }
}

#[cfg(test)]
mod tests {
    //! `first_non_finite` over several chunks of rows: the first hit in column order, the
    //! smallest row of its column over the chunks, against the host's scan.
    use crate::gpu::algo::householder::tests_gate;
    use crate::gpu::runtime::DevMat;
    use crate::Mat;

    #[test]
    fn non_finite_scan_spans_chunks() {
        let Some(g) = tests_gate() else { return };
        let rows = 3 * super::NON_FINITE_CHUNK + 1234;
        let base = Mat::<f64>::from_fn(rows + 1, 3, |i, j| 0.5 + (i % 7) as f64 - j as f64);
        let mut cases: Vec<Vec<(usize, usize, f64)>> = vec![
            vec![],
            vec![(rows - 1, 2, f64::NAN)],
            vec![
                (70_000, 1, f64::INFINITY),
                (40_000, 2, f64::NAN),
                (99_990, 1, f64::NAN),
            ],
            vec![
                (99_990, 0, f64::NEG_INFINITY),
                (65_536, 0, f64::NAN),
                (3, 1, f64::NAN),
            ],
        ];
        cases.push(vec![(super::NON_FINITE_CHUNK, 0, f64::NAN)]);
        for hits in cases {
            let mut h = base.clone();
            for &(i, j, x) in &hits {
                h[(i + 1, j)] = x;
            }
            // row 0 of the buffer is outside the view: a NaN there must not count
            h[(0, 0)] = f64::NAN;
            let d = DevMat::from_host(&g, h.as_ref()).unwrap();
            let view = d.block(1, 0, rows, 3);
            let expected = Mat::from_fn(rows, 3, |i, j| h[(i + 1, j)])
                .as_ref()
                .first_non_finite();
            assert_eq!(g.first_non_finite(&view).unwrap(), expected, "{hits:?}");
        }
    }
}
