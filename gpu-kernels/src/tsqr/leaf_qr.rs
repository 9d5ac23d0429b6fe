//! `tsqr_leaf_qr`: the Householder QR of every leaf of a tree level (the warps' chains,
//! then the in-leaf tree over their R's).

use super::warp::{Pair, col_max, house, ld2, load_block, st2, store_block, sum4};
use super::*;
use crate::device::{self, Float};
use crate::fused_panel::Pow2;

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
