//! One-launch Householder panel factorisation (the panel of
//! docs/algorithms.md#blocked-householder-qr, fused): the whole column loop of a rows×jb
//! panel — scaled norm, reflector, its
//! application to the rest of the panel, and T's column — in one cooperative launch.
//!
//! Each block owns a slab of `rpb` consecutive panel rows (kept in shared memory when
//! `in_shared` ≠ 0, else worked on in place in global memory). Step k (k = 0..=jb):
//! every block publishes, for its rows, the partial quantities of column k
//! (its scale s_b, a power of two, Σ(x/s_b)², and Σ(x/s_b)·A(:, c) for c > k) and of
//! T's column k−1 (V(:, i)ᵀ v_{k−1}, i < k−1); the owner of row k publishes row k; one
//! grid barrier; then every block combines the partials (same order in every block, so
//! all agree bit for bit), forms β, τ and w = vᵀA(:, k+1..jb) as `householder_house` +
//! `panel_apply` do (the robust `house` of docs/algorithms.md#householder-vectors,
//! scaled norm), and updates its own rows.
//! Block 0 builds T (LAPACK `larft` forward, τ ≥ 0). At the end every block writes its
//! rows of R (exact zeros below the diagonal) and of V
//! (explicit unit diagonal and zeros above it). A `band` limits reflector k to rows
//! k..=k+band (docs/algorithms.md#column-deletion).
//!
//! Latency is what this kernel fights (one grid barrier per column), so a step has four
//! block barriers (the two of the grid barrier, one after the combination, one after
//! the update) and one round of global loads after the grid barrier:
//! * the slab's scale is a power of two found by every warp on its own (no block
//!   reduction; x/s_b and s_b/S are exact); it and S = max_b s_b are integer maxima
//!   of order keys ([`Pow2::max_key`]), one `redux.sync` each instead of five
//!   shuffle rounds; the combined D_c = Σ x·A(:, c) is kept divided by S until it
//!   meets 1/(α − β), so it neither overflows nor underflows where x² would;
//! * v_k = x·(1/(α − β)) is formed where it is used, and column k is scaled in place
//!   during the next step's update, so the update needs no barrier of its own; the
//!   diagonal row (v = 1) is split off the update loop;
//! * indices are 32-bit (the slab variant addresses shared memory with 32-bit offsets);
//! * T's column is summed by eight threads a row while the grid barrier completes.

use crate::device::{self, Float, WARP};
use crate::reduce;

/// Runs `$body` once per listed index with `$u` bound to it, so that arrays indexed by
/// `$u` stay in registers (LLVM does not unroll loops around warp shuffles itself, and a
/// dynamically indexed array lives in local memory).
macro_rules! unroll {
    ([$($i:literal),*], |$u:ident| $body:block) => {
        $( { let $u: usize = $i; $body } )*
    };
}

/// Widest panel the kernel takes (partials hold 2·jb + 2 quantities per block).
pub const MAX_JB: usize = 64;
/// Blocks per lane in the post-barrier reductions: at most 32·LANE_BLOCKS blocks.
pub const LANE_BLOCKS: usize = 4;
/// Quantities a warp reduces at once before the grid barrier.
const UNROLL: usize = 4;
/// Quantities a warp combines at once after the grid barrier (15 warps × 5 ≥ 2·MAX_JB
/// − 1 jobs of block 0: one round).
const CUNROLL: usize = 5;
/// Columns a warp updates per pass over its rows (16 warps × 4 ≥ MAX_JB − 1).
const CPW: usize = 4;
const _: () = assert!(UNROLL == 4 && CUNROLL == 5 && LANE_BLOCKS == 4);
/// Entries of the published row k that a lane of warp 0 fetches (32 lanes × 2 ≥ MAX_JB).
const HV_PER_LANE: usize = MAX_JB / WARP;
/// Shared scratch after the panel slab, in `T`s, besides T itself (jb·jb): 32 (block
/// reduction, in-place variant) + 8 (scalars) + 2·MAX_JB (combined D_c, then y) +
/// MAX_JB (τ) + MAX_JB (the published row k) + MAX_JB (row-stripe partial sums).
pub const SCRATCH: usize = 32 + 8 + 5 * MAX_JB;

/// Power-of-two scaling of a non-negative magnitude (the scaled norms of
/// docs/algorithms.md#householder-vectors).
pub trait Pow2: Float {
    /// (s, 1/s) with s = 2^e the largest power of two ≤ x, e clamped so that both s
    /// and 1/s are normal numbers (x subnormal: s is the smallest normal; x ≥ 2^EMAX:
    /// s = 2^(EMAX−1)); x = 0 gives (0, 0), a non-finite x gives (x, 0). For every
    /// finite y with |y| ≤ x, y·(1/s) is exact (or underflows harmlessly) and below 4.
    fn pow2_scale(self) -> (Self, Self);
    /// Order key of |self| for a one-instruction warp max (`redux.sync.max.u32`): f64
    /// its high word with bit 0 set when the low word is not zero, f32 its bits; 0 for
    /// a NaN (ignored, as IEEE maxNum does). |x| ≤ |y| (neither NaN) gives key(x) ≤
    /// key(y), and keys differ only where the magnitudes do.
    fn max_key(self) -> u32;
    /// A magnitude with the key `k`: for k = max_key(m), m ≥ 0 not NaN, it has m's
    /// exponent, is 0 iff m is and infinite iff m is, so its `pow2_scale` is m's; for m
    /// 0, ∞ or a power of two (an f64's low word 0) it is m itself.
    fn from_max_key(k: u32) -> Self;
}

