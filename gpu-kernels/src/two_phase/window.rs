//! Windows of a chain list applied by GEMM: the gather of every window's strip list and
//! the pipelined apply of each window to its identity block.

use super::NONE;
use super::apply_pipe::pipe_vec;
use super::chains::chain_base;
use crate::device::{self, Float};

/// `two_phase_window_gather`: every window of a chain list as a stack of strip lists,
/// and the identities they will act on (the host turns each window's rotations into a
/// dense block Z_k and applies it by GEMM). Window k (blockIdx.y) is planes' columns [l_k, l_k + h_w + p), l_k = l0 −
/// k·h_w, of a list of p chains (chain c with planes r = hi_c down to c + 1, hi_c = hi0 +
/// inc·c, entries at base_c + (hi_c − r), base_c = c·hi0 − (1 − inc)·c(c−1)/2: the step
/// kernels' order). Entry j of window k's chain c (at dst_rot[k·p·h_w + c·h_w + j]) is
/// local plane r′ = h_w + c − j, global r = l_k + r′: chain c's rotation at r when
/// c + 1 ≤ r ≤ hi_c, else the identity (1, 0); its plane r′ − 1 is implied by the strip
/// schedule (s0 = h_w, s1 = p). Threads e < w of window k also set the diagonal of its
/// w×w block z_k = z[k·w·w ..] (ld w, w = h_w + p), which the caller zeroed.
///
/// # Safety
/// Grid (gx, windows) with gx·block ≥ p·h_w threads and p·h_w ≥ 1; `src_rot` holds every
/// chain's entries (base_p pairs); `dst_rot` 2·p·h_w·windows and `z` w²·windows elements
/// writable, not overlapping each other or the source.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn window_gather<T: Float>(
    src_rot: *const T,
    dst_rot: *mut T,
    z: *mut T,
    p: usize,
    hw: usize,
    hi0: usize,
    inc: usize,
    l0: isize,
) {
    let k = device::block_y();
    let e = device::global_x();
    let n = p * hw;
    let w = hw + p;
    let mut i = e;
    while i < w {
        // SAFETY: i < w: the diagonal of window k's block (contract).
        unsafe { device::st(z, k * w * w + i * (w + 1), T::ONE) };
        i += n;
    }
    if e >= n {
        return;
    }
    let (c, j) = (e / hw, e % hw);
    let local = hw + c - j;
    let r = l0 - (k * hw) as isize + local as isize;
    let hi_c = hi0 + inc * c;
    let (cs, sn) = if r >= (c + 1) as isize && r <= hi_c as isize {
        let idx = chain_base(c, hi0, inc) + (hi_c - r as usize);
        // SAFETY: idx < base_{c+1} ≤ base_p: chain c's entry at plane r (contract).
        unsafe {
            (
                device::ld(src_rot, 2 * idx),
                device::ld(src_rot, 2 * idx + 1),
            )
        }
    } else {
        (T::ONE, T::ZERO)
    };
    let d = k * n + e;
    // SAFETY: d < windows·p·h_w: window k's entry e (contract).
    unsafe {
        device::st(dst_rot, 2 * d, cs);
        device::st(dst_rot, 2 * d + 1, sn);
    }
}

/// `two_phase_window_pipe`: [`apply_pipe`](super::apply_pipe::apply_pipe)'s pipelined strip apply (s0 = h_w, s1 = p)
/// of window k's list (blockIdx.y = k; `rot` + 2·k·p·h_w, as [`window_gather`] lays them
/// out) to the rows of its w×w block z_k (ld w, at z + k·w·w), w = h_w + p: every window
/// in one launch, Z_k = I·G_kᵀ.
///
/// # Safety
/// Grid (⌈w/32⌉, windows), block 32·nw (nw ≤ [`PIPE_MAX_WARPS`](super::apply_pipe::PIPE_MAX_WARPS)) with [`apply_pipe`](super::apply_pipe::apply_pipe)'s
/// dynamic shared memory; `rot` holds windows·p·h_w pairs (16-byte aligned base) and `z`
/// windows·w² elements, owned by this launch.
#[inline(always)]
pub unsafe fn window_pipe<T: Float>(rot: *const T, hw: usize, p: usize, z: *mut T) {
    let k = device::block_y();
    let w = hw + p;
    let v0 = device::block_x() * 32;
    // block-uniform exits only: the warps of a block meet at barriers
    if v0 >= w || hw == 0 || p == 0 {
        return;
    }
    let rot_k = rot.wrapping_add(2 * k * p * hw);
    let z_k = z.wrapping_add(k * w * w);
    // SAFETY: window k's list is a whole strip list of p chains of h_w (contract), its
    // base stays 16-byte aligned (2·k·p·h_w elements: a multiple of two); row t < w of
    // z_k (element i at t + i·w, i < w) belongs to lane t − v0 of every warp of this
    // block; not banded.
    unsafe { pipe_vec(rot_k, true, hw, p, z_k, w, 1, w, NONE, v0) };
}
