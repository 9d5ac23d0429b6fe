//! The LU panel on one thread-block cluster (docs/algorithms.md#lu-factorisation; sm_90 only, built
//! into the second PTX module): the blocks of the panel push the pivot candidates and
//! rows into each other's shared memory (`st.async` counted on the receiver's
//! mbarrier), so each column step waits on local mbarriers only, instead of a grid
//! barrier on a global counter, fences and L2 round trips (`lu::panel_coop`).

use crate::device::{self, Float, WARP};
use crate::lu::argmax::{block_argmax_to_warp0, warp_argmax};
use crate::lu::slab::{
    column_groups, rows_below, slab_at, slab_candidate, slab_copy, slab_scale, slab_swap,
    slab_update,
};

/// Most blocks a cluster of `lu_cluster_panel` may have (candidate slots a buffer).
pub const CLUSTER_MAX_BLOCKS: usize = 16;

/// Bytes of `lu_cluster_panel`'s shared-memory header before the slab: four mbarriers
/// (candidates and rows, two buffers each), two buffers of 16 candidate records (16
/// bytes: the value's bits and the row index), 32 warp partial values and indices,
/// then from byte 1024 two buffers each of the pushed pivot row and row j.
pub const fn cluster_header_bytes(w: usize, elem: usize) -> usize {
    1024 + 4 * w * elem
}

/// The bits of `v` (4 or 8 bytes) in a u64.
#[inline(always)]
fn bits_of<T: Copy>(v: T) -> u64 {
    if core::mem::size_of::<T>() == 8 {
        // SAFETY: T is 8 bytes.
        unsafe { core::mem::transmute_copy::<T, u64>(&v) }
    } else {
        // SAFETY: T is 4 bytes (the only other size the kernels use).
        u64::from(unsafe { core::mem::transmute_copy::<T, u32>(&v) })
    }
}

/// The value whose bits [`bits_of`] gave.
#[inline(always)]
fn from_bits<T: Copy>(b: u64) -> T {
    if core::mem::size_of::<T>() == 8 {
        // SAFETY: T is 8 bytes.
        unsafe { core::mem::transmute_copy::<u64, T>(&b) }
    } else {
        // SAFETY: T is 4 bytes.
        unsafe { core::mem::transmute_copy::<u32, T>(&(b as u32)) }
    }
}

