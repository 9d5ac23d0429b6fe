//! Dynamic shared memory and raw loads and stores.

/// Start of the launch-sized dynamic shared memory, typed as `T`.
///
/// The pointer is valid for as many bytes as the host passed as `sharedMemBytes` at
/// launch (docs/kernels.md fixes that size per kernel); every call aliases the same
/// memory.
#[inline(always)]
pub fn shared<T>() -> *mut T {
    core::intrinsics::gpu::gpu_launch_sized_workgroup_mem::<T>()
}

/// Reads `p[i]`.
///
/// # Safety
/// `p.add(i)` must be in bounds of one allocation, aligned, and not concurrently written.
#[inline(always)]
pub unsafe fn ld<T: Copy>(p: *const T, i: usize) -> T {
    // SAFETY: the caller guarantees `p.add(i)` is an in-bounds, aligned, race-free read.
    unsafe { p.add(i).read() }
}

/// Writes `p[i] = v`.
///
/// # Safety
/// `p.add(i)` must be in bounds of one allocation, aligned, and not concurrently
/// accessed by another thread.
#[inline(always)]
pub unsafe fn st<T: Copy>(p: *mut T, i: usize, v: T) {
    // SAFETY: the caller guarantees `p.add(i)` is an in-bounds, aligned, exclusive write.
    unsafe { p.add(i).write(v) }
}

/// Reads `p[i]` with `ld.volatile` (never served from a stale L1 line): for data that
/// other blocks wrote before a [`grid_sync`](super::grid_sync).
///
/// # Safety
/// `p.add(i)` must be in bounds of one allocation and aligned.
#[inline(always)]
pub unsafe fn ld_volatile<T: Copy>(p: *const T, i: usize) -> T {
    // SAFETY: the caller guarantees an in-bounds, aligned read.
    unsafe { p.add(i).read_volatile() }
}
