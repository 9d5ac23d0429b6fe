//! One-block Householder panel for short panels (docs/algorithms.md#blocked-householder-qr;
//! the band of docs/algorithms.md#column-deletion):
//! the rows×jb panel is loaded into shared memory and factored there by one block, with
//! one block barrier a column and no grid barrier. It gives what
//! [`crate::fused_panel::qr`] gives — R in place with exact zeros below the diagonal, V
//! with an explicit unit diagonal and zeros above it, τ, and T (the `larft` block
//! reflector, τ ≥ 0) — for panels whose rows fit one block's shared memory: the band
//! panels of column deletion (band + jb rows), the stacked panels of row insertion,
//! the p new columns of column insertion, the last panels of a factorisation. The
//! cooperative kernel pays a grid barrier and a round of L2 loads a column (≈ 4 µs a
//! column on such panels, H100).
//!
//! Reflector 0 is made by warp 0 before the loop. Step k (reflector k ready in shared
//! memory; column c's rows k..kend, kend = min(rows, k + band + 1)):
//! * warp 0 applies reflector k to column k + 1 (w = v·A(k..kend, k+1), one warp with
//!   lanes over rows and a butterfly sum; A −= τ·w·v) and at once makes reflector k + 1
//!   from that column: a power-of-two scale S of max |x| (an integer `redux.sync.max`
//!   of order keys), σ = S·√Σ(x/S)², then β, τ and 1/(α − β) as
//!   `cpu::householder::house` (σ = 0: τ = 0, β = α; a subnormal ‖(α, σ)‖ scaled up by
//!   1/MIN_POSITIVE first, as LAPACK `xLARFG`), v's tail scaled in place, β and τ
//!   stored;
//! * the other warps apply reflector k to columns k + 2.. (one column a job);
//! * one block barrier.
//!
//! After the loop, Y(j, k) = V(:, j)·V(:, k) for j < k (one warp a pair, lanes over
//! rows; kept in T's strictly lower triangle, transposed), then T by recursive doubling:
//! at width s = 1, 2, 4, … each pair of neighbouring finished blocks B₁, B₂ gets
//! T₁₂ = −T₁₁·Y₁₂·T₂₂ (the merge of two block reflectors), in two products with a
//! barrier between, so T costs log₂ jb rounds instead of jb dependent columns.
use crate::device;
use crate::fused_panel::Pow2;
use crate::reduce;

/// Widest panel the kernel takes.
pub const MAX_JB: usize = 64;
/// Shared scratch besides the panel (rows·jb) and T (jb·jb), in `T`s: τ (MAX_JB).
pub const SCRATCH: usize = MAX_JB;
/// Fewest threads a block of the kernel needs (T's doubling keeps up to
/// 1024 / MIN_THREADS products a thread in registers).
pub const MIN_THREADS: usize = 256;

/// Reflector `k` of the panel `p` (ld `l`) made by the calling warp from column k's rows
/// k..kend (see the module doc): v's tail scaled in place, β at (k, k), τ_k in `taus`
/// and on T's diagonal in `ts` (ld `jb`).
///
/// # Safety
/// All 32 lanes of one warp call it together; column k's rows k..kend are in the slab
/// and no other thread touches them, τ_k or T(k, k) until the next block barrier; the
/// lanes' earlier writes to column k are ordered before this call (`sync_warp`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn reflector<T: Pow2>(
    p: *mut T,
    l: u32,
    k: u32,
    kend: u32,
    lane: u32,
    taus: *mut T,
    ts: *mut T,
    jb: u32,
) {
    let pi = |i: u32, c: u32| (i + c * l) as usize;
    // SAFETY: (k, k) in the slab (caller).
    let alpha = unsafe { device::ld(p as *const T, pi(k, k)) };
    let mut mk = 0u32;
    let mut i = k + 1 + lane;
    while i < kend {
        // SAFETY: rows < kend of column k (caller).
        mk = mk.max(unsafe { device::ld(p as *const T, pi(i, k)) }.max_key());
        i += 32;
    }
    // SAFETY: the whole warp is here, convergent (caller).
    let big = unsafe { device::warp_allmax_u32(mk) };
    // S: a power of two ≤ max |x| (0 without entries); x/S is exact.
    let (sc, isc) = T::from_max_key(big).pow2_scale();
    let mut ss = T::ZERO;
    let mut i = k + 1 + lane;
    while i < kend {
        // SAFETY: as above.
        let y = unsafe { device::ld(p as *const T, pi(i, k)) }.mul(isc);
        ss = y.mul_add(y, ss);
        i += 32;
    }
    // SAFETY: as above; the butterfly gives every lane the same sum.
    let acc = unsafe { reduce::warp_allsum(ss) };
    // σ = S·root; kept apart so that a subnormal σ is rebuilt exactly when scaled up.
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
    let mut i = k + 1 + lane;
    while i < kend {
        // SAFETY: this lane's rows of column k, read above by this lane only.
        unsafe {
            let x = device::ld(p as *const T, pi(i, k));
            device::st(p, pi(i, k), x.mul(up).mul(inv));
        }
        i += 32;
    }
    // SAFETY: the whole warp is here, convergent: every lane's read of (k, k) above is
    // ordered before lane 0 overwrites it.
    unsafe { device::sync_warp() };
    if lane == 0 {
        // SAFETY: (k, k) was read by every lane before the warp barrier; τ_k and T(k, k)
        // are this warp's alone until the block barrier.
        unsafe {
            device::st(p, pi(k, k), beta);
            device::st(taus, k as usize, tau_k);
            device::st(ts, (k + k * jb) as usize, tau_k);
        }
    }
}

