//! `row_insert_qr`: row insertion into a state without Q (docs/algorithms.md#row-insertion)
//! in one cooperative
//! launch. Reflector j of [R; U] touches row j of R (and of d) and the p rows of U (and
//! e) only: v = [e_j; y_j]. The reflectors therefore form a chain in j (reflector j needs
//! column j after reflectors 0..j), while applying a known reflector to the other
//! columns is independent work.
//!
//! Each block owns `cpb` consecutive columns of X = [R d; U e] (R's rows 0..min(c1, n)
//! and U's p rows of each, in shared memory); warp w of the block owns its columns
//! w, w + 8, … and works through the reflectors 0, 1, … on its own, with no block
//! barrier after the initial load (the critical path is one warp's work per reflector):
//!
//! - a reflector of an earlier block is published per reflector — v tail in `u(:, j)`,
//!   τ in `tau[j]`, then a release store of `flags[j]` by its generating warp — and
//!   the consuming warp acquires up to `ring` consecutive flags with one coalesced load,
//!   stages those reflectors in its own shared slots and applies them;
//! - a reflector of the own block is read from the generating column in shared memory
//!   after a shared ready count (CTA-scope fence) shows it;
//! - look-ahead: a warp applies reflector j to its columns in increasing order, so
//!   column j + 1 (if it is the warp's) comes first, and generates and publishes
//!   reflector j + 1 before applying reflector j to its other columns.
//!
//! A block waits only for blocks before it, which are resident (cooperative launch),
//! so the launch cannot deadlock. Arithmetic per element as the CPU `house` and
//! `apply_left_split` (τ ≥ 0, τ = 0 for a zero tail), but for the summation order of the
//! dot products and the tail's norm, taken from the plain sum of squares where that is
//! safely inside the range (the scaled sum otherwise). Each column sees its reflectors in the order
//! 0, 1, … with fixed per-lane partial sums, so results are bit-for-bit reproducible.

use crate::device::{self, Float, WARP};
use crate::reduce::{warp_allmax, warp_allsum};

/// Threads per block of `row_insert_qr`.
pub const BLOCK: usize = 256;

/// Elements a lane loads before it uses any of them, in the loops over a column's tail
/// and in the staging of published reflectors: the loads of a chunk are in flight
/// together (one load and its use per element cost one latency each in a row: in the
/// staging, one L2 round trip per 32 elements, docs/performance.md#chain-latency).
/// Tails of at most 32 rows take chunks of one (a lane holds one element; the empty
/// slots' compares and addresses would sit on the critical warp).
const CHUNK: usize = 8;

/// The elements first, first + 32, … (C of them) of the shared vector `v` that are
/// below `p`, zeros for the others; every load is issued before any is used.
///
/// # Safety
/// `v` holds `p` elements of shared memory.
#[inline(always)]
unsafe fn load_chunk<T: Float, const C: usize>(v: *const T, first: usize, p: usize) -> [T; C] {
    let mut out = [T::ZERO; C];
    for (k, o) in out.iter_mut().enumerate() {
        let i = first + k * WARP;
        if i < p {
            // SAFETY: i < p (contract).
            *o = unsafe { device::ld(v, i) };
        }
    }
    out
}

