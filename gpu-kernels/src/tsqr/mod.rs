//! TSQR panel with Householder reconstruction (docs/algorithms.md#tsqr): a tall rows×n panel (n ≤ [`COLS`]) is factored by a tree of small
//! Householder QRs that each read their rows once, and its compact-WY form (V, T, R) is
//! then rebuilt from the tree's explicit Q by an LU without pivoting of Q − S
//! (Ballard, Demmel, Grigori, Jacquelin, Nguyen, Solomonik, "Reconstructing Householder
//! vectors from tall-skinny QR", 2014). The host (host/src/gpu/kernels_tsqr.rs) runs:
//!
//! 1. [`leaf_qr()`] on each level: leaf b is a block of [`WARPS`] warps, each chaining
//!    `kpw` blocks of 32 rows in registers ([`dense_steps`](leaf_qr::dense_steps)), then a binary tree over
//!    the warps' R's; its reflectors stay in place in the level's matrix and in an
//!    auxiliary array, and its R (n×n, zeros below the diagonal) goes to rows b·n ..
//!    of the next level, until one leaf is left;
//! 2. [`leaf_apply()`] from the top level down: each leaf's reflectors applied backwards
//!    to [C_b; 0], with C_b its n rows of the level above's explicit Q (the identity at
//!    the top), give that level's explicit Q; at level 0 first for leaf 0 alone;
//! 3. [`reconstruct()`] (one block): with Q₁ the top n×n of level 0's Q, the LU
//!    Q₁ − S = L₁U, sᵢ = −sign of the i-th pivot's Schur value (so |uᵢᵢ| ≥ 1), gives
//!    V₁ = L₁, T = −U·S·L₁⁻ᵀ, R = S·R_tree and M = U⁻¹;
//! 4. [`leaf_apply()`] on level 0 again, every leaf, with C_b·M in place of C_b (the host
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
//! scaled by powers of two (docs/algorithms.md#householder-vectors): lane k keeps column k divided by s_k, the
//! power of two ≤ its largest entry read so far (see [`leaf_qr()`]); the reflector
//! formulas are those of `householder::house`.

use crate::device;

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
pub(super) const LOG_WARPS: u32 = WARPS.trailing_zeros();

/// Threads per block of the leaf kernels.
pub const THREADS: usize = COLS * WARPS;

/// Leading dimension of a warp's R (or T) tile, row-major (odd: lane k's column and
/// the broadcast of row j are both conflict-free).
pub(super) const LDT: usize = COLS + 1;

/// Rows of the staging tile that turns coalesced rows into lane-owned columns.
pub(super) const SR: usize = 8;

/// Shared memory of one warp, in elements, with a ring of `ring` columns
/// ([`Pair::RING`]): its R (or T) tile, its staging tile, the broadcast column or the
/// ring (pair-aligned: every offset before it is even) and the column scales.
pub const fn warp_smem(ring: usize) -> usize {
    BR * LDT + SR * LDT + ring * BR + COLS
}

const _: () = assert!((BR * LDT + SR * LDT) % 2 == 0 && warp_smem(0) % 2 == 0);

