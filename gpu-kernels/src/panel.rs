//! Panel machinery of the device blocked Householder QR and of the block updates
//! (docs/algorithms.md#blocked-householder-qr and the updates that reuse it):
//! applying one reflector to the rest of a panel, V
//! extraction with explicit unit diagonal and zeros, exact zeros below a diagonal,
//! identity/copy/embedding of dense blocks, and column norms for the rank check.
//! Column-major throughout; 2-D kernels loop over columns with a host-given y stride
//! (grid y ≤ 65535).

use crate::device::{self, Float};
use crate::elementwise::for_each_column;
use crate::reduce;

/// `panel_apply`: applies H = I − τ·[1; v]·[1; v]ᵀ from the left to `ncols` columns,
/// each made of one head element `head[c·ldh]` and a tail `tail[c·ldt + i]`, i < len:
/// w = head + Σ vᵢ·tailᵢ; head −= τw; tailᵢ −= τw·vᵢ (applying H to a block,
/// docs/algorithms.md#householder-vectors).
/// One block per column: grid `ncols`, block 256, dynamic shared memory 256·8 bytes.
///
/// # Safety
/// Launch shape as documented; `v[0..len)` and `*tau` readable and not written by this
/// launch; for every c < ncols, `head[c·ldh]` and `tail[c·ldt .. c·ldt+len)` writable and
/// pairwise disjoint across columns and from `v`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply<T: Float>(
    v: *const T,
    tau: *const T,
    head: *mut T,
    ldh: usize,
    tail: *mut T,
    ldt: usize,
    len: usize,
    ncols: usize,
) {
    let c = device::block_x();
    if c >= ncols {
        return; // uniform per block
    }
    let tid = device::thread_linear();
    let nt = device::block_threads();
    // SAFETY: readable per the contract.
    let t = unsafe { device::ld(tau, 0) };
    if t == T::ZERO {
        return; // H = I; uniform per block
    }
    let h = head.wrapping_add(c * ldh);
    let x = tail.wrapping_add(c * ldt);
    let mut acc = T::ZERO;
    let mut i = tid;
    while i < len {
        // SAFETY: i < len, inside v and this column's tail.
        acc = unsafe { device::ld(v, i).mul_add(device::ld(x as *const T, i), acc) };
        i += nt;
    }
    // SAFETY: block-uniform call; shared memory per the launch shape.
    let s = unsafe { reduce::block_sum(acc) };
    // SAFETY: readable; nobody writes the head before the barrier below.
    let w = unsafe { device::ld(h as *const T, 0) }.add(s);
    // SAFETY: all threads have read `h` before this barrier; thread 0 writes it after.
    unsafe { device::sync_threads() };
    let tw = t.mul(w);
    if tid == 0 {
        // SAFETY: single writer of the head element.
        unsafe { device::st(h, 0, device::ld(h as *const T, 0).sub(tw)) };
    }
    let mut i = tid;
    while i < len {
        // SAFETY: i < len; each tail element is read and written by one thread only.
        unsafe {
            let xi = device::ld(x as *const T, i);
            device::st(x, i, tw.neg().mul_add(device::ld(v, i), xi));
        }
        i += nt;
    }
}

/// `panel_extract_v`: for the rows×k block `a` (ld `lda`) writes V (ld `ldv`) with
/// V(i,j) = 1 (i = j), 0 (i < j), a(i,j) (i > j), and then sets a(i,j) = 0 for i > j
/// (exact zeros below the diagonal). Grid (⌈rows/128⌉, g ≤ min(k, 65535)),
/// block 128; column loop stride `ystride` = grid y.
///
/// # Safety
/// Launch shape as documented; `a` read-writable and `v` writable over their rows×k
/// blocks; the blocks do not overlap.
#[inline(always)]
pub unsafe fn extract_v<T: Float>(
    a: *mut T,
    lda: usize,
    rows: usize,
    k: usize,
    v: *mut T,
    ldv: usize,
    ystride: usize,
) {
    for_each_column(rows, k, ystride, |i, j| {
        let val = if i == j {
            T::ONE
        } else if i < j {
            T::ZERO
        } else {
            // SAFETY: i < rows, j < k: inside the block; one thread per element.
            unsafe {
                let x = device::ld(a as *const T, i + j * lda);
                device::st(a, i + j * lda, T::ZERO);
                x
            }
        };
        // SAFETY: inside V's block; one writer per element.
        unsafe { device::st(v, i + j * ldv, val) };
    });
}

