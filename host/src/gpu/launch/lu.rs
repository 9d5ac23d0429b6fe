//! Typed launchers of the LU kernels (gpu-kernels/src/lu.rs, docs/kernels.md) and the device
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
use cudarc::driver::sys::{
    CUfunction, CUfunction_attribute, CUlaunchAttribute, CUlaunchAttributeID,
    CUlaunchAttributeValue, CUlaunchConfig, CUresult,
};
use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::int;
use crate::gpu::launch::{grid_blocks, launch_err};
use crate::gpu::runtime::matrix::{DevMat, DevMatViewMut};
use crate::gpu::runtime::timing::PhaseClock;
use crate::gpu::runtime::{alloc_err, driver_err, Dtype, Gpu, GpuScalar};

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
/// Threads per block of `lu_cluster_panel` (80 registers a thread in f64: 512 fit).
pub const LU_CLUSTER_BLOCK: u32 = 512;
/// Cluster sizes `lu_cluster_panel` tries, largest first (16 is beyond the portable
/// limit of 8 and needs the non-portable attribute and a GPC with 16 free SMs; the
/// kernel has candidate slots for at most 16 blocks).
const LU_CLUSTER_SIZES: [usize; 2] = [16, 8];

/// Bytes of `lu_cluster_panel`'s shared memory before the slab (gpu-kernels
/// `lu_cluster::cluster_header_bytes`): mbarriers, candidate records and partials in
/// the first KiB, then two buffers each of the pushed pivot row and row j.
fn cluster_header_bytes(w: usize, elem: usize) -> usize {
    1024 + 4 * w * elem
}

/// The launch shape of `lu_cluster_panel` for a panel of `rows` × `w`: (blocks, slab
/// rows a block, dynamic shared memory bytes) when the rows fit in the shared memory of
/// one cluster of at most `max_cluster` blocks, at least two (distributed shared memory
/// wants a cluster of two or more: compute-sanitizer rejects a one-block cluster's
/// `st.async`); None otherwise.
fn cluster_shape(
    cw: &CoopPtrs,
    max_cluster: usize,
    rows: usize,
    w: usize,
    elem: usize,
) -> Option<(usize, usize, usize)> {
    let header = cluster_header_bytes(w, elem);
    if cw.smem_optin <= header + w * elem || rows < 2 || max_cluster < 2 {
        return None;
    }
    let slab_cap = (cw.smem_optin - header) / (w * elem);
    let need = rows.div_ceil(slab_cap);
    if need > max_cluster {
        return None;
    }
    let blocks = rows
        .div_ceil(cw.rows_per_block)
        .clamp(need.max(2), max_cluster);
    let slab = rows.div_ceil(blocks);
    let blocks = rows.div_ceil(slab);
    debug_assert!(blocks >= 2);
    Some((blocks, slab, header + slab * w * elem))
}

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
struct CoopPtrs {
    pval: u64,
    pidx: u64,
    prow: u64,
    counter: u64,
    cbase: Cell<u32>,
    /// Largest grid (one block per SM) the partials are sized for.
    max_blocks: usize,
    /// Panel width the row partials are sized for.
    max_w: usize,
    smem_optin: usize,
    rows_per_block: usize,
    smem: bool,
    /// Largest cluster `lu_cluster_panel` launches with (None: the cooperative panel
    /// only).
    max_cluster: Option<usize>,
    /// [`LuPanelOpts::cluster_leaf_min`].
    cluster_leaf_min: usize,
}

/// The launch attribute of a one-dimensional cluster of `size` blocks.
fn cluster_attr(size: usize) -> CUlaunchAttribute {
    // SAFETY: an all-zero launch attribute value is valid plain data (a C union of
    // integers and structs of integers).
    let mut value: CUlaunchAttributeValue = unsafe { core::mem::zeroed() };
    value.clusterDim.x = u32::try_from(size).expect("cluster size fits u32");
    value.clusterDim.y = 1;
    value.clusterDim.z = 1;
    CUlaunchAttribute {
        id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value,
    }
}

