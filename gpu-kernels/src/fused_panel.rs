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

use crate::device::{self, Float, WARP};
use crate::reduce;

/// Widest panel the kernel takes (partials rows hold 2·jb + 2 values).
pub const MAX_JB: usize = 64;

/// Shared scratch after the panel slab, in `T`s: 32 (block reductions) + 8 (scalars)
/// + 2·MAX_JB + 2 (combined quantities) + `grid_blocks()` (per-block scales).
const SCRATCH_FIXED: usize = 32 + 8 + 2 * MAX_JB + 2;

/// `fused_panel_qr`: factors the panel `a` (rows×jb, ld `lda`, rows ≥ jb) in place.
/// Outputs: R in the upper triangle of `a` with exact zeros below; V (rows×jb, ld
/// `ldv`) unit lower trapezoidal with explicit 1s and 0s; `tau[0..jb)`; T (jb×jb, ld
/// `ldt`) upper triangular with zeros below. Reflector k acts on rows
/// k..min(rows, k + band + 1) (pass band ≥ rows for none).
///
/// Launch: cooperative, grid B = ⌈rows / rpb⌉ blocks (1-D, all co-resident), block
/// 256 threads; dynamic shared memory (rpb·jb·[in_shared ≠ 0] + 32 + 8 + 2·64 + 2 + B)
/// · size_of::<T>() bytes. `partials` holds 2·B·(2·jb + 2) `T`s and `head` 2·jb `T`s
/// (scratch, any contents); `*counter` equals `bar_base` at launch and ends at
/// `bar_base + (jb + 1)·B`.
///
/// # Safety
/// Launch shape as documented; jb ≤ [`MAX_JB`], jb ≤ rows; `a` read-writable
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
    let sc = scratch.wrapping_add(SCRATCH_FIXED); // nb

    if in_shared {
        let mut idx = tid;
        while idx < nloc * jb {
            let (r, c) = (idx % nloc, idx / nloc);
            // SAFETY: r < nloc ≤ rpb, c < jb: inside the slab and inside `a`.
            unsafe { device::st(p, r + c * ldp, device::ld(a as *const T, rs + r + c * lda)) };
            idx += nt;
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };

    for k in 0..=jb {
        let buf = k & 1;
        let part = partials.wrapping_add(buf * nb * width);
        let mine = part.wrapping_add(b * width);
        let hrow = head.wrapping_add(buf * jb);
        // ---- Publish step k's partials. ----
        if k < jb {
            let hi = rows.min(k + band + 1);
            let (t0, t1) = ((k + 1).max(rs), hi.min(re));
            let (t0, t1) = (t0.min(t1), t1);
            let mut mx = T::ZERO;
            let mut g = t0 + tid;
            while g < t1 {
                // SAFETY: rs ≤ g < re, k < jb: inside this block's slab.
                mx = mx.max(unsafe { device::ld(p as *const T, g - rs + k * ldp) }.abs());
                g += nt;
            }
            // SAFETY: block-uniform; `red` is 32 shared `T`s used only here.
            let s = unsafe { reduce::block_reduce_in(red, mx, T::ZERO, reduce::warp_max::<T>) };
            if tid == 0 {
                // SAFETY: this block's partials row, one writer.
                unsafe { device::st(mine, 0, s) };
            }
            // Quantity 1 + (c − k) over the tail rows: Σ (x/s)² for c = k, Σ (x/s)·A(:, c)
            // for c > k.
            let mut c = k + warp;
            while c < jb {
                let mut acc = T::ZERO;
                if s != T::ZERO && s.is_finite() {
                    let mut g = t0 + lane;
                    while g < t1 {
                        // SAFETY: slab rows, columns k and c < jb.
                        let (x, y) = unsafe {
                            (
                                device::ld(p as *const T, g - rs + k * ldp),
                                device::ld(p as *const T, g - rs + c * ldp),
                            )
                        };
                        // c = k: Σ (x/s)² (both factors scaled).
                        let xs = x.div(s);
                        acc = xs.mul_add(if c == k { xs } else { y }, acc);
                        g += WARP;
                    }
                }
                // SAFETY: `c < jb` is warp-uniform: the whole warp is here.
                let sum = unsafe { reduce::warp_sum(acc) };
                if lane == 0 {
                    // SAFETY: index 1 + c − k ≤ jb < width; one writer per entry.
                    unsafe { device::st(mine, 1 + c - k, sum) };
                }
                c += nwarps;
            }
            // The owner of row k publishes it (columns k..jb).
            if rs <= k && k < re {
                let mut c = k + tid;
                while c < jb {
                    // SAFETY: row k is in this slab; c < jb; one writer per entry.
                    unsafe { device::st(hrow, c, device::ld(p as *const T, k - rs + c * ldp)) };
                    c += nt;
                }
            }
        }
        if k >= 1 {
            // T column q = k − 1: y_i = Σ_g V(g, i)·v_q(g), g ∈ [q, q + band], i < q.
            let q = k - 1;
            let hi = rows.min(q + band + 1);
            let (t0, t1) = (q.max(rs), hi.min(re));
            let mut i = warp;
            while i < q {
                let mut acc = T::ZERO;
                let mut g = t0 + lane;
                while g < t1 {
                    // SAFETY: slab rows; columns i < q < jb.
                    let (vi, vq) = unsafe {
                        (
                            device::ld(p as *const T, g - rs + i * ldp),
                            if g == q {
                                T::ONE
                            } else {
                                device::ld(p as *const T, g - rs + q * ldp)
                            },
                        )
                    };
                    acc = vi.mul_add(vq, acc);
                    g += WARP;
                }
                // SAFETY: `i < q` is warp-uniform.
                let sum = unsafe { reduce::warp_sum(acc) };
                if lane == 0 {
                    // SAFETY: jb + 1 + i < 2·jb + 2 = width; one writer per entry.
                    unsafe { device::st(mine, jb + 1 + i, sum) };
                }
                i += nwarps;
            }
        }
        // SAFETY: cooperative launch, every thread of every block runs the same steps.
        unsafe { device::grid_sync(counter, bar_base.wrapping_add((k as u32 + 1) * nb as u32)) };

        // ---- Combine and apply step k. ----
        if k < jb {
            let mut bb = tid;
            while bb < nb {
                // SAFETY: block bb's scale, written before the barrier.
                unsafe { device::st(sc, bb, device::ld_volatile(part as *const T, bb * width)) };
                bb += nt;
            }
            // SAFETY: block-uniform barrier.
            unsafe { device::sync_threads() };
            if warp == 0 {
                // σ = S·√(Σ_b (s_b/S)²·ss_b), S = max_b s_b (scaled, spec §1.2 H2).
                let mut m = T::ZERO;
                let mut bb = lane;
                while bb < nb {
                    // SAFETY: bb < nb entries of `sc`.
                    m = m.max(unsafe { device::ld(sc, bb) });
                    bb += WARP;
                }
                // SAFETY: warp 0 complete and convergent.
                let m = unsafe { reduce::warp_max(m) };
                if lane == 0 {
                    // SAFETY: misc[0], one writer.
                    unsafe { device::st(misc, 0, m) };
                }
                // SAFETY: the full warp; orders lane 0's write before the reads.
                unsafe { device::sync_warp() };
                // SAFETY: written above.
                let big = unsafe { device::ld(misc as *const T, 0) };
                let mut acc = T::ZERO;
                if big != T::ZERO && big.is_finite() {
                    let mut bb = lane;
                    while bb < nb {
                        // SAFETY: bb < nb; block bb's Σ(x/s_b)².
                        let (sb, ss) = unsafe {
                            (
                                device::ld(sc, bb),
                                device::ld_volatile(part as *const T, bb * width + 1),
                            )
                        };
                        let r = sb.div(big);
                        acc = r.mul(r).mul_add(ss, acc);
                        bb += WARP;
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
                    let alpha = unsafe { device::ld_volatile(hrow as *const T, k) };
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
            } else {
                // D_c = Σ_b s_b·d_{b,c} for c = k+1..jb (warps 1..).
                let mut c = k + 1 + (warp - 1);
                while c < jb {
                    let mut acc = T::ZERO;
                    let mut bb = lane;
                    while bb < nb {
                        // SAFETY: bb < nb; entry 1 + c − k < width.
                        let (sb, d) = unsafe {
                            (
                                device::ld(sc, bb),
                                device::ld_volatile(part as *const T, bb * width + 1 + c - k),
                            )
                        };
                        if sb != T::ZERO {
                            acc = sb.mul_add(d, acc);
                        }
                        bb += WARP;
                    }
                    // SAFETY: `c < jb` is warp-uniform.
                    let sum = unsafe { reduce::warp_sum(acc) };
                    if lane == 0 {
                        // SAFETY: qv[c], c < jb; one writer.
                        unsafe { device::st(qv, c, sum) };
                    }
                    c += nwarps - 1;
                }
            }
            // SAFETY: block-uniform barrier.
            unsafe { device::sync_threads() };
            // SAFETY: misc written before the barrier.
            let (beta, tk, inv) = unsafe {
                (
                    device::ld(misc as *const T, 1),
                    device::ld(misc as *const T, 2),
                    device::ld(misc as *const T, 3),
                )
            };
            // w_c = A(k, c) + D_c/(α − β).
            let mut c = k + 1 + tid;
            while c < jb {
                // SAFETY: qv[c] written before the barrier by its only writer, now
                // rewritten by its only reader; head row entry published before the grid
                // barrier.
                unsafe {
                    let w =
                        device::ld_volatile(hrow as *const T, c).add(inv.mul(device::ld(qv, c)));
                    device::st(qv, c, w);
                }
                c += nt;
            }
            // Scale the tail into v (x := 0 when σ = 0, as `householder_house`).
            let hi = rows.min(k + band + 1);
            let (t0, t1) = ((k + 1).max(rs), hi.min(re));
            let mut g = t0 + tid;
            while g < t1 {
                // SAFETY: slab row g, column k; one thread per element.
                unsafe {
                    let x = device::ld(p as *const T, g - rs + k * ldp);
                    device::st(p, g - rs + k * ldp, x.mul(inv));
                }
                g += nt;
            }
            // SAFETY: block-uniform barrier (v and w complete).
            unsafe { device::sync_threads() };
            // A(g, c) −= τ·v_g·w_c over the reflector's rows of this slab, c > k.
            if tk != T::ZERO {
                let (u0, u1) = (k.max(rs), hi.min(re));
                let nr = u1.saturating_sub(u0);
                let ncol = jb - k - 1;
                let mut idx = tid;
                while idx < nr * ncol {
                    let (g, c) = (u0 + idx % nr, k + 1 + idx / nr);
                    // SAFETY: slab row g, columns k < c < jb; each (g, c) has one
                    // writer; column k and qv are only read in this phase.
                    unsafe {
                        let vg = if g == k {
                            T::ONE
                        } else {
                            device::ld(p as *const T, g - rs + k * ldp)
                        };
                        let w = device::ld(qv as *const T, c);
                        let y = device::ld(p as *const T, g - rs + c * ldp);
                        device::st(p, g - rs + c * ldp, tk.mul(vg).neg().mul_add(w, y));
                    }
                    idx += nt;
                }
            }
            // SAFETY: block-uniform barrier (updates done before β lands in (k, k) and
            // before the next step reads the panel).
            unsafe { device::sync_threads() };
            if rs <= k && k < re && tid == 0 {
                // SAFETY: row k is in this slab; one writer.
                unsafe { device::st(p, k - rs + k * ldp, beta) };
            }
        }
        if k >= 1 && b == 0 {
            // T column q = k − 1 (block 0 only; the branch is block-uniform).
            let q = k - 1;
            let mut i = warp;
            while i < q {
                let mut acc = T::ZERO;
                let mut bb = lane;
                while bb < nb {
                    // SAFETY: bb < nb; entry jb + 1 + i < width.
                    acc = acc.add(unsafe {
                        device::ld_volatile(part as *const T, bb * width + jb + 1 + i)
                    });
                    bb += WARP;
                }
                // SAFETY: `i < q` is warp-uniform.
                let sum = unsafe { reduce::warp_sum(acc) };
                if lane == 0 {
                    // SAFETY: qv[jb + i] < 2·jb + 2; one writer. (qv[0..jb) holds w.)
                    unsafe { device::st(qv, jb + i, sum) };
                }
                i += nwarps;
            }
            // SAFETY: block-uniform (b == 0 for the whole block).
            unsafe { device::sync_threads() };
            // SAFETY: τ_q written by this block at step q (global, own writes, ordered
            // by the barriers since).
            let tq = unsafe { device::ld(tau as *const T, q) };
            let mut i = tid;
            while i < jb {
                let val = if i < q {
                    let mut acc = T::ZERO;
                    let mut kk = i;
                    while kk < q {
                        // SAFETY: T(i, kk) for kk < q was written at an earlier step by
                        // this block; qv[jb + kk] written before the barrier above.
                        acc = unsafe {
                            device::ld(t as *const T, i + kk * ldt)
                                .mul_add(device::ld(qv as *const T, jb + kk), acc)
                        };
                        kk += 1;
                    }
                    tq.neg().mul(acc)
                } else if i == q {
                    tq
                } else {
                    T::ZERO
                };
                // SAFETY: T(i, q), i < jb; one writer per entry; column q is not read
                // in this step.
                unsafe { device::st(t, i + q * ldt, val) };
                i += nt;
            }
            // SAFETY: block-uniform barrier before qv is reused.
            unsafe { device::sync_threads() };
        }
    }

    // ---- Write back R (zeros below the diagonal) and V (explicit 1s and 0s). ----
    let mut idx = tid;
    while idx < nloc * jb {
        let (r, c) = (idx % nloc, idx / nloc);
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
        idx += nt;
    }
}
