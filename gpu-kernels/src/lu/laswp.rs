//! Row interchanges across column ranges (`lu_laswp`, `lu_laswp_tile`).

use crate::device::{self, Float};

/// `lu_laswp`: applies the interchanges ipiv[k1..k2) in order (row k swapped with
/// row ipiv[k]) to the columns c in col0..col1 outside skip0..skip1; one thread per
/// column. Grid ⌈(col1 − col0)/block⌉, block any size.
///
/// # Safety
/// Launch shape as documented; `ipiv[k1..k2)` readable, each entry < rows of `a`; `a`
/// read-writable at rows k1..max ipiv of the swapped columns (ld `lda`); no other
/// launch touches them concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn laswp<T: Float>(
    a: *mut T,
    lda: usize,
    col0: usize,
    col1: usize,
    skip0: usize,
    skip1: usize,
    ipiv: *const u32,
    k1: usize,
    k2: usize,
) {
    let c = col0 + device::global_x();
    if c >= col1 || (c >= skip0 && c < skip1) {
        return;
    }
    let base = a.wrapping_add(c * lda);
    let mut k = k1;
    while k < k2 {
        // SAFETY: ipiv[k] readable (contract); rows k and p of column c belong to this
        // thread alone.
        unsafe {
            let p = device::ld(ipiv, k) as usize;
            if p != k {
                let x = device::ld(base as *const T, k);
                let y = device::ld(base as *const T, p);
                device::st(base, k, y);
                device::st(base, p, x);
            }
        }
        k += 1;
    }
}

/// Columns per block of `lu_laswp_tile`.
pub const LASWP_TILE_COLS: usize = 16;

/// `lu_laswp_tile`: the interchanges ipiv[k1..k2) (k2 − k1 ≤ 128), applied in order,
/// on the columns col0..col1 outside skip0..skip1 as one gather per column (LAPACK
/// `laswp` semantics). Each block takes 16 columns: it stages the pivots,
/// gives every touched row a slot (rows k1..k2, then each row ipiv[j] ≥ k2 at its
/// first occurrence), replays the swaps on the slot indices (thread 0, shared
/// memory), then reads every touched row of its columns into shared memory in its
/// final order and writes them back — independent, mostly coalesced loads instead of
/// a dependent chain of swaps per column.
/// Grid ⌈(col1 − col0)/16⌉, block any multiple of 32, dynamic shared memory
/// 6·kw·4 + 2·kw·16·size_of::<T>() bytes (kw = k2 − k1).
///
/// # Safety
/// Launch shape as documented; 1 ≤ k2 − k1 ≤ 128; `ipiv[k1..k2)` readable with
/// k ≤ ipiv[k] < rows of `a`; `a` read-writable at those rows and rows k1..k2 of the
/// columns col0..col1 (ld `lda`); no other launch touches them concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn laswp_tile<T: Float>(
    a: *mut T,
    lda: usize,
    col0: usize,
    col1: usize,
    skip0: usize,
    skip1: usize,
    ipiv: *const u32,
    k1: usize,
    k2: usize,
) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let kw = k2 - k1;
    let ns = 2 * kw;
    let sh = device::shared::<u32>();
    let piv = sh;
    let slot = sh.wrapping_add(kw);
    let rowof = sh.wrapping_add(2 * kw);
    let src = sh.wrapping_add(4 * kw);
    let data = sh.wrapping_add(6 * kw) as *mut T;
    let cbase = col0 + device::block_x() * LASWP_TILE_COLS;
    let mut t = tid;
    while t < kw {
        // SAFETY: ipiv[k1 + t] readable (contract); piv has kw slots.
        unsafe { device::st(piv, t, device::ld(ipiv, k1 + t)) };
        t += nt;
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let mut t = tid;
    while t < kw {
        // SAFETY: all indices < kw or < 2kw inside the shared arrays; piv written
        // before the barrier.
        unsafe {
            let p = device::ld(piv as *const u32, t) as usize;
            let mut outside = u32::MAX;
            let s = if p < k2 {
                p - k1
            } else {
                let mut first = t;
                let mut q = 0;
                while q < t {
                    if device::ld(piv as *const u32, q) as usize == p {
                        first = q;
                        break;
                    }
                    q += 1;
                }
                if first == t {
                    outside = p as u32;
                }
                kw + first
            };
            device::st(slot, t, s as u32);
            device::st(rowof, t, (k1 + t) as u32);
            device::st(rowof, kw + t, outside);
            device::st(src, t, t as u32);
            device::st(src, kw + t, (kw + t) as u32);
        }
        t += nt;
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    if tid == 0 {
        let mut t = 0;
        while t < kw {
            // SAFETY: slot[t] < 2kw (set above); src has 2kw entries.
            unsafe {
                let s = device::ld(slot as *const u32, t) as usize;
                if s != t {
                    let x = device::ld(src as *const u32, t);
                    let y = device::ld(src as *const u32, s);
                    device::st(src, t, y);
                    device::st(src, s, x);
                }
            }
            t += 1;
        }
    }
    // SAFETY: block-uniform barrier: the final order is visible.
    unsafe { device::sync_threads() };
    let live = |ci: usize| {
        let c = cbase + ci;
        c < col1 && !(c >= skip0 && c < skip1)
    };
    let mut e = tid;
    while e < ns * LASWP_TILE_COLS {
        let (s, ci) = (e % ns, e / ns);
        // SAFETY: s < 2kw; a touched slot's source is a touched slot (the replay only
        // exchanges touched slots), so its row is < rows of `a` (contract); column
        // cbase + ci < col1 is in range; data has 2kw·16 entries.
        unsafe {
            let row = device::ld(rowof as *const u32, s);
            if row != u32::MAX && live(ci) {
                let from = device::ld(src as *const u32, s) as usize;
                if from != s {
                    let r = device::ld(rowof as *const u32, from) as usize;
                    let x = device::ld(a as *const T, r + (cbase + ci) * lda);
                    device::st(data, e, x);
                }
            }
        }
        e += nt;
    }
    // SAFETY: block-uniform barrier: every read of the block's columns is done.
    unsafe { device::sync_threads() };
    let mut e = tid;
    while e < ns * LASWP_TILE_COLS {
        let (s, ci) = (e % ns, e / ns);
        // SAFETY: as above; this block alone writes its columns.
        unsafe {
            let row = device::ld(rowof as *const u32, s);
            if row != u32::MAX && live(ci) && device::ld(src as *const u32, s) as usize != s {
                let x = device::ld(data as *const T, e);
                device::st(a, row as usize + (cbase + ci) * lda, x);
            }
        }
        e += nt;
    }
}
