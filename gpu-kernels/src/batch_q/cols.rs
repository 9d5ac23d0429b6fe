//! Columns in and out of batched thin-Q states (docs/algorithms.md#thin-column-insertion,
//! docs/algorithms.md#thin-column-deletion).

use super::team::*;
use super::{NON_FINITE, OK, RANK_DEFICIENT, smem};
use crate::device::{self, Float};
use crate::two_phase::givens;

/// Deletes columns k0..k0+p of every problem (docs/algorithms.md#thin-column-deletion, one
/// column at a time with Givens rotations): R loses column k0, which leaves it upper
/// Hessenberg from k0 on; rotations (j, j+1), j = k0 … n′−2, clear the subdiagonal from R's
/// rows and Q₁'s columns; the last row of R and the last column of Q₁ are dropped. b does not
/// change (the host keeps its buffer). Nothing can be refused but a non-finite result
/// ([`NON_FINITE`], outputs unwritten: the call is all-or-nothing). A non-null `export`
/// (B·m·p) receives the p columns left out, which a full-Q state adds to its complement
/// (docs/algorithms.md#batched-full-q-states).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::delete_cols`]`(m, n)` elements; `q_in` B·m·n, `r_in`
/// B·n·n readable; `q_out` B·m·(n−p), `r_out` B·(n−p)², `status` B writable; B ≥ 1,
/// k0 + p ≤ n, p < n ≤ 32, m ≥ n; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn delete_cols<T: Float>(
    q_in: *const T,
    r_in: *const T,
    q_out: *mut T,
    r_out: *mut T,
    status: *mut u32,
    export: *mut T,
    batch: usize,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::delete_cols(m, n)) };
    // SAFETY: inside the team's region.
    let (rs, rot) = unsafe {
        let rs = qs.add(m * n);
        (rs, rs.add(n * n))
    };
    // SAFETY: problem k at m×n (contract).
    unsafe { load_state(team, (q_in, r_in), (qs, m, rs), (k, m, n)) };
    let l = team.lane;
    for t in 0..p {
        // SAFETY: convergent; the working copy at pitch n with n − t columns.
        unsafe { delete_one(team, (qs, m), (rs, n), rot, n - t, k0) };
    }
    let no = n - p;
    if valid && !export.is_null() {
        // SAFETY: own rows of the p columns left out; problem k's m×p export (contract).
        unsafe { export_cols(team, (qs, m), (no, p), export.wrapping_add(k * m * p)) };
    }
    // SAFETY: own rows and column of the working copy (the first no columns, rows of R
    // below no are dropped); every lane votes.
    let fine = unsafe {
        let mine =
            finite_rows(team, (qs, m), (m, no)) && (l >= no || finite_col_pitch(team, rs, (n, no)));
        team.all(mine)
    };
    if valid && fine {
        // SAFETY: problem k's outputs at m×no and no×no.
        unsafe {
            store_q(team, (qs, m), q_out, (k, m, no));
            if l < no {
                for row in 0..no {
                    let v = if row <= l {
                        device::ld(rs, row * n + l)
                    } else {
                        T::ZERO
                    };
                    device::st(r_out, k * no * no + row * no + l, v);
                }
            }
        }
    }
    if valid && l == 0 {
        // SAFETY: k < B.
        unsafe { device::st(status, k, if fine { OK } else { NON_FINITE }) };
    }
}

