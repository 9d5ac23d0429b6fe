//! Launchers of `row_insert_qr` and `row_insert_band_qr` (gpu-kernels/src/row_insert.rs,
//! docs/kernels.md): row insertion into a state without Q (docs/algorithms.md#row-insertion),
//! and column deletion's banded re-triangularisation without Q
//! (docs/algorithms.md#column-deletion), each as one cooperative launch. Each block owns a
//! range of columns in shared memory; reflectors flow from block to block through one
//! release/acquire flag each, so there is no per-column grid barrier and no per-panel launch
//! chain. [`row_insert_shape`] decides whether the columns fit the device (shared memory,
//! co-resident blocks); the caller falls back to the blocked compact-WY path when they do not.

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::launch_err;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

/// Threads per block (gpu-kernels `row_insert::BLOCK`).
pub const ROW_INSERT_BLOCK: u32 = 256;
/// Warps per block: each stages reflectors of earlier blocks in its own slots.
const WARPS: usize = ROW_INSERT_BLOCK as usize / 32;
/// Columns per block the launch aims for: two per warp. Reflectors cross blocks through
/// global memory (a release store and an acquire load) but stay in shared memory inside
/// a block; each warp's look-ahead keeps its next column first. On an H100 (m = 1200,
/// n = 500, p = 20 / 100, whole update, f64) 8 / 16 / 32 / 64 columns a block took
/// 1.28 / 1.19 / 1.30 / 1.62 ms and 1.77 / 1.65 / 2.03 / 2.42 ms.
const TARGET_CPB: usize = 16;
/// Most reflectors of earlier blocks a warp stages at once (one flag a lane).
const MAX_RING: usize = 32;
/// Elements of a warp's staging slots (v tails and τ): ring = this / (p + 1), at most
/// [`MAX_RING`].
const STAGE_ELEMS: usize = 1024;
/// Most new rows this path takes; more rows make each application a long dot product
/// and the GEMM-based blocked path the better choice.
pub const ROW_INSERT_MAX_P: usize = 256;

/// Launch shape of `row_insert_qr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowInsertShape {
    /// Columns of [R d; U e] per block.
    pub cpb: usize,
    /// Blocks, ⌈(n + q)/cpb⌉.
    pub blocks: usize,
    /// Reflectors of earlier blocks a warp stages per batch (1..=32).
    pub ring: usize,
    /// Dynamic shared memory, bytes.
    pub smem_bytes: usize,
}

#[cfg(feature = "internals")]
impl RowInsertShape {
    /// This shape with `cpb` columns a block (same ring) for n columns, q
    /// right-hand sides and p rows of `elem` bytes: a tuning experiment's shape. It is not
    /// checked against the device: a launch whose blocks cannot all be resident, or
    /// that asks for more shared memory than the device has, fails with a driver error.
    // Only the `internals` tuning experiments call it.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))]
    pub(crate) fn with_cpb(self, n: usize, q: usize, p: usize, elem: usize, cpb: usize) -> Self {
        assert!(cpb >= 1);
        Self {
            cpb,
            blocks: (n + q).div_ceil(cpb),
            smem_bytes: smem_bytes(n, p, cpb, self.ring, elem),
            ..self
        }
    }
}

/// Shared memory of a block that owns `cpb` columns: R rows (n per column), U rows
/// (p per column), τ of its own reflectors, each warp's `ring` staging slots (v tail
/// and τ), one counter slot.
fn smem_bytes(n: usize, p: usize, cpb: usize, ring: usize, elem: usize) -> usize {
    (n * cpb + p * cpb + cpb + WARPS * ring * (p + 1) + 1) * elem
}

/// Reflectors a warp stages per batch for p new rows.
fn ring_for(p: usize) -> usize {
    (STAGE_ELEMS / (p + 1)).clamp(1, MAX_RING)
}

