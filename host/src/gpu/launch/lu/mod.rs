//! Typed launchers of the LU kernels (gpu-kernels/src/lu/, docs/kernels.md) and the device
//! blocked LU with partial pivoting built on them (docs/algorithms.md#lu-factorisation,
//! docs/algorithms.md#lu-pivot-application corrected): each panel (or recursive-panel leaf of ≤
//! 128 columns) in one cooperative multi-block launch (`lu_panel_coop`, one grid barrier per
//! column), or as column steps (`lu_pivot` + `lu_update`, `lu_panel_fused` for short panels)
//! when the cooperative panel is off; the interchanges across the rest of the matrix by
//! `lu_laswp_tile` (≤ 128 steps) or `lu_laswp`; cuBLAS TRSM for U₁₂ and GEMM for the Schur
//! update, all in place in one [`DevMat`] on [`Gpu::stream`], with the next panel on the
//! high-priority look-ahead stream and the interchanges left of each panel on [`Gpu::stream3`]
//! under look-ahead.
//!
//! The matrix, pivot and diagonal pointers are taken once per factorisation (one
//! cudarc guard each, held for the whole loop) and carried in a private `LuPtrs`,
//! so the per-launch host cost is the launch alone; the cooperative panel's partials
//! and barrier counter are allocated (the counter zeroed) once per factorisation.
//! Launches per panel with the cooperative panel and look-ahead: the panel (one
//! launch, or for blocks wider than the leaf base a recursive panel of leaves joined
//! by laswp/TRSM/GEMM, all on the high-priority look-ahead stream with its own cuBLAS
//! handle), 3 laswp (the next panel's columns, the columns after it, and left of the
//! panel on stream 3), 2 TRSMs (or, from block size 256, a TRSM of L₁₁ on the
//! identity and a copy plus GEMM for U₁₂), 2 GEMMs, plus three event records. Column
//! steps with base b: 2w kernels plus 4 per recursion node, plus 3 for the panel's
//! laswp/TRSM/GEMM.

use core::cell::Cell;

use cudarc::cublas::sys as cublas;
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::int;
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::{grid_blocks, launch_err};
use crate::gpu::runtime::matrix::{DevMat, DevMatViewMut};
use crate::gpu::runtime::timing::PhaseClock;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

mod blas;
mod coop;
mod laswp;
mod step;

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
/// Columns per block of `lu_laswp_tile`.
const LU_LASWP_TILE_COLS: usize = 16;
/// Most interchanges one `lu_laswp_tile` launch applies.
const LU_LASWP_TILE_MAX_K: usize = 128;
/// Most `lu_laswp_tile` launches one interchange step takes before the one-thread-a-
/// column `lu_laswp` takes over.
const LU_LASWP_TILE_MAX_K_GATHERS: usize = 4;
/// Threads per block of `lu_laswp_tile`.
const LU_LASWP_TILE_BLOCK: u32 = 256;
/// Threads per block of the cooperative `lu_panel_coop`.
pub const LU_COOP_BLOCK: u32 = 256;
/// Widest panel `lu_panel_coop` takes (its staged rows and partials are sized by it;
/// a 64-row f64 slab of 256 columns is 128 KiB of shared memory).
pub const LU_COOP_MAX_W: usize = 256;
/// How [`Gpu::lu_factor_in_place`] factors its panels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LuPanelOpts {
    /// Column-step path only: base panels with at most this many rows run as one
    /// `lu_panel_fused` launch.
    pub fused_rows: usize,
    /// Leaves of at most [`LU_COOP_MAX_W`] columns run as one cooperative
    /// `lu_panel_coop` launch (else two launches per column).
    pub coop: bool,
    /// `lu_panel_coop`: target rows per block (the grid is at most one block per SM).
    pub coop_rows: usize,
    /// `lu_panel_coop`: hold each block's slab in shared memory when it fits (else
    /// the kernel works on the matrix in global memory).
    pub coop_smem: bool,
    /// Factor panel k+1 on a second stream while the main stream runs the rest of
    /// panel k's Schur update (only with one cooperative launch per panel).
    pub lookahead: bool,
    /// Panels whose rows fit in one thread-block cluster's shared memory run as
    /// `lu_cluster_panel` (sm_90 devices only).
    pub cluster: bool,
    /// With clusters: a leaf too tall for one cluster splits in halves (laswp, TRSM
    /// and GEMM between them) while the halves are at least this wide, so that its
    /// pieces fit a cluster; narrower leaves take the cooperative launch.
    pub cluster_leaf_min: usize,
    /// U₁₂ := L₁₁⁻¹·A₁₂ by the explicit inverse of the unit lower L₁₁ (a w×w TRSM
    /// on the identity after each panel) and one GEMM, instead of a TRSM across the
    /// matrix.
    pub u12_inverse: bool,
}

