//! Launcher of `fused_panel_qr` (gpu-kernels/src/fused_panel.rs, docs/kernels.md): the whole
//! Householder panel in one cooperative launch (docs/algorithms.md#blocked-householder-qr). The
//! launch shape — blocks, rows per block, shared-memory slab or in-place global work — is
//! chosen here from the device's SM count, its opt-in shared memory and the kernel's occupancy,
//! so that every block is resident at once (the grid barrier needs it). The kernel's scratch
//! (partials, head rows, barrier counter) and those launch facts live on [`Gpu`]
//! ([`FusedCache`]): made by the first panel, reused by every later one, so a factorisation or
//! update allocates nothing for its panels.

use core::marker::PhantomData;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, LaunchConfig, PushKernelArg};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::launch_err;
use crate::gpu::runtime::matrix::{DevMat, DevMatViewMut, DevVec};
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

/// Threads per block of `fused_panel_qr` (its PTX entry carries `.maxntid 512, 1, 1`,
/// added by `cargo xtask build-ptx`, so ptxas keeps it within 128 registers).
pub const FUSED_PANEL_BLOCK: u32 = 512;
/// Widest panel `fused_panel_qr` takes (gpu-kernels `fused_panel::MAX_JB`).
pub const FUSED_MAX_JB: usize = 64;
/// Most panel rows `fused_panel_qr` takes (its row indices are 32-bit).
pub const FUSED_MAX_ROWS: usize = (1 << 31) - 1;
/// Shared scratch of the kernel besides the slab and T (jb·jb), in elements
/// (`fused_panel::SCRATCH`).
const SCRATCH: usize = 32 + 8 + 5 * FUSED_MAX_JB;
/// Most blocks in a launch: 32 lanes × `fused_panel::LANE_BLOCKS`.
const MAX_BLOCKS: usize = 32 * 4;
/// Elements of the partials: two buffers of MAX_BLOCKS × (2·jb + 2) quantities.
const PARTIALS: usize = 2 * MAX_BLOCKS * (2 * FUSED_MAX_JB + 2);
/// Blocks the slab variant aims for: few blocks keep the per-column grid barrier and
/// the post-barrier reductions short, while each block's slab stays small.
const TARGET_BLOCKS: usize = 32;
/// Fewest panel rows a block owns (keeps the per-step reductions worth a block).
const MIN_ROWS_PER_BLOCK: usize = 32;
/// Most blocks per SM in the in-place (global-memory) variant.
const MAX_BLOCKS_PER_SM_GLOBAL: usize = 2;

/// A column-major matrix by its device address: what a panel launched on a second
/// stream works on, so that cudarc's per-buffer event tracking does not order that
/// stream after the main stream's work on other columns of the same buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawMat {
    pub(crate) ptr: u64,
    pub(crate) nrows: usize,
    pub(crate) ncols: usize,
    pub(crate) ld: usize,
}

impl RawMat {
    /// `a` by its address, for panels launched on a second stream (look-ahead). Every
    /// launch through the result must be ordered by the caller's events against the main
    /// stream's work on the same columns, and `a` must stay allocated while it is used:
    /// the launchers' `// SAFETY:` comments rely on both.
    pub(crate) fn alias_of<T: GpuScalar>(gpu: &Gpu, a: &mut DevMat<T>) -> Self {
        let (nr, nc, ld) = (a.nrows(), a.ncols(), a.ld());
        let (ptr, _guard) = a.buf_mut().device_ptr_mut(&gpu.stream);
        // SAFETY: `a`'s own buffer, shape and leading dimension; the guard is dropped at
        // once (its event, recorded on the main stream, orders nothing that matters): the
        // caller orders the accesses through the result as the doc comment says.
        unsafe { RawMat::new(ptr, nr, nc, ld) }
    }