/// Chooses the launch shape for n columns of R, q right-hand sides and p new rows:
/// about [`TARGET_CPB`] columns per block, every block resident at once (`occupancy(bytes)` =
/// blocks of that shared memory per SM), within `smem_optin` bytes per block. `None`
/// when no shape fits (the caller takes the blocked path), p is 0 or above
/// [`ROW_INSERT_MAX_P`], or n is 0.
///
/// # Errors
/// Those of `occupancy`.
pub(crate) fn row_insert_shape(
    n: usize,
    q: usize,
    p: usize,
    elem: usize,
    sms: usize,
    smem_optin: usize,
    occupancy: &mut dyn FnMut(usize) -> Result<usize>,
) -> Result<Option<RowInsertShape>> {
    if n == 0 || p == 0 || p > ROW_INSERT_MAX_P {
        return Ok(None);
    }
    let ncol = n + q;
    let ring = ring_for(p);
    let mut fits = |cpb: usize| -> Result<Option<RowInsertShape>> {
        let bytes = smem_bytes(n, p, cpb, ring, elem);
        if bytes > smem_optin {
            return Ok(None);
        }
        let blocks = ncol.div_ceil(cpb);
        if blocks > sms * occupancy(bytes)? {
            return Ok(None);
        }
        Ok(Some(RowInsertShape {
            cpb,
            blocks,
            ring,
            smem_bytes: bytes,
        }))
    };
    let target = TARGET_CPB.min(ncol);
    // Fewer columns per block than the target first (less shared memory each), then
    // more (fewer blocks) while the shared memory allows.
    for cpb in (1..=target).rev() {
        if let Some(s) = fits(cpb)? {
            return Ok(Some(s));
        }
    }
    let mut cpb = target + 1;
    while cpb <= ncol && smem_bytes(n, p, cpb, ring, elem) <= smem_optin {
        if let Some(s) = fits(cpb)? {
            return Ok(Some(s));
        }
        cpb += 1;
    }
    Ok(None)
}

/// Entries of [`RowInsertCache`]'s memo lists before they are cleared (a bound on
/// memory for callers that cycle through many shapes).
const MEMO_MAX: usize = 64;

/// Key of a memoised plan: (entry, see [`ChainKind::entry`]; n; q; p).
type PlanKey = (usize, usize, usize, usize);

/// Which kernel of the reflector chain (gpu-kernels/src/row_insert.rs) a plan or launch
/// is for. Both take the same shared memory and launch shape for the same n, q, p.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChainKind {
    /// `row_insert_qr`: [R d; U e] with the p new rows apart (docs/algorithms.md#row-insertion).
    RowInsert,
    /// `row_insert_band_qr`: a band of p sub-diagonals (column deletion,
    /// docs/algorithms.md#column-deletion).
    Band,
}

impl ChainKind {
    /// Index of (kind, precision) in [`RowInsertCache`]: 0/1 row insertion f32/f64,
    /// 2/3 band f32/f64.
    fn entry<T: GpuScalar>(self) -> usize {
        let f64_ = usize::from(core::mem::size_of::<T>() == 8);
        match self {
            ChainKind::RowInsert => f64_,
            ChainKind::Band => 2 + f64_,
        }
    }

    fn function<T: GpuScalar>(self, gpu: &Gpu) -> &cudarc::driver::CudaFunction {
        let set = T::kernel_set(&gpu.kernels);
        match self {
            ChainKind::RowInsert => &set.row_insert_qr,
            ChainKind::Band => &set.row_insert_band_qr,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ChainKind::RowInsert => "row_insert_qr",
            ChainKind::Band => "row_insert_band_qr",
        }
    }
}

