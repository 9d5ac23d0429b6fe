//! Batched R-only least-squares states on the device (docs/algorithms.md#batched-states):
//! B problems of n ≤ 16 columns and one right-hand side, each an n×n upper-triangular R
//! (row-major), d = Q₁ᵀb and the residual norm ρ, one problem a thread in registers
//! ([`Window`]). One launch applies one step to every problem: optionally start from an
//! empty state, scale by s (forgetting), fold rows in, downdate rows out, and optionally
//! solve. A problem whose step is refused (non-finite data, a refused downdate) is written
//! back unchanged and reports why in `status`.

use crate::device::{self, Float};
use crate::small_r::{Window, sqrt_f64};

/// `status` codes.
pub const OK: u32 = 0;
/// A downdate that the refusal test turned down.
pub const DOWNDATE_REFUSED: u32 = 1;
/// A NaN or ±∞ in the problem's rows or right-hand sides.
pub const NON_FINITE: u32 = 2;
/// The step was made, but R failed the solve's rank test (x is NaN).
pub const RANK_DEFICIENT: u32 = 3;

/// Bits of the step.
const CLEAR: u32 = 1;
const SOLVE: u32 = 2;

/// The pointers of one step (see [`step`]).
struct Buffers<T> {
    r_in: *const T,
    d_in: *const T,
    rho_in: *const T,
    r_out: *mut T,
    d_out: *mut T,
    rho_out: *mut T,
    rows_in: *const T,
    rhs_in: *const T,
    rows_out: *const T,
    rhs_out: *const T,
}

/// Row `r` of problem `i` of a B × p × n block (and its right-hand side), zeros past n.
///
/// # Safety
/// `rows` holds (i·p + r + 1)·n elements and `rhs` i·p + r + 1.
#[inline(always)]
unsafe fn row<T: Float, const K: usize>(
    rows: *const T,
    rhs: *const T,
    (i, p, r, n): (usize, usize, usize, usize),
) -> ([T; K], T) {
    let mut x = [T::ZERO; K];
    unroll!(j in ..K => {
        if j < n {
            // SAFETY: (i·p + r)·n + j is inside `rows` (caller).
            x[j] = unsafe { device::ld(rows, (i * p + r) * n + j) };
        }
    });
    // SAFETY: inside `rhs` (caller).
    (x, unsafe { device::ld(rhs, i * p + r) })
}

/// Whether every row of problem `i` in a B × p × n block and its right-hand sides is
/// finite. Same safety as [`row`] for every r < p.
#[inline(always)]
unsafe fn block_finite<T: Float, const K: usize>(
    rows: *const T,
    rhs: *const T,
    (i, p, n): (usize, usize, usize),
) -> bool {
    let mut ok = true;
    for r in 0..p {
        // SAFETY: r < p.
        let (x, y) = unsafe { row::<T, K>(rows, rhs, (i, p, r, n)) };
        ok &= y.is_finite();
        unroll!(j in ..K => {
            ok &= x[j].is_finite();
        });
    }
    ok
}

/// Loads problem `i`'s state.
///
/// # Safety
/// `r_in`, `d_in`, `rho_in` hold B·n·n, B·n and B elements, i < B, n ≤ K.
#[inline(always)]
unsafe fn load<T: Float, const K: usize>(b: &Buffers<T>, i: usize, n: usize) -> Window<T, K> {
    let mut st = Window::<T, K>::new(n);
    unroll!(a in ..K => {
        unroll!(c in ..K => {
            if a < n && c < n && c >= a {
                // SAFETY: inside r_in (contract).
                st.r[a][c] = unsafe { device::ld(b.r_in, (i * n + a) * n + c) };
            }
        });
        if a < n {
            // SAFETY: inside d_in (contract).
            st.d[a] = unsafe { device::ld(b.d_in, i * n + a) };
        }
    });
    // SAFETY: inside rho_in (contract).
    st.rho = unsafe { device::ld(b.rho_in, i) };
    st
}

