//! `lu_panel_coop`: the whole panel by a cooperative grid, one grid barrier a column step.

use super::argmax::{better, block_argmax, warp_argmax};
use super::slab::{
    column_groups, slab_at, slab_candidate, slab_copy, slab_scale, slab_swap, slab_update,
};
use crate::device::{self, Float, WARP};

/// Shared-memory header of `lu_panel_coop` in elements of T: 32 reduction values,
/// the staged pivot row and row j (w each), 40 u32 slots (reduction indices and the
/// broadcast), then the slab when it lives in shared memory.
#[inline(always)]
fn coop_header(w: usize) -> usize {
    32 + 2 * w + 40
}

/// Publishes block `b`'s candidate (v, ip) for column step j into buffer `buf` of the
/// partials, with the candidate row's panel entries, and, if the block owns row j,
/// row j's entries (slot nb).
///
/// # Safety
/// Block-uniform call; (v, ip) the block's argmax (ip = u32::MAX when it has none,
/// else r0 ≤ ip < r1); the partials arrays sized as `panel_coop` documents.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn coop_publish<T: Float>(
    sl: *mut T,
    ld: usize,
    r0: usize,
    r1: usize,
    w: usize,
    j: usize,
    b: usize,
    nb: usize,
    buf: usize,
    v: T,
    ip: u32,
    pval: *mut T,
    pidx: *mut u32,
    prow: *mut T,
) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    if tid == 0 {
        // SAFETY: slot buf·nb + b < 2·nb, one writer (this block's thread 0).
        unsafe {
            device::st(pval, buf * nb + b, v);
            device::st(pidx, buf * nb + b, ip);
        }
    }
    let own_j = j >= r0 && j < r1;
    let mut c = tid;
    while c < w {
        // SAFETY: ip and j are rows of this block's slab (r0 ≤ · < r1) so the slab
        // reads are in bounds; the row slots b and nb of buffer buf hold w entries each
        // and only this block writes slot b (and slot nb, as the owner of row j).
        unsafe {
            if ip != u32::MAX {
                let x = device::ld(slab_at(sl, ld, ip as usize - r0, c) as *const T, 0);
                device::st(prow, (buf * (nb + 1) + b) * w + c, x);
            }
            if own_j {
                let x = device::ld(slab_at(sl, ld, j - r0, c) as *const T, 0);
                device::st(prow, (buf * (nb + 1) + nb) * w + c, x);
            }
        }
        c += nt;
    }
}

