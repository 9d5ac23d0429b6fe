//! One-block Householder panel for short panels (spec §1.4 panel, §1.8 band; issue 7):
//! the rows×jb panel is loaded into shared memory and factored there by one block, with
//! three block barriers a column and no grid barrier. It gives what
//! [`crate::fused_panel::qr`] gives — R in place with exact zeros below the diagonal, V
//! with an explicit unit diagonal and zeros above it, τ, and T (LAPACK `larft` forward,
//! τ ≥ 0) — for panels whose rows fit one block's shared memory: the band panels of
//! column deletion (band + jb rows), the p new columns of column insertion, the last
//! panels of a factorisation. The cooperative kernel pays a grid barrier and a round of
//! L2 loads a column (≈ 4 µs a column on such panels, H100); this pays three
//! `bar.sync`s and shared-memory traffic.
//!
//! Step k (column k, rows k..kend, kend = min(rows, k + band + 1)):
//! * (a) each warp finds a power-of-two scale of its rows of x = A(k+1..kend, k) (an
//!   integer `redux.sync.max` of order keys) and Σ(x/s_w)²; lane 0 publishes both. The
//!   threads counted from the block's end make T's column k − 1 from Y(·, k − 1).
//! * (b) after the barrier every thread combines the warps' partials (same order, so all
//!   agree bit for bit): σ = S·√(Σ (s_w/S)²·ss_w), S = max s_w; β, τ and 1/(α − β) as
//!   `cpu::householder::house` (σ = 0: τ = 0, β = α; a subnormal ‖(α, σ)‖ scaled up by
//!   1/MIN_POSITIVE first, as LAPACK `xLARFG`); the threads scale their rows of x into
//!   v's tail; thread 0 writes β and τ.
//! * (c) after the second barrier the warps share the jobs of the step: for every later
//!   panel column c, w = v·A(k..kend, c) (one warp, lanes over rows, a butterfly sum) and
//!   A(k..kend, c) −= τ·w·v; for every earlier reflector j < k, Y(j, k) = V(:, j)·v_k
//!   (kept in T's strictly lower triangle, transposed). Third barrier.
//!
//! T(0:q, q) = −τ_q·T(0:q, 0:q)·Y(0:q, q) for column q is made at step q + 1 (phase a),
//! and the last column after the loop.
use crate::device;
use crate::fused_panel::Pow2;
use crate::reduce;

/// Widest panel the kernel takes.
pub const MAX_JB: usize = 64;
/// Shared scratch besides the panel (rows·jb) and T (jb·jb), in `T`s: the warps'
/// (scale, sum) partials (2·32) and τ (MAX_JB).
pub const SCRATCH: usize = 64 + MAX_JB;