/// Moves column `from` of every problem to position `to`, the columns between closing up
/// (docs/algorithms.md#column-shift): the column a = Q₁·R(:, from) is formed, deleted as
/// [`delete_cols`] does and inserted at `to` as [`insert_cols`] does, all in shared memory.
/// A problem whose column, once deleted, lies in the span of the others (R singular) gets
/// [`RANK_DEFICIENT`], a non-finite result [`NON_FINITE`]; either writes nothing (the call is
/// all-or-nothing). b does not change.
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::shift_col`]`(m, n)` elements; `q_in` B·m·n and `r_in`
/// B·n·n readable, `q_out` B·m·n, `r_out` B·n·n and `status` B writable; B ≥ 1,
/// 2 ≤ n ≤ 32, m ≥ n, from < n, to < n; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn shift_col<T: Float>(
    q_in: *const T,
    r_in: *const T,
    q_out: *mut T,
    r_out: *mut T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    from: usize,
    to: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::shift_col(m, n)) };
    // SAFETY: inside the team's region.
    let (rs, wv, w2, rot) = unsafe {
        let rs = qs.add(m * (n + 1));
        let wv = rs.add(n * n);
        (rs, wv, wv.add(n), wv.add(2 * n))
    };
    // SAFETY: problem k at m×n (contract).
    unsafe { load_state(team, (q_in, r_in), (qs, m, rs), (k, m, n)) };
    // SAFETY: every lane; R's columns (their owners' writes) are visible after it.
    unsafe { device::sync_warp() };
    // a = Q₁·R(:, from) into column n of qs, the lane's rows.
    let a = qs.wrapping_add(n * m);
    let mut i = team.lane;
    while i < m {
        // SAFETY: own row i of qs; R's column `from` (read only).
        unsafe {
            let mut acc = T::ZERO;
            for t in 0..=from {
                acc = device::ld(qs, t * m + i).mul_add(device::ld(rs, t * n + from), acc);
            }
            device::st(a, i, acc);
        }
        i += team.size;
    }
    // SAFETY: convergent; the working copy at pitch n.
    unsafe { delete_one(team, (qs, m), (rs, n), rot, n, from) };
    let mut i = team.lane;
    while i < m {
        // SAFETY: own row i: column n − 1 (left out by the deletion) takes a.
        unsafe { device::st(qs, (n - 1) * m + i, device::ld(a, i)) };
        i += team.size;
    }
    // SAFETY: convergent; column n − 1 of qs holds a.
    let independent = unsafe {
        insert_one(
            team,
            (qs, m),
            (rs, n),
            (wv, w2, rot),
            (n - 1, to),
            core::ptr::null_mut(),
        )
    };
    // SAFETY: convergent; problem k's outputs at m×n and n×n (contract).
    unsafe {
        finish(
            team,
            (k, valid, status),
            (qs, m, rs, n),
            (q_out, r_out),
            (true, independent),
        )
    };
}

/// Deletes column k0 of the working copy (Q₁ `qs` with ld m, R `rs` row-major at `pitch`,
/// nc columns): R's columns right of k0 move left by one (each row by the lane of its
/// index), rotations (j, j+1), j = k0 … nc−2, clear the subdiagonal in R's rows and Q₁'s
/// columns (`rot` 2·nc entries), and column nc − 1 of Q₁ and row nc − 1 of R are left out
/// of the factorisation (the column holds the direction that left range(Q₁)).
///
/// # Safety
/// The whole warp calls convergently; nc ≤ pitch ≤ team size; `qs` holds m·nc, `rs`
/// pitch·pitch and `rot` 2·nc elements of the team's working copy.
#[inline(always)]
unsafe fn delete_one<T: Float>(
    team: Team,
    (qs, m): (*mut T, usize),
    (rs, pitch): (*mut T, usize),
    rot: *mut T,
    nc: usize,
    k0: usize,
) {
    let l = team.lane;
    // SAFETY: every lane; R's columns (their owners' writes) are visible after it.
    unsafe { device::sync_warp() };
    if l < nc {
        let mut c = k0;
        while c + 1 < nc {
            // SAFETY: row l, columns c, c + 1 < nc ≤ pitch of rs.
            unsafe { device::st(rs, l * pitch + c, device::ld(rs, l * pitch + c + 1)) };
            c += 1;
        }
    }
    // SAFETY: every lane; the moved columns are visible to their owners after it.
    unsafe { device::sync_warp() };
    let mut j = k0;
    while j + 1 < nc {
        // SAFETY: convergent; rows j, j+1 < nc; column j < nc − 1 ≤ team size.
        let (c, s) = unsafe { pair_rotation(team, rs, pitch, j, (j, j + 1)) };
        if l < nc - 1 {
            // SAFETY: own column.
            unsafe { rotate_col(team, rs, pitch, (j, j + 1), (c, s)) };
        }
        if l == j {
            // SAFETY: own column j.
            unsafe { device::st(rs, (j + 1) * pitch + j, T::ZERO) };
        }
        if l == 0 {
            // SAFETY: 2·nc rotation entries.
            unsafe {
                device::st(rot, 2 * j, c);
                device::st(rot, 2 * j + 1, s);
            }
        }
        j += 1;
    }
    // SAFETY: every lane; the rotations are visible after it.
    unsafe { device::sync_warp() };
    let mut i = l;
    while i < m {
        // SAFETY: own row i of the first nc columns of qs; rotations written above.
        unsafe {
            let mut j = k0;
            if j + 1 < nc {
                let mut carry = device::ld(qs, j * m + i);
                while j + 1 < nc {
                    let (c, s) = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                    let y = device::ld(qs, (j + 1) * m + i);
                    device::st(qs, j * m + i, c.mul_add(carry, s.mul(y)));
                    carry = c.mul_add(y, s.neg().mul(carry));
                    j += 1;
                }
                // The column left out (the complement's new direction in a full-Q state).
                device::st(qs, (nc - 1) * m + i, carry);
            }
        }
        i += team.size;
    }
}

/// Inserts p columns before column k0 of every problem (docs/algorithms.md#thin-column-insertion,
/// one column at a time): the column u's part outside range(Q₁) by Gram–Schmidt twice
/// becomes Q₁'s new last column q̂ = z/γ, R gains the column [Q₁ᵀu; γ] at k0 + t and a row,
/// and rotations (i − 1, i) from the bottom up to row k0 + t + 1 zero that column below the
/// diagonal (in R's rows and Q₁'s columns). A problem whose u is not finite gets
/// [`NON_FINITE`]; one whose u lies in range(Q₁) (γ ≤ 64u·‖u‖: R would be singular)
/// [`RANK_DEFICIENT`]; either writes nothing (the call is all-or-nothing). b does not change
/// (the host keeps its buffer). U is B × m × p (row-major a problem: u_t(i) at i·p + t). A
/// non-null `export` (B·p·m) receives each new direction q̂ (a full-Q state removes them from
/// its complement; docs/algorithms.md#batched-full-q-states).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n + p ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::insert_cols`]`(m, n, p)` elements; `q_in` B·m·n, `r_in`
/// B·n·n, `u` B·m·p readable; `q_out` B·m·(n+p), `r_out` B·(n+p)², `status` B writable;
/// B ≥ 1, k0 ≤ n, p ≥ 1, n ≥ 1, n + p ≤ 32, m ≥ n + p; outputs overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn insert_cols<T: Float>(
    q_in: *const T,
    r_in: *const T,
    u: *const T,
    q_out: *mut T,
    r_out: *mut T,
    status: *mut u32,
    export: *mut T,
    batch: usize,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    team: usize,
) {
    let np = n + p;
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::insert_cols(m, n, p)) };
    // SAFETY: inside the team's region.
    let (rs, wv, w2, rot) = unsafe {
        let rs = qs.add(m * np);
        let wv = rs.add(np * np);
        (rs, wv, wv.add(np), wv.add(2 * np))
    };
    let l = team.lane;
    // SAFETY: problem k at m×n (contract); R's working copy at pitch np, zero outside the
    // loaded n×n block, the lane its column.
    unsafe {
        load_q(team, q_in, (qs, m), (k, m, n));
        if l < np {
            for row in 0..np {
                let v = if l < n && row < n {
                    device::ld(r_in, k * n * n + row * n + l)
                } else {
                    T::ZERO
                };
                device::st(rs, row * np + l, v);
            }
        }
    }
    let (mut ok, mut independent) = (true, true);
    for t in 0..p {
        let (nc, kc) = (n + t, k0 + t);
        // SAFETY: every lane; the previous column's reads are done.
        unsafe { device::sync_warp() };
        let z = qs.wrapping_add(nc * m);
        let mut i = l;
        while i < m {
            // SAFETY: own rows of u and of column nc of qs.
            unsafe {
                let x = device::ld(u, (k * m + i) * p + t);
                ok &= x.is_finite();
                device::st(z, i, x);
            }
            i += team.size;
        }
        // SAFETY: convergent; column nc of qs holds u; the working copy at pitch np.
        let ex = if valid && !export.is_null() {
            export.wrapping_add((k * p + t) * m)
        } else {
            core::ptr::null_mut()
        };
        independent &= unsafe { insert_one(team, (qs, m), (rs, np), (wv, w2, rot), (nc, kc), ex) };
    }
    // SAFETY: convergent; problem k's outputs at m×np and np×np (contract).
    unsafe {
        finish(
            team,
            (k, valid, status),
            (qs, m, rs, np),
            (q_out, r_out),
            (ok, independent),
        )
    };
}

