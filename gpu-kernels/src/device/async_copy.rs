//! Asynchronous global-to-shared copies (`cp.async`, sm_80+) and the L2 prefetch.

use core::arch::asm;

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
