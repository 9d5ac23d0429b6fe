//! Two-phase Givens on the device (spec §1.5 "Recommended modern design", §1.7 step 3,
//! §1.10, §1.11): a single-block *generate* kernel runs the wavefront over the small
//! driver block (strip, block or rank-one case) with `__syncthreads` between steps and
//! records every rotation (c, s, plane) in the sequential order of the CPU algorithm;
//! one *apply* launch then streams the whole list through up to three targets (Q, d, R),
//! one thread per independent vector, keeping the value two consecutive rotations share in
//! a register. O(1) launches per Givens stage instead of O(steps). Rotation convention as
//! `cpu::givens::givens` (r ≥ 0, safe at (0, 0), hypot); zeroed entries are exact 0.

use crate::device::{self, Float};
use crate::fused_panel::Pow2;

/// Marks "no value held in a register" in [`apply_one`].
const NONE: usize = usize::MAX;

/// (c, s, ρ) with the convention of `cpu::givens::givens`: g = 0 gives (±1, 0, |f|)
/// exactly. Otherwise, when h = max(|f|, |g|) lies in [`Float::ROT_LO`],
/// [`Float::ROT_HI`] (f² + g² cannot overflow or go subnormal), y ≈ 1/√(f² + g²) from
/// the hardware rsqrt and Newton steps, and c = f·y, s = g·y, ρ = (f² + g²)·y (each
/// within about two units of the last place of the correctly rounded value); outside
/// that range (and for NaN or ±∞) ρ = hypot(f, g), c = f/ρ, s = g/ρ as on the CPU.
/// The rotation is made on the critical path of every generate chain (issue 7): the
/// rsqrt path has no division and no IEEE square root, about a fifth of their latency.
#[inline(always)]
pub fn givens<T: Float>(f: T, g: T) -> (T, T, T) {
    if g == T::ZERO {
        if f >= T::ZERO {
            return (T::ONE, T::ZERO, f);
        }
        return (T::ONE.neg(), T::ZERO, f.neg());
    }
    let (a, b) = (f.abs(), g.abs());
    let h = if a >= b { a } else { b };
    if h >= T::ROT_LO && h <= T::ROT_HI {
        let ss = f.mul_add(f, g.mul(g));
        let mut y = ss.rsqrt_approx();
        let mut k = 0;
        while k < T::RSQRT_NEWTON {
            // y ← y + (y/2)(1 − ss·y²)
            let e = ss.mul(y).neg().mul_add(y, T::ONE);
            y = y.mul(T::HALF).mul_add(e, y);
            k += 1;
        }
        return (f.mul(y), g.mul(y), ss.mul(y));
    }
    let r = f.hypot(g);
    (f.div(r), g.div(r), r)
}


/// x ← c·x + s·y, y ← −s·x + c·y, fused exactly as `cpu::givens::rot_pair`.
#[inline(always)]
fn rot_pair<T: Float>(c: T, s: T, x: T, y: T) -> (T, T) {
    (c.mul_add(x, s.mul(y)), c.mul_add(y, s.mul(x).neg()))
}

/// Stores rotation `k` of the list: `rot[2k] = c`, `rot[2k+1] = s`, `plane[k] = a`.
///
/// # Safety
/// `k` is inside the list and written by this thread only.
#[inline(always)]
unsafe fn record<T: Float>(rot: *mut T, plane: *mut u32, k: usize, c: T, s: T, a: usize) {
    // SAFETY: forwarded from the caller (k in bounds, exclusive).
    unsafe {
        device::st(rot, 2 * k, c);
        device::st(rot, 2 * k + 1, s);
        device::st(plane, k, a as u32);
    }
}

/// `two_phase_gen_strip`: the strip wavefront of spec §1.5/§1.7 on the driver block
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

/// `two_phase_gen_block`: the block wavefront of spec §1.5/§1.10 on Z = Q(k0..k0+p, :).
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

/// Repeats `$body` with `$u` bound to 0..8 (batches of eight in the apply kernels).
macro_rules! rep8 {
    ($u:ident $body:block) => {
        rep8!(@ $u $body [0, 1, 2, 3, 4, 5, 6, 7])
    };
    (@ $u:ident $body:block [$($n:literal),*]) => {
        $( { let $u: usize = $n; $body } )*
    };
}

/// `two_phase_gen_rank_one_a`: stage A of spec §1.11 on w(0..=top): for i = top−1 down
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
/// rounding only (issue 7: the chain took ≈ 0.34 µs a rotation on one thread). Entries
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
    let (sc, inv) = mx.pow2_scale();
    // A non-finite entry: let it propagate (the update's rank check refuses the result).
    let (sc, inv) = if mx.is_finite() { (sc, inv) } else { (T::ONE, T::ONE) };
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

/// `two_phase_gen_rank_one_b`: R(0, :) += w(0)·vᵀ, then stage B of spec §1.11 on the
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

/// Streams rotations 0..count through vector `t` of one target: element k of the vector
/// is `x[t·rs + k·cs]`; rotation i acts on elements (a, a+1), a = plane[i]. With
/// `bottom` ≠ NONE, elements after `bottom` are known exact zeros: planes with a > bottom
/// are skipped (0 stays 0) and the bound grows to a+1 when a plane straddles it. The
/// element the next rotation shares stays in a register (one load, one store each).
///
/// # Safety
/// Every element the list touches (indices ≤ max plane + 1) is read-writable for this
/// vector and touched by this thread only; `rot`/`plane` readable for `count`.
#[inline(always)]
unsafe fn apply_one<T: Float>(
    rot: *const T,
    plane: *const u32,
    count: usize,
    x: *mut T,
    base: usize,
    cs: usize,
    mut bottom: usize,
) {
    let (mut held, mut hv) = (NONE, T::ZERO);
    for i in 0..count {
        // SAFETY: i < count.
        let a = unsafe { device::ld(plane, i) } as usize;
        if bottom != NONE && a > bottom {
            continue;
        }
        // SAFETY: list entries in range; elements a, a+1 (and `held`) belong to this
        // vector and thread, by the caller's contract.
        unsafe {
            let (c, s) = (device::ld(rot, 2 * i), device::ld(rot, 2 * i + 1));
            let xa = if held == a {
                hv
            } else {
                device::ld(x, base + a * cs)
            };
            let ya = if held == a + 1 {
                hv
            } else {
                device::ld(x, base + (a + 1) * cs)
            };
            if held != NONE && held != a && held != a + 1 {
                device::st(x, base + held * cs, hv);
            }
            if bottom != NONE && a + 1 > bottom {
                bottom = a + 1;
            }
            let (xn, yn) = rot_pair(c, s, xa, ya);
            let na = if i + 1 < count {
                device::ld(plane, i + 1) as usize
            } else {
                NONE
            };
            if na == a || na.wrapping_add(1) == a {
                device::st(x, base + (a + 1) * cs, yn);
                held = a;
                hv = xn;
            } else if na == a + 1 {
                device::st(x, base + a * cs, xn);
                held = a + 1;
                hv = yn;
            } else {
                device::st(x, base + a * cs, xn);
                device::st(x, base + (a + 1) * cs, yn);
                held = NONE;
            }
        }
    }
    if held != NONE {
        // SAFETY: as above.
        unsafe { device::st(x, base + held * cs, hv) };
    }
}

/// `two_phase_apply`: applies the recorded rotations 0..count, in order, to up to three
/// targets; blockIdx.y = g selects target g = (x_g, rs_g, cs_g, n_g, b_g): thread
/// t < n_g owns the vector x_g[t·rs_g + k·cs_g] (a row of column-major Q: rs 1, cs ld;
/// a column of R or d under row rotations: rs ld, cs 1). b_g = usize::MAX: no skipping;
/// otherwise vector t's entries after b_g + t are exact zeros (skipped, spec §1.5 G4).
/// Grid (⌈max n_g/128⌉, 3), block 128.
///
/// # Safety
/// Launch shape as documented; for each target, vectors t < n_g are read-writable at
/// every index the list touches, distinct vectors do not overlap, targets do not overlap
/// each other or the list.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply<T: Float>(
    rot: *const T,
    plane: *const u32,
    count: usize,
    x0: *mut T,
    rs0: usize,
    cs0: usize,
    n0: usize,
    b0: usize,
    x1: *mut T,
    rs1: usize,
    cs1: usize,
    n1: usize,
    b1: usize,
    x2: *mut T,
    rs2: usize,
    cs2: usize,
    n2: usize,
    b2: usize,
) {
    let (x, rs, cs, n, b) = match device::block_y() {
        0 => (x0, rs0, cs0, n0, b0),
        1 => (x1, rs1, cs1, n1, b1),
        _ => (x2, rs2, cs2, n2, b2),
    };
    let t = device::block_x() * device::block_dim_x() + device::thread_x();
    if t >= n {
        return;
    }
    let bottom = if b == NONE { NONE } else { b + t };
    // SAFETY: forwarded from the entry's contract; vector t belongs to this thread.
    unsafe { apply_one(rot, plane, count, x, t * rs, cs, bottom) };
}

/// `two_phase_house_apply`: applies H = I − τ·v·vᵀ, v = [1; vt] (length `len`), to up to
/// two targets (blockIdx.y = g), vector t < n_g being x_g[t·rs_g + k·cs_g], k < len:
/// z = Σ v_k x_k, x_k −= τ·z·v_k (spec §1.11 variant A2: Q(:, n:m)·H and H·d(n:m)).
/// Grid (⌈max n_g/128⌉, 2), block 128.
///
/// # Safety
/// Launch shape as documented; `vt` readable for len − 1, `tau` for 1; vectors
/// read-writable for len elements, non-overlapping, and not overlapping vt or tau.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn house_apply<T: Float>(
    vt: *const T,
    len: usize,
    tau: *const T,
    x0: *mut T,
    rs0: usize,
    cs0: usize,
    n0: usize,
    x1: *mut T,
    rs1: usize,
    cs1: usize,
    n1: usize,
) {
    let (x, rs, cs, n) = if device::block_y() == 0 {
        (x0, rs0, cs0, n0)
    } else {
        (x1, rs1, cs1, n1)
    };
    let t = device::block_x() * device::block_dim_x() + device::thread_x();
    if t >= n || len == 0 {
        return;
    }
    let base = t * rs;
    let at = |k: usize| base + k * cs;
    // SAFETY: elements base + k·cs, k < len, belong to vector t (caller's contract);
    // vt[0..len−1] and tau[0] readable. Both passes load (x_k, v_k) eight entries ahead
    // of their use (issue 7: the addresses do not depend on the data) and keep the
    // arithmetic and its order: z accumulates k = 1, 2, … with one fma each.
    unsafe {
        let mut z = device::ld(x, base);
        let (mut nx, mut nv) = ([T::ZERO; 8], [T::ZERO; 8]);
        rep8!(u {
            if 1 + u < len {
                nx[u] = device::ld(x, at(1 + u));
                nv[u] = device::ld(vt, u);
            }
        });
        let mut k0 = 1;
        while k0 < len {
            let (bx, bv) = (nx, nv);
            rep8!(u {
                let k = k0 + 8 + u;
                if k < len {
                    nx[u] = device::ld(x, at(k));
                    nv[u] = device::ld(vt, k - 1);
                }
            });
            rep8!(u {
                if k0 + u < len {
                    z = bx[u].mul_add(bv[u], z);
                }
            });
            k0 += 8;
        }
        let tz = device::ld(tau, 0).mul(z);
        device::st(x, base, tz.neg().add(device::ld(x, base)));
        rep8!(u {
            if 1 + u < len {
                nx[u] = device::ld(x, at(1 + u));
                nv[u] = device::ld(vt, u);
            }
        });
        let mut k0 = 1;
        while k0 < len {
            let (bx, bv) = (nx, nv);
            rep8!(u {
                let k = k0 + 8 + u;
                if k < len {
                    nx[u] = device::ld(x, at(k));
                    nv[u] = device::ld(vt, k - 1);
                }
            });
            rep8!(u {
                let k = k0 + u;
                if k < len {
                    device::st(x, at(k), tz.neg().mul_add(bv[u], bx[u]));
                }
            });
            k0 += 8;
        }
    }
}

