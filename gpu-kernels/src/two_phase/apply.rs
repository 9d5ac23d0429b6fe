//! Streaming a recorded rotation list through up to three strided targets: in list
//! order (`two_phase_apply`), in wavefront step order or register-blocked
//! (`two_phase_apply_sched`); and the block gather `two_phase_copy`.

use super::{NONE, band_bottom, rot_pair, this_target};
use crate::device::{self, Float};

/// Streams rotations 0..count through vector `t` of one target: element k of the vector
/// is `x[t·rs + k·cs]`; rotation i acts on elements (a, a+1), a = plane[i]. With
/// `bottom` ≠ NONE, elements after `bottom` are known exact zeros: planes with a > bottom
/// are skipped (0 stays 0) and the bound grows to a+1 when a plane straddles it. The
/// element the next rotation shares stays in a register (one load, one store each).
///
/// # Safety
/// Every element the list touches (indices ≤ max plane + 1) is read-writable for this
/// vector and touched by this thread only; `rot`/`plane` readable for `count`.
#[inline(always)]
pub(super) unsafe fn apply_one<T: Float>(
    rot: *const T,
    plane: *const u32,
    count: usize,
    x: *mut T,
    base: usize,
    cs: usize,
    mut bottom: usize,
) {
    let (mut held, mut hv) = (NONE, T::ZERO);
    for i in 0..count {
        // SAFETY: i < count.
        let a = unsafe { device::ld(plane, i) } as usize;
        if bottom != NONE && a > bottom {
            continue;
        }
        // SAFETY: list entries in range; elements a, a+1 (and `held`) belong to this
        // vector and thread, by the caller's contract.
        unsafe {
            let (c, s) = (device::ld(rot, 2 * i), device::ld(rot, 2 * i + 1));
            let xa = if held == a {
                hv
            } else {
                device::ld(x, base + a * cs)
            };
            let ya = if held == a + 1 {
                hv
            } else {
                device::ld(x, base + (a + 1) * cs)
            };
            if held != NONE && held != a && held != a + 1 {
                device::st(x, base + held * cs, hv);
            }
            if bottom != NONE && a + 1 > bottom {
                bottom = a + 1;
            }
            let (xn, yn) = rot_pair(c, s, xa, ya);
            let na = if i + 1 < count {
                device::ld(plane, i + 1) as usize
            } else {
                NONE
            };
            if na == a || na.wrapping_add(1) == a {
                device::st(x, base + (a + 1) * cs, yn);
                held = a;
                hv = xn;
            } else if na == a + 1 {
                device::st(x, base + a * cs, xn);
                held = a + 1;
                hv = yn;
            } else {
                device::st(x, base + a * cs, xn);
                device::st(x, base + (a + 1) * cs, yn);
                held = NONE;
            }
        }
    }
    if held != NONE {
        // SAFETY: as above.
        unsafe { device::st(x, base + held * cs, hv) };
    }
}

/// `two_phase_apply`: applies the recorded rotations 0..count, in order, to up to three
/// targets; blockIdx.y = g selects target g = (x_g, rs_g, cs_g, n_g, b_g): thread
/// t < n_g owns the vector x_g[t·rs_g + k·cs_g] (a row of column-major Q: rs 1, cs ld;
/// a column of R or d under row rotations: rs ld, cs 1). b_g = usize::MAX: no skipping;
/// otherwise vector t's entries after b_g + t are exact zeros (skipped: the band of
/// docs/algorithms.md#givens-rotations).
/// Grid (⌈max n_g/128⌉, 3), block 128.
///
/// # Safety
/// Launch shape as documented; for each target, vectors t < n_g are read-writable at
/// every index the list touches, distinct vectors do not overlap, targets do not overlap
/// each other or the list.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply<T: Float>(
    rot: *const T,
    plane: *const u32,
    count: usize,
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
    let t = device::global_x();
    if t >= n {
        return;
    }
    let bottom = band_bottom(b, t);
    // SAFETY: forwarded from the entry's contract; vector t belongs to this thread.
    unsafe { apply_one(rot, plane, count, x, t * rs, cs, bottom) };
}