impl Pow2 for f64 {
    #[inline(always)]
    fn pow2_scale(self) -> (Self, Self) {
        if self == 0.0 || !self.is_finite() {
            return (self, 0.0);
        }
        let e = ((self.to_bits() >> 52) & 0x7ff).clamp(1, 2045);
        (f64::from_bits(e << 52), f64::from_bits((2046 - e) << 52))
    }
    #[inline(always)]
    fn max_key(self) -> u32 {
        let bits = self.to_bits();
        let k = ((bits >> 32) as u32 & 0x7fff_ffff) | (bits as u32 != 0) as u32;
        if k > 0x7ff0_0000 { 0 } else { k }
    }
    #[inline(always)]
    fn from_max_key(k: u32) -> Self {
        f64::from_bits((k as u64) << 32)
    }
}

impl Pow2 for f32 {
    #[inline(always)]
    fn pow2_scale(self) -> (Self, Self) {
        if self == 0.0 || !self.is_finite() {
            return (self, 0.0);
        }
        let e = ((self.to_bits() >> 23) & 0xff).clamp(1, 253);
        (f32::from_bits(e << 23), f32::from_bits((254 - e) << 23))
    }
    #[inline(always)]
    fn max_key(self) -> u32 {
        let k = self.to_bits() & 0x7fff_ffff;
        if k > 0x7f80_0000 { 0 } else { k }
    }
    #[inline(always)]
    fn from_max_key(k: u32) -> Self {
        f32::from_bits(k)
    }
}

/// T's column q = −τ_q·T(0:q, 0:q)·y, T(q, q) = τ_q, zeros below (LAPACK `larft`
/// forward, columnwise), in shared memory (ld jb): eight consecutive threads share a
/// row i (strided terms, then a fixed butterfly), so a row costs ⌈q/8⌉ steps.
///
/// # Safety
/// Called by every thread of the block (full warps, block-uniform); `tsm` holds jb×jb
/// with columns < q complete and published by a block barrier; `y` holds q values,
/// `taus` q + 1; nobody writes them meanwhile.
#[inline(always)]
unsafe fn t_column<T: Float>(tsm: *mut T, jb: u32, q: u32, y: *const T, taus: *const T) {
    let tid = device::thread_linear() as u32;
    let per_pass = device::block_threads() as u32 / 8;
    let part = tid % 8;
    // SAFETY: q < jb entries of τ.
    let tq = unsafe { device::ld(taus, q as usize) };
    let mut base = 0u32;
    while base < jb {
        let i = base + tid / 8;
        let mut acc = T::ZERO;
        if i < q {
            let mut kk = i + part;
            while kk < q {
                // SAFETY: T(i, kk), kk < q < jb, complete; y[kk] readable.
                acc = unsafe {
                    device::ld(tsm as *const T, (i + kk * jb) as usize)
                        .mul_add(device::ld(y, kk as usize), acc)
                };
                kk += 8;
            }
        }
        // SAFETY: `base` is block-uniform, so every lane of the warp is here.
        unsafe {
            acc = acc.add(acc.shfl_xor(4));
            acc = acc.add(acc.shfl_xor(2));
            acc = acc.add(acc.shfl_xor(1));
        }
        if part == 0 && i < jb {
            let val = if i < q {
                tq.neg().mul(acc)
            } else if i == q {
                tq
            } else {
                T::ZERO
            };
            // SAFETY: T(i, q), i < jb: one writer (the row's first thread); nobody reads
            // column q before the next block barrier.
            unsafe { device::st(tsm, (i + q * jb) as usize, val) };
        }
        base += per_pass;
    }
}

/// A block's slab of the panel: rows rs.. of the panel at `p` with leading dimension
/// `ld`, in shared memory (`SHARED`, 32-bit offsets) or in global memory.
#[derive(Clone, Copy)]
struct Slab<T, const SHARED: bool> {
    p: *mut T,
    ld: usize,
    rs: u32,
}

impl<T: Copy, const SHARED: bool> Slab<T, SHARED> {
    /// Offset of P(g, c), g a panel row of this slab.
    #[inline(always)]
    fn off(self, g: u32, c: u32) -> usize {
        if SHARED {
            (g - self.rs + c * self.ld as u32) as usize
        } else {
            (g - self.rs) as usize + c as usize * self.ld
        }
    }

    /// P(g, c).
    ///
    /// # Safety
    /// g is a row of this slab, c < jb, and no other thread writes P(g, c) meanwhile.
    #[inline(always)]
    unsafe fn ld(self, g: u32, c: u32) -> T {
        // SAFETY: inside the slab (caller's contract), race-free.
        unsafe { device::ld(self.p as *const T, self.off(g, c)) }
    }

    /// P(g, c) = val.
    ///
    /// # Safety
    /// As [`Self::ld`], and no other thread reads or writes P(g, c) meanwhile.
    #[inline(always)]
    unsafe fn st(self, g: u32, c: u32, val: T) {
        // SAFETY: inside the slab (caller's contract), one writer.
        unsafe { device::st(self.p, self.off(g, c), val) }
    }
}

/// `fused_panel_qr`: factors the panel `a` (rows×jb, ld `lda`, rows ≥ jb) in place.
/// Outputs: R in the upper triangle of `a` with exact zeros below; V (rows×jb, ld
/// `ldv`) unit lower trapezoidal with explicit 1s and 0s; `tau[0..jb)`; T (jb×jb, ld
/// `ldt`) upper triangular with zeros below. Reflector k acts on rows
/// k..min(rows, k + band + 1) (pass band ≥ rows for none).
///
/// Launch: cooperative, grid B = ⌈rows / rpb⌉ ≤ 32·[`LANE_BLOCKS`] blocks (1-D, all
/// co-resident), block 512 threads (the entry carries `.maxntid 512, 1, 1`); dynamic
/// shared memory (rpb·jb·[in_shared ≠ 0] + [`SCRATCH`] + jb·jb)·size_of::<T>() bytes.
/// `partials` holds 2·B·(2·jb + 2) `T`s and `head` 2·jb `T`s (scratch, any contents);
/// `*counter` equals `bar_base` at launch and ends at `bar_base + (jb + 1)·B`.
///
/// # Safety
/// Launch shape as documented; 1 ≤ jb ≤ [`MAX_JB`], jb ≤ rows < 2³¹, rpb·B < 2³¹
/// (32-bit row indices), and with in_shared ≠ 0 rpb·jb + jb·jb + [`SCRATCH`] < 2³²; `a`
/// read-writable rows×jb (ld ≥ rows), `v` writable rows×jb (ld ≥ rows), `tau` writable
/// jb, `t` writable jb×jb (ld ≥ jb), `partials`, `head`, `counter` as above; no two of
/// these overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn qr<T: Pow2>(
    a: *mut T,
    lda: usize,
    rows: usize,
    jb: usize,
    band: usize,
    v: *mut T,
    ldv: usize,
    tau: *mut T,
    t: *mut T,
    ldt: usize,
    partials: *mut T,
    head: *mut T,
    counter: *mut u32,
    bar_base: u32,
    rpb: usize,
    in_shared: u32,
) {
    let args = Args {
        a,
        lda,
        rows,
        jb,
        band,
        v,
        ldv,
        tau,
        t,
        ldt,
        partials,
        head,
        counter,
        bar_base,
        rpb,
    };
    // SAFETY: forwarded (the caller's contract); `in_shared` picks the variant whose
    // shared memory the launch provides.
    unsafe {
        if in_shared != 0 {
            qr_impl::<T, true>(&args);
        } else {
            qr_impl::<T, false>(&args);
        }
    }
}