/// `two_phase_copy`: dst(i, j) := src(i', j) for i < rows, j < cols, where i' = i for
/// i < skip0 and i + skip_p otherwise (rows skip0..skip0+skip_p of src are dropped);
/// with `zero_lower` ≠ 0, entries with i > j are written as exact 0 instead. `src` has
/// leading dimension lds (lds = ld + 1 with rows = 1 reads a diagonal). Grid
/// (⌈rows/32⌉, ⌈cols/8⌉), block (32, 8).
///
/// # Safety
/// Launch shape as documented; src readable at i' + j·lds for the copied (i, j); dst
/// writable rows×cols with ld ldd ≥ rows; no overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy<T: Float>(
    src: *const T,
    lds: usize,
    rows: usize,
    cols: usize,
    dst: *mut T,
    ldd: usize,
    skip0: usize,
    skip_p: usize,
    zero_lower: usize,
) {
    let i = device::block_x() * device::block_dim_x() + device::thread_x();
    let j = device::block_y() * device::block_dim_y() + device::thread_y();
    if i >= rows || j >= cols {
        return;
    }
    let v = if zero_lower != 0 && i > j {
        T::ZERO
    } else {
        let si = if i < skip0 { i } else { i + skip_p };
        // SAFETY: (si, j) is a copied source element (caller's contract).
        unsafe { device::ld(src, si + j * lds) }
    };
    // SAFETY: (i, j) inside dst; one writer per element.
    unsafe { device::st(dst, i + j * ldd, v) };
}

/// Rotations processed per unrolled chunk by [`apply_sched`] (independent loads in
/// flight per thread); must match the literal list in [`unroll!`].
const UNROLL: usize = 8;

/// Repeats `$body` with `$u` bound to each literal (a compile-time unroll, so that the
/// per-chunk arrays of [`apply_sched_one`] live in registers, not local memory).
macro_rules! unroll {
    ($u:ident in [$($n:literal),*] $body:block) => {
        $( { let $u: usize = $n; $body } )*
    };
}

/// Active range and rotation of the strip (sched 1, s0 = h, s1 = p) or block (sched 2,
/// s0 = p, s1 = m) wavefront at step t: returns (lo, hi) of the active columns/rows.
#[inline(always)]
fn sched_range(sched: usize, s0: usize, s1: usize, t: usize) -> (usize, usize) {
    if sched == 1 {
        ((t + 1).saturating_sub(s0), t.min(s1 - 1))
    } else {
        ((t + 2).saturating_sub(s1), (s0 - 1).min(t / 2))
    }
}

/// (list index k, plane a) of the active rotation `i` at step t (see [`gen_strip`] and
/// [`gen_block`] for the index formulas).
#[inline(always)]
fn sched_rot(sched: usize, s0: usize, s1: usize, t: usize, i: usize) -> (usize, usize) {
    if sched == 1 {
        let (h, j) = (s0, i);
        let r = h + 2 * j - t;
        (j * h + (h + j - r), r - 1)
    } else {
        let m = s1;
        let j = m - 1 - t + 2 * i;
        (
            i * (m - 1) - i * i.saturating_sub(1) / 2 + (m - 1 - j),
            j - 1,
        )
    }
}

/// Streams a strip- or block-schedule list through one vector in wavefront step order:
/// the rotations of one step act on disjoint planes and commute, so they are taken
/// [`UNROLL`] at a time with all loads issued before any store (memory-level parallelism
/// instead of one dependent load per rotation). Same results, bit for bit, as the list
/// order. `bottom` as in [`apply_one`].
///
/// # Safety
/// As [`apply_one`]; `rot` holds the whole schedule's list.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn apply_sched_one<T: Float>(
    rot: *const T,
    sched: usize,
    s0: usize,
    s1: usize,
    x: *mut T,
    base: usize,
    cs: usize,
    mut bottom: usize,
) {
    let steps = if sched == 1 { s0 + s1 - 1 } else { s1 + s0 - 2 };
    for t in 0..steps {
        let (lo, hi) = sched_range(sched, s0, s1, t);
        let mut i = lo;
        while i <= hi {
            let mut ca = [T::ZERO; UNROLL];
            let mut sa = [T::ZERO; UNROLL];
            let mut xa = [T::ZERO; UNROLL];
            let mut ya = [T::ZERO; UNROLL];
            let mut pa = [NONE; UNROLL];
            unroll!(u in [0, 1, 2, 3, 4, 5, 6, 7] {
                if i + u <= hi {
                    let (k, a) = sched_rot(sched, s0, s1, t, i + u);
                    if bottom == NONE || a <= bottom {
                        pa[u] = a;
                        // SAFETY: k is inside the list; a, a+1 are elements of this
                        // thread's vector (caller's contract).
                        unsafe {
                            ca[u] = device::ld(rot, 2 * k);
                            sa[u] = device::ld(rot, 2 * k + 1);
                            xa[u] = device::ld(x, base + a * cs);
                            ya[u] = device::ld(x, base + (a + 1) * cs);
                        }
                    }
                }
            });
            unroll!(u in [0, 1, 2, 3, 4, 5, 6, 7] {
                let a = pa[u];
                if a != NONE {
                    let (xn, yn) = rot_pair(ca[u], sa[u], xa[u], ya[u]);
                    // SAFETY: as above; planes of one step are disjoint, so no element
                    // loaded in this chunk is written by another rotation of it.
                    unsafe {
                        device::st(x, base + a * cs, xn);
                        device::st(x, base + (a + 1) * cs, yn);
                    }
                    if bottom != NONE && a + 1 > bottom {
                        bottom = a + 1;
                    }
                }
            });
            i += UNROLL;
        }
    }
}

/// Chains per register block in [`apply_blocked_one`] (the window holds 2·WB elements).
const WB: usize = 16;

/// Repeats `$body` with `$u` bound to 0..WB (literal unroll: register arrays).
macro_rules! rep_wb {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] $body)
    };
}

/// Repeats `$body` with `$u` bound to 0..2·WB.
macro_rules! rep_win {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
            20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31] $body)
    };
}

/// Register-blocked application of a strip (sched 1, s0 = h, s1 = p) or block (sched 2,
/// s0 = p, s1 = m) schedule to one vector with no band limit (issue 7, "rotations
/// blocked so each row or column of a target is read and written once per block of
/// rotations"). Both schedules are `nch` chains; chain c holds the rotations on planes
/// a = hi(c), hi(c)−1, …, c (list index k = kb(c) − a), and at wavefront step t chain c
/// is on plane a = A0 + 2c − t (strip: nch = p, A0 = h−1, hi(c) = h+c−1,
/// kb(c) = c·h + h + c − 1; block: nch = p, A0 = m−2, hi(c) = m−2,
/// kb(c) = c(m−1) − c(c−1)/2 + m − 2). For a block of WB chains the elements touched at
/// step t form the window w..w+2·WB (w = A0 + 2c₀ − t), which slides down by one element
/// per step: the window lives in registers, so each element is loaded and stored once per
/// WB chains instead of once per rotation, and the WB rotations of a step are independent
/// (ILP); the elements entering the window are prefetched four steps ahead. Each element
/// sees the same rotations in the same order as in list order, so the result is
/// bit-identical to [`apply_one`].
///
/// # Safety
/// As [`apply_sched_one`] with no band limit: `rot` holds the schedule's whole list and
/// elements 0..span of the vector (span = h+p, resp. m) are this thread's.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn apply_blocked_one<T: Float>(
    rot: *const T,
    sched: usize,
    s0: usize,
    s1: usize,
    x: *mut T,
    base: usize,
    cs: usize,
) {
    let strip = sched == 1;
    let (nch, a0) = if strip {
        (s1, s0 as isize - 1)
    } else {
        (s0, s1 as isize - 2)
    };
    let hi = |c: usize| -> isize {
        if strip {
            (s0 + c) as isize - 1
        } else {
            s1 as isize - 2
        }
    };
    let kb = |c: usize| -> usize {
        if strip {
            c * s0 + s0 + c - 1
        } else {
            c * (s1 - 1) - c * c.saturating_sub(1) / 2 + s1 - 2
        }
    };
    let mut c0 = 0;
    while c0 < nch {
        let c1 = (c0 + WB).min(nch);
        // elements any chain of the block touches: c0 ..= hi(c1−1)+1
        let (e_lo, e_hi) = (c0 as isize, hi(c1 - 1) + 1);
        let t_first = a0 + 2 * c0 as isize - hi(c0);
        let t_last = a0 + c1 as isize - 1;
        let mut w = a0 + 2 * c0 as isize - t_first;
        let mut reg = [T::ZERO; 2 * WB];
        rep_win!(u {
            let i = w + u as isize;
            if i >= e_lo && i <= e_hi {
                // SAFETY: 0 ≤ i < span: an element of this thread's vector.
                reg[u] = unsafe { device::ld(x, base + i as usize * cs) };
            }
        });
        // the next PF elements below the window, loaded PF steps before they enter it,
        // so that the global-memory latency of the sliding window is hidden
        let ldg = |i: isize| -> T {
            if i >= e_lo {
                // SAFETY: e_lo ≤ i < w ≤ e_hi: an element of this thread's vector.
                unsafe { device::ld(x, base + i as usize * cs) }
            } else {
                T::ZERO
            }
        };
        let (mut pf0, mut pf1, mut pf2, mut pf3) = (ldg(w - 1), ldg(w - 2), ldg(w - 3), ldg(w - 4));
        let mut t = t_first;
        loop {
            rep_wb!(b {
                let c = c0 + b;
                let a = w + 2 * b as isize;
                if c < c1 && a >= c as isize && a <= hi(c) {
                    let k = kb(c) - a as usize;
                    // SAFETY: chain c's rotation on plane a is list entry k < len.
                    let (cc, ss) = unsafe { (device::ld(rot, 2 * k), device::ld(rot, 2 * k + 1)) };
                    let (xn, yn) = rot_pair(cc, ss, reg[2 * b], reg[2 * b + 1]);
                    reg[2 * b] = xn;
                    reg[2 * b + 1] = yn;
                }
            });
            if t >= t_last {
                break;
            }
            // slide the window down: the top element is final for this block
            let top = w + 2 * WB as isize - 1;
            if top >= e_lo && top <= e_hi {
                // SAFETY: 0 ≤ top < span, this thread's element.
                unsafe { device::st(x, base + top as usize * cs, reg[2 * WB - 1]) };
            }
            unroll!(u in [31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15,
                14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1] {
                reg[u] = reg[u - 1];
            });
            w -= 1;
            t += 1;
            // x[w] was prefetched into pf0 four steps ago (ZERO below e_lo: never used)
            reg[0] = pf0;
            pf0 = pf1;
            pf1 = pf2;
            pf2 = pf3;
            pf3 = ldg(w - 4);
        }
        rep_win!(u {
            let i = w + u as isize;
            if i >= e_lo && i <= e_hi {
                // SAFETY: 0 ≤ i < span, this thread's element.
                unsafe { device::st(x, base + i as usize * cs, reg[u]) };
            }
        });
        c0 = c1;
    }
}