/// Stores problem `i`'s state (the strict lower triangle of R as zeros).
///
/// # Safety
/// As [`load`], for the outputs.
#[inline(always)]
unsafe fn store<T: Float, const K: usize>(b: &Buffers<T>, i: usize, n: usize, st: &Window<T, K>) {
    unroll!(a in ..K => {
        unroll!(c in ..K => {
            if a < n && c < n {
                let v = if c >= a { st.r[a][c] } else { T::ZERO };
                // SAFETY: inside r_out (contract).
                unsafe { device::st(b.r_out, (i * n + a) * n + c, v) };
            }
        });
        if a < n {
            // SAFETY: inside d_out (contract).
            unsafe { device::st(b.d_out, i * n + a, st.d[a]) };
        }
    });
    // SAFETY: inside rho_out (contract).
    unsafe { device::st(b.rho_out, i, st.rho) };
}

/// The step of problem `i` (see [`step`]); returns the state to store and the status.
///
/// # Safety
/// As [`step`], for problem i.
#[inline(always)]
unsafe fn one<T: Float, const K: usize>(
    b: &Buffers<T>,
    i: usize,
    (n, p_in, p_out): (usize, usize, usize),
    bits: u32,
    scale: T,
) -> (Window<T, K>, u32) {
    // SAFETY: the contract covers problem i's state and blocks.
    let old = if bits & CLEAR != 0 {
        Window::<T, K>::new(n)
    } else {
        unsafe { load::<T, K>(b, i, n) }
    };
    // SAFETY: as above.
    let finite = unsafe {
        block_finite::<T, K>(b.rows_in, b.rhs_in, (i, p_in, n))
            && block_finite::<T, K>(b.rows_out, b.rhs_out, (i, p_out, n))
    };
    if !finite {
        return (old, NON_FINITE);
    }
    let mut st = Window::<T, K>::new(n);
    st.r = old.r;
    st.d = old.d;
    st.rho = old.rho;
    if scale != T::ONE {
        st.scale(scale);
    }
    for r in 0..p_in {
        // SAFETY: r < p_in.
        let (x, y) = unsafe { row::<T, K>(b.rows_in, b.rhs_in, (i, p_in, r, n)) };
        st.add_row(&x, y, T::ONE);
    }
    for r in 0..p_out {
        // SAFETY: r < p_out.
        let (x, y) = unsafe { row::<T, K>(b.rows_out, b.rhs_out, (i, p_out, r, n)) };
        if !st.remove_row(&x, y, T::ONE) {
            return (old, DOWNDATE_REFUSED);
        }
    }
    (st, OK)
}

/// Solves Rx = d of `st` (problem `i`, n columns standing for `m_rows` rows) into `x` (B ×
/// n) with ρ² into `rss`, when every |R_jj| > tol·‖R‖_F (tol = `rank_tol`, or when negative
/// max(m, n)·u/√min(m, n)); otherwise NaN. Returns whether it solved.
///
/// # Safety
/// `x` holds B·n and `rss` B writable elements, i < B.
#[inline(always)]
unsafe fn solve_into<T: Float, const K: usize>(
    st: &Window<T, K>,
    (i, n, m_rows): (usize, usize, usize),
    rank_tol: f64,
    (x, rss): (*mut T, *mut T),
) -> bool {
    let tol = if rank_tol >= 0.0 {
        rank_tol
    } else {
        let (big, small) = if m_rows >= n {
            (m_rows, n)
        } else {
            (n, m_rows)
        };
        big as f64 * T::UNIT_ROUNDOFF / sqrt_f64(small.max(1) as f64)
    };
    let nan = T::from_f64(f64::NAN);
    // Zeros past n: the back substitution multiplies them by R's zero entries.
    let mut sol = [T::ZERO; K];
    let mut res = nan;
    let ok = st.solve(tol, &mut sol);
    if ok {
        res = st.rho.mul(st.rho);
    } else {
        sol = [nan; K];
    }
    unroll!(j in ..K => {
        if j < n {
            // SAFETY: inside x (contract).
            unsafe { device::st(x, i * n + j, sol[j]) };
        }
    });
    // SAFETY: inside rss (contract).
    unsafe { device::st(rss, i, res) };
    ok
}