/// `two_phase_copy`: dst(i, j) := src(i', j) for i < rows, j < cols, where i' = i for
/// i < skip0 and i + skip_p otherwise (rows skip0..skip0+skip_p of src are dropped);
/// with `zero_lower` ≠ 0, entries with i > j are written as exact 0 instead. `src` has
/// leading dimension lds (lds = ld + 1 with rows = 1 reads a diagonal). Grid
/// (⌈rows/32⌉, ⌈cols/8⌉), block (32, 8).
///
/// # Safety
/// Launch shape as documented; src readable at i' + j·lds for the copied (i, j); dst
/// writable rows×cols with ld ldd ≥ rows; no overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy<T: Float>(
    src: *const T,
    lds: usize,
    rows: usize,
    cols: usize,
    dst: *mut T,
    ldd: usize,
    skip0: usize,
    skip_p: usize,
    zero_lower: usize,
) {
    let i = device::global_x();
    let j = device::global_y();
    if i >= rows || j >= cols {
        return;
    }
    let v = if zero_lower != 0 && i > j {
        T::ZERO
    } else {
        let si = if i < skip0 { i } else { i + skip_p };
        // SAFETY: (si, j) is a copied source element (caller's contract).
        unsafe { device::ld(src, si + j * lds) }
    };
    // SAFETY: (i, j) inside dst; one writer per element.
    unsafe { device::st(dst, i + j * ldd, v) };
}

/// Rotations processed per unrolled chunk by [`apply_sched`] (independent loads in
/// flight per thread); must match the literal list in [`unroll!`].
const UNROLL: usize = 8;

/// Active range and rotation of the strip (sched 1, s0 = h, s1 = p) or block (sched 2,
/// s0 = p, s1 = m) wavefront at step t: returns (lo, hi) of the active columns/rows.
#[inline(always)]
fn sched_range(sched: usize, s0: usize, s1: usize, t: usize) -> (usize, usize) {
    if sched == 1 {
        ((t + 1).saturating_sub(s0), t.min(s1 - 1))
    } else {
        ((t + 2).saturating_sub(s1), (s0 - 1).min(t / 2))
    }
}

/// (list index k, plane a) of the active rotation `i` at step t (see [`gen_strip`](super::generate::gen_strip) and
/// [`gen_block`](super::generate::gen_block) for the index formulas).
#[inline(always)]
fn sched_rot(sched: usize, s0: usize, s1: usize, t: usize, i: usize) -> (usize, usize) {
    if sched == 1 {
        let (h, j) = (s0, i);
        let r = h + 2 * j - t;
        (j * h + (h + j - r), r - 1)
    } else {
        let m = s1;
        let j = m - 1 - t + 2 * i;
        (
            i * (m - 1) - i * i.saturating_sub(1) / 2 + (m - 1 - j),
            j - 1,
        )
    }
}

