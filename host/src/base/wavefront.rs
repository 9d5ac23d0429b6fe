//! Index arithmetic of the Givens wavefront schedule (docs/algorithms.md#wavefront-schedule),
//! shared by the CPU reference and the GPU launches.
#![forbid(unsafe_code)]

/// One step t of the strip wavefront (docs/algorithms.md#givens-rotations, "Strip case"): the
/// strip's column j (j < p) is zeroed in rows h+j down to j+1 with planes (r−1, r),
/// and at step t column j is at row r = h + 2j − t. Returns
/// `(row0, col0, count)` for `Gpu::givens_make_wavefront` /
/// `Gpu::givens_apply_wavefront` (rotation i: column col0+i, row row0+2i), or
/// `None` if no column is active. Steps run t = 0..h+p−1.
pub fn strip_step(h: usize, p: usize, t: usize) -> Option<(usize, usize, usize)> {
    if h == 0 || p == 0 {
        return None;
    }
    // Active j: max(0, t+1−h) ≤ j ≤ min(t, p−1).
    let j0 = (t + 1).saturating_sub(h);
    let j1 = t.min(p - 1);
    if j0 > j1 {
        return None;
    }
    Some((h + 2 * j0 - t, j0, j1 - j0 + 1))
}
