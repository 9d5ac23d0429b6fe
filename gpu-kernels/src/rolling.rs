//! Rolling and recursive least squares on the device
//! (docs/algorithms.md#rolling-least-squares): one thread walks one series over one
//! segment of time steps, holding the k×k triangular factor R of its window, d = Q₁ᵀy and
//! the residual norm ρ in registers (local memory for the general-k instance). The walk is
//! the CPU's (`host/src/cpu/rolling_series.rs`, `host/src/cpu/rolling.rs`) step for step:
//! the entering observation by k Givens rotations, the leaving one by the LINPACK-style
//! downdate with its refusal test, a refused downdate (and every `refresh` downdates)
//! refactorising the window from its data, and one back substitution per estimate. A
//! segment that does not start at t = 0 begins by factorising the window that ends just
//! before it, so segments are independent and the grid covers series × segments.

use crate::device::{self, Float};
use crate::small_r::{sqrt_f64, Window};

/// The instances with k = K exactly (registers); larger K takes k at run time.
pub const EXACT_MAX: usize = 8;

/// What a walk needs besides the data pointers (the validated plan of the host's
/// `WindowPlan`, plus the segment length). Scalars only.
#[derive(Clone, Copy)]
pub struct Plan {
    pub nobs: usize,
    pub series: usize,
    pub k: usize,
    pub per_series: bool,
    pub window: usize,
    pub min_nobs: usize,
    pub expanding: bool,
    pub skip_missing: bool,
    pub refresh: usize,
    pub seg_len: usize,
    /// Pitches (elements between time steps): y(t, s) at t·ld_y + s; x(t, s, j) at
    /// t·ld_x + s·k + j (t·ld_x + j when shared); params(t, s, j) at t·ld_p + s·k + j;
    /// rss(t, s) and flags(t, s) at t·ld_r + s.
    pub ld_y: usize,
    pub ld_x: usize,
    pub ld_p: usize,
    pub ld_r: usize,
    /// λ.
    pub forget: f64,
    /// λ^(window/2): the weight of the row leaving the window.
    pub leave_weight: f64,
    /// Relative rank tolerance; negative: the factorisation's default for the window.
    pub rank_tol: f64,
}

/// The observations (y: nobs × series; x: nobs × k or nobs × series × k, each time step
/// a row at the plan's pitch).
struct Data<T> {
    y: *const T,
    x: *const T,
    plan: Plan,
}

impl<T: Float> Data<T> {
    /// Element j of series `s`'s regressor row at time `t`.
    ///
    /// # Safety
    /// t < nobs, s < series, j < k (the kernel's contract makes x readable there).
    #[inline(always)]
    unsafe fn x(&self, t: usize, s: usize, j: usize) -> T {
        let p = &self.plan;
        let at = t * p.ld_x + if p.per_series { s * p.k } else { 0 };
        // SAFETY: in bounds by the caller's indices and the kernel's contract.
        unsafe { device::ld(self.x, at + j) }
    }

    /// y of series `s` at time `t`. Same safety as [`Data::x`].
    #[inline(always)]
    unsafe fn y(&self, t: usize, s: usize) -> T {
        // SAFETY: in bounds by the caller's indices and the kernel's contract.
        unsafe { device::ld(self.y, t * self.plan.ld_y + s) }
    }

    /// Whether y and the regressor row of series `s` at time `t` are finite.
    #[inline(always)]
    unsafe fn finite<const K: usize>(&self, t: usize, s: usize, k: usize) -> bool {
        // SAFETY: as the accessors.
        let mut ok = unsafe { self.y(t, s) }.is_finite();
        unroll!(j in ..K => {
            if j < k {
                // SAFETY: j < k.
                ok &= unsafe { self.x(t, s, j) }.is_finite();
            }
        });
        ok
    }
}

/// The row of series `s` at time `t` into `row` (zeros past k).
#[inline(always)]
unsafe fn load_row<T: Float, const K: usize>(
    data: &Data<T>,
    t: usize,
    s: usize,
    k: usize,
) -> [T; K] {
    let mut row = [T::ZERO; K];
    unroll!(j in ..K => {
        if j < k {
            // SAFETY: j < k, the caller's t and s are in range.
            row[j] = unsafe { data.x(t, s, j) };
        }
    });
    row
}