/// `two_phase_apply_sched`: like [`apply`] (three targets, blockIdx.y = g) for a list
/// recorded by [`gen_strip`] (sched = 1, s0 = h, s1 = p) or [`gen_block`] (sched = 2,
/// s0 = p, s1 = m), streamed in wavefront step order with unrolled independent loads;
/// planes are recomputed from the schedule. Grid (⌈max n_g/128⌉, 3), block 128.
///
/// # Safety
/// As [`apply`], with `rot` holding the schedule's whole list.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply_sched<T: Float>(
    rot: *const T,
    sched: usize,
    s0: usize,
    s1: usize,
    x0: *mut T,
    rs0: usize,
    cs0: usize,
    n0: usize,
    b0: usize,
    x1: *mut T,
    rs1: usize,
    cs1: usize,
    n1: usize,
    b1: usize,
    x2: *mut T,
    rs2: usize,
    cs2: usize,
    n2: usize,
    b2: usize,
) {
    let (x, rs, cs, n, b) = match device::block_y() {
        0 => (x0, rs0, cs0, n0, b0),
        1 => (x1, rs1, cs1, n1, b1),
        _ => (x2, rs2, cs2, n2, b2),
    };
    let t = device::block_x() * device::block_dim_x() + device::thread_x();
    if t >= n || s0 == 0 || s1 == 0 || (sched == 2 && s0 >= s1) {
        return;
    }
    let bottom = if b == NONE { NONE } else { b + t };
    if bottom == NONE {
        // SAFETY: forwarded from the entry's contract; vector t belongs to this thread.
        unsafe { apply_blocked_one(rot, sched, s0, s1, x, t * rs, cs) };
    } else {
        // SAFETY: as above.
        unsafe { apply_sched_one(rot, sched, s0, s1, x, t * rs, cs, bottom) };
    }
}

/// Chains per warp in [`apply_pipe`]: each warp holds a 2·PW-element window in
/// registers (PW = 8 keeps a thread near 128 registers without spills, so 16 warps of
/// an SM can be resident; the 16-chain window of [`apply_blocked_one`] needs ~254).
const PW: usize = 8;

/// Repeats `$body` with `$u` bound to 0..PW (literal unroll: register arrays).
macro_rules! rep_pw {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7] $body)
    };
}

/// Repeats `$body` with `$u` bound to 0..2·PW.
macro_rules! rep_pwin {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15] $body)
    };
}

/// Steps per unrolled batch of [`apply_pipe`]: warp 0 loads the PD elements that enter
/// the window during the next batch at the start of this one (prefetch distance PD
/// steps, with no register move of a pending load).
const PD: usize = 8;

/// Repeats `$body` with `$u` bound to 0..PD.
macro_rules! rep_pd {
    ($u:ident $body:block) => {
        unroll!($u in [0, 1, 2, 3, 4, 5, 6, 7] $body)
    };
}

/// Most warps per block of [`apply_pipe`]: its hand-off buffer (dynamic shared memory)
/// holds 2 · warps · 32 elements.
pub const PIPE_MAX_WARPS: usize = 16;

/// Batches of PD steps' rotations a warp of [`apply_pipe`] keeps in flight: its
/// rotations reach shared memory by `cp.async` RING − 1 batches (24 steps) before they
/// are used, instead of by a global load one step ahead (issue 7: that load's L2
/// latency was most of each step).
const RING: usize = 4;

/// Elements of one warp's rotation ring: RING batches × PW chains × PD steps × (c, s).
pub const PIPE_RING_ELEMS: usize = RING * PW * PD * 2;

/// The band bound B_c (spec §1.5 G4) of a banded vector whose entries after `b0` are
/// exact zeros, at the start of chain c of a strip (s0 = h) or block (s1 = m) schedule:
/// in list order chain c applies exactly its planes a ≤ B_c, and B_{c+1} = B_c + 1 when
/// its planes lo(c) = c ..= hi(c) contain B_c, else B_c. Closed form: strip (hi(c) =
/// h + c − 1) B_c = b0 + c for b0 < h, else max(b0, h + c − 1); block (hi = m − 2)
/// B_c = min(b0 + c, m − 1) for b0 ≤ m − 2, else b0. In both cases chain c applies plane
/// a iff a ≤ B_{c'} + (c − c') for any earlier chain c' (the bound grows by at most one
/// per chain and, once it stops growing, every plane of the later chains is below it).
#[inline(always)]
fn band_at(strip: bool, s0: usize, s1: usize, b0: usize, c: usize) -> usize {
    if strip {
        if b0 < s0 {
            b0 + c
        } else {
            b0.max(s0 + c - 1)
        }
    } else if b0 + 2 <= s1 {
        (b0 + c).min(s1 - 1)
    } else {
        b0
    }
}

