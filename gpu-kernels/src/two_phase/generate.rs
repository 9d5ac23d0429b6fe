//! The step-synchronous generate kernels: the strip and block wavefronts with two block
//! barriers a step, and the two stages of the rank-one update.

use super::{givens, record, rot_pair, sum_scale};
use crate::device::{self, Float};
use crate::fused_panel::Pow2;

/// `two_phase_gen_strip`: the strip wavefront (docs/algorithms.md#givens-rotations,
/// docs/algorithms.md#column-insertion) on the driver block
/// x = R'(k0.., k0..) (column-major, ld `ld`), local rows 0..h+p, columns 0..p, in
/// place in global memory. Local column j is zeroed in rows h+j down to j+1 with planes
/// (r−1, r); step t(j, r) = (h − r) + 2j. Rotation (j, r) is recorded at index
/// j·h + (h + j − r) with plane r − 1 (local), ρ goes to x(r−1, j), x(r, j) := 0, and
/// rows (r−1, r) of the driver columns j+1..p are rotated. One block.
///
/// # Safety
/// Grid 1 (any block size); x read-writable for rows 0..h+p, columns 0..p with ld ≥ h+p;
/// `rot` writable for 2·p·h, `plane` for p·h; no overlap.
#[inline(always)]
pub unsafe fn gen_strip<T: Float>(
    x: *mut T,
    ld: usize,
    h: usize,
    p: usize,
    rot: *mut T,
    plane: *mut u32,
) {
    if h == 0 || p == 0 {
        return;
    }
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    for t in 0..h + p - 1 {
        let jlo = (t + 1).saturating_sub(h);
        let jhi = t.min(p - 1);
        // Phase 1: one thread per active column computes its rotation.
        let mut j = jlo + tid;
        while j <= jhi {
            let r = h + 2 * j - t;
            // SAFETY: j+1 ≤ r ≤ h+j < h+p and j < p: inside the driver block; active
            // columns are distinct, so each (r−1, j), (r, j) has one writer; k < p·h.
            unsafe {
                let (f, g) = (device::ld(x, r - 1 + j * ld), device::ld(x, r + j * ld));
                let (c, s, rho) = givens(f, g);
                device::st(x, r - 1 + j * ld, rho);
                device::st(x, r + j * ld, T::ZERO);
                record(rot, plane, j * h + (h + j - r), c, s, r - 1);
            }
            j += nt;
        }
        // SAFETY: every thread of the block runs the same loop bounds (uniform).
        unsafe { device::sync_threads() };
        // Phase 2: rotate rows (r−1, r) of columns j' ∈ j+1..p for each active j.
        let na = jhi + 1 - jlo;
        let width = p - 1 - jlo;
        let mut idx = tid;
        while idx < na * width {
            let j = jlo + idx % na;
            let jj = jlo + 1 + idx / na;
            if jj > j {
                let r = h + 2 * j - t;
                // SAFETY: rotation j was recorded in phase 1 and the barrier makes it
                // visible; rows r−1, r of column jj are touched only by rotation j in
                // this step (active rotations are two rows apart) and thread idx only.
                unsafe {
                    let k = j * h + (h + j - r);
                    let (c, s) = (device::ld(rot, 2 * k), device::ld(rot, 2 * k + 1));
                    let (u, l) = (r - 1 + jj * ld, r + jj * ld);
                    let (a, b) = rot_pair(c, s, device::ld(x, u), device::ld(x, l));
                    device::st(x, u, a);
                    device::st(x, l, b);
                }
            }
            idx += nt;
        }
        // SAFETY: uniform control flow, as above.
        unsafe { device::sync_threads() };
    }
}

