//! The pivot search's reductions: (value, index) argmax over a warp and over a block
//! (largest value, smallest index on ties).

use crate::device::{self, Float, WARP};

/// Replaces (v, i) by (ov, oi) when ov is larger, or equal with a smaller index.
#[inline(always)]
pub(crate) fn better<T: Float>(v: T, i: u32, ov: T, oi: u32) -> bool {
    ov > v || (ov == v && oi < i)
}

/// Warp argmax: the (value, index) pair with the largest value, smallest index on
/// ties, lands in lane 0.
///
/// # Safety
/// The whole warp calls convergently (see `device::shfl_down_b32`).
#[inline(always)]
pub(crate) unsafe fn warp_argmax<T: Float>(mut v: T, mut i: u32) -> (T, u32) {
    let mut d = (WARP / 2) as u32;
    while d > 0 {
        // SAFETY: forwarded: the full warp is convergent here.
        let (ov, oi) = unsafe { (v.shfl_down(d), device::shfl_down_b32(i, d)) };
        if better(v, i, ov, oi) {
            v = ov;
            i = oi;
        }
        d /= 2;
    }
    (v, i)
}

/// The first half of [`block_argmax`]: warp partials into `sval[0..32]`/`sidx[0..32]`, a
/// block barrier, then warp 0 reduces them: the block's (largest v, smallest i on ties)
/// lands in lane 0 of warp 0 (other threads get meaningless values).
///
/// # Safety
/// Called by every thread of the block (block-uniform), block a multiple of 32 (≤ 1024);
/// no thread still reads the slots from an earlier call.
#[inline(always)]
pub(crate) unsafe fn block_argmax_to_warp0<T: Float>(
    v: T,
    i: u32,
    sval: *mut T,
    sidx: *mut u32,
) -> (T, u32) {
    let tid = device::thread_linear();
    let lane = tid % WARP;
    let warp = tid / WARP;
    let nwarps = device::block_threads().div_ceil(WARP);
    // SAFETY: block-uniform call (contract); full warps.
    let (wv, wi) = unsafe { warp_argmax(v, i) };
    if lane == 0 {
        // SAFETY: one writer per slot < 32.
        unsafe {
            device::st(sval, warp, wv);
            device::st(sidx, warp, wi);
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let (mut bv, mut bi) = (T::ZERO.sub(T::ONE), u32::MAX);
    if warp == 0 {
        if lane < nwarps {
            // SAFETY: slots < nwarps written before the barrier.
            unsafe {
                bv = device::ld(sval as *const T, lane);
                bi = device::ld(sidx as *const u32, lane);
            }
        }
        // SAFETY: warp 0 complete and convergent.
        (bv, bi) = unsafe { warp_argmax(bv, bi) };
    }
    (bv, bi)
}

/// Block argmax of (v, i) (largest v, smallest i on ties); the result is returned to
/// every thread of the block. Uses `sval[0..32]` and `sidx[0..33]` of shared memory.
///
/// # Safety
/// Called by every thread of the block (block-uniform), block a multiple of 32 (≤ 1024).
#[inline(always)]
pub(super) unsafe fn block_argmax<T: Float>(
    v: T,
    i: u32,
    sval: *mut T,
    sidx: *mut u32,
) -> (T, u32) {
    // SAFETY: forwarded (block-uniform call, full warps).
    let (rv, ri) = unsafe { block_argmax_to_warp0(v, i, sval, sidx) };
    // lane 0 of warp 0
    if device::thread_linear() == 0 {
        // SAFETY: slot 32 of sidx is free; slot 0 of sval was read only by lanes of
        // warp 0, before the shuffles of warp_argmax synchronised them.
        unsafe {
            device::st(sval, 0, rv);
            device::st(sidx, 32, ri);
        }
    }
    // SAFETY: block-uniform barrier: the broadcast slots are visible.
    unsafe { device::sync_threads() };
    // SAFETY: written before the barrier.
    let r = unsafe {
        (
            device::ld(sval as *const T, 0),
            device::ld(sidx as *const u32, 32),
        )
    };
    // SAFETY: block-uniform barrier: nobody overwrites the slots before all have read.
    unsafe { device::sync_threads() };
    r
}