/// `batch_r_step_k<K>` (and `batch_r_step_general` with K = 16, n ≤ 16 at run time):
/// thread i < B takes problem i's state from (`r_in`, `d_in`, `rho_in`) — or an empty one
/// when `bits` & 1 — scales it by `scale`, folds in its p_in rows (`rows_in`, B × p_in × n
/// row-major, right-hand sides `rhs_in`, B × p_in), downdates its p_out rows (`rows_out`,
/// `rhs_out`), and stores the result in (`r_out`, `d_out`, `rho_out`), or the state it
/// started from when a row is not finite or a downdate is refused (`status[i]` says
/// which). With `bits` & 2 it then solves Rx = d into `x` (B × n) when every |R_jj| >
/// tol·‖R‖_F, tol = `rank_tol` or, when negative, max(m, n)·u/√min(m, n) for `m_rows`
/// rows; otherwise x is NaN and the status [`RANK_DEFICIENT`]; `rss[i]` = ρ² (NaN where x
/// is). Grid ⌈B/128⌉, block 128.
///
/// # Safety
/// 1 ≤ n ≤ K; `r_in`/`r_out` hold B·n·n elements, `d_in`/`d_out` B·n, `rho_in`/`rho_out` B
/// (outputs distinct from inputs), `rows_in` B·p_in·n and `rhs_in` B·p_in, `rows_out`
/// B·p_out·n and `rhs_out` B·p_out (readable; any pointer when its count is 0), `status` B
/// writable, and with the solve bit `x` B·n and `rss` B writable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn step<T: Float, const K: usize>(
    r_in: *const T,
    d_in: *const T,
    rho_in: *const T,
    r_out: *mut T,
    d_out: *mut T,
    rho_out: *mut T,
    rows_in: *const T,
    rhs_in: *const T,
    rows_out: *const T,
    rhs_out: *const T,
    batch: usize,
    n: usize,
    p_in: usize,
    p_out: usize,
    bits: u32,
    scale: f64,
    rank_tol: f64,
    m_rows: usize,
    x: *mut T,
    rss: *mut T,
    status: *mut u32,
) {
    let i = device::global_x();
    if i >= batch || n > K || (K <= crate::rolling::EXACT_MAX && n != K) {
        return;
    }
    let n = if K <= crate::rolling::EXACT_MAX { K } else { n };
    let b = Buffers {
        r_in,
        d_in,
        rho_in,
        r_out,
        d_out,
        rho_out,
        rows_in,
        rhs_in,
        rows_out,
        rhs_out,
    };
    // SAFETY: i < batch; the contract covers every access of problem i.
    let (st, mut code) = unsafe { one::<T, K>(&b, i, (n, p_in, p_out), bits, T::from_f64(scale)) };
    // SAFETY: as above.
    unsafe { store::<T, K>(&b, i, n, &st) };
    // SAFETY: the solve bit's buffers (contract), i < batch.
    let solved =
        bits & SOLVE == 0 || unsafe { solve_into::<T, K>(&st, (i, n, m_rows), rank_tol, (x, rss)) };
    if !solved && code == OK {
        code = RANK_DEFICIENT;
    }
    // SAFETY: i < batch.
    unsafe { device::st(status, i, code) };
}

/// The source of one output row or column of [`gather`]: `map` ≥ 0 is a row (column) of
/// the old block, −1 − `map` one of the extra block.
#[inline(always)]
fn source(map: i32) -> (usize, bool) {
    if map >= 0 {
        (map as usize, false)
    } else {
        ((-1 - map) as usize, true)
    }
}