/// `two_phase_gen_block`: the block wavefront (docs/algorithms.md#givens-rotations,
/// docs/algorithms.md#row-deletion) on Z = Q(k0..k0+p, :).
/// First copies Z (rows of the column-major `qz`, ld `ldq`) into the compact p×m scratch
/// `z` (ld p), then for row i = 0..p zeroes z(i, j) for j = m−1 down to i+1 against
/// z(i, j−1) with the column plane (j−1, j), rotating those two columns of the rows
/// i+1..p below; step t(i, j) = (m−1−j) + 2i. Rotation (i, j) is recorded at index
/// i(m−1) − i(i−1)/2 + (m−1−j) with plane j − 1. One block.
///
/// # Safety
/// Grid 1 (any block size); `qz` readable p×m (ld ldq ≥ p); `z` writable p·m; `rot`
/// writable for 2·(p·m − p(p+1)/2), `plane` for p·m − p(p+1)/2; no overlap; p < m.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_block<T: Float>(
    qz: *const T,
    ldq: usize,
    p: usize,
    m: usize,
    z: *mut T,
    rot: *mut T,
    plane: *mut u32,
) {
    if p == 0 || m < 2 {
        return;
    }
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let mut idx = tid;
    while idx < p * m {
        let (i, j) = (idx % p, idx / p);
        // SAFETY: i < p, j < m: inside Z and the scratch; one writer per idx.
        unsafe { device::st(z, idx, device::ld(qz, i + j * ldq)) };
        idx += nt;
    }
    // SAFETY: uniform control flow.
    unsafe { device::sync_threads() };
    for t in 0..m + p - 2 {
        let ilo = (t + 2).saturating_sub(m);
        let ihi = (p - 1).min(t / 2);
        if ilo <= ihi {
            let mut i = ilo + tid;
            while i <= ihi {
                let j = m - 1 - t + 2 * i;
                // SAFETY: i+1 ≤ j ≤ m−1 (active range); one thread per active i, and
                // active rotations use disjoint column pairs; k is inside the list.
                unsafe {
                    let (f, g) = (device::ld(z, i + (j - 1) * p), device::ld(z, i + j * p));
                    let (c, s, rho) = givens(f, g);
                    device::st(z, i + (j - 1) * p, rho);
                    device::st(z, i + j * p, T::ZERO);
                    let k = i * (m - 1) - i * i.saturating_sub(1) / 2 + (m - 1 - j);
                    record(rot, plane, k, c, s, j - 1);
                }
                i += nt;
            }
        }
        // SAFETY: uniform control flow.
        unsafe { device::sync_threads() };
        if ilo <= ihi && ilo + 1 < p {
            let na = ihi + 1 - ilo;
            let height = p - 1 - ilo;
            let mut idx = tid;
            while idx < na * height {
                let i = ilo + idx % na;
                let ii = ilo + 1 + idx / na;
                if ii > i {
                    let j = m - 1 - t + 2 * i;
                    // SAFETY: rotation (i, j) is visible after the barrier; entries
                    // (ii, j−1), (ii, j) belong to this rotation alone in this step and
                    // to this thread alone.
                    unsafe {
                        let k = i * (m - 1) - i * i.saturating_sub(1) / 2 + (m - 1 - j);
                        let (c, s) = (device::ld(rot, 2 * k), device::ld(rot, 2 * k + 1));
                        let (u, l) = (ii + (j - 1) * p, ii + j * p);
                        let (a, b) = rot_pair(c, s, device::ld(z, u), device::ld(z, l));
                        device::st(z, u, a);
                        device::st(z, l, b);
                    }
                }
                idx += nt;
            }
        }
        // SAFETY: uniform control flow.
        unsafe { device::sync_threads() };
    }
}