/// `small_panel_qr`: factors the rows×jb panel at `a` (column-major, ld `lda`) in place
/// (R: upper triangle, exact zeros below), writing V (rows×jb, ld `ldv`: unit diagonal,
/// zeros above, zeros below row j + band in column j), τ (jb) and T (jb×jb, ld `ldt`,
/// upper triangular, zeros below). Reflector j touches rows j..=min(j + band, rows − 1)
/// (band ≥ rows: unbanded); entries of column j below that are taken as zero.
///
/// # Safety
/// Grid 1; block a multiple of 32 threads, at least [`MIN_THREADS`] and at most 1024;
/// dynamic shared memory of (rows·jb + jb·jb + [`SCRATCH`]) `T`s; 1 ≤ jb ≤ min(rows,
/// [`MAX_JB`]); rows·jb < 2³²; the panel, V, τ and T are valid, distinct device memory
/// of the stated shapes, and nothing else touches them during the launch.
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
    let taus = ts.wrapping_add((jb * jb) as usize);
    let sp = Smem {
        p,
        ts,
        taus,
        l,
        jb,
        band,
    };

    let mut idx = tid;
    while idx < l * jb {
        let (i, c) = (idx % l, idx / l);
        // SAFETY: (i, c) inside the panel and the shared slab.
        unsafe {
            device::st(
                p,
                idx as usize,
                device::ld(a as *const T, i as usize + c as usize * lda),
            )
        };
        idx += nt;
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    if warp == 0 {
        // SAFETY: warp 0 whole; column 0 is its alone until the barrier.
        unsafe { reflector(p, l, 0, sp.kend_of(0), lane, taus, ts, jb) };
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };

    // SAFETY (of the phases): every thread of the block runs each (block barriers
    // inside); the shared memory is laid out as `sp` says (launch contract).
    unsafe {
        factor(&sp, lane, warp, nwarps);
        gram(&sp, lane, warp, nwarps);
        doubling(&sp, tid, nt);
        write_back(&sp, a, lda, v, ldv, tau, t, ldt, tid, nt);
    }
}

/// The panel's shared memory: the rows×jb panel `p` (ld l), then T with Y in its
/// strictly lower triangle (`ts`, ld jb), then τ (`taus`).
#[derive(Clone, Copy)]
struct Smem<T> {
    p: *mut T,
    ts: *mut T,
    taus: *mut T,
    l: u32,
    jb: u32,
    band: u32,
}

impl<T> Smem<T> {
    /// Offset of panel entry (i, c).
    #[inline(always)]
    fn pi(&self, i: u32, c: u32) -> usize {
        (i + c * self.l) as usize
    }

    /// Offset of T's (or Y's) entry (i, c).
    #[inline(always)]
    fn ti(&self, i: u32, c: u32) -> usize {
        (i + c * self.jb) as usize
    }

    /// End of reflector k's rows: min(rows, k + band + 1).
    #[inline(always)]
    fn kend_of(&self, k: u32) -> u32 {
        self.l.min(k + self.band + 1)
    }
}