/// What the chain kernels' planning keeps on [`Gpu`] so that a row insertion or band
/// re-triangularisation makes no driver query after the first of its shape: the device
/// limits, whether each entry's shared-memory limit was raised, the occupancy answers
/// and the plans obtained.
#[derive(Debug, Default)]
pub(crate) struct RowInsertCache {
    /// SM count and opt-in shared memory per block, once read.
    limits: Option<(usize, usize)>,
    /// Whether each entry ([`ChainKind::entry`]) has had its shared-memory limit raised.
    raised: [bool; 4],
    /// Blocks per SM by (entry, dynamic shared memory bytes).
    occupancy: Vec<((usize, usize), usize)>,
    /// Plans by (entry, n, q, p).
    plans: Vec<(PlanKey, Option<RowInsertShape>)>,
    /// The launches' τ and publication flags, kept between launches (no
    /// allocation or memset per row insertion once they are wide enough); both kernels
    /// share them (launches are ordered on the main stream).
    scratch: Option<RowInsertScratch>,
}

/// The chain kernels' τ (scratch: each τ_j is written before its flag is published and
/// read only after) and flags, for up to `flags.len()` reflectors. The flags hold
/// values ≤ `base` (zero when made), so a launch with `base` (it publishes by storing
/// base + 1) finds none of its flags already set; each launch then raises `base` by
/// one. Before `base + 1` could wrap, the flags are zeroed again.
#[derive(Debug)]
struct RowInsertScratch {
    flags: cudarc::driver::CudaSlice<u32>,
    /// Room for as many f64s as flags (as many f32s fit twice over).
    tau: cudarc::driver::CudaSlice<f64>,
    base: u32,
}

impl Gpu {
    /// The launch shape `row_insert_qr` would take for these sizes, or `None` when the
    /// blocked path must be used (see [`row_insert_shape`]). The first call per device
    /// reads its limits and raises the kernel's shared-memory limit; the answers are
    /// memoised on the `Gpu` ([`RowInsertCache`]), so a later call for the same sizes
    /// makes no driver query.
    ///
    /// # Errors
    /// [`Error::Driver`] if a device query fails (nothing is memoised from it).
    pub(crate) fn row_insert_plan<T: GpuScalar>(
        &self,
        n: usize,
        q: usize,
        p: usize,
    ) -> Result<Option<RowInsertShape>> {
        self.chain_plan::<T>(ChainKind::RowInsert, n, q, p)
    }

    /// [`Gpu::row_insert_plan`] for `row_insert_band_qr` (n band columns, q right-hand
    /// sides, p sub-diagonals): the same shapes, planned and memoised on their own.
    ///
    /// # Errors
    /// As [`Gpu::row_insert_plan`].
    pub(crate) fn band_qr_plan<T: GpuScalar>(
        &self,
        n: usize,
        q: usize,
        p: usize,
    ) -> Result<Option<RowInsertShape>> {
        self.chain_plan::<T>(ChainKind::Band, n, q, p)
    }

