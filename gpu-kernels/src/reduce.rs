//! Reductions (dot product, scaled 2-norm, block max and sum) and the elementwise
//! `doubleSum` of the composite layout (docs/algorithms.md#padded-transpose-and-composite-layout,
//! with half-open ranges: docs/algorithms.md#corrections-to-the-published-descriptions).
//! Block reductions are a warp shuffle tree, then one partial per warp through dynamic
//! shared memory, then a shuffle tree in warp 0.

use crate::device::{self, Float, WARP};

/// Sum of `v` over the 32 lanes of the calling warp; the full sum lands in lane 0.
///
/// # Safety
/// The whole warp calls convergently (see `device::shfl_down_b32`).
#[inline(always)]
pub unsafe fn warp_sum<T: Float>(mut v: T) -> T {
    let mut d = (WARP / 2) as u32;
    while d > 0 {
        // SAFETY: forwarded: the full warp is convergent here.
        v = v.add(unsafe { v.shfl_down(d) });
        d /= 2;
    }
    v
}

/// Max (IEEE maxNum) of `v` over the calling warp; the result lands in lane 0.
///
/// # Safety
/// The whole warp calls convergently.
#[inline(always)]
pub unsafe fn warp_max<T: Float>(mut v: T) -> T {
    let mut d = (WARP / 2) as u32;
    while d > 0 {
        // SAFETY: forwarded: the full warp is convergent here.
        v = v.max(unsafe { v.shfl_down(d) });
        d /= 2;
    }
    v
}

/// Sum of `v` over the calling warp; every lane gets it (butterfly).
///
/// # Safety
/// The whole warp calls convergently.
#[inline(always)]
pub unsafe fn warp_allsum<T: Float>(mut v: T) -> T {
    let mut d = (WARP / 2) as u32;
    while d > 0 {
        // SAFETY: forwarded: the full warp is convergent here.
        v = v.add(unsafe { v.shfl_xor(d) });
        d /= 2;
    }
    v
}

/// Max (IEEE maxNum) of `v` over the calling warp; every lane gets it (butterfly).
///
/// # Safety
/// The whole warp calls convergently.
#[inline(always)]
pub unsafe fn warp_allmax<T: Float>(mut v: T) -> T {
    let mut d = (WARP / 2) as u32;
    while d > 0 {
        // SAFETY: forwarded: the full warp is convergent here.
        v = v.max(unsafe { v.shfl_xor(d) });
        d /= 2;
    }
    v
}

/// Block-wide combination with `op` and identity `id`; every thread gets the result.
/// Uses the first `block_threads()/32` elements of the dynamic shared memory (as `T`)
/// and ends with a barrier, so the shared memory may be reused at once.
///
/// # Safety
/// Called by every thread of the block (block-uniform control flow, block size a
/// multiple of 32); dynamic shared memory holds at least 32 `T`s.
#[inline(always)]
unsafe fn block_reduce<T: Float>(v: T, id: T, warp_op: unsafe fn(T) -> T) -> T {
    // SAFETY: forwarded; the dynamic shared memory holds ≥ 32 `T`s.
    unsafe { block_reduce_in(device::shared::<T>(), v, id, warp_op) }
}

