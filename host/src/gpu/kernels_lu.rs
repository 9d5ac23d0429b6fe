//! Typed launchers of the LU kernels (gpu-kernels/src/lu.rs, docs/kernels.md) and the
//! device blocked LU with partial pivoting built on them (issue 6; spec §4.3, E35
//! corrected): recursive panel of column steps (`lu_pivot` + `lu_update`), `lu_laswp`
//! across the rest of the matrix, cuBLAS TRSM for U₁₂ and GEMM for the Schur update,
//! all in place in one [`DevMat`] on [`Gpu::stream`].
//!
//! The matrix, pivot and diagonal pointers are taken once per factorisation (one
//! cudarc guard each, held for the whole loop) and carried in a private [`LuPtrs`],
//! so the per-launch host cost is the launch alone. Launches per panel of width w with
//! base b: 2w column-step kernels plus 4 per recursion node, plus 3 for the panel's
//! laswp/TRSM/GEMM.

use cudarc::cublas::sys as cublas;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use super::blas::int;
use super::matrix::{DevMat, DevMatViewMut};
use super::{driver_err, Dtype, Gpu, GpuScalar};
use crate::error::{Error, Result};

/// Threads of the single-block `lu_pivot`.
pub const LU_PIVOT_BLOCK: u32 = 1024;
/// Threads per block of `lu_update` (one row each).
pub const LU_UPDATE_BLOCK: u32 = 256;
/// Threads per block of `lu_laswp` (one column each).
pub const LU_LASWP_BLOCK: u32 = 128;
/// Dynamic shared memory of `lu_pivot`: 32 values (≤ 8 bytes), 33 indices.
const LU_PIVOT_SMEM: u32 = 32 * 8 + 33 * 4;
/// Widest base panel `lu_panel_fused` takes (its staged pivot row).
pub const LU_FUSED_MAX_W: usize = 64;
/// Dynamic shared memory of `lu_panel_fused`: 96 values, 33 indices.
const LU_FUSED_SMEM: u32 = 96 * 8 + 33 * 4;

fn launch_err(name: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Error {
    move |e| Error::Driver(format!("launching {name}: {e}"))
}

fn blocks(n: usize, per: u32) -> u32 {
    u32::try_from(n.div_ceil(per as usize)).expect("grid dimension fits u32")
}

fn status(op: &'static str, s: cublas::cublasStatus_t) -> Result<()> {
    s.result().map_err(|e| Error::Cublas(format!("{op}: {e}")))
}

/// Raw device pointers of one factorisation. Invariant (established only by
/// [`Gpu::lu_factor_in_place`], which holds the cudarc guards while this lives): `a`
/// addresses an m×n column-major matrix with leading dimension `lda` ≥ m, `ipiv` and
/// `diag` min(m, n) elements each; all on [`Gpu::stream`].
struct LuPtrs {
    a: u64,
    lda: usize,
    m: usize,
    n: usize,
    ipiv: u64,
    diag: u64,
    /// Base panels with at most this many rows run as one `lu_panel_fused` launch.
    fused_rows: usize,
}

impl LuPtrs {
    /// Address of element (i, j) of a.
    fn at<T>(&self, i: usize, j: usize) -> u64 {
        self.a + ((i + j * self.lda) * core::mem::size_of::<T>()) as u64
    }
}

/// Time per phase of one device LU (milliseconds, from CUDA events around each
/// phase of each panel): the recursive panel, the laswp across the matrix, the
/// U₁₂ TRSM and the Schur-complement GEMM (issue 6 "Benchmark").
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LuPhaseTimes {
    /// Recursive panel factorisation (column-step kernels, inner TRSM/GEMM).
    pub panel_ms: f64,
    /// Row interchanges outside the panel.
    pub laswp_ms: f64,
    /// U₁₂ := L₁₁⁻¹A₁₂.
    pub trsm_ms: f64,
    /// A₂₂ −= L₂₁U₁₂.
    pub gemm_ms: f64,
}

/// Event pairs recorded per phase while profiling.
struct PhaseEvents {
    ev: [Vec<(CudaEvent, CudaEvent)>; 4],
}

impl PhaseEvents {
    fn mark(gpu: &Gpu) -> Result<CudaEvent> {
        gpu.stream()
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_err("recording a profiling event"))
    }
}

