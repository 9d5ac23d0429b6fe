//! The only home of intrinsics and `asm!` in the kernel crate (architecture.md "Kernel
//! toolchain"; style.md §2.4): thread and block indices, barriers, dynamic shared memory,
//! warp shuffles, raw loads and stores, and the [`Float`] trait that the generic kernels
//! (householder, givens, transpose, reduce, wy) are written against.
//!
//! Everything here is `#[inline(always)]`: after LTO each kernel is one flat function.

use core::arch::asm;
use core::arch::nvptx;

/// Number of threads in a warp on every NVIDIA architecture this crate targets (sm_80+).
pub const WARP: usize = 32;

/// `threadIdx.x`.
#[inline(always)]
pub fn thread_x() -> usize {
    // SAFETY: reading the special register %tid.x has no preconditions inside a kernel.
    unsafe { nvptx::_thread_idx_x() as usize }
}

/// `threadIdx.y`.
#[inline(always)]
pub fn thread_y() -> usize {
    // SAFETY: reading the special register %tid.y has no preconditions inside a kernel.
    unsafe { nvptx::_thread_idx_y() as usize }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn block_x() -> usize {
    // SAFETY: reading the special register %ctaid.x has no preconditions inside a kernel.
    unsafe { nvptx::_block_idx_x() as usize }
}

/// `blockIdx.y`.
#[inline(always)]
pub fn block_y() -> usize {
    // SAFETY: reading the special register %ctaid.y has no preconditions inside a kernel.
    unsafe { nvptx::_block_idx_y() as usize }
}

/// `gridDim.x`.
#[inline(always)]
pub fn grid_dim_x() -> usize {
    // SAFETY: reading the special register %nctaid.x has no preconditions inside a kernel.
    unsafe { nvptx::_grid_dim_x() as usize }
}

/// `blockDim.x`.
#[inline(always)]
pub fn block_dim_x() -> usize {
    // SAFETY: reading the special register %ntid.x has no preconditions inside a kernel.
    unsafe { nvptx::_block_dim_x() as usize }
}

/// `blockDim.y`.
#[inline(always)]
pub fn block_dim_y() -> usize {
    // SAFETY: reading the special register %ntid.y has no preconditions inside a kernel.
    unsafe { nvptx::_block_dim_y() as usize }
}

/// Linear thread index inside the block: `threadIdx.x + threadIdx.y·blockDim.x`.
#[inline(always)]
pub fn thread_linear() -> usize {
    thread_x() + thread_y() * block_dim_x()
}

/// Threads per block: `blockDim.x · blockDim.y`.
#[inline(always)]
pub fn block_threads() -> usize {
    block_dim_x() * block_dim_y()
}

/// `__syncthreads()`: block-wide barrier that also orders shared and global memory
/// accesses of the block's threads (PTX `bar.sync 0`).
///
/// # Safety
/// Every thread of the block must reach the same sequence of barriers (no barrier inside
/// a branch that diverges between threads of the block).
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: the caller guarantees block-uniform control flow (see `# Safety`).
    unsafe { nvptx::_syncthreads() }
}

/// `gridDim.x · gridDim.y`: blocks in the launch.
#[inline(always)]
pub fn grid_blocks() -> usize {
    // SAFETY: reading special registers has no preconditions.
    unsafe { nvptx::_grid_dim_x() as usize * nvptx::_grid_dim_y() as usize }
}

/// Reads `p[i]` with `ld.volatile` (never served from a stale L1 line): for data that
/// other blocks wrote before a [`grid_sync`].
///
/// # Safety
/// `p.add(i)` must be in bounds of one allocation and aligned.
#[inline(always)]
pub unsafe fn ld_volatile<T: Copy>(p: *const T, i: usize) -> T {
    // SAFETY: the caller guarantees an in-bounds, aligned read.
    unsafe { p.add(i).read_volatile() }
}

/// `cp.async.<cache>.shared.global` of `bytes` bytes from the generic global address
/// `src` to the generic shared address `dst` (the instruction's cache operator and size
/// must be literals in the asm text).
macro_rules! cp_async_asm {
    ($cache:literal, $bytes:literal, $dst:expr, $src:expr) => {
        asm!(
            concat!(
                "{{ .reg .u64 %sd, %gs; cvta.to.shared.u64 %sd, {d}; cvta.to.global.u64 %gs, {g}; cp.async.",
                $cache,
                ".shared.global [%sd], [%gs], ",
                $bytes,
                "; }}"
            ),
            d = in(reg64) $dst,
            g = in(reg64) $src,
            options(nostack, preserves_flags),
        )
    };
}