/// Applies H = I − τ·[1; y][1; y]ᵀ to the column whose top entry is `*top` and whose
/// p-tail is `col` (docs/algorithms.md#row-insertion: w = top + yᵀcol, top −= τw,
/// col −= τw·y).
///
/// # Safety
/// The full warp calls convergently; `top` (1), `col` and `y` (p each) are shared or
/// global memory that this warp alone writes during the call.
#[inline(always)]
unsafe fn apply_col<T: Float, const C: usize>(
    top: *mut T,
    col: *mut T,
    y: *const T,
    t: T,
    p: usize,
) {
    if t == T::ZERO {
        return;
    }
    let lane = device::thread_linear() % WARP;
    // SAFETY: in-bounds shared reads (contract); every lane reads `top` before the
    // shuffles below, so lane 0's later write cannot race with them.
    let head = unsafe { device::ld(top as *const T, 0) };
    let mut acc = T::ZERO;
    let mut b = 0;
    while b < p {
        // The chunk's loads first, then its products in the order i = lane, lane + 32, …
        // SAFETY: `y` and `col` hold p elements (contract).
        let (yv, cv) = unsafe {
            (
                load_chunk::<T, C>(y, b + lane, p),
                load_chunk::<T, C>(col, b + lane, p),
            )
        };
        for k in 0..C {
            if b + lane + k * WARP < p {
                acc = yv[k].mul_add(cv[k], acc);
            }
        }
        b += C * WARP;
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
    let mut b = 0;
    while b < p {
        // SAFETY: as above; element i of `col` is read and written by this lane only.
        let (yv, cv) = unsafe {
            (
                load_chunk::<T, C>(y, b + lane, p),
                load_chunk::<T, C>(col, b + lane, p),
            )
        };
        for k in 0..C {
            let i = b + lane + k * WARP;
            if i < p {
                // SAFETY: i < p, this lane's element.
                unsafe { device::st(col, i, tw.neg().mul_add(yv[k], cv[k])) };
            }
        }
        b += C * WARP;
    }
}

/// Generates the reflector of the column (`*top` = α, `col` = x, p entries) as the CPU
/// `house` (docs/algorithms.md#householder-vectors): β into `*top`, the v tail into
/// `col`; returns τ. ‖x‖ comes from the plain sum of squares where that sum and α lie
/// safely inside the range ([`Float::ROT_LO`] ≤ Σx² ≤ [`Float::ROT_HI`], |α| ≤ ROT_HI: no
/// square overflows, the underflow of tiny ones is far below the rounding), one pass and
/// one warp reduction; from the scaled sum ([`scaled_norm`]) otherwise.
///
/// # Safety
/// As [`apply_col`].
#[inline(always)]
unsafe fn generate<T: Float, const C: usize>(top: *mut T, col: *mut T, p: usize) -> T {
    let lane = device::thread_linear() % WARP;
    // SAFETY: in-bounds shared reads; read by every lane before the shuffles.
    let alpha = unsafe { device::ld(top as *const T, 0) };
    let mut ss = T::ZERO;
    let mut b = 0;
    while b < p {
        // SAFETY: elements below p only (the zeros past p add nothing).
        let cv = unsafe { load_chunk::<T, C>(col, b + lane, p) };
        for x in cv.iter() {
            ss = x.mul_add(*x, ss);
        }
        b += C * WARP;
    }
    // SAFETY: convergent warp.
    let ss = unsafe { warp_allsum(ss) };
    let mu = if ss >= T::ROT_LO && ss <= T::ROT_HI && alpha.abs() <= T::ROT_HI {
        alpha.mul_add(alpha, ss).sqrt()
    } else {
        // SAFETY: as this function's (the branch is warp-uniform: `ss` is).
        match unsafe { scaled_norm::<T, C>(col, p, lane) } {
            Some(sigma) => alpha.hypot(sigma),
            // x = 0: H = I, β = α (the tail is already exact zeros).
            None => return T::ZERO,
        }
    };
    let beta = mu.copysign(alpha).neg();
    let inv = T::ONE.div(alpha.sub(beta));
    // SAFETY: convergent warp (the branches above are warp-uniform): every lane's reads
    // of `top` precede lane 0's write below.
    unsafe { device::sync_warp() };
    let mut b = 0;
    while b < p {
        // SAFETY: elements below p only; one lane per element.
        let cv = unsafe { load_chunk::<T, C>(col, b + lane, p) };
        for (k, &x) in cv.iter().enumerate() {
            let i = b + lane + k * WARP;
            if i < p {
                // SAFETY: i < p; one lane per element.
                unsafe { device::st(col, i, x.mul(inv)) };
            }
        }
        b += C * WARP;
    }
    if lane == 0 {
        // SAFETY: one writer.
        unsafe { device::st(top, 0, beta) };
    }
    beta.sub(alpha).div(beta)
}

/// ‖x‖ of the p-vector `col` by the scaled sum of squares (max |xᵢ| = s, then
/// s·√Σ(xᵢ/s)², as the CPU `house`; s itself when s is not finite); `None` for x = 0.
///
/// # Safety
/// The full warp calls convergently; `col` holds p elements (shared or global memory)
/// that nobody writes during the call.
#[inline(always)]
unsafe fn scaled_norm<T: Float, const C: usize>(col: *const T, p: usize, lane: usize) -> Option<T> {
    let mut mx = T::ZERO;
    let mut b = 0;
    while b < p {
        // SAFETY: elements below p only.
        let cv = unsafe { load_chunk::<T, C>(col, b + lane, p) };
        for x in cv.iter() {
            mx = mx.max(x.abs()); // the zeros past p leave the max as it is
        }
        b += C * WARP;
    }
    // SAFETY: convergent warp.
    let scale = unsafe { warp_allmax(mx) };
    if scale == T::ZERO {
        return None;
    }
    if !scale.is_finite() {
        return Some(scale);
    }
    let inv = T::ONE.div(scale);
    let mut ss = T::ZERO;
    let mut b = 0;
    while b < p {
        // SAFETY: elements below p only.
        let cv = unsafe { load_chunk::<T, C>(col, b + lane, p) };
        for (k, &x) in cv.iter().enumerate() {
            if b + lane + k * WARP < p {
                let t = x.mul(inv);
                ss = t.mul_add(t, ss);
            }
        }
        b += C * WARP;
    }
    // SAFETY: convergent warp (uniform branch: `scale` is warp-uniform).
    Some(scale.mul(unsafe { warp_allsum(ss) }.sqrt()))
}

/// `row_insert_qr`: QR of [R d; U e] for the p new rows U (p×n) and their right-hand
/// sides e (p×q) into the top n rows of R (n×n upper triangular, ld `ldr`) and d (ld
/// `ldd`), in place (docs/algorithms.md#row-insertion). Outputs: R and d updated, U overwritten by the v tails
/// (V_U), e by its transformed rows, τ in `tau[0..n)`. Block b owns columns
/// b·cpb .. min((b+1)·cpb, n+q) of X; warp w of the block owns its columns w, w + nw, …
///
/// Launch: cooperative, grid ⌈(n+q)/cpb⌉ (all co-resident), block [`BLOCK`]; dynamic
/// shared memory (n·cpb + p·cpb + cpb + (BLOCK/32)·ring·(p + 1) + 1)·size_of::<T>()
/// bytes; `flags[0..n)` all differ from `base + 1` at launch (reflector j is published
/// by storing `base + 1` into `flags[j]`).
///
/// # Safety
/// Launch shape as documented; n ≥ 1, 1 ≤ ring ≤ 32, cpb ≥ 1; `r` read-writable n×n (ld ≥ n),
/// `d` n×q (ld ≥ n), `u` p×n (ld ≥ p), `e` p×q (ld ≥ p), `tau` n, `flags` n `u32`s
/// only this launch touches; no two overlap.
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
    flags: *mut u32,
    base: u32,
    cpb: usize,
    ring: usize,
) {
    // SAFETY: forwarded from the caller (same contract, row geometry).
    unsafe {
        if p <= WARP {
            chain::<T, false, 1>(
                r, ldr, d, ldd, u, ldu, e, lde, n, q, p, tau, flags, base, cpb, ring,
            )
        } else {
            chain::<T, false, CHUNK>(
                r, ldr, d, ldd, u, ldu, e, lde, n, q, p, tau, flags, base, cpb, ring,
            )
        }
    }
}

