//! Givens rotations on the device (docs/algorithms.md#givens-rotations, with the
//! corrections of docs/algorithms.md#corrections-to-the-published-descriptions): one
//! wavefront step of the published design on a row-major pitched buffer, one launch to
//! make the step's rotations and one to apply them. Rotation convention as
//! `host/src/cpu/givens.rs`: G = [[c, s], [−s, c]] maps (f, g) to (r, 0), r ≥ 0;
//! (0, 0) gives c = 1, s = 0.

use crate::device::{self, Float};

/// (c, s) with c·f + s·g = r ≥ 0 and −s·f + c·g = 0, as `cpu::givens::givens`:
/// g = 0 gives (±1, 0) with the sign of f (f = 0 → c = 1); otherwise r = hypot(f, g),
/// c = f/r, s = g/r.
#[inline(always)]
pub fn make<T: Float>(f: T, g: T) -> (T, T) {
    if g == T::ZERO {
        if f >= T::ZERO {
            return (T::ONE, T::ZERO);
        }
        return (T::ONE.neg(), T::ZERO);
    }
    let r = f.hypot(g);
    (f.div(r), g.div(r))
}

/// `givens_make_wavefront` (the published `makeGivens`): thread i < count takes column col0 + i
/// and rows (r − 1, r), r = row0 + 2i, of the row-major pitched `a`; writes c[i], s[i].
/// Grid ⌈count/32⌉, block 32.
///
/// # Safety
/// Launch shape as documented; row0 ≥ 1; for each i < count, a[(r−1)·pitch + col0 + i]
/// and a[r·pitch + col0 + i] are readable; `c` and `s` writable for `count` and not
/// overlapping `a`.
#[inline(always)]
pub unsafe fn make_wavefront<T: Float>(
    a: *const T,
    pitch: usize,
    row0: usize,
    col0: usize,
    count: usize,
    c: *mut T,
    s: *mut T,
) {
    let i = device::global_x();
    if i >= count {
        return;
    }
    let col = col0 + i;
    let r = row0 + 2 * i;
    // SAFETY: both elements are readable by the caller's contract (r ≥ row0 ≥ 1).
    let (f, g) = unsafe {
        (
            device::ld(a, (r - 1) * pitch + col),
            device::ld(a, r * pitch + col),
        )
    };
    let (cv, sv) = make(f, g);
    // SAFETY: i < count; one writer per index.
    unsafe {
        device::st(c, i, cv);
        device::st(s, i, sv);
    }
}

/// `givens_apply_wavefront` (the published `applyGivens`, corrected): rotation i = blockIdx.y
/// acts on rows (r − 1, r), r = row0 + 2i, over columns x ∈ [col_begin + i·col_step,
/// col_end): upper ← c·upper + s·lower, lower ← −s·upper + c·lower, fused exactly as
/// `cpu::givens::rot_pair`. Grid (⌈(col_end − col_begin)/128⌉, count), block 128.
///
/// # Safety
/// Launch shape as documented; row0 ≥ 1; rows r − 1 and r of `a` are read-writable over
/// the column range for every i < count; `c`, `s` readable for `count` and not
/// overlapping `a`; distinct rotations touch distinct rows (stride 2).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply_wavefront<T: Float>(
    a: *mut T,
    pitch: usize,
    row0: usize,
    count: usize,
    col_begin: usize,
    col_step: usize,
    col_end: usize,
    c: *const T,
    s: *const T,
) {
    let i = device::block_y();
    if i >= count {
        return;
    }
    let x = col_begin + i * col_step + device::global_x();
    if x >= col_end {
        return;
    }
    let r = row0 + 2 * i;
    // SAFETY: i < count: c[i], s[i] readable; (r − 1, x) and (r, x) in the live range of
    // rows owned by rotation i alone, and column x by this thread alone.
    unsafe {
        let (cv, sv) = (device::ld(c, i), device::ld(s, i));
        let up = (r - 1) * pitch + x;
        let lo = r * pitch + x;
        let (u, l) = (device::ld(a as *const T, up), device::ld(a as *const T, lo));
        device::st(a, up, cv.mul_add(u, sv.mul(l)));
        device::st(a, lo, cv.mul_add(l, sv.mul(u).neg()));
    }
}