    /// # Safety
    /// `ptr` is the device address of a live allocation holding an nrows×ncols
    /// column-major matrix with leading dimension `ld` ≥ nrows, and stays so while the
    /// value is used; the user orders every access through it against other work on
    /// the same elements (cudarc's event tracking does not see it).
    pub(crate) unsafe fn new(ptr: u64, nrows: usize, ncols: usize, ld: usize) -> Self {
        debug_assert!(ld >= nrows.max(1));
        Self {
            ptr,
            nrows,
            ncols,
            ld,
        }
    }
}

/// What `fused_panel_qr` keeps on [`Gpu`] between launches: its scratch, sized for
/// either precision (f64 elements), the barrier counter with the value the host knows
/// it holds, the device limits, and the occupancy answers already obtained.
pub(crate) struct FusedCache {
    /// Double-buffered partials, [`PARTIALS`] f64s (as many f32s fit twice over).
    partials: CudaSlice<f64>,
    /// Double-buffered published row k, 2·[`FUSED_MAX_JB`] f64s.
    head: CudaSlice<f64>,
    /// Grid-barrier counter (zeroed once; each launch advances it by (jb + 1)·blocks).
    counter: CudaSlice<u32>,
    /// The counter's value once every launch queued so far has run.
    bar: u32,
    sms: usize,
    smem_optin: usize,
    /// Dynamic shared memory each entry (index 0 f32, 1 f64) has been allowed so far.
    smem_allowed: [usize; 2],
    /// Blocks per SM by (entry index, dynamic shared memory bytes).
    occupancy: Vec<((usize, usize), usize)>,
}

impl FusedCache {
    /// Allocates the scratch for the kernel's largest grid and reads the device limits.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    fn new(gpu: &Gpu) -> Result<Self> {
        let sms = gpu.sm_count()?;
        let smem_optin = gpu.smem_optin()?;
        let partials = gpu
            .stream
            .alloc_zeroed::<f64>(PARTIALS)
            .map_err(alloc_err("the panel partials", PARTIALS * 8))?;
        let head = gpu
            .stream
            .alloc_zeroed::<f64>(2 * FUSED_MAX_JB)
            .map_err(alloc_err("the panel head rows", 2 * FUSED_MAX_JB * 8))?;
        let counter = gpu
            .stream
            .alloc_zeroed::<u32>(1)
            .map_err(alloc_err("the panel barrier counter", 4))?;
        for _ in 0..3 {
            gpu.count_launch();
        }
        Ok(Self {
            partials,
            head,
            counter,
            bar: 0,
            sms,
            smem_optin,
            smem_allowed: [48 * 1024; 2],
            occupancy: Vec::new(),
        })
    }
}

/// A caller's handle on `fused_panel_qr`'s scratch: the scratch itself is the
/// [`FusedCache`] on [`Gpu`], made by the first [`FusedPanelWork::new`] of the device.
pub(crate) struct FusedPanelWork<T> {
    /// Always take the in-place (global-memory) variant (tests of that path).
    pub(crate) force_in_place: bool,
    _elem: PhantomData<T>,
}

impl<T: GpuScalar> FusedPanelWork<T> {
    /// Makes the device's [`FusedCache`] unless it exists (the first call per device
    /// allocates; later calls allocate nothing).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn new(gpu: &Gpu) -> Result<Self> {
        let fused_slot = gpu.caches.get::<Option<FusedCache>>();
        let mut cache = fused_slot.lock().unwrap_or_else(|e| e.into_inner());
        if cache.is_none() {
            *cache = Some(FusedCache::new(gpu)?);
        }
        Ok(Self {
            force_in_place: false,
            _elem: PhantomData,
        })
    }
}

/// Launch shape of one panel: blocks, rows per block, slab in shared memory or not,
/// dynamic shared memory bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FusedShape {
    pub blocks: usize,
    pub rows_per_block: usize,
    pub in_shared: bool,
    pub smem_bytes: usize,
}

/// The device limits [`fused_shape`] works within.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FusedLimits {
    /// Streaming multiprocessors.
    pub sms: usize,
    /// Opt-in shared memory per block, bytes.
    pub smem_optin: usize,
    /// Take the in-place variant even when a slab would fit.
    pub in_place: bool,
}

