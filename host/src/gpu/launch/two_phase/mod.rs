//! Typed launchers of the two-phase Givens kernels (docs/algorithms.md#two-phase-design;
//! gpu-kernels/src/two_phase/; docs/kernels.md `two_phase_*` rows): the single-block generate
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
use crate::gpu::ffi::driver::StreamAlloc;
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
pub(super) const R1_PIPE2_CPT: usize = 2;
/// Largest chain count (p) of the pipelined strip/block generate kernels (their item
/// indices are 32-bit).
pub const GEN_PIPE_MAX_CHAINS: usize = 65_535;
/// Most threads a block of `two_phase_gen_chains` (the kernel's `.maxntid 256`).
pub const CHAIN_MAX_THREADS: usize = 256;
/// Shared-memory scratch of `two_phase_gen_chains` ahead of its vector, in elements
/// (the kernel's `CHAIN_SCRATCH`).
pub(super) const CHAIN_SCRATCH: usize = 48;

/// Launch shapes of `two_phase_gen_chains` kept by [`ChainsCache`] (the most recent).
pub(super) const CHAINS_MEMO: usize = 16;

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
pub(super) struct ChainIo {
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
pub(super) const PIPE_RING_ELEMS: u32 = 512;
/// Block of `two_phase_copy`: 32 × 8.
pub(super) const COPY_BLOCK: (u32, u32) = (32, 8);

/// Whether `two_phase_gen_rank_one_b_pipe` takes an R with n columns and leading
/// dimension `ld` (12 columns a thread; 32-bit element offsets).
pub(super) fn r1_pipe_fits(n: usize, ld: usize) -> bool {
    n <= GEN_R1_MAX_N && (ld as u64) * (n as u64) < (1u64 << 32)
}

/// [`launch_config`] with every grid dimension at least 1 and no dynamic shared memory.
pub(super) fn cfg(grid: (u32, u32), block: (u32, u32)) -> LaunchConfig {
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
            .alloc_zeroed::<T>(2 * cap.max(1))
            .map_err(alloc_err(
                "RotList rotations",
                2 * cap.max(1) * size_of::<T>(),
            ))?;
        let plane = gpu
            .stream
            .alloc_zeroed::<u32>(cap.max(1))
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
        [Self::cols(q), Self::rows(r, true), Self::rows(d, false)]
    }

    /// Q by columns and d by rows: the targets of the rotations (and reflector) that act
    /// on Q's columns and d's rows alone.
    pub fn q_d(q: &'v mut DevMatViewMut<'a, T>, d: &'v mut DevMatViewMut<'a, T>) -> [Self; 2] {
        [Self::cols(q), Self::rows(d, false)]
    }

    /// Column rotations on `view`.
    pub fn cols(view: &'v mut DevMatViewMut<'a, T>) -> Self {
        ApplyTarget {
            view,
            side: RotSide::Cols,
            banded: false,
        }
    }

    /// Row rotations on `view` (`banded`: see [`ApplyTarget::banded`]).
    pub fn rows(view: &'v mut DevMatViewMut<'a, T>, banded: bool) -> Self {
        ApplyTarget {
            view,
            side: RotSide::Rows,
            banded,
        }
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
pub(super) fn gen_pipe_bytes(chains: usize, driver: usize, shared: bool, elem: usize) -> usize {
    (4 * chains + if shared { driver } else { 0 }) * elem
}

/// Raises `f`'s dynamic shared-memory limit to `to` bytes when a launch needs `bytes`
/// above the 48 KiB every kernel gets (`to` ≥ `bytes`, within the device's opt-in limit).
pub(super) fn raise_smem_limit(
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
mod apply;
mod chains;
mod generate;
mod pipe;
mod sweep;
mod window;

pub use window::apply_window_width;