/// The arguments of [`qr`].
struct Args<T> {
    a: *mut T,
    lda: usize,
    rows: usize,
    jb: usize,
    band: usize,
    v: *mut T,
    ldv: usize,
    tau: *mut T,
    t: *mut T,
    ldt: usize,
    partials: *mut T,
    head: *mut T,
    counter: *mut u32,
    bar_base: u32,
    rpb: usize,
}

/// [`qr`] with the slab in shared memory (`SHARED`) or in place in global memory.
///
/// # Safety
/// As [`qr`], with `SHARED` = (in_shared ≠ 0).
#[inline(always)]
unsafe fn qr_impl<T: Pow2, const SHARED: bool>(x: &Args<T>) {
    let (a, lda, v, ldv, tau, t, ldt) = (x.a, x.lda, x.v, x.ldv, x.tau, x.t, x.ldt);
    let (partials, head, counter, bar_base) = (x.partials, x.head, x.counter, x.bar_base);
    let nb = device::grid_blocks() as u32;
    let b = device::block_x() as u32;
    let tid = device::thread_linear() as u32;
    let nt = device::block_threads() as u32;
    let w32 = WARP as u32;
    let (lane, warp, nwarps) = (tid % w32, tid / w32, nt / w32);
    let rows = x.rows as u32;
    let jb = x.jb as u32;
    let band = x.band.min(x.rows) as u32;
    let rs = (b as usize * x.rpb).min(x.rows) as u32;
    let re = (rs as usize + x.rpb).min(x.rows) as u32;
    let width = 2 * jb + 2;

    let smem = device::shared::<T>();
    // The slab: shared memory (ld rpb) or the panel itself (ld lda), row rs first.
    let (p, ldp) = if SHARED {
        (smem, x.rpb)
    } else {
        (a.wrapping_add(rs as usize), lda)
    };
    let scratch = if SHARED {
        smem.wrapping_add(x.rpb * x.jb)
    } else {
        smem
    };
    let red = scratch; // 32
    let misc = scratch.wrapping_add(32); // 8
    let qv = scratch.wrapping_add(40); // 2·MAX_JB
    let taus = scratch.wrapping_add(40 + 2 * MAX_JB); // MAX_JB
    let hv = scratch.wrapping_add(40 + 3 * MAX_JB); // MAX_JB
    let pst = scratch.wrapping_add(40 + 4 * MAX_JB); // MAX_JB
    let tsm = scratch.wrapping_add(SCRATCH); // jb·jb (block 0)

    let sl = Slab::<T, SHARED> { p, ld: ldp, rs };
    let cx = Ctx {
        sl,
        nb,
        b,
        tid,
        nt,
        lane,
        warp,
        nwarps,
        w32,
        rows,
        jb,
        band,
        rs,
        re,
        width,
        red,
        misc,
        qv,
        taus,
        hv,
        pst,
        tau,
    };

    // SAFETY: the slab is this block's (contract); shared memory as the launch gives.
    if SHARED {
        unsafe { load_slab(&cx, a, lda) };
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };

    // 1/(α − β) of the previous reflector: its column is scaled during this step's update.
    let mut inv_prev = T::ZERO;
    for k in 0..=jb {
        let st = Step::new(&cx, k, partials, head);
        // SAFETY (of the three phases): every thread of every block runs the same steps
        // (block and grid barriers inside); the launch contract of [`qr`].
        unsafe { publish_step(&cx, &st, inv_prev) };
        // SAFETY: cooperative launch, every thread of every block runs the same steps.
        unsafe { device::grid_arrive(counter) };
        if b == 0 && k >= 2 {
            // While the barrier completes: T's column k − 2 from the y of step k − 1
            // (qv[jb..], rewritten only after this barrier).
            // SAFETY: block-uniform branch; tsm/qv/taus as `t_column` requires.
            unsafe {
                t_column(
                    tsm,
                    jb,
                    k - 2,
                    qv.wrapping_add(x.jb) as *const T,
                    taus as *const T,
                )
            };
        }
        // SAFETY: as `grid_arrive` above.
        unsafe { device::grid_wait(counter, bar_base.wrapping_add((k + 1) * nb)) };

        unsafe { combine_step(&cx, &st) };
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        inv_prev = unsafe { apply_step(&cx, &st, inv_prev) };
        // SAFETY: block-uniform barrier (the update and the scaling done before the next
        // step reads the panel).
        unsafe { device::sync_threads() };
    }

    // SAFETY: every thread of the block, after the last step's barrier.
    unsafe {
        store_t(&cx, tsm, t, ldt);
        write_back(&cx, a, lda, v, ldv);
    }
}