/// Streams a strip- or block-schedule list through one vector in wavefront step order:
/// the rotations of one step act on disjoint planes and commute, so they are taken
/// [`UNROLL`] at a time with all loads issued before any store (memory-level parallelism
/// instead of one dependent load per rotation). Same results, bit for bit, as the list
/// order. `bottom` as in [`apply_one`].
///
/// # Safety
/// As [`apply_one`]; `rot` holds the whole schedule's list.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn apply_sched_one<T: Float>(
    rot: *const T,
    sched: usize,
    s0: usize,
    s1: usize,
    x: *mut T,
    base: usize,
    cs: usize,
    mut bottom: usize,
) {
    let steps = if sched == 1 { s0 + s1 - 1 } else { s1 + s0 - 2 };
    for t in 0..steps {
        let (lo, hi) = sched_range(sched, s0, s1, t);
        let mut i = lo;
        while i <= hi {
            let mut ca = [T::ZERO; UNROLL];
            let mut sa = [T::ZERO; UNROLL];
            let mut xa = [T::ZERO; UNROLL];
            let mut ya = [T::ZERO; UNROLL];
            let mut pa = [NONE; UNROLL];
            unroll!(u in [0, 1, 2, 3, 4, 5, 6, 7] {
                if i + u <= hi {
                    let (k, a) = sched_rot(sched, s0, s1, t, i + u);
                    if bottom == NONE || a <= bottom {
                        pa[u] = a;
                        // SAFETY: k is inside the list; a, a+1 are elements of this
                        // thread's vector (caller's contract).
                        unsafe {
                            ca[u] = device::ld(rot, 2 * k);
                            sa[u] = device::ld(rot, 2 * k + 1);
                            xa[u] = device::ld(x, base + a * cs);
                            ya[u] = device::ld(x, base + (a + 1) * cs);
                        }
                    }
                }
            });
            unroll!(u in [0, 1, 2, 3, 4, 5, 6, 7] {
                let a = pa[u];
                if a != NONE {
                    let (xn, yn) = rot_pair(ca[u], sa[u], xa[u], ya[u]);
                    // SAFETY: as above; planes of one step are disjoint, so no element
                    // loaded in this chunk is written by another rotation of it.
                    unsafe {
                        device::st(x, base + a * cs, xn);
                        device::st(x, base + (a + 1) * cs, yn);
                    }
                    if bottom != NONE && a + 1 > bottom {
                        bottom = a + 1;
                    }
                }
            });
            i += UNROLL;
        }
    }
}

/// Chains per register block in [`apply_blocked_one`] (the window holds 2·WB elements).
const WB: usize = 16;

/// Repeats `$body` with `$u` bound to 0..WB (literal unroll: register arrays).
macro_rules! rep_wb {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] $body)
    };
}

/// Repeats `$body` with `$u` bound to 0..2·WB.
macro_rules! rep_win {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
            20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] $body)
    };
}