/// `row_insert_band_qr`: the QR of a banded block B (n columns; column c nonzero in rows 0..=c+p,
/// so n + p rows) and its right-hand sides (q columns of n + p rows), in place:
/// column deletion's re-triangularisation without Q (docs/algorithms.md#column-deletion)
/// in one cooperative
/// launch. Reflector j acts on rows j..=j+p, so it is the row chain of [`qr`] with the
/// p rows under row j as the tail: the same warps, publication and look-ahead, with
/// each column's rows 0..=c+p contiguous in shared memory. Outputs: B upper triangular
/// (exact zeros in rows c+1..=c+p of column c), the right-hand sides transformed, the v
/// tails in `v` (p×n, ld `ldv`, scratch to the caller), τ in `tau[0..n)`.
///
/// Launch: as [`qr`] for the same n, q, p (the shared memory [`qr`] documents covers
/// this geometry's (min(c1, n) + p)·cpb elements of columns).
///
/// # Safety
/// Launch shape as documented; n ≥ 1, p ≥ 1, 1 ≤ ring ≤ 32, cpb ≥ 1; `b` read-writable
/// (n + p)×n (ld ≥ n + p), `d` (n + p)×q (ld ≥ n + p), `v` p×n (ld ≥ p), `tau` n,
/// `flags` n `u32`s only this launch touches; no two overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn band_qr<T: Float>(
    b: *mut T,
    ldb: usize,
    d: *mut T,
    ldd: usize,
    v: *mut T,
    ldv: usize,
    n: usize,
    q: usize,
    p: usize,
    tau: *mut T,
    flags: *mut u32,
    base: u32,
    cpb: usize,
    ring: usize,
) {
    let null = core::ptr::null_mut();
    // SAFETY: forwarded from the caller (band geometry: no separate tail matrix).
    unsafe {
        if p <= WARP {
            chain::<T, true, 1>(
                b, ldb, d, ldd, v, ldv, null, 0, n, q, p, tau, flags, base, cpb, ring,
            )
        } else {
            chain::<T, true, CHUNK>(
                b, ldb, d, ldd, v, ldv, null, 0, n, q, p, tau, flags, base, cpb, ring,
            )
        }
    }
}

/// The reflector chain of [`qr`] (`BAND` false: top rows in R/d, tails in U/e) and
/// [`band_qr`] (`BAND` true: reflector j's top is row j of the column, its tail the p
/// rows under it). `u` receives the published v tails in both. `C`: elements a lane
/// loads at once in the loops over a tail ([`CHUNK`], or 1 for p ≤ 32).
///
/// # Safety
/// As [`qr`] or [`band_qr`] for the geometry.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn chain<T: Float, const BAND: bool, const C: usize>(
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
    flags: *mut u32,
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
    // Row geometry: R rows 0..nr of the block's columns (ld n), then U rows (ld p;
    // column lc < n: its v tail once generated). Band geometry: rows 0..nr + p of each
    // column (ld nr + p), its v tail under its diagonal once generated.
    let rs = sh;
    let lds = if BAND { nr + p } else { n };
    let us = sh.wrapping_add(n * cpb);
    let ts = sh.wrapping_add((n + p) * cpb); // τ of the block's own reflectors
    let stage = ts.wrapping_add(cpb);
    let sy = stage.wrapping_add(warp * ring * (p + 1)); // this warp's staged v tails, ld p
    let sts = sy.wrapping_add(ring * p); // and their τ
    // Own reflectors generated so far (0..=cpb), written by the generating warp's lane 0.
    let sready = stage.wrapping_add(nw * ring * (p + 1)) as *mut u32;
    let cols = Cols::<T, BAND> {
        c0,
        nloc,
        nr,
        n,
        p,
        lds,
        rs,
        us,
        r,
        ldr,
        d,
        ldd,
        u,
        ldu,
        e,
        lde,
    };
    let top_at = |jj: usize, lc: usize| cols.top_at(jj, lc);
    let tail_at = |jj: usize, lc: usize| cols.tail_at(jj, lc);
    // SAFETY: the contract's shapes; the shared memory holds the block's columns.
    unsafe { cols.load(tid, nt) };
    if tid == 0 {
        // SAFETY: the shared counter slot; read only after the barrier below.
        unsafe { sready.write_volatile(0) };
    }
    // SAFETY: block-uniform barrier (no thread returned: the early return is uniform).
    // It is the kernel's only block barrier: from here on each warp runs on its own.
    unsafe { device::sync_threads() };
    if warp >= nloc {
        return; // warp-uniform: a warp without columns
    }
    let set = base.wrapping_add(1);

    // Generates reflector k = c0 + lc (column lc is this warp's and has had reflectors
    // 0..k applied) and publishes it: to the block through `sready`, to later blocks
    // through u(:, k), tau[k] and the release store of flags[k].
    // SAFETY (of each call): warp-convergent; column lc is this warp's and has had
    // reflectors 0..c0 + lc applied.
    let publish = |lc: usize| unsafe {
        publish_reflector::<T, BAND, C>(&cols, lc, lane, u, ldu, tau, ts, sready, flags, set)
    };
    // Applies reflector jj (v tail `y`, τ `t`) to this warp's columns after jj, in
    // increasing order; when column jj + 1 is this warp's and in R, reflector jj + 1 is
    // generated right after its column got reflector jj (look-ahead).
    let step = |jj: usize, y: *const T, t: T| {
        let mut lc = warp;
        while lc < nloc {
            let k = c0 + lc;
            if k > jj {
                // SAFETY: warp-convergent (lc is warp-uniform); row jj < nr of column lc
                // and its tail are this warp's alone; `y` is read-only while in use.
                unsafe { apply_col::<T, C>(top_at(jj, lc), tail_at(jj, lc), y, t, p) };
                if k == jj + 1 && k < n {
                    publish(lc);
                }
            }
            lc += nw;
        }
    };

    if c0 == 0 && warp == 0 {
        // Reflector 0 needs nothing applied (n ≥ 1 by contract).
        publish(0);
    }
    // This warp applies reflectors 0..jw: its last column needs all before it (in R) or
    // all n (a column of d).
    let last = warp + (nloc - 1 - warp) / nw * nw;
    let jw = (c0 + last).min(nr);
    let mut j = 0;
    while j < jw {
        if j < c0 {
            // Reflectors of earlier blocks: acquire up to `ring` consecutive flags in one
            // load, stage the ready ones in the warp's slots, apply them.
            let lim = (c0 - j).min(ring).min(jw - j);
            // SAFETY: convergent warp; reflectors j .. j + lim < c0 are earlier blocks'
            // (published with `set`); sy/sts are this warp's stage of `ring` slots.
            let cnt = unsafe { stage_published(j, lim, p, flags, set, u, ldu, tau, sy, sts) };
            for s in 0..cnt {
                // SAFETY: staged τ slot s < cnt ≤ ring.
                let t = unsafe { device::ld(sts as *const T, s) };
                step(j + s, sy.wrapping_add(s * p), t);
            }
            // SAFETY: convergent warp: every lane is done reading the stage before the
            // next batch overwrites it.
            unsafe { device::sync_warp() };
            j += cnt;
        } else {
            // Reflector j of this block: wait until its generating warp counted it.
            let lj = j - c0;
            // SAFETY: the shared counter slot (volatile: re-read every iteration).
            while (unsafe { device::ld_volatile(sready as *const u32, 0) } as usize) <= lj {}
            device::fence_cta();
            // SAFETY: τ of own reflector lj, written before the counter showed it.
            let t = unsafe { device::ld(ts as *const T, lj) };
            // Its v tail: the generating column's tail, never written again.
            step(j, tail_at(j, lj), t);
            j += 1;
        }
    }
    // SAFETY: convergent warp: lane 0's last writes of the tops precede the reads below.
    unsafe { device::sync_warp() };
    // SAFETY: the warp's columns are final and its alone.
    unsafe { cols.store(warp, nw, lane) };
}