/// Chooses the launch shape for a rows×jb panel of `elem`-byte elements;
/// `occupancy(smem)` says how many blocks of that shared memory fit one SM. The slab
/// variant (about [`TARGET_BLOCKS`] blocks, at most one per SM, rows split evenly, each
/// block's rows in shared memory) is taken when its slab fits; otherwise up to
/// [`MAX_BLOCKS_PER_SM_GLOBAL`] blocks per SM (at most [`MAX_BLOCKS`]) work in place.
pub(crate) fn fused_shape(
    rows: usize,
    jb: usize,
    elem: usize,
    lim: FusedLimits,
    occupancy: &mut dyn FnMut(usize) -> Result<usize>,
) -> Result<FusedShape> {
    let scratch = (SCRATCH + jb * jb) * elem;
    let cap = MAX_BLOCKS.min(lim.sms);
    // Rows per block: about TARGET_BLOCKS blocks, more (up to `cap`) when the slab
    // would not fit the shared memory.
    let fit = lim.smem_optin.saturating_sub(scratch) / (jb * elem);
    let rpb = rows
        .div_ceil(TARGET_BLOCKS)
        .min(fit)
        .max(rows.div_ceil(cap))
        .max(MIN_ROWS_PER_BLOCK);
    let blocks = rows.div_ceil(rpb);
    let bytes = rpb * jb * elem + scratch;
    if !lim.in_place && bytes <= lim.smem_optin && occupancy(bytes)? >= 1 {
        return Ok(FusedShape {
            blocks,
            rows_per_block: rpb,
            in_shared: true,
            smem_bytes: bytes,
        });
    }
    let per_sm = occupancy(scratch)?.min(MAX_BLOCKS_PER_SM_GLOBAL);
    if per_sm == 0 {
        return Err(Error::Driver(
            "fused_panel_qr: no block fits on an SM (occupancy 0)".into(),
        ));
    }
    let cap = (lim.sms * per_sm).min(MAX_BLOCKS);
    let rpb = rows.div_ceil(cap).max(MIN_ROWS_PER_BLOCK);
    Ok(FusedShape {
        blocks: rows.div_ceil(rpb),
        rows_per_block: rpb,
        in_shared: false,
        smem_bytes: scratch,
    })
}

/// [`Gpu::fused_panel_width`] for the device limits `lim` (occupancy assumed ≥ 1).
fn panel_width(rows: usize, jb: usize, elem: usize, lim: FusedLimits) -> usize {
    let fits = |w: usize| {
        w <= rows && fused_shape(rows, w, elem, lim, &mut |_| Ok(1)).is_ok_and(|s| s.in_shared)
    };
    let mut w = jb;
    while 2 * w >= jb && w >= 1 {
        if fits(w) {
            return w;
        }
        if w <= 8 {
            break;
        }
        w -= 8;
    }
    jb
}

impl Gpu {
    /// The panel width to factor a rows×jb panel with: the widest of jb, jb − 8, … (at
    /// least ⌈jb/2⌉) whose rows fit `fused_panel_qr`'s shared-memory slabs on this
    /// device, else jb (the in-place variant). A narrower panel whose slab fits is far
    /// faster than the in-place variant (f64 panels of 65536 rows and 64 columns do not
    /// fit 132 SMs' shared memory; 48 columns do), at the price of thinner trailing
    /// GEMMs (and one more pass over Q per panel, which is why `blocked_qr` narrows
    /// only without Q). Without a [`FusedCache`] yet, jb.
    pub(crate) fn fused_panel_width(&self, rows: usize, jb: usize, elem: usize) -> usize {
        self.fused_limits()
            .map_or(jb, |lim| panel_width(rows, jb, elem, lim))
    }

    /// The slab-variant limits from this device's [`FusedCache`], if made yet.
    fn fused_limits(&self) -> Option<FusedLimits> {
        let fused_slot = self.caches.get::<Option<FusedCache>>();
        let guard = fused_slot.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().map(|cache| FusedLimits {
            sms: cache.sms,
            smem_optin: cache.smem_optin,
            in_place: false,
        })
    }