/// One vector of [`apply_pipe`] (issue 7: each element of the vector is loaded and
/// stored once per `nw`·PW chains). The chains (see [`apply_blocked_one`]) are taken in
/// rounds of `nw`·PW; in a round, warp `g` of the block owns chains
/// c0 = C0 + g·PW .. c0 + PW and, at wavefront step t, the 2·PW-element register window
/// w_g = A0 + 2·C0 − t + 2·PW·g .. w_g + 2·PW that those chains touch at t. The windows of
/// consecutive warps are adjacent, so the block holds one window of 2·PW·nw elements
/// that slides down one element per step: warp 0 loads the element entering at the
/// bottom (a batch of steps ahead, see below), warp g hands its top element (final for
/// its chains) to warp g + 1 through shared memory, where it is exactly the element entering
/// warp g + 1's window, and the top active warp stores it. One barrier per step (the
/// hand-off buffer is double-buffered). The step loop is unrolled in batches of PD = 8
/// steps: warp 0 loads the next batch's entering elements at the start of the current
/// one, and the rotations of step t + 1 are loaded before those of step t are applied.
/// Every element sees the same rotations in the same order as in list order, so the
/// result is bit-identical to [`apply_one`].
///
/// Banded vectors (`b` ≠ NONE; entries after b + vector index are exact zeros): chain
/// c0 + u applies its plane a iff a ≤ B_{c0} + u ([`band_at`]), elements after the
/// round's final bound are neither loaded nor stored, and the round starts at the first
/// step at which the block's largest bound (lane 31) lets any rotation through, so a column of R
/// costs steps in proportion to its height, not to the whole span.
///
/// # Safety
/// As [`apply_sched_one`]: `rot` holds the schedule's whole list; when `base` ≠ NONE the
/// elements 0..span of the vector at `base` (stride `cs`) are this thread's; the block
/// is `nw` ≤ [`PIPE_MAX_WARPS`] full warps that all call this with the same schedule,
/// `b`, `v0` (first vector of the block), and the dynamic shared memory holds
/// 2·nw·32 + nw·[`PIPE_RING_ELEMS`] elements (hand-off buffer, then one rotation ring a
/// warp), aligned to 16 bytes.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pipe_vec<T: Float>(
    rot: *const T,
    strip: bool,
    s0: usize,
    s1: usize,
    x: *mut T,
    base: usize,
    cs: usize,
    b: usize,
    v0: usize,
    lane: usize,
    g: usize,
    nw: usize,
) {
    let valid = base != NONE;
    let (nch, a0) = if strip {
        (s1, s0 as isize - 1)
    } else {
        (s0, s1 as isize - 2)
    };
    let hi = |c: usize| -> isize {
        if strip {
            (s0 + c) as isize - 1
        } else {
            s1 as isize - 2
        }
    };
    let banded = b != NONE;
    // bt: this lane's bound at chain 0; btx: the block's largest (lane 31), whose
    // rotations start earliest (band_at grows with b0): the round's first step
    let (bt, btx) = if banded {
        (b + v0 + lane, b + v0 + 31)
    } else {
        (0, 0)
    };
    let hand = device::shared::<T>();
    // this warp's rotation ring, after the hand-off buffer (2·nw·32 elements; the ring's
    // pairs stay aligned to two elements)
    let ring = hand.wrapping_add(2 * nw * 32 + g * PIPE_RING_ELEMS);
    let wb = PW as isize;
    let mut buf = 0usize;
    let mut cr = 0usize;
    while cr < nch {
        let cr1 = (cr + nw * PW).min(nch);
        let gtop = (cr1 - cr - 1) / PW;
        let act = g <= gtop;
        let c0 = cr + g * PW;
        let c1 = (c0 + PW).min(cr1);
        let e_lo = cr as isize;
        let mut e_hi = hi(cr1 - 1) + 1;
        let t_first = a0 + 2 * cr as isize - hi(cr);
        let t_last = a0 + cr1 as isize - 1;
        let mut t_start = t_first;
        let mut lim = isize::MAX / 4;
        if banded {
            e_hi = e_hi.min(band_at(strip, s0, s1, bt, cr1) as isize);
            let first = a0 + 2 * cr as isize - band_at(strip, s0, s1, btx, cr) as isize;
            t_start = t_start.max(first);
            if act {
                lim = band_at(strip, s0, s1, bt, c0) as isize;
            }
        }
        // list index of chain c0 + u's rotation on plane a: kc0 + u·dk − tri(u) − a
        // (strip: kb(c) = c·h + h + c − 1; block: kb(c) = c(m−1) − c(c−1)/2 + m − 2)
        let (kc0, dk) = if !act {
            (0isize, 0isize)
        } else if strip {
            ((c0 * s0 + s0 + c0 - 1) as isize, s0 as isize + 1)
        } else {
            (
                (c0 * (s1 - 1) - c0 * c0.saturating_sub(1) / 2 + s1 - 2) as isize,
                (s1 - 1 - c0) as isize,
            )
        };
        let in_range = |i: isize| valid && i >= e_lo && i <= e_hi;
        let mut reg = [T::ZERO; 2 * PW];
        if t_start <= t_last {
            let mut w = a0 + 2 * cr as isize - t_start + 2 * wb * g as isize;
            if act {
                rep_pwin!(u {
                    let i = w + u as isize;
                    if in_range(i) {
                        // SAFETY: 0 ≤ e_lo ≤ i ≤ e_hi < span: this thread's element.
                        reg[u] = unsafe { device::ld(x, base + i as usize * cs) };
                    }
                });
            }
            let ldg = |i: isize| -> T {
                if g == 0 && in_range(i) {
                    // SAFETY: as above.
                    unsafe { device::ld(x, base + i as usize * cs) }
                } else {
                    T::ZERO
                }
            };
            // chain c0 + u has a rotation on plane w + 2u when the window is at w
            // (lane-independent part; the band test is per lane)
            let live = |u: usize, w: isize| -> bool {
                let c = (c0 + u) as isize;
                let a = w + 2 * u as isize;
                let hic = if strip { a0 + c } else { a0 };
                act && c < c1 as isize && a >= c && a <= hic
            };
            // list index of chain c0 + u's rotation when the window is at w
            let kidx = |u: usize, w: isize| -> usize {
                let tri = if strip {
                    0
                } else {
                    (u * u.saturating_sub(1) / 2) as isize
                };
                (kc0 + u as isize * dk - tri - (w + 2 * u as isize)) as usize
            };
            // The rotation ring: step s (window w_first − s) of this round is in batch
            // s / PD, slot (s / PD) mod RING, at ((slot·PW + u)·PD + s mod PD)·2.
            let w_first = w;
            let issue = |bt: usize| {
                let (u, part) = (lane / 4, lane % 4);
                let slot = bt % RING;
                unroll!(jj in [0, 1] {
                    let si = part * 2 + jj;
                    let wv = w_first - (bt * PD + si) as isize;
                    if live(u, wv) {
                        let k = kidx(u, wv);
                        // SAFETY: chain c0 + u's rotation on plane wv + 2u is list entry
                        // k < len (rot[2k], rot[2k+1], aligned to two elements); the
                        // slot's pair belongs to this lane, and the slot is not read
                        // until this batch is waited for (see `fetch`).
                        unsafe {
                            device::cp_async_pair(
                                ring.wrapping_add(((slot * PW + u) * PD + si) * 2),
                                rot.wrapping_add(2 * k),
                            )
                        };
                    }
                });
                // SAFETY: closes this thread's group (possibly empty).
                unsafe { device::cp_async_commit() };
            };
            unroll!(bt in [0, 1, 2] {
                issue(bt);
            });
            // Steady state (issue 7): every chain of this warp's window has a rotation at
            // every step of the batch and inside the band, so the batch skips the
            // per-rotation `live` and band tests (same rotations, same order).
            // (nu = this warp's chains this round, ≤ PW; the tests below are the `live`
            // and band conditions of chain c0 + u, u < nu, at their tightest u.)
            let nu = if act { c1 - c0 } else { 0 };
            let reach = nu.max(1) as isize - 1;
            let whi_live = if strip {
                a0 + c0 as isize - reach
            } else {
                a0 - 2 * reach
            };
            let whi_fast = whi_live.min(lim - reach);
            let full = act && nu > 0;
            // loads the (c, s) of the step whose window is at w into (rc, rs); the first
            // fetch of a batch issues the batch RING − 1 ahead into the slot the last
            // batch freed (every lane read it before the step's block barrier) and
            // waits for this one
            let fetch = |rc: &mut [T; PW], rs: &mut [T; PW], w: isize, all: bool| {
                let st = (w_first - w) as usize;
                let (bt, si) = (st / PD, st % PD);
                if si == 0 {
                    issue(bt + RING - 1);
                    // SAFETY: waits for this thread's copies of batch bt (RING − 1 newer
                    // groups may stay pending); the warp barrier makes every lane's
                    // copies visible to the others (warp-uniform: st is).
                    unsafe {
                        device::cp_async_wait::<{ (RING - 1) as u32 }>();
                        device::sync_warp();
                    }
                }
                let slot = bt % RING;
                if all {
                    // Every chain of the window (u < nu) is live at w (the caller's `fast`).
                    rep_pw!(u {
                        if u < nu {
                            let o = ((slot * PW + u) * PD + si) * 2;
                            // SAFETY: written by this batch's copies, waited for above.
                            unsafe {
                                rc[u] = device::ld(ring as *const T, o);
                                rs[u] = device::ld(ring as *const T, o + 1);
                            }
                        }
                    });
                } else {
                    rep_pw!(u {
                        if live(u, w) {
                            let o = ((slot * PW + u) * PD + si) * 2;
                            // SAFETY: written by this batch's copies, waited for above.
                            unsafe {
                                rc[u] = device::ld(ring as *const T, o);
                                rs[u] = device::ld(ring as *const T, o + 1);
                            }
                        }
                    });
                }
            };
            // the elements entering warp 0's window in the current batch of PD steps
            // (cur[j] = x[w − 1 − j] at the batch's start) and the next (nxt): loaded a
            // whole batch before use, with no register move touching a pending load
            let mut cur = [T::ZERO; PD];
            let mut nxt = [T::ZERO; PD];
            if g == 0 {
                rep_pd!(j {
                    cur[j] = ldg(w - 1 - j as isize);
                });
            }
            // rotations of even (ca, sa) and odd (cb, sb) steps of a batch: the next
            // step's are loaded before this step's are applied
            let (mut ca, mut sa) = ([T::ZERO; PW], [T::ZERO; PW]);
            let (mut cb, mut sb) = ([T::ZERO; PW], [T::ZERO; PW]);
            fetch(&mut ca, &mut sa, w, false);
            let mut t = t_start;
            'steps: loop {
                let fast = full && w - PD as isize >= c0 as isize && w <= whi_fast;
                if g == 0 {
                    rep_pd!(j {
                        nxt[j] = ldg(w - 1 - (PD + j) as isize);
                    });
                }
                rep_pd!(j {
                    let (rc, rs) = if j % 2 == 0 {
                        fetch(&mut cb, &mut sb, w - 1, fast);
                        (&ca, &sa)
                    } else {
                        fetch(&mut ca, &mut sa, w - 1, fast);
                        (&cb, &sb)
                    };
                    if fast {
                        rep_pw!(u {
                            if u < nu {
                                let (xn, yn) =
                                    rot_pair(rc[u], rs[u], reg[2 * u], reg[2 * u + 1]);
                                reg[2 * u] = xn;
                                reg[2 * u + 1] = yn;
                            }
                        });
                    } else {
                        rep_pw!(u {
                            if live(u, w) && w + (u as isize) <= lim {
                                let (xn, yn) =
                                    rot_pair(rc[u], rs[u], reg[2 * u], reg[2 * u + 1]);
                                reg[2 * u] = xn;
                                reg[2 * u + 1] = yn;
                            }
                        });
                    }
                    if t >= t_last {
                        break 'steps;
                    }
                    let top = w + 2 * wb - 1;
                    if g == gtop {
                        if in_range(top) {
                            // SAFETY: this thread's element; no window holds it any more.
                            unsafe { device::st(x, base + top as usize * cs, reg[2 * PW - 1]) };
                        }
                    } else if act {
                        // SAFETY: slot (buf, g, lane) < 2·nw·32 of the dynamic shared
                        // memory; written by this thread only, read by lane `lane` of warp
                        // g + 1 after the barrier below, and not rewritten before the next
                        // barrier.
                        unsafe { device::st(hand, (buf * nw + g) * 32 + lane, reg[2 * PW - 1]) };
                    }
                    // SAFETY: every thread of the block runs the same trip count
                    // (t_start, t_last depend only on the round, the block's first vector
                    // and b).
                    unsafe { device::sync_threads() };
                    w -= 1;
                    t += 1;
                    if act {
                        unroll!(u in [15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1] {
                            reg[u] = reg[u - 1];
                        });
                        if g == 0 {
                            reg[0] = cur[j];
                        } else {
                            // SAFETY: written by lane `lane` of warp g − 1 before the
                            // barrier.
                            reg[0] = unsafe { device::ld(hand, (buf * nw + g - 1) * 32 + lane) };
                        }
                    }
                    buf ^= 1;
                });
                cur = nxt;
            }
            if act {
                rep_pwin!(u {
                    let i = w + u as isize;
                    if in_range(i) {
                        // SAFETY: this thread's element; the windows are disjoint.
                        unsafe { device::st(x, base + i as usize * cs, reg[u]) };
                    }
                });
            }
        }
        // SAFETY: no copy of this round stays in flight into the ring (batches issued
        // past the round's last step land before the next round reuses the slots).
        unsafe { device::cp_async_wait_all() };
        // SAFETY: uniform (once per round); orders this round's global stores before the
        // next round's loads by other warps, and the hand-off buffer's reuse.
        unsafe { device::sync_threads() };
        cr = cr1;
    }
}

/// `two_phase_apply_pipe`: like [`apply_sched`] (same arguments; three targets,
/// blockIdx.y = g) for a strip (sched 1) or block (sched 2) list, all targets — banded
/// ones included — through the block-pipelined register window of [`pipe_vec`]: block
/// x covers vectors 32·x .. 32·x + 32 of its target (lane = vector), its warps split the
/// chains, and each element is read and written once per (warps·8) chains.
/// Grid (⌈max n_g/32⌉, 3), block 32·nw (nw ≤ [`PIPE_MAX_WARPS`]), dynamic shared memory
/// (2·nw·32 + nw·[`PIPE_RING_ELEMS`])·size_of::<T>() bytes. Each warp's rotations come
/// through its ring by `cp.async`, RING − 1 batches of PD steps ahead.
///
/// # Safety
/// As [`apply_sched`], with the launch shape above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply_pipe<T: Float>(
    rot: *const T,
    sched: usize,
    s0: usize,
    s1: usize,
    x0: *mut T,
    rs0: usize,
    cs0: usize,
    n0: usize,
    b0: usize,
    x1: *mut T,
    rs1: usize,
    cs1: usize,
    n1: usize,
    b1: usize,
    x2: *mut T,
    rs2: usize,
    cs2: usize,
    n2: usize,
    b2: usize,
) {
    let (x, rs, cs, n, b) = match device::block_y() {
        0 => (x0, rs0, cs0, n0, b0),
        1 => (x1, rs1, cs1, n1, b1),
        _ => (x2, rs2, cs2, n2, b2),
    };
    let v0 = device::block_x() * 32;
    // block-uniform exits only: the warps of a block meet at barriers
    if v0 >= n || s0 == 0 || s1 == 0 || (sched == 2 && s0 >= s1) {
        return;
    }
    let (lane, g, nw) = (
        device::thread_x() % 32,
        device::thread_x() / 32,
        device::block_dim_x() / 32,
    );
    let t = v0 + lane;
    let base = if t < n { t * rs } else { NONE };
    // SAFETY: forwarded from the entry's contract; vector t belongs to lane `lane` of
    // every warp of this block, and only the warp whose window holds an element
    // touches it.
    unsafe { pipe_vec(rot, sched == 1, s0, s1, x, base, cs, b, v0, lane, g, nw) };
}

// ------------------------------------------------------------------ pipelined generate

/// Columns per thread of [`gen_rank_one_b_pipe`] (its registers: 5 per column).
pub const R1_PIPE_CPT: usize = 12;

/// Row slots per column of [`gen_rank_one_b_pipe`]: row r of a column lives in slot
/// r mod 4 and is loaded four steps before the step that applies it.
const R1_RING: usize = 4;

/// Repeats `$body` with `$k` bound to 0..CPT (≤ R1_PIPE_CPT; `CPT` is the const generic
/// of the function it is used in, so the bodies for k ≥ CPT are compiled away).
macro_rules! rep_cpt {
    ($k:ident $body:block) => {
        unroll!($k in [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11] {
            if $k < CPT {
                $body
            }
        })
    };
}