/// Factorises the window of series `s` that ends at `t` from its finite rows, each
/// weighted λ^(age/2); returns the window's (finite, non-finite) row counts.
#[inline(always)]
unsafe fn refactorise<T: Float, const K: usize>(
    data: &Data<T>,
    st: &mut Window<T, K>,
    s: usize,
    t: usize,
) -> (usize, usize) {
    let p = data.plan;
    st.clear();
    let lo = (t + 1).saturating_sub(p.window);
    let root = T::from_f64(sqrt_f64(p.forget));
    let mut wt = T::ONE;
    let (mut valid, mut invalid) = (0usize, 0usize);
    let mut i = t + 1;
    while i > lo {
        i -= 1;
        // SAFETY: lo ≤ i ≤ t < nobs; s < series.
        if unsafe { data.finite::<K>(i, s, p.k) } {
            // SAFETY: as above.
            let row = unsafe { load_row::<T, K>(data, i, s, p.k) };
            // SAFETY: as above.
            st.add_row(&row, unsafe { data.y(i, s) }, wt);
            valid += 1;
        } else {
            invalid += 1;
        }
        if p.forget < 1.0 {
            wt = wt.mul(root);
        }
    }
    (valid, invalid)
}

/// The outputs: params (nobs × series × k), rss (nobs × series), flags (nobs × series:
/// 1 where the window had enough observations but R failed the rank test) and the
/// counts (3 per thread: scheduled refactorisations, refactorisations after a failed
/// downdate, non-finite observations in the thread's segment).
struct Out<T> {
    params: *mut T,
    rss: *mut T,
    flags: *mut u8,
}

/// One thread's walk: series `s` over time steps `t0 .. t1` (see the module docs).
/// Returns the (scheduled, after a failed downdate) refactorisation counts and the
/// non-finite observations met at t0 .. t1.
#[inline(always)]
unsafe fn walk_segment<T: Float, const K: usize>(
    data: &Data<T>,
    out: &Out<T>,
    s: usize,
    t0: usize,
    t1: usize,
) -> (u32, u32, u32) {
    let p = data.plan;
    let (k, w) = (p.k, p.window);
    let root = T::from_f64(sqrt_f64(p.forget));
    let leave = T::from_f64(p.leave_weight);
    let nan = T::from_f64(f64::NAN);
    let mut st = Window::<T, K>::new(k);
    let (mut scheduled, mut failed, mut nonfinite) = (0u32, 0u32, 0u32);
    let (mut valid, mut invalid) = if t0 > 0 {
        // SAFETY: t0 − 1 < nobs.
        unsafe { refactorise(data, &mut st, s, t0 - 1) }
    } else {
        (0, 0)
    };
    let mut downdates = 0usize;
    for t in t0..t1 {
        if p.forget < 1.0 {
            st.scale(root);
        }
        // SAFETY: t < nobs, s < series (the kernel's bounds).
        if unsafe { data.finite::<K>(t, s, k) } {
            // SAFETY: as above.
            let row = unsafe { load_row::<T, K>(data, t, s, k) };
            // SAFETY: as above.
            st.add_row(&row, unsafe { data.y(t, s) }, T::ONE);
            valid += 1;
        } else {
            invalid += 1;
            nonfinite += 1;
        }
        if t >= w {
            let old = t - w;
            // SAFETY: old < t.
            if unsafe { data.finite::<K>(old, s, k) } {
                valid -= 1;
                // SAFETY: as above.
                let row = unsafe { load_row::<T, K>(data, old, s, k) };
                // SAFETY: as above.
                let y_old = unsafe { data.y(old, s) };
                let refused = leave != T::ZERO && !st.remove_row(&row, y_old, leave);
                downdates += 1;
                if refused || downdates >= p.refresh {
                    // SAFETY: t < nobs.
                    unsafe { refactorise(data, &mut st, s, t) };
                    if refused {
                        failed += 1;
                    } else {
                        scheduled += 1;
                    }
                    downdates = 0;
                }
            } else {
                invalid -= 1;
            }
        }
        let mut beta = [nan; K];
        let mut rss = nan;
        let mut flag = 0u8;
        let started = t + 1 >= w || (p.expanding && t + 1 >= p.min_nobs);
        let enough = valid >= p.min_nobs && valid >= k;
        if started && enough && !(p.skip_missing && invalid > 0) {
            let tol = if p.rank_tol >= 0.0 {
                p.rank_tol
            } else {
                // `default_rank_tol`: max(m, n)·u/√min(m, n).
                let (big, small) = if valid >= k { (valid, k) } else { (k, valid) };
                big as f64 * T::UNIT_ROUNDOFF / sqrt_f64(small.max(1) as f64)
            };
            let mut sol = [T::ZERO; K];
            if st.solve(tol, &mut sol) {
                beta = sol;
                rss = st.rho.mul(st.rho);
            } else {
                flag = 1;
            }
        }
        let at = t * p.ld_p + s * k;
        unroll!(j in ..K => {
            if j < k {
                // SAFETY: (t, s, j) is inside params by the kernel's contract.
                unsafe { device::st(out.params, at + j, beta[j]) };
            }
        });
        // SAFETY: (t, s) is inside rss and flags by the kernel's contract.
        unsafe {
            device::st(out.rss, t * p.ld_r + s, rss);
            device::st(out.flags, t * p.ld_r + s, flag);
        }
    }
    (scheduled, failed, nonfinite)
}

