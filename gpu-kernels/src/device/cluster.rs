//! Thread-block clusters (sm_90 only): the cluster barrier, distributed shared memory
//! addresses, mbarriers and `st.async`.

use core::arch::asm;

/// Barrier of every thread of every block of the thread-block cluster (PTX
/// `barrier.cluster.arrive.release` + `barrier.cluster.wait.acquire`, sm_90): the
/// shared-memory writes of any block before it are visible to every block of the
/// cluster after it.
///
/// # Safety
/// Only in the sm_90 build, in a kernel launched with a cluster dimension; every
/// non-exited thread of every block of the cluster calls it, warp-uniformly
/// (`.aligned`), the same number of times.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn cluster_sync() {
    // SAFETY: the caller guarantees a cluster launch and a cluster-uniform call; no
    // `nomem`, so the compiler keeps memory accesses on their side of the barrier.
    unsafe {
        asm!(
            "barrier.cluster.arrive.release.aligned;",
            "barrier.cluster.wait.acquire.aligned;",
            options(nostack, preserves_flags),
        )
    };
}

/// The 32-bit shared-window address of the generic pointer `p` into this block's
/// shared memory (PTX `cvta.to.shared`).
///
/// # Safety
/// `p` points into this block's shared memory.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn shared_addr<T>(p: *const T) -> u32 {
    let r: u32;
    // SAFETY: an address conversion only (the caller's contract makes it meaningful).
    unsafe {
        asm!(
            "{{ .reg .u64 %sa; cvta.to.shared.u64 %sa, {p}; cvt.u32.u64 {r}, %sa; }}",
            r = out(reg32) r,
            p = in(reg64) p,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    r
}

/// The shared::cluster address of the location at shared address `addr` (from
/// [`shared_addr`]) in block `rank` of this cluster (PTX `mapa.shared::cluster`).
///
/// # Safety
/// Only in the sm_90 build, in a cluster launch; `rank` is below the cluster's block
/// count.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn cluster_map_addr(addr: u32, rank: usize) -> u32 {
    let r: u32;
    // SAFETY: `mapa` only computes an address (the caller's contract makes it valid).
    unsafe {
        asm!(
            "mapa.shared::cluster.u32 {r}, {a}, {k};",
            r = out(reg32) r,
            a = in(reg32) addr,
            k = in(reg32) rank as u32,
            options(pure, nomem, nostack, preserves_flags),
        )
    };
    r
}

/// Initialises the mbarrier at `bar` (this block's shared memory) for `count`
/// arrivals a phase (PTX `mbarrier.init`).
///
/// # Safety
/// Only in the sm_90 build; `bar` is an 8-byte-aligned shared-memory word that no
/// other thread uses until a barrier orders this initialisation before its use (and
/// [`fence_mbarrier_init`] before remote use).
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn mbarrier_init(bar: *mut u64, count: u32) {
    // SAFETY: the caller's contract; `shared_addr` of a shared pointer.
    unsafe {
        let a = shared_addr(bar);
        asm!(
            "mbarrier.init.shared::cta.b64 [{a}], {c};",
            a = in(reg32) a,
            c = in(reg32) count,
            options(nostack, preserves_flags),
        )
    };
}

/// Makes this thread's earlier mbarrier initialisations visible to the cluster
/// (PTX `fence.mbarrier_init.release.cluster`; a cluster barrier must follow before
/// other blocks use them).
///
/// # Safety
/// Only in the sm_90 build, in a cluster launch.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn fence_mbarrier_init() {
    // SAFETY: a fence; no preconditions beyond sm_90.
    unsafe {
        asm!(
            "fence.mbarrier_init.release.cluster;",
            options(nostack, preserves_flags)
        )
    };
}

/// Arrives once at the local mbarrier `bar` and adds `bytes` to the transaction count
/// its current phase waits for (PTX `mbarrier.arrive.expect_tx`, release at CTA scope).
///
/// # Safety
/// Only in the sm_90 build; `bar` initialised by [`mbarrier_init`] and ordered before
/// this call.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn mbarrier_arrive_expect_tx(bar: *mut u64, bytes: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        let a = shared_addr(bar);
        asm!(
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [{a}], {b};",
            a = in(reg32) a,
            b = in(reg32) bytes,
            options(nostack, preserves_flags),
        )
    };
}

/// Waits until the phase of parity `parity` of the local mbarrier `bar` has completed
/// (PTX `mbarrier.try_wait.parity`, acquire at CTA scope): the data that `st.async`
/// operations counted by that phase wrote into this block are visible afterwards.
///
/// # Safety
/// Only in the sm_90 build; `bar` initialised and ordered before this call; the phase
/// completes eventually (else this spins forever).
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn mbarrier_wait_parity(bar: *mut u64, parity: u32) {
    // SAFETY: the caller's contract.
    let a = unsafe { shared_addr(bar) };
    loop {
        let done: u32;
        // SAFETY: as above; no `nomem`: reads after the wait stay after it.
        unsafe {
            asm!(
                "{{ .reg .pred %pw; mbarrier.try_wait.parity.shared::cta.b64 %pw, [{a}], {p}; selp.u32 {d}, 1, 0, %pw; }}",
                a = in(reg32) a,
                p = in(reg32) parity,
                d = out(reg32) done,
                options(nostack, preserves_flags),
            )
        };
        if done != 0 {
            break;
        }
    }
}

/// Writes `v` (4 or 8 bytes) to the shared::cluster address `dst` of another (or this)
/// block and counts its bytes on the mbarrier at shared::cluster address `bar` of that
/// block (PTX `st.async … mbarrier::complete_tx::bytes`, sm_90).
///
/// # Safety
/// Only in the sm_90 build, in a cluster launch; `dst` (aligned to the size of `T`) and
/// `bar` are [`cluster_map_addr`] addresses in the same block, which waits for the
/// bytes on that mbarrier before it exits; nothing else accesses `dst` until then.
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn st_async<T: Copy>(dst: u32, v: T, bar: u32) {
    if core::mem::size_of::<T>() == 8 {
        // SAFETY: T is 8 bytes (checked), so this reads exactly its bits.
        let bits: u64 = unsafe { core::mem::transmute_copy(&v) };
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [{d}], {v}, [{b}];",
                d = in(reg32) dst,
                v = in(reg64) bits,
                b = in(reg32) bar,
                options(nostack, preserves_flags),
            )
        };
    } else {
        // SAFETY: T is 4 bytes here (the only other size the kernels use).
        let bits: u32 = unsafe { core::mem::transmute_copy(&v) };
        // SAFETY: the caller's contract.
        unsafe {
            asm!(
                "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [{d}], {v}, [{b}];",
                d = in(reg32) dst,
                v = in(reg32) bits,
                b = in(reg32) bar,
                options(nostack, preserves_flags),
            )
        };
    }
}

/// [`st_async`] of two 64-bit words (16 bytes, `dst` aligned to 16).
///
/// # Safety
/// As [`st_async`].
#[cfg(cuqr_sm90)]
#[inline(always)]
pub unsafe fn st_async_v2_b64(dst: u32, lo: u64, hi: u64, bar: u32) {
    // SAFETY: the caller's contract.
    unsafe {
        asm!(
            "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b64 [{d}], {{{x}, {y}}}, [{b}];",
            d = in(reg32) dst,
            x = in(reg64) lo,
            y = in(reg64) hi,
            b = in(reg32) bar,
            options(nostack, preserves_flags),
        )
    };
}
