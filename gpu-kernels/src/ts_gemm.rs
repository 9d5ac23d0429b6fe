//! W = VᵀC for a tall V (rows × k, k ≤ 32) and a tall C (rows × nc): the first product
//! of the tall-skinny trailing update C −= V·op(T)·(VᵀC)
//! (docs/algorithms.md#blocked-reflectors). cuBLAS
//! runs this shape (a k × nc output, an inner dimension of a million) as one GEMM that
//! reads its operands at 1.2 TB/s on an H100 in f32 (measured); here every
//! block multiplies one chunk of [`CHUNK`] rows for one tile of [`TN`] columns of C and
//! writes its partial product, and [`reduce`] sums the partials in chunk order (the same
//! result every run).
//!
//! Layout of a block: 256 threads; thread (ti, tj) = (tid / 16, tid mod 16) accumulates
//! W's rows ti and ti + 16 for C's columns tj + 16q, q < 4, of its tile. The chunk's rows
//! pass through shared memory in stages of [`SR`] rows, two stages in flight
//! (`cp.async`, 16 bytes a copy); each stage holds V's 32 columns and the tile's 64
//! columns column-major with a padded leading dimension [`SRP`] ≡ 4 (mod 32) words in
//! f32, so that the 16-byte reads of consecutive threads' columns are conflict-free.

use crate::device::{self, Float};

/// Rows of a block's chunk.
pub const CHUNK: usize = 4096;
/// Columns of C a block covers.
pub const TN: usize = 64;
/// Columns of V (W's rows) a block covers: all of them (k ≤ 32).
pub const TK: usize = 32;
/// Rows of a stage.
const SR: usize = 64;
/// Leading dimension of a stage's columns in shared memory (SR + 4: 16-byte aligned
/// columns, and 68 ≡ 4 (mod 32) words in f32).
const SRP: usize = SR + 4;
/// Elements of one stage: V's TK columns and C's TN columns.
const STAGE: usize = (TK + TN) * SRP;
/// Shared memory of [`partial`], in elements: two stages.
pub const SMEM: usize = 2 * STAGE;
/// Threads of a block.
pub const THREADS: usize = 256;
const _: () = assert!(THREADS == 16 * 16 && TK == 32 && TN == 64 && SR % 4 == 0);
const _: () = assert!(CHUNK % SR == 0 && SRP % 4 == 0);

/// Four consecutive elements, aligned so that one read moves them (16 bytes in f32).
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Quad<T>([T; 4]);

