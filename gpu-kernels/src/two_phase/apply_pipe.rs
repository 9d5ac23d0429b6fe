//! `two_phase_apply_pipe`: a strip or block list applied through a block-pipelined
//! register window, the rotations brought into shared memory by `cp.async`.

use super::{NONE, rot_pair, this_target};
use crate::device::{self, Float};

/// Chains per warp in [`apply_pipe`]: each warp holds a 2·PW-element window in
/// registers (PW = 8 keeps a thread near 128 registers without spills, so 16 warps of
/// an SM can be resident; the 16-chain window of [`apply_blocked_one`](super::apply::apply_blocked_one) needs ~254).
const PW: usize = 8;

/// Repeats `$body` with `$u` bound to 0..PW (literal unroll: register arrays).
macro_rules! rep_pw {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7] $body)
    };
}

/// Repeats `$body` with `$u` bound to 0..2·PW.
macro_rules! rep_pwin {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] $body)
    };
}

/// Steps per unrolled batch of [`apply_pipe`]: warp 0 loads the PD elements that enter
/// the window during the next batch at the start of this one (prefetch distance PD
/// steps, with no register move of a pending load).
const PD: usize = 8;

/// Repeats `$body` with `$u` bound to 0..PD.
macro_rules! rep_pd {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7] $body)
    };
}

/// Most warps per block of [`apply_pipe`]: its hand-off buffer (dynamic shared memory)
/// holds 2 · warps · 32 elements.
pub const PIPE_MAX_WARPS: usize = 16;

/// Batches of PD steps' rotations a warp of [`apply_pipe`] keeps in flight: its
/// rotations reach shared memory by `cp.async` RING − 1 batches (24 steps) before they
/// are used, instead of by a global load one step ahead (that load's L2 latency was
/// most of each step).
const RING: usize = 4;

/// Elements of one warp's rotation ring: RING batches × PW chains × PD steps × (c, s).
pub const PIPE_RING_ELEMS: usize = RING * PW * PD * 2;

/// The band bound B_c (docs/algorithms.md#givens-rotations) of a banded vector whose entries after `b0` are
/// exact zeros, at the start of chain c of a strip (s0 = h) or block (s1 = m) schedule:
/// in list order chain c applies exactly its planes a ≤ B_c, and B_{c+1} = B_c + 1 when
/// its planes lo(c) = c ..= hi(c) contain B_c, else B_c. Closed form: strip (hi(c) =
/// h + c − 1) B_c = b0 + c for b0 < h, else max(b0, h + c − 1); block (hi = m − 2)
/// B_c = min(b0 + c, m − 1) for b0 ≤ m − 2, else b0. In both cases chain c applies plane
/// a iff a ≤ B_{c'} + (c − c') for any earlier chain c' (the bound grows by at most one
/// per chain and, once it stops growing, every plane of the later chains is below it).
#[inline(always)]
fn band_at(strip: bool, s0: usize, s1: usize, b0: usize, c: usize) -> usize {
    if strip {
        if b0 < s0 { b0 + c } else { b0.max(s0 + c - 1) }
    } else if b0 + 2 <= s1 {
        (b0 + c).min(s1 - 1)
    } else {
        b0
    }
}

