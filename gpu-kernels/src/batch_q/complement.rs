//! The orthogonal complement Q₂ of batched full-Q states (docs/algorithms.md#batched-full-q-states):
//! a problem's Q = [Q₁ Q₂] keeps Q₂ (m×c, c = m − n, column-major: element (k, i, j) at
//! k·m·c + j·m + i) beside its thin state. The thin kernels export the directions an update
//! moves between range(Q₁) and range(Q₂), and one launch of [`complement`] carries the change
//! over to Q₂, one warp a problem.

use super::factor::{apply_reflector, householder_qr};
use super::team::*;
use crate::device::{self, Float};

/// Q₂ = H₀⋯H_{n−1}[0; I] from a Householder QR of Q₁ (a factorisation or a refresh).
pub const BUILD: u32 = 0;
/// The thin rank-one terms' directions replaced: Q₂ ← Q₂ + (y − Q₂â)âᵀ, â = Q₂ᵀz/‖Q₂ᵀz‖,
/// in place, term after term.
pub const REPLACE: u32 = 1;
/// p zero rows at k0 and the p columns the thin row insertion exported, appended.
pub const ADD_ROWS: u32 = 2;
/// Rows k0..k0+p out with the p directions their rows of Q₂ span.
pub const DROP_ROWS: u32 = 3;
/// The p columns the thin column deletion dropped, in front.
pub const ADD_COLS: u32 = 4;
/// The p directions the thin column insertion took into Q₁, removed.
pub const DROP_DIRS: u32 = 5;
/// e² = 2‖Q₁ᵀQ₂‖²_F + ‖Q₂ᵀQ₂ − I‖²_F into `e2` (the complement's share of the drift).
pub const MEASURE: u32 = 6;
/// Largest p of [`DROP_ROWS`] and [`DROP_DIRS`] a launch.
pub const MAX_DROP: usize = 32;
/// Columns of Q₂ a [`BUILD`] forms at a time in shared memory.
pub const BUILD_BLOCK: usize = 8;

/// Shared-memory elements of [`complement`] for `op` (at least one).
pub const fn smem(op: u32, m: usize, n: usize, c: usize, p: usize) -> usize {
    let e = match op {
        BUILD => m * n + n + m * BUILD_BLOCK,
        REPLACE => c,
        DROP_ROWS | DROP_DIRS => c * p + p * p + p + m * p,
        MEASURE => c + n,
        _ => 0,
    };
    if e == 0 { 1 } else { e }
}

