//! `tsqr_leaf_qr`: the Householder QR of every leaf of a tree level (the warps' chains,
//! then the in-leaf tree over their R's).

use super::warp::{Pair, col_max, house, ld2, load_block, st2, store_block, sum4};
use super::*;
use crate::device::{self, Float};
use crate::fused_panel::Pow2;

/// Columns n of [R; B] by Householder reflections that annihilate B
/// (docs/algorithms.md#tsqr): R upper triangular in the warp's tile `rs` (row-major, ld [`LDT`]; only its
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
pub(super) unsafe fn dense_steps<T: Pair, const FIRST: bool>(
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
/// Scaling (the scaled norms of docs/algorithms.md#householder-vectors): lane k keeps column k divided by s_k, a power of two ≤ the
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
    let lf = Leaf::new(rows, kpw);
    let lane = lf.lane;
    // SAFETY: the launch's dynamic shared memory (contract); warp w < WARPS.
    let (rs, stg, piv, scl) = unsafe { warp_region::<T>(lf.w) };
    // SAFETY: the whole warp; the leaf's rows of `a` (contract) and the warp's region.
    let s = unsafe { chain_qr(&lf, a, lda, n, aux, rs, stg, piv) };
    // SAFETY: one writer per (warp, column).
    unsafe { device::st(scl, lane, s) };
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    // SAFETY: every thread of the block; the scales were published before the barrier.
    let s = unsafe { tree_qr(&lf, n, aux, s, rs, piv, scl) };
    if lf.w == 0 && lane < n {
        for i in 0..n {
            let v = if i <= lane {
                // SAFETY: inside the tile.
                unsafe { device::ld(rs, i * LDT + lane) }.mul(s)
            } else {
                T::ZERO
            };
            // SAFETY: b·n + i < grid·n rows of r_out, lane < n.
            unsafe { device::st(r_out, lf.b * n + i + lane * ldr, v) };
        }
    }
}

/// Multiplies lane `lane`'s column of the tile `rs` by `ratio` (a new, larger column
/// scale).
///
/// # Safety
/// `rs` is the warp's tile; its column `lane` is this lane's own.
#[inline(always)]
unsafe fn scale_column<T: Float>(rs: *mut T, lane: usize, ratio: T) {
    rows32!(|r| {
        // SAFETY: inside the tile; column `lane` is this lane's own (caller).
        unsafe {
            device::st(
                rs,
                r * LDT + lane,
                device::ld(rs, r * LDT + lane).mul(ratio),
            )
        };
    });
}

/// After a reflector block: r_kk := β_k (no later step reads it) and τ_k into
/// `tau[lane]`, for the lanes k < n.
///
/// # Safety
/// `rs` is the warp's tile; `tau` writable for n entries, slot `lane` this lane's own.
#[inline(always)]
unsafe fn keep_diag<T: Float>(rs: *mut T, tau: *mut T, lane: usize, n: usize, beta: T, t: T) {
    if lane < n {
        // SAFETY: r_kk of this lane's column; τ slot `lane` (caller).
        unsafe {
            device::st(rs, lane * LDT + lane, beta);
            device::st(tau, lane, t);
        }
    }
}

/// The warp's chain ([`Leaf::order`]): the first block by [`dense_steps`] with `FIRST`
/// (its rows become R's), each next block against the R so far, with the prefetch of the
/// block after it; reflectors and τ stored as [`leaf_qr()`] documents. Returns lane k's
/// scale s_k (R's column k is held divided by it); a warp without blocks zeroes its R.
///
/// # Safety
/// The whole warp calls it together; as [`leaf_qr()`] for the leaf's rows of `a` and
/// `aux`; `rs`, `stg`, `piv` the warp's region ([`warp_region`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn chain_qr<T: Float + Pow2 + Pair>(
    lf: &Leaf,
    a: *mut T,
    lda: usize,
    n: usize,
    aux: *mut T,
    rs: *mut T,
    stg: *mut T,
    piv: *mut T,
) -> T {
    let Leaf {
        lane,
        start,
        end,
        gb0,
        ..
    } = *lf;
    let mut s = T::ZERO;
    if start < end {
        let first = lf.order(0);
        let (r0, nv) = lf.block(first);
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
        // SAFETY: the warp's tile; τ slots of this block (gb0 + first < grid·WARPS·kpw).
        unsafe { keep_diag(rs, aux.wrapping_add((gb0 + first) * COLS), lane, n, beta, t) };
        // SAFETY: the block's rows of a (this warp's alone); the tile is free.
        unsafe { store_block(a, lda, r0, nv, n, 0, &x, stg, lane) };
        for k in 1..(end - start) {
            let blk = lf.order(k);
            let (r0, nv) = lf.block(blk);
            // SAFETY: as for the first block.
            let mut x = unsafe { load_block(a as *const T, lda, r0, nv, n, stg, lane) };
            if k + 1 < end - start && lane < n {
                // The next block's column `lane` into L2 while this one is factored.
                let (nb0, nv2) = lf.block(lf.order(k + 1));
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
                // SAFETY: the warp's tile, this lane's column.
                unsafe { scale_column(rs, lane, ratio) };
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
            // SAFETY: as for the first block.
            unsafe { keep_diag(rs, aux.wrapping_add((gb0 + blk) * COLS), lane, n, beta, t) };
            // SAFETY: as for the first block.
            unsafe { store_block(a, lda, r0, nv, n, 0, &x, stg, lane) };
        }
    } else {
        rows32!(|r| {
            // SAFETY: inside the tile; column `lane` is this lane's own.
            unsafe { device::st(rs, r * LDT + lane, T::ZERO) };
        });
    }
    s
}

/// The in-leaf tree: at stride 2^lg, warp w (w mod 2^(lg+1) = 0) takes in the R of warp
/// w + 2^lg (upper triangle, zeros below) as B, after both columns are brought to the
/// larger scale; the node's reflector block and τ go to `aux` ([`Leaf::node_off`]).
/// Returns lane k's final scale s_k.
///
/// # Safety
/// Every thread of the block calls it (block barriers); the warps' tiles and scales are
/// final and published by a block barrier; `aux` as [`leaf_qr()`]; `rs`, `piv`, `scl`
/// the warp's region.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tree_qr<T: Float + Pow2 + Pair>(
    lf: &Leaf,
    n: usize,
    aux: *mut T,
    mut s: T,
    rs: *mut T,
    piv: *mut T,
    scl: *mut T,
) -> T {
    let Leaf {
        lane, w, ctau, cv, ..
    } = *lf;
    // The in-leaf tree: at stride st, warp w (w mod 2st = 0) takes in the R of warp
    // w + st (upper triangle, zeros below) as B.
    for lg in 0..LOG_WARPS {
        let stride = 1usize << lg;
        if w & (2 * stride - 1) == 0 {
            // SAFETY: the partner warp's region (w + stride < WARPS).
            let (prs, _, _, pscl) = unsafe { warp_region::<T>(w + stride) };
            // SAFETY: the partner's tile and scales, final before the last barrier.
            let ps = unsafe { device::ld(pscl, lane) };
            let snew = s.max(ps);
            let (_, inv_new) = snew.pow2_scale();
            if snew > s {
                let ratio = s.mul(inv_new);
                // SAFETY: the own tile, own column.
                unsafe { scale_column(rs, lane, ratio) };
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
            let nb_off = lf.node_off(lg);
            // SAFETY: the own tile; τ slots of this node.
            unsafe { keep_diag(rs, aux.wrapping_add(ctau + nb_off), lane, n, beta, t) };
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
    s
}