/// Shared memory of [`leaf_qr()`] and [`leaf_apply()`] in elements, with a ring of `ring`
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
pub(super) fn chunk(w: usize, kpw: usize, nb: usize, last_rows: usize) -> (usize, usize) {
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

/// The k-th block of warp `w`'s chain [start, end) of a leaf of `nb` blocks (the last
/// `last_rows` rows): in order, except that warp 0 chains its blocks last to first when
/// its last block is a full one (then the leaf's top block, the one the reconstruction
/// needs first, is the last block of warp 0's chain and the first one applied
/// backwards: [`leaf_apply()`]'s `top_only`).
#[inline(always)]
pub(super) fn chain_block(
    w: usize,
    start: usize,
    end: usize,
    nb: usize,
    last_rows: usize,
    k: usize,
) -> usize {
    let reversed = w == 0 && end - start > 1 && (end < nb || last_rows == BR);
    if reversed { end - 1 - k } else { start + k }
}

/// Where this thread works in a leaf of a tree level of `rows` rows whose warps chain
/// `kpw` blocks each: the geometry [`leaf_qr()`] and [`leaf_apply()`] share.
#[derive(Clone, Copy)]
pub(super) struct Leaf {
    /// This thread's lane (its column) and warp.
    pub(super) lane: usize,
    pub(super) w: usize,
    /// The leaf (= block index) and its first row.
    pub(super) b: usize,
    pub(super) leaf0: usize,
    /// Rows of the leaf, its 32-row blocks, and the rows of its last block.
    pub(super) nr: usize,
    pub(super) nb: usize,
    pub(super) last_rows: usize,
    /// This warp's blocks [start, end) ([`chunk`]).
    pub(super) start: usize,
    pub(super) end: usize,
    /// Offsets in the level's auxiliary array of the in-leaf tree's τ and reflector
    /// blocks ([`aux_layout`]).
    pub(super) ctau: usize,
    pub(super) cv: usize,
    /// The leaf's first chain block over the level (its τ at `aux[(gb0 + blk)·32 ..]`).
    pub(super) gb0: usize,
}

impl Leaf {
    /// This thread's leaf geometry.
    #[inline(always)]
    pub(super) fn new(rows: usize, kpw: usize) -> Self {
        let tid = device::thread_x();
        let (lane, w) = (tid % COLS, tid / COLS);
        let b = device::block_x();
        let (leaf, _) = level_leaves(rows, kpw);
        let leaf0 = b * leaf;
        let nr = leaf.min(rows - leaf0);
        let nb = nr.div_ceil(BR);
        let last_rows = nr - (nb - 1) * BR;
        let (start, end) = chunk(w, kpw, nb, last_rows);
        let (ctau, cv, _) = aux_layout(rows, kpw);
        let gb0 = b * WARPS * kpw;
        Leaf {
            lane,
            w,
            b,
            leaf0,
            nr,
            nb,
            last_rows,
            start,
            end,
            ctau,
            cv,
            gb0,
        }
    }

    /// The k-th block of this warp's chain ([`chain_block`]).
    #[inline(always)]
    pub(super) fn order(&self, k: usize) -> usize {
        chain_block(self.w, self.start, self.end, self.nb, self.last_rows, k)
    }

    /// Block `blk` of the leaf: its first row and its rows.
    #[inline(always)]
    pub(super) fn block(&self, blk: usize) -> (usize, usize) {
        (self.leaf0 + blk * BR, BR.min(self.nr - blk * BR))
    }

    /// Offset (in τ slots) of the in-leaf tree node that this warp computes at round
    /// `lg` (stride 2^lg): its τ at `ctau + off`, its block at `cv + off·32`.
    #[inline(always)]
    pub(super) fn node_off(&self, lg: u32) -> usize {
        let node = (WARPS - (WARPS >> lg)) + (self.w >> (lg + 1));
        (self.b * NODES + node) * COLS
    }
}

/// Warp `ww`'s shared region ([`warp_smem`]): its R (or T) tile, its staging tile, its
/// broadcast column (or ring of V's columns) and its column scales.
///
/// # Safety
/// The dynamic shared memory holds [`leaf_smem`]`(T::RING)` elements, 16-byte aligned;
/// ww < [`WARPS`].
#[inline(always)]
pub(super) unsafe fn warp_region<T: Pair>(ww: usize) -> (*mut T, *mut T, *mut T, *mut T) {
    let sm = device::shared::<T::P>().cast::<T>();
    // SAFETY: the region lies inside leaf_smem(T::RING) elements (caller); every
    // offset is even, so the column after the tiles is pair-aligned.
    unsafe {
        let rs = sm.add(ww * warp_smem(T::RING));
        let stg = rs.add(BR * LDT);
        let piv = stg.add(SR * LDT);
        (rs, stg, piv, piv.add(T::RING * BR))
    }
}

mod leaf_apply;
mod leaf_qr;
mod reconstruct;
mod warp;

pub use leaf_apply::leaf_apply;
pub use leaf_qr::leaf_qr;
pub use reconstruct::{RECON_SMEM, RECON_THREADS, reconstruct};
pub use warp::{Pair, PairF32, PairF64};
