//! Compact WY ("VT") block reflectors (docs/algorithms.md#blocked-reflectors): LAPACK's
//! sign τ ≥ 0, T as LAPACK `xLARFT` forward/columnwise.

use crate::device::{self, Float, WARP};
use crate::reduce;

/// `wy_set_tau` (the published `setTau`): t[i + i·ldt] = tau[i] for i < k. Grid ⌈k/128⌉, block 128.
///
/// # Safety
/// Launch shape as documented; `tau` readable for k; `t` writable k×k with ld ldt ≥ k.
#[inline(always)]
pub unsafe fn set_tau<T: Float>(tau: *const T, t: *mut T, k: usize, ldt: usize) {
    let i = device::global_x();
    if i >= k {
        return;
    }
    // SAFETY: i < k: tau[i] readable, t[i + i·ldt] writable, one writer per i.
    unsafe { device::st(t, i + i * ldt, device::ld(tau, i)) };
}

/// `wy_build_t`: T (k×k, ld ldt) of H₀H₁⋯H_{k−1} = I − V T Vᵀ, LAPACK `larft` forward,
/// columnwise. V is rows×k as stored (ld ldv; the caller stores the unit diagonal and the
/// zeros above it). For j = 0..k: y = V(:, 0:j)ᵀ V(:, j) (one warp per dot, lanes over
/// rows, coalesced), T(0:j, j) = −τ_j · T(0:j, 0:j) · y, T(j, j) = τ_j, T(i, j) = 0 for
/// i > j. Grid 1, block 256, dynamic shared memory ≥ k·size_of::<T>() (the contract's
/// (256 + k)·8 bytes covers it).
///
/// # Safety
/// Launch shape as documented (block size a multiple of 32); `v` readable rows×k with
/// ld ldv ≥ rows; `tau` readable for k; `t` writable k×k with ld ldt ≥ k, not
/// overlapping `v` or `tau`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn build_t<T: Float>(
    v: *const T,
    ldv: usize,
    rows: usize,
    k: usize,
    tau: *const T,
    t: *mut T,
    ldt: usize,
) {
    let y = device::shared::<T>();
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let (lane, warp, nwarps) = (tid % WARP, tid / WARP, nt / WARP);
    for j in 0..k {
        // Phase 1: y[i] = V(:, i)·V(:, j) for i < j, warp-per-dot.
        let mut i = warp;
        while i < j {
            let mut acc = T::ZERO;
            let mut r = lane;
            while r < rows {
                // SAFETY: r < rows ≤ ldv, i < j < k: in bounds of v.
                let (a, b) = unsafe { (device::ld(v, r + i * ldv), device::ld(v, r + j * ldv)) };
                acc = a.mul_add(b, acc);
                r += WARP;
            }
            // SAFETY: the loop bound `i < j` is warp-uniform, so the whole warp is here.
            let s = unsafe { reduce::warp_sum(acc) };
            if lane == 0 {
                // SAFETY: i < k entries of shared memory; one writer per entry.
                unsafe { device::st(y, i, s) };
            }
            i += nwarps;
        }
        // SAFETY: every thread of the block reaches this barrier (j is uniform).
        unsafe { device::sync_threads() };
        // Phase 2: thread i owns row i of T; it only reads entries of row i that it
        // wrote itself in earlier iterations.
        // SAFETY: j < k: tau[j] readable.
        let tj = unsafe { device::ld(tau, j) };
        let mut i = tid;
        while i < k {
            let val = if i < j {
                let mut acc = T::ZERO;
                for l in i..j {
                    // SAFETY: T(i, l), l < j, written by this thread; y[l] written
                    // before the barrier.
                    let (til, yl) =
                        unsafe { (device::ld(t as *const T, i + l * ldt), device::ld(y, l)) };
                    acc = til.mul_add(yl, acc);
                }
                tj.neg().mul(acc)
            } else if i == j {
                tj
            } else {
                T::ZERO
            };
            // SAFETY: i, j < k ≤ ldt: in bounds; row i has one writer (this thread).
            unsafe { device::st(t, i + j * ldt, val) };
            i += nt;
        }
        // SAFETY: every thread reaches this barrier; it keeps the next iteration's
        // writes of y from overtaking this iteration's reads.
        unsafe { device::sync_threads() };
    }
}
