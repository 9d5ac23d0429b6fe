//! A block's slab of panel rows (in shared or global memory) and the column-step pieces
//! that work on it, shared by the cooperative and the cluster panel.

use crate::device::{self, Float};

/// Element (i, c) of a block's slab: rows r0.. of the panel stored with leading
/// dimension `ld` (shared memory) or the matrix itself (global memory).
#[inline(always)]
pub(crate) fn slab_at<T>(sl: *mut T, ld: usize, i: usize, c: usize) -> *mut T {
    sl.wrapping_add(i + c * ld)
}

/// Copies rows r0..r0+rows of the panel's columns c0..c0+w of `a` into the slab `sl`
/// (leading dimension `ld`), or back when `to_slab` is false; threads stride by the
/// block size.
///
/// # Safety
/// Block-wide call; rows r0..r0+rows of columns c0..c0+w are in `a` (ld `lda`); the slab
/// holds ld·w ≥ rows·w elements; no other thread writes the destination concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn slab_copy<T: Float>(
    a: *mut T,
    lda: usize,
    r0: usize,
    c0: usize,
    rows: usize,
    w: usize,
    sl: *mut T,
    ld: usize,
    to_slab: bool,
) {
    let nt = device::block_threads();
    let mut e = device::thread_linear();
    while e < rows * w {
        let (i, c) = (e % rows, e / rows);
        let g = a.wrapping_add(r0 + i + (c0 + c) * lda);
        let l = slab_at(sl, ld, i, c);
        // SAFETY: both elements in bounds (contract); one writer each.
        unsafe {
            if to_slab {
                device::st(l, 0, device::ld(g as *const T, 0));
            } else {
                device::st(g, 0, device::ld(l as *const T, 0));
            }
        }
        e += nt;
    }
}

/// Threads of a row in the rank-1 update: `cg` threads share a slab row (splitting its
/// columns) when the slab has fewer rows than the block has threads; returns (cg, tr =
/// threads a column group).
#[inline(always)]
pub(crate) fn column_groups(rows: usize, nt: usize) -> (usize, usize) {
    let cg = if rows == 0 {
        1
    } else {
        (nt / rows.next_power_of_two()).clamp(1, 8)
    };
    (cg, nt / cg)
}

/// This thread's candidate in slab column `col`: the first row index (absolute, r0 +
/// li) of max |a(li, col)| over its rows li = first, first + step, … < rows with
/// r0 + li ≥ from; (−1, u32::MAX) when it has none (NaNs never win).
///
/// # Safety
/// Column `col` of the slab's rows is readable and not written concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn slab_candidate<T: Float>(
    sl: *mut T,
    ld: usize,
    r0: usize,
    rows: usize,
    first: usize,
    step: usize,
    col: usize,
    from: usize,
) -> (T, u32) {
    let (mut cv, mut ci) = (T::ZERO.sub(T::ONE), u32::MAX);
    let mut li = first;
    while li < rows {
        if r0 + li >= from {
            // SAFETY: (li, col) of the slab (contract).
            let v = unsafe { device::ld(slab_at(sl, ld, li, col) as *const T, 0) }.abs();
            if v > cv {
                cv = v;
                ci = (r0 + li) as u32;
            }
        }
        li += step;
    }
    (cv, ci)
}

/// The swap of column step j across the panel's w columns, where this block owns the
/// rows: row j := `urow` (the pivot row), row p := `rowj` (row j's old entries); one
/// thread a column.
///
/// # Safety
/// Block-wide call; `urow`, `rowj` hold w staged entries; rows j and p of the slab, where
/// r0 ≤ row < r1, are written by nobody else concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn slab_swap<T: Float>(
    sl: *mut T,
    ld: usize,
    r0: usize,
    r1: usize,
    j: usize,
    p: usize,
    w: usize,
    urow: *const T,
    rowj: *const T,
) {
    let nt = device::block_threads();
    let mut c = device::thread_linear();
    while c < w {
        // SAFETY: the contract; one thread per column.
        unsafe {
            if j >= r0 && j < r1 {
                device::st(slab_at(sl, ld, j - r0, c), 0, device::ld(urow, c));
            }
            if p >= r0 && p < r1 {
                device::st(slab_at(sl, ld, p - r0, c), 0, device::ld(rowj, c));
            }
        }
        c += nt;
    }
}

