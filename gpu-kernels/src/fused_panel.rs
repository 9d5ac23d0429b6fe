//! One-launch Householder panel factorisation (spec §1.4 panel, §4.1 "fused panel",
//! issue 5): the whole column loop of a rows×jb panel — scaled norm, reflector, its
//! application to the rest of the panel, and T's column — in one cooperative launch.
//!
//! Each block owns a slab of `rpb` consecutive panel rows (kept in shared memory when
//! `in_shared` ≠ 0, else worked on in place in global memory). Step k (k = 0..=jb):
//! every block publishes, for its rows, the partial quantities of column k
//! (its scale s_b = max |x|, Σ(x/s_b)², and Σ(x/s_b)·A(:, c) for c > k) and of T's
//! column k−1 (V(:, i)ᵀ v_{k−1}, i < k−1); the owner of row k publishes row k; one grid
//! barrier; then every block combines the partials (same order in every block, so all
//! agree bit for bit), forms β, τ and w = vᵀA(:, k+1..jb) exactly as
//! `householder_house` + `panel_apply` would (spec §1.2 robust `house`), and updates its
//! own rows. Block 0 builds T (LAPACK `larft` forward, τ ≥ 0, erratum E14). At the end
//! every block writes its rows of R (exact zeros below the diagonal, erratum H3) and of V
//! (explicit unit diagonal and zeros above it). A `band` limits reflector k to rows
//! k..=k+band (column deletion, spec §1.8).
//!
//! Latency is what this kernel fights (one grid barrier per column): warps reduce
//! [`UNROLL`] quantities at once (independent shuffles and loads in flight), partials are
//! laid out quantity-major so a warp's loads of one quantity are contiguous, and every
//! post-barrier load of the step is issued in one round (`ld.global.cg`).

use crate::device::{self, Float, WARP};
use crate::reduce;

/// Widest panel the kernel takes (partials hold 2·jb + 2 quantities per block).
pub const MAX_JB: usize = 64;
/// Blocks per lane in the post-barrier reductions: at most 32·LANE_BLOCKS blocks.
pub const LANE_BLOCKS: usize = 4;
/// Quantities a warp reduces at once.
const UNROLL: usize = 4;
/// Shared scratch after the panel slab, in `T`s, besides T itself (jb·jb): 32 (block
/// reductions) + 8 (scalars) + 2·MAX_JB + 2 (combined quantities) + MAX_JB (τ) +
/// MAX_JB (the published row k).
pub const SCRATCH: usize = 32 + 8 + 2 * MAX_JB + 2 + 2 * MAX_JB;

/// T's column q = −τ_q·T(0:q, 0:q)·y, T(q, q) = τ_q, zeros below (LAPACK `larft`
/// forward, columnwise), in shared memory (ld jb); thread i owns row i, so every element
/// a thread reads it wrote itself at an earlier column.
///
/// # Safety
/// `tsm` holds jb×jb with columns < q complete; `y` holds q values, `taus` q + 1; no
/// other thread writes them meanwhile.
#[inline(always)]
unsafe fn t_column<T: Float>(tsm: *mut T, jb: usize, q: usize, y: *const T, taus: *const T) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    // SAFETY: q < jb entries of τ.
    let tq = unsafe { device::ld(taus, q) };
    let mut i = tid;
    while i < jb {
        let val = if i < q {
            let mut acc = T::ZERO;
            let mut kk = i;
            while kk < q {
                // SAFETY: T(i, kk), kk < q, written by this thread; y[kk] readable.
                acc = unsafe {
                    device::ld(tsm as *const T, i + kk * jb).mul_add(device::ld(y, kk), acc)
                };
                kk += 1;
            }
            tq.neg().mul(acc)
        } else if i == q {
            tq
        } else {
            T::ZERO
        };
        // SAFETY: T(i, q): one writer (thread i).
        unsafe { device::st(tsm, i + q * jb, val) };
        i += nt;
    }
}

/// Warp-wide max, every lane gets it (butterfly).
///
/// # Safety
/// The full warp calls convergently.
#[inline(always)]
unsafe fn warp_allmax<T: Float>(mut v: T) -> T {
    let mut d = (WARP / 2) as u32;
    while d > 0 {
        // SAFETY: forwarded: the full warp is convergent here.
        v = v.max(unsafe { v.shfl_xor(d) });
        d /= 2;
    }
    v
}

