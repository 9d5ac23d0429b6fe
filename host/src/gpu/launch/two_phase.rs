//! Typed launchers of the two-phase Givens kernels (docs/algorithms.md#two-phase-design;
//! gpu-kernels/src/two_phase.rs; docs/kernels.md `two_phase_*` rows): the single-block generate
//! kernels that record a rotation list ([`RotList`]), the apply kernels that stream a list
//! through up to three targets in one launch ([`ApplyPath`]: list order, step order, and the
//! default blocked `two_phase_apply_pipe` for strip and block lists), the Householder apply of
//! rank-one variant A2, and a gather/copy kernel. Each launcher checks its bounds with
//! `assert!` (a failure is a cuqr bug) and holds one `unsafe` launch block.
// Some of these serve only cuqr's benchmarks and kernel tests (the published algorithms'
// reference kernels, stage profiling), which reach them through the `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use core::mem::size_of;
use core::ops::Range;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{
    CudaSlice, CudaView, CudaViewMut, DevicePtr, DevicePtrMut, LaunchConfig, PushKernelArg,
};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::Op;
use crate::gpu::launch::{grid_blocks, launch_config, launch_err};
use crate::gpu::runtime::matrix::{DevMat, DevMatView, DevMatViewMut, DevVec};
use crate::gpu::runtime::{alloc_err, Gpu, GpuScalar};

/// Threads per block of the single-block generate kernels.
pub const GEN_BLOCK: u32 = 512;
/// Threads per block of `two_phase_gen_rank_one_a` (the stage A scan,
/// docs/algorithms.md#rank-one-update).
pub const GEN_A_BLOCK: u32 = 512;
/// Threads per block of `two_phase_gen_rank_one_b_pipe`: 256, so that any register
/// count ptxas picks (≤ 255) fits an SM.
pub const GEN_R1_BLOCK: u32 = 256;
/// Largest n `two_phase_gen_rank_one_b_pipe` takes: [`GEN_R1_BLOCK`] threads × 12
/// columns (the kernel's `R1_PIPE_CPT`).
pub const GEN_R1_MAX_N: usize = GEN_R1_BLOCK as usize * 12;
/// Columns a thread of `two_phase_gen_rank_one_b_pipe2` (the kernel's `R1_PIPE2_CPT`).
const R1_PIPE2_CPT: usize = 2;
/// Largest chain count (p) of the pipelined strip/block generate kernels (their item
/// indices are 32-bit).
pub const GEN_PIPE_MAX_CHAINS: usize = 65_535;
/// Most threads a block of `two_phase_gen_chains` (the kernel's `.maxntid 256`).
pub const CHAIN_MAX_THREADS: usize = 256;
/// Shared-memory scratch of `two_phase_gen_chains` ahead of its vector, in elements
/// (the kernel's `CHAIN_SCRATCH`).
const CHAIN_SCRATCH: usize = 48;

/// Launch shapes of `two_phase_gen_chains` kept by [`ChainsCache`] (the most recent).
const CHAINS_MEMO: usize = 16;

/// (threads a block, chunk, shared bytes, blocks) of a `two_phase_gen_chains` launch.
type ChainShape = (usize, usize, usize, usize);

/// What `two_phase_gen_chains` keeps on the [`Gpu`] between generates (the
/// shape query ran twice per generate, and every launch allocated and zeroed its flags):
/// the launch shapes of the last [`CHAINS_MEMO`] (dtype, chains, length) queries, and
/// publication flags for up to `flags.len()` chains. The flags hold values ≤ `base`
/// (zero when made), so a launch that publishes by storing `base + 1` finds none of its
/// flags already set; each launch raises `base` by one, and the flags are zeroed again
/// before `base + 1` could wrap.
#[derive(Debug, Default)]
pub(crate) struct ChainsCache {
    shapes: Vec<((usize, usize, usize), Option<ChainShape>)>,
    /// At most this many blocks a launch ([`Gpu::two_phase_chains_block_cap`]; tests).
    block_cap: Option<usize>,
    flags: Option<cudarc::driver::CudaSlice<u32>>,
    base: u32,
}

/// Where `two_phase_gen_chains` reads and writes its vectors: element e of vector c at
/// `src + (c·src_vs + e·src_es)` elements (and likewise `dst`), device addresses.
#[derive(Clone, Copy, Debug)]
struct ChainIo {
    src: u64,
    src_vs: usize,
    src_es: usize,
    dst: u64,
    dst_vs: usize,
    dst_es: usize,
}

/// Threads per block of `two_phase_house_apply`.
pub const APPLY_BLOCK: u32 = 128;
/// Threads per block of `two_phase_apply(_sched)`: one warp, so the few thousand
/// vectors of a target (one thread each) spread over every SM instead of filling
/// half of them (the register-blocked sched kernel uses ~250 registers).
pub const APPLY_ROT_BLOCK: u32 = 32;
/// Most warps per block of `two_phase_apply_pipe`, and the default ([`ApplyPath::Pipe`]
/// takes ⌈chains/8⌉ warps, at most this many): block x holds vectors 32x..32x+32 of a
/// target and its warps split each round of chains, 8 chains a warp, so every element of
/// Q, d and R is read and written once per 64 chains. Eight because the kernel
/// takes ~250 registers a thread (ptxas, sm_90): 8 warps are all of an SM's registers.
pub const APPLY_PIPE_WARPS: u32 = 8;
/// Most warps per block `two_phase_apply_pipe` can be launched with (see
/// [`APPLY_PIPE_WARPS`]; the kernel's shared buffer allows 16).
pub const APPLY_PIPE_MAX_WARPS: u32 = 8;
/// Elements of one warp's rotation ring in `two_phase_apply_pipe` (gpu-kernels
/// `two_phase::PIPE_RING_ELEMS`: 4 batches × 8 chains × 8 steps × (c, s)).
const PIPE_RING_ELEMS: u32 = 512;
/// Block of `two_phase_copy`: 32 × 8.
const COPY_BLOCK: (u32, u32) = (32, 8);

/// Whether `two_phase_gen_rank_one_b_pipe` takes an R with n columns and leading
/// dimension `ld` (12 columns a thread; 32-bit element offsets).
fn r1_pipe_fits(n: usize, ld: usize) -> bool {
    n <= GEN_R1_MAX_N && (ld as u64) * (n as u64) < (1u64 << 32)
}

/// [`launch_config`] with every grid dimension at least 1 and no dynamic shared memory.
fn cfg(grid: (u32, u32), block: (u32, u32)) -> LaunchConfig {
    launch_config((grid.0.max(1), grid.1.max(1)), block, 0)
}

/// A recorded sequence of plane rotations in device memory
/// (docs/algorithms.md#givens-rotations, two-phase schedule): rotation i is (c, s) =
/// (`rot[2i]`, `rot[2i+1]`) on the plane (`plane[i]`, `plane[i]`+1), to be applied in order i =
/// 0, 1, ….
#[derive(Debug)]
pub struct RotList<T> {
    rot: CudaSlice<T>,
    plane: CudaSlice<u32>,
    cap: usize,
    len: usize,
    span: usize,
    /// (kernel schedule id, s0, s1) when the list is a whole strip (1, h, p) or block
    /// (2, p, m) wavefront, which [`Gpu::two_phase_apply`] then streams in step order.
    sched: Option<(usize, usize, usize)>,
    /// (down, up) when the list is a rank-one sweep: `down` rotations on planes
    /// down−1, …, 0 then `up` on planes 0, …, up−1 (made by
    /// [`Gpu::two_phase_gen_rank_one_a`] and [`Gpu::two_phase_gen_rank_one_b`]), which
    /// [`Gpu::two_phase_apply`] streams with `two_phase_apply_sweep`.
    sweep: Option<(usize, usize)>,
}

impl<T: GpuScalar> RotList<T> {
    /// Room for `cap` rotations (initially empty).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn with_capacity(gpu: &Gpu, cap: usize) -> Result<Self> {
        let rot = gpu
            .stream
            .alloc_zeros::<T>(2 * cap.max(1))
            .map_err(alloc_err(
                "RotList rotations",
                2 * cap.max(1) * size_of::<T>(),
            ))?;
        let plane = gpu
            .stream
            .alloc_zeros::<u32>(cap.max(1))
            .map_err(alloc_err("RotList planes", cap.max(1) * 4))?;
        Ok(Self {
            rot,
            plane,
            cap,
            len: 0,
            span: 0,
            sched: None,
            sweep: None,
        })
    }

    /// Number of recorded rotations.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no rotation is recorded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One more than the largest index a recorded plane touches (0 if empty): every
    /// target vector must have at least this many elements.
    pub fn span(&self) -> usize {
        self.span
    }

    /// Downloads the list as (c, s, plane) triples, in application order (tests).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn to_host(&self, gpu: &Gpu) -> Result<Vec<(T, T, usize)>> {
        let cs = gpu
            .stream
            .clone_dtoh(&self.rot)
            .map_err(crate::gpu::runtime::driver_err("RotList download"))?;
        let pl = gpu
            .stream
            .clone_dtoh(&self.plane)
            .map_err(crate::gpu::runtime::driver_err("RotList download"))?;
        gpu.stream
            .synchronize()
            .map_err(crate::gpu::runtime::driver_err("RotList download"))?;
        Ok((0..self.len)
            .map(|i| (cs[2 * i], cs[2 * i + 1], pl[i] as usize))
            .collect())
    }

    /// Replaces the list with host data (c, s, plane) (tests of the apply kernel).
    ///
    /// # Errors
    /// [`Error::Shape`] if it exceeds the capacity; [`Error::Driver`].
    pub fn upload(&mut self, gpu: &Gpu, list: &[(T, T, usize)]) -> Result<()> {
        if list.len() > self.cap {
            return Err(Error::Shape {
                op: "RotList::upload",
                what: "rotations",
                got: list.len(),
                expected: self.cap,
            });
        }
        let mut cs = vec![T::ZERO; 2 * self.cap.max(1)];
        let mut pl = vec![0u32; self.cap.max(1)];
        for (i, &(c, s, a)) in list.iter().enumerate() {
            cs[2 * i] = c;
            cs[2 * i + 1] = s;
            pl[i] = u32::try_from(a).expect("plane fits u32");
        }
        gpu.stream
            .memcpy_htod(&cs, &mut self.rot)
            .map_err(crate::gpu::runtime::driver_err("RotList upload"))?;
        gpu.stream
            .memcpy_htod(&pl, &mut self.plane)
            .map_err(crate::gpu::runtime::driver_err("RotList upload"))?;
        gpu.stream
            .synchronize()
            .map_err(crate::gpu::runtime::driver_err("RotList upload"))?;
        self.len = list.len();
        self.span = list.iter().map(|r| r.2 + 2).max().unwrap_or(0);
        self.sched = None;
        self.sweep = None;
        Ok(())
    }

    /// Drops the schedule (strip, block or sweep), so that [`Gpu::two_phase_apply`]
    /// streams the list in its stored order (the same results bit for bit; for tests and
    /// benchmarks).
    pub fn forget_schedule(&mut self) {
        self.sched = None;
        self.sweep = None;
    }

    /// Asserts room for `count` rotations in an emptied list (a cuqr bug otherwise).
    fn reserve_from_empty(&self, count: usize) {
        assert!(
            count <= self.cap,
            "rotation list too small ({count} > {})",
            self.cap
        );
    }

    /// Empties the list (and drops its schedule).
    fn clear(&mut self) {
        self.len = 0;
        self.span = 0;
        self.sched = None;
        self.sweep = None;
    }

    fn reserve(&self, extra: usize) {
        assert!(
            self.len + extra <= self.cap,
            "rotation list too small ({} + {extra} > {})",
            self.len,
            self.cap
        );
    }
}