/// The end of a column update: the team votes on its data (`ok`), on the new columns'
/// independence and on the finiteness of the working copy (Q₁ `qs` with ld m and n columns,
/// R `rs` n×n row-major); problem k's Q₁ and R are written only when all hold, and its
/// status says which failed ([`NON_FINITE`] before [`RANK_DEFICIENT`]).
///
/// # Safety
/// The whole warp calls convergently; `q_out` and `r_out` hold problem k at m×n and n×n,
/// `status` entry k (when `valid`).
#[inline(always)]
unsafe fn finish<T: Float>(
    team: Team,
    (k, valid, status): (usize, bool, *mut u32),
    (qs, m, rs, n): (*const T, usize, *const T, usize),
    (q_out, r_out): (*mut T, *mut T),
    (ok, independent): (bool, bool),
) {
    // SAFETY: own rows and column of the working copy; every lane votes.
    let (ok, independent, fine) = unsafe {
        let mine = finite_rows(team, (qs, m), (m, n)) && finite_col(team, rs, n);
        (team.all(ok), team.all(independent), team.all(mine))
    };
    let code = if !ok || !fine {
        NON_FINITE
    } else if !independent {
        RANK_DEFICIENT
    } else {
        OK
    };
    if valid && code == OK {
        // SAFETY: problem k's outputs (contract).
        unsafe {
            store_q(team, (qs, m), q_out, (k, m, n));
            store_r(team, rs, r_out, k, n);
        }
    }
    if valid && team.lane == 0 {
        // SAFETY: k < B.
        unsafe { device::st(status, k, code) };
    }
}