/// Acquires up to `lim` consecutive published reflectors j, j + 1, … of earlier blocks
/// with one coalesced load of their flags (spinning until at least reflector j is
/// ready), and stages the ready ones' v tails (p entries each, from `u`) and τ in the
/// warp's slots `sy` (ld p) and `sts`; returns how many (≥ 1). Ends with a warp barrier
/// after which the stage is complete.
///
/// # Safety
/// The full warp calls it convergently; reflectors j .. j + lim are below this block's
/// columns, so each is published by storing `set` into its flag after its tail and τ;
/// `sy` and `sts` hold lim·p and lim slots of this warp's shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn stage_published<T: Float>(
    j: usize,
    lim: usize,
    p: usize,
    flags: *mut u32,
    set: u32,
    u: *mut T,
    ldu: usize,
    tau: *mut T,
    sy: *mut T,
    sts: *mut T,
) -> usize {
    let lane = device::thread_linear() % WARP;
    let cnt = loop {
        let ok = lane < lim
            // SAFETY: j + lane < c0 ≤ n flags; acquire at GPU scope pairs with the
            // generator's release store.
            && unsafe { device::ld_acquire_u32(flags.wrapping_add(j + lane)) } == set;
        // SAFETY: convergent warp (the loop condition is warp-uniform).
        let c = (!unsafe { device::ballot(ok) }).trailing_zeros() as usize;
        if c > 0 {
            break c;
        }
    };
    // SAFETY: convergent warp: the lanes' acquires are ordered before every lane's
    // reads below (memory ordering among the barrier's threads).
    unsafe { device::sync_warp() };
    // τ and the v tails (element x = i + s·p of the stage is u(i, j + s)) are loaded a
    // chunk at a time, every load of a chunk before any store, so that the whole stage
    // of up to CHUNK·32 elements and τ costs one L2 round trip, not one per 32 elements.
    // `ld_cg` reads L2 (this block never cached these lines: it loaded only its own
    // columns). SAFETY (of the loads): reflectors j .. j + cnt < c0 are published
    // (acquired above) and never written again.
    let t_lane = if lane < cnt {
        // SAFETY: see above.
        unsafe { T::ld_cg(tau.wrapping_add(j + lane)) }
    } else {
        T::ZERO
    };
    let total = cnt * p;
    // (i, s) of this lane's next element, advanced without divisions.
    let (mut i, mut s) = (lane, 0);
    while i >= p {
        i -= p;
        s += 1;
    }
    let mut x = lane;
    while x < total {
        let mut v = [T::ZERO; CHUNK];
        for (k, vk) in v.iter_mut().enumerate() {
            if x + k * WARP < total {
                // SAFETY: see above (i < p, j + s < c0).
                *vk = unsafe { T::ld_cg(u.wrapping_add(i + (j + s) * ldu)) };
            }
            i += WARP;
            while i >= p {
                i -= p;
                s += 1;
            }
        }
        for (k, &vk) in v.iter().enumerate() {
            if x + k * WARP < total {
                // SAFETY: a slot of this warp's stage (x + k·32 < cnt·p).
                unsafe { device::st(sy, x + k * WARP, vk) };
            }
        }
        x += CHUNK * WARP;
    }
    if lane < cnt {
        // SAFETY: this warp's τ slot.
        unsafe { device::st(sts, lane, t_lane) };
    }
    // SAFETY: convergent warp: the stage is complete before any lane reads it.
    unsafe { device::sync_warp() };
    cnt
}