/// One vector of [`apply_pipe`] (each element of the vector is loaded and stored once
/// per `nw`·PW chains). The chains (see [`apply_blocked_one`](super::apply::apply_blocked_one)) are taken in
/// rounds of `nw`·PW; in a round, warp `g` of the block owns chains
/// c0 = C0 + g·PW .. c0 + PW and, at wavefront step t, the 2·PW-element register window
/// w_g = A0 + 2·C0 − t + 2·PW·g .. w_g + 2·PW that those chains touch at t. The windows of
/// consecutive warps are adjacent, so the block holds one window of 2·PW·nw elements
/// that slides down one element per step: warp 0 loads the element entering at the
/// bottom (a batch of steps ahead, see below), warp g hands its top element (final for
/// its chains) to warp g + 1 through shared memory, where it is exactly the element entering
/// warp g + 1's window, and the top active warp stores it. One barrier per step (the
/// hand-off buffer is double-buffered). The step loop is unrolled in batches of PD = 8
/// steps: warp 0 loads the next batch's entering elements at the start of the current
/// one, and the rotations of step t + 1 are loaded before those of step t are applied.
/// Every element sees the same rotations in the same order as in list order, so the
/// result is bit-identical to [`apply_one`](super::apply::apply_one).
///
/// Banded vectors (`b` ≠ NONE; entries after b + vector index are exact zeros): chain
/// c0 + u applies its plane a iff a ≤ B_{c0} + u ([`band_at`]), elements after the
/// round's final bound are neither loaded nor stored, and the round starts at the first
/// step at which the block's largest bound (lane 31) lets any rotation through, so a column of R
/// costs steps in proportion to its height, not to the whole span.
///
/// Split into `#[inline(always)]` functions of plain values and closures, so that after
/// inlining a round is still one loop body: the round's geometry ([`round_chains`],
/// [`round_steps`], [`chain_index_terms`]), its window and ring ([`pipe_round`]), its
/// step loop ([`pipe_steps`]) and what a step does ([`ring_issue`] and [`ring_fetch`],
/// called through closures, [`rotate_window`], [`hand_off`]). ptxas's register count
/// is sensitive to this shape, not only to the statements: with the closures as methods
/// of a round and a lane structure the f64 kernel took 255 registers and 16 bytes of
/// spills, and with the step counters advanced between the barrier and the window's
/// shift (rather than after [`hand_off`]) 250 (measured, sm_90). Check ptxas -v after
/// any change here.
///
/// # Safety
/// As [`apply_sched_one`](super::apply::apply_sched_one): `rot` holds the schedule's whole list; vector t < n (element i
/// at t·rs + i·cs, i < span) is lane t − v0's of every warp of the block; the block
/// is `nw` ≤ [`PIPE_MAX_WARPS`] full warps that all call this with the same schedule,
/// `b`, `v0` (first vector of the block), and the dynamic shared memory holds
/// 2·nw·32 + nw·[`PIPE_RING_ELEMS`] elements (hand-off buffer, then one rotation ring a
/// warp), aligned to 16 bytes.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn pipe_vec<T: Float>(
    rot: *const T,
    strip: bool,
    s0: usize,
    s1: usize,
    x: *mut T,
    n: usize,
    rs: usize,
    cs: usize,
    b: usize,
    v0: usize,
) {
    let (lane, g, nw) = (
        device::thread_x() % 32,
        device::thread_x() / 32,
        device::block_dim_x() / 32,
    );
    // this lane's vector v0 + lane at `base` (NONE past the target's n vectors)
    let t = v0 + lane;
    let base = if t < n { t * rs } else { NONE };
    let valid = base != NONE;
    let (nch, a0) = if strip {
        (s1, s0 as isize - 1)
    } else {
        (s0, s1 as isize - 2)
    };
    let banded = b != NONE;
    // bt: this lane's bound at chain 0; btx: the block's largest (lane 31), whose
    // rotations start earliest (band_at grows with b0): the round's first step
    let (bt, btx) = if banded {
        (b + v0 + lane, b + v0 + 31)
    } else {
        (0, 0)
    };
    let hand = device::shared::<T>();
    // this warp's rotation ring, after the hand-off buffer (2·nw·32 elements; the ring's
    // pairs stay aligned to two elements)
    let ring = hand.wrapping_add(2 * nw * 32 + g * PIPE_RING_ELEMS);
    let wb = PW as isize;
    let mut buf = 0usize;
    let mut cr = 0usize;
    while cr < nch {
        let (cr1, gtop, act, c0, c1) = round_chains(cr, nch, nw, g);
        let (e_lo, e_hi, t_start, t_last, lim) =
            round_steps(strip, s0, s1, cr, cr1, c0, act, banded, bt, btx);
        let (kc0, dk) = chain_index_terms(strip, s0, s1, c0, act);
        let in_range = |i: isize| valid && i >= e_lo && i <= e_hi;
        // chain c0 + u has a rotation on plane w + 2u when the window is at w
        // (lane-independent part; the band test is per lane)
        let live = |u: usize, w: isize| -> bool {
            let c = (c0 + u) as isize;
            let a = w + 2 * u as isize;
            let hic = if strip { a0 + c } else { a0 };
            act && c < c1 as isize && a >= c && a <= hic
        };
        // list index of chain c0 + u's rotation when the window is at w
        let kidx = |u: usize, w: isize| -> usize {
            let tri = if strip {
                0
            } else {
                (u * u.saturating_sub(1) / 2) as isize
            };
            (kc0 + u as isize * dk - tri - (w + 2 * u as isize)) as usize
        };
        if t_start <= t_last {
            let w = a0 + 2 * cr as isize - t_start + 2 * wb * g as isize;
            // SAFETY: forwarded from this function's contract: `in_range` elements are
            // this thread's, `live` rotations are list entries `kidx`, `ring` is this
            // warp's ring, and every thread of the block runs this round.
            unsafe {
                pipe_round(
                    rot, x, base, cs, lane, g, nw, hand, ring, strip, a0, gtop, act, c0, c1, w,
                    t_start, t_last, lim, &mut buf, in_range, live, kidx,
                )
            };
        }
        // SAFETY: no copy of this round stays in flight into the ring (batches issued
        // past the round's last step land before the next round reuses the slots).
        unsafe { device::cp_async_wait_all() };
        // SAFETY: uniform (once per round); orders this round's global stores before the
        // next round's loads by other warps, and the hand-off buffer's reuse.
        unsafe { device::sync_threads() };
        cr = cr1;
    }
}