/// `lu_cluster_panel`: the whole panel c0..c0+w (rows c0..m) by one thread-block
/// cluster, all column steps in one launch, the slabs in shared memory.
/// Block b (cluster rank b; the grid is one cluster of at most 16 blocks) owns rows
/// r0 = c0 + b·slab .. min(r0 + slab, m). Per column step j: each block finds its
/// candidate (first index of max |a(i, j)| over its rows i ≥ j) and pushes it to every
/// block; each block waits for all candidates on its own mbarrier and reduces them
/// (the pivot p is the first index of the global max, p = j when the column holds only
/// NaN); the owner of row p pushes that row to every block and the owner of row j
/// pushes row j to the owner of p; after the second wait each block swaps rows j and p
/// where it owns them, scales its rows i > j of column j by 1/u_jj and applies the
/// rank-1 update to the panel's later columns (nothing for a zero pivot: the host
/// reports it). Block 0 writes `ipiv[j]` and `diag[j]` = u_jj. The same arithmetic as
/// `lu::panel_coop`, so the same pivots and factors.
/// Block a multiple of 32 (≤ 1024); dynamic shared memory
/// cluster_header_bytes(w, size_of::<T>()) + slab·w·size_of::<T>() bytes.
///
/// About 160 lines: the candidate publication stays a closure inside it, because as a
/// separate (inlined) function ptxas gave the f64 kernel 96 registers instead of 80,
/// and the host sizes the block by 80 registers a thread; so did moving only its push
/// loop, or the start (mbarriers, slab load, cluster barrier), into functions (the PTX
/// changed). The shared-memory regions ([`cluster_smem`]) and the row swap
/// ([`swap_in_block`]) are functions with byte-identical PTX.
///
/// # Safety
/// Launched with a cluster dimension equal to the grid (one cluster of gridDim ≤ 16
/// blocks); gridDim·slab ≥ m − c0 and every block's slab starts below m; c0 < m,
/// 1 ≤ w, c0 + w ≤ columns of `a`; `a` read-writable at rows c0..m of columns
/// c0..c0+w (ld `lda` ≥ m); `ipiv`, `diag` writable at c0..c0+w; no other launch
/// touches any of these concurrently.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn panel_cluster<T: Float>(
    a: *mut T,
    lda: usize,
    m: usize,
    c0: usize,
    w: usize,
    ipiv: *mut u32,
    diag: *mut T,
    slab: usize,
) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let lane = tid % WARP;
    let warp = tid / WARP;
    let b = device::block_x();
    let nb = device::grid_blocks();
    let elem = core::mem::size_of::<T>();
    let (mbar_c, mbar_r, cand, sval, sidx, urow_in, rowj_in, sl) = cluster_smem::<T>(w);
    let ld = slab;
    let r0 = c0 + b * slab;
    let r1 = (r0 + slab).min(m);
    let rows = r1.saturating_sub(r0);
    if tid == 0 {
        // SAFETY: the four words are 8-byte aligned in this block's shared memory and
        // nobody uses them before the cluster barrier below.
        unsafe { init_mbarriers(mbar_c, mbar_r) };
    }
    // SAFETY: rows r0..r1 of columns c0..c0+w are in `a`; the slab area holds
    // slab·w ≥ rows·w elements (launch contract).
    unsafe { slab_copy(a, lda, r0, c0, rows, w, sl, ld, true) };
    // SAFETY: every thread of every block once: the mbarriers of every block are
    // initialised (and the slab loaded) before any block pushes.
    unsafe { device::cluster_sync() };

    let (cg, tr) = column_groups(rows, nt);
    let (g, r) = (tid / tr, tid % tr);
    // SAFETY: column 0 of the slab, read only.
    let (mut cv, mut ci) = unsafe { slab_candidate(sl, ld, r0, rows, tid, nt, 0, 0) };
    let publish = |jj: usize, cv: T, ci: u32| {
        // SAFETY: block-uniform call (every thread, same jj); the shared regions of
        // `cluster_smem`, the cluster of nb blocks with this block b.
        unsafe {
            publish_candidate(
                (jj, cv, ci),
                (mbar_c, cand, sval, sidx),
                (b, nb, warp, lane),
            )
        }
    };
    let row_bytes = (w * elem) as u32;
    publish(0, cv, ci);
    let mut jj = 0;
    while jj < w && c0 + jj < m {
        let j = c0 + jj;
        let buf = jj & 1;
        let parity = ((jj >> 1) & 1) as u32;
        let (bar_c, bar_r) = (mbar_c.wrapping_add(buf), mbar_r.wrapping_add(buf));
        // SAFETY: initialised mbarrier; the phase completes once every block's record
        // has landed and thread 0 has arrived.
        unsafe { device::mbarrier_wait_parity(bar_c, parity) };

        // the pivot: every warp reduces the records itself
        // SAFETY: full warps; the records of buffer `buf` landed (the phase completed).
        let p = unsafe { cluster_pivot::<T>(j, buf, nb, cand) };
        let owner_p = (p - c0) / slab;
        let owner_j = (j - c0) / slab;
        let urow = urow_in.wrapping_add(buf * w);
        let rowj = rowj_in.wrapping_add(buf * w);
        if owner_p == b || (p != j && owner_j == b) {
            // SAFETY: block-uniform barrier (p, j uniform): the previous step's deferred
            // update of these rows is complete before they are pushed.
            unsafe { device::sync_threads() };
        }
        // SAFETY: block-uniform; rows p and j unchanged until the barrier before the
        // swap; the destination buffers `buf` are free and their blocks wait for the
        // bytes on `bar_r` (see `push_rows`).
        unsafe {
            push_rows(
                sl, ld, r0, j, p, owner_p, owner_j, b, nb, w, urow, rowj, bar_r,
            )
        };
        if tid == 0 {
            let bytes = if p != j && owner_p == b {
                2 * row_bytes
            } else {
                row_bytes
            };
            // SAFETY: initialised mbarrier, one arrival a phase.
            unsafe { device::mbarrier_arrive_expect_tx(bar_r, bytes) };
        }
        // SAFETY: as for the candidates: the pivot row (and row j at the owner of p)
        // lands before the phase completes.
        unsafe { device::mbarrier_wait_parity(bar_r, parity) };
        // SAFETY: slot jj < w of the landed pivot row.
        let piv = unsafe { device::ld(urow as *const T, jj) };
        if b == 0 && tid == 0 {
            // SAFETY: ipiv[j], diag[j] writable (contract); one writer.
            unsafe { (device::st(ipiv, j, p as u32), device::st(diag, j, piv)) };
        }
        if p != j {
            // SAFETY: block-uniform (p, j uniform); the rows landed (see `swap_in_block`).
            unsafe { swap_in_block(sl, ld, (r0, r1), (j, p), w, (urow, rowj)) };
        }
        let next = jj + 1 < w && j + 1 < m;
        if piv != T::ZERO && g == 0 {
            // SAFETY: column jj of this thread's rows (group 0); rows > j are not read by
            // this step's pushes.
            unsafe { slab_scale(sl, ld, r0, rows, r, tr, j, jj, piv) };
        }
        // SAFETY: block-uniform barrier: the multipliers are visible, and the previous
        // step's deferred update is complete before this step's update begins.
        unsafe { device::sync_threads() };
        // look-ahead: group 0 updates column jj + 1 first and the block publishes its
        // candidate for step jj + 1, whose exchange then overlaps the rest of the update
        (cv, ci) = if next && g == 0 {
            // SAFETY: group 0 owns column jj + 1 in this step; urow holds w > jj + 1
            // landed entries.
            unsafe { lookahead_column(sl, ld, r0, rows, r, tr, j, jj, piv, urow) }
        } else {
            (T::ZERO.sub(T::ONE), u32::MAX)
        };
        if next {
            publish(jj + 1, cv, ci);
        }
        if piv != T::ZERO {
            // the deferred rest: columns jj+1+g, jj+1+g+cg, … without column jj + 1
            let first = jj + 1 + g + if g == 0 { cg } else { 0 };
            // SAFETY: rows li ≡ r (mod tr) of the slab; these columns are this thread's
            // alone until the next step's barriers; (li, jj) is only read now.
            unsafe { slab_update(sl, ld, r0, rows, r, tr, j, jj, w, first, cg, urow) };
        }
        jj += 1;
    }
    // SAFETY: every thread of every block: every push into a block has landed (each
    // block waited for all of its bytes) before any block exits; it also orders the
    // last step's updates within the block before the store below.
    unsafe { device::cluster_sync() };
    // SAFETY: as for the load above.
    unsafe { slab_copy(a, lda, r0, c0, rows, w, sl, ld, false) };
}