/// The block's columns c0 .. c0 + nloc of X = [R d; U e] (or of the band block and its
/// right-hand sides) in global memory, and their copy in shared memory (`rs`, ld `lds`;
/// in the row geometry the tails in `us`, ld p): see [`chain`].
#[derive(Clone, Copy)]
struct Cols<T, const BAND: bool> {
    c0: usize,
    nloc: usize,
    nr: usize,
    n: usize,
    p: usize,
    lds: usize,
    rs: *mut T,
    us: *mut T,
    r: *mut T,
    ldr: usize,
    d: *mut T,
    ldd: usize,
    u: *mut T,
    ldu: usize,
    e: *mut T,
    lde: usize,
}

impl<T: Float, const BAND: bool> Cols<T, BAND> {
    /// Reflector jj's top in column lc (shared memory).
    #[inline(always)]
    fn top_at(&self, jj: usize, lc: usize) -> *mut T {
        self.rs.wrapping_add(jj + lc * self.lds)
    }

    /// Reflector jj's tail in column lc (shared memory).
    #[inline(always)]
    fn tail_at(&self, jj: usize, lc: usize) -> *mut T {
        if BAND {
            self.rs.wrapping_add(jj + 1 + lc * self.lds)
        } else {
            self.us.wrapping_add(lc * self.p)
        }
    }

    /// Column lc of the block in global memory: its top (R or d).
    #[inline(always)]
    fn top_of(&self, lc: usize) -> *mut T {
        let k = self.c0 + lc;
        if k < self.n {
            self.r.wrapping_add(k * self.ldr)
        } else {
            self.d.wrapping_add((k - self.n) * self.ldd)
        }
    }

    /// Column lc's tail in global memory (U or e; the row geometry only).
    #[inline(always)]
    fn tail_of(&self, lc: usize) -> *mut T {
        let k = self.c0 + lc;
        if k < self.n {
            self.u.wrapping_add(k * self.ldu)
        } else {
            self.e.wrapping_add((k - self.n) * self.lde)
        }
    }

    /// Rows of column lc that any reflector touches: row geometry nr (R), band geometry
    /// 0..=k+p for a column of B, all n + p for a right-hand side.
    #[inline(always)]
    fn rows_of(&self, lc: usize) -> usize {
        let k = self.c0 + lc;
        if !BAND {
            self.nr
        } else if k < self.n {
            k + self.p + 1
        } else {
            self.n + self.p
        }
    }

    /// Loads the block's columns into shared memory (threads stride by `nt`).
    ///
    /// # Safety
    /// As [`chain`]'s contract for the columns; the shared memory holds them.
    #[inline(always)]
    unsafe fn load(&self, tid: usize, nt: usize) {
        let (nloc, nr, p, lds, rs, us) = (self.nloc, self.nr, self.p, self.lds, self.rs, self.us);
        let span = if BAND { lds } else { nr };
        let mut x = tid;
        while x < span * nloc {
            let (i, lc) = (x % span, x / span);
            if i < self.rows_of(lc) {
                // SAFETY: i < self.rows_of(lc) rows of column c0+lc < n+q of R/B or d (the
                // contract's shapes); slot inside rs (lds·cpb ≤ (n + p)·cpb).
                unsafe { device::st(rs, i + lc * lds, device::ld(self.top_of(lc) as *const T, i)) };
            }
            x += nt;
        }
        if !BAND {
            let mut x = tid;
            while x < p * nloc {
                let (i, lc) = (x % p, x / p);
                // SAFETY: i < p rows of column c0+lc of U or e; slot inside us.
                unsafe { device::st(us, i + lc * p, device::ld(self.tail_of(lc) as *const T, i)) };
                x += nt;
            }
        }
    }

    /// Writes warp `warp`'s columns back (row geometry: the v tails of R's columns are
    /// in U already; band geometry: exact zeros under B's diagonal).
    ///
    /// # Safety
    /// The warp's columns are final in shared memory and its alone (warp barrier before).
    #[inline(always)]
    unsafe fn store(&self, warp: usize, nw: usize, lane: usize) {
        let (c0, nloc, n, p, lds, rs, us) = (
            self.c0, self.nloc, self.n, self.p, self.lds, self.rs, self.us,
        );
        let mut lc = warp;
        while lc < nloc {
            let k = c0 + lc;
            let kept = if BAND && k < n {
                k + 1
            } else {
                self.rows_of(lc)
            };
            let mut i = lane;
            while i < self.rows_of(lc) {
                let x = if i < kept {
                    // SAFETY: row i < self.rows_of(lc) of column lc in shared memory, this warp's
                    // alone.
                    unsafe { device::ld(rs.wrapping_add(i + lc * lds) as *const T, 0) }
                } else {
                    T::ZERO
                };
                // SAFETY: as the load at the start; column lc is this warp's alone.
                unsafe { device::st(self.top_of(lc), i, x) };
                i += WARP;
            }
            if !BAND && k >= n {
                let mut i = lane;
                while i < p {
                    // SAFETY: as the load above (a column of e, this warp's alone).
                    unsafe {
                        device::st(
                            self.tail_of(lc),
                            i,
                            device::ld(us.wrapping_add(i + lc * p) as *const T, 0),
                        )
                    };
                    i += WARP;
                }
            }
            lc += nw;
        }
    }
}