/// The per-launch values the phases of [`qr_impl`] share: the slab, this block and
/// thread, the panel's geometry, the shared scratch (but T's, block 0's alone) and the
/// τ output.
#[derive(Clone, Copy)]
struct Ctx<T, const SHARED: bool> {
    sl: Slab<T, SHARED>,
    nb: u32,
    b: u32,
    tid: u32,
    nt: u32,
    lane: u32,
    warp: u32,
    nwarps: u32,
    w32: u32,
    rows: u32,
    jb: u32,
    band: u32,
    rs: u32,
    re: u32,
    width: u32,
    red: *mut T,
    misc: *mut T,
    qv: *mut T,
    taus: *mut T,
    hv: *mut T,
    pst: *mut T,
    tau: *mut T,
}

impl<T, const SHARED: bool> Ctx<T, SHARED> {
    /// Calls `f(i, c)` for the rows lo ≤ i < hi of every column c < jb: warp w takes
    /// the columns w, w + nwarps, …, its lanes the rows.
    #[inline(always)]
    fn by_warp_columns(&self, lo: u32, hi: u32, mut f: impl FnMut(u32, u32)) {
        let mut c = self.warp;
        while c < self.jb {
            let mut i = lo + self.lane;
            while i < hi {
                f(i, c);
                i += self.w32;
            }
            c += self.nwarps;
        }
    }
}

/// Step k of [`qr_impl`]: its partials buffer `part` and row-k buffer `hrow` (buffer
/// k mod 2), reflector k's tail rows [t0, t1) of this slab, reflector q = k − 1's rows
/// end `hi_q`, and the quantity counts ncol (x's: 1 + (c − k), c = k..jb) and ny (T's y:
/// jb + 1 + i, i < k − 1).
#[derive(Clone, Copy)]
struct Step<T> {
    k: u32,
    part: *mut T,
    hrow: *mut T,
    t0: u32,
    t1: u32,
    q: u32,
    hi_q: u32,
    ncol: u32,
    ny: u32,
}

impl<T: Copy> Step<T> {
    /// Step k's values for the block of `cx`.
    #[inline(always)]
    fn new<const SHARED: bool>(
        cx: &Ctx<T, SHARED>,
        k: u32,
        partials: *mut T,
        head: *mut T,
    ) -> Self {
        let (nb, rows, jb, band, rs, re) = (cx.nb, cx.rows, cx.jb, cx.band, cx.rs, cx.re);
        let width = cx.width;
        let buf = k & 1;
        let part = partials.wrapping_add((buf * nb * width) as usize);
        let hrow = head.wrapping_add((buf * jb) as usize);
        // Reflector k: rows k..hi_k, tail rows [t0, t1) of this slab. Reflector q = k − 1
        // (T's column): rows q..hi_q.
        let hi_k = rows.min(k + band + 1);
        let (t0, t1) = ((k + 1).max(rs), hi_k.min(re));
        let q = k.wrapping_sub(1);
        let hi_q = if k >= 1 { rows.min(k + band) } else { 0 };
        let ncol = jb - k; // quantities 1 + (c − k), c = k..jb
        let ny = k.saturating_sub(1); // quantities jb + 1 + i, i < k − 1

        Step {
            k,
            part,
            hrow,
            t0,
            t1,
            q,
            hi_q,
            ncol,
            ny,
        }
    }
}

/// Step k's publication: the slab's power-of-two scale s_b (quantity 0), row k by its
/// owner, and the partial sums Σ(x/s_b)·A(:, c) and V(:, i)ᵀv_{k−1} (quantities 1..),
/// quantity qi of block b at `part[qi·nb + b]`. Warps take UNROLL quantities each;
/// idle warps split the rows into stripes whose sums meet in `pst`.
///
/// # Safety
/// Every thread of the block calls it; the slab holds step k's panel; `part`, `hrow`
/// this step's buffers (no one reads them before the grid barrier).
#[inline(always)]
unsafe fn publish_step<T: Pow2, const SHARED: bool>(
    cx: &Ctx<T, SHARED>,
    st: &Step<T>,
    inv_prev: T,
) {
    let (sl, b, tid, nt, lane, w32, jb) = (cx.sl, cx.b, cx.tid, cx.nt, cx.lane, cx.w32, cx.jb);
    let (rs, re, red) = (cx.rs, cx.re, cx.red);
    let (k, part, hrow, t0, t1) = (st.k, st.part, st.hrow, st.t0, st.t1);
    // ---- Publish step k's partials (quantity qi of block b at part[qi·nb + b]). ----
    let (s, inv_s) = if k < jb {
        let mx = if SHARED {
            // Every warp finds the slab's max on its own (the same value in all), as
            // an integer max of order keys (one `redux.sync` for five shuffles).
            let mut mk = 0u32;
            let mut g = t0 + lane;
            while g < t1 {
                // SAFETY: slab row g, column k < jb; nobody writes the panel here.
                mk = mk.max(unsafe { sl.ld(g, k) }.max_key());
                g += w32;
            }
            // SAFETY: every lane of the warp is here.
            T::from_max_key(unsafe { device::warp_allmax_u32(mk) })
        } else {
            let mut mx = T::ZERO;
            let mut g = t0 + tid;
            while g < t1 {
                // SAFETY: slab row g, column k < jb; nobody writes the panel here.
                mx = mx.max(unsafe { sl.ld(g, k) }.abs());
                g += nt;
            }
            // SAFETY: block-uniform; `red` is 32 shared `T`s used only here.
            unsafe { reduce::block_reduce_in(red, mx, T::ZERO, reduce::warp_max::<T>) }
        };
        mx.pow2_scale()
    } else {
        (T::ZERO, T::ZERO)
    };
    if k < jb {
        if tid == 0 {
            // SAFETY: quantity 0 of this block; one writer.
            unsafe { device::st(part, b as usize, s) };
        }
        // The owner of row k publishes it (columns k..jb).
        if rs <= k && k < re {
            let mut c = k + tid;
            while c < jb {
                // SAFETY: row k is in this slab, c < jb; one writer per entry of hrow.
                unsafe { device::st(hrow, c as usize, sl.ld(k, c)) };
                c += nt;
            }
        }
    }
    // SAFETY: as this function's contract.
    unsafe { publish_sums(cx, st, inv_s, inv_prev) };
}