/// Publishes block b's pivot candidate (cv, ci) for column step `jj`: warp partials, a
/// block barrier, then warp 0 reduces them and pushes the record (value, index) into slot b
/// of buffer jj & 1 of every block of the cluster, arriving on that buffer's candidate
/// mbarrier with the bytes every block will wait for.
///
/// # Safety
/// Every thread of the block calls with the same `jj` (full warps); the pointers are
/// [`cluster_smem`]'s; warp 0 read the previous publication's slots before the block
/// barriers of the step in between.
#[inline(always)]
unsafe fn publish_candidate<T: Float>(
    (jj, cv, ci): (usize, T, u32),
    (mbar_c, cand, sval, sidx): (*mut u64, *mut u64, *mut T, *mut u32),
    (b, nb, warp, lane): (usize, usize, usize, usize),
) {
    let buf = jj & 1;
    let bar_c = mbar_c.wrapping_add(buf);
    // SAFETY: block-uniform call, full warps (block a multiple of 32) (contract).
    let (rv, ri) = unsafe { block_argmax_to_warp0(cv, ci, sval, sidx) };
    if warp == 0 && lane == 0 {
        // SAFETY: record slot b of buffer `buf` (16-byte aligned) and the candidate
        // mbarrier of every block d < nb of the cluster; each block waits for these
        // bytes. A block's slot b of buffer `buf` is next written two steps later, after
        // it has read this step's records (it pushes step jj + 1's candidate only after
        // them).
        unsafe {
            let rec = device::shared_addr(cand.wrapping_add((buf * CLUSTER_MAX_BLOCKS + b) * 2));
            let bar = device::shared_addr(bar_c);
            let mut d = 0;
            while d < nb {
                device::st_async_v2_b64(
                    device::cluster_map_addr(rec, d),
                    bits_of(rv),
                    u64::from(ri),
                    device::cluster_map_addr(bar, d),
                );
                d += 1;
            }
            device::mbarrier_arrive_expect_tx(bar_c, (16 * nb) as u32);
        }
    }
}