/// `lu_panel_coop`: the whole panel c0..c0+w (rows c0..m) by a cooperative grid, all
/// column steps in one launch (docs/algorithms.md#lu-factorisation). Block b owns the
/// slab of rows
/// r0 = c0 + b·slab .. min(r0 + slab, m), held in shared memory when `in_smem` ≠ 0
/// (loaded at the start, stored at the end) and worked on in place in `a` otherwise.
/// Per column step j (one grid barrier each): every block has published its local
/// candidate (first index of max |a(i, j)| over its rows i ≥ j) with that row's w
/// panel entries, and the owner of row j has published row j, into buffer j & 1 of
/// the partials; after the barrier every block reduces the candidates (the pivot p
/// is the first index of the global max, p = j when the column holds only NaN), swaps
/// rows j and p where it owns them, scales its rows i > j of column j by 1/u_jj and
/// applies the rank-1 update to the panel's later columns (nothing for a zero
/// pivot: the host reports it), and computes and publishes its candidate for step
/// j + 1. Block 0 writes `ipiv[j]` and `diag[j]` = u_jj. The barrier counter must be
/// `cbase` at launch; the launch adds w·gridDim to it.
/// Block 256 threads (any multiple of 32 ≤ 1024); dynamic shared memory
/// (72 + 2w + (in_smem ? slab·w : 0))·size_of::<T>() bytes.
///
/// # Safety
/// Cooperative launch with every block co-resident; gridDim·slab ≥ m − c0 and every
/// block's slab starts below m; c0 < m, 1 ≤ w, c0 + w ≤ columns of `a`; `a`
/// read-writable at rows c0..m of columns c0..c0+w (ld `lda` ≥ m); `ipiv`, `diag`
/// writable at c0..c0+w; `pval`, `pidx` hold 2·gridDim entries and `prow`
/// 2·(gridDim + 1)·w; `counter` a device u32 equal to `cbase`, touched by nothing else
/// during the launch; no other launch touches any of these concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn panel_coop<T: Float>(
    a: *mut T,
    lda: usize,
    m: usize,
    c0: usize,
    w: usize,
    ipiv: *mut u32,
    diag: *mut T,
    slab: usize,
    in_smem: u32,
    pval: *mut T,
    pidx: *mut u32,
    prow: *mut T,
    counter: *mut u32,
    cbase: u32,
) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let b = device::block_x();
    let nb = device::grid_blocks();
    let sh = device::shared::<T>();
    let sval = sh;
    let urow = sh.wrapping_add(32);
    let rowj = sh.wrapping_add(32 + w);
    let sidx = sh.wrapping_add(32 + 2 * w) as *mut u32;
    let r0 = c0 + b * slab;
    let r1 = (r0 + slab).min(m);
    let rows = r1.saturating_sub(r0);
    let (sl, ld) = if in_smem != 0 {
        (sh.wrapping_add(coop_header(w)), slab)
    } else {
        (a.wrapping_add(r0 + c0 * lda), lda)
    };
    if in_smem != 0 {
        // SAFETY: rows r0..r1 of columns c0..c0+w are in `a`; the slab area holds
        // slab·w ≥ rows·w elements (launch contract).
        unsafe { slab_copy(a, lda, r0, c0, rows, w, sl, ld, true) };
        // SAFETY: block-uniform barrier: the slab is loaded.
        unsafe { device::sync_threads() };
    }

    let (cg, tr) = column_groups(rows, nt);
    let (g, r) = (tid / tr, tid % tr);
    // SAFETY: column 0 of the slab, read only.
    let (mut cv, mut ci) = unsafe { slab_candidate(sl, ld, r0, rows, tid, nt, 0, 0) };
    let mut jj = 0;
    while jj < w && c0 + jj < m {
        let j = c0 + jj;
        let buf = jj & 1;
        // SAFETY: block-uniform (jj and the loop bounds are uniform).
        let (bv, bi) = unsafe { block_argmax(cv, ci, sval, sidx) };
        // SAFETY: block-uniform; (bv, bi) is the block's argmax over its rows ≥ j.
        unsafe { coop_publish(sl, ld, r0, r1, w, j, b, nb, buf, bv, bi, pval, pidx, prow) };
        // SAFETY: cooperative launch, every block calls with the same target sequence
        // (base + (jj + 1)·nb), the counter is ours alone (launch contract).
        unsafe { device::grid_sync(counter, cbase.wrapping_add(((jj + 1) * nb) as u32)) };

        // SAFETY: every thread of the block, after the grid barrier that published
        // step jj's candidates and rows (launch contract for the partials).
        let p = unsafe {
            coop_pivot(
                j, b, nb, buf, c0, slab, w, pval, pidx, prow, sidx, urow, rowj, ipiv,
            )
        };
        // SAFETY: slot jj < w written before the barrier.
        let piv = unsafe { device::ld(urow as *const T, jj) };
        if b == 0 && tid == 0 {
            // SAFETY: diag[j] writable (contract); one writer.
            unsafe { device::st(diag, j, piv) };
        }
        if p != j {
            // SAFETY: rows j and p are written only by their owning block; staged rows
            // in shared memory.
            unsafe { slab_swap(sl, ld, r0, r1, j, p, w, urow, rowj) };
            // SAFETY: block-uniform barrier (p and j are uniform): the swap is visible.
            unsafe { device::sync_threads() };
        }
        // scaling, rank-1 update and the next step's candidate: thread (r, g) works on
        // slab rows li ≡ r (mod tr) and columns jj+1+g, jj+1+g+cg, … (g < cg)
        let next = jj + 1 < w && j + 1 < m;
        if piv != T::ZERO {
            if g == 0 {
                // SAFETY: column jj of this thread's rows (group 0) of this block's slab.
                unsafe { slab_scale(sl, ld, r0, rows, r, tr, j, jj, piv) };
            }
            // SAFETY: block-uniform barrier (piv is uniform): the multipliers are visible.
            unsafe { device::sync_threads() };
            if g < cg {
                // SAFETY: rows li ≡ r (mod tr) of the slab; columns ≡ g (mod cg) after jj
                // are this thread's alone in this step; (li, jj) is only read now.
                unsafe { slab_update(sl, ld, r0, rows, r, tr, j, jj, w, jj + 1 + g, cg, urow) };
            }
        }
        (cv, ci) = if next && g == 0 {
            // SAFETY: (li, jj + 1) was last written by this very thread (group 0 owns
            // column jj + 1) or not at all in this step.
            unsafe { slab_candidate(sl, ld, r0, rows, r, tr, jj + 1, j + 1) }
        } else {
            (T::ZERO.sub(T::ONE), u32::MAX)
        };
        // SAFETY: block-uniform barrier: the updated slab is visible before the next
        // step publishes from it (and before the final store).
        unsafe { device::sync_threads() };
        jj += 1;
    }

    if in_smem != 0 {
        // SAFETY: as for the load above.
        unsafe { slab_copy(a, lda, r0, c0, rows, w, sl, ld, false) };
    }
}

