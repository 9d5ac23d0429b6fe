//! `tsqr_leaf_apply`: a leaf's explicit Q, its reflector blocks applied backwards with the
//! columns of V brought in by `cp.async`.

use super::warp::{Pair, ld2, store_block, sum4};
use super::*;
use crate::device::{self, Float};

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
pub(super) unsafe fn apply_back<T: Pair>(
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

/// `tsqr_leaf_apply`: for leaf b of a level factored by [`leaf_qr()`] (same `rows`, `n`,
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
/// The in-leaf tree and the chain stay in this function: moved into helper functions
/// (inlined, same statements), ptxas allocated the f64 kernel differently and spilled
/// (8 bytes at 255 registers; it runs one block an SM on all 255), so the phases are
/// marked by comments instead. Only the clearing of a block ([`clear_block`]) is its
/// own function (the PTX is byte-identical).
///
/// # Safety
/// Grid ≤ ⌈rows/L⌉ blocks, block [`THREADS`], dynamic shared memory
/// [`leaf_smem`]`(T::RING)` elements (base 16-byte aligned); 1 ≤ n ≤ COLS, kpw ≥ 1; `v` readable rows×n
/// (read-writable with `rh`); `aux` readable as [`leaf_qr()`] wrote it; `c_in` null or
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
    let lf = Leaf::new(rows, kpw);
    let (lane, w, b, start, end) = (lf.lane, lf.w, lf.b, lf.start, lf.end);
    let (ctau, cv, gb0) = (lf.ctau, lf.cv, lf.gb0);
    let order = |k: usize| lf.order(k);
    // With top_only, warp 0 alone works, and stops after the leaf's top block when its
    // chain ends with it.
    let top = top_only != 0;
    let from = if skip_top != 0 { n } else { 0 };
    // SAFETY: the launch's dynamic shared memory (contract); warp w < WARPS. `piv` is
    // the warp's ring of T::RING columns of V.
    let (ts, stg, piv, _) = unsafe { warp_region::<T>(w) };
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
            let nb_off = lf.node_off(lg);
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
            // SAFETY: the partner warp's region (w + stride < WARPS).
            let (pts, _, _, _) = unsafe { warp_region::<T>(w + stride) };
            rows32!(|r| {
                // SAFETY: the partner's tile, untouched by its warp until the barrier.
                unsafe { device::st(pts, r * LDT + lane, z[r]) };
            });
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    let clear = |r0: usize, nv: usize| {
        // SAFETY: this function's contract for v and rh; called once a block's
        // reflectors were all read.
        unsafe { clear_block(rh, v, ldv, n, lane, r0, nv) }
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
        let (r0, nv) = lf.block(blk);
        (r0, nv, tau_l)
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

/// Rows r0 .. r0 + nv of `v` (the leaf block whose reflectors [`leaf_apply`] has just
/// applied) overwritten with the matching rows of `rh` (rows < n, upper triangle, exact
/// zeros below) or zeros; nothing when `rh` is null. Lane `lane` of the block's warp
/// writes its share.
///
/// # Safety
/// As [`leaf_apply`]'s: `v` read-writable rows×n (ld `ldv`) with r0 + nv ≤ rows, `rh`
/// null or readable n×n (ld COLS); the block's reflectors were all read already.
#[inline(always)]
unsafe fn clear_block<T: Float>(
    rh: *const T,
    v: *mut T,
    ldv: usize,
    n: usize,
    lane: usize,
    r0: usize,
    nv: usize,
) {
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
                        // (ldv·col in this order keeps the PTX of the closure this was)
                        device::st(v, gi + ldv * col, x);
                    }
                }
            });
        }
    });
}
