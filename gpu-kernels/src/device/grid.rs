//! The grid-wide barrier of a cooperative launch and the GPU-scope acquire/release
//! operations that publish data between blocks.

use super::thread::{sync_threads, thread_linear};
use core::arch::asm;

/// Grid-wide barrier of a cooperative launch (every block resident at once): the
/// block's threads meet at `bar.sync`; thread 0 then adds 1 to `*counter` with a
/// release reduction at GPU scope (publishing the block's earlier global writes) and
/// spins with acquire loads until the counter reaches `target`; the block meets at
/// `bar.sync` once more ([`grid_arrive`] + [`grid_wait`]).
/// With the counter at `base` at launch, the g-th barrier (g = 0, 1, …) of a launch of
/// B blocks waits for `base + (g + 1)·B`. Data other blocks wrote before the barrier
/// must be read with [`ld_volatile`](super::ld_volatile).
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