/// Register-blocked application of a strip (sched 1, s0 = h, s1 = p) or block (sched 2,
/// s0 = p, s1 = m) schedule to one vector with no band limit, the rotations blocked so
/// that each row or column of a target is read and written once per block of
/// rotations. Both schedules are `nch` chains; chain c holds the rotations on planes
/// a = hi(c), hi(c)−1, …, c (list index k = kb(c) − a), and at wavefront step t chain c
/// is on plane a = A0 + 2c − t (strip: nch = p, A0 = h−1, hi(c) = h+c−1,
/// kb(c) = c·h + h + c − 1; block: nch = p, A0 = m−2, hi(c) = m−2,
/// kb(c) = c(m−1) − c(c−1)/2 + m − 2). For a block of WB chains the elements touched at
/// step t form the window w..w+2·WB (w = A0 + 2c₀ − t), which slides down by one element
/// per step: the window lives in registers, so each element is loaded and stored once per
/// WB chains instead of once per rotation, and the WB rotations of a step are independent
/// (ILP); the elements entering the window are prefetched four steps ahead. Each element
/// sees the same rotations in the same order as in list order, so the result is
/// bit-identical to [`apply_one`].
///
/// # Safety
/// As [`apply_sched_one`] with no band limit: `rot` holds the schedule's whole list and
/// elements 0..span of the vector (span = h+p, resp. m) are this thread's.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn apply_blocked_one<T: Float>(
    rot: *const T,
    sched: usize,
    s0: usize,
    s1: usize,
    x: *mut T,
    base: usize,
    cs: usize,
) {
    let strip = sched == 1;
    let (nch, a0) = if strip {
        (s1, s0 as isize - 1)
    } else {
        (s0, s1 as isize - 2)
    };
    let hi = |c: usize| -> isize {
        if strip {
            (s0 + c) as isize - 1
        } else {
            s1 as isize - 2
        }
    };
    let kb = |c: usize| -> usize {
        if strip {
            c * s0 + s0 + c - 1
        } else {
            c * (s1 - 1) - c * c.saturating_sub(1) / 2 + s1 - 2
        }
    };
    let mut c0 = 0;
    while c0 < nch {
        let c1 = (c0 + WB).min(nch);
        // elements any chain of the block touches: c0 ..= hi(c1−1)+1
        let (e_lo, e_hi) = (c0 as isize, hi(c1 - 1) + 1);
        let t_first = a0 + 2 * c0 as isize - hi(c0);
        let t_last = a0 + c1 as isize - 1;
        let mut w = a0 + 2 * c0 as isize - t_first;
        let mut reg = [T::ZERO; 2 * WB];
        rep_win!(u {
            let i = w + u as isize;
            if i >= e_lo && i <= e_hi {
                // SAFETY: 0 ≤ i < span: an element of this thread's vector.
                reg[u] = unsafe { device::ld(x, base + i as usize * cs) };
            }
        });
        // the next PF elements below the window, loaded PF steps before they enter it,
        // so that the global-memory latency of the sliding window is hidden
        let ldg = |i: isize| -> T {
            if i >= e_lo {
                // SAFETY: e_lo ≤ i < w ≤ e_hi: an element of this thread's vector.
                unsafe { device::ld(x, base + i as usize * cs) }
            } else {
                T::ZERO
            }
        };
        let (mut pf0, mut pf1, mut pf2, mut pf3) = (ldg(w - 1), ldg(w - 2), ldg(w - 3), ldg(w - 4));
        let mut t = t_first;
        loop {
            rep_wb!(b {
                let c = c0 + b;
                let a = w + 2 * b as isize;
                if c < c1 && a >= c as isize && a <= hi(c) {
                    let k = kb(c) - a as usize;
                    // SAFETY: chain c's rotation on plane a is list entry k < len.
                    let (cc, ss) = unsafe { (device::ld(rot, 2 * k), device::ld(rot, 2 * k + 1)) };
                    let (xn, yn) = rot_pair(cc, ss, reg[2 * b], reg[2 * b + 1]);
                    reg[2 * b] = xn;
                    reg[2 * b + 1] = yn;
                }
            });
            if t >= t_last {
                break;
            }
            // slide the window down: the top element is final for this block
            let top = w + 2 * WB as isize - 1;
            if top >= e_lo && top <= e_hi {
                // SAFETY: 0 ≤ top < span, this thread's element.
                unsafe { device::st(x, base + top as usize * cs, reg[2 * WB - 1]) };
            }
            unroll!(u in [31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15,
                14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1] {
                reg[u] = reg[u - 1];
            });
            w -= 1;
            t += 1;
            // x[w] was prefetched into pf0 four steps ago (ZERO below e_lo: never used)
            reg[0] = pf0;
            pf0 = pf1;
            pf1 = pf2;
            pf2 = pf3;
            pf3 = ldg(w - 4);
        }
        rep_win!(u {
            let i = w + u as isize;
            if i >= e_lo && i <= e_hi {
                // SAFETY: 0 ≤ i < span, this thread's element.
                unsafe { device::st(x, base + i as usize * cs, reg[u]) };
            }
        });
        c0 = c1;
    }
}

/// `two_phase_apply_sched`: like [`apply`] (three targets, blockIdx.y = g) for a list
/// recorded by [`gen_strip`](super::generate::gen_strip) (sched = 1, s0 = h, s1 = p) or [`gen_block`](super::generate::gen_block) (sched = 2,
/// s0 = p, s1 = m), streamed in wavefront step order with unrolled independent loads;
/// planes are recomputed from the schedule. Grid (⌈max n_g/128⌉, 3), block 128.
///
/// # Safety
/// As [`apply`], with `rot` holding the schedule's whole list.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply_sched<T: Float>(
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
    let t = device::global_x();
    if t >= n || s0 == 0 || s1 == 0 || (sched == 2 && s0 >= s1) {
        return;
    }
    let bottom = band_bottom(b, t);
    if bottom == NONE {
        // SAFETY: forwarded from the entry's contract; vector t belongs to this thread.
        unsafe { apply_blocked_one(rot, sched, s0, s1, x, t * rs, cs) };
    } else {
        // SAFETY: as above.
        unsafe { apply_sched_one(rot, sched, s0, s1, x, t * rs, cs, bottom) };
    }
}
