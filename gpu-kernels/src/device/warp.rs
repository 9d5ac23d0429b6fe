//! Warp shuffles and warp-wide votes and reductions.

use core::arch::asm;

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

/// Bits of the lanes whose `pred` is true (`vote.sync.ballot.b32`, full warp).
///
/// # Safety
/// All 32 lanes of the warp execute it together.
#[inline(always)]
pub unsafe fn ballot(pred: bool) -> u32 {
    let m: u32;
    // SAFETY: full-mask vote; the caller guarantees a convergent warp.
    unsafe {
        asm!(
            "{{ .reg .pred p; setp.ne.u32 p, {x}, 0; vote.sync.ballot.b32 {m}, p, 0xffffffff; }}",
            x = in(reg32) pred as u32,
            m = out(reg32) m,
            options(nostack, preserves_flags),
        )
    };
    m
}