/// Scales column jj of this thread's slab rows li = r, r + tr, … below row j (r0 + li >
/// j) by 1/piv (the multipliers l = a(li, jj)/u_jj).
///
/// # Safety
/// Those elements are this thread's alone (column group 0).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn slab_scale<T: Float>(
    sl: *mut T,
    ld: usize,
    r0: usize,
    rows: usize,
    r: usize,
    tr: usize,
    j: usize,
    jj: usize,
    piv: T,
) {
    rows_below(r0, rows, r, tr, j, |li| {
        let x = slab_at(sl, ld, li, jj);
        // SAFETY: the contract.
        unsafe { device::st(x, 0, device::ld(x as *const T, 0).div(piv)) };
    });
}

/// Rank-1 update of slab row li at step jj: a(li, c) −= a(li, jj)·urow[c] for the
/// columns c = first, first+cg, … < w (first > jj), in chunks of 8 whose loads are issued before
/// their stores (the compiler cannot reorder loads past stores of possibly aliasing
/// pointers).
///
/// # Safety
/// Row li of the slab (`sl`, ld) has w columns; `urow` holds w entries; no other thread
/// writes (li, c) for these c, or (li, jj), concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn coop_row_update<T: Float>(
    sl: *mut T,
    ld: usize,
    li: usize,
    jj: usize,
    w: usize,
    first: usize,
    cg: usize,
    urow: *const T,
) {
    // SAFETY: (li, jj) in the slab (contract).
    let nl = unsafe { device::ld(slab_at(sl, ld, li, jj) as *const T, 0) }.neg();
    let mut c = first;
    while c < w {
        let mut u = [T::ZERO; 8];
        let mut x = [T::ZERO; 8];
        let mut q = 0;
        while q < 8 {
            let cc = c + q * cg;
            if cc < w {
                // SAFETY: cc < w: staged row entry and this thread's slab element.
                unsafe {
                    u[q] = device::ld(urow, cc);
                    x[q] = device::ld(slab_at(sl, ld, li, cc) as *const T, 0);
                }
            }
            q += 1;
        }
        let mut q = 0;
        while q < 8 {
            let cc = c + q * cg;
            if cc < w {
                // SAFETY: as above; this thread is the only writer of (li, cc).
                unsafe { device::st(slab_at(sl, ld, li, cc), 0, nl.mul_add(u[q], x[q])) };
            }
            q += 1;
        }
        c += 8 * cg;
    }
}

/// The rank-1 update of step jj on this thread's slab rows li = r, r + tr, … below row j
/// (r0 + li > j): [`coop_row_update`] of each, over the columns first, first + cg, … < w.
///
/// # Safety
/// As [`coop_row_update`] for each of those rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn slab_update<T: Float>(
    sl: *mut T,
    ld: usize,
    r0: usize,
    rows: usize,
    r: usize,
    tr: usize,
    j: usize,
    jj: usize,
    w: usize,
    first: usize,
    cg: usize,
    urow: *const T,
) {
    rows_below(r0, rows, r, tr, j, |li| {
        // SAFETY: row li of the slab (caller).
        unsafe { coop_row_update(sl, ld, li, jj, w, first, cg, urow) };
    });
}

/// Calls `f(li)` for this thread's slab rows li = first, first + step, … < rows that lie
/// below row j of the panel (r0 + li > j), in increasing li.
#[inline(always)]
pub(crate) fn rows_below(
    r0: usize,
    rows: usize,
    first: usize,
    step: usize,
    j: usize,
    mut f: impl FnMut(usize),
) {
    let mut li = first;
    while li < rows {
        if r0 + li > j {
            f(li);
        }
        li += step;
    }
}
