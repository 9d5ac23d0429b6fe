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

/// The 32-bit shared-window address of `p`, a generic pointer into this block's shared
/// memory (PTX `cvta.to.shared`): with [`ld_shared`] and [`st_shared`], index arithmetic
/// on shared memory stays 32-bit.
///
/// # Safety
/// `p` points into this block's shared memory.
#[inline(always)]
pub unsafe fn shared_window<T>(p: *const T) -> u32 {
    let r: u32;
    // SAFETY: an address conversion only (the caller's contract makes it meaningful).
    unsafe {
        core::arch::asm!(
            "{{ .reg .u64 %sw; cvta.to.shared.u64 %sw, {p}; cvt.u32.u64 {r}, %sw; }}",
            r = out(reg32) r,
            p = in(reg64) p,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    r
}

/// Reads the 4- or 8-byte `T` at shared-window address `addr` (`ld.shared`).
///
/// # Safety
/// `addr` is a shared-window address inside this block's shared memory, aligned to
/// `size_of::<T>()` (4 or 8), not concurrently written.
#[inline(always)]
pub unsafe fn ld_shared<T: Copy>(addr: u32) -> T {
    // SAFETY: the caller's contract; the bits are reinterpreted at the same size.
    unsafe {
        if core::mem::size_of::<T>() == 8 {
            let v: u64;
            core::arch::asm!(
                "ld.shared.b64 {v}, [{a}];",
                v = out(reg64) v,
                a = in(reg32) addr,
                options(pure, readonly, nostack, preserves_flags),
            );
            core::mem::transmute_copy(&v)
        } else {
            let v: u32;
            core::arch::asm!(
                "ld.shared.b32 {v}, [{a}];",
                v = out(reg32) v,
                a = in(reg32) addr,
                options(pure, readonly, nostack, preserves_flags),
            );
            core::mem::transmute_copy(&v)
        }
    }
}

/// Writes the 4- or 8-byte `v` at shared-window address `addr` (`st.shared`).
///
/// # Safety
/// As [`ld_shared`], and no other thread accesses the location concurrently.
#[inline(always)]
pub unsafe fn st_shared<T: Copy>(addr: u32, v: T) {
    // SAFETY: the caller's contract; the bits are reinterpreted at the same size.
    unsafe {
        if core::mem::size_of::<T>() == 8 {
            let b: u64 = core::mem::transmute_copy(&v);
            core::arch::asm!(
                "st.shared.b64 [{a}], {v};",
                a = in(reg32) addr,
                v = in(reg64) b,
                options(nostack, preserves_flags),
            );
        } else {
            let b: u32 = core::mem::transmute_copy(&v);
            core::arch::asm!(
                "st.shared.b32 [{a}], {v};",
                a = in(reg32) addr,
                v = in(reg32) b,
                options(nostack, preserves_flags),
            );
        }
    }
}