/// Starts an asynchronous copy of one (c, s) pair — `2·size_of::<T>()` bytes, 8 (f32) or
/// 16 (f64) — from global memory at `src` to shared memory at `dst` (PTX `cp.async.ca`,
/// sm_80+). It lands after a later [`cp_async_commit`] and [`cp_async_wait`] /
/// [`cp_async_wait_all`] of this thread; other threads see it after a barrier that
/// follows that wait.
///
/// # Safety
/// `src` points at 2 readable `T`s of global memory, aligned to 2·size_of::<T>(); `dst`
/// (a generic pointer into this block's shared memory) at 2 writable `T`s with the same
/// alignment, which nothing else reads or writes until the copy has been waited for.
#[inline(always)]
pub unsafe fn cp_async_pair<T: Copy>(dst: *mut T, src: *const T) {
    // SAFETY: the caller guarantees the addresses, alignment and exclusivity; the asm
    // converts the generic addresses to the shared and global windows the instruction
    // takes (PTX ISA, cvta and cp.async).
    unsafe {
        if core::mem::size_of::<T>() == 8 {
            cp_async_asm!("ca", "16", dst, src);
        } else {
            cp_async_asm!("ca", "8", dst, src);
        }
    }
}

/// Starts an asynchronous copy of 16 bytes (4 f32 or 2 f64) from global to shared
/// memory (PTX `cp.async.cg.shared.global`, sm_80+: bypasses L1), with the same
/// completion rules as [`cp_async_pair`].
///
/// # Safety
/// As [`cp_async_pair`], for 16 bytes at addresses aligned to 16.
#[inline(always)]
pub unsafe fn cp_async_16<T: Copy>(dst: *mut T, src: *const T) {
    // SAFETY: as in `cp_async_pair` (addresses, alignment and exclusivity from the
    // caller; the asm converts the generic addresses).
    unsafe {
        cp_async_asm!("cg", "16", dst, src);
    }
}

/// Starts an asynchronous copy of one `T` (4 or 8 bytes) from global to shared memory
/// (PTX `cp.async.ca.shared.global`, sm_80+), with the same completion rules as
/// [`cp_async_pair`].
///
/// # Safety
/// As [`cp_async_pair`], for one element aligned to its size.
#[inline(always)]
pub unsafe fn cp_async_one<T: Copy>(dst: *mut T, src: *const T) {
    // SAFETY: as in `cp_async_pair` (addresses, alignment and exclusivity from the
    // caller; the asm converts the generic addresses).
    unsafe {
        if core::mem::size_of::<T>() == 8 {
            cp_async_asm!("ca", "8", dst, src);
        } else {
            cp_async_asm!("ca", "4", dst, src);
        }
    }
}

/// Asks for the 128-byte line at `p` to be brought into L2 (PTX `prefetch.global.L2`);
/// no effect on the program's results.
///
/// # Safety
/// `p` points into global memory the kernel may read.
#[inline(always)]
pub unsafe fn prefetch_l2<T>(p: *const T) {
    // SAFETY: a hint with no architectural effect; the address is the caller's.
    unsafe {
        asm!(
            "{{ .reg .u64 %ga; cvta.to.global.u64 %ga, {g}; prefetch.global.L2 [%ga]; }}",
            g = in(reg64) p,
            options(nostack, preserves_flags, readonly),
        )
    };
}

/// Closes this thread's group of [`cp_async_pair`] copies (PTX `cp.async.commit_group`).
///
/// # Safety
/// None beyond running on sm_80+ (the kernels target sm_80 and later).
#[inline(always)]
pub unsafe fn cp_async_commit() {
    // SAFETY: no operands; marks a group boundary of this thread's async copies.
    unsafe { asm!("cp.async.commit_group;", options(nostack, preserves_flags)) };
}

/// Waits until at most `N` of this thread's committed copy groups are still pending
/// (PTX `cp.async.wait_group N`).
///
/// # Safety
/// As [`cp_async_commit`].
#[inline(always)]
pub unsafe fn cp_async_wait<const N: u32>() {
    // SAFETY: waits on this thread's own copies; a memory clobber (no `nomem`) keeps
    // shared-memory reads after it.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack, preserves_flags)) };
}

/// Waits for all of this thread's async copies (PTX `cp.async.wait_all`).
///
/// # Safety
/// As [`cp_async_commit`].
#[inline(always)]
pub unsafe fn cp_async_wait_all() {
    // SAFETY: as `cp_async_wait`.
    unsafe { asm!("cp.async.wait_all;", options(nostack, preserves_flags)) };
}