/// One round of [`pipe_vec`] with at least one step (t_start ≤ t_last), the window at
/// w at its first step: loads this warp's register window, issues the first RING − 1
/// batches of its rotations into its ring, runs the steps ([`pipe_steps`]) and stores
/// the window.
///
/// # Safety
/// As [`pipe_vec`], whose values these are (`in_range`: this thread's elements of the
/// round; `live`, `kidx`: the rotations of chain c0 + u and their list entries; `buf`:
/// the hand-off buffer in use); every thread of the block runs this round.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pipe_round<T: Float>(
    rot: *const T,
    x: *mut T,
    base: usize,
    cs: usize,
    lane: usize,
    g: usize,
    nw: usize,
    hand: *mut T,
    ring: *mut T,
    strip: bool,
    a0: isize,
    gtop: usize,
    act: bool,
    c0: usize,
    c1: usize,
    w: isize,
    t_start: isize,
    t_last: isize,
    lim: isize,
    buf: &mut usize,
    in_range: impl Fn(isize) -> bool + Copy,
    live: impl Fn(usize, isize) -> bool + Copy,
    kidx: impl Fn(usize, isize) -> usize + Copy,
) {
    let mut reg = [T::ZERO; 2 * PW];
    if act {
        // SAFETY: `in_range` elements are this thread's.
        unsafe { load_window(&mut reg, x, base, cs, w, in_range) };
    }
    // The rotation ring: step s (window w_first − s) of this round is in batch
    // s / PD, slot (s / PD) mod RING, at ((slot·PW + u)·PD + s mod PD)·2.
    let w_first = w;
    let issue = |bt: usize| {
        // SAFETY: `live` rotations are list entries `kidx`; `ring` is this warp's, and
        // its slots are read only after `ring_fetch` waits for their batch.
        unsafe { ring_issue(rot, ring, lane, bt, w_first, live, kidx) };
    };
    unroll!(bt in [0, 1, 2] {
        issue(bt);
    });
    let (nu, whi_fast, full) = steady_window(strip, a0, c0, c1, act, lim);
    // loads the (c, s) of the step whose window is at w into (rc, rs)
    let fetch = |rc: &mut [T; PW], rs: &mut [T; PW], w: isize, all: bool| {
        // SAFETY: batches are issued by `issue`, in order; w ≤ w_first is warp-uniform;
        // `all` only where the caller's `fast` holds (every chain u < nu live at w).
        unsafe { ring_fetch(ring, w_first, w, all, nu, issue, live, rc, rs) };
    };
    // SAFETY: forwarded from this function's contract.
    let w = unsafe {
        pipe_steps(
            &mut reg, x, base, cs, lane, g, nw, hand, gtop, act, c0, w, t_start, t_last, lim, nu,
            whi_fast, full, buf, in_range, live, fetch,
        )
    };
    if act {
        // SAFETY: this thread's elements; the windows are disjoint.
        unsafe { store_window(&reg, x, base, cs, w, in_range) };
    }
}