    /// Whether a rows×jb panel of `elem`-byte elements takes `fused_panel_qr`'s
    /// shared-memory (slab) variant on this device: about 32 blocks, latency-bound,
    /// leaving most SMs to a concurrent trailing update (what look-ahead needs). The
    /// in-place variant streams from global memory on every SM. Without a
    /// [`FusedCache`] yet, false.
    pub(crate) fn fused_panel_in_shared(&self, rows: usize, jb: usize, elem: usize) -> bool {
        self.fused_limits().is_some_and(|lim| {
            fused_shape(rows, jb, elem, lim, &mut |_| Ok(1)).is_ok_and(|s| s.in_shared)
        })
    }

    /// `fused_panel_qr` on the panel a[r0 .. r0+rows, j0 .. j0+jb]
    /// (docs/algorithms.md#blocked-householder-qr): R in place with exact zeros below the
    /// diagonal, V (rows×jb, explicit 1s and 0s) into `v`, τ into `tau[0..jb)`, T (jb×jb) into
    /// `t`; reflector k limited to rows k..=k+band when `band` is given
    /// (docs/algorithms.md#column-deletion). One cooperative launch, on the scratch kept on
    /// this `Gpu` ([`FusedCache`]); the shared-memory limit and the occupancy are asked of the
    /// driver once per size.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails (e.g. the cooperative grid does not fit).
    ///
    /// # Panics
    /// If the panel or outputs do not fit, jb > [`FUSED_MAX_JB`], jb > rows or rows >
    /// [`FUSED_MAX_ROWS`] (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fused_panel_qr<T: GpuScalar>(
        &self,
        work: &mut FusedPanelWork<T>,
        a: &mut DevMat<T>,
        r0: usize,
        j0: usize,
        rows: usize,
        jb: usize,
        band: Option<usize>,
        v: &mut DevMatViewMut<'_, T>,
        tau: &mut DevVec<T>,
        t: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        self.with_raw_on_main(a, |raw| {
            self.fused_panel_qr_on(work, raw, r0, j0, rows, jb, band, v, tau, t, &self.stream)
        })
    }

    /// Runs `f` with `a` by its raw address, for work `f` queues on the main stream: the
    /// guard of `a`'s buffer lives across `f`, so cudarc records that access on the main
    /// stream.
    pub(crate) fn with_raw_on_main<T: GpuScalar, R>(
        &self,
        a: &mut DevMat<T>,
        f: impl FnOnce(&RawMat) -> Result<R>,
    ) -> Result<R> {
        let (nrows, ncols, ld) = (a.nrows(), a.ncols(), a.ld());
        let (ptr, _guard) = a.buf_mut().device_ptr_mut(&self.stream);
        // SAFETY: `ptr` is a's buffer, described by a's own shape and leading dimension;
        // `a` stays borrowed mutably, and the guard alive, while `f` runs, and `f` queues
        // its work on the main stream, where the guard records the access.
        let raw = unsafe { RawMat::new(ptr, nrows, ncols, ld) };
        f(&raw)
    }

    /// [`Gpu::fused_panel_qr`] on the matrix at `a` (a raw address, so that cudarc's
    /// per-buffer event tracking does not order `stream` after the main stream's work
    /// on other columns of the same matrix: the look-ahead of `blocked_qr`), queued on
    /// `stream`. The caller orders `stream` after every write to the panel's columns
    /// (and before every later access to them). V, τ, T and the kernel's scratch are
    /// taken through cudarc on `stream`, so their accesses stay ordered by its events;
    /// successive panels (on either stream) are ordered by those of the scratch.
    ///
    /// # Errors
    /// As [`Gpu::fused_panel_qr`].
    ///
    /// # Panics
    /// As [`Gpu::fused_panel_qr`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fused_panel_qr_on<T: GpuScalar>(
        &self,
        work: &mut FusedPanelWork<T>,
        a: &RawMat,
        r0: usize,
        j0: usize,
        rows: usize,
        jb: usize,
        band: Option<usize>,
        v: &mut DevMatViewMut<'_, T>,
        tau: &mut DevVec<T>,
        t: &mut DevMatViewMut<'_, T>,
        stream: &CudaStream,
    ) -> Result<()> {
        assert!((1..=FUSED_MAX_JB).contains(&jb) && jb <= rows && rows <= FUSED_MAX_ROWS);
        assert!(r0 + rows <= a.nrows && j0 + jb <= a.ncols);
        assert!(v.nrows() >= rows && v.ncols() >= jb);
        assert!(tau.len() >= jb && t.nrows() >= jb && t.ncols() >= jb);
        let fused_slot = self.caches.get::<Option<FusedCache>>();
        let mut guard = fused_slot.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(FusedCache::new(self)?);
        }
        let cache = guard.as_mut().expect("made above");
        let f = &T::kernel_set(&self.kernels).fused_panel_qr;
        let elem = core::mem::size_of::<T>();
        let entry = usize::from(elem == 8);
        let (smem_optin, sms) = (cache.smem_optin, cache.sms);
        let (allowed, memo) = (&mut cache.smem_allowed[entry], &mut cache.occupancy);
        let mut occupancy = |bytes: usize| -> Result<usize> {
            if let Some(&(_, n)) = memo.iter().find(|(key, _)| *key == (entry, bytes)) {
                return Ok(n);
            }
            if bytes > *allowed {
                // Raise the limit to the device's maximum once (bytes ≤ smem_optin
                // here), so later sizes need no call.
                let to = smem_optin.max(bytes);
                f.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    i32::try_from(to).expect("shared memory fits i32"),
                )
                .map_err(driver_err("raising fused_panel_qr's shared memory limit"))?;
                *allowed = to;
            }
            let n = f
                .occupancy_max_active_blocks_per_multiprocessor(FUSED_PANEL_BLOCK, bytes, None)
                .map(|n| n as usize)
                .map_err(driver_err("querying fused_panel_qr's occupancy"))?;
            memo.push(((entry, bytes), n));
            Ok(n)
        };
        let lim = FusedLimits {
            sms,
            smem_optin,
            in_place: work.force_in_place,
        };
        let shape = fused_shape(rows, jb, elem, lim, &mut occupancy)?;
        let band = band.unwrap_or(rows).min(rows);
        let (lda, ldv, ldt) = (a.ld, v.ld(), t.ld());
        let rpb = shape.rows_per_block;
        let in_shared = u32::from(shape.in_shared);
        let base = cache.bar;
        let pa = a.ptr + ((r0 + j0 * lda) * elem) as u64;
        let (pv, _gv) = v.buf_mut().device_ptr_mut(stream);
        let (pt, _gt) = t.buf_mut().device_ptr_mut(stream);
        let mut tau_v = tau.view_mut();
        let (ptau, _gtau) = tau_v.device_ptr_mut(stream);
        let (pp, _gp) = cache.partials.device_ptr_mut(stream);
        let (ph, _gh) = cache.head.device_ptr_mut(stream);
        let (pc, _gc) = cache.counter.device_ptr_mut(stream);
        let mut b = self.kernel_args_on(stream, f);
        b.arg(&pa)
            .arg(&lda)
            .arg(&rows)
            .arg(&jb)
            .arg(&band)
            .arg(&pv)
            .arg(&ldv)
            .arg(&ptau)
            .arg(&pt)
            .arg(&ldt)
            .arg(&pp)
            .arg(&ph)
            .arg(&pc)
            .arg(&base)
            .arg(&rpb)
            .arg(&in_shared);
        let cfg = LaunchConfig {
            grid_dim: (u32::try_from(shape.blocks).expect("grid fits u32"), 1, 1),
            block_dim: (FUSED_PANEL_BLOCK, 1, 1),
            shared_mem_bytes: u32::try_from(shape.smem_bytes).expect("smem fits u32"),
        };
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("fused_panel_qr"))?;
        // SAFETY: matches fused_panel_qr_{f32,f64}(a: *mut T, lda, rows, jb, band, v: *mut T,
        // ldv, tau: *mut T, t: *mut T, ldt, partials: *mut T, head: *mut T, counter: *mut
        // u32, bar_base: u32, rpb, in_shared: u32) (device pointers are 64-bit). The
        // asserts above keep the panel inside `a` (a live nrows×ncols matrix with leading
        // dimension ld: RawMat's contract, the caller ordering `stream` against other
        // work on these columns), V (rows×jb), τ (jb) and T (jb×jb)
        // inside their buffers, and rows < 2³¹ (the kernel's 32-bit row indices);
        // `partials` holds PARTIALS f64s ≥ 2·B·(2·jb+2) elements of T (B ≤ MAX_BLOCKS by
        // `fused_shape`), `head` 2·64 f64s ≥ 2·jb; the counter holds `cache.bar` (every
        // earlier launch, made under this lock and ordered before this one by the
        // scratch's cudarc events on whichever stream it ran, advanced it by
        // exactly (jb+1)·B, tracked below); the buffers are distinct allocations and
        // their guards live across the call. Cooperative launch with B blocks that
        // `fused_shape` checked against the occupancy for this shared memory, block 512,
        // dynamic shared memory as the contract computes (≤ the limit raised above).
        unsafe { b.launch_cooperative(cfg) }.map_err(launch_err("fused_panel_qr"))?;
        cache.bar = base.wrapping_add(((jb + 1) * shape.blocks) as u32);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(limit: usize) -> impl FnMut(usize) -> Result<usize> {
        move |bytes| Ok(if bytes <= limit { 4 } else { 0 })
    }

    fn lim(in_place: bool) -> FusedLimits {
        FusedLimits {
            sms: 132,
            smem_optin: 227 * 1024,
            in_place,
        }
    }

    #[test]
    fn panels_use_about_target_blocks_with_shared_slabs() {
        let s = fused_shape(8000, 32, 8, lim(false), &mut occ(227 * 1024)).unwrap();
        assert!(s.in_shared);
        assert_eq!(s.rows_per_block, 250);
        assert_eq!(s.blocks, 32);
        assert_eq!(s.smem_bytes, (250 * 32 + SCRATCH + 32 * 32) * 8);
    }

    #[test]
    fn large_panels_take_more_blocks_to_keep_a_shared_slab() {
        let s = fused_shape(16384, 64, 8, lim(false), &mut occ(227 * 1024)).unwrap();
        assert!(s.in_shared);
        assert!(s.blocks > TARGET_BLOCKS && s.blocks <= MAX_BLOCKS);
        assert!(s.smem_bytes <= 227 * 1024);
    }

    #[test]
    fn short_panels_keep_at_least_min_rows_per_block() {
        let s = fused_shape(100, 7, 4, lim(false), &mut occ(48 * 1024)).unwrap();
        assert!(s.in_shared);
        assert_eq!(s.rows_per_block, MIN_ROWS_PER_BLOCK);
        assert_eq!(s.blocks, 4);
    }

    #[test]
    fn slabs_too_big_for_shared_memory_work_in_place() {
        let s = fused_shape(1 << 20, 32, 8, lim(false), &mut occ(227 * 1024)).unwrap();
        assert!(!s.in_shared);
        assert!(s.blocks <= MAX_BLOCKS);
        assert!(s.blocks * s.rows_per_block >= 1 << 20);
        assert_eq!(s.smem_bytes, (SCRATCH + 32 * 32) * 8);
    }

    #[test]
    fn small_devices_cap_the_grid_at_the_sm_count() {
        let l = FusedLimits {
            sms: 20,
            smem_optin: 227 * 1024,
            in_place: false,
        };
        let s = fused_shape(8000, 32, 8, l, &mut occ(227 * 1024)).unwrap();
        assert!(s.in_shared);
        assert!(s.blocks <= 20);
    }

    #[test]
    fn in_place_can_be_forced() {
        let s = fused_shape(1000, 16, 8, lim(true), &mut occ(227 * 1024)).unwrap();
        assert!(!s.in_shared);
        assert_eq!(s.rows_per_block, MIN_ROWS_PER_BLOCK);
        assert_eq!(s.blocks, 1000usize.div_ceil(MIN_ROWS_PER_BLOCK));
    }

    #[test]
    fn panels_narrow_to_keep_shared_slabs_but_not_below_half() {
        // f64, 65536 rows: 64 columns need 128 blocks of 256 KB; 48 columns fit.
        assert_eq!(panel_width(65536, 64, 8, lim(false)), 48);
        assert_eq!(panel_width(65536, 64, 4, lim(false)), 64);
        assert_eq!(panel_width(4096, 64, 8, lim(false)), 64);
        // Nothing of at least half the width fits: keep it (in-place variant).
        assert_eq!(panel_width(1 << 20, 32, 8, lim(false)), 32);
        assert_eq!(panel_width(1 << 20, 8, 8, lim(false)), 8);
        assert_eq!(panel_width(5, 5, 8, lim(false)), 5);
    }

    #[test]
    fn no_resident_block_is_an_error() {
        let r = fused_shape(1 << 20, 32, 8, lim(false), &mut |_| Ok(0));
        assert!(matches!(r, Err(Error::Driver(_))));
    }
}