/// Carries a thin update over to every problem's complement Q₂ (docs/algorithms.md#batched-full-q-states).
/// `m` and `c` are Q₂'s rows and columns before the call (for [`BUILD`], the rows of Q₁ and
/// c = m − n). Output shapes: [`BUILD`], [`REPLACE`] m×c; [`ADD_ROWS`] (m+p)×(c+p);
/// [`DROP_ROWS`] (m−p)×(c−p); [`ADD_COLS`] m×(c+p); [`DROP_DIRS`] m×(c−p). `extra` is what
/// the thin kernel exported: [`REPLACE`] B × p × 2 × m (term t's z then y), [`ADD_ROWS`]
/// B × (m+p) × p, [`ADD_COLS`] B × m × p and [`DROP_DIRS`] B × p × m (column-major a
/// problem). A problem runs only when `status` is null or its entry is `want`; otherwise it
/// writes `fallback` (at the output shape) when that is non-null, zeros for the shape-changing
/// ops, and nothing for [`REPLACE`] and [`BUILD`] (whose output may be the state itself).
///
/// # Safety
/// Grid (B, 1), block 32, dynamic shared memory [`smem`]`(op, m, n, c, p)` elements; `q1`
/// B·m·n ([`BUILD`], [`MEASURE`]), `q2_in` B·m·c (every op but [`BUILD`]; [`REPLACE`] works
/// in place on `q2_out`), `q2_out` B × the output shape, `extra` as above, `fallback` null or
/// as `q2_out`, `status` null or B, `e2` B ([`MEASURE`]); p ≤ c ≤ m for the drops, p ≤
/// [`MAX_DROP`] for them, k0 + p ≤ m ([`DROP_ROWS`]) or k0 ≤ m ([`ADD_ROWS`]); outputs
/// overlap no input but as stated.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn complement<T: Float>(
    op: u32,
    q1: *const T,
    q2_in: *const T,
    q2_out: *mut T,
    extra: *const T,
    fallback: *const T,
    status: *const u32,
    want: u32,
    e2: *mut T,
    batch: usize,
    m: usize,
    n: usize,
    c: usize,
    k0: usize,
    p: usize,
) {
    // SAFETY: one team of 32 lanes a block, shared memory as the contract sizes it.
    let (team, k, valid, s) = unsafe { setup::<T>(32, batch, smem(op, m, n, c, p)) };
    if !valid {
        return;
    }
    let (mo, co) = match op {
        ADD_ROWS => (m + p, c + p),
        DROP_ROWS => (m - p, c - p),
        ADD_COLS => (m, c + p),
        DROP_DIRS => (m, c - p),
        _ => (m, c),
    };
    let out = q2_out.wrapping_add(k * mo * co);
    // SAFETY: k < B.
    let run = status.is_null() || unsafe { device::ld(status, k) } == want;
    if !run {
        if op != REPLACE && op != BUILD && op != MEASURE {
            let src = fallback.wrapping_add(k * mo * co);
            let mut e = team.lane;
            while e < mo * co {
                // SAFETY: problem k at the output shape in both (contract).
                let v = if fallback.is_null() {
                    T::ZERO
                } else {
                    unsafe { device::ld(src, e) }
                };
                // SAFETY: as above.
                unsafe { device::st(out, e, v) };
                e += team.size;
            }
        }
        return;
    }
    let qin = q2_in.wrapping_add(k * m * c);
    // SAFETY (every arm): the whole warp runs the arm (one problem a warp); the buffers are
    // problem k's, sized by the contract.
    unsafe {
        match op {
            BUILD => build(team, q1.wrapping_add(k * m * n), out, s, (m, n, c)),
            REPLACE => replace(team, out, extra.wrapping_add(k * p * 2 * m), s, (m, c, p)),
            ADD_ROWS => add_rows(
                team,
                qin,
                extra.wrapping_add(k * mo * p),
                out,
                (m, c, k0, p),
            ),
            ADD_COLS => {
                let ex = extra.wrapping_add(k * m * p);
                let mut i = team.lane;
                while i < m {
                    copy_row((ex, m, i), (out, m, i), p);
                    copy_row((qin, m, i), (out.wrapping_add(p * m), m, i), c);
                    i += team.size;
                }
            }
            DROP_ROWS | DROP_DIRS => {
                let dirs = if op == DROP_DIRS {
                    extra.wrapping_add(k * p * m)
                } else {
                    core::ptr::null()
                };
                drop_dirs(team, qin, dirs, out, s, (m, c, k0, p));
            }
            MEASURE => {
                let v = measure(team, q1.wrapping_add(k * m * n), qin, s, (m, n, c));
                if team.lane == 0 {
                    device::st(e2, k, v);
                }
            }
            _ => {}
        }
    }
}

/// [`BUILD`]: Q₂ (m×c at `out`) = columns n..m of H₀⋯H_{n−1} from a Householder QR of Q₁
/// (loaded into `s`, m×n, τ after it), [`BUILD_BLOCK`] columns at a time in shared memory
/// (each block's unit columns take every reflector there and leave once).
///
/// # Safety
/// The whole warp; `q1` m×n, `out` m×c, `s` m·n + n + m·[`BUILD_BLOCK`] elements.
#[inline(always)]
unsafe fn build<T: Float>(
    team: Team,
    q1: *const T,
    out: *mut T,
    s: *mut T,
    (m, n, c): (usize, usize, usize),
) {
    let tau = s.wrapping_add(m * n);
    let blk = tau.wrapping_add(n);
    // SAFETY: problem k's Q₁ (the caller offset it), the lane's rows.
    unsafe { load_q(team, q1, (s, m), (0, m, n)) };
    // SAFETY: convergent warp; s holds Q₁ and τ.
    unsafe {
        householder_qr(team, s, tau, (m, n));
        device::sync_warp();
    }
    let mut c0 = 0;
    while c0 < c {
        let nb = (c - c0).min(BUILD_BLOCK);
        let mut i = team.lane;
        while i < m {
            for d in 0..nb {
                let v = if i == n + c0 + d { T::ONE } else { T::ZERO };
                // SAFETY: own row i of the block.
                unsafe { device::st(blk, d * m + i, v) };
            }
            i += team.size;
        }
        for j in (0..n).rev() {
            // SAFETY: convergent (j, nb uniform); τ read after the barrier above; own rows
            // of the block.
            unsafe { apply_reflector(team, s, (m, nb), j, device::ld(tau, j), (blk, 0)) };
        }
        let mut i = team.lane;
        while i < m {
            // SAFETY: own row i of the block and of out's columns c0..c0+nb.
            unsafe { copy_row((blk, m, i), (out.wrapping_add(c0 * m), m, i), nb) };
            i += team.size;
        }
        c0 += nb;
    }
}

