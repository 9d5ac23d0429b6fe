//! Thread, block and grid indices, the block and warp barriers, and `trap`.

use core::arch::asm;
use core::arch::nvptx;

/// Number of threads in a warp on every NVIDIA architecture this crate targets (sm_80+).
pub const WARP: usize = 32;

/// `threadIdx.x`.
#[inline(always)]
pub fn thread_x() -> usize {
    // SAFETY: reading the special register %tid.x has no preconditions inside a kernel.
    unsafe { nvptx::_thread_idx_x() as usize }
}

/// `threadIdx.y`.
#[inline(always)]
pub fn thread_y() -> usize {
    // SAFETY: reading the special register %tid.y has no preconditions inside a kernel.
    unsafe { nvptx::_thread_idx_y() as usize }
}

/// `blockIdx.x`.
#[inline(always)]
pub fn block_x() -> usize {
    // SAFETY: reading the special register %ctaid.x has no preconditions inside a kernel.
    unsafe { nvptx::_block_idx_x() as usize }
}

/// `blockIdx.y`.
#[inline(always)]
pub fn block_y() -> usize {
    // SAFETY: reading the special register %ctaid.y has no preconditions inside a kernel.
    unsafe { nvptx::_block_idx_y() as usize }
}

/// `gridDim.x`.
#[inline(always)]
pub fn grid_dim_x() -> usize {
    // SAFETY: reading the special register %nctaid.x has no preconditions inside a kernel.
    unsafe { nvptx::_grid_dim_x() as usize }
}

/// `blockDim.x`.
#[inline(always)]
pub fn block_dim_x() -> usize {
    // SAFETY: reading the special register %ntid.x has no preconditions inside a kernel.
    unsafe { nvptx::_block_dim_x() as usize }
}

/// `blockDim.y`.
#[inline(always)]
pub fn block_dim_y() -> usize {
    // SAFETY: reading the special register %ntid.y has no preconditions inside a kernel.
    unsafe { nvptx::_block_dim_y() as usize }
}

/// Index of this thread in the grid along x: `blockIdx.x·blockDim.x + threadIdx.x`.
#[inline(always)]
pub fn global_x() -> usize {
    block_x() * block_dim_x() + thread_x()
}

/// Index of this thread in the grid along y: `blockIdx.y·blockDim.y + threadIdx.y`.
#[inline(always)]
pub fn global_y() -> usize {
    block_y() * block_dim_y() + thread_y()
}

/// Linear thread index inside the block: `threadIdx.x + threadIdx.y·blockDim.x`.
#[inline(always)]
pub fn thread_linear() -> usize {
    thread_x() + thread_y() * block_dim_x()
}

/// Threads per block: `blockDim.x · blockDim.y`.
#[inline(always)]
pub fn block_threads() -> usize {
    block_dim_x() * block_dim_y()
}

/// `gridDim.x · gridDim.y`: blocks in the launch.
#[inline(always)]
pub fn grid_blocks() -> usize {
    // SAFETY: reading special registers has no preconditions.
    unsafe { nvptx::_grid_dim_x() as usize * nvptx::_grid_dim_y() as usize }
}

/// `__syncthreads()`: block-wide barrier that also orders shared and global memory
/// accesses of the block's threads (PTX `bar.sync 0`).
///
/// # Safety
/// Every thread of the block must reach the same sequence of barriers (no barrier inside
/// a branch that diverges between threads of the block).
#[inline(always)]
pub unsafe fn sync_threads() {
    // SAFETY: the caller guarantees block-uniform control flow (see `# Safety`).
    unsafe { nvptx::_syncthreads() }
}

/// `__syncwarp()` (PTX `bar.warp.sync 0xffffffff`): orders the shared-memory accesses
/// of the warp's lanes.
///
/// # Safety
/// All 32 lanes of the warp execute it together.
#[inline(always)]
pub unsafe fn sync_warp() {
    // SAFETY: full-mask warp barrier; the caller guarantees all lanes arrive.
    unsafe {
        asm!(
            "bar.warp.sync 0xffffffff;",
            options(nostack, preserves_flags)
        )
    };
}

/// Aborts the kernel (PTX `trap`): the launch fails with an error on the host.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: `trap` has no preconditions; it ends the kernel with an error.
    unsafe { nvptx::trap() }
}

/// `fence.acq_rel.cta`: orders this thread's shared-memory accesses before and after it
/// as seen by the other threads of the block.
#[inline(always)]
pub fn fence_cta() {
    // SAFETY: a fence has no operands and no preconditions.
    unsafe { asm!("fence.acq_rel.cta;", options(nostack, preserves_flags)) };
}