/// Step k's combination after the grid barrier: every block loads all blocks'
/// quantities in one round; warp 0 forms β, τ_k and 1/(α − β) (into `misc`, `taus`,
/// `tau[k]` by block 0) and stages row k's entries in `hv`; the other warps form the
/// combined D̃_c (scaled by S = max_b s_b) and, in block 0, T's y into `qv`.
///
/// # Safety
/// Every thread of the block calls it after step k's grid barrier; a block barrier
/// follows before the results are read.
#[inline(always)]
unsafe fn combine_step<T: Pow2, const SHARED: bool>(cx: &Ctx<T, SHARED>, st: &Step<T>) {
    let (nb, b, lane, warp, w32, jb) = (cx.nb, cx.b, cx.lane, cx.warp, cx.w32, cx.jb);
    let (k, part, ny) = (st.k, st.part, st.ny);
    // ---- Combine: every load of the step in one round. ----
    let nd = jb.saturating_sub(k + 1); // D_c, c = k+1..jb: quantity 2 + (c − k − 1)
    let nyb = if b == 0 { ny } else { 0 }; // y_i for T's column q (block 0 only)
    let mut sbv = [T::ZERO; LANE_BLOCKS];
    for (j, sb) in sbv.iter_mut().enumerate() {
        let bb = lane + w32 * j as u32;
        if bb < nb && k < jb {
            // SAFETY: quantity 0 of block bb, written before the grid barrier.
            *sb = unsafe { T::ld_cg(part.wrapping_add(bb as usize)) };
        }
    }
    // SAFETY: warp-uniform branches; as this function's contract.
    if warp == 0 {
        unsafe { combine_warp0(cx, st, &sbv) };
    } else {
        unsafe { combine_others(cx, st, &sbv, nd, nyb) };
    }
}

/// Step k's update: column k − 1's tail scaled by 1/(α − β) in place, β on the
/// diagonal, and A(g, c) −= τ·v_g·w_c for the columns c > k (a warp per column, CPW at
/// a time; spare warps split the rows). Returns 1/(α − β) of reflector k (the previous
/// value at the last step).
///
/// # Safety
/// Every thread of the block calls it after the combination's block barrier; a block
/// barrier follows.
#[inline(always)]
unsafe fn apply_step<T: Pow2, const SHARED: bool>(
    cx: &Ctx<T, SHARED>,
    st: &Step<T>,
    inv_prev: T,
) -> T {
    let (sl, tid, nt, lane, warp, nwarps) = (cx.sl, cx.tid, cx.nt, cx.lane, cx.warp, cx.nwarps);
    let (w32, jb, rs, re, misc, qv, hv) = (cx.w32, cx.jb, cx.rs, cx.re, cx.misc, cx.qv, cx.hv);
    let (k, t0, t1, q, hi_q) = (st.k, st.t0, st.t1, st.q, st.hi_q);
    // ---- Apply: scale v_{k−1} in place, write β, update columns c > k. ----
    if k >= 1 {
        // Column q's tail rows (q, hi_q) of this slab: nobody reads them in this
        // phase (the update reads column k and writes columns > k).
        let mut g = k.max(rs) + tid;
        let ge = hi_q.min(re);
        while g < ge {
            // SAFETY: slab row g, column q < jb; this thread is its only reader and
            // writer in this phase.
            unsafe { sl.st(g, q, sl.ld(g, q).mul(inv_prev)) };
            g += nt;
        }
    }
    if k < jb {
        // SAFETY: misc written before the barrier.
        let (beta, tk, inv, sinv) = unsafe {
            (
                device::ld(misc as *const T, 0),
                device::ld(misc as *const T, 1),
                device::ld(misc as *const T, 2),
                device::ld(misc as *const T, 3),
            )
        };
        let owns_k = rs <= k && k < re;
        if owns_k && tid == 0 {
            // SAFETY: row k is in this slab; R(k, k) = β (the update reads column k
            // only below row k); one writer.
            unsafe { sl.st(k, k, beta) };
        }
        // A(g, c) −= τ·v_g·w_c, c > k, w_c = A(k, c) + D̃_c·S/(α − β), v_k = 1 and
        // v_g = x_g·(1/(α − β)) below: a warp per column (CPW at a time), lanes over
        // rows.
        if tk != T::ZERO {
            // Warp w takes columns k + 1 + (w mod ncw) + ncw·j; with fewer columns
            // than warps, the spare warps split the rows into stripes. With every
            // warp on a column the loop runs with ncw = 16 warps and one stripe as
            // literals (see `publish!`).
            let ncols = jb - k - 1;
            macro_rules! update {
                ($ncw:expr, $stripes:expr, $stripe:expr, $cslot:expr) => {{
                    let (ncw, stripes, stripe, cslot): (u32, u32, u32, u32) =
                        ($ncw, $stripes, $stripe, $cslot);
                    let mut cb = k + 1 + cslot;
                    while cb < jb && stripe < stripes {
                        let mut tw = [T::ZERO; CPW];
                        for (j, twj) in tw.iter_mut().enumerate() {
                            let c = cb + ncw * j as u32;
                            if c < jb {
                                // SAFETY: hv[c], qv[c] written before the barrier above.
                                let w = unsafe {
                                    device::ld(hv as *const T, c as usize)
                                        .add(sinv.mul(device::ld(qv as *const T, c as usize)))
                                };
                                *twj = tk.mul(w);
                            }
                        }
                        if owns_k && lane == 0 && stripe == 0 {
                            for (j, twj) in tw.iter().enumerate() {
                                let c = cb + ncw * j as u32;
                                if c < jb {
                                    // SAFETY: row k is in this slab, c < jb; this lane is the
                                    // only one touching (k, c) in this phase.
                                    unsafe { sl.st(k, c, sl.ld(k, c).sub(*twj)) };
                                }
                            }
                        }
                        let mut g = t0 + stripe * w32 + lane;
                        while g < t1 {
                            // SAFETY: slab row g, column k (only read in this phase).
                            let vg = unsafe { sl.ld(g, k) }.mul(inv);
                            for (j, twj) in tw.iter().enumerate() {
                                let c = cb + ncw * j as u32;
                                if c < jb {
                                    // SAFETY: slab row g, column c < jb; (g, c) has one reader
                                    // and writer (this lane) in this phase.
                                    unsafe { sl.st(g, c, twj.neg().mul_add(vg, sl.ld(g, c))) };
                                }
                            }
                            g += w32 * stripes;
                        }
                        cb += ncw * CPW as u32;
                    }
                }};
            }
            if ncols >= nwarps {
                update!(nwarps, 1, 0, warp);
            } else {
                let ncw = ncols.max(1);
                update!(ncw, nwarps / ncw, warp / ncw, warp % ncw);
            }
        }
        return inv;
    }
    inv_prev
}