/// `__syncwarp()` (PTX `bar.warp.sync 0xffffffff`): orders the shared-memory accesses
/// of the warp's lanes.
///
/// # Safety
/// All 32 lanes of the warp execute it together.
#[inline(always)]
pub unsafe fn sync_warp() {
    // SAFETY: full-mask warp barrier; the caller guarantees all lanes arrive.
    unsafe {
        asm!(
            "bar.warp.sync 0xffffffff;",
            options(nostack, preserves_flags)
        )
    };
}

/// Grid-wide barrier of a cooperative launch (every block resident at once): the
/// block's threads meet at `bar.sync`; thread 0 then adds 1 to `*counter` with a
/// release reduction at GPU scope (publishing the block's earlier global writes) and
/// spins with acquire loads until the counter reaches `target`; the block meets at
/// `bar.sync` once more ([`grid_arrive`] + [`grid_wait`]).
/// With the counter at `base` at launch, the g-th barrier (g = 0, 1, …) of a launch of
/// B blocks waits for `base + (g + 1)·B`. Data other blocks wrote before the barrier
/// must be read with [`ld_volatile`].
///
/// # Safety
/// Cooperative launch (all blocks co-resident, else this deadlocks); every thread of
/// every block calls it with the same `target` sequence; `counter` points at a
/// device-global `u32` that only these barriers touch during the launch.
#[inline(always)]
pub unsafe fn grid_sync(counter: *mut u32, target: u32) {
    // SAFETY: forwarded (caller's contract): arrive, then wait, block-uniformly.
    unsafe {
        grid_arrive(counter);
        grid_wait(counter, target);
    }
}

/// First half of a split [`grid_sync`]: the block's threads meet at `bar.sync`, then
/// thread 0 adds 1 to `*counter` (release, GPU scope). Work that other blocks do not wait for may
/// run between this and [`grid_wait`] (it overlaps the barrier's latency).
///
/// # Safety
/// As [`grid_sync`]; every `grid_arrive` is followed by a `grid_wait` before the next
/// arrival, with the same block-uniform control flow.
#[inline(always)]
pub unsafe fn grid_arrive(counter: *mut u32) {
    // SAFETY: block-uniform call (caller's contract).
    unsafe { sync_threads() };
    if thread_linear() == 0 {
        // SAFETY: `counter` is a valid global u32 (caller's contract). The reduction has
        // release semantics at GPU scope: with the `bar.sync` above it publishes every
        // write the block made before the barrier (PTX memory model: causality order is
        // transitive through the CTA barrier and the release).
        unsafe {
            asm!(
                "red.release.gpu.global.add.u32 [{p}], 1;",
                p = in(reg64) counter,
                options(nostack, preserves_flags),
            );
        }
    }
}

/// Second half of a split [`grid_sync`]: thread 0 spins with acquire loads (GPU scope)
/// until `*counter` reaches `target`; the block meets at `bar.sync`.
///
/// # Safety
/// As [`grid_sync`], after this block's [`grid_arrive`].
#[inline(always)]
pub unsafe fn grid_wait(counter: *mut u32, target: u32) {
    if thread_linear() == 0 {
        loop {
            let seen: u32;
            // SAFETY: `counter` is a valid global u32; an acquire load at GPU scope, so
            // the writes other blocks released before their arrival are visible to this
            // block after the `bar.sync` below.
            unsafe {
                asm!(
                    "ld.acquire.gpu.global.u32 {v}, [{p}];",
                    v = out(reg32) seen,
                    p = in(reg64) counter,
                    options(nostack, preserves_flags),
                );
            }
            if (seen.wrapping_sub(target) as i32) >= 0 {
                break;
            }
        }
    }
    // SAFETY: block-uniform call.
    unsafe { sync_threads() };
}

/// Acquire load (GPU scope) of a global `u32`: writes released before the value was
/// stored are visible to this thread afterwards.
///
/// # Safety
/// `p` points at a valid global `u32`.
#[inline(always)]
pub unsafe fn ld_acquire_u32(p: *const u32) -> u32 {
    let v: u32;
    // SAFETY: valid global u32 (caller's contract); a plain acquire load.
    unsafe {
        asm!(
            "ld.acquire.gpu.global.u32 {v}, [{p}];",
            v = out(reg32) v,
            p = in(reg64) p,
            options(nostack, preserves_flags),
        );
    }
    v
}

/// Adds `k` to `*counter` with a release reduction at GPU scope (no barrier): after a
/// CTA barrier it publishes the whole block's earlier writes to any thread that sees
/// the new count with [`ld_acquire_u32`].
///
/// # Safety
/// `counter` points at a valid global `u32`.
#[inline(always)]
pub unsafe fn red_release_add(counter: *mut u32, k: u32) {
    // SAFETY: valid global u32 (caller's contract).
    unsafe {
        asm!(
            "red.release.gpu.global.add.u32 [{p}], {k};",
            p = in(reg64) counter,
            k = in(reg32) k,
            options(nostack, preserves_flags),
        );
    }
}