    fn chain_plan<T: GpuScalar>(
        &self,
        kind: ChainKind,
        n: usize,
        q: usize,
        p: usize,
    ) -> Result<Option<RowInsertShape>> {
        let entry = kind.entry::<T>();
        let key = (entry, n, q, p);
        let row_insert_slot = self.caches.get::<RowInsertCache>();
        let mut guard = row_insert_slot.lock().unwrap_or_else(|e| e.into_inner());
        let cache = &mut *guard;
        if let Some(&(_, plan)) = cache.plans.iter().find(|(k, _)| *k == key) {
            return Ok(plan);
        }
        let (sms, smem_optin) = match cache.limits {
            Some(l) => l,
            None => {
                let l = (self.sm_count()?, self.smem_optin()?);
                cache.limits = Some(l);
                l
            }
        };
        let f = kind.function::<T>(self);
        if !cache.raised[entry] {
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                i32::try_from(smem_optin).expect("shared memory fits i32"),
            )
            .map_err(|e| {
                Error::driver(format!("raising {}'s shared memory limit", kind.name()), e)
            })?;
            cache.raised[entry] = true;
        }
        let memo = &mut cache.occupancy;
        let mut occupancy = |bytes: usize| -> Result<usize> {
            if let Some(&(_, b)) = memo.iter().find(|(k, _)| *k == (entry, bytes)) {
                return Ok(b);
            }
            let b = f
                .occupancy_max_active_blocks_per_multiprocessor(ROW_INSERT_BLOCK, bytes, None)
                .map(|b| b as usize)
                .map_err(|e| Error::driver(format!("querying {}'s occupancy", kind.name()), e))?;
            if memo.len() >= MEMO_MAX {
                memo.clear();
            }
            memo.push(((entry, bytes), b));
            Ok(b)
        };
        let plan = row_insert_shape(
            n,
            q,
            p,
            core::mem::size_of::<T>(),
            sms,
            smem_optin,
            &mut occupancy,
        )?;
        if cache.plans.len() >= MEMO_MAX {
            cache.plans.clear();
        }
        cache.plans.push((key, plan));
        Ok(plan)
    }

    /// Runs `launch(tau, flags, base)` with the cached τ scratch (n elements of T) and
    /// publication flags (n, all ≤ `base`), made or widened first, and raises `base`
    /// for the next launch. The cache stays locked until `launch` has queued its
    /// kernel, so launches take their `base` values in stream order.
    fn with_chain_scratch<T: GpuScalar>(
        &self,
        n: usize,
        launch: impl FnOnce(u64, u64, u32) -> Result<()>,
    ) -> Result<()> {
        let row_insert_slot = self.caches.get::<RowInsertCache>();
        let mut guard = row_insert_slot.lock().unwrap_or_else(|e| e.into_inner());
        if guard.scratch.as_ref().is_none_or(|s| s.flags.len() < n) {
            guard.scratch = None;
            let len = n.next_power_of_two().max(1024);
            let flags = self
                .stream
                .alloc_zeroed::<u32>(len)
                .map_err(alloc_err("the reflector-chain flags", 4 * len))?;
            // Uninitialised τ scratch: the kernels write τ_j before publishing reflector j
            // and read it only after (see RowInsertScratch).
            let tau = crate::gpu::ffi::driver::alloc_uninit::<f64>(&self.stream, len)
                .map_err(alloc_err("the reflector-chain tau", 8 * len))?;
            self.count_launch();
            guard.scratch = Some(RowInsertScratch {
                flags,
                tau,
                base: 0,
            });
        }
        let sc = guard.scratch.as_mut().expect("made above");
        if sc.base >= u32::MAX - 1 {
            self.stream
                .memset_zeros(&mut sc.flags)
                .map_err(driver_err("zeroing the reflector-chain flags"))?;
            self.count_launch();
            sc.base = 0;
        }
        let base = sc.base;
        sc.base += 1;
        // SAFETY: n elements of T (f32 or f64; alignment ≤ 8, any bits valid) fit the
        // tau scratch of flags.len() ≥ n f64s.
        let mut tau_v = unsafe { sc.tau.transmute_mut::<T>(n) }.expect("tau scratch fits n");
        let (pt, _gt) = tau_v.device_ptr_mut(&self.stream);
        let (pc, _gc) = sc.flags.device_ptr_mut(&self.stream);
        launch(pt, pc, base)
    }

    /// `row_insert_qr` (docs/algorithms.md#row-insertion): the QR of [R d; U e] in place, R and
    /// d in the top n rows of `r` and `d`, U (p×n) in `u`, e (p×q) in `e`. Afterwards R and d
    /// are updated, `u` holds V_U and `e` the transformed new right-hand-side rows. One
    /// cooperative launch with `shape` from [`Gpu::row_insert_plan`] (which also raised the
    /// kernel's shared-memory limit; a launch without it fails with a driver error).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (the flags), [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the matrices do not have the documented shapes or `shape` is not one
    /// [`row_insert_shape`] can return for them (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row_insert_qr<T: GpuScalar>(
        &self,
        r: &mut DevMat<T>,
        d: &mut DevMat<T>,
        u: &mut DevMat<T>,
        e: &mut DevMat<T>,
        n: usize,
        q: usize,
        p: usize,
        shape: RowInsertShape,
    ) -> Result<()> {
        assert!(r.nrows() >= n && r.ncols() == n && d.nrows() >= n && d.ncols() == q);
        assert!(u.nrows() == p && u.ncols() == n && e.nrows() == p && e.ncols() == q);
        check_shape::<T>(n, q, p, shape);
        // The shared-memory limit was raised to the device maximum by `row_insert_plan`.
        let f = ChainKind::RowInsert.function::<T>(self);
        let (ldr, ldd, ldu, lde) = (r.ld(), d.ld(), u.ld(), e.ld());
        let (cpb, ring) = (shape.cpb, shape.ring);
        let (pr, _gr) = r.buf_mut().device_ptr_mut(&self.stream);
        let (pd, _gd) = d.buf_mut().device_ptr_mut(&self.stream);
        let (pu, _gu) = u.buf_mut().device_ptr_mut(&self.stream);
        let (pe, _ge) = e.buf_mut().device_ptr_mut(&self.stream);
        self.with_chain_scratch::<T>(n, |pt, pc, base| {
            let mut b = self.kernel_args(f);
            b.arg(&pr)
                .arg(&ldr)
                .arg(&pd)
                .arg(&ldd)
                .arg(&pu)
                .arg(&ldu)
                .arg(&pe)
                .arg(&lde)
                .arg(&n)
                .arg(&q)
                .arg(&p)
                .arg(&pt)
                .arg(&pc)
                .arg(&base)
                .arg(&cpb)
                .arg(&ring);
            crate::gpu::ffi::driver::fault::launch().map_err(launch_err("row_insert_qr"))?;
            // SAFETY: matches row_insert_qr_{f32,f64}(r: *mut T, ldr, d: *mut T, ldd, u:
            // *mut T, ldu, e: *mut T, lde, n, q, p, tau: *mut T, counter: *mut u32, base:
            // u32, cpb, ring) (device pointers are 64-bit). The asserts keep R (n×n) and d
            // (n×q) inside the top rows of `r` and `d`, U (p×n), e (p×q) inside their
            // buffers, which are distinct allocations whose guards live across the call;
            // τ and the flags are `with_chain_scratch`'s (n each, flags all ≤ base, so
            // none equals base + 1; see RowInsertScratch), ordered on this stream; the
            // grid is ⌈(n+q)/cpb⌉ blocks of 256 threads with the shared memory the
            // contract computes, all co-resident (checked by `row_insert_shape` against
            // the occupancy) and launched cooperatively.
            unsafe { b.launch_cooperative(chain_config(shape)) }
                .map_err(launch_err("row_insert_qr"))?;
            Ok(())
        })
    }

    /// `row_insert_band_qr` (docs/algorithms.md#column-deletion): the QR, in place, of the band
    /// B = `r`[row0..row0+n+p, col0..col0+n] (column c nonzero in its rows 0..=c+p)
    /// together with `d`[row0..row0+n+p, :]. Afterwards B is upper triangular with exact
    /// zeros under its diagonal and d is transformed; `v` (p×n) holds the v tails. One
    /// cooperative launch with `shape` from [`Gpu::band_qr_plan`]`(n, d.ncols(), p)`.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (the flags), [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the ranges do not fit `r` and `d`, `v` is not p×n, or `shape` is not one
    /// [`row_insert_shape`] can return for them (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn row_insert_band_qr<T: GpuScalar>(
        &self,
        r: &mut DevMat<T>,
        row0: usize,
        col0: usize,
        d: &mut DevMat<T>,
        n: usize,
        p: usize,
        v: &mut DevMat<T>,
        shape: RowInsertShape,
    ) -> Result<()> {
        let q = d.ncols();
        assert!(row0 + n + p <= r.nrows() && col0 + n <= r.ncols());
        assert!(d.nrows() == r.nrows() && v.nrows() == p && v.ncols() == n);
        check_shape::<T>(n, q, p, shape);
        // The shared-memory limit was raised to the device maximum by `band_qr_plan`.
        let f = ChainKind::Band.function::<T>(self);
        let elem = core::mem::size_of::<T>() as u64;
        let (ldr, ldd, ldv) = (r.ld(), d.ld(), v.ld());
        let (cpb, ring) = (shape.cpb, shape.ring);
        let (pr, _gr) = r.buf_mut().device_ptr_mut(&self.stream);
        let (pd, _gd) = d.buf_mut().device_ptr_mut(&self.stream);
        let (pv, _gv) = v.buf_mut().device_ptr_mut(&self.stream);
        let pb = pr + (row0 + col0 * ldr) as u64 * elem;
        let pd = pd + row0 as u64 * elem;
        self.with_chain_scratch::<T>(n, |pt, pc, base| {
            let mut b = self.kernel_args(f);
            b.arg(&pb)
                .arg(&ldr)
                .arg(&pd)
                .arg(&ldd)
                .arg(&pv)
                .arg(&ldv)
                .arg(&n)
                .arg(&q)
                .arg(&p)
                .arg(&pt)
                .arg(&pc)
                .arg(&base)
                .arg(&cpb)
                .arg(&ring);
            crate::gpu::ffi::driver::fault::launch().map_err(launch_err("row_insert_band_qr"))?;
            // SAFETY: matches row_insert_band_qr_{f32,f64}(b: *mut T, ldb, d: *mut T, ldd,
            // v: *mut T, ldv, n, q, p, tau: *mut T, counter: *mut u32, base: u32, cpb,
            // ring) (device pointers are 64-bit). The asserts keep B ((n+p)×n from
            // (row0, col0), ld ldr) inside `r`, d's rows row0..row0+n+p (all q columns)
            // inside `d` and V (p×n) inside `v`: distinct allocations whose guards live
            // across the call. τ and the flags are `with_chain_scratch`'s (n each, flags
            // all ≤ base), ordered on this stream; grid, block and shared memory as for
            // `row_insert_qr` with the same n, q, p (the band geometry needs no more),
            // all co-resident, launched cooperatively.
            unsafe { b.launch_cooperative(chain_config(shape)) }
                .map_err(launch_err("row_insert_band_qr"))?;
            Ok(())
        })
    }
}