/// Loads elements w .. w + 2·PW of this lane's vector (element i at base + i·cs of `x`)
/// into the register window `reg`, those `in_range` (the others stay as they are).
///
/// # Safety
/// `in_range(i)` implies 0 ≤ i < span and that element i is this thread's.
#[inline(always)]
unsafe fn load_window<T: Float>(
    reg: &mut [T; 2 * PW],
    x: *mut T,
    base: usize,
    cs: usize,
    w: isize,
    in_range: impl Fn(isize) -> bool,
) {
    rep_pwin!(u {
        let i = w + u as isize;
        if in_range(i) {
            // SAFETY: `in_range(i)`: this thread's element (contract).
            reg[u] = unsafe { device::ld(x, base + i as usize * cs) };
        }
    });
}

/// Stores the register window `reg` back to elements w .. w + 2·PW of this lane's
/// vector, those `in_range`.
///
/// # Safety
/// As [`load_window`], and no other window holds those elements.
#[inline(always)]
unsafe fn store_window<T: Float>(
    reg: &[T; 2 * PW],
    x: *mut T,
    base: usize,
    cs: usize,
    w: isize,
    in_range: impl Fn(isize) -> bool,
) {
    rep_pwin!(u {
        let i = w + u as isize;
        if in_range(i) {
            // SAFETY: this thread's element; the windows are disjoint.
            unsafe { device::st(x, base + i as usize * cs, reg[u]) };
        }
    });
}

/// Issues batch `bt` of a warp's rotations (steps bt·PD .. bt·PD + PD of the round, step
/// s at window w_first − s) into its ring slot bt mod RING by `cp.async` and commits
/// them as this thread's next group: lane (u, part) = (lane / 4, lane % 4) copies the
/// rotations of chain c0 + u (those `live`) at the batch's steps 2·part and 2·part + 1
/// from list entry `kidx` to ((slot·PW + u)·PD + s mod PD)·2 of the ring.
///
/// # Safety
/// `live(u, w)` implies that `kidx(u, w)` < len is an entry of the list `rot` (pairs
/// aligned to two elements); `ring` is this warp's ring of [`PIPE_RING_ELEMS`] elements,
/// and the slot is not read until this batch is waited for.
#[inline(always)]
unsafe fn ring_issue<T: Float>(
    rot: *const T,
    ring: *mut T,
    lane: usize,
    bt: usize,
    w_first: isize,
    live: impl Fn(usize, isize) -> bool,
    kidx: impl Fn(usize, isize) -> usize,
) {
    let (u, part) = (lane / 4, lane % 4);
    let slot = bt % RING;
    unroll!(jj in [0, 1] {
        let si = part * 2 + jj;
        let wv = w_first - (bt * PD + si) as isize;
        if live(u, wv) {
            let k = kidx(u, wv);
            // SAFETY: chain c0 + u's rotation on plane wv + 2u is list entry
            // k < len (rot[2k], rot[2k+1], aligned to two elements); the
            // slot's pair belongs to this lane, and the slot is not read
            // until this batch is waited for (see `ring_fetch`).
            unsafe {
                device::cp_async_pair(
                    ring.wrapping_add(((slot * PW + u) * PD + si) * 2),
                    rot.wrapping_add(2 * k),
                )
            };
        }
    });
    // SAFETY: closes this thread's group (possibly empty).
    unsafe { device::cp_async_commit() };
}