/// Release store (GPU scope) of a global `u32`: every write this thread has observed
/// (its own and, through a preceding warp or block barrier, its warp's or block's) is
/// visible to a thread that acquires the value ([`ld_acquire_u32`]).
///
/// # Safety
/// `p` points at a valid global `u32`.
#[inline(always)]
pub unsafe fn st_release_u32(p: *mut u32, v: u32) {
    // SAFETY: valid global u32 (caller's contract).
    unsafe {
        asm!(
            "st.release.gpu.global.u32 [{p}], {v};",
            p = in(reg64) p,
            v = in(reg32) v,
            options(nostack, preserves_flags),
        )
    };
}

/// Aborts the kernel (PTX `trap`): the launch fails with an error on the host.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: `trap` has no preconditions; it ends the kernel with an error.
    unsafe { nvptx::trap() }
}

/// Start of the launch-sized dynamic shared memory, typed as `T`.
///
/// The pointer is valid for as many bytes as the host passed as `sharedMemBytes` at
/// launch (docs/kernels.md fixes that size per kernel); every call aliases the same
/// memory.
#[inline(always)]
pub fn shared<T>() -> *mut T {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
}

/// Reads `p[i]`.
///
/// # Safety
/// `p.add(i)` must be in bounds of one allocation, aligned, and not concurrently written.
#[inline(always)]
pub unsafe fn ld<T: Copy>(p: *const T, i: usize) -> T {
    // SAFETY: the caller guarantees `p.add(i)` is an in-bounds, aligned, race-free read.
    unsafe { p.add(i).read() }
}

/// Writes `p[i] = v`.
///
/// # Safety
/// `p.add(i)` must be in bounds of one allocation, aligned, and not concurrently
/// accessed by another thread.
#[inline(always)]
pub unsafe fn st<T: Copy>(p: *mut T, i: usize, v: T) {
    // SAFETY: the caller guarantees `p.add(i)` is an in-bounds, aligned, exclusive write.
    unsafe { p.add(i).write(v) }
}

/// `__shfl_down_sync(0xffffffff, v, delta)` on 32 bits.
///
/// # Safety
/// All 32 lanes of the warp must execute this call together (full mask), i.e. the warp
/// is complete (block size a multiple of 32) and not diverged here.
#[inline(always)]
pub unsafe fn shfl_down_b32(v: u32, delta: u32) -> u32 {
    let r: u32;
    // SAFETY: `shfl.sync.down.b32` with member mask 0xffffffff is valid when all lanes
    // of the warp execute it convergently, which the caller guarantees; c = 0x1f is the
    // clamp value for a full-warp "down" shuffle (PTX ISA, shfl.sync).
    unsafe {
        asm!(
            "shfl.sync.down.b32 {r}, {v}, {d}, 0x1f, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            d = in(reg32) delta,
            options(nomem, nostack, preserves_flags),
        );
    }
    r
}

/// `__shfl_xor_sync(0xffffffff, v, mask)` on 32 bits (butterfly exchange).
///
/// # Safety
/// As [`shfl_down_b32`]: the full warp executes the call convergently.
#[inline(always)]
pub unsafe fn shfl_xor_b32(v: u32, mask: u32) -> u32 {
    let r: u32;
    // SAFETY: `shfl.sync.bfly.b32` with member mask 0xffffffff and c = 0x1f is valid
    // when all lanes execute it convergently, which the caller guarantees.
    unsafe {
        asm!(
            "shfl.sync.bfly.b32 {r}, {v}, {d}, 0x1f, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            d = in(reg32) mask,
            options(nomem, nostack, preserves_flags),
        );
    }
    r
}

/// `__shfl_sync(0xffffffff, v, lane)` on 32 bits: lane `lane`'s `v` in every lane.
///
/// # Safety
/// As [`shfl_down_b32`]: the full warp executes the call convergently.
#[inline(always)]
pub unsafe fn shfl_idx_b32(v: u32, lane: u32) -> u32 {
    let r: u32;
    // SAFETY: `shfl.sync.idx.b32` with member mask 0xffffffff and c = 0x1f is valid
    // when all lanes execute it convergently, which the caller guarantees.
    unsafe {
        asm!(
            "shfl.sync.idx.b32 {r}, {v}, {d}, 0x1f, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            d = in(reg32) lane,
            options(nomem, nostack, preserves_flags),
        );
    }
    r
}

