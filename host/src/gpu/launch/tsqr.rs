//! The TSQR panel (gpu-kernels/src/tsqr.rs, docs/kernels.md;
//! docs/algorithms.md#tsqr): a tall rows×n panel (n ≤ [`TSQR_MAX_COLS`])
//! factored by a tree of 256-row Householder QRs that read the panel once, then turned
//! back into the compact-WY form every other panel produces (R with exact zeros below
//! the diagonal in A, V with explicit 1s and 0s, τ, T) by Householder reconstruction.
//! [`tsqr_plan`] lays out the tree; [`Gpu::tsqr_panel`] runs it in 2·levels + 2
//! launches on the main stream.

use core::marker::PhantomData;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaFunction, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::base::error::Result;
use crate::gpu::ffi::blas::Op;
use crate::gpu::launch::launch_err;
use crate::gpu::runtime::matrix::{DevMat, DevMatView, DevMatViewMut, DevVec};
use crate::gpu::runtime::{driver_err, Gpu, GpuScalar};

/// Widest panel the TSQR kernels take (gpu-kernels `tsqr::COLS`).
pub(crate) const TSQR_MAX_COLS: usize = 32;
/// Warps of a leaf (gpu-kernels `tsqr::WARPS`).
const LEAF_WARPS: usize = 8;
/// Rows of a chain block (gpu-kernels `tsqr::BR`).
const BLOCK_ROWS: usize = 32;
/// Threads per block of the leaf kernels (`tsqr::THREADS`; `.maxntid` in the PTX).
const LEAF_THREADS: u32 = 256;
/// Threads of `tsqr_reconstruct` (`tsqr::RECON_THREADS`).
const RECON_THREADS: u32 = 1024;
/// `tsqr::leaf_smem(T::RING)`, elements: per warp a 32×33 tile, an 8×33 staging
/// tile, a ring of columns (`tsqr::Pair::RING`: 4 in f32, 8 in f64) and the column
/// scales.
fn leaf_smem<T>() -> usize {
    let ring = if core::mem::size_of::<T>() == 8 { 8 } else { 4 };
    LEAF_WARPS * (32 * 33 + 8 * 33 + ring * 32 + 32)
}
/// `tsqr::RECON_SMEM`, elements.
const RECON_SMEM: usize = 3 * TSQR_MAX_COLS * (TSQR_MAX_COLS + 1) + TSQR_MAX_COLS;
/// Leaves a level aims for (two per multiprocessor of an H100: one wave of the f32
/// kernels, two blocks an SM; two of the f64 ones, one block an SM): the chains are
/// made just long enough for that, so that every multiprocessor has work and the
/// chains (each a latency-bound sequence of column steps) stay short. Measured on the
/// H100 against 132 (docs/performance.md).
const TARGET_LEAVES: usize = 264;
/// Shortest chain (blocks a warp): two blocks a chain make the upper levels of the
/// tree shrink the rows 16-fold (one level fewer at 1M rows; measured faster).
const MIN_KPW: usize = 2;
/// Longest chain (blocks a warp).
const MAX_KPW: usize = 64;

/// Blocks a warp chains on a level of `rows` rows ([`TARGET_LEAVES`]).
fn level_kpw(rows: usize) -> usize {
    rows.div_ceil(BLOCK_ROWS)
        .div_ceil(LEAF_WARPS * TARGET_LEAVES)
        .clamp(MIN_KPW, MAX_KPW)
}

/// Rows of a leaf and the leaves of a level (gpu-kernels `tsqr::level_leaves`).
fn level_leaves(rows: usize, kpw: usize) -> (usize, usize) {
    let leaf = LEAF_WARPS * kpw * BLOCK_ROWS;
    (leaf, rows.div_ceil(leaf))
}

/// Length of a level's auxiliary array (gpu-kernels `tsqr::aux_layout`): τ of every
/// chain block, then τ and the 32×32 reflector block of each inner node of each leaf's
/// tree.
fn aux_len(rows: usize, kpw: usize) -> usize {
    let (_, leaves) = level_leaves(rows, kpw);
    let nodes = LEAF_WARPS - 1;
    leaves * LEAF_WARPS * kpw * TSQR_MAX_COLS + leaves * nodes * TSQR_MAX_COLS * (1 + BLOCK_ROWS)
}