/// Loads the (c, s) of the step whose window is at w from this warp's ring into
/// (rc, rs): those of every chain u < nu (`all`) or of those `live` at w. The first
/// fetch of a batch issues the batch RING − 1 ahead into the slot the last batch freed
/// (every lane read it before the step's block barrier) and waits for this one.
///
/// # Safety
/// The batches up to this one were issued by `issue` ([`ring_issue`]) into `ring`, in
/// order; w ≤ w_first is the same for every lane of the warp; `all` only when every
/// chain u < nu is live at w.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn ring_fetch<T: Float>(
    ring: *mut T,
    w_first: isize,
    w: isize,
    all: bool,
    nu: usize,
    issue: impl Fn(usize),
    live: impl Fn(usize, isize) -> bool,
    rc: &mut [T; PW],
    rs: &mut [T; PW],
) {
    let st = (w_first - w) as usize;
    let (bt, si) = (st / PD, st % PD);
    if si == 0 {
        issue(bt + RING - 1);
        // SAFETY: waits for this thread's copies of batch bt (RING − 1 newer
        // groups may stay pending); the warp barrier makes every lane's
        // copies visible to the others (warp-uniform: st is).
        unsafe {
            device::cp_async_wait::<{ (RING - 1) as u32 }>();
            device::sync_warp();
        }
    }
    let slot = bt % RING;
    if all {
        // Every chain of the window (u < nu) is live at w (the caller's `fast`).
        rep_pw!(u {
            if u < nu {
                let o = ((slot * PW + u) * PD + si) * 2;
                // SAFETY: written by this batch's copies, waited for above.
                unsafe {
                    rc[u] = device::ld(ring as *const T, o);
                    rs[u] = device::ld(ring as *const T, o + 1);
                }
            }
        });
    } else {
        rep_pw!(u {
            if live(u, w) {
                let o = ((slot * PW + u) * PD + si) * 2;
                // SAFETY: written by this batch's copies, waited for above.
                unsafe {
                    rc[u] = device::ld(ring as *const T, o);
                    rs[u] = device::ld(ring as *const T, o + 1);
                }
            }
        });
    }
}

/// The steady state of a warp's round of [`pipe_vec`]: the batch of PD steps that starts
/// at window w is steady (`full`, w − PD ≥ c0 and w ≤ whi_fast) when every chain of
/// this warp's window has a rotation at every step of the batch and inside this lane's
/// band (limit `lim`), so it skips the per-rotation `live` and band tests (same
/// rotations, same order). Returns (nu, whi_fast, full): nu = this warp's chains this
/// round (≤ PW; 0 without any), whi_fast the largest such w (the `live` and band
/// conditions of chain c0 + u, u < nu, at their tightest u).
#[inline(always)]
fn steady_window(
    strip: bool,
    a0: isize,
    c0: usize,
    c1: usize,
    act: bool,
    lim: isize,
) -> (usize, isize, bool) {
    let nu = if act { c1 - c0 } else { 0 };
    let reach = nu.max(1) as isize - 1;
    let whi_live = if strip {
        a0 + c0 as isize - reach
    } else {
        a0 - 2 * reach
    };
    let whi_fast = whi_live.min(lim - reach);
    let full = act && nu > 0;
    (nu, whi_fast, full)
}