#[cfg(test)]
mod scale_tests {
    //! The slab scales of `fused_panel_qr` (docs/algorithms.md#householder-vectors,
    //! docs/algorithms.md#householder-norm-scaling) when a whole slab of the reflector's column
    //! is subnormal: its scale must be the smallest normal power of two, not 0, or the slab's
    //! share of the norm and of D_c = Σ x·A(:, c) is lost. f64 entries below 2^−1042 have a
    //! zero high word, which the kernel's one-instruction warp max of the scale keys must still
    //! count. The slab's share of D_c is made visible by entries near 2^1014 (f64) in the next
    //! column.
    use super::*;
    use crate::{Mat, Scalar};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// R, V, τ and T of `a` (m×jb) through the fused panel (shared slabs, or in place).
    fn fused<T: GpuScalar>(g: &Gpu, a: &Mat<T>, in_place: bool) -> [Mat<T>; 4] {
        let (m, jb) = (a.nrows(), a.ncols());
        let mut fa = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut fv = DevMat::<T>::zeros(g, m, jb).unwrap();
        fv.fill(g, T::from_f64(f64::NAN)).unwrap();
        let mut ft = DevMat::<T>::zeros(g, jb, jb).unwrap();
        ft.fill(g, T::from_f64(f64::NAN)).unwrap();
        let mut ftau = DevVec::<T>::zeros(g, jb).unwrap();
        ftau.fill(g, T::from_f64(f64::NAN)).unwrap();
        let mut work = FusedPanelWork::new(g).unwrap();
        work.force_in_place = in_place;
        g.fused_panel_qr(
            &mut work,
            &mut fa,
            0,
            0,
            m,
            jb,
            None,
            &mut fv.view_mut(),
            &mut ftau,
            &mut ft.view_mut(),
        )
        .unwrap();
        let tau = ftau.to_vec(g).unwrap();
        [
            fa.to_host(g).unwrap(),
            fv.to_host(g).unwrap(),
            Mat::from_fn(jb, 1, |i, _| tau[i]),
            ft.to_host(g).unwrap(),
        ]
    }