/// Step k's partial sums Σ(x/s_b)·A(:, c) (x scaled by `inv_s`) and V(:, i)ᵀv_{k−1}
/// (v_{k−1} below its diagonal = its column times `inv_prev`) over this slab's rows,
/// quantity qi at `part[qi·nb + b]`: warps take UNROLL quantities each; with fewer
/// than 16 such groups the idle warps split the rows into stripes, whose sums meet in
/// `pst`.
///
/// # Safety
/// As [`publish_step`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn publish_sums<T: Pow2, const SHARED: bool>(
    cx: &Ctx<T, SHARED>,
    st: &Step<T>,
    inv_s: T,
    inv_prev: T,
) {
    let (sl, nb, b, tid, lane, warp) = (cx.sl, cx.nb, cx.b, cx.tid, cx.lane, cx.warp);
    let (nwarps, w32, jb, rs, pst) = (cx.nwarps, cx.w32, cx.jb, cx.rs, cx.pst);
    let (k, part, t0, t1, q, hi_q) = (st.k, st.part, st.t0, st.t1, st.q, st.hi_q);
    let (ncol, ny) = (st.ncol, st.ny);
    let jobs = ncol + ny;
    // Rows that carry a term: x's tail [t0, t1) and v_q's rows [q, hi_q) ⊂ [q, t1).
    let r0 = if k >= 1 { q.max(rs) } else { t0 };
    let r1 = t1;
    // Warps take UNROLL quantities each; with fewer than 16 such groups, the idle
    // warps split the rows into `stripes` (partial sums then meet in `pst`). A step
    // with every warp busy runs the loop with the stripe count a literal 1 (the
    // striped loop's run-time stride and stripe tests cost the square panels'
    // 64-column steps about 1 ms in 4096², measured on the H100).
    let groups = jobs.div_ceil(UNROLL as u32).max(1);
    let stripes = if groups < nwarps { nwarps / groups } else { 1 };
    macro_rules! publish {
        ($stripes:expr, $stripe:expr, $grp:expr) => {{
            let (stripes, stripe, grp): (u32, u32, u32) = ($stripes, $stripe, $grp);
            let mut js = grp * UNROLL as u32;
            while js < jobs && stripe < stripes {
                let mut acc = [T::ZERO; UNROLL];
                let mut g = r0 + stripe * w32 + lane;
                while g < r1 {
                    // x/s_b on the tail (g > k; rows ≥ r0 ≥ rs), else 0.
                    let xs = if k < jb && g > k {
                        // SAFETY: slab row g, column k < jb; only read in this phase.
                        unsafe { sl.ld(g, k) }.mul(inv_s)
                    } else {
                        T::ZERO
                    };
                    // v_q(g): 1 on its diagonal, x·(1/(α − β)) below (column q is scaled in
                    // place only during this step's update).
                    let vq = if k >= 1 && g < hi_q {
                        if g == q {
                            T::ONE
                        } else {
                            // SAFETY: slab row g, column q < jb; only read in this phase.
                            unsafe { sl.ld(g, q) }.mul(inv_prev)
                        }
                    } else {
                        T::ZERO
                    };
                    unroll!([0, 1, 2, 3], |u| {
                        let job = js + u as u32;
                        if job < ncol {
                            let y = if job == 0 {
                                xs
                            } else {
                                // SAFETY: slab row g, column k + job < jb; only read here.
                                unsafe { sl.ld(g, k + job) }
                            };
                            acc[u] = xs.mul_add(y, acc[u]);
                        } else if job < jobs {
                            // SAFETY: slab row g, column i = job − ncol < q (V(g, i), scaled
                            // at an earlier step); only read here.
                            acc[u] = unsafe { sl.ld(g, job - ncol) }.mul_add(vq, acc[u]);
                        }
                    });
                    g += w32 * stripes;
                }
                unroll!([0, 1, 2, 3], |u| {
                    // SAFETY: `js < jobs` and `stripe` are warp-uniform; the whole warp is here.
                    let sum = unsafe { reduce::warp_sum(acc[u]) };
                    let job = js + u as u32;
                    if lane == 0 && job < jobs {
                        if stripes == 1 {
                            let qi = if job < ncol {
                                1 + job
                            } else {
                                jb + 1 + (job - ncol)
                            };
                            // SAFETY: qi < width; one writer per (quantity, block).
                            unsafe { device::st(part, (qi * nb + b) as usize, sum) };
                        } else {
                            // SAFETY: stripe·jobs + job < stripes·groups·UNROLL ≤ 16·4 = MAX_JB
                            // (stripes > 1 only when groups ≤ 8); one writer per entry.
                            unsafe { device::st(pst, (stripe * jobs + job) as usize, sum) };
                        }
                    }
                });
                js += nwarps * UNROLL as u32;
            }
        }};
    }
    if stripes == 1 {
        publish!(1, 0, warp);
    } else {
        publish!(stripes, warp / groups, warp % groups);
    }
    if stripes > 1 {
        // SAFETY: block-uniform (jobs is); the stripes' sums are in `pst`.
        unsafe { device::sync_threads() };
        if tid < jobs {
            let mut sum = T::ZERO;
            for sp in 0..stripes {
                // SAFETY: written before the barrier above, read-only until the next.
                sum = sum.add(unsafe { device::ld(pst as *const T, (sp * jobs + tid) as usize) });
            }
            let qi = if tid < ncol {
                1 + tid
            } else {
                jb + 1 + (tid - ncol)
            };
            // SAFETY: qi < width; one writer per (quantity, block).
            unsafe { device::st(part, (qi * nb + b) as usize, sum) };
        }
    }
}