/// [`block_reduce`] with its 32-element scratch at `smem` (shared memory).
///
/// # Safety
/// As [`block_reduce`], with `smem` valid shared memory for 32 `T`s that no other
/// code touches during the call.
#[inline(always)]
pub(crate) unsafe fn block_reduce_in<T: Float>(
    smem: *mut T,
    v: T,
    id: T,
    warp_op: unsafe fn(T) -> T,
) -> T {
    let tid = device::thread_linear();
    let lane = tid % WARP;
    let warp = tid / WARP;
    let nwarps = device::block_threads().div_ceil(WARP);
    // SAFETY: block-uniform call, full warps (caller's contract).
    let part = unsafe { warp_op(v) };
    if lane == 0 {
        // SAFETY: warp < 32 entries of shared memory, one writer per entry.
        unsafe { device::st(smem, warp, part) };
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { device::sync_threads() };
    if warp == 0 {
        // SAFETY: entries < nwarps were written before the barrier.
        let p = if lane < nwarps {
            unsafe { device::ld(smem, lane) }
        } else {
            id
        };
        // SAFETY: warp 0 is complete and convergent here.
        let total = unsafe { warp_op(p) };
        if lane == 0 {
            // SAFETY: only lane 0 of warp 0 writes entry 0 in this phase; the other
            // lanes of warp 0 already read their entries (shuffle happened after).
            unsafe { device::st(smem, 0, total) };
        }
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { device::sync_threads() };
    // SAFETY: entry 0 holds the total, written before the barrier.
    let r = unsafe { device::ld(smem, 0) };
    // SAFETY: every thread reaches this barrier; it keeps the next reduction's writes
    // from overtaking this read.
    unsafe { device::sync_threads() };
    r
}

/// Block sum (every thread gets it). See [`block_reduce`] for the contract.
///
/// # Safety
/// As [`block_reduce`].
#[inline(always)]
pub unsafe fn block_sum<T: Float>(v: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { block_reduce(v, T::ZERO, warp_sum::<T>) }
}

/// Block max (maxNum; every thread gets it). See [`block_reduce`] for the contract.
///
/// # Safety
/// As [`block_reduce`].
#[inline(always)]
pub unsafe fn block_max<T: Float>(v: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { block_reduce(v, T::ZERO, warp_max::<T>) }
}

/// [`block_max`] with its 32-element scratch at `smem`.
///
/// # Safety
/// As [`block_max`], with `smem` valid shared memory for 32 `T`s that no other code
/// touches during the call.
#[inline(always)]
pub unsafe fn block_max_in<T: Float>(smem: *mut T, v: T) -> T {
    // SAFETY: forwarded from the caller.
    unsafe { block_reduce_in(smem, v, T::ZERO, warp_max::<T>) }
}

/// Scaled two-pass 2-norm of `x[0..n)` by one block, in two parts (s, r) with
/// ‖x‖₂ = s·r (as `cpu::householder::nrm2`; docs/algorithms.md#householder-vectors): s = max |xᵢ|, raised to the
/// smallest normal number when it is subnormal (so that 1/s stays finite), r =
/// √(Σ (xᵢ/s)²) with fused accumulation; max |xᵢ| = 0 or non-finite gives (max, 1).
/// Every thread gets the result.
///
/// # Safety
/// Block-uniform call; `x[0..n)` readable and not written during the call; dynamic
/// shared memory holds at least 32 `T`s.
#[inline(always)]
pub unsafe fn block_nrm2_parts<T: Float>(x: *const T, n: usize) -> (T, T) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let mut m = T::ZERO;
    let mut i = tid;
    while i < n {
        // SAFETY: i < n, readable by the caller's contract.
        m = m.max(unsafe { device::ld(x, i) }.abs());
        i += nt;
    }
    // SAFETY: block-uniform call (caller's contract).
    let scale = unsafe { block_max(m) };
    if scale == T::ZERO || !scale.is_finite() {
        // Uniform branch: every thread holds the same `scale`.
        return (scale, T::ONE);
    }
    let scale = scale.max(T::MIN_POSITIVE);
    let inv = T::ONE.div(scale);
    let mut ssq = T::ZERO;
    let mut i = tid;
    while i < n {
        // SAFETY: i < n, readable by the caller's contract.
        let t = unsafe { device::ld(x, i) }.mul(inv);
        ssq = t.mul_add(t, ssq);
        i += nt;
    }
    // SAFETY: block-uniform call (the branch above is uniform).
    let ssq = unsafe { block_sum(ssq) };
    (scale, ssq.sqrt())
}

/// ‖x[0..n)‖₂ by one block: s·r of [`block_nrm2_parts`].
///
/// # Safety
/// As [`block_nrm2_parts`].
#[inline(always)]
pub unsafe fn block_nrm2<T: Float>(x: *const T, n: usize) -> T {
    // SAFETY: forwarded from the caller.
    let (s, r) = unsafe { block_nrm2_parts(x, n) };
    s.mul(r)
}

/// `reduce_dot`: `*out = Σ x[i]·y[i]` (docs/kernels.md). Grid 1, block 256.
///
/// # Safety
/// Launch shape as documented; `x`, `y` readable for `n`; `out` writable.
#[inline(always)]
pub unsafe fn dot<T: Float>(x: *const T, y: *const T, n: usize, out: *mut T) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let mut acc = T::ZERO;
    let mut i = tid;
    while i < n {
        // SAFETY: i < n, both readable by the caller's contract.
        let (a, b) = unsafe { (device::ld(x, i), device::ld(y, i)) };
        acc = a.mul_add(b, acc);
        i += nt;
    }
    // SAFETY: every thread of the single block gets here.
    let s = unsafe { block_sum(acc) };
    if tid == 0 {
        // SAFETY: `out` writable, one writer.
        unsafe { device::st(out, 0, s) };
    }
}

/// `reduce_nrm2`: `*out = ‖x‖₂`, scaled two-pass (docs/kernels.md). Grid 1, block 256.
///
/// # Safety
/// Launch shape as documented; `x` readable for `n`; `out` writable.
#[inline(always)]
pub unsafe fn nrm2<T: Float>(x: *const T, n: usize, out: *mut T) {
    // SAFETY: every thread of the single block gets here; `x` per the caller.
    let r = unsafe { block_nrm2(x, n) };
    if device::thread_linear() == 0 {
        // SAFETY: `out` writable, one writer.
        unsafe { device::st(out, 0, r) };
    }
}

/// `reduce_double_sum`: `cm[i + j·ldc] += a[i + j·r] + b[i + j·r]` for i < r, j < c
/// (the composite layout's `doubleSum`, with half-open ranges). Grid (⌈r/32⌉, ⌈c/32⌉),
/// block (32, 8): x → row (coalesced), y strides the tile's 32 columns.
///
/// # Safety
/// Launch shape as documented; `a`, `b` readable r×c with ld r; `cm` read-writable
/// r×c with ld `ldc` ≥ r, not overlapping `a` or `b`.
#[inline(always)]
pub unsafe fn double_sum<T: Float>(
    a: *const T,
    b: *const T,
    r: usize,
    c: usize,
    cm: *mut T,
    ldc: usize,
) {
    let i = device::block_x() * 32 + device::thread_x();
    if i >= r {
        return;
    }
    let mut jj = device::thread_y();
    while jj < 32 {
        let j = device::block_y() * 32 + jj;
        if j >= c {
            break;
        }
        // SAFETY: i < r, j < c: in bounds of a, b (ld r) and cm (ld ldc ≥ r); each (i, j)
        // belongs to exactly one thread.
        unsafe {
            let s = device::ld(a, i + j * r).add(device::ld(b, i + j * r));
            let k = i + j * ldc;
            device::st(cm, k, device::ld(cm, k).add(s));
        }
        jj += device::block_dim_y();
    }
}