/// Scratch and settings of the cooperative panel for one factorisation: the
/// double-buffered partials and the grid-barrier counter (zeroed once per
/// factorisation; `cbase` tracks its value between launches).
pub(super) struct CoopPtrs {
    pval: u64,
    pidx: u64,
    prow: u64,
    counter: u64,
    cbase: Cell<u32>,
    /// Largest grid (one block per SM) the partials are sized for.
    max_blocks: usize,
    /// Panel width the row partials are sized for.
    max_w: usize,
    pub(super) smem_optin: usize,
    pub(super) rows_per_block: usize,
    smem: bool,
    /// Largest cluster `lu_cluster_panel` launches with (None: the cooperative panel
    /// only).
    pub(super) max_cluster: Option<usize>,
    /// [`LuPanelOpts::cluster_leaf_min`].
    pub(super) cluster_leaf_min: usize,
}

/// Where one part of the LU runs: a stream and the cuBLAS handle bound to it (the
/// main stream with [`Gpu::blas`], or the high-priority `stream_urgent` with its own
/// handle for the look-ahead's recursive panel).
#[derive(Clone, Copy)]
struct Lane<'a> {
    stream: &'a cudarc::driver::CudaStream,
    blas: cublas::cublasHandle_t,
}

impl Gpu {
    /// The main stream and its cuBLAS handle.
    fn main_lane(&self) -> Lane<'_> {
        Lane {
            stream: &self.stream,
            blas: *self.blas.handle(),
        }
    }

    /// The high-priority `stream_urgent` and the cuBLAS handle bound to it.
    fn lookahead_lane(&self) -> Lane<'_> {
        Lane {
            stream: &self.stream_urgent,
            blas: *self.blas_urgent.handle(),
        }
    }
}

fn status(op: &'static str, s: cublas::cublasStatus_t) -> Result<()> {
    s.result().map_err(|e| Error::cublas(op, e))
}

/// Raw device pointers of one factorisation. Invariant (established only by
/// [`Gpu::lu_factor_in_place`], which holds the cudarc guards while this lives): `a`
/// addresses an m×n column-major matrix with leading dimension `lda` ≥ m, `ipiv` and
/// `diag` min(m, n) elements each; all on [`Gpu::stream`].
pub(super) struct LuPtrs {
    pub(super) a: u64,
    pub(super) lda: usize,
    pub(super) m: usize,
    n: usize,
    pub(super) ipiv: u64,
    pub(super) diag: u64,
    /// Base panels with at most this many rows run as one `lu_panel_fused` launch.
    fused_rows: usize,
    /// The cooperative panel's scratch, when it is used.
    pub(super) coop: Option<CoopPtrs>,
    /// U₁₂ by the inverse of L₁₁ (one GEMM) instead of a TRSM, when on.
    u12: Option<U12Ptrs>,
}

/// Scratch of U₁₂ := L₁₁⁻¹·A₁₂ by one GEMM. Invariant (established by
/// [`Gpu::lu_factor_in_place`], which holds the buffers' guards while this lives):
/// `eye` is the nb×nb identity (ld nb), `linv` two nb×nb slots (ld nb), `scratch` nb ×
/// n elements (ld nb; n the matrix's columns, [`LuPtrs`]`::n`), all device buffers of
/// T disjoint from the matrix.
struct U12Ptrs {
    eye: u64,
    linv: u64,
    scratch: u64,
    nb: usize,
}

/// The device buffers behind [`U12Ptrs`].
struct U12Bufs<T> {
    eye: CudaSlice<T>,
    linv: CudaSlice<T>,
    scratch: CudaSlice<T>,
}

impl LuPtrs {
    /// Address of element (i, j) of a.
    fn at<T>(&self, i: usize, j: usize) -> u64 {
        self.a + ((i + j * self.lda) * core::mem::size_of::<T>()) as u64
    }
}

