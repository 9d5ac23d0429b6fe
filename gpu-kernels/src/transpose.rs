//! Padded, pitched transpose (docs/algorithms.md#padded-transpose-and-composite-layout):
//! a 32×33 shared tile, so that the column-wise tile reads are free of bank conflicts.

use crate::device::{self, Float};

const TILE: usize = 32;
/// Tile row stride in shared memory: one padding column (no bank conflicts).
const TILE_LD: usize = TILE + 1;

/// `transpose_padded`: dst(j, i) = src(i, j) for i < rows, j < cols. `src` is column-major
/// rows×cols with ld `lds`; `dst` is column-major cols×rows with ld `ldd`.
/// Grid (⌈rows/32⌉, ⌈cols/32⌉), block (32, 8), dynamic shared memory 32·33·size_of::<T>().
///
/// # Safety
/// Launch shape and shared-memory size as documented; lds ≥ rows, ldd ≥ cols; `src`
/// readable and `dst` writable over those extents; the two do not overlap.
#[inline(always)]
pub unsafe fn padded<T: Float>(
    src: *const T,
    lds: usize,
    rows: usize,
    cols: usize,
    dst: *mut T,
    ldd: usize,
) {
    let tile = device::shared::<T>();
    let (tx, ty) = (device::thread_x(), device::thread_y());
    let by = device::block_dim_y();
    let (i0, j0) = (device::block_x() * TILE, device::block_y() * TILE);
    // Load: thread x walks the rows of src (coalesced on column-major), y walks columns.
    let mut k = ty;
    while k < TILE {
        let (i, j) = (i0 + tx, j0 + k);
        if i < rows && j < cols {
            // SAFETY: i < rows ≤ lds, j < cols: in bounds of src; tile index
            // k·33 + tx < 32·33, written by this thread only.
            unsafe { device::st(tile, k * TILE_LD + tx, device::ld(src, i + j * lds)) };
        }
        k += by;
    }
    // Guard the work, not the barrier: every thread of the block reaches it.
    // SAFETY: block-uniform control flow (the loops above have uniform trip counts).
    unsafe { device::sync_threads() };
    // Store: thread x walks the rows of dst (= columns j of src), y walks src rows.
    let mut k = ty;
    while k < TILE {
        let (j, i) = (j0 + tx, i0 + k);
        if i < rows && j < cols {
            // SAFETY: tile entry (tx, k) was written before the barrier (same bounds
            // test); j < cols ≤ ldd, i < rows: in bounds of dst, one writer per element.
            unsafe {
                device::st(
                    dst,
                    j + i * ldd,
                    device::ld(tile as *const T, tx * TILE_LD + k),
                )
            };
        }
        k += by;
    }
}