    /// The same through the per-column kernels (`householder_house` + `panel_apply`,
    /// `panel_extract_v`, `wy_build_t`).
    fn per_column<T: GpuScalar>(g: &Gpu, a: &Mat<T>) -> [Mat<T>; 4] {
        let (m, jb) = (a.nrows(), a.ncols());
        let mut ra = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut rtau = DevVec::<T>::zeros(g, jb).unwrap();
        for i in 0..jb {
            g.house_at(&mut ra, i, i, m - i - 1, &mut rtau, i).unwrap();
            g.panel_apply_in(&mut ra, i, i, m - i - 1, i + 1..jb, &rtau, i)
                .unwrap();
        }
        let mut rv = DevMat::<T>::zeros(g, m, jb).unwrap();
        g.panel_extract_v(&mut ra.view_mut(), &mut rv.view_mut())
            .unwrap();
        let mut rt = DevMat::<T>::zeros(g, jb, jb).unwrap();
        g.wy_build_t(&rv.view(), &rtau.slice(0..jb), &mut rt.view_mut())
            .unwrap();
        let tau = rtau.to_vec(g).unwrap();
        [
            ra.to_host(g).unwrap(),
            rv.to_host(g).unwrap(),
            Mat::from_fn(jb, 1, |i, _| tau[i]),
            rt.to_host(g).unwrap(),
        ]
    }