/// `panel_zero_lower`: a(i,j) = 0 for j < i < rows, j < cols (strictly lower part of a
/// rows×cols block). Grid (⌈rows/128⌉, g ≤ min(cols, 65535)), block 128; stride `ystride`.
///
/// # Safety
/// Launch shape as documented; the rows×cols block of `a` is writable.
#[inline(always)]
pub unsafe fn zero_lower<T: Float>(
    a: *mut T,
    lda: usize,
    rows: usize,
    cols: usize,
    ystride: usize,
) {
    let i = device::global_x();
    if i >= rows {
        return;
    }
    let mut j = device::block_y();
    while j < cols && j < i {
        // SAFETY: inside the block; one writer per element.
        unsafe { device::st(a, i + j * lda, T::ZERO) };
        j += ystride;
    }
}

/// `panel_set_identity`: a(i,j) = [i = j] on a rows×cols block. Grid (⌈rows/128⌉,
/// g ≤ min(cols, 65535)), block 128; stride `ystride`.
///
/// # Safety
/// Launch shape as documented; the rows×cols block of `a` is writable.
#[inline(always)]
pub unsafe fn set_identity<T: Float>(
    a: *mut T,
    lda: usize,
    rows: usize,
    cols: usize,
    ystride: usize,
) {
    for_each_column(rows, cols, ystride, |i, j| {
        let val = if i == j { T::ONE } else { T::ZERO };
        // SAFETY: inside the block; one writer per element.
        unsafe { device::st(a, i + j * lda, val) };
    });
}

/// `panel_copy`: dst(i,j) = src(i,j) for a rows×cols block. Grid (⌈rows/128⌉,
/// g ≤ min(cols, 65535)), block 128; stride `ystride`.
///
/// # Safety
/// Launch shape as documented; src readable and dst writable over their blocks, which
/// do not overlap.
#[inline(always)]
pub unsafe fn copy<T: Float>(
    src: *const T,
    lds: usize,
    rows: usize,
    cols: usize,
    dst: *mut T,
    ldd: usize,
    ystride: usize,
) {
    for_each_column(rows, cols, ystride, |i, j| {
        // SAFETY: inside both blocks; one writer per element.
        unsafe { device::st(dst, i + j * ldd, device::ld(src, i + j * lds)) };
    });
}

/// `panel_embed_q`: the (m+p)×(m+p) matrix Pᵀ·diag(Q, I_p) of the row insertion
/// (docs/algorithms.md#row-insertion): row i of the result is row s(i) of diag(Q, I_p), s(i) = i (i < k0),
/// m + i − k0 (k0 ≤ i < k0+p), i − p (i ≥ k0+p). Grid (⌈(m+p)/128⌉, g ≤ min(m+p, 65535)),
/// block 128; stride `ystride`.
///
/// # Safety
/// Launch shape as documented; `q` readable m×m (ld `ldq`), `dst` writable (m+p)×(m+p)
/// (ld `ldd`), no overlap; k0 ≤ m.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn embed_q<T: Float>(
    q: *const T,
    ldq: usize,
    m: usize,
    p: usize,
    k0: usize,
    dst: *mut T,
    ldd: usize,
    ystride: usize,
) {
    let n = m + p;
    for_each_column(n, n, ystride, |i, j| {
        // row i of the result is row s of diag(Q, I_p)
        let s = if i < k0 {
            i
        } else if i < k0 + p {
            m + i - k0
        } else {
            i - p
        };
        let val = if s < m {
            if j < m {
                // SAFETY: s, j < m: inside Q.
                unsafe { device::ld(q, s + j * ldq) }
            } else {
                T::ZERO
            }
        } else if j == s {
            T::ONE
        } else {
            T::ZERO
        };
        // SAFETY: i, j < m+p: inside dst; one writer per element.
        unsafe { device::st(dst, i + j * ldd, val) };
    });
}