/// Which kernel [`Gpu::two_phase_apply_path`] streams a rotation list with. All paths
/// give the same results bit for bit (each element sees the same rotations in the same
/// order, docs/algorithms.md#two-phase-design); they differ in memory traffic and parallelism.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApplyPath {
    /// `two_phase_apply`: the list in stored order, one thread per vector, one load and
    /// one store of a target element per rotation (the reference; any list).
    List,
    /// `two_phase_apply_sched`: a strip or block list in wavefront step order; unbanded
    /// targets through a one-warp 16-chain register window, banded ones eight rotations
    /// at a time.
    Step,
    /// `two_phase_apply_pipe` with `warps` warps per block (1 ..= 8): a strip or block
    /// list through a register window of 16·warps elements split over the block's warps
    /// (banded targets included), one pass over each target per 8·warps chains.
    Pipe {
        /// Warps per block.
        warps: u32,
    },
    /// `two_phase_apply_sweep`: a rank-one list (planes down−1 … 0, then 0 … up−1),
    /// one thread per vector with elements and rotations loaded eight entries ahead
    /// (banded targets only for a list without the ascending part).
    Sweep,
}

/// Which kernel a generate launcher runs (all give the same rotations and driver
/// results bit for bit; docs/algorithms.md#two-phase-design).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenPath {
    /// The step kernels `two_phase_gen_strip`, `two_phase_gen_block`,
    /// `two_phase_gen_rank_one_b`: two barriers a step, the driver in global memory, one
    /// thread loading, rotating and storing in between (the reference).
    Step,
    /// The pipelined kernels (`..._pipe`): one barrier a step; the driver block in
    /// shared memory (`shared`, strip and block only, when it fits the device's opt-in
    /// limit) or in global memory; rank-one: the column-owner pipeline (n ≤
    /// [`GEN_R1_MAX_N`], `shared` must be false).
    Pipe {
        /// Driver block in shared memory.
        shared: bool,
    },
    /// Strip and block only: `two_phase_gen_chains`, a block a chain at a time (its
    /// vector in shared memory; block b makes chains b, b + G, … when there are more
    /// chains than the G blocks that fit the GPU at once), each chain's rotations made
    /// at once from scaled suffix norms after the earlier chains reach its vector
    /// through block scans, one cooperative launch. The serial chain's rotations and
    /// driver up to rounding (not bit for bit like the others); taken by default when a
    /// vector fits a block's shared memory ([`Gpu::two_phase_chains_fit`]; the
    /// wavefront's steps were 0.8 to 50 µs each, p²/2 items a step on one block).
    Chains,
}

/// Which way a target receives the rotations of [`Gpu::two_phase_apply`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RotSide {
    /// Rotations act on column pairs (a, a+1): X := X·Gᵀ (Q); one thread per row.
    Cols,
    /// Rotations act on row pairs (a, a+1): X := G·X (R, d); one thread per column.
    Rows,
}

/// One target of [`Gpu::two_phase_apply`].
#[derive(Debug)]
pub struct ApplyTarget<'v, 'a, T> {
    /// The block the plane indices refer to (plane a touches its rows/columns a, a+1).
    pub view: &'v mut DevMatViewMut<'a, T>,
    /// Row or column rotations.
    pub side: RotSide,
    /// `RotSide::Rows` only: column t of the view is known to be exactly zero below row t
    /// (upper triangular with the diagonal at the view's origin), so planes below the column's
    /// nonzero range are skipped (0 stays 0; docs/algorithms.md#givens-rotations,
    /// docs/algorithms.md#live-column-range).
    pub banded: bool,
}

impl<'v, 'a, T> ApplyTarget<'v, 'a, T> {
    /// The three targets of an update's Givens stage (docs/algorithms.md#restoring-the-strip,
    /// docs/algorithms.md#row-deletion): Q by columns, R by rows (banded: upper triangular at
    /// the view's origin) and d by rows.
    pub fn q_r_d(
        q: &'v mut DevMatViewMut<'a, T>,
        r: &'v mut DevMatViewMut<'a, T>,
        d: &'v mut DevMatViewMut<'a, T>,
    ) -> [Self; 3] {
        [
            ApplyTarget {
                view: q,
                side: RotSide::Cols,
                banded: false,
            },
            ApplyTarget {
                view: r,
                side: RotSide::Rows,
                banded: true,
            },
            ApplyTarget {
                view: d,
                side: RotSide::Rows,
                banded: false,
            },
        ]
    }
}

impl<T> ApplyTarget<'_, '_, T> {
    /// (rs, cs, vectors, elements per vector).
    fn geometry(&self) -> (usize, usize, usize, usize) {
        let (r, c, ld) = (self.view.nrows(), self.view.ncols(), self.view.ld());
        match self.side {
            RotSide::Cols => (1, ld, r, c),
            RotSide::Rows => (ld, 1, c, r),
        }
    }
}

/// Dynamic shared memory (bytes) of a pipelined strip/block generate: rotation buffers
/// 4·chains, plus the driver block when `shared`.
fn gen_pipe_bytes(chains: usize, driver: usize, shared: bool, elem: usize) -> usize {
    (4 * chains + if shared { driver } else { 0 }) * elem
}

/// Raises `f`'s dynamic shared-memory limit to `to` bytes when a launch needs `bytes`
/// above the 48 KiB every kernel gets (`to` ≥ `bytes`, within the device's opt-in limit).
fn raise_smem_limit(
    f: &cudarc::driver::CudaFunction,
    bytes: usize,
    to: usize,
    what: &'static str,
) -> Result<()> {
    if bytes > 48 * 1024 {
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(to).expect("shared memory fits i32"),
        )
        .map_err(crate::gpu::runtime::driver_err(what))?;
    }
    Ok(())
}