/// Steps k = 0..jb−1 of the module doc: warp 0 applies reflector k to column k + 1 and
/// makes reflector k + 1 from it, the other warps apply reflector k to columns k + 2..;
/// one block barrier a step. Reflector 0 is made before.
///
/// # Safety
/// Every thread of the block calls it; the panel and reflector 0 are in shared memory
/// (`sp`) and published by a block barrier.
#[inline(always)]
unsafe fn factor<T: Pow2>(sp: &Smem<T>, lane: u32, warp: u32, nwarps: u32) {
    let (p, ts, taus, l, jb) = (sp.p, sp.ts, sp.taus, sp.l, sp.jb);
    let pi = |i: u32, c: u32| sp.pi(i, c);
    let kend_of = |k: u32| sp.kend_of(k);
    let mut k = 0u32;
    while k + 1 < jb {
        let kend = kend_of(k);
        // SAFETY: τ_k written before the last barrier.
        let tau_k = unsafe { device::ld(taus as *const T, k as usize) };
        // Job j: column k + 1 + j. Job 0 (then reflector k + 1) is warp 0's alone when
        // there are other warps; they share the rest.
        let ncol = jb - k - 1;
        let (mut job, stride) = if nwarps == 1 {
            (0, 1)
        } else if warp == 0 {
            (0, ncol)
        } else {
            (warp, nwarps - 1)
        };
        while job < ncol {
            let c = k + 1 + job;
            // w = A(k, c) + Σ_{i>k} v_i·A(i, c)
            let mut sum = if lane == 0 {
                // SAFETY: (k, c) in the slab; column c is this warp's in this step.
                unsafe { device::ld(p as *const T, pi(k, c)) }
            } else {
                T::ZERO
            };
            let mut i = k + 1 + lane;
            while i < kend {
                // SAFETY: rows < kend of columns k (read-only in this step) and c.
                sum = unsafe { device::ld(p as *const T, pi(i, k)) }
                    .mul_add(unsafe { device::ld(p as *const T, pi(i, c)) }, sum);
                i += 32;
            }
            // SAFETY: the warp is complete and convergent (warp-uniform job).
            let w = unsafe { reduce::warp_allsum(sum) };
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
                    device::st(
                        p,
                        pi(i, c),
                        ntw.mul_add(device::ld(p as *const T, pi(i, k)), x),
                    );
                }
                i += 32;
            }
            if job == 0 {
                // SAFETY: the lanes' writes to column k + 1 above are ordered before the
                // reflector reads them; the warp is convergent; column k + 1 is this
                // warp's alone in this step.
                unsafe {
                    device::sync_warp();
                    reflector(p, l, k + 1, kend_of(k + 1), lane, taus, ts, jb);
                }
            }
            job += stride;
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        k += 1;
    }
}

