//! LU with partial pivoting (issue 6; spec §4.3, erratum E35 corrected): the column
//! step of the panel — pivot search (first index of max |·|, block argmax), row swap
//! within the panel, scaling and rank-1 update — and the row interchanges applied
//! across whole column ranges (laswp). Column-major throughout; pivots are absolute
//! 0-based row indices (`u32`).

use crate::device::{self, Float, WARP};

/// Replaces (v, i) by (ov, oi) when ov is larger, or equal with a smaller index.
#[inline(always)]
pub(crate) fn better<T: Float>(v: T, i: u32, ov: T, oi: u32) -> bool {
    ov > v || (ov == v && oi < i)
}

/// Warp argmax: the (value, index) pair with the largest value, smallest index on
/// ties, lands in lane 0.
///
/// # Safety
/// The whole warp calls convergently (see `device::shfl_down_b32`).
#[inline(always)]
pub(crate) unsafe fn warp_argmax<T: Float>(mut v: T, mut i: u32) -> (T, u32) {
    let mut d = (WARP / 2) as u32;
    while d > 0 {
        // SAFETY: forwarded: the full warp is convergent here.
        let (ov, oi) = unsafe { (v.shfl_down(d), device::shfl_down_b32(i, d)) };
        if better(v, i, ov, oi) {
            v = ov;
            i = oi;
        }
        d /= 2;
    }
    (v, i)
}

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
    let lane = tid % WARP;
    let warp = tid / WARP;
    let nwarps = nt.div_ceil(WARP);
    let sval = device::shared::<T>();
    // 32 values of T (≤ 8 bytes each), then 32 indices.
    let sidx = sval.wrapping_add(32) as *mut u32;
    let col = a.wrapping_add(j * lda) as *const T;

    let mut bv = T::ZERO.sub(T::ONE);
    let mut bi = u32::MAX;
    let mut i = j + tid;
    while i < m {
        // SAFETY: j ≤ i < m, inside column j; nobody writes the column before the
        // barriers below.
        let v = unsafe { device::ld(col, i) }.abs();
        if v > bv {
            bv = v;
            bi = i as u32;
        }
        i += nt;
    }
    // SAFETY: every thread of the block reaches here (no early return above); full warps.
    let (wv, wi) = unsafe { warp_argmax(bv, bi) };
    if lane == 0 {
        // SAFETY: warp < 32 slots, one writer each.
        unsafe {
            device::st(sval, warp, wv);
            device::st(sidx, warp, wi);
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    if warp == 0 {
        let (mut v, mut ix) = (T::ZERO.sub(T::ONE), u32::MAX);
        if lane < nwarps {
            // SAFETY: slots < nwarps were written before the barrier.
            unsafe {
                v = device::ld(sval as *const T, lane);
                ix = device::ld(sidx as *const u32, lane);
            }
        }
        // SAFETY: warp 0 is complete and convergent here.
        let (_, p) = unsafe { warp_argmax(v, ix) };
        if lane == 0 {
            let p = if p == u32::MAX { j as u32 } else { p };
            // SAFETY: slot 32 of the index area is ours; ipiv[j] writable (contract).
            unsafe {
                device::st(sidx, 32, p);
                device::st(ipiv, j, p);
            }
        }
    }
    // SAFETY: block-uniform barrier; makes the pivot visible to the block.
    unsafe { device::sync_threads() };
    // SAFETY: written before the barrier.
    let p = unsafe { device::ld(sidx as *const u32, 32) } as usize;
    let mut t = tid;
    while c0 + t < cend {
        let c = c0 + t;
        let base = a.wrapping_add(c * lda);
        // SAFETY: rows j and p < m of column c in c0..cend, one thread per column.
        unsafe {
            let x = device::ld(base as *const T, j);
            let y = device::ld(base as *const T, p);
            if p != j {
                device::st(base, j, y);
                device::st(base, p, x);
            }
            if c == j {
                device::st(diag, j, y);
            }
        }
        t += nt;
    }
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
    let i = j + 1 + device::block_x() * device::block_dim_x() + device::thread_x();
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
    let lane = tid % WARP;
    let warp = tid / WARP;
    let nwarps = nt.div_ceil(WARP);
    let sval = device::shared::<T>();
    let urow = sval.wrapping_add(32);
    let sidx = sval.wrapping_add(96) as *mut u32;
    let cend = c0 + w;
    let mut j = c0;
    while j < cend && j < m {
        let col = a.wrapping_add(j * lda) as *const T;
        let mut bv = T::ZERO.sub(T::ONE);
        let mut bi = u32::MAX;
        let mut i = j + tid;
        while i < m {
            // SAFETY: j ≤ i < m in column j; written only after the barriers below.
            let v = unsafe { device::ld(col, i) }.abs();
            if v > bv {
                bv = v;
                bi = i as u32;
            }
            i += nt;
        }
        // SAFETY: block-uniform control flow (loop bounds are uniform); full warps.
        let (wv, wi) = unsafe { warp_argmax(bv, bi) };
        if lane == 0 {
            // SAFETY: one writer per slot < 32.
            unsafe {
                device::st(sval, warp, wv);
                device::st(sidx, warp, wi);
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        if warp == 0 {
            let (mut v, mut ix) = (T::ZERO.sub(T::ONE), u32::MAX);
            if lane < nwarps {
                // SAFETY: written before the barrier.
                unsafe {
                    v = device::ld(sval as *const T, lane);
                    ix = device::ld(sidx as *const u32, lane);
                }
            }
            // SAFETY: warp 0 complete and convergent.
            let (_, p) = unsafe { warp_argmax(v, ix) };
            if lane == 0 {
                let p = if p == u32::MAX { j as u32 } else { p };
                // SAFETY: slot 32 is the broadcast slot; ipiv[j] writable.
                unsafe {
                    device::st(sidx, 32, p);
                    device::st(ipiv, j, p);
                }
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        // SAFETY: written before the barrier.
        let p = unsafe { device::ld(sidx as *const u32, 32) } as usize;
        let mut t = tid;
        while c0 + t < cend {
            let c = c0 + t;
            let base = a.wrapping_add(c * lda);
            // SAFETY: rows j, p < m of column c; one thread per column; urow has 64 slots.
            unsafe {
                let x = device::ld(base as *const T, j);
                let y = device::ld(base as *const T, p);
                if p != j {
                    device::st(base, j, y);
                    device::st(base, p, x);
                }
                device::st(urow, t, y);
                if c == j {
                    device::st(diag, j, y);
                }
            }
            t += nt;
        }
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
    let c = col0 + device::block_x() * device::block_dim_x() + device::thread_x();
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

/// Element (i, c) of a block's slab: rows r0.. of the panel stored with leading
/// dimension `ld` (shared memory) or the matrix itself (global memory).
#[inline(always)]
pub(crate) fn slab_at<T>(sl: *mut T, ld: usize, i: usize, c: usize) -> *mut T {
    sl.wrapping_add(i + c * ld)
}

/// The first half of [`block_argmax`]: warp partials into `sval[0..32]`/`sidx[0..32]`, a
/// block barrier, then warp 0 reduces them: the block's (largest v, smallest i on ties)
/// lands in lane 0 of warp 0 (other threads get meaningless values).
///
/// # Safety
/// Called by every thread of the block (block-uniform), block a multiple of 32 (≤ 1024);
/// no thread still reads the slots from an earlier call.
#[inline(always)]
pub(crate) unsafe fn block_argmax_to_warp0<T: Float>(
    v: T,
    i: u32,
    sval: *mut T,
    sidx: *mut u32,
) -> (T, u32) {
    let tid = device::thread_linear();
    let lane = tid % WARP;
    let warp = tid / WARP;
    let nwarps = device::block_threads().div_ceil(WARP);
    // SAFETY: block-uniform call (contract); full warps.
    let (wv, wi) = unsafe { warp_argmax(v, i) };
    if lane == 0 {
        // SAFETY: one writer per slot < 32.
        unsafe {
            device::st(sval, warp, wv);
            device::st(sidx, warp, wi);
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let (mut bv, mut bi) = (T::ZERO.sub(T::ONE), u32::MAX);
    if warp == 0 {
        if lane < nwarps {
            // SAFETY: slots < nwarps written before the barrier.
            unsafe {
                bv = device::ld(sval as *const T, lane);
                bi = device::ld(sidx as *const u32, lane);
            }
        }
        // SAFETY: warp 0 complete and convergent.
        (bv, bi) = unsafe { warp_argmax(bv, bi) };
    }
    (bv, bi)
}

/// Block argmax of (v, i) (largest v, smallest i on ties); the result is returned to
/// every thread of the block. Uses `sval[0..32]` and `sidx[0..33]` of shared memory.
///
/// # Safety
/// Called by every thread of the block (block-uniform), block a multiple of 32 (≤ 1024).
#[inline(always)]
unsafe fn block_argmax<T: Float>(v: T, i: u32, sval: *mut T, sidx: *mut u32) -> (T, u32) {
    let tid = device::thread_linear();
    let lane = tid % WARP;
    let warp = tid / WARP;
    // SAFETY: forwarded (block-uniform call, full warps).
    let (rv, ri) = unsafe { block_argmax_to_warp0(v, i, sval, sidx) };
    if warp == 0 && lane == 0 {
        // SAFETY: slot 32 of sidx is free; slot 0 of sval was read only by lanes of
        // warp 0, before the shuffles of warp_argmax synchronised them.
        unsafe {
            device::st(sval, 0, rv);
            device::st(sidx, 32, ri);
        }
    }
    // SAFETY: block-uniform barrier: the broadcast slots are visible.
    unsafe { device::sync_threads() };
    // SAFETY: written before the barrier.
    let r = unsafe {
        (
            device::ld(sval as *const T, 0),
            device::ld(sidx as *const u32, 32),
        )
    };
    // SAFETY: block-uniform barrier: nobody overwrites the slots before all have read.
    unsafe { device::sync_threads() };
    r
}

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
    let mut li = r;
    while li < rows {
        if r0 + li > j {
            let x = slab_at(sl, ld, li, jj);
            // SAFETY: the contract.
            unsafe { device::st(x, 0, device::ld(x as *const T, 0).div(piv)) };
        }
        li += tr;
    }
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

/// `lu_panel_coop`: the whole panel c0..c0+w (rows c0..m) by a cooperative grid, all
/// column steps in one launch (issue 6; spec §4.3). Block b owns the slab of rows
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

        // global argmax of the published candidates (warp 0)
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
                let mut li = r;
                while li < rows {
                    if r0 + li > j {
                        // SAFETY: row li of the slab; columns ≡ g (mod cg) after jj are
                        // this thread's alone in this step; (li, jj) is only read now.
                        unsafe { coop_row_update(sl, ld, li, jj, w, jj + 1 + g, cg, urow) };
                    }
                    li += tr;
                }
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

/// Columns per block of `lu_laswp_tile`.
pub const LASWP_TILE_COLS: usize = 16;

/// `lu_laswp_tile`: the interchanges ipiv[k1..k2) (k2 − k1 ≤ 128), applied in order,
/// on the columns col0..col1 outside skip0..skip1 as one gather per column (LAPACK
/// `laswp` semantics, issue 6). Each block takes 16 columns: it stages the pivots,
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
