//! TSQR panel with Householder reconstruction (spec §4.1 "TSQR-style panels for tall
//! shapes", issue 5): a tall rows×n panel (n ≤ [`COLS`]) is factored by a tree of small
//! Householder QRs that each read their rows once, and its compact-WY form (V, T, R) is
//! then rebuilt from the tree's explicit Q by an LU without pivoting of Q − S
//! (Ballard, Demmel, Grigori, Jacquelin, Nguyen, Solomonik, "Reconstructing Householder
//! vectors from tall-skinny QR", 2014). The host (host/src/gpu/kernels_tsqr.rs) runs:
//!
//! 1. [`leaf_qr`] on each level: leaf b is a block of [`WARPS`] warps, each chaining
//!    `kpw` blocks of 32 rows in registers ([`dense_steps`]), then a binary tree over
//!    the warps' R's; its reflectors stay in place in the level's matrix and in an
//!    auxiliary array, and its R (n×n, zeros below the diagonal) goes to rows b·n ..
//!    of the next level, until one leaf is left;
//! 2. [`leaf_apply`] from the top level down: each leaf's reflectors applied backwards
//!    to [C_b; 0], with C_b its n rows of the level above's explicit Q (the identity at
//!    the top), give that level's explicit Q; at level 0 first for leaf 0 alone;
//! 3. [`reconstruct`] (one block): with Q₁ the top n×n of level 0's Q, the LU
//!    Q₁ − S = L₁U, sᵢ = −sign of the i-th pivot's Schur value (so |uᵢᵢ| ≥ 1), gives
//!    V₁ = L₁, T = −U·S·L₁⁻ᵀ, R = S·R_tree and M = U⁻¹;
//! 4. [`leaf_apply`] on level 0 again, every leaf, with C_b·M in place of C_b (the host
//!    multiplies level 1's Q by M with one GEMM): V₂ = Q₂·M for rows ≥ n, and R (rows
//!    < n) with exact zeros below it into the panel.
//!
//! Then I − V T Vᵀ = H₁⋯Hₙ, the panel is H·[R; 0], R's diagonal has LAPACK's signs
//! (rᵢᵢ = −sign(αᵢ)·‖·‖) and τᵢ = tᵢᵢ ∈ [1, 2]: the same factorisation as the column-by-
//! column panel, to rounding.
//!
//! Layout: lane k of a warp owns column k of its current 32-row block in registers;
//! the warp's R (or, when applying, its T) is a row-major shared tile whose row j is
//! the only one step j touches; the pivot column goes through shared memory (one
//! writer, broadcast reads); global rows move coalesced through an 8-row staging tile.
//! There is no block barrier inside a chain: the warps of a block run independent
//! chains and meet only for the ⌈log₂ WARPS⌉ rounds of the in-leaf tree. Norms are
//! scaled by powers of two (spec §1.2): lane k keeps column k divided by s_k, the
//! power of two ≤ its largest entry read so far (see [`leaf_qr`]); the reflector
//! formulas are those of `householder::house`.

use crate::device::{self, Float};
use crate::fused_panel::Pow2;

/// Runs `$body` once for each r in 0..32 with `$r` bound to the literal, so that the
/// per-thread arrays indexed by it stay in registers (LLVM does not fully unroll these
/// loops by itself, and a dynamically indexed array lives in local memory).
macro_rules! rows32 {
    (|$r:ident| $body:block) => {
        rows32!(@ $r, $body, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
            18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31])
    };
    (@ $r:ident, $body:block, [$($i:literal),*]) => {
        $( { let $r: usize = $i; $body } )*
    };
}

/// Widest panel (one lane per column).
pub const COLS: usize = 32;
/// Rows of a chain block (lane k holds column k of one in registers).
pub const BR: usize = 32;
const _: () = assert!(BR == 32 && COLS == 32, "rows32! unrolls 32 rows or columns");
/// Warps of a leaf (one chain each, then a binary tree over the chains' R's).
pub const WARPS: usize = 8;
const _: () = assert!(WARPS.is_power_of_two());
/// log₂ [`WARPS`]: the rounds of the in-leaf tree.
const LOG_WARPS: u32 = WARPS.trailing_zeros();
/// Threads per block of the leaf kernels.
pub const THREADS: usize = COLS * WARPS;
/// Leading dimension of a warp's R (or T) tile, row-major (odd: lane k's column and
/// the broadcast of row j are both conflict-free).
const LDT: usize = COLS + 1;
/// Rows of the staging tile that turns coalesced rows into lane-owned columns.
const SR: usize = 8;
/// Shared memory of one warp, in elements, with a ring of `ring` columns
/// ([`Pair::RING`]): its R (or T) tile, its staging tile, the broadcast column or the
/// ring (pair-aligned: every offset before it is even) and the column scales.
pub const fn warp_smem(ring: usize) -> usize {
    BR * LDT + SR * LDT + ring * BR + COLS
}
const _: () = assert!((BR * LDT + SR * LDT) % 2 == 0 && warp_smem(0) % 2 == 0);
/// Shared memory of [`leaf_qr`] and [`leaf_apply`] in elements, with a ring of `ring`
/// columns ([`Pair::RING`]).
pub const fn leaf_smem(ring: usize) -> usize {
    WARPS * warp_smem(ring)
}
/// Reflector blocks of the in-leaf tree (one per inner node).
pub const NODES: usize = WARPS - 1;

/// Geometry of a tree level of `rows` rows whose leaves give each warp `kpw` blocks:
/// (rows of a leaf, number of leaves).
#[inline(always)]
pub fn level_leaves(rows: usize, kpw: usize) -> (usize, usize) {
    let leaf = WARPS * kpw.max(1) * BR;
    let leaves = match leaf {
        0 => 0,
        l => rows.div_ceil(l),
    };
    (leaf, leaves)
}

/// Offsets (elements) in a level's auxiliary array of the in-leaf tree's τ and of its
/// reflector blocks (32×32, row-major), after the chains' τ (32 per block). The
/// array's length is the third value.
#[inline(always)]
pub fn aux_layout(rows: usize, kpw: usize) -> (usize, usize, usize) {
    let (_, leaves) = level_leaves(rows, kpw);
    let ctau = leaves * WARPS * kpw * COLS;
    let cv = ctau + leaves * NODES * COLS;
    (ctau, cv, cv + leaves * NODES * COLS * BR)
}