/// `__reduce_max_sync(0xffffffff, v)` (PTX `redux.sync.max.u32`, sm_80+): the largest
/// `v` of the warp, in every lane, in one instruction.
///
/// # Safety
/// The full warp executes the call convergently.
#[inline(always)]
pub unsafe fn warp_allmax_u32(v: u32) -> u32 {
    let r: u32;
    // SAFETY: `redux.sync` with member mask 0xffffffff is valid when all lanes execute
    // it convergently, which the caller guarantees; the kernels target sm_80.
    unsafe {
        asm!(
            "redux.sync.max.u32 {r}, {v}, 0xffffffff;",
            r = out(reg32) r,
            v = in(reg32) v,
            options(nomem, nostack, preserves_flags),
        );
    }
    r
}

/// Floating-point element type of the kernels: f32 or f64 (style.md §2.3: kernels are
/// generic device fns stamped per dtype). Only what the kernels need.
pub trait Float: Copy + PartialEq + PartialOrd {
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// 1/2.
    const HALF: Self;
    /// The smallest positive normal number.
    const MIN_POSITIVE: Self;
    /// +∞.
    const INFINITY: Self;
    /// a + b.
    fn add(self, o: Self) -> Self;
    /// a − b.
    fn sub(self, o: Self) -> Self;
    /// a · b.
    fn mul(self, o: Self) -> Self;
    /// a / b.
    fn div(self, o: Self) -> Self;
    /// −a.
    fn neg(self) -> Self;
    /// |a|.
    fn abs(self) -> Self;
    /// IEEE maxNum (a NaN operand is ignored), as `f64::max`.
    fn max(self, o: Self) -> Self;
    /// √a (correctly rounded).
    fn sqrt(self) -> Self;
    /// self·a + b with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// |self| with the sign of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// true unless ±∞ or NaN.
    fn is_finite(self) -> bool;
    /// Warp shuffle down by `delta` lanes (see [`shfl_down_b32`]).
    ///
    /// # Safety
    /// As [`shfl_down_b32`]: the full warp executes the call convergently.
    unsafe fn shfl_down(self, delta: u32) -> Self;
    /// Warp butterfly shuffle with lane mask `mask` (see [`shfl_xor_b32`]).
    ///
    /// # Safety
    /// As [`shfl_xor_b32`]: the full warp executes the call convergently.
    unsafe fn shfl_xor(self, mask: u32) -> Self;
    /// Lane `lane`'s value in every lane (see [`shfl_idx_b32`]).
    ///
    /// # Safety
    /// As [`shfl_idx_b32`]: the full warp executes the call convergently.
    unsafe fn shfl_idx(self, lane: u32) -> Self;
    /// Reads `*p` from global memory with `ld.global.cg` (L2 only, never a stale L1
    /// line): for data other blocks wrote before a [`grid_sync`]. The compiler may
    /// schedule these loads freely between two barriers (they are pure reads).
    ///
    /// # Safety
    /// `p` is an aligned pointer into global memory that nobody writes between the
    /// barriers around the read.
    unsafe fn ld_cg(p: *const Self) -> Self;

    /// Approximate 1/√a from the hardware (`rsqrt.approx.ftz`: subnormals flushed; in
    /// f64 the hardware's 20-bit estimate alone, relative error about 2⁻²⁰), for normal
    /// a far from the range's ends; callers refine it with Newton steps
    /// ([`Float::RSQRT_NEWTON`]).
    fn rsqrt_approx(self) -> Self;
    /// Approximate 1/a from the hardware (`rcp.approx.ftz`; subnormals flushed), for
    /// normal a far from the range's ends; callers refine it with
    /// [`Float::RSQRT_NEWTON`] Newton steps, as for [`Float::rsqrt_approx`].
    fn rcp_approx(self) -> Self;
    /// Newton steps that take [`Float::rsqrt_approx`] to working precision (f32: 1,
    /// f64: 2).
    const RSQRT_NEWTON: usize;
    /// [ROT_LO, ROT_HI]: the magnitudes h = max(|f|, |g|) for which f² + g² is a finite
    /// normal number with room to spare (f32: 2^±60, f64: 2^±480), so the fast Givens
    /// rotation needs no scaling.
    const ROT_LO: Self;
    /// See [`Float::ROT_LO`].
    const ROT_HI: Self;

    /// √(a² + b²) without undue overflow or underflow: with h = max(|a|, |b|),
    /// l = min(|a|, |b|), r = l/h, returns h·√(1 + r²) (fused). h = 0 gives 0, an
    /// infinite operand gives +∞, otherwise a NaN operand gives NaN.
    #[inline(always)]
    fn hypot(self, o: Self) -> Self {
        let (a, b) = (self.abs(), o.abs());
        if a == Self::INFINITY || b == Self::INFINITY {
            // ∞ wins over NaN (IEEE 754 hypot).
            return Self::INFINITY;
        }
        if !a.is_finite() || !b.is_finite() {
            return a.add(b); // NaN
        }
        let (h, l) = if a >= b { (a, b) } else { (b, a) };
        if h == Self::ZERO {
            return Self::ZERO;
        }
        let r = l.div(h);
        h.mul(r.mul_add(r, Self::ONE).sqrt())
    }
}

