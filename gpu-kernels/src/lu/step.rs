//! The column-step kernels (`lu_pivot`, `lu_update`) and the one-block panel
//! (`lu_panel_fused`) that runs every column step of a short panel in one launch.

use super::argmax::block_argmax_to_warp0;
use super::slab::slab_candidate;
use crate::device::{self, Float};

/// `lu_pivot`: pivot search and swap of column step j. One block finds p = the first
/// row index of max |a(i, j)| over i in j..m (p = j if the column holds only NaN),
/// writes `ipiv[j] = p`, swaps rows j and p in columns c0..cend (the base panel) and
/// writes the pivot u_jj into `diag[j]`.
/// Grid 1, block a multiple of 32 (≤ 1024), dynamic shared memory 32·(8 + 4) bytes.
///
/// # Safety
/// Launch shape as documented; j < m; c0 ≤ j < cend; `a` read-writable at rows 0..m of
/// columns c0..cend (ld `lda` ≥ m); `ipiv[j]` and `diag[j]` writable; no other launch
/// touches these concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn pivot<T: Float>(
    a: *mut T,
    lda: usize,
    m: usize,
    j: usize,
    c0: usize,
    cend: usize,
    ipiv: *mut u32,
    diag: *mut T,
) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let sval = device::shared::<T>();
    // 32 values of T (≤ 8 bytes each), then 33 indices.
    let sidx = sval.wrapping_add(32) as *mut u32;
    // SAFETY: rows j.. of column j < m; nobody writes the column before the barriers in
    // `choose_pivot`; every thread of the block gets here (no early return), full warps.
    let p = unsafe {
        let (bv, bi) = slab_candidate(a, lda, 0, m, j + tid, nt, j, 0);
        choose_pivot(bv, bi, j, sval, sidx, ipiv)
    };
    // SAFETY: rows j and p < m of columns c0..cend (contract).
    unsafe { swap_rows(a, lda, j, p, c0, cend, diag, core::ptr::null_mut()) };
}

/// `lu_update`: scaling and rank-1 update of column step j, one thread per row i in
/// j+1..m: l = a(i, j)/a(j, j) stored in a(i, j), then a(i, c) −= l·a(j, c) for c in
/// j+1..cend (fused). Nothing happens for a zero pivot (the host reports it).
/// Grid ⌈(m − j − 1)/block⌉, block any multiple of 32.
///
/// # Safety
/// Launch shape as documented; j < cend; `a` read-writable at rows j..m of columns
/// j..cend (ld `lda` ≥ m); no other launch touches them concurrently.
#[inline(always)]
pub unsafe fn update<T: Float>(a: *mut T, lda: usize, m: usize, j: usize, cend: usize) {
    let i = j + 1 + device::global_x();
    if i >= m {
        return;
    }
    // SAFETY: row j < m of column j; row j is not written by this launch.
    let piv = unsafe { device::ld(a as *const T, j + j * lda) };
    if piv == T::ZERO {
        return;
    }
    // SAFETY: row i of column j, this thread's own element.
    let l = unsafe { device::ld(a as *const T, i + j * lda) }.div(piv);
    // SAFETY: as above, single writer of (i, j).
    unsafe { device::st(a, i + j * lda, l) };
    let nl = l.neg();
    // Chunks of 8 columns: all loads of a chunk are issued before its stores, so the
    // memory latency overlaps (the compiler cannot reorder loads past the stores of
    // possibly aliasing pointers).
    let mut c = j + 1;
    while c + 8 <= cend {
        let mut u = [T::ZERO; 8];
        let mut x = [T::ZERO; 8];
        let mut q = 0;
        while q < 8 {
            // SAFETY: (j, c+q) is read-only in this launch; (i, c+q) is this thread's.
            unsafe {
                u[q] = device::ld(a as *const T, j + (c + q) * lda);
                x[q] = device::ld(a as *const T, i + (c + q) * lda);
            }
            q += 1;
        }
        let mut q = 0;
        while q < 8 {
            // SAFETY: (i, c+q) belongs to this thread alone.
            unsafe { device::st(a, i + (c + q) * lda, nl.mul_add(u[q], x[q])) };
            q += 1;
        }
        c += 8;
    }
    while c < cend {
        // SAFETY: (j, c) is read-only in this launch; (i, c) belongs to this thread.
        unsafe {
            let u = device::ld(a as *const T, j + c * lda);
            let x = device::ld(a as *const T, i + c * lda);
            device::st(a, i + c * lda, nl.mul_add(u, x));
        }
        c += 1;
    }
}

