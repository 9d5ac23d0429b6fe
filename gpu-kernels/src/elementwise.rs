//! The launch shape of the elementwise 2-D kernels (`panel_*`, `convert_*`): grid
//! (⌈rows/block⌉, g), thread x of the grid takes row i, and block y takes the columns
//! j = blockIdx.y, blockIdx.y + ystride, … (the host passes ystride = g ≤ 65535, so a
//! thread may take several columns).

use crate::device;

/// Calls `f(i, j)` for this thread's row i (when i < rows) and each of its columns
/// j < cols, in increasing j.
#[inline(always)]
pub(crate) fn for_each_column(
    rows: usize,
    cols: usize,
    ystride: usize,
    mut f: impl FnMut(usize, usize),
) {
    let i = device::global_x();
    if i >= rows {
        return;
    }
    let mut j = device::block_y();
    while j < cols {
        f(i, j);
        j += ystride;
    }
}