/// `panel_col_norms`: for each column c < cols of the upper-trapezoidal rows×cols `a`:
/// out[c] = scaled ‖a(0:min(c+1, rows), c)‖₂ and out[cols + c] = a(c, c) (0 when
/// c ≥ rows): what the rank check needs (‖R‖_F and the diagonal) in one download.
/// Grid `cols`, block 256, dynamic shared memory 256·8 bytes.
///
/// # Safety
/// Launch shape as documented; `a` readable over the block; `out[0..2·cols)` writable
/// and not overlapping `a`.
#[inline(always)]
pub unsafe fn col_norms<T: Float>(a: *const T, lda: usize, rows: usize, cols: usize, out: *mut T) {
    let c = device::block_x();
    if c >= cols {
        return; // uniform per block
    }
    let len = if c + 1 < rows { c + 1 } else { rows };
    // SAFETY: block-uniform call; column c rows 0..len readable; shared memory per launch.
    let nrm = unsafe { reduce::block_nrm2(a.wrapping_add(c * lda), len) };
    if device::thread_linear() == 0 {
        let diag = if c < rows {
            // SAFETY: c < rows: inside the block.
            unsafe { device::ld(a, c + c * lda) }
        } else {
            T::ZERO
        };
        // SAFETY: c < cols: inside out; single writer.
        unsafe {
            device::st(out, c, nrm);
            device::st(out, cols + c, diag);
        }
    }
}

/// `panel_first_non_finite`: block b scans column j = b mod cols of the column-major
/// rows × cols matrix `a` (ld `lda`) over chunk c = b / cols of its rows (rows
/// c·`chunk` .. (c + 1)·`chunk`), and writes to `out[c·cols + j]` the first of those rows
/// with a(i, j) ±∞ or NaN, or `u32::MAX` when they are finite (the device counterpart of
/// the host's `MatRef::first_non_finite`, for update data already on the device; the
/// host takes the smallest row of each column over the chunks). Each thread scans rows
/// c·chunk + tid, + block, …, and a block max of rows − i (in f64: exact below 2⁵³) picks
/// the first.
///
/// # Safety
/// Grid (cols·⌈rows/chunk⌉, 1), block a multiple of 32 (≤ 1024), dynamic shared memory
/// ≥ 32 f64; `a` readable at i + j·lda for i < rows, j < cols; `out` writable for
/// cols·⌈rows/chunk⌉ `u32`s; 1 ≤ chunk, rows < 2³².
#[inline(always)]
pub unsafe fn first_non_finite<T: Float>(
    a: *const T,
    lda: usize,
    rows: usize,
    cols: usize,
    chunk: usize,
    out: *mut u32,
) {
    let (j, c) = (device::block_x() % cols, device::block_x() / cols);
    let end = rows.min((c + 1) * chunk);
    let mut best = 0.0f64;
    let mut i = c * chunk + device::thread_x();
    while i < end {
        // SAFETY: i < rows, j < cols: inside `a` (contract).
        let x = unsafe { device::ld(a, i + j * lda) };
        if !x.is_finite() {
            // the rows this thread visits increase: its first hit is its smallest
            best = (rows - i) as f64;
            break;
        }
        i += device::block_dim_x();
    }
    // SAFETY: every thread of the block calls it (no thread has returned); the dynamic
    // shared memory holds ≥ 32 f64 (contract).
    let top = unsafe { crate::reduce::block_max::<f64>(best) };
    if device::thread_x() == 0 {
        let row = if top > 0.0 {
            (rows - top as usize) as u32
        } else {
            u32::MAX
        };
        // SAFETY: c < ⌈rows/chunk⌉, j < cols: out[c·cols + j] is this block's (contract).
        unsafe { device::st(out, c * cols + j, row) };
    }
}