/// The pivot of column step j from the landed candidate records of buffer `buf` (each
/// warp reduces them itself): the first index of the global max, j when the column holds
/// only NaN.
///
/// # Safety
/// The whole warp calls it convergently (full warps); the records of the `nb` blocks in
/// buffer `buf` have landed.
#[inline(always)]
unsafe fn cluster_pivot<T: Float>(j: usize, buf: usize, nb: usize, cand: *mut u64) -> usize {
    let lane = device::thread_linear() % WARP;
    let (mut v, mut ix) = (T::ZERO.sub(T::ONE), u32::MAX);
    if lane < nb {
        // SAFETY: record `lane` of buffer `buf`, landed before the phase completed.
        unsafe {
            let rec = cand.wrapping_add((buf * CLUSTER_MAX_BLOCKS + lane) * 2);
            v = from_bits::<T>(device::ld(rec as *const u64, 0));
            ix = device::ld(rec as *const u64, 1) as u32;
        }
    }
    // SAFETY: full warps, convergent.
    let (_, p) = unsafe { warp_argmax(v, ix) };
    // SAFETY: as above.
    let p = unsafe { device::shfl_idx_b32(p, 0) };
    let p = if p == u32::MAX { j } else { p as usize };
    p
}

/// The row exchange of column step j: the owner of row p pushes it into the pivot-row
/// buffer `urow` of every block, and, when p ≠ j, the owner of row j pushes row j into
/// the `rowj` buffer of the owner of p (it becomes row p there); each push is counted on
/// the receiver's row mbarrier `bar_r` (the same shared offset in every block).
///
/// # Safety
/// Block-uniform call; rows p and j of the owners' slabs are unchanged until the barrier
/// before the swap; the destination buffers are free (their previous use, two steps
/// ago, was read before their block pushed step j's candidate) and each receiving block
/// waits for these bytes.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn push_rows<T: Float>(
    sl: *mut T,
    ld: usize,
    r0: usize,
    j: usize,
    p: usize,
    owner_p: usize,
    owner_j: usize,
    b: usize,
    nb: usize,
    w: usize,
    urow: *mut T,
    rowj: *mut T,
    bar_r: *mut u64,
) {
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    if owner_p == b {
        // push row p to every block's pivot-row buffer
        let lr = p - r0;
        let mut e = tid;
        while e < w * nb {
            let (c, d) = (e % w, e / w);
            // SAFETY: row p is this block's (r0 ≤ p < r1) and unchanged until the
            // barrier before the swap; the destination buffer `buf` of block d is
            // free (its previous use, two steps ago, was read before block d
            // pushed step jj's candidate) and block d waits for these bytes.
            unsafe {
                let x = device::ld(slab_at(sl, ld, lr, c) as *const T, 0);
                device::st_async(
                    device::cluster_map_addr(device::shared_addr(urow.wrapping_add(c)), d),
                    x,
                    device::cluster_map_addr(device::shared_addr(bar_r), d),
                );
            }
            e += nt;
        }
    }
    if p != j && owner_j == b {
        // push row j to the owner of p (it becomes row p there)
        let lr = j - r0;
        let mut c = tid;
        while c < w {
            // SAFETY: as above, for row j and block owner_p < nb.
            unsafe {
                let x = device::ld(slab_at(sl, ld, lr, c) as *const T, 0);
                device::st_async(
                    device::cluster_map_addr(device::shared_addr(rowj.wrapping_add(c)), owner_p),
                    x,
                    device::cluster_map_addr(device::shared_addr(bar_r), owner_p),
                );
            }
            c += nt;
        }
    }
}