/// Columns per thread of the small stage B variant (`two_phase_gen_rank_one_b_pipe2`):
/// the twelve-column kernel's unrolled code (255 registers) stalled on instruction fetch
/// at n = 500 (issue 7, Nsight Compute on the H100); two columns a thread keep it short.
pub const R1_PIPE2_CPT: usize = 2;

/// [`gen_rank_one_b_pipe`] with [`R1_PIPE_CPT`] columns a thread (n ≤ 12·block).
///
/// # Safety
/// As [`gen_rank_one_b_pipe`] with CPT = [`R1_PIPE_CPT`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_rank_one_b_pipe12<T: Float>(
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
    // SAFETY: forwarded.
    unsafe { gen_rank_one_b_pipe::<T, R1_PIPE_CPT>(r, ldr, m, n, w, v, rot, plane, k_off) }
}

/// [`gen_rank_one_b_pipe`] with [`R1_PIPE2_CPT`] columns a thread (n ≤ 2·block).
///
/// # Safety
/// As [`gen_rank_one_b_pipe`] with CPT = [`R1_PIPE2_CPT`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_rank_one_b_pipe2<T: Float>(
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
    // SAFETY: forwarded.
    unsafe { gen_rank_one_b_pipe::<T, R1_PIPE2_CPT>(r, ldr, m, n, w, v, rot, plane, k_off) }
}

/// `two_phase_gen_rank_one_b_pipe` (issue 7): R(0, :) += w(0)·vᵀ, then stage B of spec
/// §1.11 on the upper Hessenberg R (m×n, ld ldr), with the same rotations, records and
/// results as [`gen_rank_one_b`] bit for bit, but pipelined with one barrier a step and
/// the chain in registers. Thread `tid` owns columns j = tid + k·nt (k < CPT ≤ R1_PIPE_CPT) and
/// keeps each column's running element (the row the next rotation's upper half lands
/// on) in a register. Step s = 0..=nb (nb = min(n, m−1)): every column j ≥ s applies
/// rotation s−1 (read from shared memory) to (running element, R(s, j)), stores the
/// upper result to R(s−1, j) and keeps the lower; the owner of column s (column s is
/// its first live one) then makes rotation s from (running, R(s+1, s)) with `givens`,
/// writes ρ and the exact zero, records it at k_off + s (plane s) and puts (c, s) into
/// shared-memory buffer s & 1; one `__syncthreads`. Row r of each column is loaded into
/// register slot r mod 4 right after step r − 4 frees the slot (rows do not depend on
/// the chain: row r of column j is first written at step r − 1 or later). Columns
/// j ≥ nb end with their running element stored to R(nb, j). Grid 1, block `nt` with
/// n ≤ nt·CPT, dynamic shared memory 4·size_of::<T>().
///
/// # Safety
/// As [`gen_rank_one_b`], plus CPT ≤ [`R1_PIPE_CPT`], n ≤ block size · CPT and the dynamic shared
/// memory above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_rank_one_b_pipe<T: Float, const CPT: usize>(
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
    let nb = n.min(m.saturating_sub(1));
    // 32-bit element offsets (the host launches this kernel only for ldr·n < 2³²)
    let at = |row: usize, j: usize| (row as u32 + j as u32 * ldr as u32) as usize;
    let rs = device::shared::<T>();
    // SAFETY: w[0] readable.
    let w0 = unsafe { device::ld(w, 0) };
    let mut cur = [T::ZERO; R1_PIPE_CPT];
    // q[x][k] = R(row, j_k) for the next row ≡ x (mod 4) that column k needs
    let mut q = [[T::ZERO; R1_PIPE_CPT]; R1_RING];
    rep_cpt!(k {
        let j = tid + k * nt;
        if j < n {
            // SAFETY: row 0 of column j < n and v[j]; column j is this thread's alone.
            unsafe { cur[k] = w0.mul_add(device::ld(v, j), device::ld(r, at(0, j))) };
            unroll!(e in [1, 2, 3] {
                if e <= nb && j + 1 >= e {
                    // SAFETY: row e ≤ nb < m of column j < n.
                    unsafe { q[e][k] = device::ld(r, at(e, j)) };
                }
            });
        }
    });
    let mut s0 = 0usize;
    while s0 <= nb {
        unroll!(e in [0, 1, 2, 3] {
            let s = s0 + e;
            if s <= nb {
                let (c, sn) = if s >= 1 {
                    let b = 2 * ((s - 1) & 1);
                    // SAFETY: buffer (s−1) & 1 was written at step s−1, before the
                    // barrier; it is rewritten at step s+1, after the next barrier.
                    unsafe { (device::ld(rs, b), device::ld(rs, b + 1)) }
                } else {
                    (T::ZERO, T::ZERO)
                };
                let (mut own, mut fo, mut go) = (false, T::ZERO, T::ZERO);
                rep_cpt!(k {
                    let j = tid + k * nt;
                    if j < n && j >= s {
                        if s >= 1 {
                            let (a, b) = rot_pair(c, sn, cur[k], q[e][k]);
                            // SAFETY: row s−1 < m of column j, this thread's.
                            unsafe { device::st(r, at(s - 1, j), a) };
                            cur[k] = b;
                        }
                        if j == s && s < nb {
                            // the owner of column s makes rotation s after the loop
                            own = true;
                            fo = cur[k];
                            go = q[(e + 1) % R1_RING][k];
                        }
                    }
                    // slot e is free: row s + 4 (needed at steps s + 3 and s + 4)
                    let row = s + R1_RING;
                    if j < n && row <= nb && j + 1 >= row {
                        // SAFETY: row ≤ nb < m of column j < n; nobody writes it before
                        // step row − 1 > s.
                        unsafe { q[e][k] = device::ld(r, at(row, j)) };
                    }
                });
                if own {
                    // One `givens` a step, outside the column loop (inlined once rather
                    // than CPT times: the twelve-column kernel's code and spills grew
                    // with each copy, issue 7).
                    let (gc, gs, rho) = givens(fo, go);
                    // SAFETY: (s, s), (s+1, s) inside R (s+1 ≤ nb < m, s < n), column s
                    // is this thread's; list index k_off + s is in the list; buffer
                    // s & 1 is read by no one during this step.
                    unsafe {
                        device::st(r, at(s, s), rho);
                        device::st(r, at(s + 1, s), T::ZERO);
                        record(rot, plane, k_off + s, gc, gs, s);
                        device::st(rs, 2 * (s & 1), gc);
                        device::st(rs, 2 * (s & 1) + 1, gs);
                    }
                }
                // SAFETY: s and nb are uniform over the block.
                unsafe { device::sync_threads() };
            }
        });
        s0 += R1_RING;
    }
    rep_cpt!(k {
        let j = tid + k * nt;
        if j < n && j >= nb {
            // SAFETY: row nb < m of column j < n, this thread's.
            unsafe { device::st(r, at(nb, j), cur[k]) };
        }
    });
}

/// The strip (spec §1.7 step 3) or block (§1.10) wavefront of [`gen_strip`] /
/// [`gen_block`] as chains: chain c (strip: driver column j; block: row i of Z) makes
/// its rotations on the element planes (a, a+1) for a = hi(c) down to c, rotation
/// (c, a) at step t = A0 + 2c − a (strip: A0 = h − 1, hi(c) = A0 + c; block: A0 = m − 2,
/// hi(c) = A0), recorded at kb(c) − a with plane a (strip: kb(c) = c·h + h + c − 1;
/// block: kb(c) = c(m−1) − c(c−1)/2 + m − 2), and applied to the same plane of every
/// later chain. Element e of chain c is `x[c·cst + e·est]` (shared or global memory).
///
/// One barrier per step (issue 7). The last change to the pair (a, a+1) of chain c
/// before its rotation at step t is chain c−1's rotation (c−1, a−1) of step t−1 (the
/// lower element; the upper one is ρ of chain c's own rotation at t−1, or original):
/// so at step t the thread that applies rotation (c−1, a−1) to chain c (the *lead*
/// item) goes on to make rotation (c, a) from the values in its registers; chain 0's
/// rotations are made by the last thread. The other items of step t−1's rotations
/// (chains c' + 2 .. nch) touch planes at least two below any pair a lead or maker uses,
/// so they run in the same interval; rotations go through shared memory `rbuf`
/// (buffer t & 1, slot per chain). Every element sees the same rotations in the same
/// order as in [`gen_strip`] / [`gen_block`], so the list and the driver are bit-identical.
///
/// # Safety
/// Every thread of the block calls it with the same arguments; the elements of chains
/// 0..nch at planes 0..=max hi + 1 are read-writable through `x` by this block alone;
/// `rbuf` is 4·nch elements of shared memory; `rot`/`plane` hold the whole list;
/// nch < 2³².
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn wave_pipe<T: Float>(
    strip: bool,
    len: usize,
    nch: usize,
    x: *mut T,
    cst: usize,
    est: usize,
    rbuf: *mut T,
    rot: *mut T,
    plane: *mut u32,
) {
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let a0 = if strip { len - 1 } else { len - 2 };
    let hi = |c: usize| if strip { a0 + c } else { a0 };
    let kb = |c: usize| {
        if strip {
            c * len + len + c - 1
        } else {
            c * (len - 1) - c * c.saturating_sub(1) / 2 + len - 2
        }
    };
    let range = |t: usize| {
        let lo = t.saturating_sub(a0);
        let top = if strip { t } else { t / 2 };
        (lo, top.min(nch - 1))
    };
    let steps = if strip { len + nch - 1 } else { len + nch - 2 };
    let el = |c: usize, e: usize| c * cst + e * est;
    for t in 0..=steps {
        let cur = t & 1;
        let prev = cur ^ 1;
        if t >= 1 {
            // lead items: rotation (c', a') of step t−1 on chain c'+1, then its rotation
            let (plo, phi) = range(t - 1);
            let mut cp = plo + tid;
            // (an empty range has plo > phi: no iteration)
            while cp <= phi {
                let cn = cp + 1;
                if cn < nch {
                    let ap = a0 + 2 * cp - (t - 1);
                    let make = ap < hi(cn);
                    // SAFETY: slot cp of buffer `prev` was written at step t−1 before the
                    // barrier; elements ap, ap+1 (and ap+2 when chain cn makes a rotation:
                    // ap+2 ≤ hi(cn)+1) of chain cn are this item's alone in this step
                    // (see the function's doc); list index kb(cn) − (ap+1) is chain cn's
                    // rotation on plane ap+1; slot cn of buffer `cur` has one writer.
                    unsafe {
                        let c = device::ld(rbuf, 2 * (prev * nch + cp));
                        let s = device::ld(rbuf, 2 * (prev * nch + cp) + 1);
                        let (eu, elo) = (el(cn, ap), el(cn, ap + 1));
                        let (u, l) = (device::ld(x, eu), device::ld(x, elo));
                        let g = if make {
                            device::ld(x, el(cn, ap + 2))
                        } else {
                            T::ZERO
                        };
                        let (xa, xb) = rot_pair(c, s, u, l);
                        device::st(x, eu, xa);
                        if make {
                            let (gc, gs, rho) = givens(xb, g);
                            device::st(x, elo, rho);
                            device::st(x, el(cn, ap + 2), T::ZERO);
                            record(rot, plane, kb(cn) - (ap + 1), gc, gs, ap + 1);
                            device::st(rbuf, 2 * (cur * nch + cn), gc);
                            device::st(rbuf, 2 * (cur * nch + cn) + 1, gs);
                        } else {
                            device::st(x, elo, xb);
                        }
                    }
                }
                cp += nt;
            }
        }
        if t < steps && t <= a0 && tid == nt - 1 {
            // chain 0's rotation at plane a = a0 − t
            let a = a0 - t;
            // SAFETY: elements a, a+1 ≤ hi(0)+1 of chain 0 are touched by no other item
            // of this step; list index kb(0) − a; slot 0 of buffer `cur` has one writer.
            unsafe {
                let (f, g) = (device::ld(x, el(0, a)), device::ld(x, el(0, a + 1)));
                let (gc, gs, rho) = givens(f, g);
                device::st(x, el(0, a), rho);
                device::st(x, el(0, a + 1), T::ZERO);
                record(rot, plane, kb(0) - a, gc, gs, a);
                device::st(rbuf, 2 * (cur * nch), gc);
                device::st(rbuf, 2 * (cur * nch) + 1, gs);
            }
        }
        if t >= 1 {
            // the other items: rotation (c', a') of step t−1 on chains c'+2 .. nch
            let (plo, phi) = range(t - 1);
            if plo <= phi && plo + 2 < nch {
                let na = (phi + 1 - plo) as u32;
                let depth = (nch - plo - 2) as u32;
                let total = na * depth;
                let mut idx = tid as u32;
                while idx < total {
                    let k = idx / depth;
                    let d = idx - k * depth;
                    let cp = plo + k as usize;
                    let cq = cp + 2 + d as usize;
                    if cq < nch {
                        let ap = a0 + 2 * cp - (t - 1);
                        // SAFETY: as for the lead items; planes (ap, ap+1) of chain cq are
                        // touched by this item alone in this step.
                        unsafe {
                            let c = device::ld(rbuf, 2 * (prev * nch + cp));
                            let s = device::ld(rbuf, 2 * (prev * nch + cp) + 1);
                            let (eu, elo) = (el(cq, ap), el(cq, ap + 1));
                            let (xa, xb) = rot_pair(c, s, device::ld(x, eu), device::ld(x, elo));
                            device::st(x, eu, xa);
                            device::st(x, elo, xb);
                        }
                    }
                    idx += nt as u32;
                }
            }
        }
        // SAFETY: t and the loop bounds are uniform over the block.
        unsafe { device::sync_threads() };
    }
}