/// `batch_r_gather`: the kept rows of B problems rebuilt (docs/algorithms.md#batched-states):
/// thread t < B·m_out takes row i = t mod m_out of problem k = t / m_out and writes
/// `out[(k·m_out + i)·n_out + j]` for j < n_out from the row `maps[i]` and the column
/// `maps[m_out + j]` (see [`source`]): an entry of the old block `old` (B × m_old × n_old,
/// row-major) times `scale`, or, where either map points at the extra block, the entry
/// `extra[k·extra_ld + r·extra_row + c·extra_col]` unscaled; then adds Σ_t u[k, i, t]·v[k,
/// j, t] over t < kk (u B × m_out × kk, v B × n_out × kk, row-major: a rank-k term). With
/// `masked` ≠ 0 only the problems with `mask[k]` ≠ 0 are written (putting refused
/// problems' rows back). Grid ⌈B·m_out/128⌉, block 128.
///
/// # Safety
/// `maps` holds m_out + n_out entries, each an old row (column) below m_old (n_old) or an
/// extra one inside `extra` for every problem; `old` holds B·m_old·n_old elements, `out`
/// B·m_out·n_out (writable, not overlapping the inputs); `u` and `v` B·m_out·kk and
/// B·n_out·kk when kk > 0; `mask` B when `masked` ≠ 0 (any pointer otherwise, as for
/// `extra` when no map points at it).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn gather<T: Float>(
    old: *const T,
    m_old: usize,
    n_old: usize,
    out: *mut T,
    m_out: usize,
    n_out: usize,
    batch: usize,
    maps: *const i32,
    extra: *const T,
    extra_ld: usize,
    extra_row: usize,
    extra_col: usize,
    scale: f64,
    u: *const T,
    v: *const T,
    kk: usize,
    mask: *const u32,
    masked: u32,
) {
    let t = device::global_x();
    if m_out == 0 || t >= batch * m_out {
        return;
    }
    let (k, i) = (t / m_out, t % m_out);
    // SAFETY: k < batch (contract for `mask`).
    if masked != 0 && unsafe { device::ld(mask, k) } == 0 {
        return;
    }
    let scale = T::from_f64(scale);
    // SAFETY: i < m_out (contract for `maps`).
    let (ri, r_new) = source(unsafe { device::ld(maps, i) });
    for j in 0..n_out {
        // SAFETY: m_out + j < m_out + n_out.
        let (cj, c_new) = source(unsafe { device::ld(maps, m_out + j) });
        let mut val = if r_new || c_new {
            // SAFETY: the maps point inside `extra` (contract).
            unsafe { device::ld(extra, k * extra_ld + ri * extra_row + cj * extra_col) }
        } else {
            // SAFETY: ri < m_old, cj < n_old (contract).
            unsafe { device::ld(old, (k * m_old + ri) * n_old + cj) }.mul(scale)
        };
        for s in 0..kk {
            // SAFETY: inside u and v (contract, kk > 0).
            let (a, c) = unsafe {
                (
                    device::ld(u, (k * m_out + i) * kk + s),
                    device::ld(v, (k * n_out + j) * kk + s),
                )
            };
            val = a.mul_add(c, val);
        }
        // SAFETY: inside out (contract).
        unsafe { device::st(out, (k * m_out + i) * n_out + j, val) };
    }
}