/// The look-ahead of column step j: this thread's rows li = r, r + tr, … below row j get
/// the rank-1 update of column jj + 1 (when the pivot is not zero), and the first row
/// index of max |a(li, jj + 1)| over them is returned (as [`slab_candidate`]: (−1,
/// u32::MAX) when there is none).
///
/// # Safety
/// (li, jj) and (li, jj + 1) of the slab are this thread's alone in this step; `urow`
/// holds the pivot row (more than jj + 1 entries).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn lookahead_column<T: Float>(
    sl: *mut T,
    ld: usize,
    r0: usize,
    rows: usize,
    r: usize,
    tr: usize,
    j: usize,
    jj: usize,
    piv: T,
    urow: *mut T,
) -> (T, u32) {
    let (mut cv, mut ci) = (T::ZERO.sub(T::ONE), u32::MAX);
    rows_below(r0, rows, r, tr, j, |li| {
        // SAFETY: (li, jj) and (li, jj + 1) of this block's slab; group 0 owns column
        // jj + 1 in this step; urow holds w > jj + 1 entries.
        let v = unsafe {
            let x = slab_at(sl, ld, li, jj + 1);
            let mut v = device::ld(x as *const T, 0);
            if piv != T::ZERO {
                let nl = device::ld(slab_at(sl, ld, li, jj) as *const T, 0).neg();
                v = nl.mul_add(device::ld(urow as *const T, jj + 1), v);
                device::st(x, 0, v);
            }
            v
        }
        .abs();
        if v > cv {
            cv = v;
            ci = (r0 + li) as u32;
        }
    });
    (cv, ci)
}

/// Initialises the candidate and row mbarriers (two buffers each, one arrival a phase)
/// and makes the initialisation visible to the cluster.
///
/// # Safety
/// `mbar_c` and `mbar_r` each point at two 8-byte-aligned words of this block's shared
/// memory that nobody uses before a cluster barrier that follows.
#[inline(always)]
unsafe fn init_mbarriers(mbar_c: *mut u64, mbar_r: *mut u64) {
    // SAFETY: the caller's contract.
    unsafe {
        device::mbarrier_init(mbar_c, 1);
        device::mbarrier_init(mbar_c.wrapping_add(1), 1);
        device::mbarrier_init(mbar_r, 1);
        device::mbarrier_init(mbar_r.wrapping_add(1), 1);
        device::fence_mbarrier_init();
    }
}

/// The regions of [`panel_cluster`]'s dynamic shared memory for panel width `w`: the
/// candidate and row mbarriers (two each), the candidate records, the warp partials
/// (values, indices), the landed pivot rows and rows j (two buffers each), then the slab.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn cluster_smem<T: Float>(
    w: usize,
) -> (
    *mut u64,
    *mut u64,
    *mut u64,
    *mut T,
    *mut u32,
    *mut T,
    *mut T,
    *mut T,
) {
    let base = device::shared::<u8>();
    let urow_in = base.wrapping_add(1024) as *mut T;
    (
        base as *mut u64,
        base.wrapping_add(16) as *mut u64,
        base.wrapping_add(32) as *mut u64,
        base.wrapping_add(544) as *mut T,
        base.wrapping_add(800) as *mut u32,
        urow_in,
        urow_in.wrapping_add(2 * w),
        base.wrapping_add(cluster_header_bytes(w, core::mem::size_of::<T>())) as *mut T,
    )
}

/// Rows j and p swapped in this block's slab rows r0 .. r1 from the landed rows `urow`
/// (row p) and `rowj` (row j), between two block barriers.
///
/// # Safety
/// Block-uniform; [`panel_cluster`] at step j with p ≠ j, after the rows landed.
#[inline(always)]
unsafe fn swap_in_block<T: Float>(
    sl: *mut T,
    ld: usize,
    (r0, r1): (usize, usize),
    (j, p): (usize, usize),
    w: usize,
    (urow, rowj): (*mut T, *mut T),
) {
    // SAFETY: block-uniform barrier (p, j uniform): every thread's pushes have
    // read rows j and p before the swap overwrites them.
    unsafe { device::sync_threads() };
    // SAFETY: rows j and p of this block's slab; the landed rows in shared
    // memory.
    unsafe { slab_swap(sl, ld, r0, r1, j, p, w, urow, rowj) };
    // SAFETY: block-uniform barrier: the swap is visible.
    unsafe { device::sync_threads() };
}