/// Generates reflector k = c0 + lc (column lc is this warp's and has had reflectors
/// 0..k applied) and publishes it: to the block through `sready`, to later blocks
/// through u(:, k), tau[k] and the release store of flags[k] = `set`.
///
/// # Safety
/// The full warp calls it convergently; column lc (top row k and tail) is this warp's
/// alone; `ts` holds the block's τ slots and `sready` its shared counter; k < n.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn publish_reflector<T: Float, const BAND: bool, const C: usize>(
    cols: &Cols<T, BAND>,
    lc: usize,
    lane: usize,
    u: *mut T,
    ldu: usize,
    tau: *mut T,
    ts: *mut T,
    sready: *mut u32,
    flags: *mut u32,
    set: u32,
) {
    let (c0, p) = (cols.c0, cols.p);
    let k = c0 + lc;
    let col = cols.tail_at(k, lc);
    // SAFETY: warp-convergent; column lc (top row k and tail) is this warp's alone.
    let t = unsafe { generate::<T, C>(cols.top_at(k, lc), col, p) };
    let mut i = lane;
    while i < p {
        // SAFETY: i < p: the lane's own element of the tail (written by this lane in
        // `generate`) and column k of U, which only this warp writes.
        unsafe { device::st(u, i + k * ldu, device::ld(col as *const T, i)) };
        i += WARP;
    }
    if lane == 0 {
        // SAFETY: one writer each; ts[lc] and tau[k] belong to column lc.
        unsafe {
            device::st(ts, lc, t);
            device::st(tau, k, t);
        }
    }
    // SAFETY: convergent warp: orders every lane's writes above (shared tail, U, τ)
    // before lane 0's fence and flag stores below.
    unsafe { device::sync_warp() };
    if lane == 0 {
        device::fence_cta();
        // SAFETY: the shared counter (one writer at a time: reflectors are generated
        // in order, each after the previous one was seen); flags[k] is valid (k < n).
        unsafe {
            sready.write_volatile((lc + 1) as u32);
            device::st_release_u32(flags.wrapping_add(k), set);
        }
    }
}

/// Reflectors of a group of `row_insert_pairs`: one block barrier a group, and each
/// trailing column read and written once a group.
pub const PAIRS_NB: usize = 8;

/// Largest n of `row_insert_pairs`: a column's rows in 16 registers a lane.
pub const PAIRS_MAX_N: usize = 16 * WARP;

/// `row_insert_pairs`: the QRs of many stacked pairs of triangles [R_a d_a; R_b d_b] (each
/// R n×n upper triangular, each d n×q), one block a pair: the tree combine's level of pair
/// QRs in one launch (docs/algorithms.md#row-insertion with U = R_b;
/// docs/scaling.md#the-tree-combine). Reflector j is v = [e_j; y_j] with y_j in rows 0..=j
/// of R_b's column j: column k of R_b stays zero below row k under the reflectors 0..k, so
/// reflector j touches row j of [R_a d_a] and rows 0..=j of [R_b d_b] only.
///
/// The reflectors come in groups of [`PAIRS_NB`]. While the block applies group g, one warp
/// (the panel warp, g + 1 mod warps) applies it to the columns of group g + 1, copies them
/// into the shared panel of parity g + 1 and factorises them there (the `generate` and
/// `apply_col` of `row_insert_qr`), writing their R block; the other warps take the later
/// columns in turn, each held in registers (row i at lane i mod 32) while the group's
/// reflectors are applied from the shared panel, so a column is read and written once a
/// group. One block barrier a group orders everything.
///
/// Outputs: `packs[i]` holds the pair's [R d] (R upper triangular in rows 0..n; its strict
/// lower triangle is neither read nor written), `partners[i]` the transformed d_b in its
/// last q columns (the rows the pair's QR moves below n; its first n columns are scratch),
/// and `norms[i·q + c]` the 2-norm of column c of that transformed d_b (scaled sum of
/// squares).
///
/// Launch: grid (pairs, 1), block a multiple of 32 from 64 to 1024, dynamic shared memory
/// (2·PAIRS_NB·(n + PAIRS_NB) + 2·PAIRS_NB)·size_of::<T>() bytes.
///
/// # Safety
/// Launch shape as documented; 1 ≤ n ≤ [`PAIRS_MAX_N`]; `packs` and `partners` readable for
/// `pairs` device pointers each, every one read-writable n×(n+q) with leading dimension
/// `ld` ≥ n, no two of the 2·pairs matrices overlapping; `norms` writable for pairs·q
/// elements, overlapping none of them.
#[inline(always)]
pub unsafe fn pairs<T: Float>(
    packs: *const *mut T,
    partners: *const *mut T,
    ld: usize,
    n: usize,
    q: usize,
    norms: *mut T,
) {
    // SAFETY: forwarded; S slots a lane hold n ≤ 32·S rows.
    unsafe {
        if n <= WARP {
            pairs_with::<T, 1>(packs, partners, ld, n, q, norms)
        } else if n <= 4 * WARP {
            pairs_with::<T, 4>(packs, partners, ld, n, q, norms)
        } else {
            pairs_with::<T, 16>(packs, partners, ld, n, q, norms)
        }
    }
}

/// A pair's two matrices and their geometry.
#[derive(Clone, Copy)]
struct Pair<T> {
    /// [R_a d_a] (the pack), n×(n+q).
    a: *mut T,
    /// [R_b d_b] (the partner), n×(n+q).
    b: *mut T,
    /// Their leading dimension.
    ld: usize,
    /// Rows of a panel column: [`PAIRS_NB`] tops, then n tail rows.
    ldp: usize,
}