/// The steps t_start ..= t_last of a round of [`pipe_vec`] (the window at w at the
/// first), in batches of PD: warp 0 loads the elements entering the window during the
/// next batch at the start of the current one, each step fetches the next step's
/// rotations before it applies its own ([`rotate_window`]), then hands this warp's top
/// element on and slides the window ([`hand_off`]). Steady batches (`full`, w − PD ≥
/// c0 and w ≤ whi_fast: [`steady_window`]) skip the per-rotation tests. Returns the
/// window at the last step.
///
/// # Safety
/// As [`pipe_round`]; `fetch` is its ring fetch ([`ring_fetch`]), primed by the round's
/// first RING − 1 batches; `buf` is the hand-off buffer in use.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pipe_steps<T: Float>(
    reg: &mut [T; 2 * PW],
    x: *mut T,
    base: usize,
    cs: usize,
    lane: usize,
    g: usize,
    nw: usize,
    hand: *mut T,
    gtop: usize,
    act: bool,
    c0: usize,
    mut w: isize,
    t_start: isize,
    t_last: isize,
    lim: isize,
    nu: usize,
    whi_fast: isize,
    full: bool,
    buf: &mut usize,
    in_range: impl Fn(isize) -> bool + Copy,
    live: impl Fn(usize, isize) -> bool + Copy,
    fetch: impl Fn(&mut [T; PW], &mut [T; PW], isize, bool),
) -> isize {
    // element i of warp 0's vector, or zero (other warps, or outside the round)
    let ldg = |i: isize| -> T {
        if g == 0 && in_range(i) {
            // SAFETY: `in_range(i)`: this thread's element (contract).
            unsafe { device::ld(x, base + i as usize * cs) }
        } else {
            T::ZERO
        }
    };
    // the elements entering warp 0's window in the current batch of PD steps
    // (cur[j] = x[w − 1 − j] at the batch's start) and the next (nxt): loaded a
    // whole batch before use, with no register move touching a pending load
    let mut cur = [T::ZERO; PD];
    let mut nxt = [T::ZERO; PD];
    if g == 0 {
        rep_pd!(j {
            cur[j] = ldg(w - 1 - j as isize);
        });
    }
    // rotations of even (ca, sa) and odd (cb, sb) steps of a batch: the next
    // step's are loaded before this step's are applied
    let (mut ca, mut sa) = ([T::ZERO; PW], [T::ZERO; PW]);
    let (mut cb, mut sb) = ([T::ZERO; PW], [T::ZERO; PW]);
    fetch(&mut ca, &mut sa, w, false);
    let mut t = t_start;
    'steps: loop {
        let fast = full && w - PD as isize >= c0 as isize && w <= whi_fast;
        if g == 0 {
            rep_pd!(j {
                nxt[j] = ldg(w - 1 - (PD + j) as isize);
            });
        }
        rep_pd!(j {
            let (rc, rs) = if j % 2 == 0 {
                fetch(&mut cb, &mut sb, w - 1, fast);
                (&ca, &sa)
            } else {
                fetch(&mut ca, &mut sa, w - 1, fast);
                (&cb, &sb)
            };
            rotate_window(reg, rc, rs, fast, nu, w, lim, live);
            if t >= t_last {
                break 'steps;
            }
            // SAFETY: element w + 2·PW − 1 leaves every window here; every thread of the
            // block runs the same trip count (t_start, t_last depend only on the round,
            // the block's first vector and b).
            unsafe {
                hand_off(reg, cur[j], w, x, base, cs, lane, g, nw, hand, gtop, act, *buf, in_range)
            };
            w -= 1;
            t += 1;
            *buf ^= 1;
        });
        cur = nxt;
    }
    w
}