/// Launchers of the two-phase kernels, on [`Gpu::stream`]. Empty problems launch nothing.
impl Gpu {
    /// The device's opt-in dynamic shared memory per block (bytes): the pipelined
    /// strip/block generate keeps its driver block in shared memory when 4·p + the
    /// driver's elements fit (tests pick sizes at this boundary).
    ///
    /// # Errors
    /// [`Error::Driver`] if the attribute query fails.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_smem_optin(&self) -> Result<usize> {
        self.smem_optin()
    }

    /// The default path of a strip (driver (h+p)×p) or block (p×m) generate with
    /// `chains` = p: the driver in shared memory when it fits, else the pipelined kernel
    /// in global memory, else (rotation buffers too large) the step kernel.
    fn gen_default_path<T: GpuScalar>(
        &self,
        chains: usize,
        driver: usize,
        len: usize,
    ) -> Result<GenPath> {
        if self.two_phase_chains_fit::<T>(chains, len)? {
            return Ok(GenPath::Chains);
        }
        if chains > GEN_PIPE_MAX_CHAINS {
            return Ok(GenPath::Step);
        }
        let (optin, elem) = (self.two_phase_smem_optin()?, size_of::<T>());
        Ok(if gen_pipe_bytes(chains, driver, true, elem) <= optin {
            GenPath::Pipe { shared: true }
        } else if gen_pipe_bytes(chains, driver, false, elem) <= optin {
            GenPath::Pipe { shared: false }
        } else {
            GenPath::Step
        })
    }

    /// Checks `path` for a strip/block generate and returns its launch configuration
    /// (raising the kernel's shared-memory limit when above 48 KiB).
    fn gen_pipe_cfg<T: GpuScalar>(
        &self,
        f: &cudarc::driver::CudaFunction,
        op: &'static str,
        chains: usize,
        driver: usize,
        shared: bool,
    ) -> Result<LaunchConfig> {
        let optin = self.two_phase_smem_optin()?;
        let bytes = gen_pipe_bytes(chains, driver, shared, size_of::<T>());
        if chains > GEN_PIPE_MAX_CHAINS || bytes > optin {
            return Err(Error::InvalidParam {
                op,
                what: "path",
                why: format!(
                    "the pipelined generate needs {bytes} bytes of shared memory for {chains} \
                     chains (device limit {optin}, at most {GEN_PIPE_MAX_CHAINS} chains)"
                ),
            });
        }
        raise_smem_limit(
            f,
            bytes,
            bytes,
            "raising a generate kernel's shared memory limit",
        )?;
        // GEN_BLOCK threads unless the registers the driver's compiler gave the kernel
        // allow fewer (the kernel takes any multiple of 32). Fewer threads (about
        // chains²/4: 128 for 20 chains) were measured slower on the H100: delete_rows'
        // generate 1.00 → 1.14 ms, the strip's 0.41 → 0.46 ms at m = 1200, n = 500, p = 20.
        let most = f
            .max_threads_per_block()
            .map_err(crate::gpu::runtime::driver_err(
                "querying a generate kernel's block limit",
            ))?;
        let threads = GEN_BLOCK
            .min(u32::try_from(most).unwrap_or(0) / 32 * 32)
            .max(32);
        let mut c = cfg((1, 1), (threads, 1));
        c.shared_mem_bytes = u32::try_from(bytes).expect("shared memory fits u32");
        Ok(c)
    }

    /// Caps the blocks of every later `two_phase_gen_chains` launch on this device at
    /// `cap` (at least one; `None`: as many as fit the GPU at once, at most one a chain).
    /// The rotations and driver do not depend on it (each chain is made by one block
    /// either way); tests use it to run many chains on few blocks.
    #[doc(hidden)]
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_chains_block_cap(&self, cap: Option<usize>) {
        let chains_slot = self.caches.get::<ChainsCache>();
        let mut cache = chains_slot.lock().unwrap_or_else(|e| e.into_inner());
        cache.block_cap = cap.map(|c| c.max(1));
    }

    /// Whether `two_phase_gen_chains` ([`GenPath::Chains`]) can run `chains` chains whose
    /// longest vector has `len` elements: a vector must fit a block's shared memory (any
    /// number of chains: the resident blocks take them in turn).
    ///
    /// # Errors
    /// [`Error::Driver`] if a device query fails.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_chains_fit<T: GpuScalar>(
        &self,
        chains: usize,
        len: usize,
    ) -> Result<bool> {
        Ok(self.chains_shape::<T>(chains, len)?.is_some())
    }

    /// (threads a block, chunk, shared bytes, blocks) of `two_phase_gen_chains`, or
    /// `None` when a vector does not fit a block's shared memory (or no block fits an
    /// SM). Blocks: as many as fit the GPU at once, at most one a chain (a block makes
    /// chains b, b + G, … when there are more). 32·w threads with w = ⌈len/128⌉ ≤ 8, chunk
    /// = ⌈len/(32·w)⌉ rounded up to odd, so the threads' chunks fall in different
    /// shared-memory banks. Raises the kernel's shared-memory limit to the device's
    /// opt-in maximum when needed. Memoised on the [`Gpu`] ([`ChainsCache`]): a repeated
    /// query makes no driver call.
    fn chains_shape<T: GpuScalar>(&self, chains: usize, len: usize) -> Result<Option<ChainShape>> {
        let key = (size_of::<T>(), chains, len);
        let chains_slot = self.caches.get::<ChainsCache>();
        let mut cache = chains_slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(_, shape)) = cache.shapes.iter().find(|(k, _)| *k == key) {
            return Ok(shape);
        }
        let shape = self.chains_shape_query::<T>(chains, len)?;
        if cache.shapes.len() >= CHAINS_MEMO {
            cache.shapes.remove(0);
        }
        cache.shapes.push((key, shape));
        Ok(shape)
    }

    /// [`Gpu::chains_shape`] from the device's limits (driver queries; not memoised).
    fn chains_shape_query<T: GpuScalar>(
        &self,
        chains: usize,
        len: usize,
    ) -> Result<Option<ChainShape>> {
        if chains == 0 || len < 2 || u32::try_from(chains).is_err() {
            return Ok(None);
        }
        let threads = len.div_ceil(128).clamp(1, CHAIN_MAX_THREADS / 32) * 32;
        let chunk = len.div_ceil(threads) | 1;
        let bytes = (CHAIN_SCRATCH + threads * chunk) * size_of::<T>();
        let optin = self.smem_optin()?;
        if bytes > optin {
            return Ok(None);
        }
        let f = &T::kernel_set(&self.kernels).two_phase_gen_chains;
        raise_smem_limit(
            f,
            bytes,
            optin,
            "raising two_phase_gen_chains's shared memory limit",
        )?;
        let per_sm = f
            .occupancy_max_active_blocks_per_multiprocessor(threads as u32, bytes, None)
            .map_err(crate::gpu::runtime::driver_err(
                "querying two_phase_gen_chains's occupancy",
            ))?;
        // As many blocks as fit the GPU at once, at most one a chain; a block makes
        // chains b, b + G, … in order when there are more chains than blocks.
        let blocks = ((per_sm as usize) * self.sm_count()?).min(chains);
        if blocks == 0 {
            return Ok(None);
        }
        Ok(Some((threads, chunk, bytes, blocks)))
    }

    /// Launches `two_phase_gen_chains` on `p` chains (chain c: elements 0..=hi0 + inc·c
    /// of vector c through `io`), recording into `list` (which the caller then describes).
    /// The publication flags are the [`ChainsCache`]'s, with the next `base`.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if the chains do not fit ([`Gpu::two_phase_chains_fit`];
    /// nothing launched), [`Error::OutOfMemory`] for the flags, [`Error::Driver`].
    ///
    /// # Safety
    /// `io` addresses every chain's vector (elements 0..=hi_c) inside live device memory
    /// that this stream's order gives to this launch alone (src and dst may coincide),
    /// hi_c ≥ c + 1, hi_{p−1} + 1 ≤ `len`, and `list` holds every chain's rotations
    /// (Σ_c (hi_c − c)).
    unsafe fn gen_chains_launch<T: GpuScalar>(
        &self,
        io: ChainIo,
        p: usize,
        hi0: usize,
        inc: usize,
        len: usize,
        list: &mut RotList<T>,
    ) -> Result<()> {
        let Some((threads, chunk, bytes, blocks)) = self.chains_shape::<T>(p, len)? else {
            return Err(Error::InvalidParam {
                op: "two_phase_gen_chains",
                what: "path",
                why: format!(
                    "a vector of {len} elements does not fit a block's shared memory \
                     ({p} chains)"
                ),
            });
        };
        // The cache stays locked until the launch is queued, so launches take their
        // `base` values in stream order.
        let chains_slot = self.caches.get::<ChainsCache>();
        let mut cache = chains_slot.lock().unwrap_or_else(|e| e.into_inner());
        if cache.flags.as_ref().is_none_or(|f| f.len() < p) {
            cache.flags = None;
            let n = p.next_power_of_two().max(1024);
            let flags = self
                .stream
                .alloc_zeros::<u32>(n)
                .map_err(alloc_err("the chain flags", 4 * n))?;
            self.count_launch();
            cache.flags = Some(flags);
            cache.base = 0;
        }
        if cache.base >= u32::MAX - 1 {
            let flags = cache.flags.as_mut().expect("made above");
            self.stream
                .memset_zeros(flags)
                .map_err(crate::gpu::runtime::driver_err("zeroing the chain flags"))?;
            self.count_launch();
            cache.base = 0;
        }
        cache.base += 1;
        let set = cache.base;
        let blocks = cache.block_cap.map_or(blocks, |c| blocks.min(c));
        let flags = cache.flags.as_mut().expect("made above");
        list.clear();
        let f = &T::kernel_set(&self.kernels).two_phase_gen_chains;
        let launch = LaunchConfig {
            grid_dim: (
                u32::try_from(blocks).expect("blocks ≤ chains < 2³² (chains_shape)"),
                1,
                1,
            ),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: u32::try_from(bytes).expect("shared memory fits u32"),
        };
        let mut b = self.kernel_args(f);
        b.arg(&io.src)
            .arg(&io.src_vs)
            .arg(&io.src_es)
            .arg(&io.dst)
            .arg(&io.dst_vs)
            .arg(&io.dst_es)
            .arg(&p)
            .arg(&hi0)
            .arg(&inc)
            .arg(&chunk)
            .arg(&mut list.rot)
            .arg(&mut list.plane)
            .arg(flags)
            .arg(&set);
        // SAFETY: matches two_phase_gen_chains_{f32,f64}(src: *const T, src_vs, src_es,
        // dst: *mut T, dst_vs, dst_es, p, hi0, inc, chunk, rot: *mut T, plane: *mut u32,
        // flags: *mut u32, set: u32) (device pointers are 64-bit). The vectors are the
        // caller's (this fn's contract); rot/plane are the list's own buffers, flags the
        // cache's ≥ p u32s, all ≤ set − 1 (ChainsCache; none equals `set`), all distinct;
        // chains_shape gave 1 ≤ blocks ≤ p blocks of `threads` = 32·w threads (w ≤ 8),
        // CHAIN_SCRATCH + threads·chunk elements of shared memory (within the limit it
        // raised) with threads·chunk ≥ len, and no more blocks than fit the GPU at once,
        // which the cooperative launch then guarantees (or fails).
        unsafe { b.launch_cooperative(launch) }.map_err(launch_err("two_phase_gen_chains"))?;
        Ok(())
    }

    /// `two_phase_gen_strip` (docs/algorithms.md#wavefront-schedule,
    /// docs/algorithms.md#restoring-the-strip): runs the wavefront on the driver block `x` =
    /// R'(k0..n+p, k0..k0+p) ((h+p)×p, h = n − k0) in place — ρ on the band, exact zeros below
    /// it, rows rotated in the driver's later columns — and records the p·h rotations into
    /// `list` (replacing it) in the sequential order of `update::insert_cols::run_cpu`, planes
    /// local to row k0. Runs the chains of warp scans ([`GenPath::Chains`]) when a vector fits
    /// a block, else the pipelined wavefront with the driver in shared memory when it fits,
    /// else in global memory ([`GenPath`]).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (the chains' flags), [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `x` is not (h+p)×p or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_strip<T: GpuScalar>(
        &self,
        x: &mut DevMatViewMut<'_, T>,
        h: usize,
        list: &mut RotList<T>,
    ) -> Result<()> {
        let p = x.ncols();
        let path = self.gen_default_path::<T>(p, (h + p) * p, h + p)?;
        self.two_phase_gen_strip_path(x, h, list, path)
    }

    /// [`Gpu::two_phase_gen_strip`] through the kernel `path` names (tests and
    /// benchmarks; every path gives the same list and driver bit for bit).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if `path` is `Pipe` and its shared memory exceeds the
    /// device's limit, or `Chains` and a vector does not fit a block (nothing is
    /// launched, `list` and `x` are unchanged);
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `x` is not (h+p)×p or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_strip_path<T: GpuScalar>(
        &self,
        x: &mut DevMatViewMut<'_, T>,
        h: usize,
        list: &mut RotList<T>,
        path: GenPath,
    ) -> Result<()> {
        let p = x.ncols();
        assert_eq!(x.nrows(), h + p);
        list.reserve_from_empty(p * h);
        if p == 0 || h == 0 {
            list.clear();
            return Ok(());
        }
        let ld = x.ld();
        if path == GenPath::Chains {
            let (px, _gx) = x.buf_mut().device_ptr_mut(&self.stream);
            let io = ChainIo {
                src: px,
                src_vs: ld,
                src_es: 1,
                dst: px,
                dst_vs: ld,
                dst_es: 1,
            };
            // SAFETY: the driver is (h+p)×p with ld ≥ h+p (asserted shape, view extent),
            // so vector j (column j, elements 0..=h+j) lies inside it for src and dst;
            // the view is borrowed mutably, so nothing else touches it; the list holds
            // ≥ p·h rotations (reserve), the chains' total.
            unsafe { self.gen_chains_launch::<T>(io, p, h, 1, h + p, list) }?;
            list.len = p * h;
            list.span = h + p;
            list.sched = Some((1, h, p));
            return Ok(());
        }
        let ks = T::kernel_set(&self.kernels);
        let (f, launch, in_smem) = match path {
            GenPath::Chains => unreachable!("handled above"),
            GenPath::Step => (&ks.two_phase_gen_strip, cfg((1, 1), (GEN_BLOCK, 1)), 0usize),
            GenPath::Pipe { shared } => {
                let f = &ks.two_phase_gen_strip_pipe;
                let c = self.gen_pipe_cfg::<T>(f, "two_phase_gen_strip", p, (h + p) * p, shared)?;
                (f, c, shared as usize)
            }
        };
        list.clear();
        let mut b = self.kernel_args(f);
        b.arg(x.buf_mut())
            .arg(&ld)
            .arg(&h)
            .arg(&p)
            .arg(&mut list.rot)
            .arg(&mut list.plane);
        if path != GenPath::Step {
            b.arg(&in_smem);
        }
        // SAFETY: matches two_phase_gen_strip_{f32,f64}(x: *mut T, ld, h, p, rot: *mut T,
        // plane: *mut u32) for GenPath::Step, or two_phase_gen_strip_pipe_{f32,f64}(the
        // same, in_smem) for Pipe: x spans (h+p)×p with ld ≥ h+p (asserted shape, view
        // extent); rot holds 2·cap ≥ 2·p·h and plane cap ≥ p·h (reserve); three distinct
        // &mut buffers cannot overlap; grid 1, block GEN_BLOCK (the pipe: any multiple of
        // 32 up to it, gen_pipe_cfg); the pipe's dynamic shared memory is (4p + in_smem·(h+p)·p)·size_of::<T>() (gen_pipe_cfg, within
        // the limit it raised) and p ≤ GEN_PIPE_MAX_CHAINS < 2³².
        unsafe { b.launch(launch) }.map_err(launch_err("two_phase_gen_strip"))?;
        list.len = p * h;
        list.span = h + p;
        list.sched = Some((1, h, p));
        Ok(())
    }

    /// `two_phase_gen_block` (docs/algorithms.md#wavefront-schedule,
    /// docs/algorithms.md#row-deletion): copies Z = `qz` (p×m, rows k0..k0+p of Q) into the
    /// compact scratch `z` (p·m) and runs the wavefront on it, recording the pm − p(p+1)/2
    /// rotations into `list` (replacing it) in the order of `update::delete_rows::rotate_out`;
    /// planes are column indices of Q. Runs the chains of warp scans ([`GenPath::Chains`]) when
    /// a vector fits a block, else the pipelined wavefront with Z in shared memory when it
    /// fits, else in `z` ([`GenPath`]); `z` holds the final Z either way.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] (the chains' flags), [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If p ≥ m, `z` is shorter than p·m or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_block<T: GpuScalar>(
        &self,
        qz: &DevMatView<'_, T>,
        z: &mut DevVec<T>,
        list: &mut RotList<T>,
    ) -> Result<()> {
        let (p, m) = (qz.nrows(), qz.ncols());
        let path = self.gen_default_path::<T>(p, p * m, m)?;
        self.two_phase_gen_block_path(qz, z, list, path)
    }

    /// [`Gpu::two_phase_gen_block`] through the kernel `path` names (tests and
    /// benchmarks; every path gives the same list and final Z bit for bit).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if `path` is `Pipe` and its shared memory exceeds the
    /// device's limit, or `Chains` and a vector does not fit a block (nothing is
    /// launched; `list` and `z` are unchanged);
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If p ≥ m, `z` is shorter than p·m or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_block_path<T: GpuScalar>(
        &self,
        qz: &DevMatView<'_, T>,
        z: &mut DevVec<T>,
        list: &mut RotList<T>,
        path: GenPath,
    ) -> Result<()> {
        let (p, m) = (qz.nrows(), qz.ncols());
        assert!(p < m && z.len() >= p * m);
        let count = p * m - p * (p + 1) / 2;
        list.reserve_from_empty(count);
        if p == 0 {
            list.clear();
            return Ok(());
        }
        let ldq = qz.ld();
        if path == GenPath::Chains {
            let (pq, _gq) = qz.buf().device_ptr(&self.stream);
            let mut zv = z.view_mut();
            let (pz, _gz) = zv.device_ptr_mut(&self.stream);
            let io = ChainIo {
                src: pq,
                src_vs: 1,
                src_es: ldq,
                dst: pz,
                dst_vs: 1,
                dst_es: p,
            };
            // SAFETY: vector i is row i of the p×m view qz (elements 0..m at i + j·ldq,
            // inside the view) and of the compact z (i + j·p < p·m ≤ z.len(), asserted);
            // qz is borrowed shared and z mutably, so they do not overlap and nothing
            // else writes them; hi_i = m − 1 ≥ i + 1 as p < m; the list holds ≥ count
            // rotations (reserve), the chains' total.
            unsafe { self.gen_chains_launch::<T>(io, p, m - 1, 0, m, list) }?;
            list.len = count;
            list.span = m;
            list.sched = Some((2, p, m));
            return Ok(());
        }
        let ks = T::kernel_set(&self.kernels);
        let (f, launch, in_smem) = match path {
            GenPath::Chains => unreachable!("handled above"),
            GenPath::Step => (&ks.two_phase_gen_block, cfg((1, 1), (GEN_BLOCK, 1)), 0usize),
            GenPath::Pipe { shared } => {
                let f = &ks.two_phase_gen_block_pipe;
                let c = self.gen_pipe_cfg::<T>(f, "two_phase_gen_block", p, p * m, shared)?;
                (f, c, shared as usize)
            }
        };
        list.clear();
        let mut zv = z.view_mut();
        let mut b = self.kernel_args(f);
        b.arg(qz.buf())
            .arg(&ldq)
            .arg(&p)
            .arg(&m)
            .arg(&mut zv)
            .arg(&mut list.rot)
            .arg(&mut list.plane);
        if path != GenPath::Step {
            b.arg(&in_smem);
        }
        // SAFETY: matches two_phase_gen_block_{f32,f64}(qz: *const T, ldq, p, m,
        // z: *mut T, rot: *mut T, plane: *mut u32) for GenPath::Step, or
        // two_phase_gen_block_pipe_{f32,f64}(the same, in_smem) for Pipe: qz is a p×m
        // view (ld ldq), z holds ≥ p·m (asserted), rot/plane hold ≥ count rotations
        // (reserve); z, rot, plane are distinct &mut buffers and qz is borrowed shared,
        // so none overlap; p < m; grid 1, block GEN_BLOCK (the pipe: any multiple of 32
        // up to it, gen_pipe_cfg); the pipe's dynamic shared memory is (4p + in_smem·p·m)·size_of::<T>() (gen_pipe_cfg, within the limit it
        // raised) and p ≤ GEN_PIPE_MAX_CHAINS < 2³².
        unsafe { b.launch(launch) }.map_err(launch_err("two_phase_gen_block"))?;
        list.len = count;
        list.span = m;
        list.sched = Some((2, p, m));
        Ok(())
    }

    /// `two_phase_gen_rank_one_a` (docs/algorithms.md#rank-one-update): on w(0..=top) (`w.len()` =
    /// top + 1), rotations zeroing w(i+1) against w(i) for i = top−1 down to 0, recorded
    /// into `list` (replacing it); w(0) := ρ, the rest exact zeros. All rotations are made
    /// at once from scaled suffix norms of w (one block, a scan; the serial chain's
    /// rotations up to rounding).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `w` is empty or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_rank_one_a<T: GpuScalar>(
        &self,
        w: &mut CudaViewMut<'_, T>,
        list: &mut RotList<T>,
    ) -> Result<()> {
        assert!(!w.is_empty());
        let top = w.len() - 1;
        list.clear();
        list.reserve(top);
        list.sweep = Some((top, 0));
        if top == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).two_phase_gen_rank_one_a;
        let mut b = self.kernel_args(f);
        b.arg(&mut *w)
            .arg(&top)
            .arg(&mut list.rot)
            .arg(&mut list.plane);
        let mut c = cfg((1, 1), (GEN_A_BLOCK, 1));
        c.shared_mem_bytes = 64 * size_of::<T>() as u32;
        // SAFETY: matches two_phase_gen_rank_one_a_{f32,f64}(w: *mut T, top, rot: *mut T,
        // plane: *mut u32): w holds top+1, rot/plane ≥ top rotations (reserve); distinct
        // &mut buffers; grid 1, a block of GEN_A_BLOCK (a multiple of 32, ≤ 1024)
        // threads and 64 elements of dynamic shared memory, as the kernel requires.
        unsafe { b.launch(c) }.map_err(launch_err("two_phase_gen_rank_one_a"))?;
        list.len = top;
        list.span = top + 1;
        Ok(())
    }

    /// `two_phase_gen_rank_one_b` (docs/algorithms.md#rank-one-update): R(0, :) += w(0)·vᵀ,
    /// then stage B on the upper Hessenberg `r` (m×n), done in place; its min(n, m−1) rotations
    /// are appended to `list` (planes (i, i+1)). Runs the pipelined kernel (one barrier a step)
    /// when n ≤ [`GEN_R1_MAX_N`], else the step kernel ([`GenPath`]).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `w` is empty, `v.len() != n` or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_rank_one_b<T: GpuScalar>(
        &self,
        r: &mut DevMatViewMut<'_, T>,
        w: &CudaView<'_, T>,
        v: &CudaView<'_, T>,
        list: &mut RotList<T>,
    ) -> Result<()> {
        let path = if r1_pipe_fits(r.ncols(), r.ld()) {
            GenPath::Pipe { shared: false }
        } else {
            GenPath::Step
        };
        self.two_phase_gen_rank_one_b_path(r, w, v, list, path)
    }

    /// [`Gpu::two_phase_gen_rank_one_b`] through the kernel `path` names (tests and
    /// benchmarks; both give the same rotations and R bit for bit).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for `Pipe { shared: true }`, or `Pipe` with n >
    /// [`GEN_R1_MAX_N`] or ld·n ≥ 2³² (nothing is launched; `r` and `list` unchanged);
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `w` is empty, `v.len() != n` or the list is too small (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_gen_rank_one_b_path<T: GpuScalar>(
        &self,
        r: &mut DevMatViewMut<'_, T>,
        w: &CudaView<'_, T>,
        v: &CudaView<'_, T>,
        list: &mut RotList<T>,
        path: GenPath,
    ) -> Result<()> {
        let (m, n) = (r.nrows(), r.ncols());
        assert!(!w.is_empty() && v.len() == n);
        let nb = n.min(m.saturating_sub(1));
        list.reserve(nb);
        if path != GenPath::Step
            && (path == (GenPath::Pipe { shared: true }) || !r1_pipe_fits(n, r.ld()))
        {
            return Err(Error::InvalidParam {
                op: "two_phase_gen_rank_one_b",
                what: "path",
                why: format!(
                    "{path:?}: the pipelined stage B keeps R in global memory and takes n ≤ \
                     {GEN_R1_MAX_N} with ld·n < 2^32 (n = {n}, ld = {})",
                    r.ld()
                ),
            });
        }
        list.sched = None;
        list.sweep = match list.sweep {
            Some((down, 0)) if down == list.len => Some((down, nb)),
            _ => None,
        };
        if n == 0 || m == 0 {
            return Ok(());
        }
        let (ldr, k_off) = (r.ld(), list.len);
        let ks = T::kernel_set(&self.kernels);
        let (f, launch) = if path == GenPath::Step {
            (&ks.two_phase_gen_rank_one_b, cfg((1, 1), (GEN_BLOCK, 1)))
        } else {
            // Two columns a thread when a block of the two-column kernel covers n (a
            // fifth of the twelve-column kernel's code, which stalled on instruction
            // fetch), with as many threads as its registers allow (stage B at
            // n = 1000 1.00 → 0.85 ms on the H100 with 512 threads instead of twelve
            // columns on 256; six columns on 512 threads gained nothing at n = 3000);
            // else twelve with GEN_R1_BLOCK.
            let threads_for = |f: &cudarc::driver::CudaFunction, cpt: usize, cap: usize| {
                let most = f
                    .max_threads_per_block()
                    .map(|t| (t.max(0) as usize).min(cap) / 32 * 32)
                    .unwrap_or(0);
                let want = n.div_ceil(cpt).div_ceil(32) * 32;
                (want <= most).then_some(want.max(32))
            };
            let (f, threads) = if let Some(t) =
                threads_for(&ks.two_phase_gen_rank_one_b_pipe2, R1_PIPE2_CPT, 1024)
            {
                (&ks.two_phase_gen_rank_one_b_pipe2, t)
            } else {
                (&ks.two_phase_gen_rank_one_b_pipe, GEN_R1_BLOCK as usize)
            };
            let mut c = cfg((1, 1), (threads as u32, 1));
            c.shared_mem_bytes = 4 * size_of::<T>() as u32;
            (f, c)
        };
        let mut b = self.kernel_args(f);
        b.arg(r.buf_mut())
            .arg(&ldr)
            .arg(&m)
            .arg(&n)
            .arg(w)
            .arg(v)
            .arg(&mut list.rot)
            .arg(&mut list.plane)
            .arg(&k_off);
        // SAFETY: matches two_phase_gen_rank_one_b_{f32,f64} and
        // two_phase_gen_rank_one_b_pipe_{f32,f64}(r: *mut T, ldr, m, n, w: *const T,
        // v: *const T, rot: *mut T, plane: *mut u32, k_off): r is an m×n view, w ≥ 1 and
        // v = n elements (asserted), rot/plane have room for k_off + nb rotations
        // (reserve); r, rot, plane are distinct &mut buffers and w, v shared borrows, so
        // nothing overlaps; grid 1; the pipe runs with n ≤ GEN_R1_BLOCK·12 and ld·n <
        // 2³² (r1_pipe_fits, checked above), the two-column variant with a block of
        // ≥ n/2 threads within the kernel's own limit (queried), the twelve-column one
        // with GEN_R1_BLOCK threads, and 4 elements of dynamic shared memory, as their
        // contracts require.
        unsafe { b.launch(launch) }.map_err(launch_err("two_phase_gen_rank_one_b"))?;
        list.len += nb;
        if nb > 0 {
            list.span = list.span.max(nb + 1);
        }
        Ok(())
    }

    /// `two_phase_apply` (phase 2, docs/algorithms.md#two-phase-design): applies rotations
    /// 0..`list.len()` in order to up to three targets in one launch (e.g. Q from the right, R
    /// and d from the left), one thread per row (Cols) or column (Rows) of each target. A list
    /// made by [`Gpu::two_phase_gen_strip`] or [`Gpu::two_phase_gen_block`] goes through
    /// `two_phase_apply_pipe` ([`ApplyPath::Pipe`], ⌈p/8⌉ ≤ [`APPLY_PIPE_WARPS`] warps: each
    /// element read and written once per 64 chains, the same results bit for bit), a rank-one
    /// list through `two_phase_apply_sweep` ([`ApplyPath::Sweep`], unless a banded target meets
    /// its ascending part), any other list through `two_phase_apply` ([`ApplyPath::List`]).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If more than three targets are given or a target has fewer than `list.span()`
    /// elements per vector (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_apply<T: GpuScalar>(
        &self,
        list: &RotList<T>,
        targets: &mut [ApplyTarget<'_, '_, T>],
    ) -> Result<()> {
        let path = if let Some((sid, s0, s1)) = list.sched {
            // chains: p of a strip (s1) or block (s0) list; idle warps would only
            // hold registers and meet at the barriers
            let chains = if sid == 1 { s1 } else { s0 };
            let warps = chains.div_ceil(8).clamp(1, APPLY_PIPE_WARPS as usize) as u32;
            ApplyPath::Pipe { warps }
        } else if matches!(list.sweep, Some((_, up)) if up == 0 || targets.iter().all(|t| !t.banded))
        {
            ApplyPath::Sweep
        } else {
            ApplyPath::List
        };
        self.two_phase_apply_path(list, targets, path)
    }

    /// [`Gpu::two_phase_apply`] through the kernel `path` names (tests and benchmarks
    /// compare the paths; all give the same results bit for bit).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if `path` is [`ApplyPath::Step`] or [`ApplyPath::Pipe`]
    /// and the list has no strip/block schedule (uploaded, or after
    /// [`RotList::forget_schedule`]), or `warps` is outside 1..=8, or `path` is
    /// [`ApplyPath::Sweep`] and the list is not a rank-one sweep or has an ascending part
    /// while a target is banded (nothing is launched);
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If more than three targets are given or a target has fewer than `list.span()`
    /// elements per vector (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_apply_path<T: GpuScalar>(
        &self,
        list: &RotList<T>,
        targets: &mut [ApplyTarget<'_, '_, T>],
        path: ApplyPath,
    ) -> Result<()> {
        assert!(targets.len() <= 3);
        let op = "two_phase_apply";
        if path == ApplyPath::Sweep {
            match list.sweep {
                None => {
                    return Err(Error::InvalidParam {
                        op,
                        what: "path",
                        why: "Sweep needs a rank-one list; this list has no sweep".into(),
                    })
                }
                Some((_, up)) if up > 0 && targets.iter().any(|t| t.banded) => {
                    return Err(Error::InvalidParam {
                        op,
                        what: "path",
                        why: "Sweep takes banded targets only without the ascending part".into(),
                    })
                }
                Some(_) => {}
            }
        } else if path != ApplyPath::List && list.sched.is_none() {
            return Err(Error::InvalidParam {
                op,
                what: "path",
                why: format!("{path:?} needs a strip or block list; this list has no schedule"),
            });
        }
        if let ApplyPath::Pipe { warps } = path {
            if !(1..=APPLY_PIPE_MAX_WARPS).contains(&warps) {
                return Err(Error::InvalidParam {
                    op,
                    what: "warps",
                    why: format!("{warps} warps per block; 1..={APPLY_PIPE_MAX_WARPS} allowed"),
                });
            }
        }
        let count = list.len;
        let mut meta = [(0usize, 0usize, 0usize, usize::MAX); 3];
        for (slot, t) in meta.iter_mut().zip(targets.iter()) {
            let (rs, cs, nvec, elems) = t.geometry();
            assert!(elems >= list.span, "target too small for the rotation list");
            assert!(!t.banded || t.side == RotSide::Rows);
            *slot = (rs, cs, nvec, if t.banded { 0 } else { usize::MAX });
        }
        let maxv = meta.iter().map(|m| m.2).max().unwrap_or(0);
        if count == 0 || maxv == 0 {
            return Ok(());
        }
        let null: u64 = 0;
        let ks = T::kernel_set(&self.kernels);
        let (sid, s0, s1) = list.sched.unwrap_or((0, 0, 0));
        let (f, launch) = match path {
            ApplyPath::List => (
                &ks.two_phase_apply,
                cfg(
                    (grid_blocks(maxv, APPLY_ROT_BLOCK), 3),
                    (APPLY_ROT_BLOCK, 1),
                ),
            ),
            ApplyPath::Step => (
                &ks.two_phase_apply_sched,
                cfg(
                    (grid_blocks(maxv, APPLY_ROT_BLOCK), 3),
                    (APPLY_ROT_BLOCK, 1),
                ),
            ),
            ApplyPath::Sweep => (
                &ks.two_phase_apply_sweep,
                cfg((grid_blocks(maxv, APPLY_BLOCK), 3), (APPLY_BLOCK, 1)),
            ),
            ApplyPath::Pipe { warps } => {
                let mut c = cfg((grid_blocks(maxv, 32), 3), (32 * warps, 1));
                c.shared_mem_bytes = (2 * 32 + PIPE_RING_ELEMS) * warps * size_of::<T>() as u32;
                (&ks.two_phase_apply_pipe, c)
            }
        };
        let mut b = self.kernel_args(f);
        let (down, up) = list.sweep.unwrap_or((0, 0));
        if path == ApplyPath::List {
            b.arg(&list.rot).arg(&list.plane).arg(&count);
        } else if path == ApplyPath::Sweep {
            b.arg(&list.rot).arg(&down).arg(&up);
        } else {
            b.arg(&list.rot).arg(&sid).arg(&s0).arg(&s1);
        }
        let mut it = targets.iter_mut();
        for slot in &meta {
            match it.next() {
                Some(t) => b.arg(t.view.buf_mut()),
                None => b.arg(&null),
            };
            b.arg(&slot.0).arg(&slot.1).arg(&slot.2).arg(&slot.3);
        }
        // SAFETY: matches two_phase_apply_{f32,f64}(rot: *const T, plane: *const u32,
        // count, then per target x: *mut T, rs, cs, n, b) for ApplyPath::List, or, for a
        // list with a schedule (checked above), two_phase_apply_sched_{f32,f64} /
        // two_phase_apply_pipe_{f32,f64}(rot: *const T, sched, s0, s1, the same targets),
        // whose list is the whole schedule's (set only by the generate launchers, which
        // recorded exactly count = len rotations); rot/plane hold ≥ count rotations;
        // every plane index + 1 < list.span ≤ the elements per vector of each target
        // (asserted), so vector t < n touches x[t·rs + k·cs] inside its view (row t,
        // column k for Cols; column t, row k for Rows); distinct vectors are distinct
        // rows/columns; targets are distinct &mut views (no overlap with each other or
        // the list); absent targets have n = 0 and a null pointer never read. Launch
        // shapes: List/Step grid (⌈max n/APPLY_ROT_BLOCK⌉, 3), block APPLY_ROT_BLOCK (the
        // kernels derive the vector index from blockDim, so any block size covers every
        // vector); Pipe grid (⌈max n/32⌉, 3), block 32·warps with 1 ≤ warps ≤ 8 (checked
        // above) and (2·32 + PIPE_RING_ELEMS)·warps·size_of::<T>() bytes of dynamic shared
        // memory (≤ 36 KiB at 8 warps of f64, under the 48 KiB default), as its
        // contract requires. Sweep: two_phase_apply_sweep_{f32,f64}(rot: *const T, down,
        // up, the same targets) on a list made by the rank-one generate launchers (down =
        // the stage A count, up = stage B's, down + up = count), banded targets only with
        // up = 0 (checked above); grid (⌈max n/APPLY_BLOCK⌉, 3), block APPLY_BLOCK (any
        // block size).
        unsafe { b.launch(launch) }.map_err(launch_err("two_phase_apply"))?;
        Ok(())
    }

    /// `two_phase_house_apply` (docs/algorithms.md#rank-one-update): applies H = I − τ·v·vᵀ with
    /// v = [1; `vt`] to up to two targets: `Cols` targets from the right (X := X·H, one
    /// thread per row), `Rows` targets from the left (X := H·X, one per column).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If more than two targets are given, `tau` is empty, or a target's vectors do not
    /// have `vt.len() + 1` elements (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_house_apply<T: GpuScalar>(
        &self,
        vt: &CudaView<'_, T>,
        tau: &CudaView<'_, T>,
        targets: &mut [ApplyTarget<'_, '_, T>],
    ) -> Result<()> {
        assert!(targets.len() <= 2 && !tau.is_empty());
        let len = vt.len() + 1;
        let mut meta = [(0usize, 0usize, 0usize); 2];
        for (slot, t) in meta.iter_mut().zip(targets.iter()) {
            let (rs, cs, nvec, elems) = t.geometry();
            assert_eq!(elems, len, "Householder target length");
            *slot = (rs, cs, nvec);
        }
        let maxv = meta.iter().map(|m| m.2).max().unwrap_or(0);
        if maxv == 0 {
            return Ok(());
        }
        let null: u64 = 0;
        let f = &T::kernel_set(&self.kernels).two_phase_house_apply;
        let mut b = self.kernel_args(f);
        b.arg(vt).arg(&len).arg(tau);
        let mut it = targets.iter_mut();
        for slot in &meta {
            match it.next() {
                Some(t) => b.arg(t.view.buf_mut()),
                None => b.arg(&null),
            };
            b.arg(&slot.0).arg(&slot.1).arg(&slot.2);
        }
        // SAFETY: matches two_phase_house_apply_{f32,f64}(vt: *const T, len, tau: *const T,
        // x0, rs0, cs0, n0, x1, rs1, cs1, n1): vt holds len−1 and tau ≥ 1; each target's
        // vectors have exactly len elements inside the view (asserted), distinct vectors
        // are distinct rows/columns, targets are distinct &mut views and vt, tau shared
        // borrows (no overlap); absent targets have n = 0; grid (⌈max n/128⌉, 2), block 128.
        unsafe { b.launch(cfg((grid_blocks(maxv, APPLY_BLOCK), 2), (APPLY_BLOCK, 1))) }
            .map_err(launch_err("two_phase_house_apply"))?;
        Ok(())
    }

    /// `two_phase_copy`: dst := src with the source rows `drop` removed (src has
    /// dst.nrows() + drop.len() rows, same columns); with `zero_lower`, entries below
    /// dst's diagonal are written as exact zeros.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If the shapes do not match (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_copy<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        dst: &mut DevMatViewMut<'_, T>,
        drop: Range<usize>,
        zero_lower: bool,
    ) -> Result<()> {
        let (rows, cols) = (dst.nrows(), dst.ncols());
        assert!(drop.start <= drop.end && drop.end <= src.nrows());
        assert!(src.nrows() == rows + drop.len() && src.ncols() == cols);
        let (lds, ldd) = (src.ld(), dst.ld());
        self.copy_raw(
            src.buf(),
            lds,
            dst.buf_mut(),
            ldd,
            (rows, cols),
            drop,
            zero_lower,
        )
    }

    /// A new matrix holding `src` without its rows `drop` (as [`Gpu::two_phase_copy`],
    /// exact zeros below the diagonal with `zero_lower`): the row deletion's new Q, R
    /// and d. The copy writes every element, so the new matrix is not zeroed first, only
    /// its padding rows (the fill passes cost 0.7 ms at 12000×12000).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    ///
    /// # Panics
    /// If `drop` is not inside `src`'s rows (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_copy_new<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        drop: Range<usize>,
        zero_lower: bool,
    ) -> Result<DevMat<T>> {
        assert!(drop.start <= drop.end && drop.end <= src.nrows());
        let (rows, cols) = (src.nrows() - drop.len(), src.ncols());
        let mut out = DevMat::for_overwrite(self, rows, cols)?;
        self.two_phase_copy(src, &mut out.view_mut(), drop, zero_lower)?;
        Ok(out)
    }

    /// The diagonal a(j, j), j < min(rows, cols), into `out` (same launch as
    /// [`Gpu::two_phase_copy`] with source stride ld + 1).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `out` is shorter than the diagonal (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_diag<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
        out: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        let k = a.nrows().min(a.ncols());
        assert!(out.len() >= k);
        let lds = a.ld() + 1;
        self.copy_raw(a.buf(), lds, out, 1, (1, k), 0..0, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn copy_raw<T: GpuScalar>(
        &self,
        src: &CudaView<'_, T>,
        lds: usize,
        dst: &mut CudaViewMut<'_, T>,
        ldd: usize,
        (rows, cols): (usize, usize),
        drop: Range<usize>,
        zero_lower: bool,
    ) -> Result<()> {
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        // Bounds: the last element read is (rows−1 + drop.len()) + (cols−1)·lds; the last
        // written (rows−1) + (cols−1)·ldd.
        assert!(rows - 1 + drop.len() + (cols - 1) * lds < src.len());
        assert!(rows <= ldd && rows - 1 + (cols - 1) * ldd < dst.len());
        assert!(cols.div_ceil(COPY_BLOCK.1 as usize) <= 65_535);
        let (skip0, skip_p, zl) = (drop.start, drop.len(), zero_lower as usize);
        let f = &T::kernel_set(&self.kernels).two_phase_copy;
        let mut b = self.kernel_args(f);
        b.arg(src)
            .arg(&lds)
            .arg(&rows)
            .arg(&cols)
            .arg(&mut *dst)
            .arg(&ldd)
            .arg(&skip0)
            .arg(&skip_p)
            .arg(&zl);
        // SAFETY: matches two_phase_copy_{f32,f64}(src: *const T, lds, rows, cols,
        // dst: *mut T, ldd, skip0, skip_p, zero_lower): every source index read is at
        // most rows−1+skip_p + (cols−1)·lds < src.len() and every destination index
        // written at most rows−1 + (cols−1)·ldd < dst.len() (asserted); dst is a &mut
        // view and src a shared one, so they do not overlap; grid (⌈rows/32⌉, ⌈cols/8⌉),
        // block (32, 8).
        unsafe {
            b.launch(cfg(
                (
                    grid_blocks(rows, COPY_BLOCK.0),
                    grid_blocks(cols, COPY_BLOCK.1),
                ),
                COPY_BLOCK,
            ))
        }
        .map_err(launch_err("two_phase_copy"))?;
        Ok(())
    }
}