/// `ts_gemm_partial`: for chunk b = `block_x` (rows b·CHUNK .. of the `rows`) and tile
/// y = `block_y` (C's columns y·TN ..), P_b[i][j] = Σ_r V[r][i]·C[r][j] over the chunk's
/// rows, for i < 32 (zero for i ≥ k) and j < TN with y·TN + j < nc, into
/// `part[b·32·nc + (y·TN + j)·32 + i]`.
///
/// # Safety
/// Grid (⌈rows/CHUNK⌉, ⌈nc/TN⌉), block [`THREADS`], dynamic shared memory [`SMEM`]
/// elements (base 16-byte aligned); 1 ≤ k ≤ 32; `v` readable rows×k (ld `ldv`), `c`
/// readable rows×nc (ld `ldc`), both 16-byte aligned with `ldv`, `ldc` multiples of
/// 16 bytes' worth of elements; `part` writable for ⌈rows/CHUNK⌉·32·nc elements.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn partial<T: Float>(
    v: *const T,
    ldv: usize,
    c: *const T,
    ldc: usize,
    rows: usize,
    k: usize,
    nc: usize,
    part: *mut T,
) {
    let tid = device::thread_x();
    let (ti, tj) = (tid / 16, tid % 16);
    let b = device::block_x();
    let j0 = device::block_y() * TN;
    let r_begin = b * CHUNK;
    let r_end = rows.min(r_begin + CHUNK);
    let tn = TN.min(nc - j0);
    let sm = device::shared::<Quad<T>>().cast::<T>();
    // Columns beyond k (V) or the tile (C) read as zeros: clear them in both stages once.
    let mut e = tid;
    while e < SMEM {
        let col = (e % STAGE) / SRP;
        if (col < TK && col >= k) || (col >= TK && col - TK >= tn) {
            // SAFETY: e < SMEM, inside the dynamic shared memory; one writer each.
            unsafe { device::st(sm, e, T::ZERO) };
        }
        e += THREADS;
    }
    // Stage s of the chunk: rows r_begin + s·SR .. into buffer s mod 2.
    let stages = (r_end - r_begin).div_ceil(SR);
    let g = Chunk {
        v,
        ldv,
        c,
        ldc,
        k,
        j0,
        tn,
        r_begin,
        r_end,
        sm,
        tid,
    };
    // SAFETY (of each call): stage s < stages of the chunk; as `load_stage` requires.
    let load = |s: usize| unsafe { load_stage(&g, s) };
    let mut acc = [[T::ZERO; 4]; 2];
    // SAFETY: block-uniform barrier (the zero fill before any stage's reads).
    unsafe { device::sync_threads() };
    load(0);
    for s in 0..stages {
        if s + 1 < stages {
            load(s + 1);
            // SAFETY: stage s's group is complete when at most the newer one is pending.
            unsafe { device::cp_async_wait::<1>() };
        } else {
            // SAFETY: as above, nothing newer.
            unsafe { device::cp_async_wait_all() };
        }
        // SAFETY: block-uniform barrier: every thread's copies and stores of stage s are
        // visible.
        unsafe { device::sync_threads() };
        // SAFETY: buffer s mod 2 inside SMEM.
        let buf = unsafe { sm.add((s % 2) * STAGE) as *const T };
        let mut r = 0;
        while r < SR {
            // SAFETY: 16-byte aligned quads (SRP, r multiples of 4) inside the stage.
            let a = unsafe {
                [
                    buf.add(ti * SRP + r).cast::<Quad<T>>().read().0,
                    buf.add((ti + 16) * SRP + r).cast::<Quad<T>>().read().0,
                ]
            };
            let mut q = 0;
            while q < 4 {
                // SAFETY: as above, C's column tj + 16q of the tile.
                let bq = unsafe {
                    buf.add((TK + tj + 16 * q) * SRP + r)
                        .cast::<Quad<T>>()
                        .read()
                        .0
                };
                let mut p = 0;
                while p < 2 {
                    let mut t = 0;
                    while t < 4 {
                        acc[p][q] = a[p][t].mul_add(bq[t], acc[p][q]);
                        t += 1;
                    }
                    p += 1;
                }
                q += 1;
            }
            r += 4;
        }
        // SAFETY: block-uniform barrier: stage s's buffer is free for stage s + 2.
        unsafe { device::sync_threads() };
    }
    let base = b * TK * nc;
    let mut q = 0;
    while q < 4 {
        let j = tj + 16 * q;
        if j < tn {
            let mut p = 0;
            while p < 2 {
                // SAFETY: b < ⌈rows/CHUNK⌉, j0 + j < nc, row < 32: inside part; one
                // writer each.
                unsafe { device::st(part, base + (j0 + j) * TK + ti + 16 * p, acc[p][q]) };
                p += 1;
            }
        }
        q += 1;
    }
}

/// `ts_gemm_reduce`: W[i][j] = Σ_b part[b·32·nc + j·32 + i] over the `chunks` partials
/// (in chunk order) for i < k, j < nc, into `w[i + j·ldw]`.
///
/// # Safety
/// Grid ⌈32·nc/256⌉, block 256; `part` readable for chunks·32·nc elements; `w` writable
/// k×nc (ld `ldw` ≥ k), not overlapping `part`.
#[inline(always)]
pub unsafe fn reduce<T: Float>(
    part: *const T,
    chunks: usize,
    k: usize,
    nc: usize,
    w: *mut T,
    ldw: usize,
) {
    let e = device::block_x() * THREADS + device::thread_x();
    if e >= TK * nc {
        return;
    }
    let (i, j) = (e % TK, e / TK);
    if i >= k {
        return;
    }
    // SAFETY: chunks partials of 32·nc elements, e < 32·nc: inside part.
    let s = unsafe { sum_chunks(part, chunks, TK * nc, e) };
    // SAFETY: i < k ≤ ldw, j < nc: inside w; one writer each.
    unsafe { device::st(w, i + j * ldw, s) };
}