/// One level of the tree: `rows`×n factored as `leaves` leaves whose warps chain `kpw`
/// blocks each; for levels ≥ 1 its matrix (the stacked R's of the level below) and
/// its explicit Q lie in the scratch at `mat` and `q` (ld `rows`); its auxiliary array
/// (τ and the in-leaf trees' reflectors) at `aux`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TsqrLevel {
    pub rows: usize,
    pub kpw: usize,
    pub leaves: usize,
    pub mat: usize,
    pub q: usize,
    pub aux: usize,
}

/// The tree of a rows×n panel and the offsets (in elements) of its scratch: the levels
/// from the panel (level 0) up to a single leaf, the tree's final R, M = U⁻¹ and the
/// reconstructed R (each [`TSQR_MAX_COLS`]², ld TSQR_MAX_COLS), and the total length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TsqrPlan {
    pub levels: Vec<TsqrLevel>,
    pub r_final: usize,
    pub m: usize,
    pub rh: usize,
    pub len: usize,
}

/// Lays out the tree of a rows×n panel (1 ≤ n ≤ [`TSQR_MAX_COLS`], rows ≥ n): level
/// ℓ + 1 stacks the n×n R's of level ℓ's leaves, until a level is one leaf.
pub(crate) fn tsqr_plan(rows: usize, n: usize) -> TsqrPlan {
    assert!((1..=TSQR_MAX_COLS).contains(&n) && rows >= n);
    let mut levels = Vec::new();
    let mut len = 0;
    let mut r = rows;
    loop {
        let kpw = level_kpw(r);
        let (_, leaves) = level_leaves(r, kpw);
        let (mat, q) = if levels.is_empty() {
            (0, 0)
        } else {
            len += 2 * r * n;
            (len - 2 * r * n, len - r * n)
        };
        levels.push(TsqrLevel {
            rows: r,
            kpw,
            leaves,
            mat,
            q,
            aux: len,
        });
        len += aux_len(r, kpw);
        if leaves == 1 {
            break;
        }
        r = leaves * n;
    }
    let sq = TSQR_MAX_COLS * TSQR_MAX_COLS;
    TsqrPlan {
        levels,
        r_final: len,
        m: len + sq,
        rh: len + 2 * sq,
        len: len + 3 * sq,
    }
}

/// Scratch of [`Gpu::tsqr_panel`], sized for the tallest panel of a factorisation
/// (and grown by a panel whose plan needs more: a shorter panel's shorter chains can
/// need more auxiliary space), with the kernels' shared-memory limits raised.
pub(crate) struct TsqrWork<T> {
    scratch: DevVec<T>,
    _elem: PhantomData<T>,
}

impl<T: GpuScalar> TsqrWork<T> {
    /// Scratch for panels of up to `rows` rows and [`TSQR_MAX_COLS`] columns.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn new(gpu: &Gpu, rows: usize) -> Result<Self> {
        let plan = tsqr_plan(rows.max(TSQR_MAX_COLS), TSQR_MAX_COLS);
        let elem = core::mem::size_of::<T>();
        let ks = T::kernel_set(&gpu.kernels);
        for (f, words, what) in [
            (
                &ks.tsqr_leaf_qr,
                leaf_smem::<T>(),
                "raising tsqr_leaf_qr's shared memory limit",
            ),
            (
                &ks.tsqr_leaf_apply,
                leaf_smem::<T>(),
                "raising tsqr_leaf_apply's shared memory limit",
            ),
        ] {
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                i32::try_from(words * elem).expect("shared memory fits i32"),
            )
            .map_err(driver_err(what))?;
        }
        Ok(Self {
            // SAFETY: see `Self::scratch_for`.
            scratch: unsafe { Self::scratch_for(gpu, plan.len)? },
            _elem: PhantomData,
        })
    }

    /// A scratch of `len` elements, not filled.
    ///
    /// # Safety
    /// Every region of the scratch is written before it is read: level matrices by the
    /// level below's `tsqr_leaf_qr` (all leaves·n rows), the levels' Q by
    /// `tsqr_leaf_apply` (all rows), τ of the chain blocks and tree nodes by the leaf
    /// QR (columns < n, read for those only), the final R by the top leaf QR, M and R
    /// by `tsqr_reconstruct` (columns < n, read for those only).
    unsafe fn scratch_for(gpu: &Gpu, len: usize) -> Result<DevVec<T>> {
        DevVec::uninit(gpu, len)
    }
}

/// Launch configuration of a leaf kernel.
fn leaf_cfg<T>(blocks: usize, words: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (u32::try_from(blocks).expect("leaf count fits u32"), 1, 1),
        block_dim: (LEAF_THREADS, 1, 1),
        shared_mem_bytes: u32::try_from(words * core::mem::size_of::<T>()).expect("fits u32"),
    }
}