/// Y(j, k) = V(:, j)·V(:, k) for j < k, kept at T's slot (k, j) (strictly lower,
/// transposed); ends with a block barrier.
///
/// # Safety
/// Every thread of the block calls it; V is final in shared memory (`sp`).
#[inline(always)]
unsafe fn gram<T: Pow2>(sp: &Smem<T>, lane: u32, warp: u32, nwarps: u32) {
    let (p, ts, jb) = (sp.p, sp.ts, sp.jb);
    let pi = |i: u32, c: u32| sp.pi(i, c);
    let ti = |i: u32, c: u32| sp.ti(i, c);
    let kend_of = |k: u32| sp.kend_of(k);
    // Y(j, k) = V(:, j)·V(:, k) for j < k: one warp a pair, lanes over rows. V(:, k) is
    // 1 at row k and the stored tail below it (rows < kend_of(k)); V(:, j) is the stored
    // tail at rows j < i < kend_of(j).
    let npairs = jb * jb;
    let mut pair = warp;
    while pair < npairs {
        let (j, kk) = (pair % jb, pair / jb);
        if j < kk {
            let jend = kend_of(j);
            let end = jend.min(kend_of(kk));
            let mut sum = if lane == 0 && kk < jend {
                // SAFETY: V(kk, j), a stored tail entry of column j.
                unsafe { device::ld(p as *const T, pi(kk, j)) }
            } else {
                T::ZERO
            };
            let mut i = kk + 1 + lane;
            while i < end {
                // SAFETY: rows < end of columns j and kk, read-only now.
                sum = unsafe { device::ld(p as *const T, pi(i, j)) }
                    .mul_add(unsafe { device::ld(p as *const T, pi(i, kk)) }, sum);
                i += 32;
            }
            // SAFETY: warp-uniform pair, the warp is convergent.
            let y = unsafe { reduce::warp_sum(sum) };
            if lane == 0 {
                // SAFETY: Y(j, kk) at ts(kk, j), kk > j: one writer.
                unsafe { device::st(ts, ti(kk, j), y) };
            }
        }
        pair += nwarps;
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
}

/// T from τ (its diagonal) and Y by recursive doubling (the module doc).
///
/// # Safety
/// Every thread of the block calls it, with at least [`MIN_THREADS`] threads; Y is
/// final in shared memory (`sp`).
#[inline(always)]
unsafe fn doubling<T: Pow2>(sp: &Smem<T>, tid: u32, nt: u32) {
    let (ts, jb) = (sp.ts, sp.jb);
    let ti = |i: u32, c: u32| sp.ti(i, c);
    // T by recursive doubling: blocks of width s are finished; each pair B₁ = [a, a+s),
    // B₂ = [a+s, min(a+2s, jb)) gets T₁₂ = Z·T₂₂ with Z = −T₁₁·Y₁₂ (Z over Y₁₂'s slots).
    // At most npairs·s² ≤ 1024 products a round, so ≤ 4 a thread (nt ≥ MIN_THREADS).
    let mut s = 1u32;
    while s < jb {
        let items = jb.div_ceil(2 * s) * s * s;
        let at = |slot: u32| -> Option<(u32, u32, u32)> {
            let idx = tid + slot * nt;
            if idx >= items {
                return None;
            }
            let (pr, rem) = (idx / (s * s), idx % (s * s));
            let a0 = pr * 2 * s;
            let (i, kk) = (a0 + rem % s, a0 + s + rem / s);
            (kk < jb).then_some((a0, i, kk))
        };
        let mut z = [T::ZERO; 4];
        for (slot, zs) in z.iter_mut().enumerate() {
            if let Some((a0, i, kk)) = at(slot as u32) {
                let mut acc = T::ZERO;
                let mut j = i;
                while j < a0 + s {
                    // SAFETY: T(i, j) (upper, block B₁ finished) and Y(j, kk) at ts(kk, j).
                    acc = unsafe { device::ld(ts as *const T, ti(i, j)) }
                        .mul_add(unsafe { device::ld(ts as *const T, ti(kk, j)) }, acc);
                    j += 1;
                }
                *zs = acc.neg();
            }
        }
        // SAFETY: block-uniform barrier: every read of Y₁₂ is done.
        unsafe { device::sync_threads() };
        for (slot, zs) in z.iter().enumerate() {
            if let Some((_, i, kk)) = at(slot as u32) {
                // SAFETY: Z(i, kk) over Y(i, kk)'s slot; one writer.
                unsafe { device::st(ts, ti(kk, i), *zs) };
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        for slot in 0..4u32 {
            if let Some((a0, i, kk)) = at(slot) {
                let mut acc = T::ZERO;
                let mut c = a0 + s;
                while c <= kk {
                    // SAFETY: Z(i, c) at ts(c, i) (written above) and T(c, kk) (upper,
                    // block B₂ finished).
                    acc = unsafe { device::ld(ts as *const T, ti(c, i)) }
                        .mul_add(unsafe { device::ld(ts as *const T, ti(c, kk)) }, acc);
                    c += 1;
                }
                // SAFETY: T(i, kk) in the upper triangle, read by no one this round.
                unsafe { device::st(ts, ti(i, kk), acc) };
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        s *= 2;
    }
}

/// Writes R (exact zeros below the diagonal) over the panel, V (unit diagonal, zeros
/// above and below the band), T (zeros below) and τ.
///
/// # Safety
/// As [`qr`]'s contract for `a`, `v`, `tau`, `t`; the factorisation is final in shared
/// memory (`sp`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn write_back<T: Pow2>(
    sp: &Smem<T>,
    a: *mut T,
    lda: usize,
    v: *mut T,
    ldv: usize,
    tau: *mut T,
    t: *mut T,
    ldt: usize,
    tid: u32,
    nt: u32,
) {
    let (p, ts, taus, l, jb, band) = (sp.p, sp.ts, sp.taus, sp.l, sp.jb, sp.band);
    let ti = |i: u32, c: u32| sp.ti(i, c);
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
            unsafe {
                device::st(
                    tau,
                    idx as usize,
                    device::ld(taus as *const T, idx as usize),
                )
            };
        }
        idx += nt;
    }
}