/// `batch_r_refold_k<K>` (and `batch_r_refold_general`): every problem folded afresh from its
/// m rows (`rows` B × m × n row-major, right-hand sides `rhs` B × m) by a team of 2^`team_log2`
/// ≤ 32 threads (docs/algorithms.md#batched-states): thread t of problem i (global thread
/// i·team + t) folds rows t·c … (t+1)·c − 1 (c = ⌈m/team⌉) into its own R, d and ρ by Givens
/// rotations, then the team combines its states pairwise in log₂ team rounds: in round l the
/// thread t with t mod 2^(l+1) = 0 folds in the n rows [R d] of thread t + 2^l (read by
/// shuffle) and ρ ← hypot(ρ, ρ′). Thread 0 stores the result in (`r_out`, `d_out`,
/// `rho_out`) and `status[i]` ([`NON_FINITE`] where a row is not finite); with `bits` & 2 it
/// solves as [`step`] does. Grid ⌈B·team/128⌉, block 128.
///
/// # Safety
/// 1 ≤ n ≤ K; `rows` holds B·m·n elements and `rhs` B·m; `r_out` B·n·n, `d_out` B·n,
/// `rho_out` B and `status` B writable; with the solve bit `x` B·n and `rss` B writable.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn refold<T: Float, const K: usize>(
    rows: *const T,
    rhs: *const T,
    batch: usize,
    n: usize,
    m: usize,
    team_log2: u32,
    bits: u32,
    rank_tol: f64,
    r_out: *mut T,
    d_out: *mut T,
    rho_out: *mut T,
    x: *mut T,
    rss: *mut T,
    status: *mut u32,
) {
    let g = device::global_x();
    let team = 1usize << team_log2;
    let (i, t) = (g >> team_log2, g & (team - 1));
    let live = i < batch && n <= K && !(K <= crate::rolling::EXACT_MAX && n != K);
    let n = if K <= crate::rolling::EXACT_MAX { K } else { n };
    let mut st = Window::<T, K>::new(n);
    let mut finite = true;
    if live {
        let chunk = m.div_ceil(team);
        let (r0, r1) = ((t * chunk).min(m), ((t + 1) * chunk).min(m));
        for r in r0..r1 {
            // SAFETY: r < m, i < batch (contract).
            let (xr, y) = unsafe { row::<T, K>(rows, rhs, (i, m, r, n)) };
            finite &= y.is_finite();
            unroll!(j in ..K => {
                finite &= xr[j].is_finite();
            });
            st.add_row(&xr, y, T::ONE);
        }
    }
    for l in 0..team_log2 {
        let delta = 1u32 << l;
        let receive = live && t % (2 << l) == 0;
        unroll!(a in ..K => {
            if a < n {
                let mut xr = [T::ZERO; K];
                unroll!(c in ..K => {
                    if c >= a && c < n {
                        // SAFETY: every lane of the warp runs the shuffle (no lane has
                        // returned; n and the loop bounds are the same in all lanes).
                        xr[c] = unsafe { st.r[a][c].shfl_down(delta) };
                    }
                });
                // SAFETY: as above.
                let y = unsafe { st.d[a].shfl_down(delta) };
                if receive {
                    st.add_row(&xr, y, T::ONE);
                }
            }
        });
        // SAFETY: as above.
        let rho = unsafe { st.rho.shfl_down(delta) };
        if receive {
            st.rho = st.rho.hypot(rho);
        }
    }
    // SAFETY: every lane runs the ballot.
    let bad = unsafe { device::ballot(!finite) };
    let lane = g & 31;
    let first = lane - t;
    let team_bits = if team >= 32 {
        u32::MAX
    } else {
        ((1u32 << team) - 1) << first
    };
    if !live || t != 0 {
        return;
    }
    let mut code = if bad & team_bits != 0 { NON_FINITE } else { OK };
    let b = Buffers {
        r_in: r_out,
        d_in: d_out,
        rho_in: rho_out,
        r_out,
        d_out,
        rho_out,
        rows_in: rows,
        rhs_in: rhs,
        rows_out: rows,
        rhs_out: rhs,
    };
    // SAFETY: i < batch; the outputs hold problem i's state (contract).
    unsafe { store::<T, K>(&b, i, n, &st) };
    // SAFETY: the solve bit's buffers (contract), i < batch.
    let solved =
        bits & SOLVE == 0 || unsafe { solve_into::<T, K>(&st, (i, n, m), rank_tol, (x, rss)) };
    if !solved && code == OK {
        code = RANK_DEFICIENT;
    }
    // SAFETY: i < batch.
    unsafe { device::st(status, i, code) };
}