/// `two_phase_gen_strip_pipe` (issue 7): the strip wavefront of [`gen_strip`] (same
/// arguments, rotations, list and driver results, bit for bit) with one barrier a step
/// ([`wave_pipe`]). With `in_smem` ≠ 0 the driver block is first copied into shared
/// memory (element (r, j) at j + r·p), run there and copied back; otherwise it runs in
/// place in global memory. Grid 1, dynamic shared memory (4·p + in_smem·(h+p)·p)·
/// size_of::<T>() bytes.
///
/// # Safety
/// As [`gen_strip`], plus the dynamic shared memory above; p < 2³².
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_strip_pipe<T: Float>(
    x: *mut T,
    ld: usize,
    h: usize,
    p: usize,
    rot: *mut T,
    plane: *mut u32,
    in_smem: usize,
) {
    if h == 0 || p == 0 {
        return;
    }
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let sm = device::shared::<T>();
    let rows = h + p;
    if in_smem != 0 {
        // SAFETY: the shared memory holds 4p + rows·p elements (caller's contract);
        // (r, j) inside the driver; one writer per element.
        let d = unsafe { sm.add(4 * p) };
        let mut idx = tid;
        while idx < rows * p {
            let (r, j) = (idx % rows, idx / rows);
            // SAFETY: as above.
            unsafe { device::st(d, j + r * p, device::ld(x, r + j * ld)) };
            idx += nt;
        }
        // SAFETY: uniform.
        unsafe { device::sync_threads() };
        // SAFETY: the driver lives in shared memory, read-writable by this block alone.
        unsafe { wave_pipe(true, h, p, d, 1, p, sm, rot, plane) };
        let mut idx = tid;
        while idx < rows * p {
            let (r, j) = (idx % rows, idx / rows);
            // SAFETY: as above; the last barrier of wave_pipe ordered every write.
            unsafe { device::st(x, r + j * ld, device::ld(d, j + r * p)) };
            idx += nt;
        }
    } else {
        // SAFETY: the driver in global memory, this block's alone (caller's contract).
        unsafe { wave_pipe(true, h, p, x, ld, 1, sm, rot, plane) };
    }
}

/// `two_phase_gen_block_pipe` (issue 7): the block wavefront of [`gen_block`] (same
/// arguments; same rotations, list and final compact Z in `z`, bit for bit) with one
/// barrier a step ([`wave_pipe`]). With `in_smem` ≠ 0, Z is gathered into shared memory
/// (compact, ld p), run there and copied to `z` at the end; otherwise it is gathered
/// into `z` and run there. Grid 1, dynamic shared memory (4·p + in_smem·p·m)·
/// size_of::<T>() bytes.
///
/// # Safety
/// As [`gen_block`], plus the dynamic shared memory above; p < 2³².
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_block_pipe<T: Float>(
    qz: *const T,
    ldq: usize,
    p: usize,
    m: usize,
    z: *mut T,
    rot: *mut T,
    plane: *mut u32,
    in_smem: usize,
) {
    if p == 0 || m < 2 || p >= m {
        return;
    }
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let sm = device::shared::<T>();
    // SAFETY: the shared memory holds 4p + in_smem·p·m elements.
    let d = if in_smem != 0 {
        unsafe { sm.add(4 * p) }
    } else {
        z
    };
    let mut idx = tid;
    while idx < p * m {
        let (i, j) = (idx % p, idx / p);
        // SAFETY: i < p, j < m: inside Z and the driver copy; one writer per idx.
        unsafe { device::st(d, idx, device::ld(qz, i + j * ldq)) };
        idx += nt;
    }
    // SAFETY: uniform.
    unsafe { device::sync_threads() };
    // SAFETY: the compact driver (chain i = row i, stride 1; element j, stride p) is this
    // block's alone. Two call sites, so that the shared-memory one addresses shared
    // memory directly.
    if in_smem != 0 {
        unsafe { wave_pipe(false, m, p, sm.add(4 * p), 1, p, sm, rot, plane) };
    } else {
        unsafe { wave_pipe(false, m, p, z, 1, p, sm, rot, plane) };
    }
    if in_smem != 0 {
        let mut idx = tid;
        while idx < p * m {
            // SAFETY: inside both; the last barrier of wave_pipe ordered every write.
            unsafe { device::st(z, idx, device::ld(d, idx)) };
            idx += nt;
        }
    }
}

/// One vector of [`apply_sweep`]: the descending sweep (planes down−1 … 0, list entries
/// 0..down, entry i on plane down−1−i) then the ascending one (planes 0 … up−1, entries
/// down..down+up), exactly as [`apply_one`] streams such a list (same `rot_pair` on the
/// same pairs in the same order, so bit-identical), but with the next eight elements and
/// rotations loaded a batch ahead: in a sweep the addresses do not depend on the data.
/// `bottom` ≠ NONE (banded, `up` = 0): planes above `bottom` are skipped (their pairs are
/// exact zeros).
///
/// # Safety
/// Elements 0..=max(down, up) (0..=min(down−1, bottom)+1 when banded) of the vector at
/// `base` (stride `cs`) are this thread's; `rot` holds 2·(down + up) entries.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn sweep_one<T: Float>(
    rot: *const T,
    down: usize,
    up: usize,
    x: *mut T,
    base: usize,
    cs: usize,
    bottom: usize,
) {
    let at = |a: usize| base + a * cs;
    // SAFETY (whole body): every index is an element of this vector (caller's contract)
    // or a list entry < down + up.
    unsafe {
        let mut held;
        if down > 0 {
            let first = if bottom == NONE {
                down - 1
            } else {
                (down - 1).min(bottom)
            };
            held = device::ld(x, at(first + 1));
            // entries of planes first − 8b − u: element, c and s (cur batch, next batch)
            let (mut nx, mut nc, mut ns) = ([T::ZERO; 8], [T::ZERO; 8], [T::ZERO; 8]);
            let mut next = first as isize;
            rep8!(u {
                let a = next - u as isize;
                if a >= 0 {
                    let i = down - 1 - a as usize;
                    nx[u] = device::ld(x, at(a as usize));
                    nc[u] = device::ld(rot, 2 * i);
                    ns[u] = device::ld(rot, 2 * i + 1);
                }
            });
            while next >= 0 {
                let (bx, bc, bs) = (nx, nc, ns);
                rep8!(u {
                    let a = next - 8 - u as isize;
                    if a >= 0 {
                        let i = down - 1 - a as usize;
                        nx[u] = device::ld(x, at(a as usize));
                        nc[u] = device::ld(rot, 2 * i);
                        ns[u] = device::ld(rot, 2 * i + 1);
                    }
                });
                rep8!(u {
                    let a = next - u as isize;
                    if a >= 0 {
                        let (xn, yn) = rot_pair(bc[u], bs[u], bx[u], held);
                        device::st(x, at(a as usize + 1), yn);
                        held = xn;
                    }
                });
                next -= 8;
            }
        } else {
            held = device::ld(x, at(0));
        }
        if up == 0 {
            device::st(x, at(0), held);
            return;
        }
        // ascending: planes a = 8b + u, entries down + a
        let (mut nx, mut nc, mut ns) = ([T::ZERO; 8], [T::ZERO; 8], [T::ZERO; 8]);
        rep8!(u {
            if u < up {
                nx[u] = device::ld(x, at(u + 1));
                nc[u] = device::ld(rot, 2 * (down + u));
                ns[u] = device::ld(rot, 2 * (down + u) + 1);
            }
        });
        let mut a0 = 0usize;
        while a0 < up {
            let (bx, bc, bs) = (nx, nc, ns);
            rep8!(u {
                let a = a0 + 8 + u;
                if a < up {
                    nx[u] = device::ld(x, at(a + 1));
                    nc[u] = device::ld(rot, 2 * (down + a));
                    ns[u] = device::ld(rot, 2 * (down + a) + 1);
                }
            });
            rep8!(u {
                let a = a0 + u;
                if a < up {
                    let (xn, yn) = rot_pair(bc[u], bs[u], held, bx[u]);
                    device::st(x, at(a), xn);
                    held = yn;
                }
            });
            a0 += 8;
        }
        device::st(x, at(up), held);
    }
}