/// Σ_c part[c·stride + e] over c < `chunks`, in chunk order (the partial sums' reduction
/// of [`reduce`] and [`narrow_reduce`]).
///
/// # Safety
/// `part` readable at c·stride + e for every c < `chunks`.
#[inline(always)]
unsafe fn sum_chunks<T: Float>(part: *const T, chunks: usize, stride: usize, e: usize) -> T {
    let mut s = T::ZERO;
    let mut c = 0;
    while c < chunks {
        // SAFETY: the caller's contract.
        s = s.add(unsafe { device::ld(part, c * stride + e) });
        c += 1;
    }
    s
}

/// What [`load_stage`] needs of a block of [`partial`]: the operands, V's columns k,
/// the tile (C's columns j0 .. j0 + tn), the chunk's rows [r_begin, r_end), the
/// dynamic shared memory and this thread.
struct Chunk<T> {
    v: *const T,
    ldv: usize,
    c: *const T,
    ldc: usize,
    k: usize,
    j0: usize,
    tn: usize,
    r_begin: usize,
    r_end: usize,
    sm: *mut T,
    tid: usize,
}

/// Stage s of the chunk (rows r_begin + s·SR ..) into buffer s mod 2: a full stage by
/// 16-byte `cp.async` copies of V's k and the tile's tn columns (the other columns stay
/// zero), the chunk's short last stage by plain loads with zeros below its last row;
/// then closes this thread's copy group (possibly empty).
///
/// # Safety
/// As [`partial`]'s contract for `v`, `c` and the shared memory; s is a stage of the
/// chunk whose buffer no thread reads until the wait and block barrier that follow.
#[inline(always)]
unsafe fn load_stage<T: Float>(g: &Chunk<T>, s: usize) {
    let (v, ldv, c, ldc, k, j0, tn) = (g.v, g.ldv, g.c, g.ldc, g.k, g.j0, g.tn);
    let (r_begin, r_end, sm, tid) = (g.r_begin, g.r_end, g.sm, g.tid);
    // Elements a 16-byte copy moves.
    let per = 16 / core::mem::size_of::<T>();
    let r0 = r_begin + s * SR;
    let nr = SR.min(r_end - r0);
    // SAFETY: buffer s mod 2 lies inside SMEM.
    let buf = unsafe { sm.add((s % 2) * STAGE) };
    if nr == SR {
        // Full stage: (k + tn) columns × SR/per copies of 16 bytes.
        let per_col = SR / per;
        let total = (TK + TN) * per_col;
        let mut q = tid;
        while q < total {
            let (col, part_r) = (q / per_col, (q % per_col) * per);
            let src = if col < TK {
                (col < k).then(|| (v, r0 + part_r + col * ldv))
            } else {
                (col - TK < tn).then(|| (c, r0 + part_r + (j0 + col - TK) * ldc))
            };
            if let Some((p, off)) = src {
                // SAFETY: rows r0 + part_r .. + per < rows of column col of V or C
                // (16-byte aligned: r0, part_r multiples of per, ld and base aligned
                // by the launch contract); the destination is this stage's column,
                // not read before the wait and barrier that follow.
                unsafe { device::cp_async_16(buf.add(col * SRP + part_r), p.add(off)) };
            }
            q += THREADS;
        }
    } else {
        // The chunk's short last stage: plain loads, zeros below the last row.
        let total = (TK + TN) * SR;
        let mut q = tid;
        while q < total {
            let (col, r) = (q / SR, q % SR);
            let x = if r >= nr {
                T::ZERO
            } else if col < TK {
                if col < k {
                    // SAFETY: row r0 + r < rows, column col < k of V.
                    unsafe { device::ld(v, r0 + r + col * ldv) }
                } else {
                    T::ZERO
                }
            } else if col - TK < tn {
                // SAFETY: row r0 + r < rows, column j0 + col − TK < nc of C.
                unsafe { device::ld(c, r0 + r + (j0 + col - TK) * ldc) }
            } else {
                T::ZERO
            };
            // SAFETY: inside this stage's buffer; one writer each.
            unsafe { device::st(buf, col * SRP + r, x) };
            q += THREADS;
        }
    }
    // SAFETY: closes this thread's group for the stage (possibly empty).
    unsafe { device::cp_async_commit() };
}

