//! `two_phase_gen_chains`: the strip and block generates as chains of block scans, a
//! persistent block a chain at a time, chains published through flags.

use super::{givens, record, rot_pair, sum_scale};
use crate::device::{self, Float};
use crate::fused_panel::Pow2;

/// Most threads a block of [`gen_chains`] (the xtask gives the kernel `.maxntid 256`).
pub const CHAIN_MAX_THREADS: usize = 256;

/// Elements a thread of [`gen_chains`] loads before it works on them (`rep8!`).
const CHAIN_BATCH: usize = 8;

/// Shared-memory scratch of [`gen_chains`] ahead of its vector, in `T`s: the warps'
/// (a, b) maps (2 × 8) and the block reductions' 32 slots.
pub const CHAIN_SCRATCH: usize = 48;

/// Block scan helper of [`gen_chains`]: with `(a, b)` thread t's affine map t_in ↦ a +
/// b·t_in, returns the composition M_{t+1} ∘ … ∘ M_{nt−1} of the maps of the threads
/// after it applied to 0 (the last thread: 0). With a constant map (b = 0) at the last
/// active thread and identities after it, that is the running value entering thread
/// t's chunk from above. `maps` holds 2·8 `T`s of shared memory.
///
/// # Safety
/// Every thread of the block calls it (full warps, at most 8).
#[inline(always)]
unsafe fn chain_scan_from_above<T: Float>(maps: *mut T, a: T, b: T) -> T {
    let tid = device::thread_linear();
    let (lane, warp, nw) = (tid % 32, tid / 32, device::block_threads() / 32);
    let (mut a, mut b) = (a, b);
    let mut d = 1u32;
    while d < 32 {
        // SAFETY: every lane runs the loop the same number of times (caller's contract).
        let (ao, bo) = unsafe { (a.shfl_down(d), b.shfl_down(d)) };
        if lane + (d as usize) < 32 {
            a = b.mul_add(ao, a);
            b = b.mul(bo);
        }
        d *= 2;
    }
    // The maps of the lanes after this one within the warp (identity after lane 31).
    // SAFETY: as above.
    let (an, bn) = unsafe { (a.shfl_down(1), b.shfl_down(1)) };
    let (an, bn) = if lane < 31 {
        (an, bn)
    } else {
        (T::ZERO, T::ONE)
    };
    if lane == 0 {
        // SAFETY: slots 2·warp, 2·warp + 1 < 16 (nw ≤ 8), one writer each.
        unsafe {
            device::st(maps, 2 * warp, a);
            device::st(maps, 2 * warp + 1, b);
        }
    }
    // SAFETY: block-uniform barrier (caller's contract).
    unsafe { device::sync_threads() };
    // The value entering this warp from the warps after it.
    let mut t = T::ZERO;
    let mut k = nw;
    while k > warp + 1 {
        k -= 1;
        // SAFETY: written before the barrier above.
        let (ak, bk) = unsafe { (device::ld(maps, 2 * k), device::ld(maps, 2 * k + 1)) };
        t = bk.mul_add(t, ak);
    }
    // SAFETY: block-uniform barrier: every read of `maps` is done before its next use.
    unsafe { device::sync_threads() };
    bn.mul_add(t, an)
}