/// Blocks [start, end) of a leaf's `nb` blocks (the last one `last_rows` ≤ 32 rows)
/// that warp `w` chains: `kpw` each in order, except that a short last block never
/// starts a chain of its own (it joins the chain before), so that every chain's first
/// block — its R's rows — is a full one whenever the leaf has one.
#[inline(always)]
fn chunk(w: usize, kpw: usize, nb: usize, last_rows: usize) -> (usize, usize) {
    let kpw = kpw.max(1);
    let start = (w * kpw).min(nb);
    let mut end = ((w + 1) * kpw).min(nb);
    let lone_short = last_rows < BR && nb > 1 && (nb - 1) % kpw == 0;
    if lone_short {
        if start == nb - 1 {
            return (nb, nb);
        }
        if end == nb - 1 {
            end = nb;
        }
    }
    (start, end)
}

/// Threads of [`reconstruct`] (one per entry of a COLS×COLS matrix).
pub const RECON_THREADS: usize = COLS * COLS;
/// Leading dimension of [`reconstruct`]'s shared matrices.
const LDR: usize = COLS + 1;
/// Shared memory of [`reconstruct`], in elements: the LU, L₁⁻¹, U⁻¹ and the signs.
pub const RECON_SMEM: usize = 3 * COLS * LDR + COLS;

/// (a₀ + a₁) + (a₂ + a₃).
#[inline(always)]
fn sum4<T: Float>(a: &[T; 4]) -> T {
    a[0].add(a[1]).add(a[2].add(a[3]))
}

/// β, τ and 1/(α − β) of the reflector for α and σ² = ‖x‖² of a column of the scaled
/// chain (entries at most √rows·2 in magnitude, so α² + σ² cannot overflow), as
/// `householder::house` (spec §1.2): σ² = 0 gives (α, 0, 0). Where α² + σ² ≥ TINY,
/// y ≈ 1/μ = 1/√(α² + σ²) comes from the hardware rsqrt and Newton steps, β =
/// −sign(α)·(α² + σ²)·y, τ = 1 + |α|·y and 1/(α − β) = sign(α)/(|α| + μ)
/// from the hardware reciprocal and Newton steps (each within a few units of the last
/// place): no IEEE square root or division on the chains' critical path. Below TINY,
/// μ = [`Float::hypot`] of α and σ and the two quotients as in `householder::house`.
#[inline(always)]
fn house<T: Pair>(alpha: T, ss: T) -> (T, T, T) {
    if ss == T::ZERO {
        return (alpha, T::ZERO, T::ZERO);
    }
    let q = alpha.mul_add(alpha, ss);
    if q >= T::TINY {
        let a = alpha.abs();
        let mut y = q.rsqrt_approx();
        // 1/(|α| + μ) from the unrefined μ ≈ q·y (relative error below 2⁻²⁰), so that
        // the hardware reciprocal runs beside the Newton steps of y; its own Newton
        // steps below use the refined μ.
        let mut z = q.mul_add(y, a).rcp_approx();
        let mut k = 0;
        while k < T::RSQRT_NEWTON {
            // y ← y + (y/2)(1 − q·y²)
            let e = q.mul(y).neg().mul_add(y, T::ONE);
            y = y.mul(T::HALF).mul_add(e, y);
            k += 1;
        }
        let mu = q.mul(y);
        let d = a.add(mu);
        let mut k = 0;
        while k < T::RSQRT_NEWTON {
            // z ← z + z(1 − d·z)
            let e = d.neg().mul_add(z, T::ONE);
            z = z.mul_add(e, z);
            k += 1;
        }
        (
            mu.copysign(alpha).neg(),
            a.mul_add(y, T::ONE),
            z.copysign(alpha),
        )
    } else {
        let mu = alpha.hypot(ss.sqrt());
        let beta = mu.copysign(alpha).neg();
        (beta, beta.sub(alpha).div(beta), T::ONE.div(alpha.sub(beta)))
    }
}

/// Two adjacent elements of shared memory, aligned to their size, so that one
/// vector instruction (`ld.shared.v2` / `st.shared.v2`) moves both.
pub trait Pair: Float {
    /// `[Self; 2]` aligned to 2·size_of Self.
    type P: Copy;
    /// Smallest α² + σ² whose square root [`house`] takes directly (far above the
    /// subnormal range: 2^-960 in f64, 2^-100 in f32).
    const TINY: Self;
    /// Columns of V in a warp's ring while a reflector block is applied
    /// ([`apply_back`]): a power of two ≥ 4.
    const RING: usize;
    /// Steps ahead of its use that a column of V is requested: RING − 1 (each step
    /// ends with a warp barrier before its slot is refilled) or RING − 2 (the slot a
    /// step refills was last read two steps before: one warp barrier a step). Measured
    /// on the H100: f64 8 / 6 (level-0 apply 533 → 478 µs against 4 / 3), f32 4 / 3
    /// (302 µs against 319 with 8 / 6, whose larger shared memory leaves less L1 for
    /// the f32 kernels' spills).
    const AHEAD: usize;
    /// The pair (a, b).
    fn pair(a: Self, b: Self) -> Self::P;
    /// Its elements.
    fn unpair(p: Self::P) -> (Self, Self);
}

/// Two f32, 8-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct PairF32([f32; 2]);
/// Two f64, 16-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct PairF64([f64; 2]);

impl Pair for f32 {
    type P = PairF32;
    const TINY: Self = f32::from_bits(27 << 23); // 2^-100
    const RING: usize = 4;
    const AHEAD: usize = 3;
    #[inline(always)]
    fn pair(a: Self, b: Self) -> PairF32 {
        PairF32([a, b])
    }
    #[inline(always)]
    fn unpair(p: PairF32) -> (Self, Self) {
        (p.0[0], p.0[1])
    }
}

impl Pair for f64 {
    type P = PairF64;
    const TINY: Self = f64::from_bits(63 << 52); // 2^-960
    const RING: usize = 8;
    const AHEAD: usize = 6;
    #[inline(always)]
    fn pair(a: Self, b: Self) -> PairF64 {
        PairF64([a, b])
    }
    #[inline(always)]
    fn unpair(p: PairF64) -> (Self, Self) {
        (p.0[0], p.0[1])
    }
}

/// `(p[i], p[i + 1])` in one vector load.
///
/// # Safety
/// `p.add(i)` is aligned to 2·size_of T (i even and `p` so aligned), both elements in
/// bounds and not concurrently written.
#[inline(always)]
unsafe fn ld2<T: Pair>(p: *const T, i: usize) -> (T, T) {
    // SAFETY: forwarded from the caller (alignment, bounds, no race).
    T::unpair(unsafe { p.add(i).cast::<T::P>().read() })
}

