//! Rows in and out of batched thin-Q states (docs/algorithms.md#thin-row-insertion,
//! docs/algorithms.md#thin-row-deletion).

use super::team::*;
use super::{DOWNDATE_REFUSED, NON_FINITE, OK, smem};
use crate::device::{self, Float};
use crate::two_phase::givens;

/// Inserts p rows at k0 in every problem (docs/algorithms.md#thin-row-insertion, with Givens
/// rotations): R and b are first scaled by `scale` (√λ of a forgetting window step; 1
/// otherwise), then Q_ext = Q₁ with p zero rows at k0 and the p unit columns, and [R; U] is
/// triangularised row by row (rotation (j, n + r) zeroes U(r, j)). A problem whose rows or
/// right-hand sides are not finite gets [`NON_FINITE`] and zeros for Q₁ and R (the call is
/// all-or-nothing, or, in a window step, the caller restores the problem). A non-null
/// `export` (B·(m+p)·p) receives the p rotated unit columns, which a full-Q state adds to its
/// complement (docs/algorithms.md#batched-full-q-states).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::insert_rows`]`(m, n, p)` elements; `q_in` B·m·n, `r_in`
/// B·n·n, `b_in` B·m, `rows` B·p·n, `rhs` B·p, `q_out` B·(m+p)·n, `r_out` B·n·n, `b_out`
/// B·(m+p), `status` B; B ≥ 1, k0 ≤ m, p ≥ 1, 1 ≤ n ≤ 32; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn insert_rows<T: Float>(
    q_in: *const T,
    r_in: *const T,
    b_in: *const T,
    rows: *const T,
    rhs: *const T,
    q_out: *mut T,
    r_out: *mut T,
    b_out: *mut T,
    status: *mut u32,
    export: *mut T,
    batch: usize,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    scale: T,
    team: usize,
) {
    let (mp, np) = (m + p, n + p);
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::insert_rows(m, n, p)) };
    // SAFETY: inside the team's region.
    let (rs, rot) = unsafe {
        let rs = qs.add(mp * np);
        (rs, rs.add(np * n))
    };
    let mut ok = true;
    let mut i = team.lane;
    while i < mp {
        // SAFETY: own rows of qs; source rows inside problem k (k0 ≤ m).
        unsafe {
            let src = if i < k0 {
                Some(i)
            } else if i >= k0 + p {
                Some(i - p)
            } else {
                None
            };
            for c in 0..n {
                let x = match src {
                    Some(s) => device::ld(q_in, k * m * n + c * m + s),
                    None => T::ZERO,
                };
                device::st(qs, c * mp + i, x);
            }
            for t in 0..p {
                let e = if i == k0 + t { T::ONE } else { T::ZERO };
                device::st(qs, (n + t) * mp + i, e);
            }
            let bv = match src {
                Some(s) => device::ld(b_in, k * m + s).mul(scale),
                None => {
                    let e = device::ld(rhs, k * p + (i - k0));
                    ok &= e.is_finite();
                    e
                }
            };
            if valid {
                device::st(b_out, k * mp + i, bv);
            }
        }
        i += team.size;
    }
    if team.lane < n {
        let l = team.lane;
        // SAFETY: own column of rs; R and rows inside problem k.
        unsafe {
            for row in 0..n {
                let x = device::ld(r_in, k * n * n + row * n + l).mul(scale);
                device::st(rs, row * n + l, x);
            }
            for t in 0..p {
                let x = device::ld(rows, (k * p + t) * n + l);
                ok &= x.is_finite();
                device::st(rs, (n + t) * n + l, x);
            }
        }
    }
    // SAFETY: every lane votes.
    let ok = unsafe { team.all(ok) };
    // SAFETY: convergent; the working copy as laid out above.
    unsafe { fold_rows(team, (qs, mp, n, p), (rs, rot)) };
    if valid && !export.is_null() {
        // SAFETY: own rows of the p rotated unit columns; problem k's (m+p)×p export.
        unsafe { export_cols(team, (qs, mp), (n, p), export.wrapping_add(k * mp * p)) };
    }
    // SAFETY: own rows and column; every lane votes.
    let fine = ok
        && unsafe {
            let mine = finite_rows(team, (qs, mp), (mp, n)) && finite_col(team, rs, n);
            team.all(mine)
        };
    if valid {
        if fine {
            // SAFETY: problem k's outputs at (m+p)×n.
            unsafe {
                store_q(team, (qs, mp), q_out, (k, mp, n));
                store_r(team, rs, r_out, k, n);
            }
        } else {
            // The refused problem's outputs are zeros (a window step deletes from them
            // before the caller puts the old state back).
            let mut e = team.lane;
            while e < mp * n {
                // SAFETY: problem k's Q₁ at (m+p)×n.
                unsafe { device::st(q_out, k * mp * n + e, T::ZERO) };
                e += team.size;
            }
            let mut e = team.lane;
            while e < n * n {
                // SAFETY: problem k's R.
                unsafe { device::st(r_out, k * n * n + e, T::ZERO) };
                e += team.size;
            }
        }
        if team.lane == 0 {
            // SAFETY: k < B.
            unsafe { device::st(status, k, if fine { OK } else { NON_FINITE }) };
        }
    }
}