/// The pivot of column step j from the candidates every block published into buffer
/// `buf` (warp 0 reduces them: the first index of the global max, p = j when the column
/// holds only NaN; block 0 writes `ipiv[j]`), broadcast through `sidx[33]`, and the
/// pivot row and row j staged into `urow` and `rowj` from the published rows; ends with
/// a block barrier after which both are visible. Returns p.
///
/// # Safety
/// Every thread of the block calls it after the grid barrier of step j; `pval`, `pidx`,
/// `prow` as [`panel_coop`] documents, buffer `buf` written by every block; `sidx` has
/// 34 slots and `urow`, `rowj` w entries of shared memory; `ipiv[j]` writable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn coop_pivot<T: Float>(
    j: usize,
    b: usize,
    nb: usize,
    buf: usize,
    c0: usize,
    slab: usize,
    w: usize,
    pval: *mut T,
    pidx: *mut u32,
    prow: *mut T,
    sidx: *mut u32,
    urow: *mut T,
    rowj: *mut T,
    ipiv: *mut u32,
) -> usize {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let lane = tid % WARP;
    if tid < WARP {
        let (mut v, mut ix) = (T::ZERO.sub(T::ONE), u32::MAX);
        let mut k = lane;
        while k < nb {
            // SAFETY: slots buf·nb + k < 2·nb, written by block k before the barrier.
            let (ov, oi) = unsafe {
                (
                    device::ld_volatile(pval as *const T, buf * nb + k),
                    device::ld_volatile(pidx as *const u32, buf * nb + k),
                )
            };
            if better(v, ix, ov, oi) {
                v = ov;
                ix = oi;
            }
            k += WARP;
        }
        // SAFETY: warp 0 complete and convergent.
        let (_, p) = unsafe { warp_argmax(v, ix) };
        if lane == 0 {
            let p = if p == u32::MAX { j as u32 } else { p };
            // SAFETY: broadcast slot 33 of sidx (block_argmax uses 0..=32).
            unsafe { device::st(sidx, 33, p) };
            if b == 0 {
                // SAFETY: ipiv[j] writable, j < c0 + w (contract); one writer.
                unsafe { device::st(ipiv, j, p) };
            }
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    // SAFETY: written before the barrier.
    let p = unsafe { device::ld(sidx as *const u32, 33) } as usize;
    let slot = if p == j { nb } else { (p - c0) / slab };
    let mut c = tid;
    while c < w {
        // SAFETY: the slots were written by their blocks before the barrier (the
        // owner of row p published it as its candidate, the owner of row j slot
        // nb); urow/rowj hold w entries.
        unsafe {
            let u = device::ld_volatile(prow as *const T, (buf * (nb + 1) + slot) * w + c);
            let r = device::ld_volatile(prow as *const T, (buf * (nb + 1) + nb) * w + c);
            device::st(urow, c, u);
            device::st(rowj, c, r);
        }
        c += nt;
    }
    // SAFETY: block-uniform barrier: the staged rows are visible.
    unsafe { device::sync_threads() };
    p
}