/// `p[i], p[i + 1] = a, b` in one vector store.
///
/// # Safety
/// As [`ld2`], and no other thread accesses the two elements concurrently.
#[inline(always)]
unsafe fn st2<T: Pair>(p: *mut T, i: usize, a: T, b: T) {
    // SAFETY: forwarded from the caller (alignment, bounds, exclusive).
    unsafe { p.add(i).cast::<T::P>().write(T::pair(a, b)) }
}

/// Runs `$body` for q in 0..4 (the staging rounds of a block), `$q` a literal.
macro_rules! q4 {
    (|$q:ident| $body:block) => {
        rows32!(@ $q, $body, [0, 1, 2, 3])
    };
}

/// Runs `$body` for t in 0..8 (the rows of a staging round), `$t` a literal.
macro_rules! t8 {
    (|$t:ident| $body:block) => {
        rows32!(@ $t, $body, [0, 1, 2, 3, 4, 5, 6, 7])
    };
}

/// Rows r0 .. r0 + 32 of columns 0 .. n of `src` (ld `ld`) as lane k's column k, rows
/// ≥ `nv` and columns ≥ n read as zeros. All 32 loads of a lane are in flight at once
/// and coalesced (8 consecutive rows of 4 columns an instruction); the warp's staging
/// tile `stg` turns them into columns 8 rows at a time.
///
/// # Safety
/// The whole warp calls it together; `src` readable at rows r0 .. r0 + nv, columns
/// 0 .. n; `stg` the warp's own [`SR`]×[`LDT`] tile.
#[inline(always)]
unsafe fn load_block<T: Float>(
    src: *const T,
    ld: usize,
    r0: usize,
    nv: usize,
    n: usize,
    stg: *mut T,
    lane: usize,
) -> [T; BR] {
    let (ri, c0) = (lane % SR, lane / SR);
    let mut tmp = [T::ZERO; BR];
    rows32!(|r| {
        let (row, col) = ((r / SR) * SR + ri, c0 + 4 * (r % SR));
        if row < nv && col < n {
            // SAFETY: row < nv, col < n: inside src (caller).
            tmp[r] = unsafe { device::ld(src, r0 + row + col * ld) };
        }
    });
    let mut x = [T::ZERO; BR];
    q4!(|q| {
        t8!(|t| {
            // SAFETY: inside the warp's tile; (ri, c0 + 4t) is this lane's own entry.
            unsafe { device::st(stg, ri * LDT + c0 + 4 * t, tmp[q * SR + t]) };
        });
        // SAFETY: the whole warp is here.
        unsafe { device::sync_warp() };
        t8!(|t| {
            // SAFETY: inside the tile, written before the warp barrier.
            x[q * SR + t] = unsafe { device::ld(stg, t * LDT + lane) };
        });
        // SAFETY: as above (the next round rewrites the tile).
        unsafe { device::sync_warp() };
    });
    x
}

/// Lane k's column k of rows r0 .. r0 + 32 (`x`) into `dst` (ld `ld`): rows < `nv`
/// whose global index is at least `from`, columns < n; coalesced through `stg` as in
/// [`load_block`].
///
/// # Safety
/// The whole warp calls it together; `dst` writable at those rows and columns and
/// accessed by no other thread; `stg` the warp's own tile.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn store_block<T: Float>(
    dst: *mut T,
    ld: usize,
    r0: usize,
    nv: usize,
    n: usize,
    from: usize,
    x: &[T; BR],
    stg: *mut T,
    lane: usize,
) {
    let (ri, c0) = (lane % SR, lane / SR);
    q4!(|q| {
        t8!(|t| {
            // SAFETY: inside the warp's tile; column `lane` is this lane's own.
            unsafe { device::st(stg, t * LDT + lane, x[q * SR + t]) };
        });
        // SAFETY: the whole warp is here.
        unsafe { device::sync_warp() };
        let row = q * SR + ri;
        if row < nv && r0 + row >= from {
            t8!(|t| {
                let col = c0 + 4 * t;
                if col < n {
                    // SAFETY: inside the tile (written before the barrier) and inside
                    // dst (caller); one writer per entry.
                    unsafe {
                        device::st(dst, r0 + row + col * ld, device::ld(stg, ri * LDT + col))
                    };
                }
            });
        }
        // SAFETY: as above (the next round rewrites the tile).
        unsafe { device::sync_warp() };
    });
}

/// The k-th block of warp `w`'s chain [start, end) of a leaf of `nb` blocks (the last
/// `last_rows` rows): in order, except that warp 0 chains its blocks last to first when
/// its last block is a full one (then the leaf's top block, the one the reconstruction
/// needs first, is the last block of warp 0's chain and the first one applied
/// backwards: [`leaf_apply`]'s `top_only`).
#[inline(always)]
fn chain_block(w: usize, start: usize, end: usize, nb: usize, last_rows: usize, k: usize) -> usize {
    let reversed = w == 0 && end - start > 1 && (end < nb || last_rows == BR);
    if reversed { end - 1 - k } else { start + k }
}

/// max |x_i|.
#[inline(always)]
fn col_max<T: Float>(x: &[T; BR]) -> T {
    let mut m4 = [T::ZERO; 4];
    rows32!(|r| {
        m4[r & 3] = m4[r & 3].max(x[r].abs());
    });
    m4[0].max(m4[1]).max(m4[2].max(m4[3]))
}