/// [`REPLACE`]: for each term t, â = Q₂ᵀz/‖Q₂ᵀz‖ and Q₂ ← Q₂ + (y − Q₂â)âᵀ in place
/// (`q`, m×c), z and y the term's exported directions (the thin q̂ before and after the
/// rotations). A term whose y or Q₂ᵀz is zero (the update left range(Q₁)'s complement alone)
/// changes nothing.
///
/// # Safety
/// The whole warp; `q` m×c, `ex` p·2·m, `a` c elements of shared memory.
#[inline(always)]
unsafe fn replace<T: Float>(
    team: Team,
    q: *mut T,
    ex: *const T,
    a: *mut T,
    (m, c, p): (usize, usize, usize),
) {
    for t in 0..p {
        let z = ex.wrapping_add(2 * t * m);
        let y = z.wrapping_add(m);
        // SAFETY: every lane; the previous term's reads of `a` are done.
        unsafe { device::sync_warp() };
        // SAFETY: convergent; own rows of q, z and y.
        let (yy, mut aa) = unsafe {
            project(team, (q as *const T, m, m, c), z, a);
            (norm2(team, y, m), T::ZERO)
        };
        for j in 0..c {
            // SAFETY: written before project's barrier.
            let v = unsafe { device::ld(a, j) };
            aa = v.mul_add(v, aa);
        }
        if yy == T::ZERO || aa == T::ZERO {
            continue;
        }
        let inv = T::ONE.div(aa.sqrt());
        let mut i = team.lane;
        while i < m {
            // SAFETY: own row i of q and y; a (c) in shared memory.
            unsafe {
                let mut s = T::ZERO;
                for j in 0..c {
                    s = device::ld(q, j * m + i).mul_add(device::ld(a, j), s);
                }
                let d = device::ld(y, i).sub(s.mul(inv)).mul(inv);
                let mut j = 0;
                while j < c {
                    // four entries a pass, loads first
                    let mut x = [T::ZERO; 4];
                    for (t, xt) in x.iter_mut().enumerate() {
                        if j + t < c {
                            *xt = device::ld(q, (j + t) * m + i);
                        }
                    }
                    for (t, xt) in x.iter().enumerate() {
                        if j + t < c {
                            device::st(q, (j + t) * m + i, d.mul_add(device::ld(a, j + t), *xt));
                        }
                    }
                    j += 4;
                }
            }
            i += team.size;
        }
    }
}

/// [`ADD_ROWS`]: Q₂ with p zero rows at k0, then the p exported columns ((m+p)×p).
///
/// # Safety
/// The whole warp; `qin` m×c, `ex` (m+p)·p, `out` (m+p)·(c+p).
#[inline(always)]
unsafe fn add_rows<T: Float>(
    team: Team,
    qin: *const T,
    ex: *const T,
    out: *mut T,
    (m, c, k0, p): (usize, usize, usize, usize),
) {
    let mp = m + p;
    let mut i = team.lane;
    while i < mp {
        let src = if i < k0 {
            Some(i)
        } else if i >= k0 + p {
            Some(i - p)
        } else {
            None
        };
        // SAFETY: own row i of out; source rows inside qin and ex.
        unsafe {
            match src {
                Some(r) => copy_row((qin, m, r), (out, mp, i), c),
                None => {
                    for j in 0..c {
                        device::st(out, j * mp + i, T::ZERO);
                    }
                }
            }
            copy_row((ex, mp, i), (out.wrapping_add(c * mp), mp, i), p);
        }
        i += team.size;
    }
}