    /// |x − y| ≤ tol·max(1, |y|) entry by entry.
    fn close<T: Scalar>(what: &str, x: &Mat<T>, y: &Mat<T>, tol: f64) {
        assert_eq!((x.nrows(), x.ncols()), (y.nrows(), y.ncols()));
        for j in 0..x.ncols() {
            for i in 0..x.nrows() {
                let (p, q) = (x[(i, j)].to_f64(), y[(i, j)].to_f64());
                let d = (p - q).abs();
                assert!(
                    d <= tol * q.abs().max(1.0),
                    "{what}: ({i},{j}): fused {p:e} vs per-column {q:e}"
                );
            }
        }
    }

    /// A 700×4 panel: rows 256..512 of column 0 are k·2^`lo` (integers |k| < `kmax`,
    /// subnormal; whole slabs of the launch), the rest of column 0 is ±[0.5, 1); column
    /// 1 is ±[0.5, 1)·2^`up` on those rows and ±[0, 1) elsewhere; columns 2, 3 are
    /// ±[0, 1). R, V, τ and T of the fused panel match the per-column kernels.
    fn tiny_slabs<T: GpuScalar>(g: &Gpu, seed: u64, in_place: bool, lo: i32, kmax: i64, up: i32) {
        let (m, jb) = (700, 4);
        let tiny = |i: usize| (256..512).contains(&i);
        let mut rng = StdRng::seed_from_u64(seed);
        // 2^lo as two exact halves (2^−1074 has no f64 reciprocal).
        let (h1, h2) = (2f64.powi(lo / 2), 2f64.powi(lo - lo / 2));
        let a = Mat::<T>::from_fn(m, jb, |i, j| {
            let sign = if rng.random_bool(0.5) { 1.0 } else { -1.0 };
            let x = match (j, tiny(i)) {
                (0, true) => rng.random_range(-kmax + 1..kmax) as f64 * h1 * h2,
                (0, false) => sign * rng.random_range(0.5..1.0),
                (1, true) => sign * rng.random_range(0.5..1.0) * 2f64.powi(up),
                _ => rng.random_range(-1.0..1.0),
            };
            T::from_f64(x)
        });
        // The tiny entries are exact and below 2^lo·kmax.
        for i in (0..m).filter(|&i| tiny(i)) {
            let x = a[(i, 0)].to_f64().abs();
            assert!(x < kmax as f64 * h1 * h2 && (x / h1 / h2).fract() == 0.0);
        }
        let what = format!("{m}x{jb} {} in_place {in_place}", T::NAME);
        let tol = 50.0 * m as f64 * T::UNIT_ROUNDOFF;
        let f = fused(g, &a, in_place);
        let r = per_column(g, &a);
        for (name, (x, y)) in ["R", "V", "tau", "T"].iter().zip(f.iter().zip(r.iter())) {
            close(&format!("{what} {name}"), x, y, tol);
        }
    }

    #[test]
    fn subnormal_slabs_keep_their_scale() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        for &in_place in &[false, true] {
            // f64: |tiny entries| < 2^−1043, high words all zero; their products with
            // the 2^1014 entries (up to 2^−29) are far above the tolerance in R(0, 1).
            tiny_slabs::<f64>(&g, 11, in_place, -1074, 1 << 31, 1014);
            tiny_slabs::<f32>(&g, 12, in_place, -149, 1 << 20, 116);
        }
    }
}