impl Gpu {
    /// Factorises the m×n `a` in place as PA = LU (issue 6): L below the diagonal
    /// (unit diagonal implied), U on and above it; `ipiv[j]` (0-based, absolute)
    /// the row swapped with row j; `diag[j]` = u_jj. Block size `nb`, recursive
    /// panel down to `base` columns. Zero pivots are skipped, not reported: the
    /// caller checks `diag`.
    ///
    /// # Errors
    /// [`Error::Driver`] for a failed launch, [`Error::Cublas`] for a failed
    /// TRSM/GEMM, [`Error::InvalidParam`] if a dimension exceeds cuBLAS's `int`.
    ///
    /// # Panics
    /// If `ipiv` or `diag` is shorter than min(m, n), or nb or base is 0 (cuqr bugs).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lu_factor_in_place<T: GpuScalar>(
        &self,
        a: &mut DevMat<T>,
        ipiv: &mut CudaSlice<u32>,
        diag: &mut CudaSlice<T>,
        nb: usize,
        base: usize,
        fused_rows: usize,
        profile: Option<&mut LuPhaseTimes>,
    ) -> Result<()> {
        let (m, n, lda) = (a.nrows(), a.ncols(), a.ld());
        let kmin = m.min(n);
        assert!(ipiv.len() >= kmin && diag.len() >= kmin && nb > 0 && base > 0);
        if kmin == 0 {
            return Ok(());
        }
        int("lu", "m", m)?;
        int("lu", "n", n)?;
        int("lu", "lda", lda)?;
        let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
        let (pp, _gp) = ipiv.device_ptr_mut(&self.stream);
        let (pd, _gd) = diag.device_ptr_mut(&self.stream);
        let p = LuPtrs {
            a: pa,
            lda,
            m,
            n,
            ipiv: pp,
            diag: pd,
            fused_rows,
        };
        let mut events = profile.as_ref().map(|_| PhaseEvents {
            ev: [Vec::new(), Vec::new(), Vec::new(), Vec::new()],
        });
        let mut k = 0;
        while k < kmin {
            let w = nb.min(kmin - k);
            for phase in 0..4 {
                let t0 = match events {
                    Some(_) => Some(PhaseEvents::mark(self)?),
                    None => None,
                };
                match phase {
                    0 => self.lu_panel::<T>(&p, k, w, base)?,
                    1 => self.lu_laswp_raw::<T>(&p, 0..n, k..k + w, k..k + w)?,
                    2 => self.lu_trsm_in::<T>(&p, k, w, k + w..n)?,
                    _ => self.lu_gemm_in::<T>(&p, k + w..m, k..k + w, k + w..n)?,
                }
                if let (Some(e), Some(t0)) = (events.as_mut(), t0) {
                    e.ev[phase].push((t0, PhaseEvents::mark(self)?));
                }
            }
            k += w;
        }
        if let (Some(out), Some(e)) = (profile, events) {
            let mut sums = [0.0f64; 4];
            for (phase, pairs) in e.ev.iter().enumerate() {
                for (a, b) in pairs {
                    sums[phase] += a
                        .elapsed_ms(b)
                        .map_err(driver_err("reading a profiling event"))?
                        as f64;
                }
            }
            *out = LuPhaseTimes {
                panel_ms: sums[0],
                laswp_ms: sums[1],
                trsm_ms: sums[2],
                gemm_ms: sums[3],
            };
        }
        Ok(())
    }

    /// Recursive panel: rows c0..m of columns c0..c0+w.
    fn lu_panel<T: GpuScalar>(&self, p: &LuPtrs, c0: usize, w: usize, base: usize) -> Result<()> {
        if w <= base && w <= LU_FUSED_MAX_W && p.m - c0 <= p.fused_rows {
            return self.lu_panel_fused_raw::<T>(p, c0, w);
        }
        if w <= base {
            for j in c0..c0 + w {
                self.lu_pivot_raw::<T>(p, j, c0, c0 + w)?;
                self.lu_update_raw::<T>(p, j, c0 + w)?;
            }
            return Ok(());
        }
        // left half a multiple of base where possible, so the leaves stay full
        let w1 = if w / 2 >= base {
            (w / 2).div_ceil(base) * base
        } else {
            w / 2
        };
        let c1 = c0 + w1;
        let cend = c0 + w;
        self.lu_panel::<T>(p, c0, w1, base)?;
        self.lu_laswp_raw::<T>(p, c1..cend, 0..0, c0..c1)?;
        self.lu_trsm_in::<T>(p, c0, w1, c1..cend)?;
        self.lu_gemm_in::<T>(p, c1..p.m, c0..c1, c1..cend)?;
        self.lu_panel::<T>(p, c1, w - w1, base)?;
        self.lu_laswp_raw::<T>(p, c0..c1, 0..0, c1..cend)
    }

    /// `lu_pivot` for column step j of the base panel c0..cend.
    fn lu_pivot_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        j: usize,
        c0: usize,
        cend: usize,
    ) -> Result<()> {
        assert!(c0 <= j && j < cend && cend <= p.n && j < p.m);
        let f = &T::kernel_set(&self.kernels).lu_pivot;
        self.count_launch();
        let ipiv = p.ipiv;
        let diag = p.diag;
        let mut b = self.stream.launch_builder(f);
        b.arg(&p.a)
            .arg(&p.lda)
            .arg(&p.m)
            .arg(&j)
            .arg(&c0)
            .arg(&cend)
            .arg(&ipiv)
            .arg(&diag);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (LU_PIVOT_BLOCK, 1, 1),
            shared_mem_bytes: LU_PIVOT_SMEM,
        };
        // SAFETY: matches lu_pivot_{f32,f64}(a: *mut T, lda, m, j, c0, cend, ipiv: *mut
        // u32, diag: *mut T) (device pointers are 64-bit); LuPtrs' invariant gives `a`
        // m×n with ld lda and ipiv/diag of min(m, n) > j elements, and the asserts give
        // c0 ≤ j < cend ≤ n, j < m; grid 1, block 1024 (a multiple of 32), 388 bytes of
        // dynamic shared memory as the entry's # Safety requires; everything is ordered
        // on self.stream.
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_pivot"))?;
        Ok(())
    }

    /// `lu_panel_fused`: the base panel c0..c0+w in one single-block launch.
    fn lu_panel_fused_raw<T: GpuScalar>(&self, p: &LuPtrs, c0: usize, w: usize) -> Result<()> {
        assert!((1..=LU_FUSED_MAX_W).contains(&w) && c0 + w <= p.n && c0 < p.m);
        let f = &T::kernel_set(&self.kernels).lu_panel_fused;
        self.count_launch();
        let (ipiv, diag) = (p.ipiv, p.diag);
        let mut b = self.stream.launch_builder(f);
        b.arg(&p.a)
            .arg(&p.lda)
            .arg(&p.m)
            .arg(&c0)
            .arg(&w)
            .arg(&ipiv)
            .arg(&diag);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (LU_PIVOT_BLOCK, 1, 1),
            shared_mem_bytes: LU_FUSED_SMEM,
        };
        // SAFETY: matches lu_panel_fused_{f32,f64}(a: *mut T, lda, m, c0, w, ipiv: *mut
        // u32, diag: *mut T); LuPtrs' invariant gives `a` m×n (ld lda) and ipiv/diag of
        // min(m, n) entries, and the assert gives 1 ≤ w ≤ 64, c0 + w ≤ n, c0 < m, so rows
        // c0..m of columns c0..c0+w and entries c0..c0+w (≤ min(m, n), as the panel
        // lies within the first min(m, n) columns) are in bounds; grid 1, block 1024,
        // 900 bytes of dynamic shared memory as the entry requires; on self.stream.
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_panel_fused"))?;
        Ok(())
    }

    /// `lu_update` for column step j (panel columns end before `cend`).
    fn lu_update_raw<T: GpuScalar>(&self, p: &LuPtrs, j: usize, cend: usize) -> Result<()> {
        assert!(j < cend && cend <= p.n && j < p.m);
        let rows = p.m - j - 1;
        if rows == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).lu_update;
        self.count_launch();
        let mut b = self.stream.launch_builder(f);
        b.arg(&p.a).arg(&p.lda).arg(&p.m).arg(&j).arg(&cend);
        let cfg = LaunchConfig {
            grid_dim: (blocks(rows, LU_UPDATE_BLOCK), 1, 1),
            block_dim: (LU_UPDATE_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches lu_update_{f32,f64}(a: *mut T, lda, m, j, cend); `a` is m×n
        // with ld lda (LuPtrs' invariant) and j < cend ≤ n, j < m (asserted), so rows
        // j..m of columns j..cend are in bounds; grid ⌈(m−j−1)/256⌉ × 256 covers the rows
        // j+1..m and the kernel returns for the rest; ordered on self.stream.
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_update"))?;
        Ok(())
    }

    /// `lu_laswp`: interchanges ipiv[steps] on columns `cols` minus `skip`.
    fn lu_laswp_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        cols: core::ops::Range<usize>,
        skip: core::ops::Range<usize>,
        steps: core::ops::Range<usize>,
    ) -> Result<()> {
        assert!(cols.end <= p.n && steps.end <= p.m.min(p.n));
        let all_skipped = !skip.is_empty() && skip.start <= cols.start && skip.end >= cols.end;
        if cols.is_empty() || steps.is_empty() || all_skipped {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).lu_laswp;
        self.count_launch();
        let ipiv = p.ipiv;
        let mut b = self.stream.launch_builder(f);
        b.arg(&p.a)
            .arg(&p.lda)
            .arg(&cols.start)
            .arg(&cols.end)
            .arg(&skip.start)
            .arg(&skip.end)
            .arg(&ipiv)
            .arg(&steps.start)
            .arg(&steps.end);
        let cfg = LaunchConfig {
            grid_dim: (blocks(cols.len(), LU_LASWP_BLOCK), 1, 1),
            block_dim: (LU_LASWP_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches lu_laswp_{f32,f64}(a: *mut T, lda, col0, col1, skip0, skip1,
        // ipiv: *const u32, k1, k2); ipiv[steps] were written by earlier lu_pivot launches
        // on this stream with values in steps.start..m (a pivot of step j is ≥ j, < m), so
        // every swapped row is < m and every column < n (asserted), inside `a` (LuPtrs'
        // invariant); one thread per column, no other launch runs concurrently on it.
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_laswp"))?;
        Ok(())
    }

    /// A(c0..c0+w, cols) := L⁻¹·A(c0..c0+w, cols), L the unit lower w×w block at
    /// (c0, c0) of the same matrix (cuBLAS `xTRSM`).
    fn lu_trsm_in<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        cols: core::ops::Range<usize>,
    ) -> Result<()> {
        const OP: &str = "lu trsm";
        if cols.is_empty() || w == 0 {
            return Ok(());
        }
        assert!(c0 + w <= p.m && c0 + w <= cols.start && cols.end <= p.n);
        let (mi, ni, ld) = (
            int(OP, "w", w)?,
            int(OP, "cols", cols.len())?,
            int(OP, "lda", p.lda)?,
        );
        let (l, bm) = (p.at::<T>(c0, c0), p.at::<T>(c0, cols.start));
        let h = *self.blas.handle();
        let (side, uplo, tr, dg) = (
            cublas::cublasSideMode_t::CUBLAS_SIDE_LEFT,
            cublas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
            cublas::cublasOperation_t::CUBLAS_OP_N,
            cublas::cublasDiagType_t::CUBLAS_DIAG_UNIT,
        );
        self.count_launch();
        let st = match T::DTYPE {
            // SAFETY: cublasStrsm_v2 contract: L is w×w at (c0, c0) with ld lda and B is
            // w×|cols| at (c0, cols.start), both inside the m×n matrix (asserted; LuPtrs'
            // invariant); B's columns start at or after c0+w, so B does not overlap the
            // lower triangle of L that TRSM reads; the handle is bound to self.stream.
            // T is f32 (sealed GpuScalar, DTYPE = F32).
            Dtype::F32 => unsafe {
                let one = 1.0f32;
                cublas::cublasStrsm_v2(
                    h,
                    side,
                    uplo,
                    tr,
                    dg,
                    mi,
                    ni,
                    &one,
                    l as *const f32,
                    ld,
                    bm as *mut f32,
                    ld,
                )
            },
            // SAFETY: as for f32 with cublasDtrsm_v2 and T = f64.
            Dtype::F64 => unsafe {
                let one = 1.0f64;
                cublas::cublasDtrsm_v2(
                    h,
                    side,
                    uplo,
                    tr,
                    dg,
                    mi,
                    ni,
                    &one,
                    l as *const f64,
                    ld,
                    bm as *mut f64,
                    ld,
                )
            },
        };
        status(OP, st)
    }

    /// A(rows, cols) −= A(rows, inner)·A(inner, cols) within one matrix (cuBLAS
    /// `xGEMM`); the three blocks are disjoint.
    fn lu_gemm_in<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        rows: core::ops::Range<usize>,
        inner: core::ops::Range<usize>,
        cols: core::ops::Range<usize>,
    ) -> Result<()> {
        const OP: &str = "lu gemm";
        if rows.is_empty() || cols.is_empty() || inner.is_empty() {
            return Ok(());
        }
        assert!(
            rows.end <= p.m
                && cols.end <= p.n
                && inner.end <= cols.start
                && inner.end <= rows.start
        );
        let (mi, ni, ki) = (
            int(OP, "rows", rows.len())?,
            int(OP, "cols", cols.len())?,
            int(OP, "inner", inner.len())?,
        );
        let ld = int(OP, "lda", p.lda)?;
        let a21 = p.at::<T>(rows.start, inner.start);
        let a12 = p.at::<T>(inner.start, cols.start);
        let a22 = p.at::<T>(rows.start, cols.start);
        let h = *self.blas.handle();
        let nn = cublas::cublasOperation_t::CUBLAS_OP_N;
        self.count_launch();
        let st = match T::DTYPE {
            // SAFETY: cublasSgemm_v2 contract: A21 is |rows|×|inner|, A12 |inner|×|cols|,
            // A22 |rows|×|cols|, all with ld lda inside the m×n matrix (asserted; LuPtrs'
            // invariant). A22 (rows ≥ inner.end, cols ≥ inner.end) is disjoint from A21
            // (columns < inner.end) and from A12 (rows < inner.end); handle bound to
            // self.stream. T is f32 (DTYPE = F32).
            Dtype::F32 => unsafe {
                let (al, be) = (-1.0f32, 1.0f32);
                cublas::cublasSgemm_v2(
                    h,
                    nn,
                    nn,
                    mi,
                    ni,
                    ki,
                    &al,
                    a21 as *const f32,
                    ld,
                    a12 as *const f32,
                    ld,
                    &be,
                    a22 as *mut f32,
                    ld,
                )
            },
            // SAFETY: as for f32 with cublasDgemm_v2 and T = f64.
            Dtype::F64 => unsafe {
                let (al, be) = (-1.0f64, 1.0f64);
                cublas::cublasDgemm_v2(
                    h,
                    nn,
                    nn,
                    mi,
                    ni,
                    ki,
                    &al,
                    a21 as *const f64,
                    ld,
                    a12 as *const f64,
                    ld,
                    &be,
                    a22 as *mut f64,
                    ld,
                )
            },
        };
        status(OP, st)
    }

    /// Applies the interchanges `ipiv[0..k)` (from [`Gpu::lu_factor_in_place`]) to the
    /// rows of `b` in order (P·B, LAPACK `laswp`), one thread per column.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `ipiv` is shorter than k or k exceeds b's rows (cuqr bugs). Each ipiv entry
    /// must be < b's rows: the caller passes pivots of a factorisation of b's order.
    pub(crate) fn lu_laswp_rows<T: GpuScalar>(
        &self,
        b: &mut DevMatViewMut<'_, T>,
        ipiv: &CudaSlice<u32>,
        k: usize,
    ) -> Result<()> {
        let (rows, q, ld) = (b.nrows(), b.ncols(), b.ld());
        assert!(ipiv.len() >= k && k <= rows);
        if q == 0 || k == 0 {
            return Ok(());
        }
        let (pi, _gi) = ipiv.device_ptr(&self.stream);
        let (pb, _gb) = b.buf_mut().device_ptr_mut(&self.stream);
        let f = &T::kernel_set(&self.kernels).lu_laswp;
        self.count_launch();
        let (zero, none) = (0usize, 0usize);
        let mut lb = self.stream.launch_builder(f);
        lb.arg(&pb)
            .arg(&ld)
            .arg(&zero)
            .arg(&q)
            .arg(&none)
            .arg(&none)
            .arg(&pi)
            .arg(&zero)
            .arg(&k);
        let cfg = LaunchConfig {
            grid_dim: (blocks(q, LU_LASWP_BLOCK), 1, 1),
            block_dim: (LU_LASWP_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches lu_laswp_{f32,f64}(a, lda, col0 = 0, col1 = q, skip 0..0, ipiv,
        // k1 = 0, k2 = k); ipiv holds ≥ k entries (asserted), each < rows (documented
        // caller duty: pivots of an LU of order rows), so rows < rows of columns < q are
        // touched, inside the view; guards held across the launch on self.stream.
        unsafe { lb.launch(cfg) }.map_err(launch_err("lu_laswp"))?;
        Ok(())
    }
}