/// `two_phase_apply_sweep` (issue 7): applies a rank-one list — `down` rotations on
/// planes down−1, …, 0 (stage A, spec §1.11) followed by `up` on planes 0, …, up−1
/// (stage B) — to up to three targets (blockIdx.y = g; vector t < n_g is
/// x_g[t·rs_g + k·cs_g], as [`apply`]), bit-identical to [`apply`] on the same list, with
/// elements and rotations loaded eight entries ahead ([`sweep_one`]). b_g ≠ usize::MAX
/// (banded: entries after b_g + t are exact zeros) needs `up` = 0. Grid
/// (⌈max n_g/128⌉, 3), block 128 (any block size).
///
/// # Safety
/// As [`apply`] for the list `rot` of down + up entries with those planes; banded
/// targets only with up = 0.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply_sweep<T: Float>(
    rot: *const T,
    down: usize,
    up: usize,
    x0: *mut T,
    rs0: usize,
    cs0: usize,
    n0: usize,
    b0: usize,
    x1: *mut T,
    rs1: usize,
    cs1: usize,
    n1: usize,
    b1: usize,
    x2: *mut T,
    rs2: usize,
    cs2: usize,
    n2: usize,
    b2: usize,
) {
    let (x, rs, cs, n, b) = match device::block_y() {
        0 => (x0, rs0, cs0, n0, b0),
        1 => (x1, rs1, cs1, n1, b1),
        _ => (x2, rs2, cs2, n2, b2),
    };
    let t = device::block_x() * device::block_dim_x() + device::thread_x();
    if t >= n || down + up == 0 {
        return;
    }
    let bottom = if b == NONE { NONE } else { b + t };
    // SAFETY: forwarded from the entry's contract; vector t belongs to this thread.
    unsafe { sweep_one(rot, down, up, x, t * rs, cs, bottom) };
}

/// Most threads a block of [`gen_chains`] (the xtask gives the kernel `.maxntid 256`).
pub const CHAIN_MAX_THREADS: usize = 256;

/// Elements a thread of [`gen_chains`] loads before it works on them (`rep8!`).
const CHAIN_BATCH: usize = 8;

/// Shared-memory scratch of [`gen_chains`] ahead of its vector, in `T`s: the warps'
/// (a, b) maps (2 × 8) and the block reductions' 32 slots.
pub const CHAIN_SCRATCH: usize = 48;

/// Block scan helper of [`gen_chains`]: with `(a, b)` thread t's affine map t_in ↦ a +
/// b·t_in, returns the composition M_{t+1} ∘ … ∘ M_{nt−1} of the maps of the threads
/// after it applied to 0 (the last thread: 0). With a constant map (b = 0) at the last
/// active thread and identities after it, that is the running value entering thread
/// t's chunk from above. `maps` holds 2·8 `T`s of shared memory.
///
/// # Safety
/// Every thread of the block calls it (full warps, at most 8).
#[inline(always)]
unsafe fn chain_scan_from_above<T: Float>(maps: *mut T, a: T, b: T) -> T {
    let tid = device::thread_linear();
    let (lane, warp, nw) = (tid % 32, tid / 32, device::block_threads() / 32);
    let (mut a, mut b) = (a, b);
    let mut d = 1u32;
    while d < 32 {
        // SAFETY: every lane runs the loop the same number of times (caller's contract).
        let (ao, bo) = unsafe { (a.shfl_down(d), b.shfl_down(d)) };
        if lane + (d as usize) < 32 {
            a = b.mul_add(ao, a);
            b = b.mul(bo);
        }
        d *= 2;
    }
    // The maps of the lanes after this one within the warp (identity after lane 31).
    // SAFETY: as above.
    let (an, bn) = unsafe { (a.shfl_down(1), b.shfl_down(1)) };
    let (an, bn) = if lane < 31 { (an, bn) } else { (T::ZERO, T::ONE) };
    if lane == 0 {
        // SAFETY: slots 2·warp, 2·warp + 1 < 16 (nw ≤ 8), one writer each.
        unsafe {
            device::st(maps, 2 * warp, a);
            device::st(maps, 2 * warp + 1, b);
        }
    }
    // SAFETY: block-uniform barrier (caller's contract).
    unsafe { device::sync_threads() };
    // The value entering this warp from the warps after it.
    let mut t = T::ZERO;
    let mut k = nw;
    while k > warp + 1 {
        k -= 1;
        // SAFETY: written before the barrier above.
        let (ak, bk) = unsafe { (device::ld(maps, 2 * k), device::ld(maps, 2 * k + 1)) };
        t = bk.mul_add(t, ak);
    }
    // SAFETY: block-uniform barrier: every read of `maps` is done before its next use.
    unsafe { device::sync_threads() };
    bn.mul_add(t, an)
}

/// `two_phase_gen_chains`: the strip (spec §1.7 step 3) and block (§1.10) generates as
/// `p` chains of scans instead of a wavefront (issue 7). Chain c zeroes its vector v_c
/// (elements c..=hi_c, hi_c = hi0 + inc·c, inc ∈ {0, 1}) from the bottom with planes
/// (r−1, r), r = hi_c down to c+1; those rotations also act on the vectors after it. The
/// wavefront orders the same rotations by steps; here block c mod G owns vector c, applies
/// chains 0..c to it as they are published and then makes chain c at once:
///
/// * **apply** chain k to v over [k, hi_k] (t_{hi_k} = v(hi_k); t_{r−1} = c·v(r−1) +
///   s·t_r, v(r) := c·t_r − s·v(r−1), v(k) := t_k): each thread composes its chunk's
///   affine map t_in ↦ a + b·t_in, a block scan of the maps gives every chunk its
///   incoming running value, and each thread then walks its chunk (`rot_pair`);
/// * **make** chain c as `gen_rank_one_a` does for w: every rotation from (v(r−1),
///   ‖v(r..=hi_c)‖) with scaled suffix sums of squares (g = v(hi_c) itself for the first,
///   as in the chain); v(c) := ρ, v(c+1..=hi_c) := 0 exactly.
///
/// The rotations equal the serial chain's up to rounding (the chain takes each ρ from the
/// previous rotation; here from a sum); tests compare the effect with the CPU. Chain c is
/// recorded at list index base_c + (hi_c − r) with plane r − 1, base_c = c·hi0 − (1 −
/// inc)·c(c−1)/2 (the step kernels' order). Vector c is read from `src` (element e at
/// c·src_vs + e·src_es) and its final values are written to `dst` likewise; the strip
/// passes the driver block twice (in place), the block case Q's rows and the compact Z.
/// A published chain is its list entries, a block barrier, then `flags[c] = set`
/// (release at GPU scope by thread 0); a consumer's thread 0 acquires the flag before a
/// block barrier, and the list is read through L2 (`ld.global.cg`). Vector c lives in
/// shared memory after [`CHAIN_SCRATCH`] scratch elements; thread t owns elements
/// t·chunk .. (t+1)·chunk.
///
/// # Safety
/// G ≥ 1 blocks (G ≤ p; block b makes chains b, b + G, …) of 32·w threads (1 ≤ w ≤ 8),
/// all co-resident (a block waits for lower chains; the host launches cooperatively);
/// dynamic shared memory (CHAIN_SCRATCH +
/// 32·w·chunk)·size_of::<T>() with 32·w·chunk ≥ hi_{p−1} + 1; `src` readable and `dst`
/// writable at every vector's elements 0..=hi_c (both may be the same memory, which no
/// one else touches); `rot` writable for 2·base_p, `plane` for base_p; `flags` p `u32`s,
/// none equal to `set`, written only by this launch; no other overlap; hi_c ≥ c + 1 for
/// every chain.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gen_chains<T: Pow2>(
    src: *const T,
    src_vs: usize,
    src_es: usize,
    dst: *mut T,
    dst_vs: usize,
    dst_es: usize,
    p: usize,
    hi0: usize,
    inc: usize,
    chunk: usize,
    rot: *mut T,
    plane: *mut u32,
    flags: *mut u32,
    set: u32,
) {
    let (tid, nt) = (device::thread_linear(), device::block_threads());
    let maps = device::shared::<T>();
    // SAFETY: the vector's slab after the scratch (the contract's size).
    let s = unsafe { maps.add(CHAIN_SCRATCH) };
    // Block b makes chains b, b + G, b + 2G, … (G = gridDim.x) in order: the lowest
    // unfinished chain always belongs to a resident block whose own earlier chains are
    // done, and it waits only for lower chains, so the launch cannot deadlock with fewer
    // blocks than chains.
    let mut v = device::block_x();
    while v < p {
        // block-uniform loop
        // SAFETY: this function's contract, for chain v (< p) of this block.
        unsafe {
            gen_chain_one(
                v, tid, nt, maps, s, src, src_vs, src_es, dst, dst_vs, dst_es, hi0, inc, chunk,
                rot, plane, flags, set,
            )
        };
        // SAFETY: block-uniform barrier: every thread's copy-out reads of the slab are
        // done before the next chain's load overwrites it.
        unsafe { device::sync_threads() };
        v += device::grid_dim_x();
    }
}

