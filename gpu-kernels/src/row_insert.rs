//! `row_insert_qr`: row insertion into a state without Q (spec §1.9) in one cooperative
//! launch. Reflector j of [R; U] touches row j of R (and of d) and the p rows of U (and
//! e) only: v = [e_j; y_j]. The reflectors therefore form a chain in j (reflector j needs
//! column j after reflectors 0..j), while applying a known reflector to the other
//! columns is independent work.
//!
//! Each block owns `cpb` consecutive columns of X = [R d; U e] (R's rows 0..min(c1, n)
//! and U's p rows of each, in shared memory). It generates the reflectors of its own
//! columns in order (one block barrier each) and publishes each one — the v tail in
//! `u(:, j)`, τ in `tau[j]` — with a release increment of `*counter`. Reflectors of
//! earlier blocks are applied in batches of up to `ring` as soon as an acquire load of
//! the counter shows them. There is no grid barrier: a block waits only for blocks
//! before it, which are resident (cooperative launch), so the launch cannot deadlock.
//! Arithmetic per element as the CPU `house` and `apply_left_split` (scaled norm,
//! τ ≥ 0, τ = 0 for a zero tail); only the summation order of the dot products differs.

use crate::device::{self, Float, WARP};
use crate::reduce::{warp_allmax, warp_allsum};

/// Threads per block of `row_insert_qr`.
pub const BLOCK: usize = 256;

/// A block publishes its own reflectors in groups of this many (and at the end of its
/// range): each publication is a GPU-scope release, too slow to pay per reflector on
/// the chain.
const PUBLISH_EVERY: usize = 16;

/// Applies H = I − τ·[1; y][1; y]ᵀ to the column whose top entry is `*top` and whose
/// p-tail is `col` (spec §1.9: w = top + yᵀcol, top −= τw, col −= τw·y).
///
/// # Safety
/// The full warp calls convergently; `top` (1), `col` and `y` (p each) are shared
/// memory this warp alone writes during the call.
#[inline(always)]
unsafe fn apply_col<T: Float>(top: *mut T, col: *mut T, y: *const T, t: T, p: usize) {
    if t == T::ZERO {
        return;
    }
    let lane = device::thread_linear() % WARP;
    // SAFETY: in-bounds shared reads (contract); every lane reads `top` before the
    // shuffles below, so lane 0's later write cannot race with them.
    let head = unsafe { device::ld(top as *const T, 0) };
    let mut acc = T::ZERO;
    let mut i = lane;
    while i < p {
        // SAFETY: i < p.
        acc = unsafe { device::ld(y, i).mul_add(device::ld(col as *const T, i), acc) };
        i += WARP;
    }
    // SAFETY: convergent warp (contract).
    let s = unsafe { warp_allsum(acc) };
    let tw = t.mul(head.add(s));
    // SAFETY: convergent warp: every lane's reads above precede lane 0's write below.
    unsafe { device::sync_warp() };
    if lane == 0 {
        // SAFETY: one writer (lane 0).
        unsafe { device::st(top, 0, head.sub(tw)) };
    }
    let mut i = lane;
    while i < p {
        // SAFETY: i < p; element i is read and written by this lane only.
        unsafe {
            let x = device::ld(col as *const T, i);
            device::st(col, i, tw.neg().mul_add(device::ld(y, i), x));
        }
        i += WARP;
    }
}

/// Generates the reflector of the column (`*top` = α, `col` = x, p entries) as the CPU
/// `house` (spec §1.2): β into `*top`, the v tail into `col`; returns τ.
///
/// # Safety
/// As [`apply_col`].
#[inline(always)]
unsafe fn generate<T: Float>(top: *mut T, col: *mut T, p: usize) -> T {
    let lane = device::thread_linear() % WARP;
    // SAFETY: in-bounds shared reads; read by every lane before the shuffles.
    let alpha = unsafe { device::ld(top as *const T, 0) };
    let mut mx = T::ZERO;
    let mut i = lane;
    while i < p {
        // SAFETY: i < p.
        mx = mx.max(unsafe { device::ld(col as *const T, i) }.abs());
        i += WARP;
    }
    // SAFETY: convergent warp.
    let scale = unsafe { warp_allmax(mx) };
    if scale == T::ZERO {
        // x = 0: H = I, β = α (the tail is already exact zeros).
        return T::ZERO;
    }
    let sigma = if scale.is_finite() {
        let inv = T::ONE.div(scale);
        let mut ss = T::ZERO;
        let mut i = lane;
        while i < p {
            // SAFETY: i < p.
            let t = unsafe { device::ld(col as *const T, i) }.mul(inv);
            ss = t.mul_add(t, ss);
            i += WARP;
        }
        // SAFETY: convergent warp (uniform branch: `scale` is warp-uniform).
        scale.mul(unsafe { warp_allsum(ss) }.sqrt())
    } else {
        scale
    };
    let mu = alpha.hypot(sigma);
    let beta = mu.copysign(alpha).neg();
    let inv = T::ONE.div(alpha.sub(beta));
    // SAFETY: convergent warp (`scale` is warp-uniform): every lane's reads of `top`
    // precede lane 0's write below.
    unsafe { device::sync_warp() };
    let mut i = lane;
    while i < p {
        // SAFETY: i < p; one lane per element.
        unsafe { device::st(col, i, device::ld(col as *const T, i).mul(inv)) };
        i += WARP;
    }
    if lane == 0 {
        // SAFETY: one writer.
        unsafe { device::st(top, 0, beta) };
    }
    beta.sub(alpha).div(beta)
}