/// Warp 0's part of the combination: σ from the blocks' scales and sums of squares,
/// β, τ_k and 1/(α − β) into `misc` (and τ into `taus`, `tau[k]` by block 0), and row
/// k's entries c > k into `hv`.
///
/// # Safety
/// Warp 0 calls it (whole, convergent) after step k's grid barrier; `sbv` holds this
/// lane's blocks' scales.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn combine_warp0<T: Pow2, const SHARED: bool>(
    cx: &Ctx<T, SHARED>,
    st: &Step<T>,
    sbv: &[T; LANE_BLOCKS],
) {
    let (nb, b, lane, w32, jb, misc) = (cx.nb, cx.b, cx.lane, cx.w32, cx.jb, cx.misc);
    let (taus, hv, tau) = (cx.taus, cx.hv, cx.tau);
    let (k, part, hrow) = (st.k, st.part, st.hrow);
    if k < jb {
        let mut ssv = [T::ZERO; LANE_BLOCKS];
        for (j, ss) in ssv.iter_mut().enumerate() {
            let bb = lane + w32 * j as u32;
            if bb < nb {
                // SAFETY: quantity 1 of block bb.
                *ss = unsafe { T::ld_cg(part.wrapping_add((nb + bb) as usize)) };
            }
        }
        // SAFETY: α = A(k, k), published by row k's owner before the barrier.
        let alpha = unsafe { T::ld_cg(hrow.wrapping_add(k as usize)) };
        // Row k's entries c > k for the update, loaded in this round, stored below.
        let mut hl = [T::ZERO; HV_PER_LANE];
        for (j, h) in hl.iter_mut().enumerate() {
            let c = k + 1 + lane + w32 * j as u32;
            if c < jb {
                // SAFETY: c < jb, published before the barrier.
                *h = unsafe { T::ld_cg(hrow.wrapping_add(c as usize)) };
            }
        }
        // σ = S·√(Σ_b (s_b/S)²·ss_b), S = max_b s_b (a power of two, so s_b/S is
        // exact); μ = ‖(α, σ)‖ scaled by a power of two ≥ |α|, S.
        // S as an integer max of the scales' keys (exact: s_b is 0, ∞ or a
        // power of two).
        let mut mk = 0u32;
        unroll!([0, 1, 2, 3], |j| {
            mk = mk.max(sbv[j].max_key());
        });
        // SAFETY: warp 0 complete and convergent.
        let big = T::from_max_key(unsafe { device::warp_allmax_u32(mk) });
        let (_, ib) = big.pow2_scale();
        let mut acc = T::ZERO;
        unroll!([0, 1, 2, 3], |j| {
            let r = sbv[j].mul(ib);
            acc = r.mul(r).mul_add(ssv[j], acc);
        });
        // SAFETY: warp 0 complete and convergent.
        let tsum = unsafe { reduce::warp_sum(acc) };
        if lane == 0 {
            let (beta, tk, inv) = if big == T::ZERO {
                (alpha, T::ZERO, T::ZERO)
            } else {
                let mu = if big.is_finite() && alpha.is_finite() {
                    let (s2, is2) = alpha.abs().max(big).pow2_scale();
                    let (ap, bp) = (alpha.mul(is2), big.mul(is2));
                    s2.mul(ap.mul_add(ap, bp.mul(bp).mul(tsum)).sqrt())
                } else {
                    alpha.hypot(big)
                };
                let beta = mu.copysign(alpha).neg();
                (beta, beta.sub(alpha).div(beta), T::ONE.div(alpha.sub(beta)))
            };
            // SAFETY: misc[0..3] and taus[k] (k < jb ≤ MAX_JB), one writer.
            unsafe {
                device::st(misc, 0, beta);
                device::st(misc, 1, tk);
                device::st(misc, 2, inv);
                // w_c = A(k, c) + D̃_c·S/(α − β); S/(α − β) ≤ 1 for a normal tail
                // (|α − β| ≥ σ ≥ S), and bounded for a subnormal one.
                device::st(misc, 3, big.mul(inv));
                device::st(taus, k as usize, tk);
            }
            if b == 0 {
                // SAFETY: tau[k], k < jb; block 0 lane 0 is the only writer.
                unsafe { device::st(tau, k as usize, tk) };
            }
        }
        for (j, h) in hl.iter().enumerate() {
            let c = k + 1 + lane + w32 * j as u32;
            if c < jb {
                // SAFETY: hv[c], c < jb ≤ MAX_JB: one writer (this lane).
                unsafe { device::st(hv, c as usize, *h) };
            }
        }
    }
}