/// Panics unless `shape` is one [`row_insert_shape`] can return for n, q, p (a cuqr bug).
fn check_shape<T: GpuScalar>(n: usize, q: usize, p: usize, shape: RowInsertShape) {
    assert!((1..=MAX_RING).contains(&shape.ring) && shape.cpb >= 1);
    assert_eq!(shape.blocks, (n + q).div_ceil(shape.cpb));
    assert!(shape.smem_bytes >= smem_bytes(n, p, shape.cpb, shape.ring, core::mem::size_of::<T>()));
}

/// The cooperative launch of a chain kernel with `shape`.
fn chain_config(shape: RowInsertShape) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (u32::try_from(shape.blocks).expect("grid fits u32"), 1, 1),
        block_dim: (ROW_INSERT_BLOCK, 1, 1),
        shared_mem_bytes: u32::try_from(shape.smem_bytes).expect("smem fits u32"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(limit: usize, per_sm: usize) -> impl Fn(usize) -> Result<usize> {
        move |bytes| Ok(if bytes <= limit { per_sm } else { 0 })
    }

    #[test]
    fn quick_grid_takes_the_target_columns_per_block() {
        let s = row_insert_shape(500, 1, 20, 8, 132, 227 * 1024, &mut occ(227 * 1024, 2))
            .unwrap()
            .unwrap();
        assert_eq!(s.cpb, 16);
        assert_eq!(s.blocks, 501usize.div_ceil(16));
        assert_eq!(s.smem_bytes, smem_bytes(500, 20, 16, MAX_RING, 8));
        assert!(s.blocks <= 132 * 2);
    }

    #[test]
    fn large_n_shrinks_columns_per_block_to_fit_shared_memory() {
        // p = 256 stages 3 reflectors a warp; cpb = 8 needs (3000·8 + 256·8 + 8 + 8·3·257
        // + 1)·8 bytes > 227 KB; 7 fits, and a device with 1000 SMs holds the 429 blocks.
        let s = row_insert_shape(3000, 1, 256, 8, 1000, 227 * 1024, &mut occ(227 * 1024, 1))
            .unwrap()
            .unwrap();
        assert_eq!(s.ring, 3);
        assert_eq!(s.cpb, 7);
        assert!(s.smem_bytes <= 227 * 1024);
        assert_eq!(s.blocks, 3001usize.div_ceil(7));
    }

    #[test]
    fn many_columns_grow_the_columns_per_block_to_stay_resident() {
        // 2501 columns at 16 a block would be 157 blocks > 132 resident (f32).
        let s = row_insert_shape(2500, 1, 20, 4, 132, 227 * 1024, &mut occ(227 * 1024, 1))
            .unwrap()
            .unwrap();
        assert!(s.cpb > 16);
        assert!(s.smem_bytes <= 227 * 1024);
        assert!(s.blocks <= 132);
        assert_eq!(s.blocks, 2501usize.div_ceil(s.cpb));
    }

    #[test]
    fn too_large_or_too_many_rows_take_the_blocked_path() {
        let mut occ1 = occ(227 * 1024, 1);
        assert_eq!(
            row_insert_shape(6000, 1, 20, 8, 132, 227 * 1024, &mut occ1).unwrap(),
            None
        );
        assert_eq!(
            row_insert_shape(100, 1, ROW_INSERT_MAX_P + 1, 8, 132, 227 * 1024, &mut occ1).unwrap(),
            None
        );
        assert_eq!(
            row_insert_shape(0, 1, 5, 8, 132, 227 * 1024, &mut occ1).unwrap(),
            None
        );
        assert_eq!(
            row_insert_shape(10, 1, 0, 8, 132, 227 * 1024, &mut occ1).unwrap(),
            None
        );
    }

    #[test]
    fn few_sms_grow_the_columns_per_block() {
        // 2 SMs, one block each: 101 columns need cpb ≥ 51.
        let s = row_insert_shape(100, 1, 4, 4, 2, 227 * 1024, &mut occ(227 * 1024, 1))
            .unwrap()
            .unwrap();
        assert!(s.blocks <= 2);
        assert!(s.cpb >= 51);
    }

    #[test]
    fn plans_are_memoised_on_the_gpu() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        let first = g.row_insert_plan::<f64>(500, 1, 20).unwrap();
        assert!(first.is_some());
        {
            let row_insert_slot = g.caches.get::<RowInsertCache>();
            let mut c = row_insert_slot.lock().unwrap();
            assert!(c.limits.is_some() && c.raised[1] && !c.raised[0] && !c.raised[3]);
            assert!(!c.occupancy.is_empty());
            // Replace the memoised answer: a second call must return it unchanged
            // (it asks the driver nothing), not recompute the shape.
            let slot = c.plans.iter_mut().find(|(k, _)| *k == (1, 500, 1, 20));
            slot.expect("the plan is memoised").1 = None;
        }
        assert_eq!(g.row_insert_plan::<f64>(500, 1, 20).unwrap(), None);
        // Another precision is planned (and its limit raised) on its own.
        assert!(g.row_insert_plan::<f32>(500, 1, 20).unwrap().is_some());
        assert!(g.caches.get::<RowInsertCache>().lock().unwrap().raised[0]);
    }

    #[test]
    fn occupancy_errors_propagate() {
        let r = row_insert_shape(50, 1, 4, 8, 132, 227 * 1024, &mut |_| {
            Err(Error::Driver("x".into()))
        });
        assert!(matches!(r, Err(Error::Driver(_))));
    }
}