/// The launch of `lu_cluster_panel` as one cluster of `size` blocks of
/// [`LU_CLUSTER_BLOCK`] threads with `smem` bytes of dynamic shared memory on `stream`;
/// `attr` (from [`cluster_attr`]) must outlive the returned config's use.
fn cluster_config(
    size: usize,
    smem: usize,
    stream: cudarc::driver::sys::CUstream,
    attr: &mut CUlaunchAttribute,
) -> CUlaunchConfig {
    CUlaunchConfig {
        gridDimX: u32::try_from(size).expect("grid fits u32"),
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: LU_CLUSTER_BLOCK,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: u32::try_from(smem).expect("shared memory fits u32"),
        hStream: stream,
        attrs: attr,
        numAttrs: 1,
    }
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
    /// The cooperative panel's scratch, when it is used.
    coop: Option<CoopPtrs>,
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
            .clone_htod(&eye_host)
            .map_err(alloc_err("LU identity", elem * nb * nb))?;
        let linv = self
            .stream
            .alloc_zeros::<T>(2 * nb * nb)
            .map_err(alloc_err("LU L11 inverses", elem * 2 * nb * nb))?;
        let scratch = self
            .stream
            .alloc_zeros::<T>(nb * n)
            .map_err(alloc_err("LU U12 scratch", elem * nb * n))?;
        Ok(U12Bufs { eye, linv, scratch })
    }

    /// Allocates the cooperative panel's scratch for panels up to `max_w` columns
    /// (≤ [`LU_COOP_MAX_W`]) and grids up to one block per SM, zeroes the barrier
    /// counter and raises `lu_panel_coop`'s shared-memory limit to the device's opt-in
    /// maximum. With `cluster` on an sm_90 device, also raises `lu_cluster_panel`'s
    /// limit and finds the largest cluster of [`LU_CLUSTER_SIZES`] that can run.
    fn lu_coop_alloc<T: GpuScalar>(&self, max_w: usize, cluster: bool) -> Result<CoopBufs<T>> {
        assert!((1..=LU_COOP_MAX_W).contains(&max_w));
        let sms = self.sm_count()?;
        let smem_optin = self.smem_optin()?;
        let f = &T::kernel_set(&self.kernels).lu_panel_coop;
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(smem_optin).unwrap_or(i32::MAX),
        )
        .map_err(driver_err("raising lu_panel_coop's shared memory limit"))?;
        let elem = core::mem::size_of::<T>();
        let s = &self.stream;
        let pval = s
            .alloc_zeros::<T>(2 * sms)
            .map_err(alloc_err("LU panel partials", 2 * sms * elem))?;
        let pidx = s
            .alloc_zeros::<u32>(2 * sms)
            .map_err(alloc_err("LU panel partial indices", 8 * sms))?;
        let prow = s
            .alloc_zeros::<T>(2 * (sms + 1) * max_w)
            .map_err(alloc_err(
                "LU panel partial rows",
                2 * (sms + 1) * max_w * elem,
            ))?;
        let counter = s
            .alloc_zeros::<u32>(1)
            .map_err(alloc_err("LU panel barrier counter", 4))?;
        self.count_launch();
        let max_cluster = if cluster {
            self.lu_cluster_max::<T>(smem_optin)?
        } else {
            None
        };
        Ok(CoopBufs {
            pval,
            pidx,
            prow,
            counter,
            max_blocks: sms,
            smem_optin,
            max_cluster,
        })
    }

    /// `lu_panel_coop` on `stream` (the main stream, or the look-ahead stream for the
    /// look-ahead, ordered against the main stream by events).
    fn lu_panel_coop_on<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let cw = p.coop.as_ref().expect("cooperative scratch present");
        assert!((1..=cw.max_w).contains(&w) && c0 + w <= p.m.min(p.n));
        if let Some(max_cluster) = cw.max_cluster {
            if self.lu_cluster_panel_on::<T>(p, c0, w, stream, max_cluster)? {
                return Ok(());
            }
        }
        let rows = p.m - c0;
        let elem = core::mem::size_of::<T>();
        let f = &T::kernel_set(&self.kernels).lu_panel_coop;
        let mut blocks = rows.div_ceil(cw.rows_per_block).clamp(1, cw.max_blocks);
        let slab = rows.div_ceil(blocks);
        blocks = rows.div_ceil(slab);
        let header = (72 + 2 * w) * elem;
        let smem_bytes = header + slab * w * elem;
        let occupancy = |bytes: usize| -> Result<usize> {
            f.occupancy_max_active_blocks_per_multiprocessor(LU_COOP_BLOCK, bytes, None)
                .map(|n| n as usize)
                .map_err(driver_err("querying lu_panel_coop's occupancy"))
        };
        let in_smem = cw.smem && smem_bytes <= cw.smem_optin && occupancy(smem_bytes)? >= 1;
        let bytes = if in_smem { smem_bytes } else { header };
        // at most one block per SM (blocks ≤ max_blocks = SMs), so one resident block
        // per SM makes the grid co-resident
        if occupancy(bytes)? < 1 {
            return Err(Error::Driver(format!(
                "lu_panel_coop: no block of {LU_COOP_BLOCK} threads with {bytes} bytes of \
                 shared memory fits on an SM"
            )));
        }
        let (ipiv, diag, cbase) = (p.ipiv, p.diag, cw.cbase.get());
        let in_smem_arg = u32::from(in_smem);
        let mut b = self.kernel_args_on(stream, f);
        b.arg(&p.a)
            .arg(&p.lda)
            .arg(&p.m)
            .arg(&c0)
            .arg(&w)
            .arg(&ipiv)
            .arg(&diag)
            .arg(&slab)
            .arg(&in_smem_arg)
            .arg(&cw.pval)
            .arg(&cw.pidx)
            .arg(&cw.prow)
            .arg(&cw.counter)
            .arg(&cbase);
        let cfg = LaunchConfig {
            grid_dim: (u32::try_from(blocks).expect("grid fits u32"), 1, 1),
            block_dim: (LU_COOP_BLOCK, 1, 1),
            shared_mem_bytes: u32::try_from(bytes).expect("shared memory fits u32"),
        };
        // SAFETY: matches lu_panel_coop_{f32,f64}(a: *mut T, lda, m, c0, w, ipiv: *mut u32,
        // diag: *mut T, slab, in_smem: u32, pval: *mut T, pidx: *mut u32, prow: *mut T,
        // counter: *mut u32, cbase: u32) (device pointers are 64-bit). LuPtrs' invariant
        // gives `a` m×n (ld lda ≥ m) and ipiv/diag of min(m, n) entries, and the assert
        // gives c0 + w ≤ min(m, n), so rows c0..m of the panel's columns and entries
        // c0..c0+w are in bounds. blocks·slab ≥ rows and every block's slab starts below
        // m (blocks = ⌈rows/slab⌉). The partials were allocated by lu_coop_alloc for
        // max_blocks ≥ blocks and max_w ≥ w: pval/pidx 2·max_blocks, prow
        // 2·(max_blocks + 1)·max_w entries; the counter holds cbase (zeroed at
        // allocation, every earlier launch of this factorisation on this stream advanced
        // it by w·blocks, tracked below) and nothing else touches it. Cooperative launch
        // of blocks ≤ SMs with an occupancy of ≥ 1 block per SM at this shared memory
        // (checked above; the limit was raised to the opt-in maximum), block 256,
        // (72 + 2w + in_smem·slab·w)·size_of::<T>() bytes as the entry requires; on
        // self.stream, or on the look-ahead stream ordered by events after the work on self.stream
        // that wrote the panel and before any later work on self.stream that touches
        // it, the partials or the counter (lu_lookahead_loop); the guards are held by
        // lu_factor_in_place.
        unsafe { b.launch_cooperative(cfg) }.map_err(launch_err("lu_panel_coop"))?;
        cw.cbase.set(cbase.wrapping_add((w * blocks) as u32));
        Ok(())
    }

    /// The largest cluster size of [`LU_CLUSTER_SIZES`] at which `lu_cluster_panel`
    /// (blocks of [`LU_CLUSTER_BLOCK`] threads with `smem_optin` bytes of shared memory,
    /// one a SM) has at least one cluster that can be resident; None on devices
    /// without the sm_90 module or where no size fits. Raises the kernel's
    /// shared-memory limit and allows non-portable cluster sizes.
    fn lu_cluster_max<T: GpuScalar>(&self, smem_optin: usize) -> Result<Option<usize>> {
        let Some(k) = self.sm90.as_ref() else {
            return Ok(None);
        };
        let f = &T::sm90_set(k).lu_cluster_panel;
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(smem_optin).unwrap_or(i32::MAX),
        )
        .map_err(driver_err("raising lu_cluster_panel's shared memory limit"))?;
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
            1,
        )
        .map_err(driver_err(
            "allowing lu_cluster_panel's non-portable clusters",
        ))?;
        for size in LU_CLUSTER_SIZES {
            if self.lu_cluster_fits(f.cu_function(), size, smem_optin)? {
                return Ok(Some(size));
            }
        }
        Ok(None)
    }

    /// Whether at least one cluster of `size` blocks of [`LU_CLUSTER_BLOCK`] threads
    /// with `smem` bytes of dynamic shared memory can be resident
    /// (`cuOccupancyMaxActiveClusters`); an error of that query counts as no.
    fn lu_cluster_fits(&self, f: CUfunction, size: usize, smem: usize) -> Result<bool> {
        let mut attr = cluster_attr(size);
        let cfg = cluster_config(size, smem, self.stream.cu_stream(), &mut attr);
        let mut clusters: core::ffi::c_int = 0;
        // SAFETY: `f` is a live function of a module this Gpu owns; `cfg` and `attr`
        // are valid for the call and only read; `clusters` is written.
        let r =
            unsafe { cudarc::driver::sys::cuOccupancyMaxActiveClusters(&mut clusters, f, &cfg) };
        Ok(r == CUresult::CUDA_SUCCESS && clusters >= 1)
    }

    /// `lu_cluster_panel` for the panel c0..c0+w on `stream` when its rows fit in the
    /// shared memory of one cluster of at most `max_cluster` blocks; returns false (and
    /// launches nothing) when they do not, for the cooperative panel to take it.
    fn lu_cluster_panel_on<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        stream: &cudarc::driver::CudaStream,
        max_cluster: usize,
    ) -> Result<bool> {
        let cw = p.coop.as_ref().expect("cooperative scratch present");
        let k = self.sm90.as_ref().expect("sm_90 kernels present");
        let f = T::sm90_set(k).lu_cluster_panel.cu_function();
        let Some((blocks, slab, smem)) =
            cluster_shape(cw, max_cluster, p.m - c0, w, core::mem::size_of::<T>())
        else {
            return Ok(false);
        };
        let (a, lda, m, ipiv, diag) = (p.a, p.lda, p.m, p.ipiv, p.diag);
        let mut args: [*mut core::ffi::c_void; 8] = [
            (&a as *const u64).cast_mut().cast(),
            (&lda as *const usize).cast_mut().cast(),
            (&m as *const usize).cast_mut().cast(),
            (&c0 as *const usize).cast_mut().cast(),
            (&w as *const usize).cast_mut().cast(),
            (&ipiv as *const u64).cast_mut().cast(),
            (&diag as *const u64).cast_mut().cast(),
            (&slab as *const usize).cast_mut().cast(),
        ];
        let mut attr = cluster_attr(blocks);
        let cfg = cluster_config(blocks, smem, stream.cu_stream(), &mut attr);
        self.count_launch();
        // SAFETY: matches lu_cluster_panel_{f32,f64}(a: *mut T, lda, m, c0, w, ipiv: *mut
        // u32, diag: *mut T, slab) (device pointers are 64-bit; each args entry points at
        // a live local of the entry's type). LuPtrs' invariant gives `a` m×n (ld lda ≥
        // m) and ipiv/diag of min(m, n) entries, and the caller's assert c0 + w ≤
        // min(m, n), so rows c0..m of the panel's columns and entries c0..c0+w are in
        // bounds. The grid is one cluster (cluster dimension = grid = blocks ≤
        // max_cluster; lu_cluster_max had cuOccupancyMaxActiveClusters accept a cluster
        // of max_cluster blocks at the opt-in maximum ≥ smem bytes, so this smaller
        // cluster with less memory fits too; the limit was raised to that maximum); blocks·slab ≥
        // rows and every block's slab starts below m (blocks = ⌈rows/slab⌉); block
        // LU_CLUSTER_BLOCK ≤ 16 blocks (LU_CLUSTER_SIZES), cluster_header_bytes(w, elem)
        // + slab·w·elem bytes as the entry requires. Stream ordering as for lu_panel_coop (the caller's contract:
        // self.stream, or the look-ahead stream ordered by events); the guards are held by
        // lu_factor_in_place.
        unsafe {
            cudarc::driver::sys::cuLaunchKernelEx(&cfg, f, args.as_mut_ptr(), core::ptr::null_mut())
        }
        .result()
        .map_err(launch_err("lu_cluster_panel"))?;
        Ok(true)
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

    /// Whether the cooperative leaf c0..c0+w splits in halves for the cluster panel:
    /// clusters are on, the leaf's rows do not fit one cluster at width w, its halves
    /// are at least [`LuPanelOpts::cluster_leaf_min`] wide and some width down to that
    /// minimum fits (else the whole-GPU cooperative launch takes the leaf as it is).
    fn lu_leaf_splits<T: GpuScalar>(&self, p: &LuPtrs, c0: usize, w: usize) -> bool {
        let Some(cw) = p.coop.as_ref() else {
            return false;
        };
        let Some(max_cluster) = cw.max_cluster else {
            return false;
        };
        let (rows, elem) = (p.m - c0, core::mem::size_of::<T>());
        let min_w = cw.cluster_leaf_min.max(1);
        w / 2 >= min_w
            && cluster_shape(cw, max_cluster, rows, w, elem).is_none()
            && cluster_shape(cw, max_cluster, rows, min_w, elem).is_some()
    }

    /// `lu_pivot` for column step j of the base panel c0..cend.
    fn lu_pivot_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        j: usize,
        c0: usize,
        cend: usize,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        assert!(c0 <= j && j < cend && cend <= p.n && j < p.m);
        let f = &T::kernel_set(&self.kernels).lu_pivot;
        let ipiv = p.ipiv;
        let diag = p.diag;
        let mut b = self.kernel_args_on(stream, f);
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
        // dynamic shared memory as the entry's # Safety requires; ordered on `stream`
        // with the rest of the panel (the caller's lane).
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_pivot"))?;
        Ok(())
    }

    /// `lu_panel_fused`: the base panel c0..c0+w in one single-block launch.
    fn lu_panel_fused_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        assert!((1..=LU_FUSED_MAX_W).contains(&w) && c0 + w <= p.n && c0 < p.m);
        let f = &T::kernel_set(&self.kernels).lu_panel_fused;
        let (ipiv, diag) = (p.ipiv, p.diag);
        let mut b = self.kernel_args_on(stream, f);
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
        // 900 bytes of dynamic shared memory as the entry requires; on `stream`, the
        // caller's lane, in order with the rest of the panel.
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_panel_fused"))?;
        Ok(())
    }

    /// `lu_update` for column step j (panel columns end before `cend`).
    fn lu_update_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        j: usize,
        cend: usize,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        assert!(j < cend && cend <= p.n && j < p.m);
        let rows = p.m - j - 1;
        if rows == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).lu_update;
        let mut b = self.kernel_args_on(stream, f);
        b.arg(&p.a).arg(&p.lda).arg(&p.m).arg(&j).arg(&cend);
        let cfg = LaunchConfig {
            grid_dim: (grid_blocks(rows, LU_UPDATE_BLOCK), 1, 1),
            block_dim: (LU_UPDATE_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches lu_update_{f32,f64}(a: *mut T, lda, m, j, cend); `a` is m×n
        // with ld lda (LuPtrs' invariant) and j < cend ≤ n, j < m (asserted), so rows
        // j..m of columns j..cend are in bounds; grid ⌈(m−j−1)/256⌉ × 256 covers the rows
        // j+1..m and the kernel returns for the rest; ordered on `stream` (the caller's
        // lane) after the pivot step it follows.
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_update"))?;
        Ok(())
    }

    /// `lu_laswp`: interchanges ipiv[steps] on columns `cols` minus `skip`, on the main
    /// stream.
    fn lu_laswp_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        cols: core::ops::Range<usize>,
        skip: core::ops::Range<usize>,
        steps: core::ops::Range<usize>,
    ) -> Result<()> {
        self.lu_laswp_on::<T>(p, cols, skip, steps, &self.stream)
    }

    /// [`Gpu::lu_laswp_raw`] on `stream`; the caller orders it after the panel that wrote
    /// ipiv[steps] and against every other launch that touches the same columns.
    fn lu_laswp_on<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        cols: core::ops::Range<usize>,
        skip: core::ops::Range<usize>,
        steps: core::ops::Range<usize>,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        assert!(cols.end <= p.n && steps.end <= p.m.min(p.n));
        let all_skipped = !skip.is_empty() && skip.start <= cols.start && skip.end >= cols.end;
        if cols.is_empty() || steps.is_empty() || all_skipped {
            return Ok(());
        }
        if steps.len() <= LU_LASWP_TILE_MAX_K_GATHERS * LU_LASWP_TILE_MAX_K {
            // Panels up to 512 wide: one gather a 128 steps, in order on the stream.
            let mut k = steps.start;
            while k < steps.end {
                let k2 = (k + LU_LASWP_TILE_MAX_K).min(steps.end);
                self.lu_laswp_tile_raw::<T>(p, cols.clone(), skip.clone(), k..k2, stream)?;
                k = k2;
            }
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).lu_laswp;
        let ipiv = p.ipiv;
        let mut b = self.kernel_args_on(stream, f);
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
            grid_dim: (grid_blocks(cols.len(), LU_LASWP_BLOCK), 1, 1),
            block_dim: (LU_LASWP_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches lu_laswp_{f32,f64}(a: *mut T, lda, col0, col1, skip0, skip1,
        // ipiv: *const u32, k1, k2); ipiv[steps] were written by earlier panel launches
        // ordered before this one (this stream, or an event the caller waited for) with
        // values in steps.start..m (a pivot of step j is ≥ j, < m), so every swapped row
        // is < m and every column < n (asserted), inside `a` (LuPtrs' invariant); one
        // thread per column, no launch touching these columns runs concurrently (the
        // caller's ordering).
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_laswp"))?;
        Ok(())
    }

    /// `lu_laswp_tile`: interchanges ipiv[steps] (at most 128) on columns `cols` minus
    /// `skip`, gathered per 16-column tile.
    fn lu_laswp_tile_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        cols: core::ops::Range<usize>,
        skip: core::ops::Range<usize>,
        steps: core::ops::Range<usize>,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let kw = steps.len();
        assert!(
            (1..=LU_LASWP_TILE_MAX_K).contains(&kw) && cols.end <= p.n && steps.end <= p.m.min(p.n)
        );
        let f = &T::kernel_set(&self.kernels).lu_laswp_tile;
        let ipiv = p.ipiv;
        let mut b = self.kernel_args_on(stream, f);
        b.arg(&p.a)
            .arg(&p.lda)
            .arg(&cols.start)
            .arg(&cols.end)
            .arg(&skip.start)
            .arg(&skip.end)
            .arg(&ipiv)
            .arg(&steps.start)
            .arg(&steps.end);
        let smem = 6 * kw * 4 + 2 * kw * LU_LASWP_TILE_COLS * core::mem::size_of::<T>();
        let cfg = LaunchConfig {
            grid_dim: (grid_blocks(cols.len(), LU_LASWP_TILE_COLS as u32), 1, 1),
            block_dim: (LU_LASWP_TILE_BLOCK, 1, 1),
            shared_mem_bytes: u32::try_from(smem).expect("shared memory fits u32"),
        };
        // SAFETY: matches lu_laswp_tile_{f32,f64}(a: *mut T, lda, col0, col1, skip0, skip1,
        // ipiv: *const u32, k1, k2); 1 ≤ k2 − k1 ≤ 128 (asserted); ipiv[steps] were
        // written by the panel, ordered before this launch (same stream, or an event the
        // caller waited for), with k ≤ ipiv[k] < m, so every touched row is < m and every
        // column < n (asserted), inside `a` (LuPtrs' invariant); grid ⌈|cols|/16⌉, block
        // 256, 6·kw·4 + 2·kw·16·size_of::<T>() (≤ 36 KiB) bytes of dynamic shared memory
        // as the entry requires; no launch touching these columns runs concurrently (the
        // caller's ordering).
        unsafe { b.launch(cfg) }.map_err(launch_err("lu_laswp_tile"))?;
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
        lane: Lane<'_>,
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
        self.count_launch();
        // SAFETY: L is w×w at (c0, c0) and B is w×|cols| at (c0, cols.start), both with
        // ld lda inside the m×n matrix (asserted; LuPtrs' invariant); B's columns start
        // at or after c0+w, so B does not overlap the lower triangle of L that TRSM
        // reads; the lane's handle is bound to the lane's stream, on which the caller
        // ordered this call.
        let st = unsafe {
            raw_trsm_lower_unit::<T>(
                lane.blas,
                mi,
                ni,
                p.at::<T>(c0, c0),
                ld,
                p.at::<T>(c0, cols.start),
                ld,
            )
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
        lane: Lane<'_>,
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
        self.count_launch();
        // SAFETY: A21 is |rows|×|inner|, A12 |inner|×|cols|, A22 |rows|×|cols|, all with
        // ld lda inside the m×n matrix (asserted; LuPtrs' invariant). A22 (rows ≥
        // inner.end, cols ≥ inner.end) is disjoint from A21 (columns < inner.end) and
        // from A12 (rows < inner.end); the lane's handle is bound to the lane's stream,
        // on which the caller ordered this call.
        let st = unsafe {
            raw_gemm::<T>(
                lane.blas,
                (mi, ni, ki),
                -1.0,
                (p.at::<T>(rows.start, inner.start), ld),
                (p.at::<T>(inner.start, cols.start), ld),
                1.0,
                (p.at::<T>(rows.start, cols.start), ld),
            )
        };
        status(OP, st)
    }

    /// [`Gpu::lu_l11_inverse`] where U₁₂ goes by the inverse (the scratch exists).
    fn lu_l11_inverse_if<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        slot: usize,
        lane: Lane<'_>,
    ) -> Result<()> {
        if p.u12.is_some() {
            self.lu_l11_inverse::<T>(p, c0, w, slot, lane)
        } else {
            Ok(())
        }
    }

    /// U₁₂ := L₁₁⁻¹·A(c0..c0+w, cols) on the main lane: by one GEMM with the inverse
    /// in `slot` ([`Gpu::lu_u12_by_inverse`]) where the scratch exists and `cols` is
    /// wider than the panel, else by TRSM.
    fn lu_u12<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        cols: core::ops::Range<usize>,
        slot: usize,
    ) -> Result<()> {
        if p.u12.is_some() && cols.len() > w {
            self.lu_u12_by_inverse::<T>(p, c0, w, cols, slot)
        } else {
            self.lu_trsm_in::<T>(p, c0, w, cols, self.main_lane())
        }
    }

    /// L₁₁⁻¹ of the panel c0..c0+w into inverse slot `slot` (w×w, ld nb): the slot
    /// := I (`xGEAM` from the identity), then L₁₁⁻¹·I (`xTRSM`), on `lane` right after
    /// the panel (U₁₂ by one GEMM instead of a TRSM across the matrix).
    fn lu_l11_inverse<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        slot: usize,
        lane: Lane<'_>,
    ) -> Result<()> {
        const OP: &str = "lu L11 inverse";
        let u = p.u12.as_ref().expect("U12 scratch present");
        assert!(w >= 1 && w <= u.nb && slot < 2 && c0 + w <= p.m.min(p.n));
        let (wi, ldl, ld) = (
            int(OP, "w", w)?,
            int(OP, "nb", u.nb)?,
            int(OP, "lda", p.lda)?,
        );
        let elem = core::mem::size_of::<T>() as u64;
        let inv = u.linv + (slot * u.nb * u.nb) as u64 * elem;
        self.count_launch();
        // SAFETY: eye and both inverse slots are nb×nb (ld nb) device buffers of T held
        // by lu_factor_in_place (U12Ptrs' invariant), w ≤ nb (asserted); geam writes
        // the slot from eye with beta = 0 (the slot is B and C, in place as cuBLAS
        // allows with equal ld); the lane's handle is bound to the lane's stream, where
        // the caller orders this after the panel and after every earlier use of this
        // slot (the slots alternate by panel, lu_lookahead_steps).
        let st = unsafe { raw_geam_copy::<T>(lane.blas, wi, wi, u.eye, ldl, inv, ldl) };
        status(OP, st)?;
        self.count_launch();
        // SAFETY: L₁₁ is w×w at (c0, c0) with ld lda inside the matrix (asserted,
        // LuPtrs' invariant), the slot w×w with ld nb in its own buffer, disjoint from
        // the matrix; ordered on the lane's stream after the geam above.
        let st =
            unsafe { raw_trsm_lower_unit::<T>(lane.blas, wi, wi, p.at::<T>(c0, c0), ld, inv, ldl) };
        status(OP, st)
    }

    /// U₁₂ := L₁₁⁻¹·A(c0..c0+w, cols) by one GEMM with the inverse in `slot` (from
    /// [`Gpu::lu_l11_inverse`] for this panel): A₁₂ is first copied to the scratch
    /// (`xGEAM`), then A₁₂ := L₁₁⁻¹·scratch. On the main lane.
    fn lu_u12_by_inverse<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        cols: core::ops::Range<usize>,
        slot: usize,
    ) -> Result<()> {
        const OP: &str = "lu U12";
        if cols.is_empty() {
            return Ok(());
        }
        let u = p.u12.as_ref().expect("U12 scratch present");
        assert!(w >= 1 && w <= u.nb && slot < 2 && c0 + w <= cols.start && cols.end <= p.n);
        let (wi, ci, ldl, ld) = (
            int(OP, "w", w)?,
            int(OP, "cols", cols.len())?,
            int(OP, "nb", u.nb)?,
            int(OP, "lda", p.lda)?,
        );
        let elem = core::mem::size_of::<T>() as u64;
        let inv = u.linv + (slot * u.nb * u.nb) as u64 * elem;
        let h = self.main_lane().blas;
        let a12 = p.at::<T>(c0, cols.start);
        self.count_launch();
        // SAFETY: A₁₂ is w×|cols| at (c0, cols.start) with ld lda inside the matrix
        // (asserted, LuPtrs' invariant); the scratch holds nb·n ≥ w·|cols| elements
        // (ld nb, U12Ptrs' invariant, |cols| ≤ n asserted) and is disjoint from the
        // matrix; the handle is bound to the main stream, where every use of the scratch
        // is ordered.
        let st = unsafe { raw_geam_copy::<T>(h, wi, ci, a12, ld, u.scratch, ldl) };
        status(OP, st)?;
        self.count_launch();
        // SAFETY: the inverse slot (w×w, ld nb) and the scratch (w×|cols|, ld nb) are
        // scratch buffers disjoint from A₁₂, which is written with beta = 0; the slot
        // was written by lu_l11_inverse for this panel, ordered before this call by the
        // caller (same stream, or the look-ahead event the main stream waited for).
        let st = unsafe {
            raw_gemm::<T>(
                h,
                (wi, ci, wi),
                1.0,
                (inv, ldl),
                (u.scratch, ldl),
                0.0,
                (a12, ld),
            )
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
        let (zero, none) = (0usize, 0usize);
        let mut lb = self.kernel_args(f);
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
            grid_dim: (grid_blocks(q, LU_LASWP_BLOCK), 1, 1),
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

/// cuBLAS `xGEMM` on raw device pointers of T: C := alpha·A·B + beta·C, no transposes,
/// `mnk` = (m, n, k), A m×k, B k×n, C m×n, each (pointer, ld).
///
/// # Safety
/// Each pointer addresses a live device allocation of T holding its block at its ld;
/// C is disjoint from A and B; `h` is a live handle bound to a stream on which the
/// caller orders this call after every write of A, B (and C when beta ≠ 0) and before
/// every other access of C.
unsafe fn raw_gemm<T: GpuScalar>(
    h: cublas::cublasHandle_t,
    mnk: (i32, i32, i32),
    alpha: f64,
    a: (u64, i32),
    b: (u64, i32),
    beta: f64,
    c: (u64, i32),
) -> cublas::cublasStatus_t {
    let nn = cublas::cublasOperation_t::CUBLAS_OP_N;
    let (m, n, k) = mnk;
    match T::DTYPE {
        // SAFETY: the caller's contract; T is f32 (sealed GpuScalar, DTYPE = F32).
        Dtype::F32 => unsafe {
            let (al, be) = (alpha as f32, beta as f32);
            cublas::cublasSgemm_v2(
                h,
                nn,
                nn,
                m,
                n,
                k,
                &al,
                a.0 as *const f32,
                a.1,
                b.0 as *const f32,
                b.1,
                &be,
                c.0 as *mut f32,
                c.1,
            )
        },
        // SAFETY: as for f32 with T = f64.
        Dtype::F64 => unsafe {
            cublas::cublasDgemm_v2(
                h,
                nn,
                nn,
                m,
                n,
                k,
                &alpha,
                a.0 as *const f64,
                a.1,
                b.0 as *const f64,
                b.1,
                &beta,
                c.0 as *mut f64,
                c.1,
            )
        },
    }
}

/// cuBLAS `xTRSM` on raw device pointers of T: B := L⁻¹·B, L the m×m unit lower
/// triangle at `l` (ld `ldl`), B m×n at `b` (ld `ldb`).
///
/// # Safety
/// Both blocks lie in live device allocations of T at their ld; B does not overlap
/// the lower triangle of L; `h` is a live handle bound to a stream on which the caller
/// orders this call after every write of L and B and before every other access of B.
unsafe fn raw_trsm_lower_unit<T: GpuScalar>(
    h: cublas::cublasHandle_t,
    m: i32,
    n: i32,
    l: u64,
    ldl: i32,
    b: u64,
    ldb: i32,
) -> cublas::cublasStatus_t {
    let (side, uplo, tr, dg) = (
        cublas::cublasSideMode_t::CUBLAS_SIDE_LEFT,
        cublas::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        cublas::cublasOperation_t::CUBLAS_OP_N,
        cublas::cublasDiagType_t::CUBLAS_DIAG_UNIT,
    );
    match T::DTYPE {
        // SAFETY: the caller's contract; T is f32 (DTYPE = F32).
        Dtype::F32 => unsafe {
            let one = 1.0f32;
            cublas::cublasStrsm_v2(
                h,
                side,
                uplo,
                tr,
                dg,
                m,
                n,
                &one,
                l as *const f32,
                ldl,
                b as *mut f32,
                ldb,
            )
        },
        // SAFETY: as for f32 with T = f64.
        Dtype::F64 => unsafe {
            let one = 1.0f64;
            cublas::cublasDtrsm_v2(
                h,
                side,
                uplo,
                tr,
                dg,
                m,
                n,
                &one,
                l as *const f64,
                ldl,
                b as *mut f64,
                ldb,
            )
        },
    }
}

/// cuBLAS `xGEAM` as a strided copy on raw device pointers of T: C := A (m×n), with
/// beta = 0 and C passed as B.
///
/// # Safety
/// A (ld `lda`) and C (ld `ldc`) are m×n blocks of live device allocations of T that
/// do not overlap; `h` is a live handle bound to a stream on which the caller orders
/// this call after every write of A and before every other access of C.
unsafe fn raw_geam_copy<T: GpuScalar>(
    h: cublas::cublasHandle_t,
    m: i32,
    n: i32,
    a: u64,
    lda: i32,
    c: u64,
    ldc: i32,
) -> cublas::cublasStatus_t {
    let nn = cublas::cublasOperation_t::CUBLAS_OP_N;
    match T::DTYPE {
        // SAFETY: the caller's contract; beta = 0, so B (= C) is not read; T is f32.
        Dtype::F32 => unsafe {
            let (one, zero) = (1.0f32, 0.0f32);
            cublas::cublasSgeam(
                h,
                nn,
                nn,
                m,
                n,
                &one,
                a as *const f32,
                lda,
                &zero,
                c as *const f32,
                ldc,
                c as *mut f32,
                ldc,
            )
        },
        // SAFETY: as for f32 with T = f64.
        Dtype::F64 => unsafe {
            let (one, zero) = (1.0f64, 0.0f64);
            cublas::cublasDgeam(
                h,
                nn,
                nn,
                m,
                n,
                &one,
                a as *const f64,
                lda,
                &zero,
                c as *const f64,
                ldc,
                c as *mut f64,
                ldc,
            )
        },
    }
}