/// Chain v of [`gen_chains`] (wait for chains 0..v, apply them to vector v, make and
/// publish chain v, write vector v out), out of line so that the persistent loop does
/// not keep one chain's registers live into the next.
///
/// # Safety
/// [`gen_chains`]'s contract, called by every thread of the block with its `tid`, the
/// block's `nt` threads, `maps` = the dynamic shared memory and `s` = maps + CHAIN_SCRATCH.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
unsafe fn gen_chain_one<T: Pow2>(
    v: usize,
    tid: usize,
    nt: usize,
    maps: *mut T,
    s: *mut T,
    src: *const T,
    src_vs: usize,
    src_es: usize,
    dst: *mut T,
    dst_vs: usize,
    dst_es: usize,
    hi0: usize,
    inc: usize,
    chunk: usize,
    rot: *mut T,
    plane: *mut u32,
    flags: *mut u32,
    set: u32,
) {
    let hi_v = hi0 + inc * v;
    let mut i = tid;
    while i <= hi_v {
        // SAFETY: i ≤ hi_v < 32·w·chunk (slab); src readable at vector v's elements.
        unsafe { device::st(s, i, device::ld(src, v * src_vs + i * src_es)) };
        i += nt;
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    let (lo, up) = (tid * chunk, (tid + 1) * chunk);
    // The slab's element i. SAFETY (of every use): i ≤ hi_v < 32·w·chunk; a thread
    // writes only its own chunk, and reads another thread's element (the one below its
    // chunk, or v(hi)) only between two block barriers in which no thread writes it.
    let u_at = |i: usize| unsafe { device::ld(s as *const T, i) };
    let u_set = |i: usize, x: T| unsafe { device::st(s, i, x) };
    let base = |k: usize| k * hi0 - (1 - inc) * (k * k.saturating_sub(1) / 2);
    for k in 0..v {
        // Wait for chain k: thread 0 acquires its flag, the barrier passes it on.
        if tid == 0 {
            // SAFETY: flags[k] is a valid u32 (k < p).
            while unsafe { device::ld_acquire_u32(flags.wrapping_add(k)) } != set {}
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        let hi_k = hi0 + inc * k;
        let (a0, b0) = (lo.max(k), up.min(hi_k + 1));
        let active = a0 < b0;
        let top = active && b0 == hi_k + 1;
        let bk = base(k);
        // Rotation r of chain k (plane r−1, r), k < r ≤ hi_k, read through L2.
        let rot_at = |r: usize| {
            let idx = bk + (hi_k - r);
            // SAFETY: idx < base_{k+1} ≤ base_p: published by chain k (acquired above,
            // never written again in this launch); aligned elements of `rot`.
            unsafe { (T::ld_cg(rot.wrapping_add(2 * idx)), T::ld_cg(rot.wrapping_add(2 * idx + 1))) }
        };
        // Rotations r, r−1, …, r−7 and the elements below them, loaded before use.
        let batch_at = |r: usize| {
            let (mut cb, mut sb, mut ub) = ([T::ZERO; 8], [T::ZERO; 8], [T::ZERO; 8]);
            rep8!(q {
                (cb[q], sb[q]) = rot_at(r - q);
                ub[q] = u_at(r - q - 1);
            });
            (cb, sb, ub)
        };
        // Pass 1: this chunk's map t_{b0} ↦ t_{a0}.
        let (mut ma, mut mb) = (T::ZERO, T::ONE);
        if active {
            if top {
                ma = u_at(hi_k);
                mb = T::ZERO;
            } else {
                let (c, sn) = rot_at(b0);
                ma = c.mul(u_at(b0 - 1));
                mb = sn;
            }
            let mut r = b0 - 1;
            // Batches of eight: the loads first, then the dependent recurrence.
            while r >= a0 + CHAIN_BATCH {
                let (cb, sb, ub) = batch_at(r);
                rep8!(q {
                    ma = cb[q].mul_add(ub[q], sb[q].mul(ma));
                    mb = sb[q].mul(mb);
                });
                r -= CHAIN_BATCH;
            }
            while r > a0 {
                let (c, sn) = rot_at(r);
                ma = c.mul_add(u_at(r - 1), sn.mul(ma));
                mb = sn.mul(mb);
                r -= 1;
            }
        }
        // SAFETY: every thread of the block calls it.
        let t_in = unsafe { chain_scan_from_above(maps, ma, mb) };
        let below = if active && a0 > k {
            u_at(a0 - 1)
        } else {
            T::ZERO
        };
        // SAFETY: block-uniform barrier: every thread's read of its neighbour is done.
        unsafe { device::sync_threads() };
        if active {
            let mut t = if top {
                u_at(hi_k)
            } else {
                let (c, sn) = rot_at(b0);
                c.mul_add(u_at(b0 - 1), sn.mul(t_in))
            };
            let mut r = b0 - 1;
            while r >= a0 + CHAIN_BATCH {
                let (cb, sb, ub) = batch_at(r);
                rep8!(q {
                    let (tn, fin) = rot_pair(cb[q], sb[q], ub[q], t);
                    u_set(r - q, fin);
                    t = tn;
                });
                r -= CHAIN_BATCH;
            }
            while r > a0 {
                let (c, sn) = rot_at(r);
                let (tn, fin) = rot_pair(c, sn, u_at(r - 1), t);
                u_set(r, fin);
                t = tn;
                r -= 1;
            }
            if a0 == k {
                u_set(k, t);
            } else {
                let (c, sn) = rot_at(a0);
                u_set(a0, rot_pair(c, sn, below, t).1);
            }
        }
        // The barrier at the top of the next chain (or before the sums below) orders
        // these writes before any other thread's reads.
    }
    // SAFETY: block-uniform barrier: the last chain's writes are done.
    unsafe { device::sync_threads() };
    // Make chain v from scaled suffix norms of v(v..=hi_v).
    let (a0, b0) = (lo.max(v), up.min(hi_v + 1));
    let mut mx = T::ZERO;
    let mut i = a0;
    while i < b0 {
        mx = mx.max(u_at(i).abs());
        i += 1;
    }
    // SAFETY: block-uniform; slots 16..48 of the scratch, unused by the map scan.
    let mx = unsafe { crate::reduce::block_max_in(maps.add(16), mx) };
    let (sc, inv) = mx.pow2_scale();
    // A non-finite entry: let it propagate (the update's rank check refuses the result).
    let (sc, inv) = if mx.is_finite() { (sc, inv) } else { (T::ONE, T::ONE) };
    let mut part = T::ZERO;
    let mut i = b0;
    while i > a0 {
        i -= 1;
        let x = u_at(i).mul(inv);
        part = x.mul_add(x, part);
    }
    // Σ over the threads after this one: the scan of maps t ↦ part + t.
    // SAFETY: every thread of the block calls it.
    let mut after = unsafe { chain_scan_from_above(maps, part, T::ONE) };
    let vtop = u_at(hi_v);
    let bv = base(v);
    let mut rho_v = T::ZERO;
    // g for element i < hi_v: v(hi_v) itself next to the top, else the scaled suffix norm.
    let g_of = |i: usize, after: T| {
        if i + 1 == hi_v {
            vtop
        } else {
            sc.mul(after.sqrt())
        }
    };
    let mut i = b0;
    if i > a0 && i - 1 == hi_v {
        // v(hi_v) itself: no rotation, only its square for the sums below.
        i -= 1;
        let y = vtop.mul(inv);
        after = y.mul_add(y, after);
    }
    // Batches of eight: the suffix sums in order, then eight independent rotations.
    while i >= a0 + CHAIN_BATCH {
        let (mut xb, mut gb) = ([T::ZERO; 8], [T::ZERO; 8]);
        rep8!(q {
            xb[q] = u_at(i - 1 - q);
            gb[q] = g_of(i - 1 - q, after);
            let y = xb[q].mul(inv);
            after = y.mul_add(y, after);
        });
        rep8!(q {
            let e = i - 1 - q;
            let (c, sn, rho) = givens(xb[q], gb[q]);
            // SAFETY: list index bv + hi_v − (e+1) < base_{v+1}: chain v's, this thread's.
            unsafe { record(rot, plane, bv + hi_v - (e + 1), c, sn, e) };
            if e == v {
                rho_v = rho;
            }
        });
        i -= CHAIN_BATCH;
    }
    while i > a0 {
        i -= 1;
        let x = u_at(i);
        let (c, sn, rho) = givens(x, g_of(i, after));
        // SAFETY: as in the batches.
        unsafe { record(rot, plane, bv + hi_v - (i + 1), c, sn, i) };
        if i == v {
            rho_v = rho;
        }
        let y = x.mul(inv);
        after = y.mul_add(y, after);
    }
    // SAFETY: block-uniform barrier: every read of the slab (v(hi_v) included) and every
    // list entry of chain v is done; thread 0's release then publishes the entries
    // (cumulative through the barrier).
    unsafe { device::sync_threads() };
    if tid == 0 {
        // SAFETY: flags[v] valid (v < p); only this block writes it.
        unsafe { device::st_release_u32(flags.wrapping_add(v), set) };
    }
    let mut i = a0;
    while i < b0 {
        u_set(i, if i == v { rho_v } else { T::ZERO });
        i += 1;
    }
    // SAFETY: block-uniform barrier: the chunk writes are done before the copy out.
    unsafe { device::sync_threads() };
    let mut i = tid;
    while i <= hi_v {
        // SAFETY: dst writable at vector v's elements (contract).
        unsafe { device::st(dst, v * dst_vs + i * dst_es, u_at(i)) };
        i += nt;
    }
}


/// `two_phase_window_gather`: every window of a chain list as a stack of strip lists,
/// and the identities they will act on (docs/design.md "windows of rotations applied by
/// GEMM"). Window k (blockIdx.y) is planes' columns [l_k, l_k + h_w + p), l_k = l0 −
/// k·h_w, of a list of p chains (chain c with planes r = hi_c down to c + 1, hi_c = hi0 +
/// inc·c, entries at base_c + (hi_c − r), base_c = c·hi0 − (1 − inc)·c(c−1)/2: the step
/// kernels' order). Entry j of window k's chain c (at dst_rot[k·p·h_w + c·h_w + j]) is
/// local plane r′ = h_w + c − j, global r = l_k + r′: chain c's rotation at r when
/// c + 1 ≤ r ≤ hi_c, else the identity (1, 0); its plane r′ − 1 is implied by the strip
/// schedule (s0 = h_w, s1 = p). Threads e < w of window k also set the diagonal of its
/// w×w block z_k = z[k·w·w ..] (ld w, w = h_w + p), which the caller zeroed.
///
/// # Safety
/// Grid (gx, windows) with gx·block ≥ p·h_w threads and p·h_w ≥ 1; `src_rot` holds every
/// chain's entries (base_p pairs); `dst_rot` 2·p·h_w·windows and `z` w²·windows elements
/// writable, not overlapping each other or the source.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn window_gather<T: Float>(
    src_rot: *const T,
    dst_rot: *mut T,
    z: *mut T,
    p: usize,
    hw: usize,
    hi0: usize,
    inc: usize,
    l0: isize,
) {
    let k = device::block_y();
    let e = device::block_x() * device::block_dim_x() + device::thread_x();
    let n = p * hw;
    let w = hw + p;
    let mut i = e;
    while i < w {
        // SAFETY: i < w: the diagonal of window k's block (contract).
        unsafe { device::st(z, k * w * w + i * (w + 1), T::ONE) };
        i += n;
    }
    if e >= n {
        return;
    }
    let (c, j) = (e / hw, e % hw);
    let local = hw + c - j;
    let r = l0 - (k * hw) as isize + local as isize;
    let hi_c = hi0 + inc * c;
    let (cs, sn) = if r >= (c + 1) as isize && r <= hi_c as isize {
        let base = c * hi0 - (1 - inc) * (c * c.saturating_sub(1) / 2);
        let idx = base + (hi_c - r as usize);
        // SAFETY: idx < base_{c+1} ≤ base_p: chain c's entry at plane r (contract).
        unsafe { (device::ld(src_rot, 2 * idx), device::ld(src_rot, 2 * idx + 1)) }
    } else {
        (T::ONE, T::ZERO)
    };
    let d = k * n + e;
    // SAFETY: d < windows·p·h_w: window k's entry e (contract).
    unsafe {
        device::st(dst_rot, 2 * d, cs);
        device::st(dst_rot, 2 * d + 1, sn);
    }
}

/// `two_phase_window_pipe`: [`apply_pipe`]'s pipelined strip apply (s0 = h_w, s1 = p)
/// of window k's list (blockIdx.y = k; `rot` + 2·k·p·h_w, as [`window_gather`] lays them
/// out) to the rows of its w×w block z_k (ld w, at z + k·w·w), w = h_w + p: every window
/// in one launch, Z_k = I·G_kᵀ.
///
/// # Safety
/// Grid (⌈w/32⌉, windows), block 32·nw (nw ≤ [`PIPE_MAX_WARPS`]) with [`apply_pipe`]'s
/// dynamic shared memory; `rot` holds windows·p·h_w pairs (16-byte aligned base) and `z`
/// windows·w² elements, owned by this launch.
#[inline(always)]
pub unsafe fn window_pipe<T: Float>(rot: *const T, hw: usize, p: usize, z: *mut T) {
    let k = device::block_y();
    let w = hw + p;
    let v0 = device::block_x() * 32;
    // block-uniform exits only: the warps of a block meet at barriers
    if v0 >= w || hw == 0 || p == 0 {
        return;
    }
    let (lane, g, nw) = (
        device::thread_x() % 32,
        device::thread_x() / 32,
        device::block_dim_x() / 32,
    );
    let t = v0 + lane;
    let base = if t < w { t } else { NONE };
    let rot_k = rot.wrapping_add(2 * k * p * hw);
    let z_k = z.wrapping_add(k * w * w);
    // SAFETY: window k's list is a whole strip list of p chains of h_w (contract), its
    // base stays 16-byte aligned (2·k·p·h_w elements: a multiple of two); row t < w of
    // z_k (element i at t + i·w, i < w) belongs to lane `lane` of every warp of this
    // block; not banded.
    unsafe { pipe_vec(rot_k, true, hw, p, z_k, base, w, NONE, v0, lane, g, nw) };
}
