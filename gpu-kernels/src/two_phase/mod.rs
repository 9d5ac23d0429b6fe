//! Two-phase Givens on the device (the recommended design of
//! docs/algorithms.md#givens-rotations, used by the strip of
//! docs/algorithms.md#column-insertion, the block of docs/algorithms.md#row-deletion and
//! the two stages of docs/algorithms.md#rank-one-update): a single-block *generate* kernel runs the wavefront over the small
//! driver block (strip, block or rank-one case) with `__syncthreads` between steps and
//! records every rotation (c, s, plane) in the sequential order of the CPU algorithm;
//! one *apply* launch then streams the whole list through up to three targets (Q, d, R),
//! one thread per independent vector, keeping the value two consecutive rotations share in
//! a register. O(1) launches per Givens stage instead of O(steps). Rotation convention as
//! `cpu::givens::givens` (r ≥ 0, safe at (0, 0), hypot); zeroed entries are exact 0.

use crate::device::{self, Float};
use crate::fused_panel::Pow2;

/// Marks "no value held in a register" in [`apply_one`](apply::apply_one).
const NONE: usize = usize::MAX;

/// (c, s, ρ) with the convention of `cpu::givens::givens`: g = 0 gives (±1, 0, |f|)
/// exactly. Otherwise, when h = max(|f|, |g|) lies in [`Float::ROT_LO`],
/// [`Float::ROT_HI`] (f² + g² cannot overflow or go subnormal), y ≈ 1/√(f² + g²) from
/// the hardware rsqrt and Newton steps, and c = f·y, s = g·y, ρ = (f² + g²)·y (each
/// within about two units of the last place of the correctly rounded value); outside
/// that range (and for NaN or ±∞) ρ = hypot(f, g), c = f/ρ, s = g/ρ as on the CPU.
/// The rotation is made on the critical path of every generate chain: the
/// rsqrt path has no division and no IEEE square root, about a fifth of their latency.
#[inline(always)]
pub fn givens<T: Float>(f: T, g: T) -> (T, T, T) {
    if g == T::ZERO {
        if f >= T::ZERO {
            return (T::ONE, T::ZERO, f);
        }
        return (T::ONE.neg(), T::ZERO, f.neg());
    }
    let (a, b) = (f.abs(), g.abs());
    let h = if a >= b { a } else { b };
    if h >= T::ROT_LO && h <= T::ROT_HI {
        let ss = f.mul_add(f, g.mul(g));
        let mut y = ss.rsqrt_approx();
        let mut k = 0;
        while k < T::RSQRT_NEWTON {
            // y ← y + (y/2)(1 − ss·y²)
            let e = ss.mul(y).neg().mul_add(y, T::ONE);
            y = y.mul(T::HALF).mul_add(e, y);
            k += 1;
        }
        return (f.mul(y), g.mul(y), ss.mul(y));
    }
    let r = f.hypot(g);
    (f.div(r), g.div(r), r)
}

/// x ← c·x + s·y, y ← −s·x + c·y, fused exactly as `cpu::givens::rot_pair`.
#[inline(always)]
fn rot_pair<T: Float>(c: T, s: T, x: T, y: T) -> (T, T) {
    (c.mul_add(x, s.mul(y)), c.mul_add(y, s.mul(x).neg()))
}

/// Stores rotation `k` of the list: `rot[2k] = c`, `rot[2k+1] = s`, `plane[k] = a`.
///
/// # Safety
/// `k` is inside the list and written by this thread only.
#[inline(always)]
unsafe fn record<T: Float>(rot: *mut T, plane: *mut u32, k: usize, c: T, s: T, a: usize) {
    // SAFETY: forwarded from the caller (k in bounds, exclusive).
    unsafe {
        device::st(rot, 2 * k, c);
        device::st(rot, 2 * k + 1, s);
        device::st(plane, k, a as u32);
    }
}

/// Target g of a three-target apply kernel, (x_g, rs_g, cs_g, n_g, b_g): vector t < n_g
/// is x_g[t·rs_g + k·cs_g], and b_g its band bound ([`band_bottom`]) or [`NONE`].
type Target<T> = (*mut T, usize, usize, usize, usize);

/// The target this block works on: blockIdx.y = g selects target g (the three-target
/// kernels' grid is (…, 3)).
#[inline(always)]
fn this_target<T>(targets: [Target<T>; 3]) -> Target<T> {
    match device::block_y() {
        0 => targets[0],
        1 => targets[1],
        _ => targets[2],
    }
}

/// Vector t's bound for a target with band bound `b`: its entries after b + t are exact
/// zeros; [`NONE`] (no band) stays NONE.
#[inline(always)]
fn band_bottom(b: usize, t: usize) -> usize {
    if b == NONE { NONE } else { b + t }
}

/// (s, 1/s) for scaled sums of squares of entries whose largest magnitude is `mx`:
/// s = 2^e from [`Pow2::pow2_scale`] (so scaling is exact); for a non-finite `mx`,
/// (1, 1), which lets the ∞ or NaN propagate into the rotations (the update's rank
/// check then refuses the result).
#[inline(always)]
fn sum_scale<T: Pow2>(mx: T) -> (T, T) {
    let (sc, inv) = mx.pow2_scale();
    if mx.is_finite() {
        (sc, inv)
    } else {
        (T::ONE, T::ONE)
    }
}

/// Repeats `$body` with `$u` bound to 0..8 (batches of eight in the apply kernels).
macro_rules! rep8 {
    ($u:ident $body:block) => {
        rep8!(@ $u $body [0, 1, 2, 3, 4, 5, 6, 7])
    };
    (@ $u:ident $body:block [$($n:literal),*]) => {
        $( { let $u: usize = $n; $body } )*
    };
}

/// Repeats `$body` with `$u` bound to each literal (a compile-time unroll, so that the
/// per-chunk arrays of [`apply_sched_one`](apply::apply_sched_one) live in registers, not local memory).
macro_rules! unroll {
    ($u:ident in [$($n:literal),*] $body:block) => {
        $( { let $u: usize = $n; $body } )*
    };
}

mod apply;
mod apply_pipe;
mod chains;
mod generate;
mod pipe;
mod sweep;
mod window;

pub use apply::{apply, apply_sched, copy};
pub use apply_pipe::{PIPE_MAX_WARPS, PIPE_RING_ELEMS, apply_pipe};
pub use chains::{CHAIN_MAX_THREADS, CHAIN_SCRATCH, gen_chains};
pub use generate::{gen_block, gen_rank_one_a, gen_rank_one_b, gen_strip};
pub use pipe::{R1_PIPE_CPT, R1_PIPE2_CPT, gen_block_pipe, gen_rank_one_b_pipe, gen_strip_pipe};
pub use sweep::{apply_sweep, house_apply};
pub use window::{window_gather, window_pipe};