/// Deletes rows k0..k0+p of every problem, one at a time (docs/algorithms.md#thin-row-deletion
/// with p = 1 repeated): the completion v = (I − Q₁Q₁ᵀ)e_i by Gram–Schmidt twice, refused
/// ([`DOWNDATE_REFUSED`]) when ‖v‖ < √u; the rotations (j, j+1), j = n−1 … 0, take row i of
/// [Q₁ v/‖v‖] to e₀ᵀ and, applied to [R; 0] from the left, leave it upper Hessenberg; column
/// 0 and row 0 are dropped. The deleted row stays in place as a zero row until the rows are
/// written out without it. When `fallback` states are given (non-null), a refusing problem
/// writes its fallback state (shape (m−p)×n) instead, so that a window step can proceed per
/// problem; otherwise it writes nothing (the call is all-or-nothing).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::delete_rows`]`(m, n)` elements; `q_in` B·m·n, `r_in`
/// B·n·n, `b_in` B·m; `q_out`, `q_fb` B·(m−p)·n, `r_out`, `r_fb` B·n·n, `b_out`, `b_fb`
/// B·(m−p) (the fallbacks all null or all valid); `status` B; B ≥ 1, k0 + p ≤ m,
/// m − p ≥ n ≥ 1, n ≤ 32; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn delete_rows<T: Float>(
    q_in: *const T,
    r_in: *const T,
    b_in: *const T,
    q_out: *mut T,
    r_out: *mut T,
    b_out: *mut T,
    q_fb: *const T,
    r_fb: *const T,
    b_fb: *const T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::delete_rows(m, n)) };
    // SAFETY: inside the team's region.
    let (rs, sv, rot) = unsafe {
        let rs = qs.add(m * (n + 1));
        let sv = rs.add((n + 1) * n);
        (rs, sv, sv.add(n))
    };
    // SAFETY: problem k at m×n (contract).
    unsafe { load_state(team, (q_in, r_in), (qs, m, rs), (k, m, n)) };
    if team.lane < n {
        // SAFETY: row n of rs.
        unsafe { device::st(rs, n * n + team.lane, T::ZERO) };
    }
    let (mo, mut refused) = (m - p, false);
    for t in 0..p {
        // SAFETY: convergent; the working copy as laid out above; k0 + t < m.
        refused |= unsafe { delete_one(team, (qs, rs, sv, rot), (m, n, k0 + t), refused) };
    }
    // SAFETY: own rows and column; every lane votes (γ, and so `refused`, is team-uniform).
    let fine = unsafe {
        let mine = finite_rows(team, (qs, m), (m, n)) && finite_col(team, rs, n);
        team.all(mine)
    } && !refused;
    if valid && fine {
        let mut i = team.lane;
        while i < m {
            if i < k0 || i >= k0 + p {
                let io = if i < k0 { i } else { i - p };
                // SAFETY: own rows; problem k's outputs at mo×n.
                unsafe {
                    for c in 0..n {
                        device::st(q_out, k * mo * n + c * mo + io, device::ld(qs, c * m + i));
                    }
                    device::st(b_out, k * mo + io, device::ld(b_in, k * m + i));
                }
            }
            i += team.size;
        }
        // SAFETY: own column.
        unsafe { store_r(team, rs, r_out, k, n) };
    }
    if valid && !fine && !q_fb.is_null() {
        // SAFETY: the fallback holds problem k at mo×n (contract).
        unsafe { copy_state(team, (q_fb, r_fb, b_fb), (q_out, r_out, b_out), (k, mo, n)) };
    }
    if valid && team.lane == 0 {
        let code = if fine {
            OK
        } else if refused {
            DOWNDATE_REFUSED
        } else {
            NON_FINITE
        };
        // SAFETY: k < B.
        unsafe { device::st(status, k, code) };
    }
}