/// `fused_panel_qr`: factors the panel `a` (rows×jb, ld `lda`, rows ≥ jb) in place.
/// Outputs: R in the upper triangle of `a` with exact zeros below; V (rows×jb, ld
/// `ldv`) unit lower trapezoidal with explicit 1s and 0s; `tau[0..jb)`; T (jb×jb, ld
/// `ldt`) upper triangular with zeros below. Reflector k acts on rows
/// k..min(rows, k + band + 1) (pass band ≥ rows for none).
///
/// Launch: cooperative, grid B = ⌈rows / rpb⌉ ≤ 32·[`LANE_BLOCKS`] blocks (1-D, all
/// co-resident), block 512 threads (the entry carries `.maxntid 512, 1, 1`); dynamic shared memory (rpb·jb·[in_shared ≠ 0] +
/// [`SCRATCH`] + jb·jb)·size_of::<T>() bytes. `partials` holds 2·B·(2·jb + 2) `T`s and `head`
/// 2·jb `T`s (scratch, any contents); `*counter` equals `bar_base` at launch and ends at
/// `bar_base + (jb + 1)·B`.
///
/// # Safety
/// Launch shape as documented; 1 ≤ jb ≤ [`MAX_JB`], jb ≤ rows; `a` read-writable
/// rows×jb (ld ≥ rows), `v` writable rows×jb (ld ≥ rows), `tau` writable jb, `t`
/// writable jb×jb (ld ≥ jb), `partials`, `head`, `counter` as above; no two of these
/// overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn qr<T: Float>(
    a: *mut T,
    lda: usize,
    rows: usize,
    jb: usize,
    band: usize,
    v: *mut T,
    ldv: usize,
    tau: *mut T,
    t: *mut T,
    ldt: usize,
    partials: *mut T,
    head: *mut T,
    counter: *mut u32,
    bar_base: u32,
    rpb: usize,
    in_shared: u32,
) {
    let nb = device::grid_blocks();
    let b = device::block_x();
    let tid = device::thread_linear();
    let nt = device::block_threads();
    let (lane, warp, nwarps) = (tid % WARP, tid / WARP, nt / WARP);
    let rs = (b * rpb).min(rows);
    let re = (rs + rpb).min(rows);
    let nloc = re - rs;
    let in_shared = in_shared != 0;
    let width = 2 * jb + 2;
    let band = band.min(rows);

    let smem = device::shared::<T>();
    let (p, ldp) = if in_shared {
        (smem, rpb)
    } else {
        (a.wrapping_add(rs), lda)
    };
    let scratch = if in_shared {
        smem.wrapping_add(rpb * jb)
    } else {
        smem
    };
    let red = scratch; // 32
    let misc = scratch.wrapping_add(32); // 8
    let qv = scratch.wrapping_add(40); // 2·MAX_JB + 2
    let taus = scratch.wrapping_add(40 + 2 * MAX_JB + 2); // MAX_JB
    let hv = scratch.wrapping_add(40 + 3 * MAX_JB + 2); // MAX_JB
    let tsm = scratch.wrapping_add(SCRATCH); // jb·jb (block 0)

    // P(g, c) for a row g of this slab (global row index).
    let pat = |g: usize, c: usize| g - rs + c * ldp;

    if in_shared {
        let mut c = warp;
        while c < jb {
            let mut r = lane;
            while r < nloc {
                // SAFETY: r < nloc ≤ rpb, c < jb: inside the slab and inside `a`.
                unsafe { device::st(p, r + c * ldp, device::ld(a as *const T, rs + r + c * lda)) };
                r += WARP;
            }
            c += nwarps;
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };

    for k in 0..=jb {
        let buf = k & 1;
        let part = partials.wrapping_add(buf * nb * width);
        let hrow = head.wrapping_add(buf * jb);
        // ---- Publish step k's partials (quantity q of block b at part[q·nb + b]). ----
        // Tail of reflector k: rows (k, hi_k); T's column q = k − 1: rows [q, hi_q).
        let hi_k = rows.min(k + band + 1);
        let (t0, t1) = ((k + 1).max(rs), hi_k.min(re));
        let ncol = jb.saturating_sub(k); // quantities 1 + (c − k), c = k..jb
        let ny = k.saturating_sub(1); // quantities jb + 1 + i, i < k − 1
        let mut s = T::ZERO;
        if k < jb {
            let mut mx = T::ZERO;
            let mut g = t0 + tid;
            while g < t1 {
                // SAFETY: rs ≤ g < re, k < jb: inside this block's slab.
                mx = mx.max(unsafe { device::ld(p as *const T, pat(g, k)) }.abs());
                g += nt;
            }
            // SAFETY: block-uniform; `red` is 32 shared `T`s used only here.
            s = unsafe { reduce::block_reduce_in(red, mx, T::ZERO, reduce::warp_max::<T>) };
            if tid == 0 {
                // SAFETY: quantity 0 of this block; one writer.
                unsafe { device::st(part, b, s) };
            }
            // The owner of row k publishes it (columns k..jb).
            if rs <= k && k < re {
                let mut c = k + tid;
                while c < jb {
                    // SAFETY: row k is in this slab; c < jb; one writer per entry.
                    unsafe { device::st(hrow, c, device::ld(p as *const T, pat(k, c))) };
                    c += nt;
                }
            }
        }
        // x/s without a division per use (a subnormal s whose reciprocal overflows
        // falls back to dividing).
        let inv_s = if s != T::ZERO && s.is_finite() {
            T::ONE.div(s)
        } else {
            T::ZERO
        };
        let divide = !inv_s.is_finite();
        let scaled = |x: T| if divide { x.div(s) } else { x.mul(inv_s) };
        let q = k.wrapping_sub(1);
        let hi_q = if k >= 1 { rows.min(q + band + 1) } else { 0 };
        let jobs = ncol + ny;
        let (r0, r1) = (k.saturating_sub(1).max(rs), hi_k.min(re));
        let mut js = warp * UNROLL;
        while js < jobs {
            let mut acc = [T::ZERO; UNROLL];
            let mut g = r0 + lane;
            while g < r1 {
                let in_tail = g > k && g < t1 && s != T::ZERO;
                // SAFETY: slab row g, column k < jb (only read when k < jb).
                let xs = if in_tail && k < jb {
                    scaled(unsafe { device::ld(p as *const T, pat(g, k)) })
                } else {
                    T::ZERO
                };
                let vq = if k >= 1 && g >= q && g < hi_q {
                    if g == q {
                        T::ONE
                    } else {
                        // SAFETY: slab row g, column q < jb.
                        unsafe { device::ld(p as *const T, pat(g, q)) }
                    }
                } else {
                    T::ZERO
                };
                for (u, slot) in acc.iter_mut().enumerate() {
                    let job = js + u;
                    if job < ncol {
                        let c = k + job;
                        let y = if c == k {
                            xs
                        } else {
                            // SAFETY: slab row g, column c < jb.
                            unsafe { device::ld(p as *const T, pat(g, c)) }
                        };
                        *slot = xs.mul_add(y, *slot);
                    } else if job < jobs {
                        let i = job - ncol;
                        // SAFETY: slab row g, column i < q < jb.
                        let vi = unsafe { device::ld(p as *const T, pat(g, i)) };
                        *slot = vi.mul_add(vq, *slot);
                    }
                }
                g += WARP;
            }
            for (u, slot) in acc.iter().enumerate() {
                // SAFETY: `js < jobs` is warp-uniform; the whole warp is here.
                let sum = unsafe { reduce::warp_sum(*slot) };
                let job = js + u;
                if lane == 0 && job < jobs {
                    let qi = if job < ncol {
                        1 + job
                    } else {
                        jb + 1 + (job - ncol)
                    };
                    // SAFETY: qi < width; one writer per (quantity, block).
                    unsafe { device::st(part, qi * nb + b, sum) };
                }
            }
            js += nwarps * UNROLL;
        }
        // SAFETY: cooperative launch, every thread of every block runs the same steps.
        unsafe { device::grid_arrive(counter) };
        if b == 0 && k >= 2 {
            // While the barrier completes: T's column k − 2 from the y of step k − 1
            // (qv[jb..], rewritten only after this barrier).
            // SAFETY: block-uniform branch; tsm/qv/taus as `t_column` requires.
            unsafe { t_column(tsm, jb, k - 2, qv.wrapping_add(jb) as *const T, taus) };
        }
        // SAFETY: as `grid_arrive` above.
        unsafe { device::grid_wait(counter, bar_base.wrapping_add((k as u32 + 1) * nb as u32)) };

        // ---- Combine: every load of the step in one round. ----
        let nd = jb.saturating_sub(k + 1); // D_c, c = k+1..jb: quantity 2 + (c − k − 1)
        let nyb = if b == 0 { ny } else { 0 }; // y_i for T's column q (block 0 only)
        let mut sbv = [T::ZERO; LANE_BLOCKS];
        for (j, sb) in sbv.iter_mut().enumerate() {
            let bb = lane + WARP * j;
            if bb < nb {
                // SAFETY: quantity 0 of block bb, written before the grid barrier.
                *sb = unsafe { T::ld_cg(part.wrapping_add(bb)) };
            }
        }
        if warp == 0 {
            if k < jb {
                // σ = S·√(Σ_b (s_b/S)²·ss_b), S = max_b s_b (scaled, spec §1.2 H2).
                let mut m = T::ZERO;
                for sb in sbv {
                    m = m.max(sb);
                }
                // SAFETY: warp 0 complete and convergent.
                let big = unsafe { warp_allmax(m) };
                let mut acc = T::ZERO;
                if big != T::ZERO && big.is_finite() {
                    for (j, sb) in sbv.iter().enumerate() {
                        let bb = lane + WARP * j;
                        if bb < nb {
                            // SAFETY: quantity 1 of block bb.
                            let ss = unsafe { T::ld_cg(part.wrapping_add(nb + bb)) };
                            let r = sb.div(big);
                            acc = r.mul(r).mul_add(ss, acc);
                        }
                    }
                }
                // SAFETY: warp 0 complete and convergent.
                let ss = unsafe { reduce::warp_sum(acc) };
                if lane == 0 {
                    let sigma = if big == T::ZERO || !big.is_finite() {
                        big
                    } else {
                        big.mul(ss.sqrt())
                    };
                    // SAFETY: α = A(k, k), published by row k's owner before the barrier.
                    let alpha = unsafe { T::ld_cg(hrow.wrapping_add(k)) };
                    let (beta, tk, inv) = if sigma == T::ZERO {
                        (alpha, T::ZERO, T::ZERO)
                    } else {
                        let mu = alpha.hypot(sigma);
                        let beta = mu.copysign(alpha).neg();
                        (beta, beta.sub(alpha).div(beta), T::ONE.div(alpha.sub(beta)))
                    };
                    // SAFETY: misc[1..4], one writer.
                    unsafe {
                        device::st(misc, 1, beta);
                        device::st(misc, 2, tk);
                        device::st(misc, 3, inv);
                    }
                    if b == 0 {
                        // SAFETY: tau[k], k < jb; block 0 lane 0 is the only writer.
                        unsafe { device::st(tau, k, tk) };
                    }
                }
            }
        } else {
            let cjobs = nd + nyb;
            let mut js = (warp - 1) * UNROLL;
            while js < cjobs {
                let mut acc = [T::ZERO; UNROLL];
                for (j, sb) in sbv.iter().enumerate() {
                    let bb = lane + WARP * j;
                    if bb < nb {
                        for (u, slot) in acc.iter_mut().enumerate() {
                            let job = js + u;
                            if job < nd {
                                // SAFETY: quantity 2 + job < width of block bb.
                                let d = unsafe { T::ld_cg(part.wrapping_add((2 + job) * nb + bb)) };
                                *slot = sb.mul_add(d, *slot);
                            } else if job < cjobs {
                                let i = job - nd;
                                // SAFETY: quantity jb + 1 + i < width of block bb.
                                let y =
                                    unsafe { T::ld_cg(part.wrapping_add((jb + 1 + i) * nb + bb)) };
                                *slot = slot.add(y);
                            }
                        }
                    }
                }
                // Lane u fetches row k's entry of D-job u (same round as the partials).
                let hjob = js + lane;
                if lane < UNROLL && hjob < nd {
                    // SAFETY: head row entry k + 1 + hjob < jb, published before the
                    // barrier; hv[c] has one writer.
                    unsafe {
                        let c = k + 1 + hjob;
                        device::st(hv, c, T::ld_cg(hrow.wrapping_add(c)));
                    }
                }
                for (u, slot) in acc.iter().enumerate() {
                    // SAFETY: `js < cjobs` is warp-uniform.
                    let sum = unsafe { reduce::warp_sum(*slot) };
                    let job = js + u;
                    if lane == 0 && job < cjobs {
                        let at = if job < nd {
                            k + 1 + job
                        } else {
                            jb + (job - nd)
                        };
                        // SAFETY: qv index < 2·jb; one writer per entry. (qv[0..jb) holds
                        // D_c then w_c, qv[jb..2jb) holds y.)
                        unsafe { device::st(qv, at, sum) };
                    }
                }
                js += (nwarps - 1) * UNROLL;
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };

        // ---- Apply reflector k to this slab. ----
        if k < jb {
            // SAFETY: misc written before the barrier.
            let (beta, tk, inv) = unsafe {
                (
                    device::ld(misc as *const T, 1),
                    device::ld(misc as *const T, 2),
                    device::ld(misc as *const T, 3),
                )
            };
            if tid == 0 {
                // SAFETY: taus[k], k < jb ≤ MAX_JB; one writer.
                unsafe { device::st(taus, k, tk) };
            }
            // w_c = A(k, c) + D_c/(α − β).
            let mut c = k + 1 + tid;
            while c < jb {
                // SAFETY: qv[c] and hv[c] were written before the block barrier above;
                // qv[c] has one reader/writer here.
                unsafe {
                    let w = device::ld(hv as *const T, c).add(inv.mul(device::ld(qv, c)));
                    device::st(qv, c, w);
                }
                c += nt;
            }
            // Scale the tail into v (x := 0 when σ = 0, as `householder_house`).
            let mut g = t0 + tid;
            while g < t1 {
                // SAFETY: slab row g, column k; one thread per element.
                unsafe {
                    let x = device::ld(p as *const T, pat(g, k));
                    device::st(p, pat(g, k), x.mul(inv));
                }
                g += nt;
            }
            // SAFETY: block-uniform barrier (v and w complete).
            unsafe { device::sync_threads() };
            // A(g, c) −= τ·v_g·w_c over the reflector's rows of this slab, c > k: a warp
            // per column, lanes over rows (no index division).
            if tk != T::ZERO {
                let (u0, u1) = (k.max(rs), hi_k.min(re));
                let mut c = k + 1 + warp;
                while c < jb {
                    // SAFETY: qv[c] = w_c, written before the barrier above.
                    let tw = tk.mul(unsafe { device::ld(qv as *const T, c) });
                    let mut g = u0 + lane;
                    while g < u1 {
                        // SAFETY: slab row g, columns k < c < jb; each (g, c) has one
                        // writer; column k is only read in this phase.
                        unsafe {
                            let vg = if g == k {
                                T::ONE
                            } else {
                                device::ld(p as *const T, pat(g, k))
                            };
                            let y = device::ld(p as *const T, pat(g, c));
                            device::st(p, pat(g, c), tw.neg().mul_add(vg, y));
                        }
                        g += WARP;
                    }
                    c += nwarps;
                }
            }
            // SAFETY: block-uniform barrier (updates done before β lands in (k, k) and
            // before the next step reads the panel).
            unsafe { device::sync_threads() };
            if rs <= k && k < re && tid == 0 {
                // SAFETY: row k is in this slab; one writer.
                unsafe { device::st(p, pat(k, k), beta) };
            }
        }
    }

    // T's last column, then T to global memory (block 0).
    if b == 0 {
        // SAFETY: block-uniform branch; y of column jb − 1 came from the last combine.
        unsafe {
            t_column(tsm, jb, jb - 1, qv.wrapping_add(jb) as *const T, taus);
            device::sync_threads();
        }
        let mut c = warp;
        while c < jb {
            let mut i = lane;
            while i < jb {
                // SAFETY: i, c < jb: inside tsm and T; one writer per element.
                unsafe { device::st(t, i + c * ldt, device::ld(tsm as *const T, i + c * jb)) };
                i += WARP;
            }
            c += nwarps;
        }
    }

    // ---- Write back R (zeros below the diagonal) and V (explicit 1s and 0s). ----
    let mut c = warp;
    while c < jb {
        let mut r = lane;
        while r < nloc {
            let g = rs + r;
            // SAFETY: slab element (r, c); `a`, `v` in bounds (g < rows, c < jb); each
            // element read and written by this thread only.
            unsafe {
                let x = device::ld(p as *const T, r + c * ldp);
                let vx = if g < c {
                    T::ZERO
                } else if g == c {
                    T::ONE
                } else {
                    x
                };
                device::st(v, g + c * ldv, vx);
                device::st(a, g + c * lda, if g <= c { x } else { T::ZERO });
            }
            r += WARP;
        }
        c += nwarps;
    }
}