macro_rules! impl_float {
    ($t:ident, $bits:ty) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const HALF: Self = 0.5;
            const MIN_POSITIVE: Self = $t::MIN_POSITIVE;
            const INFINITY: Self = $t::INFINITY;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
            #[inline(always)]
            fn abs(self) -> Self {
                $t::abs(self)
            }
            #[inline(always)]
            fn max(self, o: Self) -> Self {
                $t::max(self, o)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                core::$t::math::sqrt(self)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                core::$t::math::mul_add(self, a, b)
            }
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                $t::copysign(self, sign)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                $t::is_finite(self)
            }
            #[inline(always)]
            unsafe fn shfl_down(self, delta: u32) -> Self {
                impl_float!(@shfl $t, self, delta)
            }
            #[inline(always)]
            unsafe fn shfl_xor(self, mask: u32) -> Self {
                impl_float!(@shflx $t, self, mask)
            }
            #[inline(always)]
            unsafe fn shfl_idx(self, lane: u32) -> Self {
                impl_float!(@shfli $t, self, lane)
            }
            #[inline(always)]
            unsafe fn ld_cg(p: *const Self) -> Self {
                impl_float!(@ldcg $t, p)
            }
            #[inline(always)]
            fn rsqrt_approx(self) -> Self {
                impl_float!(@rsqrt $t, self)
            }
            #[inline(always)]
            fn rcp_approx(self) -> Self {
                impl_float!(@rcp $t, self)
            }
            const RSQRT_NEWTON: usize = impl_float!(@newton $t);
            const ROT_LO: Self = impl_float!(@rotlo $t);
            const ROT_HI: Self = impl_float!(@rothi $t);
        }
    };
    (@newton f32) => { 1 };
    (@newton f64) => { 2 };
    (@rotlo f32) => { f32::from_bits((127 - 60) << 23) }; // 2^-60
    (@rothi f32) => { f32::from_bits((127 + 60) << 23) }; // 2^60
    (@rotlo f64) => { f64::from_bits((1023 - 480) << 52) }; // 2^-480
    (@rothi f64) => { f64::from_bits((1023 + 480) << 52) }; // 2^480
    (@rsqrt f32, $v:expr) => {{
        let r: f32;
        // SAFETY: `rsqrt.approx.ftz.f32` reads one register and writes one; no memory,
        // no side effects (PTX ISA, rsqrt).
        unsafe {
            asm!(
                "rsqrt.approx.ftz.f32 {r}, {v};",
                r = out(reg32) r,
                v = in(reg32) $v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    }};
    (@rsqrt f64, $v:expr) => {{
        let r: f64;
        // SAFETY: `rsqrt.approx.ftz.f64` reads one register and writes one; no memory,
        // no side effects (PTX ISA, rsqrt).
        unsafe {
            asm!(
                "rsqrt.approx.ftz.f64 {r}, {v};",
                r = out(reg64) r,
                v = in(reg64) $v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    }};
    (@rcp f32, $v:expr) => {{
        let r: f32;
        // SAFETY: `rcp.approx.ftz.f32` reads one register and writes one; no memory, no
        // side effects (PTX ISA, rcp).
        unsafe {
            asm!(
                "rcp.approx.ftz.f32 {r}, {v};",
                r = out(reg32) r,
                v = in(reg32) $v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    }};
    (@rcp f64, $v:expr) => {{
        let r: f64;
        // SAFETY: `rcp.approx.ftz.f64` reads one register and writes one; no memory, no
        // side effects (PTX ISA, rcp).
        unsafe {
            asm!(
                "rcp.approx.ftz.f64 {r}, {v};",
                r = out(reg64) r,
                v = in(reg64) $v,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        r
    }};
    (@shflx f32, $v:expr, $d:expr) => {{
        // SAFETY: forwarded from the caller of `shfl_xor` (full, convergent warp).
        f32::from_bits(unsafe { shfl_xor_b32($v.to_bits(), $d) })
    }};
    (@shflx f64, $v:expr, $d:expr) => {{
        let bits = $v.to_bits();
        // SAFETY: forwarded from the caller of `shfl_xor` (full, convergent warp).
        let (lo, hi) = unsafe {
            (
                shfl_xor_b32(bits as u32, $d),
                shfl_xor_b32((bits >> 32) as u32, $d),
            )
        };
        f64::from_bits(((hi as u64) << 32) | lo as u64)
    }};
    (@shfli f32, $v:expr, $d:expr) => {{
        // SAFETY: forwarded from the caller of `shfl_idx` (full, convergent warp).
        f32::from_bits(unsafe { shfl_idx_b32($v.to_bits(), $d) })
    }};
    (@shfli f64, $v:expr, $d:expr) => {{
        let bits = $v.to_bits();
        // SAFETY: forwarded from the caller of `shfl_idx` (full, convergent warp).
        let (lo, hi) = unsafe {
            (
                shfl_idx_b32(bits as u32, $d),
                shfl_idx_b32((bits >> 32) as u32, $d),
            )
        };
        f64::from_bits(((hi as u64) << 32) | lo as u64)
    }};
    (@ldcg f32, $p:expr) => {{
        let r: u32;
        // SAFETY: forwarded from the caller of `ld_cg` (aligned global pointer, no
        // concurrent writer); a pure read.
        unsafe {
            asm!(
                "ld.global.cg.b32 {r}, [{p}];",
                r = out(reg32) r,
                p = in(reg64) $p,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
        f32::from_bits(r)
    }};
    (@ldcg f64, $p:expr) => {{
        let r: u64;
        // SAFETY: as for f32.
        unsafe {
            asm!(
                "ld.global.cg.b64 {r}, [{p}];",
                r = out(reg64) r,
                p = in(reg64) $p,
                options(pure, readonly, nostack, preserves_flags),
            );
        }
        f64::from_bits(r)
    }};
    (@shfl f32, $v:expr, $d:expr) => {{
        // SAFETY: forwarded from the caller of `shfl_down` (full, convergent warp).
        f32::from_bits(unsafe { shfl_down_b32($v.to_bits(), $d) })
    }};
    (@shfl f64, $v:expr, $d:expr) => {{
        let bits = $v.to_bits();
        // SAFETY: forwarded from the caller of `shfl_down` (full, convergent warp); the
        // two halves of the f64 travel as two 32-bit shuffles.
        let (lo, hi) = unsafe {
            (
                shfl_down_b32(bits as u32, $d),
                shfl_down_b32((bits >> 32) as u32, $d),
            )
        };
        f64::from_bits(((hi as u64) << 32) | lo as u64)
    }};
}

impl_float!(f32, u32);
impl_float!(f64, u64);

/// Barrier of every thread of every block of the thread-block cluster (PTX
/// `barrier.cluster.arrive.release` + `barrier.cluster.wait.acquire`, sm_90): the
/// shared-memory writes of any block before it are visible to every block of the
/// cluster after it.
///
/// # Safety
/// Only in the sm_90 build, in a kernel launched with a cluster dimension; every
/// non-exited thread of every block of the cluster calls it, warp-uniformly
/// (`.aligned`), the same number of times.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn cluster_sync() {
    // SAFETY: the caller guarantees a cluster launch and a cluster-uniform call; no
    // `nomem`, so the compiler keeps memory accesses on their side of the barrier.
    unsafe {
        asm!(
            "barrier.cluster.arrive.release.aligned;",
            "barrier.cluster.wait.acquire.aligned;",
            options(nostack, preserves_flags),
        )
    };
}

/// The 32-bit shared-window address of the generic pointer `p` into this block's
/// shared memory (PTX `cvta.to.shared`).
///
/// # Safety
/// `p` points into this block's shared memory.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn shared_addr<T>(p: *const T) -> u32 {
    let r: u32;
    // SAFETY: an address conversion only (the caller's contract makes it meaningful).
    unsafe {
        asm!(
            "{{ .reg .u64 %sa; cvta.to.shared.u64 %sa, {p}; cvt.u32.u64 {r}, %sa; }}",
            r = out(reg32) r,
            p = in(reg64) p,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    r
}

/// The shared::cluster address of the location at shared address `addr` (from
/// [`shared_addr`]) in block `rank` of this cluster (PTX `mapa.shared::cluster`).
///
/// # Safety
/// Only in the sm_90 build, in a cluster launch; `rank` is below the cluster's block
/// count.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn cluster_map_addr(addr: u32, rank: usize) -> u32 {
    let r: u32;
    // SAFETY: `mapa` only computes an address (the caller's contract makes it valid).
    unsafe {
        asm!(
            "mapa.shared::cluster.u32 {r}, {a}, {k};",
            r = out(reg32) r,
            a = in(reg32) addr,
            k = in(reg32) rank as u32,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    r
}

/// Initialises the mbarrier at `bar` (this block's shared memory) for `count`
/// arrivals a phase (PTX `mbarrier.init`).
///
/// # Safety
/// Only in the sm_90 build; `bar` is an 8-byte-aligned shared-memory word that no
/// other thread uses until a barrier orders this initialisation before its use (and
/// [`fence_mbarrier_init`] before remote use).
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn mbarrier_init(bar: *mut u64, count: u32) {
    // SAFETY: the caller's contract; `shared_addr` of a shared pointer.
    unsafe {
        let a = shared_addr(bar);
        asm!(
            "mbarrier.init.shared::cta.b64 [{a}], {c};",
            a = in(reg32) a,
            c = in(reg32) count,
            options(nostack, preserves_flags),
        )
    };
}

/// Makes this thread's earlier mbarrier initialisations visible to the cluster
/// (PTX `fence.mbarrier_init.release.cluster`; a cluster barrier must follow before
/// other blocks use them).
///
/// # Safety
/// Only in the sm_90 build, in a cluster launch.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn fence_mbarrier_init() {
    // SAFETY: a fence; no preconditions beyond sm_90.
    unsafe {
        asm!(
            "fence.mbarrier_init.release.cluster;",
            options(nostack, preserves_flags)
        )
    };
}

/// Arrives once at the local mbarrier `bar` and adds `bytes` to the transaction count
/// its current phase waits for (PTX `mbarrier.arrive.expect_tx`, release at CTA scope).
///
/// # Safety
/// Only in the sm_90 build; `bar` initialised by [`mbarrier_init`] and ordered before
/// this call.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn mbarrier_arrive_expect_tx(bar: *mut u64, bytes: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        let a = shared_addr(bar);
        asm!(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {b};",
            a = in(reg32) a,
            b = in(reg32) bytes,
            options(nostack, preserves_flags),
        )
    };
}

/// Waits until the phase of parity `parity` of the local mbarrier `bar` has completed
/// (PTX `mbarrier.try_wait.parity`, acquire at CTA scope): the data that `st.async`
/// operations counted by that phase wrote into this block are visible afterwards.
///
/// # Safety
/// Only in the sm_90 build; `bar` initialised and ordered before this call; the phase
/// completes eventually (else this spins forever).
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn mbarrier_wait_parity(bar: *mut u64, parity: u32) {
    // SAFETY: the caller's contract.
    let a = unsafe { shared_addr(bar) };
    loop {
        let done: u32;
        // SAFETY: as above; no `nomem`: reads after the wait stay after it.
        unsafe {
            asm!(
                "{{ .reg .pred %pw; mbarrier.try_wait.parity.shared::cta.b64 %pw, [{a}], {p}; selp.u32 {d}, 1, 0, %pw; }}",
                a = in(reg32) a,
                p = in(reg32) parity,
                d = out(reg32) done,
                options(nostack, preserves_flags),
            )
        };
        if done != 0 {
            break;
        }
    }
}

/// Writes `v` (4 or 8 bytes) to the shared::cluster address `dst` of another (or this)
/// block and counts its bytes on the mbarrier at shared::cluster address `bar` of that
/// block (PTX `st.async … mbarrier::complete_tx::bytes`, sm_90).
///
/// # Safety
/// Only in the sm_90 build, in a cluster launch; `dst` (aligned to the size of `T`) and
/// `bar` are [`cluster_map_addr`] addresses in the same block, which waits for the
/// bytes on that mbarrier before it exits; nothing else accesses `dst` until then.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn st_async<T: Copy>(dst: u32, v: T, bar: u32) {
    if core::mem::size_of::<T>() == 8 {
        // SAFETY: T is 8 bytes (checked), so this reads exactly its bits.
        let bits: u64 = unsafe { core::mem::transmute_copy(&v) };
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [{d}], {v}, [{b}];",
                d = in(reg32) dst,
                v = in(reg64) bits,
                b = in(reg32) bar,
                options(nostack, preserves_flags),
            )
        };
    } else {
        // SAFETY: T is 4 bytes here (the only other size the kernels use).
        let bits: u32 = unsafe { core::mem::transmute_copy(&v) };
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [{d}], {v}, [{b}];",
                d = in(reg32) dst,
                v = in(reg32) bits,
                b = in(reg32) bar,
                options(nostack, preserves_flags),
            )
        };
    }
}

/// [`st_async`] of two 64-bit words (16 bytes, `dst` aligned to 16).
///
/// # Safety
/// As [`st_async`].
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn st_async_v2_b64(dst: u32, lo: u64, hi: u64, bar: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b64 [{d}], {{{x}, {y}}}, [{b}];",
            d = in(reg32) dst,
            x = in(reg64) lo,
            y = in(reg64) hi,
            b = in(reg32) bar,
            options(nostack, preserves_flags),
        )
    };
}