/// The cooperative panel's device scratch (see [`CoopPtrs`]).
struct CoopBufs<T> {
    pval: CudaSlice<T>,
    pidx: CudaSlice<u32>,
    prow: CudaSlice<T>,
    counter: CudaSlice<u32>,
    max_blocks: usize,
    smem_optin: usize,
    max_cluster: Option<usize>,
}

/// Time per phase of one device LU (milliseconds, from CUDA events around each
/// phase of each panel): the recursive panel, the laswp across the matrix, the
/// U₁₂ TRSM and the Schur-complement GEMM.
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

impl Gpu {
    /// Factorises the m×n `a` in place as PA = LU: L below the diagonal
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
        opts: LuPanelOpts,
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
        let base = if opts.coop {
            base.min(LU_COOP_MAX_W)
        } else {
            base
        };
        // cooperative-panel scratch: allocated (and the counter zeroed) once here
        let mut coop_bufs = if opts.coop {
            Some(self.lu_coop_alloc::<T>(base, opts.cluster)?)
        } else {
            None
        };
        // U₁₂ by the inverse: only with more than one panel
        let mut u12_bufs = if opts.u12_inverse && kmin > nb {
            Some(self.lu_u12_alloc::<T>(nb, n)?)
        } else {
            None
        };
        let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
        let (pp, _gp) = ipiv.device_ptr_mut(&self.stream);
        let (pd, _gd) = diag.device_ptr_mut(&self.stream);
        let mut coop_guards = None;
        let coop = match coop_bufs.as_mut() {
            Some(cb) => {
                let (pv, gv) = cb.pval.device_ptr_mut(&self.stream);
                let (pi, gi) = cb.pidx.device_ptr_mut(&self.stream);
                let (pr, gr) = cb.prow.device_ptr_mut(&self.stream);
                let (pc, gc) = cb.counter.device_ptr_mut(&self.stream);
                coop_guards = Some((gv, gi, gr, gc));
                Some(CoopPtrs {
                    pval: pv,
                    pidx: pi,
                    prow: pr,
                    counter: pc,
                    cbase: Cell::new(0),
                    max_blocks: cb.max_blocks,
                    max_w: base,
                    smem_optin: cb.smem_optin,
                    rows_per_block: opts.coop_rows.max(1),
                    smem: opts.coop_smem,
                    max_cluster: cb.max_cluster,
                    cluster_leaf_min: opts.cluster_leaf_min,
                })
            }
            None => None,
        };
        let mut u12_guards = None;
        let u12 = match u12_bufs.as_mut() {
            Some(ub) => {
                let (pe, ge) = ub.eye.device_ptr_mut(&self.stream);
                let (pl, gl) = ub.linv.device_ptr_mut(&self.stream);
                let (ps, gs) = ub.scratch.device_ptr_mut(&self.stream);
                u12_guards = Some((ge, gl, gs));
                Some(U12Ptrs {
                    eye: pe,
                    linv: pl,
                    scratch: ps,
                    nb,
                })
            }
            None => None,
        };
        let p = LuPtrs {
            a: pa,
            lda,
            m,
            n,
            ipiv: pp,
            diag: pd,
            fused_rows: opts.fused_rows,
            coop,
            u12,
        };
        let mut clock = profile.as_ref().map(|_| PhaseClock::<4>::new());
        let main = self.main_lane();
        // look-ahead: with the cooperative (or cluster) panel leaves, and not while
        // profiling (the phases would overlap); a recursive panel's TRSM and GEMM run
        // on the look-ahead stream with the handle bound to it
        let lookahead = opts.lookahead && p.coop.is_some() && clock.is_none();
        if lookahead {
            self.lu_lookahead_loop::<T>(&p, nb, base)?;
        }
        let mut k = if lookahead { kmin } else { 0 };
        while k < kmin {
            let w = nb.min(kmin - k);
            for phase in 0..4 {
                PhaseClock::time(clock.as_mut(), self, phase, || match phase {
                    0 => self.lu_panel::<T>(&p, k, w, base, main),
                    1 => self.lu_laswp_raw::<T>(&p, 0..n, k..k + w, k..k + w),
                    // L₁₁⁻¹ only where `lu_u12` takes it (more columns than the panel)
                    2 => if n - k - w > w {
                        self.lu_l11_inverse_if::<T>(&p, k, w, 0, main)
                    } else {
                        Ok(())
                    }
                    .and_then(|()| self.lu_u12::<T>(&p, k, w, k + w..n, 0)),
                    _ => self.lu_gemm_in::<T>(&p, k + w..m, k..k + w, k + w..n, main),
                })?;
            }
            k += w;
        }
        if let (Some(out), Some(c)) = (profile, clock) {
            let sums = c.totals_ms()?;
            *out = LuPhaseTimes {
                panel_ms: sums[0],
                laswp_ms: sums[1],
                trsm_ms: sums[2],
                gemm_ms: sums[3],
            };
        }
        // the scratch is freed only after the work queued on the stream that uses it
        // (cudarc frees on the stream, in order)
        drop(coop_guards);
        drop(coop_bufs);
        drop(u12_guards);
        drop(u12_bufs);
        Ok(())
    }

    /// The blocked loop with look-ahead: panel k's interchanges,
    /// U₁₂ TRSM and Schur GEMM first update panel k+1's columns, then panel k+1 is
    /// factored on the look-ahead lane (`stream_urgent`, of the device's highest
    /// priority, and its own cuBLAS handle: the recursive panel down to `base`
    /// columns, its leaves cooperative or cluster launches) while the main stream runs
    /// the interchanges, TRSM and GEMM of the columns after it; the main stream waits for
    /// the panel before the next step. The two streams touch disjoint columns in
    /// the overlap (panel k+1's rows k+w..m of its own columns vs the columns after it).
    ///
    /// The interchanges of panel k on the columns left of it (0..k: finished L columns
    /// that only later interchanges touch) run on [`Gpu::stream3`], after an event on the
    /// main stream that follows panel k and every earlier launch reading those columns,
    /// so they overlap the panel chain and the GEMMs instead of delaying the next TRSM;
    /// the interchanges right of the panel stay on the main stream. The main stream
    /// waits for stream 3 and the look-ahead stream before this returns, on success
    /// and on error alike (the scratch is freed on the main stream after it).
    fn lu_lookahead_loop<T: GpuScalar>(&self, p: &LuPtrs, nb: usize, base: usize) -> Result<()> {
        let res = self.lu_lookahead_steps::<T>(p, nb, base);
        let join = |s: &cudarc::driver::CudaStream| {
            s.record_event(None)
                .and_then(|e| self.stream.wait(&e))
                .map_err(driver_err("joining a look-ahead stream"))
        };
        let j3 = join(&self.stream3);
        let ju = join(&self.stream_urgent);
        res.and(j3).and(ju)
    }

    fn lu_lookahead_steps<T: GpuScalar>(&self, p: &LuPtrs, nb: usize, base: usize) -> Result<()> {
        let (m, n) = (p.m, p.n);
        let kmin = m.min(n);
        let (main, ahead) = (self.main_lane(), self.lookahead_lane());
        let ev = |s: &cudarc::driver::CudaStream| {
            s.record_event(None)
                .map_err(driver_err("recording a look-ahead event"))
        };
        self.lu_panel::<T>(p, 0, nb.min(kmin), base, main)?;
        self.lu_l11_inverse_if::<T>(p, 0, nb.min(kmin), 0, main)?;
        let mut k = 0;
        while k < kmin {
            let w = nb.min(kmin - k);
            let k2 = k + w;
            // L₁₁⁻¹ slots alternate by panel (the next panel's is written on the
            // look-ahead stream while the main stream still reads this one's)
            let slot = (k / nb) & 1;
            if k > 0 {
                // Panel k is done (the main stream waited for it) and every launch that
                // reads columns 0..k is queued before this event.
                let left = ev(&self.stream)?;
                self.stream3
                    .wait(&left)
                    .map_err(driver_err("left interchanges' stream wait"))?;
                self.lu_laswp_on::<T>(p, 0..k, 0..0, k..k2, &self.stream3)?;
            }
            if k2 < kmin {
                // Next panel's columns first: interchanges, U₁₂ block and Schur update,
                // then the panel on the look-ahead stream; the rest of the interchanges, TRSM and
                // GEMM run on the main stream while it factors.
                let w2 = nb.min(kmin - k2);
                let k3 = k2 + w2;
                self.lu_laswp_raw::<T>(p, k2..k3, 0..0, k..k2)?;
                self.lu_trsm_in::<T>(p, k, w, k2..k3, main)?;
                self.lu_gemm_in::<T>(p, k2..m, k..k2, k2..k3, main)?;
                let ready = ev(&self.stream)?;
                ahead
                    .stream
                    .wait(&ready)
                    .map_err(driver_err("look-ahead stream wait"))?;
                self.lu_panel::<T>(p, k2, w2, base, ahead)?;
                self.lu_l11_inverse_if::<T>(p, k2, w2, slot ^ 1, ahead)?;
                let done = ev(ahead.stream)?;
                self.lu_laswp_raw::<T>(p, k3..n, 0..0, k..k2)?;
                self.lu_u12::<T>(p, k, w, k3..n, slot)?;
                self.lu_gemm_in::<T>(p, k2..m, k..k2, k3..n, main)?;
                self.stream
                    .wait(&done)
                    .map_err(driver_err("look-ahead stream wait"))?;
            } else {
                self.lu_laswp_raw::<T>(p, k2..n, 0..0, k..k2)?;
                self.lu_u12::<T>(p, k, w, k2..n, slot)?;
                self.lu_gemm_in::<T>(p, k2..m, k..k2, k2..n, main)?;
            }
            k = k2;
        }
        Ok(())
    }

    /// Allocates the scratch of U₁₂ by the inverse ([`U12Ptrs`]) for block size `nb`
    /// and `n` columns, the identity uploaded.
    fn lu_u12_alloc<T: GpuScalar>(&self, nb: usize, n: usize) -> Result<U12Bufs<T>> {
        let elem = core::mem::size_of::<T>();
        let mut eye_host = vec![T::ZERO; nb * nb];
        for i in 0..nb {
            eye_host[i + i * nb] = T::ONE;
        }
        let eye = self
            .stream
            .htod_copy(&eye_host)
            .map_err(alloc_err("LU identity", elem * nb * nb))?;
        let linv = self
            .stream
            .alloc_zeroed::<T>(2 * nb * nb)
            .map_err(alloc_err("LU L11 inverses", elem * 2 * nb * nb))?;
        let scratch = self
            .stream
            .alloc_zeroed::<T>(nb * n)
            .map_err(alloc_err("LU U12 scratch", elem * nb * n))?;
        Ok(U12Bufs { eye, linv, scratch })
    }

    /// Recursive panel: rows c0..m of columns c0..c0+w, every launch on `lane` (leaves
    /// of at most `base` columns; the halves joined by laswp, TRSM and GEMM on the
    /// lane's stream and cuBLAS handle).
    fn lu_panel<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        base: usize,
        lane: Lane<'_>,
    ) -> Result<()> {
        if w <= base && p.coop.is_some() {
            if !self.lu_leaf_splits::<T>(p, c0, w) {
                return self.lu_panel_coop_on::<T>(p, c0, w, lane.stream);
            }
        } else if w <= base && w <= LU_FUSED_MAX_W && p.m - c0 <= p.fused_rows {
            return self.lu_panel_fused_raw::<T>(p, c0, w, lane.stream);
        } else if w <= base {
            for j in c0..c0 + w {
                self.lu_pivot_raw::<T>(p, j, c0, c0 + w, lane.stream)?;
                self.lu_update_raw::<T>(p, j, c0 + w, lane.stream)?;
            }
            return Ok(());
        }
        // left half a multiple of base where possible, so the leaves stay full (a
        // leaf split for the cluster halves)
        let w1 = if w / 2 >= base {
            (w / 2).div_ceil(base) * base
        } else {
            w / 2
        };
        let c1 = c0 + w1;
        let cend = c0 + w;
        self.lu_panel::<T>(p, c0, w1, base, lane)?;
        self.lu_laswp_on::<T>(p, c1..cend, 0..0, c0..c1, lane.stream)?;
        self.lu_trsm_in::<T>(p, c0, w1, c1..cend, lane)?;
        self.lu_gemm_in::<T>(p, c1..p.m, c0..c1, c1..cend, lane)?;
        self.lu_panel::<T>(p, c1, w - w1, base, lane)?;
        self.lu_laswp_on::<T>(p, c0..c1, 0..0, c1..cend, lane.stream)
    }
}