/// Rows of a narrow block's chunk: [`THREADS`] threads of 64 rows each.
pub const NARROW_CHUNK: usize = THREADS * 64;
/// Columns of A and of B a narrow block covers for B of up to 4 columns.
pub const NARROW_TILE: (usize, usize) = (8, 4);
/// Columns of A and of B a narrow block covers for B of 5 to 8 columns (read once).
pub const NARROW_TILE_WIDE: (usize, usize) = (4, 8);
const _: () = assert!(NARROW_TILE.0 * NARROW_TILE.1 == 32 && THREADS == 256);
const _: () = assert!(NARROW_TILE_WIDE.0 * NARROW_TILE_WIDE.1 == 32);

/// One halving step of [`reduce_scatter`]: lanes with bit `$h` set keep the upper half of
/// the live `2·$h` values and send the lower half to their partner, which keeps the lower
/// half and sends the upper; each lane adds what it receives to what it keeps.
macro_rules! halve {
    ($v:ident, $lane:ident, $h:literal) => {{
        let up = $lane & $h != 0;
        let mut k = 0;
        while k < $h {
            let (lo, hi) = ($v[k], $v[k + $h]);
            let (send, keep) = if up { (lo, hi) } else { (hi, lo) };
            // SAFETY: the caller's whole warp runs this step convergently.
            $v[k] = keep.add(unsafe { send.shfl_xor($h) });
            k += 1;
        }
    }};
}

/// Warp reduce-scatter of 32 values a lane: lane l returns the warp's sum of every
/// lane's `v[l]` (31 shuffles where 32 separate sums take 160).
///
/// # Safety
/// The whole warp calls convergently.
#[inline(always)]
unsafe fn reduce_scatter<T: Float>(mut v: [T; 32], lane: usize) -> T {
    halve!(v, lane, 16);
    halve!(v, lane, 8);
    halve!(v, lane, 4);
    halve!(v, lane, 2);
    halve!(v, lane, 1);
    v[0]
}

/// `ts_gemm_narrow_partial`: [`narrow_tiles`] with tiles of [`NARROW_TILE`] (8 of A's
/// columns by 4 of B's).
///
/// # Safety
/// As [`narrow_tiles`] with (TA, TB) = (8, 4).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn narrow_partial<T: Float>(
    a: *const T,
    lda: usize,
    b: *const T,
    ldb: usize,
    rows: usize,
    ka: usize,
    kb: usize,
    part: *mut T,
) {
    // SAFETY: forwarded contract.
    unsafe { narrow_tiles::<T, 8, 4>(a, lda, b, ldb, rows, ka, kb, part) }
}

/// `ts_gemm_narrow_partial_wide`: [`narrow_tiles`] with tiles of [`NARROW_TILE_WIDE`] (4
/// of A's columns by 8 of B's: B of 5 to 8 columns in one pass over A).
///
/// # Safety
/// As [`narrow_tiles`] with (TA, TB) = (4, 8).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn narrow_partial_wide<T: Float>(
    a: *const T,
    lda: usize,
    b: *const T,
    ldb: usize,
    rows: usize,
    ka: usize,
    kb: usize,
    part: *mut T,
) {
    // SAFETY: forwarded contract.
    unsafe { narrow_tiles::<T, 4, 8>(a, lda, b, ldb, rows, ka, kb, part) }
}