/// Device addresses of a TSQR panel's operands, taken under their guards: the panel
/// (address, ld), V, T, τ and the scratch, whose element `off` is at `at(off)`.
#[derive(Clone, Copy)]
struct TsqrAddrs {
    a: (u64, usize),
    v: (u64, usize),
    t: (u64, usize),
    tau: u64,
    scr: u64,
    /// Bytes an element.
    elem: u64,
}

impl TsqrAddrs {
    /// The scratch's element `off`.
    fn at(&self, off: usize) -> u64 {
        self.scr + off as u64 * self.elem
    }

    /// Level l's matrix: the panel for level 0, else its region of the scratch.
    fn level_mat(&self, plan: &TsqrPlan, l: usize) -> (u64, usize) {
        if l == 0 {
            self.a
        } else {
            (self.at(plan.levels[l].mat), plan.levels[l].rows)
        }
    }
}

impl Gpu {
    /// Factors the rows×n panel of `a` at (r0, j0) by TSQR and Householder reconstruction: R
    /// (exact zeros below the diagonal) in place, V (explicit unit diagonal, zeros above) into
    /// `v`, τ into `tau`, T (upper triangular) into `t` — the outputs of `fused_panel_qr`
    /// (docs/algorithms.md#blocked-householder-qr), to rounding. 2·levels + 2 launches and one
    /// GEMM (level 1's Q times M, in the working precision) on the main stream.
    ///
    /// # Errors
    /// [`crate::Error::Driver`] if a launch fails, [`crate::Error::Cublas`].
    ///
    /// # Panics
    /// If the panel or outputs do not fit, n > [`TSQR_MAX_COLS`], n > rows, or the
    /// scratch is too small for the panel (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn tsqr_panel<T: GpuScalar>(
        &self,
        work: &mut TsqrWork<T>,
        a: &mut DevMat<T>,
        r0: usize,
        j0: usize,
        rows: usize,
        n: usize,
        v: &mut DevMatViewMut<'_, T>,
        tau: &mut DevVec<T>,
        t: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        assert!((1..=TSQR_MAX_COLS).contains(&n) && n <= rows);
        assert!(r0 + rows <= a.nrows() && j0 + n <= a.ncols());
        assert!(v.nrows() >= rows && v.ncols() >= n);
        assert!(tau.len() >= n && t.nrows() >= n && t.ncols() >= n);
        let plan = tsqr_plan(rows, n);
        if plan.len > work.scratch.len() {
            // SAFETY: the kernels below write every region before reading it
            // (`TsqrWork::scratch_for`); the old scratch is freed in stream order.
            work.scratch = unsafe { TsqrWork::<T>::scratch_for(self, plan.len)? };
        }
        let elem = core::mem::size_of::<T>() as u64;
        let ks = T::kernel_set(&self.kernels);
        let s = &self.stream;
        let top = plan.levels.len() - 1;
        let lda = a.ld();
        let (ldv, ldt) = (v.ld(), t.ld());
        // Phase 1 (kernels on raw addresses; the guards record the main stream's use).
        let ad = {
            let (pa0, _ga) = a.buf_mut().device_ptr_mut(s);
            let pa = pa0 + (r0 + j0 * lda) as u64 * elem;
            let (pv, _gv) = v.buf_mut().device_ptr_mut(s);
            let (pt, _gt) = t.buf_mut().device_ptr_mut(s);
            let mut tau_v = tau.view_mut();
            let (ptau, _gtau) = tau_v.device_ptr_mut(s);
            let mut scr_v = work.scratch.view_mut();
            let (scr, _gs) = scr_v.device_ptr_mut(s);
            let ad = TsqrAddrs {
                a: (pa, lda),
                v: (pv, ldv),
                t: (pt, ldt),
                tau: ptau,
                scr,
                elem,
            };
            self.tsqr_up_tree::<T>(&plan, &ad, n)?;
            self.tsqr_down_tree::<T>(&plan, &ad, n)?;
            self.tsqr_reconstruct_launch::<T>(&plan, &ad, rows, n)?;
            ad
        };
        let (pa, pv, scr) = (ad.a.0, ad.v.0, ad.scr);
        // Phase 2: C·M for level 0's leaves (see `tsqr_times_m`).
        let (cm, ldcm) = if top == 0 {
            (scr + plan.m as u64 * elem, TSQR_MAX_COLS)
        } else {
            self.tsqr_times_m(work, &plan, n, scr)?
        };
        // Phase 3: every leaf of level 0 again with C·M: V₂ = Q₂·M below row n, and R
        // and zeros into the panel.
        // Re-take the guards so that cudarc orders later users after this launch.
        let (_, _ga) = a.buf_mut().device_ptr_mut(s);
        let (_, _gv) = v.buf_mut().device_ptr_mut(s);
        let mut scr_v = work.scratch.view_mut();
        let (_, _gs) = scr_v.device_ptr_mut(s);
        let lev0 = plan.levels[0];
        self.leaf_apply_launch::<T>(
            &ks.tsqr_leaf_apply,
            lev0.leaves,
            (pa, lda, rows, n, lev0.kpw),
            scr + lev0.aux as u64 * elem,
            (cm, ldcm),
            (pv, ldv),
            (1, 0, scr + plan.rh as u64 * elem),
        )
    }

    /// Up the tree of [`Gpu::tsqr_panel`]: leaf QRs, each level's R's stacked into the
    /// next (the top level's into the final R).
    fn tsqr_up_tree<T: GpuScalar>(&self, plan: &TsqrPlan, ad: &TsqrAddrs, n: usize) -> Result<()> {
        let ks = T::kernel_set(&self.kernels);
        let top = plan.levels.len() - 1;
        for (l, lev) in plan.levels.iter().enumerate() {
            let (pm, ld) = ad.level_mat(plan, l);
            let (pr, ldr) = if l < top {
                (ad.at(plan.levels[l + 1].mat), plan.levels[l + 1].rows)
            } else {
                (ad.at(plan.r_final), TSQR_MAX_COLS)
            };
            self.leaf_qr_launch::<T>(
                &ks.tsqr_leaf_qr,
                lev.leaves,
                (pm, ld, lev.rows, n, lev.kpw),
                ad.at(lev.aux),
                (pr, ldr),
            )?;
        }
        Ok(())
    }

    /// Down the tree of [`Gpu::tsqr_panel`]: explicit Q of levels top ..= 1, then of
    /// level 0's first leaf (the top n×n of Q) into V.
    fn tsqr_down_tree<T: GpuScalar>(
        &self,
        plan: &TsqrPlan,
        ad: &TsqrAddrs,
        n: usize,
    ) -> Result<()> {
        let ks = T::kernel_set(&self.kernels);
        let top = plan.levels.len() - 1;
        let null = 0u64;
        for l in (0..=top).rev() {
            let lev = plan.levels[l];
            let (pm, ld) = ad.level_mat(plan, l);
            let (pc, ldc) = if l == top {
                (null, 1)
            } else {
                (ad.at(plan.levels[l + 1].q), plan.levels[l + 1].rows)
            };
            // Level 0: leaf 0 alone, of which only the top n rows are needed.
            let (blocks, out, top_only) = if l == 0 {
                (1, ad.v, 1)
            } else {
                (lev.leaves, (ad.at(lev.q), lev.rows), 0)
            };
            self.leaf_apply_launch::<T>(
                &ks.tsqr_leaf_apply,
                blocks,
                (pm, ld, lev.rows, n, lev.kpw),
                ad.at(lev.aux),
                (pc, ldc),
                out,
                (0, top_only, null),
            )?;
        }
        Ok(())
    }

    /// `tsqr_reconstruct` of [`Gpu::tsqr_panel`]: V₁, T, τ, M = U⁻¹ and R from it.
    fn tsqr_reconstruct_launch<T: GpuScalar>(
        &self,
        plan: &TsqrPlan,
        ad: &TsqrAddrs,
        rows: usize,
        n: usize,
    ) -> Result<()> {
        let ks = T::kernel_set(&self.kernels);
        let cols = TSQR_MAX_COLS;
        let ((pv, ldv), (pt, ldt), ptau) = (ad.v, ad.t, ad.tau);
        let mut b = self.kernel_args_on(&self.stream, &ks.tsqr_reconstruct);
        let (pr, pm, prh) = (ad.at(plan.r_final), ad.at(plan.m), ad.at(plan.rh));
        b.arg(&pv)
            .arg(&ldv)
            .arg(&rows)
            .arg(&n)
            .arg(&pr)
            .arg(&cols)
            .arg(&pt)
            .arg(&ldt)
            .arg(&ptau)
            .arg(&pm)
            .arg(&prh);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (RECON_THREADS, 1, 1),
            shared_mem_bytes: u32::try_from(RECON_SMEM * ad.elem as usize).expect("fits u32"),
        };
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("tsqr_reconstruct"))?;
        // SAFETY: matches tsqr_reconstruct_{f32,f64}(y: *mut T, ldy, rows, n,
        // r_top: *const T, ldr, t: *mut T, ldt, tau: *mut T, m: *mut T, rh: *mut T):
        // grid 1, block 1024, RECON_SMEM elements of shared memory (< 48 KiB); y = V's
        // top n×n (asserted to fit), r_top / m / rh = three disjoint COLS×COLS
        // regions of the scratch (plan.len ≤ its length), t n×n and τ n (asserted);
        // on the main stream, with every guard held by the caller (`tsqr_panel`) until
        // its phase 1 ends.
        unsafe { b.launch(cfg) }.map_err(launch_err("tsqr_reconstruct"))?;
        Ok(())
    }

    /// Phase 2 of [`Gpu::tsqr_panel`] for a tree of two or more levels: C·M, where C is
    /// level 1's Q (rows_1×n), into level 1's matrix (read by nothing any more); returns
    /// its address and leading dimension. A GEMM in the working precision (the panel's
    /// accuracy depends on it).
    fn tsqr_times_m<T: GpuScalar>(
        &self,
        work: &mut TsqrWork<T>,
        plan: &TsqrPlan,
        n: usize,
        scr: u64,
    ) -> Result<(u64, usize)> {
        let elem = core::mem::size_of::<T>() as u64;
        let cols = TSQR_MAX_COLS;
        let l1 = plan.levels[1];
        let _exact = self.gemm_precision_scope(crate::base::precision::GemmPrecision::F32);
        let mut sv = work.scratch.view_mut();
        let (mut left, right) = sv.split_at_mut(l1.q);
        let e1 = DevMatView::new(
            right
                .try_slice(0..l1.rows * n)
                .expect("level 1's Q in the scratch"),
            l1.rows,
            n,
            l1.rows,
        )?;
        let m_off = plan.m - l1.q;
        let mm = DevMatView::new(
            right
                .try_slice(m_off..m_off + cols * n)
                .expect("M in the scratch"),
            n,
            n,
            cols,
        )?;
        let mut out = DevMatViewMut::new(
            left.slice_mut(l1.mat..l1.mat + l1.rows * n),
            l1.rows,
            n,
            l1.rows,
        )?;
        self.gemm(Op::N, Op::N, T::ONE, &e1, &mm, T::ZERO, &mut out)?;
        Ok((scr + l1.mat as u64 * elem, l1.rows))
    }

    /// One `tsqr_leaf_qr` launch: `m` = (matrix, ld, rows, n, kpw), aux, `r` = (R out,
    /// ld).
    fn leaf_qr_launch<T: GpuScalar>(
        &self,
        f: &CudaFunction,
        leaves: usize,
        m: (u64, usize, usize, usize, usize),
        aux: u64,
        r: (u64, usize),
    ) -> Result<()> {
        let mut b = self.kernel_args(f);
        b.arg(&m.0)
            .arg(&m.1)
            .arg(&m.2)
            .arg(&m.3)
            .arg(&m.4)
            .arg(&aux)
            .arg(&r.0)
            .arg(&r.1);
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("tsqr_leaf_qr"))?;
        // SAFETY: matches tsqr_leaf_qr_{f32,f64}(a: *mut T, lda, rows, n, kpw,
        // aux: *mut T, r_out: *mut T, ldr): grid ⌈rows/leaf⌉ (`leaves`, from
        // `level_leaves` with the same kpw), block 256, leaf_smem::<T>() elements
        // (limit raised in TsqrWork::new). The caller (`tsqr_panel`) passes the panel (rows×n inside
        // A, asserted) or a level matrix in the scratch, the aux (`aux_len` elements)
        // and R regions of the scratch laid out by `tsqr_plan` (disjoint from each other
        // and from the matrix), on the main stream with every buffer's guard held.
        unsafe { b.launch(leaf_cfg::<T>(leaves, leaf_smem::<T>())) }
            .map_err(launch_err("tsqr_leaf_qr"))?;
        Ok(())
    }

    /// One `tsqr_leaf_apply` launch on `blocks` leaves: `v` = (matrix, ld, rows, n,
    /// kpw), aux, `c` = (C or null, ld), `out` = (output, ld), `sr` = (skip_top,
    /// top_only, R or null).
    #[allow(clippy::too_many_arguments)]
    fn leaf_apply_launch<T: GpuScalar>(
        &self,
        f: &CudaFunction,
        blocks: usize,
        v: (u64, usize, usize, usize, usize),
        aux: u64,
        c: (u64, usize),
        out: (u64, usize),
        sr: (u32, u32, u64),
    ) -> Result<()> {
        let mut b = self.kernel_args(f);
        b.arg(&v.0)
            .arg(&v.1)
            .arg(&v.2)
            .arg(&v.3)
            .arg(&v.4)
            .arg(&aux)
            .arg(&c.0)
            .arg(&c.1)
            .arg(&out.0)
            .arg(&out.1)
            .arg(&sr.0)
            .arg(&sr.1)
            .arg(&sr.2);
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("tsqr_leaf_apply"))?;
        // SAFETY: matches tsqr_leaf_apply_{f32,f64}(v: *mut T, ldv, rows, n, kpw,
        // aux: *const T, c_in: *const T, ldc, out: *mut T, ldo, skip_top: u32,
        // top_only: u32, rh: *const T): at most ⌈rows/leaf⌉ blocks (one with
        // top_only), block 256, leaf_smem::<T>() elements (limit raised in
        // TsqrWork::new). The caller (`tsqr_panel`) passes a level's
        // matrix with the aux its leaf QR wrote (same rows, n, kpw), C = the level
        // above's explicit Q, C·M or M (or null: identity), an output disjoint from
        // them (the level's Q in the scratch, or V), and R in the scratch or null, all
        // laid out by `tsqr_plan`, on the main stream with every buffer's guard held.
        unsafe { b.launch(leaf_cfg::<T>(blocks, leaf_smem::<T>())) }
            .map_err(launch_err("tsqr_leaf_apply"))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_stacks_leaves_until_one_is_left() {
        // 1M×32: 256 leaves of 8 chains of 16 blocks, then 8192 and 512 rows in
        // leaves of chains of two blocks.
        let p = tsqr_plan(1 << 20, 32);
        let rows: Vec<usize> = p.levels.iter().map(|l| l.rows).collect();
        assert_eq!(rows, [1 << 20, 8192, 512]);
        let leaves: Vec<usize> = p.levels.iter().map(|l| l.leaves).collect();
        assert_eq!(leaves, [256, 16, 1]);
        let kpw: Vec<usize> = p.levels.iter().map(|l| l.kpw).collect();
        assert_eq!(kpw, [16, 2, 2]);
        // Regions are disjoint and in bounds.
        let mut regions = vec![];
        for (i, l) in p.levels.iter().enumerate() {
            if i > 0 {
                regions.push((l.mat, l.rows * 32));
                regions.push((l.q, l.rows * 32));
            }
            regions.push((l.aux, aux_len(l.rows, l.kpw)));
        }
        for off in [p.r_final, p.m, p.rh] {
            regions.push((off, TSQR_MAX_COLS * TSQR_MAX_COLS));
        }
        regions.sort();
        for w in regions.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "{w:?}");
        }
        let last = regions.last().unwrap();
        assert_eq!(last.0 + last.1, p.len);
    }

    #[test]
    fn plan_of_a_short_or_ragged_panel() {
        let p = tsqr_plan(100, 7);
        assert_eq!(p.levels.len(), 1);
        assert_eq!(p.levels[0].leaves, 1);
        // 1000×20: 2 leaves of 512 rows (the last of 488), then 40 rows in one leaf.
        let p = tsqr_plan(1000, 20);
        let rows: Vec<usize> = p.levels.iter().map(|l| l.rows).collect();
        assert_eq!(rows, [1000, 40]);
        // Chains grow with the panel, so that the leaves stay near TARGET_LEAVES.
        let p = tsqr_plan(262_144, 32);
        assert_eq!((p.levels[0].kpw, p.levels[0].leaves), (4, 256));
        let p = tsqr_plan(100_000_000, 32);
        assert_eq!(p.levels[0].kpw, MAX_KPW);
        // Every level but the top has more than one leaf and shrinks the rows.
        for (r, n) in [
            (70_001, 5),
            (69_000, 32),
            (257, 32),
            (32, 32),
            (5_000_000, 1),
        ] {
            let p = tsqr_plan(r, n);
            for w in p.levels.windows(2) {
                assert!(w[0].leaves > 1 && w[1].rows == w[0].leaves * n);
                assert!(w[1].rows < w[0].rows);
            }
            assert_eq!(p.levels.last().unwrap().leaves, 1);
        }
    }
}