/// Inserts the column held in column nc of `qs` (u, overwritten) before column kc of the
/// working copy (Q₁ `qs` with ld m and nc columns, R `rs` row-major at `pitch` with nc rows
/// and columns, zero beyond): u's part outside range(Q₁) by Gram–Schmidt twice becomes Q₁'s
/// column nc, R's columns from kc move right by one (each row by the lane of its index) and
/// [Q₁ᵀu; γ] takes column kc, and rotations (i − 1, i), i = nc … kc + 1, zero it below the
/// diagonal in R's rows and Q₁'s columns (`wv`, `w2` and `rot` hold pitch, pitch and
/// 2·pitch elements). False when u lies in range(Q₁) (γ ≤ 64u·‖u‖), the new column then zero.
/// A non-null `export` (m elements) receives q̂.
///
/// # Safety
/// The whole warp calls convergently; nc < pitch ≤ team size; `qs` holds m·(nc + 1) and `rs`
/// pitch·pitch elements; each lane has written only its own rows of column nc of `qs`.
#[inline(always)]
unsafe fn insert_one<T: Float>(
    team: Team,
    (qs, m): (*mut T, usize),
    (rs, pitch): (*mut T, usize),
    (wv, w2, rot): (*mut T, *mut T, *mut T),
    (nc, kc): (usize, usize),
    export: *mut T,
) -> bool {
    let l = team.lane;
    let z = qs.wrapping_add(nc * m);
    let mut independent = true;
    // SAFETY: convergent; own rows; buffers sized by the contract.
    let gamma = unsafe {
        let unorm2 = norm2(team, z, m);
        let qv = (qs as *const T, m, m, nc);
        project(team, qv, z, wv);
        subtract(team, qv, wv, z);
        project(team, qv, z, w2);
        subtract(team, qv, w2, z);
        let gamma = norm2(team, z, m).sqrt();
        let tol = T::from_f64(64.0 * T::UNIT_ROUNDOFF).mul(unorm2.sqrt());
        if gamma > tol {
            scale_rows(team, z, m, T::ONE.div(gamma));
            gamma
        } else {
            independent = false;
            scale_rows(team, z, m, T::ZERO);
            T::ZERO
        }
    };
    if !export.is_null() {
        let mut i = l;
        while i < m {
            // SAFETY: own row i of q̂ and of the export (m elements, contract).
            unsafe { device::st(export, i, device::ld(z, i)) };
            i += team.size;
        }
    }
    // Columns kc.. of R move right by one, each row by the lane of its index (rows
    // ≤ nc < team size); column kc becomes [w; γ].
    // SAFETY: rows ≤ nc < pitch of rs; w and w₂ written before project's barrier.
    unsafe {
        if l < nc {
            let mut c = nc;
            while c > kc {
                device::st(rs, l * pitch + c, device::ld(rs, l * pitch + c - 1));
                c -= 1;
            }
            device::st(rs, l * pitch + kc, device::ld(wv, l).add(device::ld(w2, l)));
        } else if l == nc {
            for c in 0..pitch {
                device::st(rs, nc * pitch + c, T::ZERO);
            }
            device::st(rs, nc * pitch + kc, gamma);
        }
        device::sync_warp();
    }
    // Rotations (i − 1, i), i = nc … kc + 1, zero R(i, kc) against R(i − 1, kc).
    let mut i = nc;
    while i > kc {
        // SAFETY: convergent; rows i − 1, i ≤ nc and column kc < pitch ≤ team size.
        let (c, s) = unsafe { pair_rotation(team, rs, pitch, kc, (i - 1, i)) };
        // SAFETY: own column (l < pitch).
        unsafe { rotate_col(team, rs, pitch, (i - 1, i), (c, s)) };
        if l == kc {
            // SAFETY: own column kc.
            unsafe { device::st(rs, i * pitch + kc, T::ZERO) };
        }
        if l == 0 {
            // SAFETY: 2·pitch rotation entries.
            unsafe {
                device::st(rot, 2 * i, c);
                device::st(rot, 2 * i + 1, s);
            }
        }
        i -= 1;
    }
    // SAFETY: every lane; the rotations are visible after it.
    unsafe { device::sync_warp() };
    let mut i = l;
    while i < m {
        // SAFETY: own row i of columns ≤ nc of qs; the rotations written above.
        unsafe {
            let mut carry = device::ld(qs, nc * m + i);
            let mut j = nc;
            while j > kc {
                let (c, s) = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                let x = device::ld(qs, (j - 1) * m + i);
                device::st(qs, j * m + i, c.mul_add(carry, s.neg().mul(x)));
                carry = c.mul_add(x, s.mul(carry));
                j -= 1;
            }
            device::st(qs, kc * m + i, carry);
        }
        i += team.size;
    }
    independent
}

/// Rotation (c, s) zeroing R(b, col) against R(a, col) (row-major, pitch), column `col`
/// being the team's lane col's: both values travel by shuffle, every lane gets (c, s).
///
/// # Safety
/// The whole warp calls convergently; col < pitch ≤ team size; rows a and b exist.
#[inline(always)]
unsafe fn pair_rotation<T: Float>(
    team: Team,
    r: *const T,
    pitch: usize,
    col: usize,
    (a, b): (usize, usize),
) -> (T, T) {
    let (mut f, mut g) = (T::ZERO, T::ZERO);
    if team.lane == col {
        // SAFETY: inside `r` (contract).
        unsafe {
            f = device::ld(r, a * pitch + col);
            g = device::ld(r, b * pitch + col);
        }
    }
    // SAFETY: convergent warp (caller); col < team size.
    let (f, g) = unsafe { (team.bcast(f, col), team.bcast(g, col)) };
    let (c, s, _) = givens(f, g);
    (c, s)
}