/// Applies one step's rotations (rc, rs) to the register window at w: chain c0 + u
/// rotates elements 2u and 2u + 1, every chain u < nu when `fast`, else those `live`
/// at w whose plane is within this lane's band limit (w + u ≤ lim).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn rotate_window<T: Float>(
    reg: &mut [T; 2 * PW],
    rc: &[T; PW],
    rs: &[T; PW],
    fast: bool,
    nu: usize,
    w: isize,
    lim: isize,
    live: impl Fn(usize, isize) -> bool,
) {
    if fast {
        rep_pw!(u {
            if u < nu {
                let (xn, yn) = rot_pair(rc[u], rs[u], reg[2 * u], reg[2 * u + 1]);
                reg[2 * u] = xn;
                reg[2 * u + 1] = yn;
            }
        });
    } else {
        rep_pw!(u {
            if live(u, w) && w + (u as isize) <= lim {
                let (xn, yn) = rot_pair(rc[u], rs[u], reg[2 * u], reg[2 * u + 1]);
                reg[2 * u] = xn;
                reg[2 * u + 1] = yn;
            }
        });
    }
}

/// The end of a step: hands this warp's top element (element w + 2·PW − 1, final for
/// its chains) on, meets the block at a barrier, and slides the window down one
/// element. The top active warp `gtop` stores its top element (when `in_range`), each
/// active warp below writes it to slot (buf, g, lane) of the hand-off buffer, and after
/// the barrier each active warp takes the element entering at its bottom: `next`
/// (loaded a batch ahead) in warp 0, warp g − 1's top element in the others.
///
/// # Safety
/// `in_range(i)` implies that element i is this thread's; no window holds the top
/// element any more; the hand-off buffer `hand` holds 2·nw·32 elements; every thread
/// of the block calls this the same number of times.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn hand_off<T: Float>(
    reg: &mut [T; 2 * PW],
    next: T,
    w: isize,
    x: *mut T,
    base: usize,
    cs: usize,
    lane: usize,
    g: usize,
    nw: usize,
    hand: *mut T,
    gtop: usize,
    act: bool,
    buf: usize,
    in_range: impl Fn(isize) -> bool,
) {
    let top = w + 2 * PW as isize - 1;
    if g == gtop {
        if in_range(top) {
            // SAFETY: this thread's element; no window holds it any more.
            unsafe { device::st(x, base + top as usize * cs, reg[2 * PW - 1]) };
        }
    } else if act {
        // SAFETY: slot (buf, g, lane) < 2·nw·32 of the dynamic shared memory; written by
        // this thread only, read by lane `lane` of warp g + 1 after the barrier below,
        // and not rewritten before the next barrier.
        unsafe { device::st(hand, (buf * nw + g) * 32 + lane, reg[2 * PW - 1]) };
    }
    // SAFETY: every thread of the block gets here equally often (caller's contract).
    unsafe { device::sync_threads() };
    if act {
        unroll!(u in [15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1] {
            reg[u] = reg[u - 1];
        });
        if g == 0 {
            reg[0] = next;
        } else {
            // SAFETY: written by lane `lane` of warp g − 1 before the barrier.
            reg[0] = unsafe { device::ld(hand, (buf * nw + g - 1) * 32 + lane) };
        }
    }
}

/// Chains cr .. cr1 of a round of [`pipe_vec`] (nw·PW chains, fewer at the end),
/// the top active warp `gtop`, and this warp's chains c0 .. c1 (`act` when it has any).
#[inline(always)]
fn round_chains(cr: usize, nch: usize, nw: usize, g: usize) -> (usize, usize, bool, usize, usize) {
    let cr1 = (cr + nw * PW).min(nch);
    let gtop = (cr1 - cr - 1) / PW;
    let act = g <= gtop;
    let c0 = cr + g * PW;
    let c1 = (c0 + PW).min(cr1);
    (cr1, gtop, act, c0, c1)
}