/// Columns n of [R; B] by Householder reflections that annihilate B (spec §1.2,
/// §4.1): R upper triangular in the warp's tile `rs` (row-major, ld [`LDT`]; only its
/// upper triangle is read or written), B = lane k's `x` (32 rows of column k). Step j:
/// lane j publishes its column of B (`piv`); every lane sums x_j·x_k over the rows (lane
/// j's sum is σ² = ‖B e_j‖²); α = r_jj; lanes k > j update r_jk and their column of B.
/// Returns lane k's (τ_k, 1/(α_k − β_k), β_k): B's column k then holds x_k, and
/// v_k = [e_k; x_k/(α_k − β_k)]. r_kk is left for the caller to set to β_k (no step
/// after k reads it). With `FIRST`, B is the chain's first block and its rows are R's:
/// step j first copies the block's row j into R's row j and publishes only the pivot
/// column's rows below j (the Householder QR of the block itself; its rows > k of
/// column k then hold x_k).
///
/// # Safety
/// The whole warp calls it together; `rs`, `piv` the warp's own tile and broadcast
/// column (pair-aligned).
#[inline(always)]
unsafe fn dense_steps<T: Pair, const FIRST: bool>(
    x: &mut [T; BR],
    rs: *mut T,
    piv: *mut T,
    n: usize,
    lane: usize,
) -> (T, T, T) {
    let (mut my_tau, mut my_inv, mut my_beta) = (T::ZERO, T::ZERO, T::ZERO);
    // Step j's inputs (with FIRST, the block's row j as R's row j; lane j's column as
    // the broadcast column), written by the lanes that own them right after their last
    // update, so that one warp barrier a step orders them before every read.
    let publish = |x: &[T; BR], j: usize| {
        if FIRST {
            // The block's row j becomes R's row j (rows < j already are).
            let mut xj = T::ZERO;
            rows32!(|r| {
                if r == j {
                    xj = x[r];
                }
            });
            // SAFETY: inside the tile; entry (j, lane) is this lane's own.
            unsafe { device::st(rs, j * LDT + lane, xj) };
        }
        if lane == j {
            rows32!(|r| {
                if r % 2 == 0 {
                    // The first block's column below its diagonal only.
                    let keep = |i: usize, v: T| if !FIRST || i > j { v } else { T::ZERO };
                    // SAFETY: pair-aligned (r even), inside the warp's column.
                    unsafe { st2(piv, r, keep(r, x[r]), keep(r + 1, x[r + 1])) };
                }
            });
        }
    };
    if n > 0 {
        publish(x, 0);
    }
    // SAFETY: the whole warp is here.
    unsafe { device::sync_warp() };
    // 32-bit step counter (n ≤ 32): the loop test is one compare.
    for j32 in 0..n as u32 {
        let j = j32 as usize;
        // SAFETY: inside the tile; r_jj is not written during the steps.
        let alpha = unsafe { device::ld(rs, j * LDT + j) };
        // The column, read once and kept in registers for the update.
        let mut pc = [T::ZERO; BR];
        let mut acc = [T::ZERO; 4];
        rows32!(|r| {
            if r % 2 == 0 {
                // SAFETY: pair-aligned, written before the warp barrier.
                (pc[r], pc[r + 1]) = unsafe { ld2(piv, r) };
                acc[r & 3] = pc[r].mul_add(x[r], acc[r & 3]);
                acc[(r + 1) & 3] = pc[r + 1].mul_add(x[r + 1], acc[(r + 1) & 3]);
            }
        });
        let sc = sum4(&acc);
        // SAFETY: the whole warp executes this (converged). Every lane's reads of piv
        // and of R's row j above feed `sc` or `alpha`, so they are complete before any
        // lane passes this shuffle and republishes them below.
        let ss = unsafe { sc.shfl_idx(j32) };
        let (beta, t, inv) = house(alpha, ss);
        if lane > j {
            // w_k = v_jᵀ[r_k; x_k] = r_jk + inv·x_jᵀx_k; [r_k; x_k] −= τ·w_k·v_j.
            // SAFETY: inside the tile; entry (j, lane) is this lane's own.
            let rjk = unsafe { device::ld(rs, j * LDT + lane) };
            let f = t.mul(inv.mul_add(sc, rjk));
            let fs = f.mul(inv).neg();
            // SAFETY: as above.
            unsafe { device::st(rs, j * LDT + lane, rjk.sub(f)) };
            rows32!(|r| {
                x[r] = fs.mul_add(pc[r], x[r]);
            });
        }
        if lane == j {
            (my_tau, my_inv, my_beta) = (t, inv, beta);
        }
        if j + 1 < n {
            publish(x, j + 1);
        }
        // SAFETY: the whole warp is here (orders the publication before step j + 1).
        unsafe { device::sync_warp() };
    }
    (my_tau, my_inv, my_beta)
}