/// [`DROP_ROWS`] (`dirs` null: the directions are rows k0..k0+p of Q₂, which leave) and
/// [`DROP_DIRS`] (`dirs` p unit vectors of length m, V = Q₂ᵀ·dirs): a Householder QR of V
/// (c×p) gives H = I − WTWᵀ whose last c − p columns are orthogonal to V, and each row x of
/// Q₂ becomes (xH)[p..c] (WY form: W, T and each row's g = xWT in shared memory).
///
/// # Safety
/// The whole warp; `qin` m×c, `dirs` null or p·m, `out` at the output shape, `s`
/// c·p + p·p + p + m·p elements; p ≤ min(c, 32).
#[inline(always)]
unsafe fn drop_dirs<T: Float>(
    team: Team,
    qin: *const T,
    dirs: *const T,
    out: *mut T,
    s: *mut T,
    (m, c, k0, p): (usize, usize, usize, usize),
) {
    let (w, tau) = (s, s.wrapping_add(c * p));
    let (tt, gs) = (tau.wrapping_add(p), tau.wrapping_add(p + p * p));
    // V (c×p, ld c) into w.
    if dirs.is_null() {
        let mut j = team.lane;
        while j < c {
            for t in 0..p {
                // SAFETY: own row j of w; row k0 + t of Q₂.
                unsafe { device::st(w, t * c + j, device::ld(qin, j * m + k0 + t)) };
            }
            j += team.size;
        }
    } else {
        for t in 0..p {
            // SAFETY: convergent; Q₂ and the direction's own rows; column t of w.
            unsafe {
                project(
                    team,
                    (qin, m, m, c),
                    dirs.wrapping_add(t * m),
                    w.wrapping_add(t * c),
                )
            };
        }
    }
    // SAFETY: every lane (project's lane-0 writes are visible after it).
    unsafe { device::sync_warp() };
    // SAFETY: convergent; w holds c·p and τ p elements.
    unsafe { householder_qr(team, w, tau, (c, p)) };
    // W explicit: unit diagonal, zeros above.
    let mut j = team.lane;
    while j < c {
        for t in j..p {
            let v = if t == j { T::ONE } else { T::ZERO };
            // SAFETY: own row j, on or above the diagonal of column t.
            unsafe { device::st(w, t * c + j, v) };
        }
        j += team.size;
    }
    // SAFETY: every lane; W and τ complete.
    unsafe { device::sync_warp() };
    // T (p×p upper triangular, column-major): T(jj, jj) = τ_jj, T(0..jj, jj) = −τ_jj·T·Wᵀw_jj
    // (Wᵀw_jj in the first row of G's space, free until the rows use it).
    for jj in 0..p {
        if jj > 0 {
            // SAFETY: convergent; own rows of W.
            unsafe { project(team, (w as *const T, c, c, jj), w.wrapping_add(jj * c), gs) };
        }
        if team.lane == 0 {
            // SAFETY: τ, the projections (jj) and T (p·p) in shared memory.
            unsafe {
                let tj = device::ld(tau, jj);
                for i in 0..jj {
                    let mut acc = T::ZERO;
                    for l in i..jj {
                        acc = device::ld(tt, l * p + i).mul_add(device::ld(gs, l), acc);
                    }
                    device::st(tt, jj * p + i, tj.neg().mul(acc));
                }
                device::st(tt, jj * p + jj, tj);
                for i in (jj + 1)..p {
                    device::st(tt, jj * p + i, T::ZERO);
                }
            }
        }
        // SAFETY: every lane; T's column jj done, the projections' reads done.
        unsafe { device::sync_warp() };
    }
    let rows_out = dirs.is_null();
    let mo = if rows_out { m - p } else { m };
    let mut i = team.lane;
    while i < m {
        if !(rows_out && i >= k0 && i < k0 + p) {
            let io = if rows_out && i >= k0 + p { i - p } else { i };
            let g = gs.wrapping_add(i * p);
            // SAFETY: own row i of Q₂ and of G (m·p); W and T in shared memory.
            unsafe {
                // g = x·W, then g ← g·T (T upper triangular: g_t from g_0..=t, the last first)
                for t in 0..p {
                    let mut acc = T::ZERO;
                    for j in 0..c {
                        acc = device::ld(qin, j * m + i).mul_add(device::ld(w, t * c + j), acc);
                    }
                    device::st(g, t, acc);
                }
                for t in (0..p).rev() {
                    let mut acc = T::ZERO;
                    for l in 0..=t {
                        acc = device::ld(g, l).mul_add(device::ld(tt, t * p + l), acc);
                    }
                    device::st(g, t, acc);
                }
                // (xH)_j = x_j − Σ_t g_t W(j, t) for j ≥ p, four columns a pass (loads first)
                let mut j = p;
                while j < c {
                    let mut y = [T::ZERO; 4];
                    for (d, yd) in y.iter_mut().enumerate() {
                        if j + d < c {
                            *yd = device::ld(qin, (j + d) * m + i);
                        }
                    }
                    for t in 0..p {
                        let gt = device::ld(g, t).neg();
                        for (d, yd) in y.iter_mut().enumerate() {
                            if j + d < c {
                                *yd = gt.mul_add(device::ld(w, t * c + j + d), *yd);
                            }
                        }
                    }
                    for (d, yd) in y.iter().enumerate() {
                        if j + d < c {
                            device::st(out, (j + d - p) * mo + io, *yd);
                        }
                    }
                    j += 4;
                }
            }
        }
        i += team.size;
    }
}