/// The elements e_lo ..= e_hi a round of [`pipe_vec`] touches (chains cr .. cr1), its
/// steps t_start ..= t_last and this lane's band limit for chain c0 (banded vectors:
/// elements past the round's final bound are left alone, the round starts at the first
/// step the block's largest bound lets through; `bt`, `btx` as in [`pipe_vec`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn round_steps(
    strip: bool,
    s0: usize,
    s1: usize,
    cr: usize,
    cr1: usize,
    c0: usize,
    act: bool,
    banded: bool,
    bt: usize,
    btx: usize,
) -> (isize, isize, isize, isize, isize) {
    let a0 = if strip {
        s0 as isize - 1
    } else {
        s1 as isize - 2
    };
    let hi = |c: usize| -> isize {
        if strip {
            (s0 + c) as isize - 1
        } else {
            s1 as isize - 2
        }
    };
    let e_lo = cr as isize;
    let mut e_hi = hi(cr1 - 1) + 1;
    let t_first = a0 + 2 * cr as isize - hi(cr);
    let t_last = a0 + cr1 as isize - 1;
    let mut t_start = t_first;
    let mut lim = isize::MAX / 4;
    if banded {
        e_hi = e_hi.min(band_at(strip, s0, s1, bt, cr1) as isize);
        let first = a0 + 2 * cr as isize - band_at(strip, s0, s1, btx, cr) as isize;
        t_start = t_start.max(first);
        if act {
            lim = band_at(strip, s0, s1, bt, c0) as isize;
        }
    }
    (e_lo, e_hi, t_start, t_last, lim)
}

/// (kc0, dk) with chain c0 + u's rotation on plane a at list index
/// kc0 + u·dk − tri(u) − a (strip: kb(c) = c·h + h + c − 1; block:
/// kb(c) = c(m−1) − c(c−1)/2 + m − 2); (0, 0) for a warp without chains.
#[inline(always)]
fn chain_index_terms(strip: bool, s0: usize, s1: usize, c0: usize, act: bool) -> (isize, isize) {
    if !act {
        (0isize, 0isize)
    } else if strip {
        ((c0 * s0 + s0 + c0 - 1) as isize, s0 as isize + 1)
    } else {
        (
            (c0 * (s1 - 1) - c0 * c0.saturating_sub(1) / 2 + s1 - 2) as isize,
            (s1 - 1 - c0) as isize,
        )
    }
}

/// `two_phase_apply_pipe`: like [`apply_sched`](super::apply::apply_sched) (same arguments; three targets,
/// blockIdx.y = g) for a strip (sched 1) or block (sched 2) list, all targets — banded
/// ones included — through the block-pipelined register window of [`pipe_vec`]: block
/// x covers vectors 32·x .. 32·x + 32 of its target (lane = vector), its warps split the
/// chains, and each element is read and written once per (warps·8) chains.
/// Grid (⌈max n_g/32⌉, 3), block 32·nw (nw ≤ [`PIPE_MAX_WARPS`]), dynamic shared memory
/// (2·nw·32 + nw·[`PIPE_RING_ELEMS`])·size_of::<T>() bytes. Each warp's rotations come
/// through its ring by `cp.async`, RING − 1 batches of PD steps ahead.
///
/// # Safety
/// As [`apply_sched`](super::apply::apply_sched), with the launch shape above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply_pipe<T: Float>(
    rot: *const T,
    sched: usize,
    s0: usize,
    s1: usize,
    x0: *mut T,
    rs0: usize,
    cs0: usize,
    n0: usize,
    b0: usize,
    x1: *mut T,
    rs1: usize,
    cs1: usize,
    n1: usize,
    b1: usize,
    x2: *mut T,
    rs2: usize,
    cs2: usize,
    n2: usize,
    b2: usize,
) {
    let (x, rs, cs, n, b) = this_target([
        (x0, rs0, cs0, n0, b0),
        (x1, rs1, cs1, n1, b1),
        (x2, rs2, cs2, n2, b2),
    ]);
    let v0 = device::block_x() * 32;
    // block-uniform exits only: the warps of a block meet at barriers
    if v0 >= n || s0 == 0 || s1 == 0 || (sched == 2 && s0 >= s1) {
        return;
    }
    // SAFETY: forwarded from the entry's contract; vector v0 + lane belongs to that lane
    // of every warp of this block, and only the warp whose window holds an element
    // touches it.
    unsafe { pipe_vec(rot, sched == 1, s0, s1, x, n, rs, cs, b, v0) };
}