/// `two_phase_gen_chains`: the strip (docs/algorithms.md#column-insertion) and block
/// (docs/algorithms.md#row-deletion) generates as `p` chains of scans instead of a
/// wavefront. Chain c zeroes its vector v_c
/// (elements c..=hi_c, hi_c = hi0 + inc·c, inc ∈ {0, 1}) from the bottom with planes
/// (r−1, r), r = hi_c down to c+1; those rotations also act on the vectors after it. The
/// wavefront orders the same rotations by steps; here block c mod G owns vector c, applies
/// chains 0..c to it as they are published and then makes chain c at once:
///
/// * **apply** chain k to v over [k, hi_k] (t_{hi_k} = v(hi_k); t_{r−1} = c·v(r−1) +
///   s·t_r, v(r) := c·t_r − s·v(r−1), v(k) := t_k): each thread composes its chunk's
///   affine map t_in ↦ a + b·t_in, a block scan of the maps gives every chunk its
///   incoming running value, and each thread then walks its chunk (`rot_pair`);
/// * **make** chain c as `gen_rank_one_a` does for w: every rotation from (v(r−1),
///   ‖v(r..=hi_c)‖) with scaled suffix sums of squares (g = v(hi_c) itself for the first,
///   as in the chain); v(c) := ρ, v(c+1..=hi_c) := 0 exactly.
///
/// The rotations equal the serial chain's up to rounding (the chain takes each ρ from the
/// previous rotation; here from a sum); tests compare the effect with the CPU. Chain c is
/// recorded at list index base_c + (hi_c − r) with plane r − 1, base_c = c·hi0 − (1 −
/// inc)·c(c−1)/2 (the step kernels' order). Vector c is read from `src` (element e at
/// c·src_vs + e·src_es) and its final values are written to `dst` likewise; the strip
/// passes the driver block twice (in place), the block case Q's rows and the compact Z.
/// A published chain is its list entries, a block barrier, then `flags[c] = set`
/// (release at GPU scope by thread 0); a consumer's thread 0 acquires the flag before a
/// block barrier, and the list is read through L2 (`ld.global.cg`). Vector c lives in
/// shared memory after [`CHAIN_SCRATCH`] scratch elements; thread t owns elements
/// t·chunk .. (t+1)·chunk.
///
/// # Safety
/// G ≥ 1 blocks (G ≤ p; block b makes chains b, b + G, …) of 32·w threads (1 ≤ w ≤ 8),
/// all co-resident (a block waits for lower chains; the host launches cooperatively);
/// dynamic shared memory (CHAIN_SCRATCH +
/// 32·w·chunk)·size_of::<T>() with 32·w·chunk ≥ hi_{p−1} + 1; `src` readable and `dst`
/// writable at every vector's elements 0..=hi_c (both may be the same memory, which no
/// one else touches); `rot` writable for 2·base_p, `plane` for base_p; `flags` p `u32`s,
/// none equal to `set`, written only by this launch; no other overlap; hi_c ≥ c + 1 for
/// every chain.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_chains<T: Pow2>(
    src: *const T,
    src_vs: usize,
    src_es: usize,
    dst: *mut T,
    dst_vs: usize,
    dst_es: usize,
    p: usize,
    hi0: usize,
    inc: usize,
    chunk: usize,
    rot: *mut T,
    plane: *mut u32,
    flags: *mut u32,
    set: u32,
) {
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let maps = device::shared::<T>();
    // SAFETY: the vector's slab after the scratch (the contract's size).
    let s = unsafe { maps.add(CHAIN_SCRATCH) };
    // Block b makes chains b, b + G, b + 2G, … (G = gridDim.x) in order: the lowest
    // unfinished chain always belongs to a resident block whose own earlier chains are
    // done, and it waits only for lower chains, so the launch cannot deadlock with fewer
    // blocks than chains.
    let mut v = device::block_x();
    while v < p {
        // block-uniform loop
        // SAFETY: this function's contract, for chain v (< p) of this block.
        unsafe {
            gen_chain_one(
                v, tid, nt, maps, s, src, src_vs, src_es, dst, dst_vs, dst_es, hi0, inc, chunk,
                rot, plane, flags, set,
            )
        };
        // SAFETY: block-uniform barrier: every thread's copy-out reads of the slab are
        // done before the next chain's load overwrites it.
        unsafe { device::sync_threads() };
        v += device::grid_dim_x();
    }
}