/// `row_insert_qr`: QR of [R d; U e] for the p new rows U (p×n) and their right-hand
/// sides e (p×q) into the top n rows of R (n×n upper triangular, ld `ldr`) and d (ld
/// `ldd`), in place (spec §1.9). Outputs: R and d updated, U overwritten by the v tails
/// (V_U), e by its transformed rows, τ in `tau[0..n)`. Block b owns columns
/// b·cpb .. min((b+1)·cpb, n+q) of X.
///
/// Launch: cooperative, grid ⌈(n+q)/cpb⌉ (all co-resident), block [`BLOCK`]; dynamic
/// shared memory (n·cpb + p·cpb + ring·(p + 1) + 1)·size_of::<T>() bytes; `*counter`
/// equals `base` at launch and ends at `base + n`.
///
/// # Safety
/// Launch shape as documented; ring ≥ 2, cpb ≥ 1; `r` read-writable n×n (ld ≥ n), `d`
/// n×q (ld ≥ n), `u` p×n (ld ≥ p), `e` p×q (ld ≥ p), `tau` n, `counter` one `u32` only
/// this launch touches; no two overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn qr<T: Float>(
    r: *mut T,
    ldr: usize,
    d: *mut T,
    ldd: usize,
    u: *mut T,
    ldu: usize,
    e: *mut T,
    lde: usize,
    n: usize,
    q: usize,
    p: usize,
    tau: *mut T,
    counter: *mut u32,
    base: u32,
    cpb: usize,
    ring: usize,
) {
    let tid = device::thread_linear();
    let lane = tid % WARP;
    let warp = tid / WARP;
    let nt = device::block_threads();
    let nw = nt / WARP;
    let ncol = n + q;
    let c0 = device::block_x() * cpb;
    if c0 >= ncol {
        return;
    }
    let c1 = (c0 + cpb).min(ncol);
    let nloc = c1 - c0;
    let nr = c1.min(n);
    let sh = device::shared::<T>();
    let rs = sh; // R rows 0..nr of the block's columns, ld n
    let us = sh.wrapping_add(n * cpb); // U rows, ld p
    let ry = us.wrapping_add(p * cpb); // ring of v tails, ld p
    let rt = ry.wrapping_add(ring * p); // ring of τ
    let savail = rt.wrapping_add(ring) as *mut u32;
    // Column lc of the block: pointers to its top (R or d) and tail (U or e).
    let top_of = |lc: usize| -> *mut T {
        let k = c0 + lc;
        if k < n {
            r.wrapping_add(k * ldr)
        } else {
            d.wrapping_add((k - n) * ldd)
        }
    };
    let tail_of = |lc: usize| -> *mut T {
        let k = c0 + lc;
        if k < n {
            u.wrapping_add(k * ldu)
        } else {
            e.wrapping_add((k - n) * lde)
        }
    };
    let mut x = tid;
    while x < nr * nloc {
        let (i, lc) = (x % nr, x / nr);
        // SAFETY: i < nr ≤ n rows of column c0+lc < n+q of R or d; slot inside rs.
        unsafe { device::st(rs, i + lc * n, device::ld(top_of(lc) as *const T, i)) };
        x += nt;
    }
    let mut x = tid;
    while x < p * nloc {
        let (i, lc) = (x % p, x / p);
        // SAFETY: i < p rows of column c0+lc of U or e; slot inside us.
        unsafe { device::st(us, i + lc * p, device::ld(tail_of(lc) as *const T, i)) };
        x += nt;
    }
    // SAFETY: block-uniform barrier (no thread returned: the early return is uniform).
    unsafe { device::sync_threads() };

    let jend = nr;
    let mut next = 0;
    // Own reflectors published so far (block-uniform); starts at c0.
    let mut published = c0;
    while next < jend {
        if next < c0 {
            // Reflectors of earlier blocks: wait until at least one more is published.
            if tid == 0 {
                let seen = loop {
                    // SAFETY: `counter` is a valid global u32 (contract); acquire at GPU
                    // scope pairs with the publishers' release increments.
                    let s = unsafe { device::ld_acquire_u32(counter) }.wrapping_sub(base) as usize;
                    if s > next {
                        break s;
                    }
                };
                let avail = seen.min(c0).min(next + ring);
                // SAFETY: shared slot, one writer, read after the barrier.
                unsafe { device::st(savail, 0, avail as u32) };
            }
            // SAFETY: block-uniform barrier; the acquire by thread 0 plus the barrier
            // make the published reflectors visible to the block.
            unsafe { device::sync_threads() };
            // SAFETY: written before the barrier.
            let avail = unsafe { device::ld(savail as *const u32, 0) } as usize;
            let cnt = avail - next;
            let mut x = tid;
            while x < cnt * p {
                let (i, s) = (x % p, x / p);
                // SAFETY: column next+s < c0 ≤ n of U, published; `ld_cg` bypasses L1
                // (a line of it may have been cached when this block loaded U).
                unsafe {
                    device::st(
                        ry,
                        i + s * p,
                        T::ld_cg(u.wrapping_add(i + (next + s) * ldu)),
                    )
                };
                x += nt;
            }
            let mut s = tid;
            while s < cnt {
                // SAFETY: τ of a published reflector.
                unsafe { device::st(rt, s, T::ld_cg(tau.wrapping_add(next + s))) };
                s += nt;
            }
            // SAFETY: block-uniform barrier: the batch is staged.
            unsafe { device::sync_threads() };
            let mut lc = warp;
            while lc < nloc {
                for s in 0..cnt {
                    // SAFETY: warp-convergent; row next+s < c0 < nr of column lc and its
                    // tail are this warp's alone; the staged reflector is read-only now.
                    unsafe {
                        apply_col(
                            rs.wrapping_add(next + s + lc * n),
                            us.wrapping_add(lc * p),
                            ry.wrapping_add(s * p),
                            device::ld(rt as *const T, s),
                            p,
                        )
                    };
                }
                lc += nw;
            }
            // SAFETY: block-uniform barrier: the ring may be refilled.
            unsafe { device::sync_threads() };
            next = avail;
        } else {
            // Own reflector j: column j has had reflectors 0..j applied (by its warp).
            let j = next;
            let lj = j - c0;
            let slot = j & 1;
            if warp == lj % nw {
                // SAFETY: warp-convergent; column lj is this warp's.
                let t =
                    unsafe { generate(rs.wrapping_add(j + lj * n), us.wrapping_add(lj * p), p) };
                let mut i = lane;
                while i < p {
                    // SAFETY: i < p: the ring slot (unused by any warp since the last
                    // barrier but one) and column j of U (this block's alone).
                    unsafe {
                        let v = device::ld(us.wrapping_add(lj * p) as *const T, i);
                        device::st(ry, i + slot * p, v);
                        device::st(u, i + j * ldu, v);
                    }
                    i += WARP;
                }
                if lane == 0 {
                    // SAFETY: one writer each.
                    unsafe {
                        device::st(rt, slot, t);
                        device::st(tau, j, t);
                    }
                }
            }
            // SAFETY: block-uniform barrier: reflector j is staged.
            unsafe { device::sync_threads() };
            if j + 1 == jend || (j + 1 - c0) % PUBLISH_EVERY == 0 {
                if tid == 0 {
                    // SAFETY: `counter` is valid (contract). The release reduction after
                    // the barrier publishes every global write the block's warps made
                    // before it (causality through the CTA barrier), i.e. reflectors
                    // published..=j.
                    unsafe { device::red_release_add(counter, (j + 1 - published) as u32) };
                }
                published = j + 1;
            }
            // SAFETY: written before the barrier.
            let t = unsafe { device::ld(rt as *const T, slot) };
            let mut lc = warp;
            while lc < nloc {
                if lc > lj {
                    // SAFETY: warp-convergent (lc is warp-uniform); row j < nr of column
                    // lc and its tail are this warp's alone.
                    unsafe {
                        apply_col(
                            rs.wrapping_add(j + lc * n),
                            us.wrapping_add(lc * p),
                            ry.wrapping_add(slot * p),
                            t,
                            p,
                        )
                    };
                }
                lc += nw;
            }
            next = j + 1;
        }
    }
    // SAFETY: block-uniform barrier: every warp is done with the shared columns.
    unsafe { device::sync_threads() };
    let mut x = tid;
    while x < nr * nloc {
        let (i, lc) = (x % nr, x / nr);
        // SAFETY: as the load above.
        unsafe {
            device::st(
                top_of(lc),
                i,
                device::ld(rs.wrapping_add(i + lc * n) as *const T, 0),
            )
        };
        x += nt;
    }
    let mut x = tid;
    while x < p * nloc {
        let (i, lc) = (x % p, x / p);
        // SAFETY: as the load above.
        unsafe {
            device::st(
                tail_of(lc),
                i,
                device::ld(us.wrapping_add(i + lc * p) as *const T, 0),
            )
        };
        x += nt;
    }
}