/// Partial products of W = AᵀB over row chunks: for tile `block_x` = ta + ⌈ka/TA⌉·tb (A's
/// columns TA·ta .., B's columns TB·tb ..) and chunk c = `block_y` (rows c·NARROW_CHUNK ..),
/// P_c[i][j] = Σ_r A[r][i]·B[r][j] over the chunk's rows, into `part[(c·ka + i)·kb + j]`.
/// The tiles of one chunk are neighbours in launch order, so B's rows (read by every
/// tile) come from L2. Each thread sums its 64 rows in order; the warp's 32 sums meet by
/// a reduce-scatter, the 8 warps' in warp order. Reads A and B straight from global
/// memory (each warp a 32-row run of a column), so any leading dimension and alignment
/// does.
///
/// # Safety
/// TA·TB = 32; grid (⌈ka/TA⌉·⌈kb/TB⌉, ⌈rows/NARROW_CHUNK⌉), block [`THREADS`], dynamic
/// shared memory ≥ 256 elements; `a` readable rows×ka (ld `lda` ≥ rows), `b` readable
/// rows×kb (ld `ldb` ≥ rows); `part` writable for ⌈rows/NARROW_CHUNK⌉·ka·kb elements.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn narrow_tiles<T: Float, const TA: usize, const TB: usize>(
    a: *const T,
    lda: usize,
    b: *const T,
    ldb: usize,
    rows: usize,
    ka: usize,
    kb: usize,
    part: *mut T,
) {
    let tid = device::thread_x();
    let (lane, warp) = (tid % 32, tid / 32);
    let chunk = device::block_y();
    let tiles_a = ka.div_ceil(TA);
    let (i0, j0) = (
        (device::block_x() % tiles_a) * TA,
        (device::block_x() / tiles_a) * TB,
    );
    let (na, nb) = (TA.min(ka - i0), TB.min(kb - j0));
    let r_begin = chunk * NARROW_CHUNK;
    let r_end = rows.min(r_begin + NARROW_CHUNK);
    let mut acc = [T::ZERO; 32];
    let mut r = r_begin + tid;
    while r < r_end {
        let mut bv = [T::ZERO; TB];
        let mut jj = 0;
        while jj < TB {
            if jj < nb {
                // SAFETY: r < rows, j0 + jj < kb: inside B.
                bv[jj] = unsafe { device::ld(b, r + (j0 + jj) * ldb) };
            }
            jj += 1;
        }
        let mut ii = 0;
        while ii < TA {
            if ii < na {
                // SAFETY: r < rows, i0 + ii < ka: inside A.
                let av = unsafe { device::ld(a, r + (i0 + ii) * lda) };
                let mut jj = 0;
                while jj < TB {
                    acc[ii * TB + jj] = av.mul_add(bv[jj], acc[ii * TB + jj]);
                    jj += 1;
                }
            }
            ii += 1;
        }
        r += THREADS;
    }
    // SAFETY: block-uniform control flow: every thread leaves the row loop and calls.
    let mine = unsafe { reduce_scatter(acc, lane) };
    let sm = device::shared::<T>();
    // SAFETY: warp·32 + lane < 256 ≤ the dynamic shared memory; one writer each.
    unsafe { device::st(sm, warp * 32 + lane, mine) };
    // SAFETY: block-uniform barrier: the warps' sums are visible.
    unsafe { device::sync_threads() };
    if warp == 0 {
        let (ii, jj) = (lane / TB, lane % TB);
        if ii < na && jj < nb {
            let mut s = T::ZERO;
            let mut w = 0;
            while w < THREADS / 32 {
                // SAFETY: w·32 + lane < 256, written before the barrier.
                s = s.add(unsafe { device::ld(sm as *const T, w * 32 + lane) });
                w += 1;
            }
            // SAFETY: chunk < ⌈rows/NARROW_CHUNK⌉, i0 + ii < ka, j0 + jj < kb: inside
            // part; one writer each.
            unsafe { device::st(part, (chunk * ka + i0 + ii) * kb + j0 + jj, s) };
        }
    }
}

/// `ts_gemm_narrow_reduce`: W[i][j] = Σ_c part[(c·ka + i)·kb + j] over the `chunks`
/// partials of [`narrow_partial`] (in chunk order) into `w[i + j·ldw]`.
///
/// # Safety
/// Grid ⌈ka·kb/256⌉, block 256; `part` readable for chunks·ka·kb elements; `w` writable
/// ka×kb (ld `ldw` ≥ ka), not overlapping `part`.
#[inline(always)]
pub unsafe fn narrow_reduce<T: Float>(
    part: *const T,
    chunks: usize,
    ka: usize,
    kb: usize,
    w: *mut T,
    ldw: usize,
) {
    let e = device::block_x() * THREADS + device::thread_x();
    if e >= ka * kb {
        return;
    }
    let (i, j) = (e / kb, e % kb);
    // SAFETY: chunks partials of ka·kb elements, e < ka·kb: inside part.
    let s = unsafe { sum_chunks(part, chunks, ka * kb, e) };
    // SAFETY: i < ka ≤ ldw, j < kb: inside w; one writer each.
    unsafe { device::st(w, i + j * ldw, s) };
}