/// Chain v of [`gen_chains`] (wait for chains 0..v, apply them to vector v, make and
/// publish chain v, write vector v out), out of line so that the persistent loop does
/// not keep one chain's registers live into the next.
///
/// # Safety
/// [`gen_chains`]'s contract, called by every thread of the block with its `tid`, the
/// block's `nt` threads, `maps` = the dynamic shared memory and `s` = maps + CHAIN_SCRATCH.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn gen_chain_one<T: Pow2>(
    v: usize,
    tid: usize,
    nt: usize,
    maps: *mut T,
    s: *mut T,
    src: *const T,
    src_vs: usize,
    src_es: usize,
    dst: *mut T,
    dst_vs: usize,
    dst_es: usize,
    hi0: usize,
    inc: usize,
    chunk: usize,
    rot: *mut T,
    plane: *mut u32,
    flags: *mut u32,
    set: u32,
) {
    let hi_v = hi0 + inc * v;
    let mut i = tid;
    while i <= hi_v {
        // SAFETY: i ≤ hi_v < 32·w·chunk (slab); src readable at vector v's elements.
        unsafe { device::st(s, i, device::ld(src, v * src_vs + i * src_es)) };
        i += nt;
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let (lo, up) = (tid * chunk, (tid + 1) * chunk);
    for k in 0..v {
        // SAFETY: every thread of the block, chains k < v (contract).
        unsafe { apply_chain(k, tid, maps, s, lo, up, hi0, inc, rot, flags, set) };
        // The barrier at the top of the next chain (or before the sums of
        // `make_chain`) orders these writes before any other thread's reads.
    }
    // SAFETY: every thread of the block; vector v has chains 0..v applied.
    unsafe { make_chain(v, tid, maps, s, lo, up, hi0, inc, rot, plane, flags, set) };
    // SAFETY: block-uniform barrier: the chunk writes are done before the copy out.
    unsafe { device::sync_threads() };
    let mut i = tid;
    while i <= hi_v {
        // SAFETY: dst writable at vector v's elements (contract); slab element i ≤ hi_v,
        // final after the barrier.
        unsafe { device::st(dst, v * dst_vs + i * dst_es, device::ld(s as *const T, i)) };
        i += nt;
    }
}

/// Chain k applied to the vector in the slab `s`, waited for first (thread 0 acquires
/// `flags[k]`, a block barrier passes it on): each thread composes its chunk's affine
/// map, a block scan gives every chunk its incoming running value, and each thread then
/// walks its chunk with `rot_pair` ([`gen_chains`], "apply").
///
/// # Safety
/// [`gen_chains`]'s contract; every thread of the block calls it with its `tid`, its
/// chunk [lo, up), `maps` = the dynamic shared memory and `s` = maps + CHAIN_SCRATCH;
/// the slab holds the vector with chains 0..k applied.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn apply_chain<T: Pow2>(
    k: usize,
    tid: usize,
    maps: *mut T,
    s: *mut T,
    lo: usize,
    up: usize,
    hi0: usize,
    inc: usize,
    rot: *mut T,
    flags: *mut u32,
    set: u32,
) {
    // The slab's element i. SAFETY (of every use): i ≤ hi < 32·w·chunk; a thread
    // writes only its own chunk, and reads another thread's element (the one below its
    // chunk, or the vector's top) only between two block barriers in which no thread
    // writes it.
    let u_at = |i: usize| unsafe { device::ld(s as *const T, i) };
    let u_set = |i: usize, x: T| unsafe { device::st(s, i, x) };
    // Wait for chain k: thread 0 acquires its flag, the barrier passes it on.
    if tid == 0 {
        // SAFETY: flags[k] is a valid u32 (k < p).
        while unsafe { device::ld_acquire_u32(flags.wrapping_add(k)) } != set {}
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let hi_k = hi0 + inc * k;
    let (a0, b0) = (lo.max(k), up.min(hi_k + 1));
    let active = a0 < b0;
    let top = active && b0 == hi_k + 1;
    let bk = chain_base(k, hi0, inc);
    // Rotation r of chain k (plane r−1, r), k < r ≤ hi_k, read through L2.
    let rot_at = |r: usize| {
        let idx = bk + (hi_k - r);
        // SAFETY: idx < base_{k+1} ≤ base_p: published by chain k (acquired above,
        // never written again in this launch); aligned elements of `rot`.
        unsafe {
            (
                T::ld_cg(rot.wrapping_add(2 * idx)),
                T::ld_cg(rot.wrapping_add(2 * idx + 1)),
            )
        }
    };
    // Rotations r, r−1, …, r−7 and the elements below them, loaded before use.
    let batch_at = |r: usize| {
        let (mut cb, mut sb, mut ub) = ([T::ZERO; 8], [T::ZERO; 8], [T::ZERO; 8]);
        rep8!(q {
            (cb[q], sb[q]) = rot_at(r - q);
            ub[q] = u_at(r - q - 1);
        });
        (cb, sb, ub)
    };
    // Pass 1: this chunk's map t_{b0} ↦ t_{a0}.
    let (mut ma, mut mb) = (T::ZERO, T::ONE);
    if active {
        if top {
            ma = u_at(hi_k);
            mb = T::ZERO;
        } else {
            let (c, sn) = rot_at(b0);
            ma = c.mul(u_at(b0 - 1));
            mb = sn;
        }
        let mut r = b0 - 1;
        // Batches of eight: the loads first, then the dependent recurrence.
        while r >= a0 + CHAIN_BATCH {
            let (cb, sb, ub) = batch_at(r);
            rep8!(q {
                ma = cb[q].mul_add(ub[q], sb[q].mul(ma));
                mb = sb[q].mul(mb);
            });
            r -= CHAIN_BATCH;
        }
        while r > a0 {
            let (c, sn) = rot_at(r);
            ma = c.mul_add(u_at(r - 1), sn.mul(ma));
            mb = sn.mul(mb);
            r -= 1;
        }
    }
    // SAFETY: every thread of the block calls it.
    let t_in = unsafe { chain_scan_from_above(maps, ma, mb) };
    let below = if active && a0 > k {
        u_at(a0 - 1)
    } else {
        T::ZERO
    };
    // SAFETY: block-uniform barrier: every thread's read of its neighbour is done.
    unsafe { device::sync_threads() };
    if active {
        let mut t = if top {
            u_at(hi_k)
        } else {
            let (c, sn) = rot_at(b0);
            c.mul_add(u_at(b0 - 1), sn.mul(t_in))
        };
        let mut r = b0 - 1;
        while r >= a0 + CHAIN_BATCH {
            let (cb, sb, ub) = batch_at(r);
            rep8!(q {
                let (tn, fin) = rot_pair(cb[q], sb[q], ub[q], t);
                u_set(r - q, fin);
                t = tn;
            });
            r -= CHAIN_BATCH;
        }
        while r > a0 {
            let (c, sn) = rot_at(r);
            let (tn, fin) = rot_pair(c, sn, u_at(r - 1), t);
            u_set(r, fin);
            t = tn;
            r -= 1;
        }
        if a0 == k {
            u_set(k, t);
        } else {
            let (c, sn) = rot_at(a0);
            u_set(a0, rot_pair(c, sn, below, t).1);
        }
    }
}

/// Chain v made from scaled suffix norms of the slab's v(v..=hi_v) ([`gen_chains`],
/// "make"), recorded, and published (a block barrier, then thread 0's release of
/// `flags[v]`); the slab then holds ρ at v and exact zeros above it up to hi_v.
///
/// # Safety
/// As [`apply_chain`], with chains 0..v applied to the slab; chain v's list entries and
/// `flags[v]` are this block's to write.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn make_chain<T: Pow2>(
    v: usize,
    tid: usize,
    maps: *mut T,
    s: *mut T,
    lo: usize,
    up: usize,
    hi0: usize,
    inc: usize,
    rot: *mut T,
    plane: *mut u32,
    flags: *mut u32,
    set: u32,
) {
    let hi_v = hi0 + inc * v;
    // The slab's element i. SAFETY (of every use): i ≤ hi < 32·w·chunk; a thread
    // writes only its own chunk, and reads another thread's element (the one below its
    // chunk, or the vector's top) only between two block barriers in which no thread
    // writes it.
    let u_at = |i: usize| unsafe { device::ld(s as *const T, i) };
    let u_set = |i: usize, x: T| unsafe { device::st(s, i, x) };
    // SAFETY: block-uniform barrier: the last chain's writes are done.
    unsafe { device::sync_threads() };
    let (a0, b0) = (lo.max(v), up.min(hi_v + 1));
    let mut mx = T::ZERO;
    let mut i = a0;
    while i < b0 {
        mx = mx.max(u_at(i).abs());
        i += 1;
    }
    // SAFETY: block-uniform; slots 16..48 of the scratch, unused by the map scan.
    let mx = unsafe { crate::reduce::block_max_in(maps.add(16), mx) };
    let (sc, inv) = sum_scale(mx);
    let mut part = T::ZERO;
    let mut i = b0;
    while i > a0 {
        i -= 1;
        let x = u_at(i).mul(inv);
        part = x.mul_add(x, part);
    }
    // Σ over the threads after this one: the scan of maps t ↦ part + t.
    // SAFETY: every thread of the block calls it.
    let mut after = unsafe { chain_scan_from_above(maps, part, T::ONE) };
    let vtop = u_at(hi_v);
    let bv = chain_base(v, hi0, inc);
    let mut rho_v = T::ZERO;
    // g for element i < hi_v: v(hi_v) itself next to the top, else the scaled suffix norm.
    let g_of = |i: usize, after: T| {
        if i + 1 == hi_v {
            vtop
        } else {
            sc.mul(after.sqrt())
        }
    };
    let mut i = b0;
    if i > a0 && i - 1 == hi_v {
        // v(hi_v) itself: no rotation, only its square for the sums below.
        i -= 1;
        let y = vtop.mul(inv);
        after = y.mul_add(y, after);
    }
    // Batches of eight: the suffix sums in order, then eight independent rotations.
    while i >= a0 + CHAIN_BATCH {
        let (mut xb, mut gb) = ([T::ZERO; 8], [T::ZERO; 8]);
        rep8!(q {
            xb[q] = u_at(i - 1 - q);
            gb[q] = g_of(i - 1 - q, after);
            let y = xb[q].mul(inv);
            after = y.mul_add(y, after);
        });
        rep8!(q {
            let e = i - 1 - q;
            let (c, sn, rho) = givens(xb[q], gb[q]);
            // SAFETY: list index bv + hi_v − (e+1) < base_{v+1}: chain v's, this thread's.
            unsafe { record(rot, plane, bv + hi_v - (e + 1), c, sn, e) };
            if e == v {
                rho_v = rho;
            }
        });
        i -= CHAIN_BATCH;
    }
    while i > a0 {
        i -= 1;
        let x = u_at(i);
        let (c, sn, rho) = givens(x, g_of(i, after));
        // SAFETY: as in the batches.
        unsafe { record(rot, plane, bv + hi_v - (i + 1), c, sn, i) };
        if i == v {
            rho_v = rho;
        }
        let y = x.mul(inv);
        after = y.mul_add(y, after);
    }
    // SAFETY: block-uniform barrier: every read of the slab (v(hi_v) included) and every
    // list entry of chain v is done; thread 0's release then publishes the entries
    // (cumulative through the barrier).
    unsafe { device::sync_threads() };
    if tid == 0 {
        // SAFETY: flags[v] valid (v < p); only this block writes it.
        unsafe { device::st_release_u32(flags.wrapping_add(v), set) };
    }
    let mut i = a0;
    while i < b0 {
        u_set(i, if i == v { rho_v } else { T::ZERO });
        i += 1;
    }
}

/// List index of chain k's first rotation: base_k = k·hi0 − (1 − inc)·k(k−1)/2 (chain
/// c has hi0 + inc·c − c rotations, in the step kernels' order).
#[inline(always)]
pub(super) fn chain_base(k: usize, hi0: usize, inc: usize) -> usize {
    k * hi0 - (1 - inc) * (k * k.saturating_sub(1) / 2)
}