/// Window width of [`Gpu::two_phase_apply_windowed`] for `chains` chains: 2p
/// minimises the GEMMs' flops (8·m²·p against the rotations' 6·m²·p), and at least 512
/// keeps the launches few (docs/design.md, "windows of rotations applied by GEMM").
pub fn apply_window_width(chains: usize) -> usize {
    (2 * chains).max(512)
}

impl Gpu {
    /// [`Gpu::two_phase_apply`] of a strip or block list by windows of `w` planes and GEMM
    /// (docs/design.md, "windows of rotations applied by GEMM"). Window k = planes' columns
    /// [l_k, l_k + w), l_k = hi0 − h_w − k·h_w (h_w = w − p), takes chain c's planes
    /// l_k + 1 + c ..= l_k + h_w + c. The windows go from the top planes down, so together
    /// they take every rotation once, each window keeping the list's order within it. Two
    /// launches build every window's product at once: `two_phase_window_gather` copies the
    /// windows' rotations into a stack of strip lists (identity rotations outside the
    /// chains) and sets a stack of w×w identities, and `two_phase_window_pipe` makes
    /// Z_k = I·G_kᵀ for all k (blockIdx.y = k). Then, window by window, one GEMM a target
    /// applies Z_k through a scratch, copied back:
    /// * [`RotSide::Cols`]: X[:, W] ← X[:, W]·Z_W;
    /// * [`RotSide::Rows`]: X[W, c0..] ← Z_Wᵀ·X[W, c0..], with c0 = 0, or for a
    ///   `banded` target (upper triangular at its origin; the chains add at most p
    ///   sub-diagonals) the first column that can be nonzero, max(lo − p, 0).
    ///
    /// Zeros the rotations keep exactly (a structural zero of the sequential apply) stay
    /// exact: every product in the GEMM sum is then an exact 0. Launches: 2, then 2 a
    /// target a window; ⌈hi0/h_w⌉ windows. Device memory: windows·(w² + 2·p·h_w)
    /// elements. The result equals [`Gpu::two_phase_apply`]'s up to rounding.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if the list is not a whole strip or block list, or
    /// `w ≤ p`, or a `Cols` target is `banded`, or the windows exceed the grid;
    /// [`Error::Shape`] if a target has fewer than `list.span()` elements a vector;
    /// [`Error::OutOfMemory`], [`Error::Driver`], [`Error::Cublas`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_apply_windowed<T: GpuScalar>(
        &self,
        list: &RotList<T>,
        targets: &mut [ApplyTarget<'_, '_, T>],
        w: usize,
    ) -> Result<()> {
        const OP: &str = "two_phase_apply_windowed";
        let Some((sid, s0, s1)) = list.sched else {
            return Err(Error::InvalidParam {
                op: OP,
                what: "list",
                why: "not a whole strip or block list".into(),
            });
        };
        // (chains, hi0, inc): strip (1, h, p): hi_c = h + c; block (2, p, m): hi_c = m − 1.
        // Typed: all three are the kernel's 8-byte `usize` parameters (an untyped literal
        // would be an i32 and hand the kernel 4 bytes of garbage above it).
        let (p, hi0, inc): (usize, usize, usize) = if sid == 1 {
            (s1, s0, 1)
        } else {
            (s0, s1.saturating_sub(1), 0)
        };
        if w <= p {
            return Err(Error::InvalidParam {
                op: OP,
                what: "w",
                why: format!("the window ({w}) must be wider than the chains ({p})"),
            });
        }
        let span = list.span;
        let (mut max_rows, mut max_cols) = (0, 0);
        for t in targets.iter() {
            let (planes, other) = match t.side {
                RotSide::Cols => (t.view.ncols(), t.view.nrows()),
                RotSide::Rows => (t.view.nrows(), t.view.ncols()),
            };
            if planes < span {
                return Err(Error::Shape {
                    op: OP,
                    what: "elements a vector of a target",
                    got: planes,
                    expected: span,
                });
            }
            if t.side == RotSide::Cols && t.banded {
                return Err(Error::InvalidParam {
                    op: OP,
                    what: "targets",
                    why: "only a Rows target can be banded".into(),
                });
            }
            match t.side {
                RotSide::Cols => max_rows = max_rows.max(other),
                RotSide::Rows => max_cols = max_cols.max(other),
            }
        }
        if list.len == 0 || hi0 == 0 {
            return Ok(());
        }
        let hw = w - p;
        // windows k = 0.. while window k holds a plane of some chain: l_k + h_w ≥ 1
        let windows = (hi0 - 1) / hw + 1;
        let grid_err = |what: &str| Error::InvalidParam {
            op: OP,
            what: "w",
            why: format!("{windows} windows of {w} planes ({what}) exceed the grid"),
        };
        let wy = u32::try_from(windows)
            .ok()
            .filter(|&y| y <= 65_535)
            .ok_or_else(|| grid_err("windows"))?;
        let gx = u32::try_from((p * hw).div_ceil(256)).map_err(|_| grid_err("entries"))?;
        let px = u32::try_from(w.div_ceil(32)).map_err(|_| grid_err("rows"))?;
        let z_len = windows * w * w;
        let mut z = self
            .stream
            .alloc_zeros::<T>(z_len)
            .map_err(alloc_err("window products", z_len * size_of::<T>()))?;
        let rot_len = 2 * windows * p * hw;
        let mut rot = self
            .stream
            .alloc_zeros::<T>(rot_len)
            .map_err(alloc_err("window rotations", rot_len * size_of::<T>()))?;
        let mut tc = DevMat::<T>::zeros(self, max_rows, w)?;
        let mut tr = DevMat::<T>::zeros(self, w, max_cols)?;
        let ks = T::kernel_set(&self.kernels);
        let l0 = hi0 as isize - hw as isize;
        let mut b = self.kernel_args(&ks.two_phase_window_gather);
        b.arg(&list.rot)
            .arg(&mut rot)
            .arg(&mut z)
            .arg(&p)
            .arg(&hw)
            .arg(&hi0)
            .arg(&inc)
            .arg(&l0);
        // SAFETY: matches two_phase_window_gather_{f32,f64}(src_rot: *const T, dst_rot:
        // *mut T, z: *mut T, p, hw, hi0, inc: usize, l0: isize), all typed above: the list
        // holds every chain's rotations (its sched says strip or block of p chains with
        // these hi0, inc); rot holds 2·p·hw·windows and z w²·windows elements (zeroed),
        // two allocations of their own; grid (gx, windows) with gx·256 ≥ p·hw ≥ 1 threads.
        unsafe { b.launch(cfg((gx, wy), (256, 1))) }
            .map_err(launch_err("two_phase_window_gather"))?;
        let warps = p.div_ceil(8).clamp(1, APPLY_PIPE_WARPS as usize) as u32;
        let mut c = cfg((px, wy), (32 * warps, 1));
        c.shared_mem_bytes = (2 * 32 + PIPE_RING_ELEMS) * warps * size_of::<T>() as u32;
        let mut b = self.kernel_args(&ks.two_phase_window_pipe);
        b.arg(&rot).arg(&hw).arg(&p).arg(&mut z);
        // SAFETY: matches two_phase_window_pipe_{f32,f64}(rot: *const T, hw, p: usize, z:
        // *mut T): rot holds windows whole strip lists of p chains of hw (the gather
        // above, in stream order), its base 256-byte aligned (cudarc allocation); z holds
        // windows blocks of w² elements; grid (⌈w/32⌉, windows), block 32·warps with
        // 1 ≤ warps ≤ APPLY_PIPE_WARPS = 8 and apply_pipe's dynamic shared memory
        // ((2·32 + PIPE_RING_ELEMS)·warps·size_of::<T>() ≤ 36 KiB, under the default).
        unsafe { b.launch(c) }.map_err(launch_err("two_phase_window_pipe"))?;
        for k in 0..windows {
            let l = l0 - (k * hw) as isize;
            let lo = l.max(0) as usize;
            let hi = ((l + w as isize) as usize).min(span);
            // Z_k's local index of plane column lo (columns below 0 or from span on carry
            // no rotation: identity rows and columns of Z_k that the GEMMs leave out)
            let (off, width) = ((lo as isize - l) as usize, hi.saturating_sub(lo));
            if width == 0 {
                continue;
            }
            let zs = k * w * w + off * w + off;
            let zw = DevMatView::new(z.slice(zs..zs + (width - 1) * w + width), width, width, w)?;
            for t in targets.iter_mut() {
                let ld = t.view.ld();
                match t.side {
                    RotSide::Cols => {
                        let rows = t.view.nrows();
                        if rows == 0 {
                            continue;
                        }
                        let range = lo * ld..lo * ld + (width - 1) * ld + rows;
                        let out = &mut tc.block_mut(0, 0, rows, width);
                        {
                            let a = t.view.buf().slice(range.clone());
                            let a = DevMatView::new(a, rows, width, ld)?;
                            self.gemm(Op::N, Op::N, T::ONE, &a, &zw, T::ZERO, out)?;
                        }
                        let dst = t.view.buf_mut().slice_mut(range);
                        let mut dst = DevMatViewMut::new(dst, rows, width, ld)?;
                        self.panel_copy(&tc.block(0, 0, rows, width), &mut dst)?;
                    }
                    RotSide::Rows => {
                        let ncols = t.view.ncols();
                        let c0 = if t.banded {
                            lo.saturating_sub(p).min(ncols)
                        } else {
                            0
                        };
                        let cols = ncols - c0;
                        if cols == 0 {
                            continue;
                        }
                        let start = c0 * ld + lo;
                        let range = start..start + (cols - 1) * ld + width;
                        let out = &mut tr.block_mut(0, 0, width, cols);
                        {
                            let a = t.view.buf().slice(range.clone());
                            let a = DevMatView::new(a, width, cols, ld)?;
                            self.gemm(Op::T, Op::N, T::ONE, &zw, &a, T::ZERO, out)?;
                        }
                        let dst = t.view.buf_mut().slice_mut(range);
                        let mut dst = DevMatViewMut::new(dst, width, cols, ld)?;
                        self.panel_copy(&tr.block(0, 0, width, cols), &mut dst)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The window decomposition of [`Gpu::two_phase_apply_windowed`] checked on the CPU:
/// the same index arithmetic as `two_phase_window_gather` (mirrored here), the windows'
/// products made on identities and applied by matrix products, against the list applied
/// rotation by rotation in its own order.
#[cfg(test)]
mod window_tests {
    use crate::base::mat::Mat;
    use crate::cpu::givens::rot_pair;
    use crate::ops::insert_cols::testkit::rng;
    use rand::rngs::StdRng;
    use rand::Rng;

    /// Entry j of window chain c: (list index or None for the identity, local plane).
    /// Mirrors `two_phase::window_gather`.
    fn window_entry(
        c: usize,
        j: usize,
        hw: usize,
        hi0: usize,
        inc: usize,
        l: isize,
    ) -> (Option<usize>, usize) {
        let local = hw + c - j;
        let r = l + local as isize;
        let hi_c = hi0 + inc * c;
        let idx = (r >= (c + 1) as isize && r <= hi_c as isize).then(|| {
            let base = c * hi0 - (1 - inc) * (c * c.saturating_sub(1) / 2);
            base + (hi_c - r as usize)
        });
        (idx, local - 1)
    }

    /// A random chain list: chain c's rotations at planes hi_c − 1 down to c (index order
    /// of the step kernels), angles random.
    fn chain_list(p: usize, hi0: usize, inc: usize, g: &mut StdRng) -> Vec<(f64, f64, usize)> {
        let mut out = Vec::new();
        for c in 0..p {
            let hi_c = hi0 + inc * c;
            for r in (c + 1..=hi_c).rev() {
                let t = std::f64::consts::TAU * g.random::<f64>();
                out.push((t.cos(), t.sin(), r - 1));
            }
        }
        out
    }

    fn apply_cols(x: &mut Mat<f64>, list: &[(f64, f64, usize)]) {
        for &(c, s, a) in list {
            for i in 0..x.nrows() {
                let (mut u, mut v) = (x[(i, a)], x[(i, a + 1)]);
                rot_pair(c, s, &mut u, &mut v);
                x[(i, a)] = u;
                x[(i, a + 1)] = v;
            }
        }
    }

    /// Rows side: X := G·X (rotations on row pairs), as `two_phase_apply`'s Rows target.
    fn apply_rows(x: &mut Mat<f64>, list: &[(f64, f64, usize)]) {
        for &(c, s, a) in list {
            for j in 0..x.ncols() {
                let (mut u, mut v) = (x[(a, j)], x[(a + 1, j)]);
                rot_pair(c, s, &mut u, &mut v);
                x[(a, j)] = u;
                x[(a + 1, j)] = v;
            }
        }
    }

    /// The windows applied to `cols` (Cols side) and `rows` (Rows side, banded: columns
    /// from max(lo − p, 0) only), as `two_phase_apply_windowed` does.
    fn windowed(
        x: &mut Mat<f64>,
        rows_t: &mut Mat<f64>,
        list: &[(f64, f64, usize)],
        (p, hi0, inc, span): (usize, usize, usize, usize),
        w: usize,
    ) {
        let hw = w - p;
        let mut taken = vec![0usize; list.len()];
        let mut l = hi0 as isize - hw as isize;
        while l + hw as isize >= 1 {
            let mut wl = Vec::new();
            for c in 0..p {
                for j in 0..hw {
                    let (idx, plane) = window_entry(c, j, hw, hi0, inc, l);
                    let (cs, sn) = idx.map_or((1.0, 0.0), |k| (list[k].0, list[k].1));
                    if let Some(k) = idx {
                        assert_eq!(list[k].2 as isize, l + plane as isize, "plane of entry");
                        taken[k] += 1;
                    }
                    wl.push((cs, sn, plane));
                }
            }
            let mut z = Mat::from_fn(w, w, |i, j| if i == j { 1.0 } else { 0.0 });
            apply_cols(&mut z, &wl);
            let lo = l.max(0) as usize;
            let hi = ((l + w as isize) as usize).min(span);
            let off = (lo as isize - l) as usize;
            let width = hi - lo;
            let xs = Mat::from_fn(x.nrows(), width, |i, j| x[(i, lo + j)]);
            let zs = Mat::from_fn(width, width, |i, j| z[(off + i, off + j)]);
            let y = xs.matmul(&zs);
            for i in 0..x.nrows() {
                for j in 0..width {
                    x[(i, lo + j)] = y[(i, j)];
                }
            }
            let c0 = lo.saturating_sub(p).min(rows_t.ncols());
            let cols = rows_t.ncols() - c0;
            let xr = Mat::from_fn(width, cols, |i, j| rows_t[(lo + i, c0 + j)]);
            let yr = zs.transpose().matmul(&xr);
            for i in 0..width {
                for j in 0..cols {
                    rows_t[(lo + i, c0 + j)] = yr[(i, j)];
                }
            }
            l -= hw as isize;
        }
        assert!(
            taken.iter().all(|&t| t == 1),
            "every rotation in exactly one window"
        );
    }

    #[test]
    fn windows_give_the_list_product() {
        let mut g = rng(0x9e37_79b9);
        // (p, hi0, inc, span): strips (h + p columns) and blocks (m columns), windows
        // from barely wider than p to wider than the span
        let cases = [
            (3, 10, 1, 13, 5),
            (7, 40, 1, 47, 9),
            (7, 40, 1, 47, 60),
            (20, 13, 1, 33, 24),
            (1, 30, 1, 31, 2),
            (5, 29, 0, 30, 8),
            (12, 49, 0, 50, 13),
            (12, 49, 0, 50, 31),
            (12, 49, 0, 50, 100),
            (30, 79, 0, 80, 64),
            (1, 1, 0, 2, 2),
        ];
        for (p, hi0, inc, span, w) in cases {
            let list = chain_list(p, hi0, inc, &mut g);
            let x0 = Mat::from_fn(17, span, |_, _| g.random_range(-1.0..1.0));
            // an upper triangular Rows target (span rows, 23 columns), banded
            let r0 = Mat::from_fn(span, 23, |i, j| {
                if i <= j {
                    g.random_range(-1.0..1.0)
                } else {
                    0.0
                }
            });
            let mut direct = x0.clone();
            apply_cols(&mut direct, &list);
            let mut r_direct = r0.clone();
            apply_rows(&mut r_direct, &list);
            let mut win = x0.clone();
            let mut r_win = r0.clone();
            windowed(&mut win, &mut r_win, &list, (p, hi0, inc, span), w);
            let bound = 10.0 * (span + p) as f64 * f64::EPSILON;
            for (a, b, what) in [(&direct, &win, "cols"), (&r_direct, &r_win, "rows")] {
                for i in 0..a.nrows() {
                    for j in 0..a.ncols() {
                        let (u, v) = (a[(i, j)], b[(i, j)]);
                        assert!(
                            (u - v).abs() <= bound,
                            "{what} p={p} hi0={hi0} inc={inc} w={w} ({i}, {j}): {u:e} vs {v:e}"
                        );
                        if u == 0.0 {
                            // structural zeros stay exact (R's band)
                            assert_eq!(v, 0.0, "{what} ({i}, {j}) not exactly 0");
                        }
                    }
                }
            }
        }
    }
}