/// The body of [`pairs`] with S register slots a lane (n ≤ 32·S).
///
/// # Safety
/// As [`pairs`], with n ≤ 32·S.
#[inline(always)]
unsafe fn pairs_with<T: Float, const S: usize>(
    packs: *const *mut T,
    partners: *const *mut T,
    ld: usize,
    n: usize,
    q: usize,
    norms: *mut T,
) {
    let pair = device::block_x();
    let tid = device::thread_linear();
    let (warp, lane) = (tid / WARP, tid % WARP);
    let nw = device::block_threads() / WARP;
    let ncol = n + q;
    // SAFETY: `pair` < pairs (grid), the pointer arrays hold `pairs` entries each.
    let (a, b) = unsafe { (device::ld(packs, pair), device::ld(partners, pair)) };
    let m = Pair {
        a,
        b,
        ld,
        ldp: n + PAIRS_NB,
    };
    // Shared: the panels of the two parities (PAIRS_NB columns of ldp rows each), then
    // their τ (PAIRS_NB each).
    let sh = device::shared::<T>();
    let panel = |par: usize| sh.wrapping_add(par * PAIRS_NB * m.ldp);
    let taus = |par: usize| sh.wrapping_add(2 * PAIRS_NB * m.ldp + par * PAIRS_NB);
    if warp == 0 {
        // SAFETY: warp-convergent; group 0's columns are warp 0's alone until the barrier
        // (no reflectors to apply yet: j0 = j1 = 0).
        unsafe { next_panel::<T, S>(m, (0, 0, PAIRS_NB.min(n)), panel(1), taus(1), panel(0), taus(0), lane) };
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let mut j0 = 0;
    let mut g = 0;
    while j0 < n {
        let j1 = (j0 + PAIRS_NB).min(n);
        let j2 = (j1 + PAIRS_NB).min(n);
        let par = g % 2;
        let (pv, tv) = (panel(par) as *const T, taus(par) as *const T);
        let pw = (g + 1) % nw;
        if warp == pw {
            if j1 < n {
                // SAFETY: warp-convergent; columns j1..j2 are this warp's alone this group,
                // the panel of parity 1 − par was last read in the previous group.
                unsafe { next_panel::<T, S>(m, (j0, j1, j2), pv, tv, panel(1 - par), taus(1 - par), lane) };
            }
        } else {
            // The later columns, in turn over the other warps.
            let mut k = j2 + if warp > pw { warp - 1 } else { warp };
            while k < ncol {
                // SAFETY: warp-convergent; column k is this warp's alone this group; its
                // rows 0..j1 are all ≤ k (k ≥ j1).
                unsafe {
                    let (x, top) = apply_group::<T, S>(m, k, j1, (j0, j1), pv, tv, lane);
                    store_col::<T, S>(m, k, j1, (j0, j1), &x, top, lane);
                }
                k += nw - 1;
            }
        }
        // SAFETY: block-uniform barrier (every thread runs every group).
        unsafe { device::sync_threads() };
        j0 = j1;
        g += 1;
    }
    let mut c = warp;
    while c < q {
        let col = b.wrapping_add((n + c) * ld) as *const T;
        // SAFETY: warp-convergent; after the last barrier nobody writes B; column n + c of
        // B holds n rows.
        let norm = unsafe {
            if n <= WARP {
                scaled_norm::<T, 1>(col, n, lane)
            } else {
                scaled_norm::<T, CHUNK>(col, n, lane)
            }
        }
        .unwrap_or(T::ZERO);
        if lane == 0 {
            // SAFETY: pair < pairs, c < q: in bounds; one writer.
            unsafe { device::st(norms, pair * q + c, norm) };
        }
        c += nw;
    }
}

/// Column k of the pair with B's rows 0..rows in registers (row i at lane i mod 32, slot
/// i / 32; rows past k read as zero) and A(j0..j1, k) at lanes 0..j1 − j0, after the
/// reflectors j0..j1 (panel column r: v tail from row [`PAIRS_NB`], τ in `tv[r]`).
///
/// # Safety
/// The full warp calls convergently; column k of both matrices is this warp's alone; rows
/// ≤ 32·S; the panel holds the tails of reflectors j0..j1 (reflector j: j + 1 rows).
#[inline(always)]
unsafe fn apply_group<T: Float, const S: usize>(
    m: Pair<T>,
    k: usize,
    rows: usize,
    (j0, j1): (usize, usize),
    pv: *const T,
    tv: *const T,
    lane: usize,
) -> ([T; S], T) {
    let col = m.b.wrapping_add(k * m.ld) as *const T;
    let mut x = [T::ZERO; S];
    for (s, xs) in x.iter_mut().enumerate() {
        let i = s * WARP + lane;
        if i < rows && i <= k {
            // SAFETY: i < rows ≤ n: in the column.
            *xs = unsafe { device::ld(col, i) };
        }
    }
    let mut top = T::ZERO;
    if lane < j1 - j0 {
        // SAFETY: row j0 + lane < j1 ≤ n of column k.
        top = unsafe { device::ld(m.a as *const T, j0 + lane + k * m.ld) };
    }
    for r in 0..j1 - j0 {
        let j = j0 + r;
        let v = pv.wrapping_add(r * m.ldp + PAIRS_NB);
        // SAFETY: the panel's τ slot r (contract).
        let t = unsafe { device::ld(tv, r) };
        let mut acc = T::ZERO;
        for (s, xs) in x.iter().enumerate() {
            let i = s * WARP + lane;
            if i <= j {
                // SAFETY: i ≤ j: a row of reflector j's tail.
                acc = unsafe { device::ld(v, i) }.mul_add(*xs, acc);
            }
        }
        // SAFETY: convergent warp (the loops above are warp-uniform).
        let (sum, head) = unsafe { (warp_allsum(acc), top.shfl_idx(r as u32)) };
        if t != T::ZERO {
            let tw = t.mul(head.add(sum));
            if lane == r {
                top = head.sub(tw);
            }
            for (s, xs) in x.iter_mut().enumerate() {
                let i = s * WARP + lane;
                if i <= j {
                    // SAFETY: as above.
                    *xs = tw.neg().mul_add(unsafe { device::ld(v, i) }, *xs);
                }
            }
        }
    }
    (x, top)
}

/// Writes column k's B rows 0..rows from `x` and A(j0..j1, k) from `top` (as
/// [`apply_group`] holds them).
///
/// # Safety
/// As [`apply_group`]; rows ≤ k + 1.
#[inline(always)]
unsafe fn store_col<T: Float, const S: usize>(
    m: Pair<T>,
    k: usize,
    rows: usize,
    (j0, j1): (usize, usize),
    x: &[T; S],
    top: T,
    lane: usize,
) {
    let col = m.b.wrapping_add(k * m.ld);
    for (s, xs) in x.iter().enumerate() {
        let i = s * WARP + lane;
        if i < rows {
            // SAFETY: i < rows ≤ n: in the column, this lane's element.
            unsafe { device::st(col, i, *xs) };
        }
    }
    if lane < j1 - j0 {
        // SAFETY: row j0 + lane < j1 ≤ n of column k; one writer a row.
        unsafe { device::st(m.a, j0 + lane + k * m.ld, top) };
    }
}

/// The panel warp's work for the group of columns j1..j2: applies reflectors j0..j1 (panel
/// `pv`, τ `tv`) to each column, writes its rows j0..j1 of A, copies it into the panel `np`
/// (tops A(j1.., k), zero below the diagonal; tail B(0..j2, k), zero past k), factorises
/// the panel there (τ into `nt`) and writes the group's R block A(j1..j2, j1..j2) (upper
/// triangle).
///
/// # Safety
/// The full warp calls convergently; columns j1..j2 of both matrices, `np` and `nt` are
/// this warp's alone until the next block barrier; j2 − j1 ≤ [`PAIRS_NB`], j2 ≤ n ≤ 32·S.
#[inline(always)]
unsafe fn next_panel<T: Float, const S: usize>(
    m: Pair<T>,
    (j0, j1, j2): (usize, usize, usize),
    pv: *const T,
    tv: *const T,
    np: *mut T,
    nt: *mut T,
    lane: usize,
) {
    for k in j1..j2 {
        // SAFETY: contract (column k is this warp's; rows past k read as zero).
        let (x, top) = unsafe { apply_group::<T, S>(m, k, j2, (j0, j1), pv, tv, lane) };
        if lane < j1 - j0 {
            // SAFETY: row j0 + lane < j1 of column k; one writer a row.
            unsafe { device::st(m.a, j0 + lane + k * m.ld, top) };
        }
        let pc = np.wrapping_add((k - j1) * m.ldp);
        if lane < PAIRS_NB {
            let i = j1 + lane;
            let t = if i <= k {
                // SAFETY: row i ≤ k < n of column k (not touched by reflectors before j1).
                unsafe { device::ld(m.a as *const T, i + k * m.ld) }
            } else {
                T::ZERO
            };
            // SAFETY: top slot `lane` of the panel column.
            unsafe { device::st(pc, lane, t) };
        }
        for (s, xs) in x.iter().enumerate() {
            let i = s * WARP + lane;
            if i < j2 {
                // SAFETY: tail row i < j2 ≤ n of the panel column; this lane's element.
                unsafe { device::st(pc, PAIRS_NB + i, *xs) };
            }
        }
    }
    // SAFETY: convergent warp: the copies above (tops by lanes 0..NB, tail rows by lane
    // i mod 32) are seen by every lane below.
    unsafe { device::sync_warp() };
    let w = j2 - j1;
    for r in 0..w {
        let p = j1 + r + 1;
        let col = np.wrapping_add(r * m.ldp);
        let tail = col.wrapping_add(PAIRS_NB);
        // SAFETY: convergent warp; the panel is this warp's alone; tail holds p ≤ j2 rows.
        let t = unsafe {
            if p <= WARP {
                generate::<T, 1>(col.wrapping_add(r), tail, p)
            } else {
                generate::<T, CHUNK>(col.wrapping_add(r), tail, p)
            }
        };
        if lane == 0 {
            // SAFETY: one writer.
            unsafe { device::st(nt, r, t) };
        }
        for c in r + 1..w {
            let cc = np.wrapping_add(c * m.ldp);
            // SAFETY: as above; column c's top row r and p tail rows.
            unsafe {
                if p <= WARP {
                    apply_col::<T, 1>(cc.wrapping_add(r), cc.wrapping_add(PAIRS_NB), tail, t, p)
                } else {
                    apply_col::<T, CHUNK>(cc.wrapping_add(r), cc.wrapping_add(PAIRS_NB), tail, t, p)
                }
            };
        }
    }
    // SAFETY: convergent warp: lane 0's top writes (β, applied tops) are seen below.
    unsafe { device::sync_warp() };
    for c in 0..w {
        let mut r = lane;
        while r <= c {
            // SAFETY: panel top row r ≤ c < PAIRS_NB; A(j1 + r, j1 + c) in the upper
            // triangle of the group's block; one writer each.
            unsafe {
                device::st(
                    m.a,
                    j1 + r + (j1 + c) * m.ld,
                    device::ld(np as *const T, c * m.ldp + r),
                )
            };
            r += WARP;
        }
    }
}