/// The other warps' part of the combination: the combined D̃_c = Σ_b (s_b/S)·D_b
/// (exact weights, S = max_b s_b) and, in block 0, T's y, into `qv`, CUNROLL
/// quantities a warp at a time.
///
/// # Safety
/// Warps 1.. call it (whole) after step k's grid barrier; `sbv` holds this lane's
/// blocks' scales.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn combine_others<T: Pow2, const SHARED: bool>(
    cx: &Ctx<T, SHARED>,
    st: &Step<T>,
    sbv: &[T; LANE_BLOCKS],
    nd: u32,
    nyb: u32,
) {
    let (nb, lane, warp, nwarps, w32, jb) = (cx.nb, cx.lane, cx.warp, cx.nwarps, cx.w32, cx.jb);
    let qv = cx.qv;
    let (k, part) = (st.k, st.part);
    let cjobs = nd + nyb;
    let mut js = (warp - 1) * CUNROLL as u32;
    while js < cjobs {
        let mut vals = [[T::ZERO; LANE_BLOCKS]; CUNROLL];
        unroll!([0, 1, 2, 3, 4], |u| {
            let job = js + u as u32;
            let qi = if job < nd {
                2 + job
            } else {
                jb + 1 + (job - nd)
            };
            unroll!([0, 1, 2, 3], |j| {
                let bb = lane + w32 * j as u32;
                if bb < nb && job < cjobs {
                    // SAFETY: quantity qi < width of block bb, written before
                    // the grid barrier.
                    vals[u][j] = unsafe { T::ld_cg(part.wrapping_add((qi * nb + bb) as usize)) };
                }
            });
        });
        // D̃_c = Σ_b (s_b/S)·D_b = D_c/S (exact weights, S = max_b s_b as warp 0
        // finds it): neither D_c's overflow nor its underflow can happen. (After
        // the loads, so that they all are in flight at once.)
        let mut mk = 0u32;
        unroll!([0, 1, 2, 3], |j| {
            mk = mk.max(sbv[j].max_key());
        });
        let (_, ib) = if nd > 0 {
            // SAFETY: `nd` and `js` are warp-uniform; the whole warp is here.
            T::from_max_key(unsafe { device::warp_allmax_u32(mk) }).pow2_scale()
        } else {
            (T::ZERO, T::ZERO)
        };
        let mut wv = [T::ZERO; LANE_BLOCKS];
        unroll!([0, 1, 2, 3], |j| {
            wv[j] = sbv[j].mul(ib);
        });
        unroll!([0, 1, 2, 3, 4], |u| {
            let job = js + u as u32;
            let mut acc = T::ZERO;
            unroll!([0, 1, 2, 3], |j| {
                acc = if job < nd {
                    wv[j].mul_add(vals[u][j], acc)
                } else {
                    acc.add(vals[u][j])
                };
            });
            // SAFETY: `js < cjobs` is warp-uniform.
            let sum = unsafe { reduce::warp_sum(acc) };
            if lane == 0 && job < cjobs {
                let at = if job < nd {
                    k + 1 + job
                } else {
                    jb + (job - nd)
                };
                // SAFETY: qv index < 2·jb; one writer per entry. (qv[0..jb) holds
                // D̃_c, qv[jb..2jb) holds y.)
                unsafe { device::st(qv, at as usize, sum) };
            }
        });
        js += (nwarps - 1) * CUNROLL as u32;
    }
}

/// Copies this block's slab rows of the panel `a` (ld `lda`) into shared memory (the
/// shared-memory variant).
///
/// # Safety
/// As [`qr`]'s contract for `a`; the slab lies in this block's shared memory.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn load_slab<T: Pow2, const SHARED: bool>(cx: &Ctx<T, SHARED>, a: *mut T, lda: usize) {
    let sl = cx.sl;
    if SHARED {
        cx.by_warp_columns(cx.rs, cx.re, |g, c| {
            // SAFETY: slab row g < re ≤ rows, c < jb: inside the slab and inside `a`;
            // one writer per element.
            unsafe {
                sl.st(
                    g,
                    c,
                    device::ld(a as *const T, g as usize + c as usize * lda),
                )
            };
        });
    }
}

/// Block 0: T's last column (from the y of the last combination), then T (jb×jb, zeros
/// below) to `t` (ld `ldt`).
///
/// # Safety
/// Every thread of the block calls it after the last step's barrier; `tsm` is T's
/// shared copy (jb×jb, ld jb); `t` as [`qr`]'s contract.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_t<T: Pow2, const SHARED: bool>(
    cx: &Ctx<T, SHARED>,
    tsm: *mut T,
    t: *mut T,
    ldt: usize,
) {
    let (b, jb, qv, taus) = (cx.b, cx.jb, cx.qv, cx.taus);
    // T's last column, then T to global memory (block 0).
    if b == 0 {
        // SAFETY: block-uniform branch; y of column jb − 1 came from the last combine.
        unsafe {
            t_column(
                tsm,
                jb,
                jb - 1,
                qv.wrapping_add(jb as usize) as *const T,
                taus as *const T,
            );
            device::sync_threads();
        }
        cx.by_warp_columns(0, jb, |i, c| {
            // SAFETY: i, c < jb: inside tsm and T; one writer per element.
            unsafe {
                device::st(
                    t,
                    i as usize + c as usize * ldt,
                    device::ld(tsm as *const T, (i + c * jb) as usize),
                )
            };
        });
    }
}

/// Writes this block's rows of R (zeros below the diagonal) over `a` and of V (explicit
/// 1s on the diagonal and 0s above) into `v`.
///
/// # Safety
/// As [`qr`]'s contract for `a` and `v`; the slab is final (after the last barrier).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn write_back<T: Pow2, const SHARED: bool>(
    cx: &Ctx<T, SHARED>,
    a: *mut T,
    lda: usize,
    v: *mut T,
    ldv: usize,
) {
    let sl = cx.sl;
    // ---- Write back R (zeros below the diagonal) and V (explicit 1s and 0s). ----
    cx.by_warp_columns(cx.rs, cx.re, |g, c| {
        // SAFETY: slab row g, column c < jb; read and written by this thread only.
        let xg = unsafe { sl.ld(g, c) };
        let vx = if g < c {
            T::ZERO
        } else if g == c {
            T::ONE
        } else {
            xg
        };
        // SAFETY: g < rows, c < jb: inside `a` and `v`; each element read and
        // written by this thread only.
        unsafe {
            device::st(v, g as usize + c as usize * ldv, vx);
            device::st(
                a,
                g as usize + c as usize * lda,
                if g <= c { xg } else { T::ZERO },
            );
        }
    });
}