/// Folds the p new rows of [R; U] (`rs`, pitch n, rows n..n+p) into R, row by row (rotation
/// (j, n + t) zeroes U(t, j) against R(j, j); the 2pn rotations go to `rot`), then applies
/// them to the lanes' rows of Q_ext (`qs`, ld mp, columns n..n+p the unit columns), each row
/// in one pass a new row with the unit column's entry in a register (stored back at the end:
/// the complement's new direction in a full-Q state).
///
/// # Safety
/// The whole warp calls convergently; `qs` holds mp·(n+p), `rs` (n+p)·n, `rot` 2pn elements of
/// the team's working copy.
#[inline(always)]
unsafe fn fold_rows<T: Float>(
    team: Team,
    (qs, mp, n, p): (*mut T, usize, usize, usize),
    (rs, rot): (*mut T, *mut T),
) {
    for t in 0..p {
        for j in 0..n {
            // SAFETY: convergent; rows j and n + t of rs exist.
            let (c, s) = unsafe { zeroing_rotation(team, rs, n, j, n + t) };
            // SAFETY: own column.
            unsafe { rotate_col(team, rs, n, (j, n + t), (c, s)) };
            if team.lane == j {
                // SAFETY: own column j.
                unsafe { device::st(rs, (n + t) * n + j, T::ZERO) };
            }
            if team.lane == 0 {
                // SAFETY: 2pn entries.
                unsafe {
                    device::st(rot, 2 * (t * n + j), c);
                    device::st(rot, 2 * (t * n + j) + 1, s);
                }
            }
        }
    }
    // SAFETY: every lane; the rotations are visible after it.
    unsafe { device::sync_warp() };
    // Each own row in one pass a new row, the unit column's entry in a register (its
    // column is dropped afterwards).
    let mut i = team.lane;
    while i < mp {
        for t in 0..p {
            // SAFETY: own row i of columns < n + p; the rotations (2pn) were written before
            // the barrier.
            unsafe {
                let mut carry = device::ld(qs, (n + t) * mp + i);
                for j in 0..n {
                    let (c, s) = (
                        device::ld(rot, 2 * (t * n + j)),
                        device::ld(rot, 2 * (t * n + j) + 1),
                    );
                    let x = device::ld(qs, j * mp + i);
                    device::st(qs, j * mp + i, c.mul_add(x, s.mul(carry)));
                    carry = c.mul_add(carry, s.neg().mul(x));
                }
                device::st(qs, (n + t) * mp + i, carry);
            }
        }
        i += team.size;
    }
}