/// [`MEASURE`]: 2‖Q₁ᵀQ₂‖²_F + ‖Q₂ᵀQ₂ − I‖²_F, a column of Q₂ at a time (`s`: c + n).
///
/// # Safety
/// The whole warp; `q1` m×n, `q2` m×c, `s` c + n elements.
#[inline(always)]
unsafe fn measure<T: Float>(
    team: Team,
    q1: *const T,
    q2: *const T,
    s: *mut T,
    (m, n, c): (usize, usize, usize),
) -> T {
    let (g2, g1) = (s, s.wrapping_add(c));
    let mut e2 = T::ZERO;
    for j in 0..c {
        // SAFETY: convergent; own rows; the previous column's reads are done (barrier at
        // the end of the loop).
        unsafe {
            project(team, (q2, m, m, c), q2.wrapping_add(j * m), g2);
            project(team, (q1, m, m, n), q2.wrapping_add(j * m), g1);
            for l in 0..c {
                let g = device::ld(g2, l);
                let x = if l == j { g.sub(T::ONE) } else { g };
                e2 = x.mul_add(x, e2);
            }
            for l in 0..n {
                let g = device::ld(g1, l);
                e2 = T::from_f64(2.0).mul(g).mul_add(g, e2);
            }
            device::sync_warp();
        }
    }
    e2
}

/// Row `si` of the column-major `src` (ld `sld`) into row `di` of `dst` (ld `dld`), `cols`
/// entries, four a pass with the loads first.
///
/// # Safety
/// Both hold `cols` columns at their leading dimensions; the rows exist.
#[inline(always)]
unsafe fn copy_row<T: Float>(
    (src, sld, si): (*const T, usize, usize),
    (dst, dld, di): (*mut T, usize, usize),
    cols: usize,
) {
    let mut j = 0;
    while j < cols {
        let mut x = [T::ZERO; 4];
        for (t, xt) in x.iter_mut().enumerate() {
            if j + t < cols {
                // SAFETY: contract.
                *xt = unsafe { device::ld(src, (j + t) * sld + si) };
            }
        }
        for (t, xt) in x.iter().enumerate() {
            if j + t < cols {
                // SAFETY: contract.
                unsafe { device::st(dst, (j + t) * dld + di, *xt) };
            }
        }
        j += 4;
    }
}

/// One kernel entry a group of operations (each compiled for its own registers): `$name`
/// runs [`complement`] with `op` fixed to `$op`, or as passed when `$op` is `_`.
macro_rules! entry {
    ($(#[$doc:meta])* $name:ident, $op:tt) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`complement`].
        #[inline(always)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name<T: Float>(
            op: u32,
            q1: *const T,
            q2_in: *const T,
            q2_out: *mut T,
            extra: *const T,
            fallback: *const T,
            status: *const u32,
            want: u32,
            e2: *mut T,
            batch: usize,
            m: usize,
            n: usize,
            c: usize,
            k0: usize,
            p: usize,
        ) {
            let op = entry!(@op op, $op);
            // SAFETY: forwarded.
            unsafe {
                complement(
                    op, q1, q2_in, q2_out, extra, fallback, status, want, e2, batch, m, n, c,
                    k0, p,
                )
            }
        }
    };
    (@op $v:ident, _) => { $v };
    (@op $v:ident, $op:ident) => {{
        let _ = $v;
        $op
    }};
}

entry!(
    /// [`BUILD`].
    build_entry, BUILD
);
entry!(
    /// [`REPLACE`].
    replace_entry, REPLACE
);
entry!(
    /// [`ADD_ROWS`] and [`ADD_COLS`] (`op`).
    add_entry, _
);
entry!(
    /// [`DROP_ROWS`] and [`DROP_DIRS`] (`op`).
    drop_entry, _
);
entry!(
    /// [`MEASURE`].
    measure_entry, MEASURE
);