/// `two_phase_gen_rank_one_a`: stage A of docs/algorithms.md#rank-one-update on w(0..=top): for i = top−1 down
/// to 0, the rotation on plane (i, i+1) zeroing w(i+1) against w(i), recorded at index
/// top−1−i; w(0) ends as ρ₀ = ±‖w‖ (≥ 0), w(1..=top) as exact zeros.
///
/// The serial chain makes rotation i from (w(i), ρ_{i+1}), ρ_{i+1} being the previous
/// rotation's ρ, i.e. ‖w(i+1..=top)‖ up to rounding. Here every rotation is made at once
/// from g_i = ‖w(i+1..=top)‖ (g_{top−1} = w(top) itself, as in the chain): one block
/// finds s = 2^e ≥ max |w| (`Pow2::pow2_scale`, so scaling is exact), each thread sums
/// (w/s)² over its chunk, a block suffix scan (warp shuffles, then the warp totals)
/// gives each chunk the sum after it, and each thread walks its chunk downwards with
/// g_i = s·√(sum after i) and `givens`. The rotations differ from the chain's by
/// rounding only (the serial chain took ≈ 0.34 µs a rotation on one thread, measured on
/// the H100). Entries
/// below 2⁻⁵¹¹·max |w| vanish from the sums (far below the unit roundoff of ‖w‖).
///
/// # Safety
/// Grid 1, block size a multiple of 32 (at most 1024); `w` read-writable for top+1;
/// `rot` writable for 2·top, `plane` for top; no overlap; dynamic shared memory of at
/// least 64 `T`s.
#[inline(always)]
pub unsafe fn gen_rank_one_a<T: Pow2>(w: *mut T, top: usize, rot: *mut T, plane: *mut u32) {
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let (lane, warp, nw) = (tid % 32, tid / 32, nt.div_ceil(32));
    let len = top + 1;
    let per = len.div_ceil(nt);
    let lo = (tid * per).min(len);
    let hi = (lo + per).min(len);
    // SAFETY: index top < len; read before the barrier after which w is written.
    let wtop = unsafe { device::ld(w as *const T, top) };
    let mut mx = T::ZERO;
    for i in lo..hi {
        // SAFETY: i < len.
        mx = mx.max(unsafe { device::ld(w as *const T, i) }.abs());
    }
    // SAFETY: block-uniform; shared memory holds ≥ 32 `T`s for the reduction.
    let mx = unsafe { crate::reduce::block_max(mx) };
    let (sc, inv) = sum_scale(mx);
    let mut part = T::ZERO;
    for i in (lo..hi).rev() {
        // SAFETY: i < len.
        let x = unsafe { device::ld(w as *const T, i) }.mul(inv);
        part = x.mul_add(x, part);
    }
    // Suffix sums: inclusive within the warp, then the sum of every later warp.
    let mut incl = part;
    let mut d = 1u32;
    while d < 32 {
        // SAFETY: every lane of every (full) warp runs this loop the same number of times.
        let o = unsafe { incl.shfl_down(d) };
        if lane + (d as usize) < 32 {
            incl = incl.add(o);
        }
        d *= 2;
    }
    // SAFETY: as above.
    let next = unsafe { incl.shfl_down(1) };
    let excl_in_warp = if lane < 31 { next } else { T::ZERO };
    // SAFETY: slots 32..64 of the dynamic shared memory (the contract's 64 `T`s).
    let totals = unsafe { device::shared::<T>().add(32) };
    if lane == 0 {
        // SAFETY: warp < 32 slots after the reduction's 32; one writer each.
        unsafe { device::st(totals, warp, incl) };
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let mut after = excl_in_warp;
    for k in (warp + 1..nw).rev() {
        // SAFETY: written before the barrier.
        after = after.add(unsafe { device::ld(totals as *const T, k) });
    }
    // Walk the chunk downwards: `after` = Σ (w_k/s)² over k > i.
    let mut rho0 = T::ZERO;
    let mut i = hi;
    while i > lo {
        i -= 1;
        // SAFETY: i < len; w is not written before the barrier below.
        let wi = unsafe { device::ld(w as *const T, i) };
        if i + 1 <= top {
            let g = if i + 1 == top {
                wtop
            } else {
                sc.mul(after.sqrt())
            };
            let (c, sn, rho) = givens(wi, g);
            // SAFETY: list index top−1−i < top, written by this thread only.
            unsafe { record(rot, plane, top - 1 - i, c, sn, i) };
            if i == 0 {
                rho0 = rho;
            }
        }
        let x = wi.mul(inv);
        after = x.mul_add(x, after);
    }
    // SAFETY: block-uniform barrier: every read of w is done.
    unsafe { device::sync_threads() };
    for i in lo..hi {
        // SAFETY: i < len, this thread's chunk.
        unsafe { device::st(w, i, if i == 0 { rho0 } else { T::ZERO }) };
    }
}

/// `two_phase_gen_rank_one_b`: R(0, :) += w(0)·vᵀ, then stage B of
/// docs/algorithms.md#rank-one-update on the
/// upper Hessenberg R (m×n, ld ldr): for i = 0..min(n, m−1) one thread computes the
/// rotation zeroing R(i+1, i) against R(i, i) (ρ written, exact 0 below), records it at
/// index `k_off + i` with plane i, and the block rotates rows (i, i+1) over columns
/// i+1..n. One block.
///
/// # Safety
/// Grid 1 (any block size); `r` read-writable m×n (ld ldr ≥ m); `w` readable for 1, `v`
/// for n; `rot` writable at 2·(k_off .. k_off + min(n, m−1)), `plane` at
/// k_off .. k_off + min(n, m−1); no overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_rank_one_b<T: Float>(
    r: *mut T,
    ldr: usize,
    m: usize,
    n: usize,
    w: *const T,
    v: *const T,
    rot: *mut T,
    plane: *mut u32,
    k_off: usize,
) {
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    // SAFETY: w[0] readable.
    let w0 = unsafe { device::ld(w, 0) };
    let mut j = tid;
    while j < n {
        // SAFETY: column j < n of row 0; one writer per j.
        unsafe {
            device::st(
                r,
                j * ldr,
                w0.mul_add(device::ld(v, j), device::ld(r, j * ldr)),
            )
        };
        j += nt;
    }
    // SAFETY: uniform control flow.
    unsafe { device::sync_threads() };
    for i in 0..n.min(m.saturating_sub(1)) {
        if tid == 0 {
            // SAFETY: (i, i), (i+1, i) inside R (i+1 < m, i < n); list index in range;
            // no other thread touches them between the barriers.
            unsafe {
                let (f, g) = (device::ld(r, i + i * ldr), device::ld(r, i + 1 + i * ldr));
                let (c, s, rho) = givens(f, g);
                device::st(r, i + i * ldr, rho);
                device::st(r, i + 1 + i * ldr, T::ZERO);
                record(rot, plane, k_off + i, c, s, i);
            }
        }
        // SAFETY: uniform control flow.
        unsafe { device::sync_threads() };
        // SAFETY: the rotation is visible after the barrier.
        let (c, s) = unsafe {
            (
                device::ld(rot as *const T, 2 * (k_off + i)),
                device::ld(rot as *const T, 2 * (k_off + i) + 1),
            )
        };
        let mut col = i + 1 + tid;
        while col < n {
            // SAFETY: rows i, i+1 < m of column col < n; one writer per column.
            unsafe {
                let (u, l) = (i + col * ldr, i + 1 + col * ldr);
                let (a, b) = rot_pair(c, s, device::ld(r, u), device::ld(r, l));
                device::st(r, u, a);
                device::st(r, l, b);
            }
            col += nt;
        }
        // SAFETY: uniform control flow.
        unsafe { device::sync_threads() };
    }
}