/// `lu_panel_fused`: the whole base panel c0..c0+w (w ≤ 64) by one block, all column
/// steps in one launch: for each j, block argmax (first index of max |·|), swap rows j
/// and p across the base panel, u_jj into `diag[j]`, pivot row staged in shared
/// memory, then scaling and rank-1 update of rows j+1..m (threads stride over rows).
/// Block barriers order the steps (they also order global memory within the block).
/// For short panels, where launch latency dominates. Grid 1, block a multiple of 32
/// (≤ 1024), dynamic shared memory 96·8 + 33·4 bytes.
///
/// # Safety
/// Launch shape as documented; c0 < m, 1 ≤ w ≤ 64; `a` read-writable at rows c0..m of
/// columns c0..c0+w (ld `lda` ≥ m); `ipiv`, `diag` writable at c0..c0+w; no other
/// launch touches them concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn panel_fused<T: Float>(
    a: *mut T,
    lda: usize,
    m: usize,
    c0: usize,
    w: usize,
    ipiv: *mut u32,
    diag: *mut T,
) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let sval = device::shared::<T>();
    let urow = sval.wrapping_add(32);
    let sidx = sval.wrapping_add(96) as *mut u32;
    let cend = c0 + w;
    let mut j = c0;
    while j < cend && j < m {
        let col = a.wrapping_add(j * lda) as *const T;
        // SAFETY: rows j.. of column j < m, written only after the barriers in
        // `choose_pivot`; block-uniform control flow (the loop bounds are uniform), full
        // warps.
        let p = unsafe {
            let (bv, bi) = slab_candidate(a, lda, 0, m, j + tid, nt, j, 0);
            choose_pivot(bv, bi, j, sval, sidx, ipiv)
        };
        // SAFETY: rows j and p < m of columns c0..cend (contract); urow has 64 slots.
        unsafe { swap_rows(a, lda, j, p, c0, cend, diag, urow) };
        // SAFETY: block-uniform barrier: swaps and the staged row are visible.
        unsafe { device::sync_threads() };
        // SAFETY: slot j − c0 < 64 written before the barrier.
        let piv = unsafe { device::ld(urow as *const T, j - c0) };
        if piv != T::ZERO {
            let mut i = j + 1 + tid;
            while i < m {
                // SAFETY: row i > j of columns j..cend belongs to this thread in this step.
                unsafe {
                    let l = device::ld(col, i).div(piv);
                    device::st(a, i + j * lda, l);
                    let nl = l.neg();
                    let mut c = j + 1;
                    while c < cend {
                        let u = device::ld(urow as *const T, c - c0);
                        let x = device::ld(a as *const T, i + c * lda);
                        device::st(a, i + c * lda, nl.mul_add(u, x));
                        c += 1;
                    }
                }
                i += nt;
            }
        }
        // SAFETY: block-uniform barrier before the next step reads the updated panel.
        unsafe { device::sync_threads() };
        j += 1;
    }
}

/// The pivot of column step j from this thread's candidate (v, i): the block's first
/// row index of the largest |a(i, j)| (p = j when the column holds only NaN), written to
/// `ipiv[j]` and returned to every thread through `sidx[32]`.
///
/// # Safety
/// Called by every thread of the block (block-uniform), block a multiple of 32
/// (≤ 1024); `sval` holds 32 `T`s and `sidx` 33 `u32`s of shared memory that nothing
/// else uses meanwhile; `ipiv[j]` writable.
#[inline(always)]
unsafe fn choose_pivot<T: Float>(
    v: T,
    i: u32,
    j: usize,
    sval: *mut T,
    sidx: *mut u32,
    ipiv: *mut u32,
) -> usize {
    // SAFETY: forwarded (block-uniform call, full warps).
    let (_, p) = unsafe { block_argmax_to_warp0(v, i, sval, sidx) };
    if device::thread_linear() == 0 {
        let p = if p == u32::MAX { j as u32 } else { p };
        // SAFETY: slot 32 of the index area is the broadcast slot; ipiv[j] writable.
        unsafe {
            device::st(sidx, 32, p);
            device::st(ipiv, j, p);
        }
    }
    // SAFETY: block-uniform barrier; makes the pivot visible to the block.
    unsafe { device::sync_threads() };
    // SAFETY: written before the barrier.
    unsafe { device::ld(sidx as *const u32, 32) as usize }
}

/// Swaps rows j and p of the columns c0..cend (one thread a column), writes the pivot
/// u_jj = a(p, j) to `diag[j]` and, unless `urow` is null, stages the pivot row in
/// `urow[c − c0]`.
///
/// # Safety
/// Rows j and p of columns c0..cend of `a` (ld `lda`) are read-writable and touched by
/// no other thread meanwhile; c0 ≤ j < cend; `diag[j]` writable; `urow` null or
/// cend − c0 writable shared slots.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn swap_rows<T: Float>(
    a: *mut T,
    lda: usize,
    j: usize,
    p: usize,
    c0: usize,
    cend: usize,
    diag: *mut T,
    urow: *mut T,
) {
    let nt = device::block_threads();
    let mut t = device::thread_linear();
    while c0 + t < cend {
        let c = c0 + t;
        let base = a.wrapping_add(c * lda);
        // SAFETY: rows j and p of column c, one thread per column (contract).
        unsafe {
            let x = device::ld(base as *const T, j);
            let y = device::ld(base as *const T, p);
            if p != j {
                device::st(base, j, y);
                device::st(base, p, x);
            }
            if !urow.is_null() {
                device::st(urow, t, y);
            }
            if c == j {
                device::st(diag, j, y);
            }
        }
        t += nt;
    }
}