/// `rolling_walk_k<K>` (and `rolling_walk_general` with K = 16 and k ≤ 16 at run time):
/// thread i = seg·series + s walks series s over time steps seg·seg_len ..
/// min((seg + 1)·seg_len, nobs). Grid ⌈series·segments/128⌉, block 128.
///
/// # Safety
/// With the pitches of [`Plan`] (ld_y ≥ series, ld_x ≥ k or series·k, ld_p ≥ series·k,
/// ld_r ≥ series): `y` readable for (nobs − 1)·ld_y + series elements, `x` for
/// (nobs − 1)·ld_x + k (shared) or + series·k (per series); `params` writable for
/// (nobs − 1)·ld_p + series·k, `rss` and `flags` for (nobs − 1)·ld_r + series, `counts` for
/// 3·series·⌈nobs/seg_len⌉; outputs do not overlap inputs or each other; k ≤ K, k ≥ 1,
/// window ≥ 1, seg_len ≥ 1, refresh ≥ 1.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn walk<T: Float, const K: usize>(
    y: *const T,
    x: *const T,
    plan: Plan,
    params: *mut T,
    rss: *mut T,
    flags: *mut u8,
    counts: *mut u32,
) {
    let mut plan = plan;
    let i = device::global_x();
    let segments = plan.nobs.div_ceil(plan.seg_len);
    if i >= plan.series * segments || plan.k > K || (K <= EXACT_MAX && plan.k != K) {
        return;
    }
    if K <= EXACT_MAX {
        // The exact instances: k is the constant K, so every loop unrolls and the
        // window lives in registers.
        plan.k = K;
    }
    let (seg, s) = (i / plan.series, i % plan.series);
    let t0 = seg * plan.seg_len;
    let t1 = (t0 + plan.seg_len).min(plan.nobs);
    let data = Data { y, x, plan };
    let out = Out { params, rss, flags };
    // SAFETY: s < series, t0 < t1 ≤ nobs; the contract covers every access.
    let (scheduled, failed, nonfinite) = unsafe { walk_segment::<T, K>(&data, &out, s, t0, t1) };
    // SAFETY: i < series·segments.
    unsafe {
        device::st(counts, 3 * i, scheduled);
        device::st(counts, 3 * i + 1, failed);
        device::st(counts, 3 * i + 2, nonfinite);
    }
}

/// Builds the [`Plan`] from the kernel's scalar arguments and runs [`walk`] with K
/// columns. `bits`: 1 per-series X, 2 expanding, 4 skip windows with missing values.
///
/// # Safety
/// As [`walk`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn walk_entry<T: Float, const K: usize>(
    y: *const T,
    x: *const T,
    nobs: usize,
    series: usize,
    k: usize,
    seg_len: usize,
    ld_y: usize,
    ld_x: usize,
    ld_p: usize,
    ld_r: usize,
    window: usize,
    min_nobs: usize,
    refresh: usize,
    bits: u32,
    forget: f64,
    leave_weight: f64,
    rank_tol: f64,
    params: *mut T,
    rss: *mut T,
    flags: *mut u8,
    counts: *mut u32,
) {
    let plan = Plan {
        nobs,
        series,
        k,
        per_series: bits & 1 != 0,
        window,
        min_nobs,
        expanding: bits & 2 != 0,
        skip_missing: bits & 4 != 0,
        refresh,
        seg_len,
        ld_y,
        ld_x,
        ld_p,
        ld_r,
        forget,
        leave_weight,
        rank_tol,
    };
    // SAFETY: the caller's contract is `walk`'s.
    unsafe { walk::<T, K>(y, x, plan, params, rss, flags, counts) }
}