/// `small_panel_qr`: factors the rows×jb panel at `a` (column-major, ld `lda`) in place
/// (R: upper triangle, exact zeros below), writing V (rows×jb, ld `ldv`: unit diagonal,
/// zeros above, zeros below row j + band in column j), τ (jb) and T (jb×jb, ld `ldt`,
/// upper triangular, zeros below). Reflector j touches rows j..=min(j + band, rows − 1)
/// (band ≥ rows: unbanded); entries of column j below that are taken as zero.
///
/// # Safety
/// Grid 1; block a multiple of 32 threads (at most 1024); dynamic shared memory of
/// (rows·jb + jb·jb + [`SCRATCH`]) `T`s; 1 ≤ jb ≤ min(rows, [`MAX_JB`]); rows·jb < 2³²;
/// the panel, V, τ and T are valid, distinct device memory of the stated shapes, and
/// nothing else touches them during the launch.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn qr<T: Pow2>(
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
) {
    let tid = device::thread_linear() as u32;
    let nt = device::block_threads() as u32;
    let (lane, warp, nwarps) = (tid % 32, tid / 32, nt / 32);
    let (l, jb) = (rows as u32, jb as u32);
    let band = band.min(rows) as u32;
    let sm = device::shared::<T>();
    let p = sm;
    // T (upper, diagonal τ) and Y (Y(j, k) at ts(k, j), k > j), ld jb.
    let ts = sm.wrapping_add((l * jb) as usize);
    let part = ts.wrapping_add((jb * jb) as usize);
    let taus = part.wrapping_add(64);
    let pi = |i: u32, c: u32| (i + c * l) as usize;
    let ti = |i: u32, c: u32| (i + c * jb) as usize;

    let mut idx = tid;
    while idx < l * jb {
        let (i, c) = (idx % l, idx / l);
        // SAFETY: (i, c) inside the panel and the shared slab.
        unsafe { device::st(p, idx as usize, device::ld(a as *const T, i as usize + c as usize * lda)) };
        idx += nt;
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };

    let mut k = 0u32;
    while k <= jb {
        // T's column q = k − 1 from Y(·, q) (made at step q) and T(0:q, 0:q).
        if k >= 2 {
            let q = k - 1;
            let i = nt - 1 - tid;
            if i < q {
                let mut acc = T::ZERO;
                let mut j = i;
                while j < q {
                    // SAFETY: T(i, j) (j ≥ i: upper, written at steps ≤ q) and Y(j, q) at
                    // ts(q, j), written at step q before its last barrier.
                    acc = unsafe { device::ld(ts as *const T, ti(i, j)) }
                        .mul_add(unsafe { device::ld(ts as *const T, ti(q, j)) }, acc);
                    j += 1;
                }
                // SAFETY: τ_q written at step q; T(i, q) read by no one before the next
                // barrier (T(·, q) is read from step q + 2 on).
                unsafe {
                    let tq = device::ld(taus as *const T, q as usize);
                    device::st(ts, ti(i, q), acc.mul(tq).neg());
                }
            }
        }
        if k == jb {
            break;
        }
        let kend = l.min(k + band + 1);
        // SAFETY: (k, k) inside the slab; written only after the barrier below.
        let alpha = unsafe { device::ld(p as *const T, pi(k, k)) };
        // (a) the warps' scaled partial sums of squares of x = A(k+1..kend, k).
        let mut mk = 0u32;
        let mut i = k + 1 + tid;
        while i < kend {
            // SAFETY: row i < kend ≤ rows of column k.
            mk = mk.max(unsafe { device::ld(p as *const T, pi(i, k)) }.max_key());
            i += nt;
        }
        // SAFETY: every warp is complete and convergent here (block-uniform loop).
        let sw = T::from_max_key(unsafe { device::warp_allmax_u32(mk) });
        // s_w: a power of two ≤ the warp's max |x| (0 without entries); x/s_w is exact.
        let (pw, iw) = sw.pow2_scale();
        let mut ss = T::ZERO;
        let mut i = k + 1 + tid;
        while i < kend {
            // SAFETY: as above.
            let y = unsafe { device::ld(p as *const T, pi(i, k)) }.mul(iw);
            ss = y.mul_add(y, ss);
            i += nt;
        }
        // SAFETY: as above.
        let ss = unsafe { reduce::warp_sum(ss) };
        if lane == 0 {
            // SAFETY: slots 2·warp, 2·warp + 1 < 64; one writer each.
            unsafe {
                device::st(part, 2 * warp as usize, pw);
                device::st(part, 2 * warp as usize + 1, ss);
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        // (b) every warp combines the partials of the warps that had rows (lane w holds
        // warp w's), the same way, so all threads agree bit for bit (a butterfly sum
        // gives every lane the same value): σ, β, τ, the scale of v's tail.
        let cnt = kend.saturating_sub(k + 1).min(nt);
        let active = cnt.div_ceil(32);
        let (pl, ql) = if lane < active {
            // SAFETY: written before the barrier.
            unsafe {
                (
                    device::ld(part as *const T, 2 * lane as usize),
                    device::ld(part as *const T, 2 * lane as usize + 1),
                )
            }
        } else {
            (T::ZERO, T::ZERO)
        };
        // SAFETY: every warp is complete and convergent here.
        let big = unsafe { device::warp_allmax_u32(pl.max_key()) };
        let (sc, ib) = T::from_max_key(big).pow2_scale();
        let r = pl.mul(ib);
        // SAFETY: as above.
        let acc = unsafe { reduce::warp_allsum(r.mul(r).mul(ql)) };
        // σ = sc·root; kept apart so that a subnormal σ is rebuilt exactly when scaled up.
        let root = acc.sqrt();
        let sigma = sc.mul(root);
        let (beta, tau_k, up, inv) = if sigma == T::ZERO {
            (alpha, T::ZERO, T::ZERO, T::ZERO)
        } else {
            let mu = alpha.hypot(sigma);
            let sub = mu < T::MIN_POSITIVE;
            let up = if sub {
                T::ONE.div(T::MIN_POSITIVE)
            } else {
                T::ONE
            };
            let (al, mu) = if sub {
                let al = alpha.mul(up);
                (al, al.hypot(sc.mul(up).mul(root)))
            } else {
                (alpha, mu)
            };
            let beta_s = mu.copysign(al).neg();
            let inv = T::ONE.div(al.sub(beta_s));
            let tau = beta_s.sub(al).div(beta_s);
            let beta = if sub {
                beta_s.mul(T::MIN_POSITIVE)
            } else {
                beta_s
            };
            (beta, tau, up, inv)
        };
        let mut i = k + 1 + tid;
        while i < kend {
            // SAFETY: this thread's rows of column k (the same rows as in phase a).
            unsafe {
                let x = device::ld(p as *const T, pi(i, k));
                device::st(p, pi(i, k), x.mul(up).mul(inv));
            }
            i += nt;
        }
        if tid == 0 {
            // SAFETY: (k, k) read by every thread before the barrier above; τ_k slots.
            unsafe {
                device::st(p, pi(k, k), beta);
                device::st(taus, k as usize, tau_k);
                device::st(ts, ti(k, k), tau_k);
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        // (c) jobs: update columns k+1..jb, then Y(j, k) for j < k.
        let ncol = jb - k - 1;
        let njobs = ncol + k;
        let mut job = warp;
        while job < njobs {
            if job < ncol {
                let c = k + 1 + job;
                // w = A(k, c) + Σ_{i>k} v_i·A(i, c)
                let mut s = if lane == 0 {
                    // SAFETY: (k, c) in the slab; column c is this warp's in this phase.
                    unsafe { device::ld(p as *const T, pi(k, c)) }
                } else {
                    T::ZERO
                };
                let mut i = k + 1 + lane;
                while i < kend {
                    // SAFETY: rows < kend of columns k (read-only now) and c.
                    s = unsafe { device::ld(p as *const T, pi(i, k)) }
                        .mul_add(unsafe { device::ld(p as *const T, pi(i, c)) }, s);
                    i += 32;
                }
                // SAFETY: the warp is complete and convergent (warp-uniform job).
                let w = unsafe { reduce::warp_allsum(s) };
                let ntw = tau_k.mul(w).neg();
                if lane == 0 {
                    // SAFETY: (k, c), this warp's column.
                    unsafe { device::st(p, pi(k, c), ntw.add(device::ld(p as *const T, pi(k, c)))) };
                }
                let mut i = k + 1 + lane;
                while i < kend {
                    // SAFETY: as above; each row of column c written by one lane.
                    unsafe {
                        let x = device::ld(p as *const T, pi(i, c));
                        device::st(p, pi(i, c), ntw.mul_add(device::ld(p as *const T, pi(i, k)), x));
                    }
                    i += 32;
                }
            } else {
                let j = job - ncol;
                // V(:, j) lives in rows j..=j+band; v_k in rows k..kend (k > j).
                let jend = kend.min(j + band + 1);
                let mut s = if lane == 0 && k < jend {
                    // SAFETY: V(k, j), a stored tail entry of column j (k > j).
                    unsafe { device::ld(p as *const T, pi(k, j)) }
                } else {
                    T::ZERO
                };
                let mut i = k + 1 + lane;
                while i < jend {
                    // SAFETY: rows < jend ≤ rows of columns j and k, read-only now.
                    s = unsafe { device::ld(p as *const T, pi(i, j)) }
                        .mul_add(unsafe { device::ld(p as *const T, pi(i, k)) }, s);
                    i += 32;
                }
                // SAFETY: warp-uniform job, the warp is convergent.
                let y = unsafe { reduce::warp_sum(s) };
                if lane == 0 {
                    // SAFETY: Y(j, k) at ts(k, j), k > j: one writer.
                    unsafe { device::st(ts, ti(k, j), y) };
                }
            }
            job += nwarps;
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        k += 1;
    }
    // SAFETY: block-uniform barrier: T's last column is written.
    unsafe { device::sync_threads() };
    let mut idx = tid;
    while idx < l * jb {
        let (i, c) = (idx % l, idx / l);
        // SAFETY: (i, c) inside the panel, V and the slab; one writer per element.
        unsafe {
            let x = device::ld(p as *const T, idx as usize);
            let r = if i <= c { x } else { T::ZERO };
            device::st(a, i as usize + c as usize * lda, r);
            let vv = if i < c {
                T::ZERO
            } else if i == c {
                T::ONE
            } else if i <= c + band {
                x
            } else {
                T::ZERO
            };
            device::st(v, i as usize + c as usize * ldv, vv);
        }
        idx += nt;
    }
    let mut idx = tid;
    while idx < jb * jb {
        let (i, c) = (idx % jb, idx / jb);
        // SAFETY: (i, c) inside T and the slab's T; one writer per element.
        unsafe {
            let x = if i <= c {
                device::ld(ts as *const T, ti(i, c))
            } else {
                T::ZERO
            };
            device::st(t, i as usize + c as usize * ldt, x);
        }
        if idx < jb {
            // SAFETY: τ has jb entries; one writer each.
            unsafe { device::st(tau, idx as usize, device::ld(taus as *const T, idx as usize)) };
        }
        idx += nt;
    }
}