/// `tsqr_leaf_qr`: Householder QR of every leaf of one tree level, the rows×n matrix
/// `a` (ld `lda`), leaf b = block b = rows b·L .. of L = [`WARPS`]·`kpw`·32 (the last
/// leaf shorter, padded with zero rows). Each warp factors its chain of 32-row blocks
/// ([`chunk`]): the first block by [`dense_steps`] with `FIRST`, each next one against the R
/// so far by [`dense_steps`]; then the warps' R's are combined pairwise ([`WARPS`] − 1
/// [`dense_steps`] over a partner's R). Reflectors: a chain block's in place in `a`
/// (the first block's below its diagonal), τ at `aux[(b·WARPS·kpw + block)·32 + j]`;
/// a tree node's 32×32 block and τ in `aux` ([`aux_layout`]). R (n×n, exact zeros
/// below) goes to `r_out[b·n + i + j·ldr]`.
///
/// Scaling (spec §1.2): lane k keeps column k divided by s_k, a power of two ≤ the
/// largest entry it has read so far (exact); a block with a larger entry raises s_k and
/// rescales R's column by the ratio (exact, or below u·‖column‖ where it underflows).
/// The reflectors do not depend on the scale, R = R̂·S at the end, and no square or dot
/// overflows or underflows where the data do not.
///
/// # Safety
/// Grid ⌈rows/L⌉, block [`THREADS`], dynamic shared memory [`leaf_smem`]`(T::RING)` elements (base
/// 16-byte aligned); 1 ≤ n ≤ COLS, kpw ≥ 1; `a` read-writable rows×n (ld ≥ rows);
/// `aux` writable for `aux_layout(rows, kpw).2`; `r_out` writable (grid·n)×n (ld ≥
/// grid·n); no overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn leaf_qr<T: Float + Pow2 + Pair>(
    a: *mut T,
    lda: usize,
    rows: usize,
    n: usize,
    kpw: usize,
    aux: *mut T,
    r_out: *mut T,
    ldr: usize,
) {
    let tid = device::thread_x();
    let (lane, w) = (tid % COLS, tid / COLS);
    let b = device::block_x();
    let (leaf, _) = level_leaves(rows, kpw);
    let leaf0 = b * leaf;
    let nr = leaf.min(rows - leaf0);
    let nb = nr.div_ceil(BR);
    let last_rows = nr - (nb - 1) * BR;
    let (start, end) = chunk(w, kpw, nb, last_rows);
    let order = |k: usize| chain_block(w, start, end, nb, last_rows, k);
    let (ctau, cv, _) = aux_layout(rows, kpw);
    let gb0 = b * WARPS * kpw;
    let sm = device::shared::<T::P>().cast::<T>();
    // SAFETY: the warp's region lies inside leaf_smem(T::RING) elements (launch
    // contract);
    // every offset is even, so piv is pair-aligned.
    let region = |ww: usize| unsafe {
        let rs = sm.add(ww * warp_smem(T::RING));
        let stg = rs.add(BR * LDT);
        let piv = stg.add(SR * LDT);
        (rs, stg, piv, piv.add(T::RING * BR))
    };
    let (rs, stg, piv, scl) = region(w);
    let mut s = T::ZERO;
    if start < end {
        let first = order(0);
        let r0 = leaf0 + first * BR;
        let nv = BR.min(nr - first * BR);
        // SAFETY: rows r0 .. r0 + nv < rows, columns < n: inside a; own tile.
        let mut x = unsafe { load_block(a as *const T, lda, r0, nv, n, stg, lane) };
        let (s0, mut inv_s) = col_max(&x).pow2_scale();
        s = s0;
        rows32!(|r| {
            x[r] = x[r].mul(inv_s);
            // R's rows the steps do not fill (n ≤ r) read as zeros later.
            // SAFETY: inside the warp's tile; column `lane` is this lane's own.
            unsafe { device::st(rs, r * LDT + lane, T::ZERO) };
        });
        // SAFETY: the whole warp; its own tile and column (the zeros above are ordered
        // before other lanes' reads by dense_steps' first warp barrier).
        let (t, inv, beta) = unsafe { dense_steps::<T, true>(&mut x, rs, piv, n, lane) };
        rows32!(|r| {
            x[r] = if r > lane { x[r].mul(inv) } else { T::ZERO };
        });
        if lane < n {
            // SAFETY: r_kk of this lane's column (read by no later step); τ slot of
            // this block (gb0 + first < grid·WARPS·kpw).
            unsafe {
                device::st(rs, lane * LDT + lane, beta);
                device::st(aux, (gb0 + first) * COLS + lane, t);
            }
        }
        // SAFETY: the block's rows of a (this warp's alone); the tile is free.
        unsafe { store_block(a, lda, r0, nv, n, 0, &x, stg, lane) };
        for k in 1..(end - start) {
            let blk = order(k);
            let r0 = leaf0 + blk * BR;
            let nv = BR.min(nr - blk * BR);
            // SAFETY: as for the first block.
            let mut x = unsafe { load_block(a as *const T, lda, r0, nv, n, stg, lane) };
            if k + 1 < end - start && lane < n {
                // The next block's column `lane` into L2 while this one is factored.
                let nb0 = leaf0 + order(k + 1) * BR;
                let nv2 = BR.min(nr - order(k + 1) * BR);
                // SAFETY: rows nb0 .. nb0 + nv2 of column lane lie inside a.
                unsafe {
                    device::prefetch_l2(a.add(nb0 + lane * lda));
                    if nv2 > BR / 2 {
                        device::prefetch_l2(a.add(nb0 + BR / 2 + lane * lda));
                    }
                }
            }
            let (s2, inv2) = col_max(&x).pow2_scale();
            if s2 > s {
                let ratio = s.mul(inv2);
                rows32!(|r| {
                    // SAFETY: inside the tile; column `lane` is this lane's own.
                    unsafe {
                        device::st(
                            rs,
                            r * LDT + lane,
                            device::ld(rs, r * LDT + lane).mul(ratio),
                        )
                    };
                });
                (s, inv_s) = (s2, inv2);
            }
            rows32!(|r| {
                x[r] = x[r].mul(inv_s);
            });
            // SAFETY: the whole warp; its own tile and column (the rescaling above is
            // this lane's own column, read by other lanes only after dense_steps'
            // first warp barrier).
            let (t, inv, beta) = unsafe { dense_steps::<T, false>(&mut x, rs, piv, n, lane) };
            rows32!(|r| {
                x[r] = x[r].mul(inv);
            });
            if lane < n {
                // SAFETY: as for the first block.
                unsafe {
                    device::st(rs, lane * LDT + lane, beta);
                    device::st(aux, (gb0 + blk) * COLS + lane, t);
                }
            }
            // SAFETY: as for the first block.
            unsafe { store_block(a, lda, r0, nv, n, 0, &x, stg, lane) };
        }
    } else {
        rows32!(|r| {
            // SAFETY: inside the tile; column `lane` is this lane's own.
            unsafe { device::st(rs, r * LDT + lane, T::ZERO) };
        });
    }
    // SAFETY: one writer per (warp, column).
    unsafe { device::st(scl, lane, s) };
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    // The in-leaf tree: at stride st, warp w (w mod 2st = 0) takes in the R of warp
    // w + st (upper triangle, zeros below) as B.
    for lg in 0..LOG_WARPS {
        let stride = 1usize << lg;
        if w & (2 * stride - 1) == 0 {
            let (prs, _, _, pscl) = region(w + stride);
            // SAFETY: the partner's tile and scales, final before the last barrier.
            let ps = unsafe { device::ld(pscl, lane) };
            let snew = s.max(ps);
            let (_, inv_new) = snew.pow2_scale();
            if snew > s {
                let ratio = s.mul(inv_new);
                rows32!(|r| {
                    // SAFETY: inside the own tile; own column.
                    unsafe {
                        device::st(
                            rs,
                            r * LDT + lane,
                            device::ld(rs, r * LDT + lane).mul(ratio),
                        )
                    };
                });
                s = snew;
            }
            let pr = ps.mul(inv_new);
            let mut x = [T::ZERO; BR];
            rows32!(|r| {
                if r <= lane {
                    // SAFETY: inside the partner's tile (read only this round).
                    x[r] = unsafe { device::ld(prs, r * LDT + lane) }.mul(pr);
                }
            });
            // SAFETY: the whole warp; its own tile and column.
            let (t, inv, beta) = unsafe { dense_steps::<T, false>(&mut x, rs, piv, n, lane) };
            let node = (WARPS - (WARPS >> lg)) + (w >> (lg + 1));
            let nb_off = (b * NODES + node) * COLS;
            if lane < n {
                // SAFETY: r_kk of this lane's column; τ slot of this node.
                unsafe {
                    device::st(rs, lane * LDT + lane, beta);
                    device::st(aux, ctau + nb_off + lane, t);
                }
            }
            rows32!(|r| {
                // SAFETY: this node's 32×32 block (row-major) in aux; one writer each.
                unsafe { device::st(aux, cv + nb_off * BR + r * COLS + lane, x[r].mul(inv)) };
            });
            // SAFETY: one writer per (warp, column).
            unsafe { device::st(scl, lane, s) };
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    if w == 0 && lane < n {
        for i in 0..n {
            let v = if i <= lane {
                // SAFETY: inside the tile.
                unsafe { device::ld(rs, i * LDT + lane) }.mul(s)
            } else {
                T::ZERO
            };
            // SAFETY: b·n + i < grid·n rows of r_out, lane < n.
            unsafe { device::st(r_out, b * n + i + lane * ldr, v) };
        }
    }
}

const _: () = {
    let (r32, a32) = (<f32 as Pair>::RING, <f32 as Pair>::AHEAD);
    let (r64, a64) = (<f64 as Pair>::RING, <f64 as Pair>::AHEAD);
    assert!(r32.is_power_of_two() && r32 >= 4 && (a32 + 1 == r32 || a32 + 2 == r32));
    assert!(r64.is_power_of_two() && r64 >= 4 && (a64 + 1 == r64 || a64 + 2 == r64));
    assert!(
        (a32 == 3 || a32 == 6) && (a64 == 3 || a64 == 6),
        "wait_ahead's literals"
    );
};

/// `cp.async.wait_group` [`Pair::AHEAD`] (the count must be a literal).
///
/// # Safety
/// As [`device::cp_async_wait`].
#[inline(always)]
unsafe fn wait_ahead<T: Pair>() {
    // SAFETY: forwarded from the caller.
    unsafe {
        match T::AHEAD {
            3 => device::cp_async_wait::<3>(),
            6 => device::cp_async_wait::<6>(),
            _ => device::cp_async_wait_all(),
        }
    }
}

/// One reflector block applied backwards to [T; Z] (Z = lane k's `z`, 32 rows): for
/// j = n−1 .. 0, [t_j; z] −= τ_j·v_j·(t_jk + v_jᵀz) with v_j's entry i at
/// `vb[i·vrs + j·vcs]` for i < nv (zero below) under the unit entry in T's row j
/// (row-major tile `ts`) — or, when `ts` is null, Z alone with v_j = [0 (rows < j); 1;
/// entries i > j] (a first block: its rows are T's). Lane k holds τ_k in `tau_l`
/// (broadcast by shuffle). The columns of V arrive by `cp.async` into the warp's ring
/// of [`Pair::RING`] columns, [`Pair::AHEAD`] steps ahead of their use.
///
/// # Safety
/// The whole warp calls it together; `ts` null or the warp's own tile, `ring` its
/// pair-aligned ring; `vb[i·vrs + j·vcs]` readable (and aligned) for i < nv, j < n;
/// 1 ≤ n ≤ 32.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn apply_back<T: Pair>(
    z: &mut [T; BR],
    ts: *mut T,
    vb: *const T,
    vrs: usize,
    vcs: usize,
    nv: usize,
    tau_l: T,
    ring: *mut T,
    n: usize,
    lane: usize,
) {
    let first = ts.is_null();
    let ok = lane < nv;
    // SAFETY (the copies): entry (lane, j) of V, readable for lane < nv (caller); the
    // ring slot's entry `lane` is this lane's own, not read until waited for.
    let fetch = |jj: usize| {
        if jj < n && ok {
            unsafe {
                device::cp_async_one(
                    ring.add((jj % T::RING) * BR + lane),
                    vb.add(lane * vrs + (n - 1 - jj) * vcs),
                )
            };
        }
        // SAFETY: closes this thread's group (one a step, possibly empty).
        unsafe { device::cp_async_commit() };
    };
    for jj in 0..T::AHEAD {
        fetch(jj);
    }
    // 32-bit step counter (n ≤ 32): the loop test is one compare.
    for jj32 in 0..n as u32 {
        let jj = jj32 as usize;
        let j = n - 1 - jj;
        // Slot (jj + AHEAD) mod RING was last read at step jj + AHEAD − RING: the step
        // before (AHEAD = RING − 1), whose closing warp barrier orders those reads
        // before this copy, or two steps before (AHEAD = RING − 2), ordered by the warp
        // barrier of step jj − 1.
        fetch(jj + T::AHEAD);
        // SAFETY: waits for this thread's copy of column j (AHEAD later groups may still
        // be in flight).
        unsafe { wait_ahead::<T>() };
        // SAFETY: slot jj mod RING lies in the ring.
        let slot = unsafe { ring.add((jj % T::RING) * BR) };
        if !ok || (first && lane <= j) {
            let x = if first && lane == j { T::ONE } else { T::ZERO };
            // SAFETY: this lane's own entry; its copy (if any) has landed.
            unsafe { device::st(slot, lane, x) };
        }
        // SAFETY: the whole warp executes this (converged).
        let tj = unsafe { tau_l.shfl_idx(j as u32) };
        // SAFETY: the whole warp is here: every lane's entry of column j is in place.
        unsafe { device::sync_warp() };
        // The column, read once and kept in registers for the update.
        let mut pc = [T::ZERO; BR];
        let mut acc = [T::ZERO; 4];
        rows32!(|r| {
            if r % 2 == 0 {
                // SAFETY: pair-aligned, written before the warp barrier.
                (pc[r], pc[r + 1]) = unsafe { ld2(slot, r) };
                acc[r & 3] = pc[r].mul_add(z[r], acc[r & 3]);
                acc[(r + 1) & 3] = pc[r + 1].mul_add(z[r + 1], acc[(r + 1) & 3]);
            }
        });
        let mut dot = sum4(&acc);
        if !first {
            // SAFETY: inside the tile; entry (j, lane) is this lane's own.
            unsafe {
                let tjk = device::ld(ts, j * LDT + lane);
                dot = dot.add(tjk);
                device::st(ts, j * LDT + lane, tj.neg().mul_add(dot, tjk));
            }
        }
        let f = tj.mul(dot).neg();
        rows32!(|r| {
            z[r] = f.mul_add(pc[r], z[r]);
        });
        if T::AHEAD + 1 == T::RING {
            // SAFETY: the whole warp is here (slot jj mod RING is refilled by the next
            // step's copy, after this barrier).
            unsafe { device::sync_warp() };
        }
    }
    // SAFETY: the whole warp is here: the ring is free for the caller's next block.
    unsafe { device::sync_warp() };
    // SAFETY: no copy is left in flight (the last groups were empty).
    unsafe { device::cp_async_wait_all() };
}

/// `tsqr_leaf_apply`: for leaf b of a level factored by [`leaf_qr`] (same `rows`, `n`,
/// `kpw`; reflectors in `v`, ld `ldv`, and `aux`), Y_b = Q_b·[C_b; 0] with C_b = rows
/// b·n .. b·n + n of `c_in` (ld `ldc`), or the identity when `c_in` is null: warp 0's
/// T starts as C_b; the tree's nodes, root first, hand each partner its T
/// ([`apply_back`] over a zero Z); then each warp runs its chain backwards, the last
/// block first (its Z are its rows of Y_b), the first block last (its rows are T).
/// Rows i < nr of Y_b go to `out[b·L + i + k·ldo]`, except, when `skip_top` ≠ 0, rows
/// with global index < n. With `top_only` ≠ 0 (grid 1, for the reconstruction's Q₁)
/// only warp 0 works, and when its chain ends with the leaf's top block
/// ([`chain_block`]) it stops after writing that block: only rows < 32 of Y_b are then
/// written. With `rh` (ld COLS) given, the leaf's rows of `v` are overwritten with R =
/// `rh` (rows < n, upper triangle, exact zeros below) and zeros.
///
/// # Safety
/// Grid ≤ ⌈rows/L⌉ blocks, block [`THREADS`], dynamic shared memory
/// [`leaf_smem`]`(T::RING)` elements (base 16-byte aligned); 1 ≤ n ≤ COLS, kpw ≥ 1; `v` readable rows×n
/// (read-writable with `rh`); `aux` readable as [`leaf_qr`] wrote it; `c_in` null or
/// readable (grid·n)×n; `out` writable rows×n (ld ≥ rows); `rh` null or readable n×n
/// (ld COLS); `out` overlaps none of the others.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn leaf_apply<T: Float + Pair>(
    v: *mut T,
    ldv: usize,
    rows: usize,
    n: usize,
    kpw: usize,
    aux: *const T,
    c_in: *const T,
    ldc: usize,
    out: *mut T,
    ldo: usize,
    skip_top: u32,
    top_only: u32,
    rh: *const T,
) {
    let tid = device::thread_x();
    let (lane, w) = (tid % COLS, tid / COLS);
    let b = device::block_x();
    let (leaf, _) = level_leaves(rows, kpw);
    let leaf0 = b * leaf;
    let nr = leaf.min(rows - leaf0);
    let nb = nr.div_ceil(BR);
    let last_rows = nr - (nb - 1) * BR;
    let (start, end) = chunk(w, kpw, nb, last_rows);
    let order = |k: usize| chain_block(w, start, end, nb, last_rows, k);
    // With top_only, warp 0 alone works, and stops after the leaf's top block when its
    // chain ends with it.
    let top = top_only != 0;
    let (ctau, cv, _) = aux_layout(rows, kpw);
    let gb0 = b * WARPS * kpw;
    let from = if skip_top != 0 { n } else { 0 };
    let sm = device::shared::<T::P>().cast::<T>();
    // SAFETY: as in leaf_qr.
    let region = |ww: usize| unsafe {
        let ts = sm.add(ww * warp_smem(T::RING));
        let stg = ts.add(BR * LDT);
        (ts, stg, stg.add(SR * LDT))
    };
    // `piv` below is the warp's ring of T::RING columns.
    let (ts, stg, piv) = region(w);
    rows32!(|r| {
        let x = if w == 0 && r < n && lane < n {
            if c_in.is_null() {
                if r == lane { T::ONE } else { T::ZERO }
            } else {
                // SAFETY: row b·n + r < grid·n, column lane < n of c_in.
                unsafe { device::ld(c_in, b * n + r + lane * ldc) }
            }
        } else {
            T::ZERO
        };
        // SAFETY: inside the own tile; own column.
        unsafe { device::st(ts, r * LDT + lane, x) };
    });
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    for lgr in 0..LOG_WARPS {
        let lg = LOG_WARPS - 1 - lgr;
        let stride = 1usize << lg;
        if w & (2 * stride - 1) == 0 && (!top || w == 0) {
            let node = (WARPS - (WARPS >> lg)) + (w >> (lg + 1));
            let nb_off = (b * NODES + node) * COLS;
            let mut z = [T::ZERO; BR];
            // SAFETY: the whole warp; own tile; this node's block (row-major) and τ in
            // aux.
            unsafe {
                let tau_l = if lane < n {
                    device::ld(aux, ctau + nb_off + lane)
                } else {
                    T::ZERO
                };
                apply_back(
                    &mut z,
                    ts,
                    aux.add(cv + nb_off * BR),
                    COLS,
                    1,
                    BR,
                    tau_l,
                    piv,
                    n,
                    lane,
                );
            }
            let (pts, _, _) = region(w + stride);
            rows32!(|r| {
                // SAFETY: the partner's tile, untouched by its warp until the barrier.
                unsafe { device::st(pts, r * LDT + lane, z[r]) };
            });
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    let clear = |r0: usize, nv: usize| {
        if rh.is_null() {
            return;
        }
        let (ri, c0) = (lane % SR, lane / SR);
        q4!(|q| {
            let row = q * SR + ri;
            let gi = r0 + row;
            if row < nv {
                t8!(|t| {
                    let col = c0 + 4 * t;
                    if col < n {
                        // SAFETY: inside v (row < nv, col < n) and rh (gi < n); this
                        // warp's block, whose reflectors were all read already.
                        unsafe {
                            let x = if gi < n && gi <= col {
                                device::ld(rh, gi + col * COLS)
                            } else {
                                T::ZERO
                            };
                            device::st(v, gi + col * ldv, x);
                        }
                    }
                });
            }
        });
    };
    let top_done = top && order(end - start - 1) == 0 && end - start > 1;
    // Block blk of the leaf: its first row, its rows, and lane k's τ_k.
    let block_at = |blk: usize| -> (usize, usize, T) {
        let tau_l = if lane < n {
            // SAFETY: τ slot of the block (gb0 + blk < grid·WARPS·kpw), written by the
            // leaf QR.
            unsafe { device::ld(aux, (gb0 + blk) * COLS + lane) }
        } else {
            T::ZERO
        };
        (leaf0 + blk * BR, BR.min(nr - blk * BR), tau_l)
    };
    if start < end && (!top || w == 0) {
        for k in (1..(end - start)).rev() {
            let (r0, nv, tau_l) = block_at(order(k));
            let mut z = [T::ZERO; BR];
            // SAFETY: the whole warp; own tile; the block's reflectors in v (rows
            // r0 .. r0 + nv).
            unsafe {
                let vb = (v as *const T).add(r0);
                apply_back(&mut z, ts, vb, 1, ldv, nv, tau_l, piv, n, lane);
                store_block(out, ldo, r0, nv, n, from, &z, stg, lane);
            }
            clear(r0, nv);
            if top_done {
                return;
            }
        }
        let (r0, nv, tau_l) = block_at(order(0));
        let mut z = [T::ZERO; BR];
        rows32!(|r| {
            // SAFETY: inside the own tile; own column.
            z[r] = unsafe { device::ld(ts, r * LDT + lane) };
        });
        // SAFETY: as above; the first block's reflectors lie below its diagonal
        // (apply_back reads no entry on or above it).
        unsafe {
            let vb = (v as *const T).add(r0);
            apply_back(
                &mut z,
                core::ptr::null_mut(),
                vb,
                1,
                ldv,
                nv,
                tau_l,
                piv,
                n,
                lane,
            );
            store_block(out, ldo, r0, nv, n, from, &z, stg, lane);
        }
        clear(r0, nv);
    }
}

/// `tsqr_reconstruct`: from Q₁ = the top n×n of level 0's explicit Q (in `y`, ld
/// `ldy`) and the tree's R (`r_top`, ld `ldr`): the LU without pivoting Q₁ − S = L₁U
/// with sᵢ = −1 when the i-th pivot's Schur value is ≥ 0, else +1 — except for the
/// last column of a square panel (`rows` = n), whose reflector has no rows below the
/// diagonal and is the identity as in LAPACK: there sᵢ is the Schur value's sign (±1
/// in exact arithmetic) and uᵢᵢ = 0, so τᵢ = 0; writes V₁ = L₁ (unit
/// diagonal, zeros above) over `y`'s top n×n, T = −U·S·L₁⁻ᵀ (n×n, zeros below) to `t`
/// (ld `ldt`), τᵢ = tᵢᵢ to `tau`, M = U⁻¹ to `m` (ld COLS) and R = S·R_tree (zeros
/// below the diagonal) to `rh` (ld COLS).
///
/// # Safety
/// Grid 1, block [`RECON_THREADS`], dynamic shared memory [`RECON_SMEM`] elements;
/// 1 ≤ n ≤ COLS; `y` read-writable n×n; `r_top` readable n×n; `t` writable n×n; `tau`
/// writable for n; `m`, `rh` writable COLS×n; no overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn reconstruct<T: Float>(
    y: *mut T,
    ldy: usize,
    rows: usize,
    n: usize,
    r_top: *const T,
    ldr: usize,
    t: *mut T,
    ldt: usize,
    tau: *mut T,
    m: *mut T,
    rh: *mut T,
) {
    let tid = device::thread_x();
    let (i, j) = (tid % COLS, tid / COLS);
    let sm = device::shared::<T>();
    // SAFETY: the offsets stay inside RECON_SMEM elements (launch contract).
    let (lu, linv, uinv, sv) = unsafe {
        let linv = sm.add(COLS * LDR);
        let uinv = linv.add(COLS * LDR);
        (sm, linv, uinv, uinv.add(COLS * LDR))
    };
    let inside = i < n && j < n;
    if inside {
        // SAFETY: inside y and the shared LU.
        unsafe { device::st(lu, i + j * LDR, device::ld(y as *const T, i + j * ldy)) };
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    for k in 0..n {
        // SAFETY: inside the shared LU; written before the last barrier.
        let akk = unsafe { device::ld(lu, k + k * LDR) };
        let (s, ukk) = if k + 1 == rows {
            (if akk >= T::ZERO { T::ONE } else { T::ONE.neg() }, T::ZERO)
        } else {
            let s = if akk >= T::ZERO { T::ONE.neg() } else { T::ONE };
            (s, akk.sub(s))
        };
        // SAFETY: block-uniform barrier: every thread read a_kk before it changes.
        unsafe { device::sync_threads() };
        if j == k && inside {
            // SAFETY: one writer per entry.
            unsafe {
                if i == k {
                    device::st(lu, k + k * LDR, ukk);
                    device::st(sv, k, s);
                } else if i > k {
                    device::st(lu, i + k * LDR, device::ld(lu, i + k * LDR).div(ukk));
                }
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        if inside && i > k && j > k {
            // SAFETY: one writer per entry; the operands (column k, row k) are final.
            unsafe {
                let x = device::ld(lu, i + k * LDR)
                    .neg()
                    .mul_add(device::ld(lu, k + j * LDR), device::ld(lu, i + j * LDR));
                device::st(lu, i + j * LDR, x);
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    // L₁⁻¹ and U⁻¹ by substitution on all columns at once: step k makes row k of
    // L₁⁻¹ (forward) and row n−1−k of U⁻¹ (backward) final.
    if inside {
        let e = if i == j { T::ONE } else { T::ZERO };
        // SAFETY: one writer per entry.
        unsafe {
            device::st(linv, i + j * LDR, e);
            device::st(uinv, i + j * LDR, e);
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    for k in 0..n {
        let kk = n - 1 - k;
        if inside && i == kk {
            // SAFETY: one writer per entry of row kk. u_kk = 0 only for a square
            // panel's last column, whose row of U⁻¹ no output uses.
            unsafe {
                let u = device::ld(lu, kk + kk * LDR);
                let x = device::ld(uinv, kk + j * LDR);
                device::st(
                    uinv,
                    kk + j * LDR,
                    if u == T::ZERO { T::ZERO } else { x.div(u) },
                );
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        if inside {
            // SAFETY: one writer per entry; rows k of L₁⁻¹ and kk of U⁻¹ are final.
            unsafe {
                if i > k {
                    let x = device::ld(lu, i + k * LDR)
                        .neg()
                        .mul_add(device::ld(linv, k + j * LDR), device::ld(linv, i + j * LDR));
                    device::st(linv, i + j * LDR, x);
                }
                if i < kk {
                    let x = device::ld(lu, i + kk * LDR).neg().mul_add(
                        device::ld(uinv, kk + j * LDR),
                        device::ld(uinv, i + j * LDR),
                    );
                    device::st(uinv, i + j * LDR, x);
                }
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    if inside {
        // SAFETY: inside every buffer (i, j < n); one writer per entry.
        unsafe {
            let si = device::ld(sv, i);
            // T_ij = Σ_{i≤k≤j} (−u_ik·s_k)·(L₁⁻¹)_jk.
            let mut tij = T::ZERO;
            if i <= j {
                for k in i..=j {
                    let w = device::ld(lu, i + k * LDR).mul(device::ld(sv, k)).neg();
                    tij = w.mul_add(device::ld(linv, j + k * LDR), tij);
                }
            }
            device::st(t, i + j * ldt, tij);
            if i == j {
                device::st(tau, i, tij);
            }
            let v1 = if i > j {
                device::ld(lu, i + j * LDR)
            } else if i == j {
                T::ONE
            } else {
                T::ZERO
            };
            device::st(y, i + j * ldy, v1);
            device::st(m, i + j * COLS, device::ld(uinv, i + j * LDR));
            let r = if i <= j {
                si.mul(device::ld(r_top, i + j * ldr))
            } else {
                T::ZERO
            };
            device::st(rh, i + j * COLS, r);
        }
    }
}