/// Deletes row i0 of the working copy ([Q₁ v] in `qs`, ld m; [R; 0] in `rs`, pitch n):
/// completion v = (I − Q₁Q₁ᵀ)e_{i0} by Gram–Schmidt twice (into column n), the rotations
/// (j, j+1), j = n−1 … 0, taking row i0 to e₀ᵀ, applied to the rows of Q₁ (column j+1 moving to
/// column j, row i0 becoming a zero row) and to [R; 0], whose row 0 is dropped. Returns whether
/// the completion's norm was below √u (the deletion refused); a problem refused before
/// (`refused`) computes on with v = 0 and stores nothing of it.
///
/// # Safety
/// The whole warp calls convergently; `qs` holds m·(n+1), `rs` (n+1)·n, `sv` n, `rot` 2n
/// elements of the team's working copy; i0 < m.
#[inline(always)]
unsafe fn delete_one<T: Float>(
    team: Team,
    (qs, rs, sv, rot): (*mut T, *mut T, *mut T, *mut T),
    (m, n, i0): (usize, usize, usize),
    refused: bool,
) -> bool {
    let z = qs.wrapping_add(n * m);
    let qv = (qs as *const T, m, m, n);
    let root_u = T::from_f64(sqrt_f64(T::UNIT_ROUNDOFF));
    // SAFETY: every lane; row i0 (its owner's) is visible after it.
    unsafe { device::sync_warp() };
    let mut i = team.lane;
    while i < m {
        // SAFETY: own row i; row i0 of columns < n is only read in this phase.
        unsafe {
            let mut x = if i == i0 { T::ONE } else { T::ZERO };
            for c in 0..n {
                x = device::ld(qs, c * m + i)
                    .neg()
                    .mul_add(device::ld(qs, c * m + i0), x);
            }
            device::st(z, i, x);
        }
        i += team.size;
    }
    // SAFETY: convergent; own rows.
    unsafe {
        project(team, qv, z, sv);
        subtract(team, qv, sv, z);
    }
    // SAFETY: convergent.
    let gamma = unsafe { norm2(team, z, m) }.sqrt();
    // A refused problem goes on computing (every team runs the same shuffles) and
    // stores nothing of it.
    let refused_now = !(gamma >= root_u);
    let inv = if refused || refused_now {
        T::ZERO
    } else {
        T::ONE.div(gamma)
    };
    // SAFETY: own rows.
    unsafe { scale_rows(team, z, m, inv) };
    // SAFETY: every lane; row i0 of [Q₁ v] is final for this step.
    unsafe { device::sync_warp() };
    if team.lane == 0 {
        // SAFETY: row i0 of columns ≤ n; 2n rotation entries.
        unsafe {
            let mut tr = device::ld(qs, n * m + i0);
            for j in (0..n).rev() {
                let f = device::ld(qs, j * m + i0);
                let (c, s, r) = givens(f, tr);
                tr = r;
                device::st(rot, 2 * j, c);
                device::st(rot, 2 * j + 1, s);
            }
        }
    }
    // SAFETY: every lane; the rotations are visible after it, and nobody writes row i0
    // before it.
    unsafe { device::sync_warp() };
    // The rotations on each own row in one pass, the moving entry in a register:
    // column j+1 is final after rotation j and moves to column j (column 0 of [Q₁ v] is
    // dropped); row i0 becomes a zero row.
    let mut i = team.lane;
    while i < m {
        // SAFETY: own row i of columns ≤ n; the rotations (2n) were written before the
        // barrier.
        unsafe {
            let mut carry = device::ld(qs, n * m + i);
            for j in (0..n).rev() {
                let (c, s) = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                let x = device::ld(qs, j * m + i);
                let out = if i == i0 {
                    T::ZERO
                } else {
                    c.mul_add(carry, s.neg().mul(x))
                };
                device::st(qs, j * m + i, out);
                carry = c.mul_add(x, s.mul(carry));
            }
        }
        i += team.size;
    }
    for j in (0..n).rev() {
        // SAFETY: written before the barrier; own column.
        unsafe {
            let cs = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
            rotate_col(team, rs, n, (j, j + 1), cs);
        }
    }
    // Row 0 of R is dropped.
    if team.lane < n {
        let l = team.lane;
        // SAFETY: own column.
        unsafe {
            for row in 0..n {
                device::st(rs, row * n + l, device::ld(rs, (row + 1) * n + l));
            }
            device::st(rs, n * n + l, T::ZERO);
        }
    }
    refused_now
}
