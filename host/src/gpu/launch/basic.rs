//! The embedded PTX, the kernel names, and one typed launcher per kernel,
//! exactly as docs/kernels.md specifies (arguments, launch shape, dynamic
//! shared memory). Kernels are resolved once per device in [`Kernels::load`];
//! each launcher checks its bounds with `assert!` (a failure is
//! a cuqr bug) and holds the crate's only kernel-launch `unsafe` block.
// Some of these serve only cuqr's benchmarks and kernel tests (the published algorithms'
// reference kernels, stage profiling), which reach them through the `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use cudarc::driver::{CudaView, CudaViewMut, PushKernelArg};

use crate::base::error::Result;
use crate::gpu::launch::{grid_blocks, launch_config, launch_err};
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Threads per block of the single-block reductions (`householder_house`,
/// `reduce_dot`, `reduce_nrm2`, `wy_build_t`).
pub const REDUCE_BLOCK: u32 = 256;
/// Threads per block of `givens_make_wavefront` (docs/algorithms.md#givens-rotations: 32).
pub const MAKE_GIVENS_BLOCK: u32 = 32;
/// Threads per block of `givens_apply_wavefront` (docs/algorithms.md#givens-rotations: 128).
pub const APPLY_GIVENS_BLOCK: u32 = 128;
/// Tile edge of `transpose_padded` and `reduce_double_sum` (32×32 tiles, block 32×8).
pub const TILE: u32 = 32;
/// Rows of threads per tile block (block is TILE × TILE_ROWS).
pub const TILE_ROWS: u32 = 8;
/// Threads per block of `wy_set_tau`.
pub const SET_TAU_BLOCK: u32 = 128;
/// Largest k `wy_build_t` accepts (one block of 256 threads).
pub const BUILD_T_MAX_K: usize = 256;
/// Largest grid y/z dimension.
const MAX_GRID_YZ: usize = 65_535;

/// Last row/column index touched by the wavefront step with `count` rotations
/// starting at plane (row0−1, row0): row0 + 2(count−1).
fn last_row(row0: usize, count: usize) -> usize {
    row0 + 2 * (count - 1)
}

/// Typed launchers, one per kernel of docs/kernels.md, on [`Gpu::stream`].
/// Empty problems (no rotations, no columns) launch nothing.
impl Gpu {
    /// `householder_house`: robust reflector of (α, x) in place
    /// (docs/algorithms.md#householder-vectors): `alpha[0]` := β, `x` := v tail, `tau[0]` := τ;
    /// n = `x.len()` (may be 0).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `alpha` or `tau` is empty (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn householder_house<T: GpuScalar>(
        &self,
        alpha: &mut CudaViewMut<'_, T>,
        x: &mut CudaViewMut<'_, T>,
        tau: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        assert!(!alpha.is_empty() && !tau.is_empty());
        let n = x.len();
        let f = &T::kernel_set(&self.kernels).householder_house;
        let mut b = self.kernel_args(f);
        b.arg(&mut *alpha).arg(&mut *x).arg(&n).arg(&mut *tau);
        // SAFETY: matches householder_house_{f32,f64}(alpha: *mut T, x: *mut T,
        // n: usize, tau: *mut T): alpha and tau hold ≥ 1 element (asserted),
        // x holds exactly n; three distinct &mut views cannot overlap; launch
        // shape grid 1, block 256, dyn smem 256·8 as the contract says.
        unsafe {
            b.launch(launch_config(
                (1, 1),
                (REDUCE_BLOCK, 1),
                REDUCE_BLOCK as usize * 8,
            ))
        }
        .map_err(launch_err("householder_house"))?;
        Ok(())
    }

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
        let mut b = self.kernel_args(f);
        b.arg(x).arg(y).arg(&n).arg(&mut *out);
        // SAFETY: matches reduce_dot_{f32,f64}(x: *const T, y: *const T, n: usize,
        // out: *mut T): x and y hold n elements (asserted equal), out ≥ 1; out is a
        // &mut view so it aliases neither input; grid 1, block 256, smem 256·8.
        unsafe {
            b.launch(launch_config(
                (1, 1),
                (REDUCE_BLOCK, 1),
                REDUCE_BLOCK as usize * 8,
            ))
        }
        .map_err(launch_err("reduce_dot"))?;
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
        let mut b = self.kernel_args(f);
        b.arg(x).arg(&n).arg(&mut *out);
        // SAFETY: matches reduce_nrm2_{f32,f64}(x: *const T, n: usize, out: *mut T):
        // x holds n elements, out ≥ 1 and does not alias x (&mut view);
        // grid 1, block 256, smem 256·8.
        unsafe {
            b.launch(launch_config(
                (1, 1),
                (REDUCE_BLOCK, 1),
                REDUCE_BLOCK as usize * 8,
            ))
        }
        .map_err(launch_err("reduce_nrm2"))?;
        Ok(())
    }

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
        if count == 0 {
            return Ok(());
        }
        assert!(row0 >= 1 && last_row(row0, count) < a.ncols() && col0 + count <= a.nrows());
        assert!(c.len() >= count && s.len() >= count);
        let pitch = a.ld();
        let f = &T::kernel_set(&self.kernels).givens_make_wavefront;
        let mut b = self.kernel_args(f);
        b.arg(a.buf())
            .arg(&pitch)
            .arg(&row0)
            .arg(&col0)
            .arg(&count)
            .arg(&mut *c)
            .arg(&mut *s);
        // SAFETY: matches givens_make_wavefront_{f32,f64}(a: *const T, pitch, row0,
        // col0, count, c: *mut T, s: *mut T): thread i < count reads a[r·pitch + col]
        // for r ∈ {row0+2i−1, row0+2i} ≤ row0+2(count−1) < a.ncols() and
        // col = col0+i < a.nrows() ≤ pitch, inside the view's ld·(ncols−1)+nrows
        // elements (asserted); c and s hold ≥ count and are distinct &mut views;
        // grid ⌈count/32⌉, block 32.
        unsafe {
            b.launch(launch_config(
                (grid_blocks(count, MAKE_GIVENS_BLOCK), 1),
                (MAKE_GIVENS_BLOCK, 1),
                0,
            ))
        }
        .map_err(launch_err("givens_make_wavefront"))?;
        Ok(())
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
        if count == 0 || cols.start >= cols.end {
            return Ok(());
        }
        assert!(row0 >= 1 && last_row(row0, count) < a.ncols() && cols.end <= a.nrows());
        assert!(c.len() >= count && s.len() >= count && count <= MAX_GRID_YZ);
        let (pitch, col_begin, col_end) = (a.ld(), cols.start, cols.end);
        let f = &T::kernel_set(&self.kernels).givens_apply_wavefront;
        let mut b = self.kernel_args(f);
        b.arg(a.buf_mut())
            .arg(&pitch)
            .arg(&row0)
            .arg(&count)
            .arg(&col_begin)
            .arg(&col_step)
            .arg(&col_end)
            .arg(c)
            .arg(s);
        // SAFETY: matches givens_apply_wavefront_{f32,f64}(a: *mut T, pitch, row0,
        // count, col_begin, col_step, col_end, c: *const T, s: *const T): block
        // (x, i) touches a[r·pitch + x] for r ≤ row0+2(count−1) < a.ncols() and
        // x < col_end ≤ a.nrows() ≤ pitch (asserted), inside the view; distinct
        // rotations touch distinct row pairs; c, s hold ≥ count and cannot alias
        // the &mut view a; grid (⌈(col_end−col_begin)/128⌉, count ≤ 65535), block 128.
        unsafe {
            b.launch(launch_config(
                (
                    grid_blocks(col_end - col_begin, APPLY_GIVENS_BLOCK),
                    count as u32,
                ),
                (APPLY_GIVENS_BLOCK, 1),
                0,
            ))
        }
        .map_err(launch_err("givens_apply_wavefront"))?;
        Ok(())
    }

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
        let mut b = self.kernel_args(f);
        b.arg(src.buf())
            .arg(&lds)
            .arg(&rows)
            .arg(&cols)
            .arg(dst.buf_mut())
            .arg(&ldd);
        // SAFETY: matches transpose_padded_{f32,f64}(src: *const T, lds, rows, cols,
        // dst: *mut T, ldd): reads src[i + j·lds], i < rows, j < cols, inside the
        // src view; writes dst[j + i·ldd], j < cols = dst.nrows(), i < rows =
        // dst.ncols(), inside the dst view (asserted); dst is a &mut view and cannot
        // alias src; grid (⌈rows/32⌉, ⌈cols/32⌉), block (32, 8), smem 32·33·size_of T.
        unsafe {
            b.launch(launch_config(
                (grid_blocks(rows, TILE), grid_blocks(cols, TILE)),
                (TILE, TILE_ROWS),
                (TILE * (TILE + 1)) as usize * core::mem::size_of::<T>(),
            ))
        }
        .map_err(launch_err("transpose_padded"))?;
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
        let mut lb = self.kernel_args(f);
        lb.arg(a).arg(b).arg(&r).arg(&c).arg(cm.buf_mut()).arg(&ldc);
        // SAFETY: matches reduce_double_sum_{f32,f64}(a: *const T, b: *const T, r, c,
        // cm: *mut T, ldc): reads a, b at i + j·r < r·c ≤ their lengths (asserted);
        // writes cm[i + j·ldc], i < r, j < c, inside the view; cm is a &mut view so
        // it aliases neither input; grid (⌈r/32⌉, ⌈c/32⌉), block (32, 8).
        unsafe {
            lb.launch(launch_config(
                (grid_blocks(r, TILE), grid_blocks(c, TILE)),
                (TILE, TILE_ROWS),
                0,
            ))
        }
        .map_err(launch_err("reduce_double_sum"))?;
        Ok(())
    }

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
        let mut b = self.kernel_args(f);
        b.arg(tau).arg(t.buf_mut()).arg(&k).arg(&ldt);
        // SAFETY: matches wy_set_tau_{f32,f64}(tau: *const T, t: *mut T, k, ldt):
        // reads tau[i], writes t[i + i·ldt] for i < k, both in bounds (asserted);
        // t is a &mut view and cannot alias tau; grid ⌈k/128⌉, block 128.
        unsafe {
            b.launch(launch_config(
                (grid_blocks(k, SET_TAU_BLOCK), 1),
                (SET_TAU_BLOCK, 1),
                0,
            ))
        }
        .map_err(launch_err("wy_set_tau"))?;
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
        let mut b = self.kernel_args(f);
        b.arg(v.buf())
            .arg(&ldv)
            .arg(&rows)
            .arg(&k)
            .arg(tau)
            .arg(t.buf_mut())
            .arg(&ldt);
        // SAFETY: matches wy_build_t_{f32,f64}(v: *const T, ldv, rows, k, tau: *const T,
        // t: *mut T, ldt): reads v[i + j·ldv], i < rows, j < k, inside the v view;
        // tau[j], j < k (asserted); writes t[i + j·ldt], i, j < k, inside the k×k t
        // view (asserted); t is a &mut view and aliases neither input; k ≤ 256;
        // grid 1, block 256, smem (256 + k)·8.
        unsafe {
            b.launch(launch_config(
                (1, 1),
                (REDUCE_BLOCK, 1),
                (REDUCE_BLOCK as usize + k) * 8,
            ))
        }
        .map_err(launch_err("wy_build_t"))?;
        Ok(())
    }
}
