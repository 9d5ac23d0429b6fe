//! The batched rank-one and rank-k updates in place (docs/algorithms.md#thin-rank-one-update).

use super::team::*;
use super::{NON_FINITE, OK, smem};
use crate::device::{self, Float};
use crate::two_phase::givens;

/// Replaces every problem's A by A + U Vᵀ in place, as `kk` thin rank-one updates one after
/// another (docs/algorithms.md#thin-rank-one-update: w = Q₁ᵀu and q̂ by Gram–Schmidt twice,
/// stage A reducing [w; γ] to a multiple of e₀, row 0 gaining it times vᵀ, stage B clearing
/// the subdiagonal), the state staying in shared memory between them. U is B × m × kk and V
/// B × n × kk (row-major a problem: u_t(i) at i·kk + t). b does not change. Each team reads
/// its problem into shared memory before it writes anything back; a problem with a
/// non-finite entry in U or V, or whose result would not be finite, writes nothing and gets
/// [`NON_FINITE`]. A non-null `export` (B·kk·2·m) receives each term's q̂ before and after the
/// rotations, whose exchange a full-Q state carries over to its complement
/// (docs/algorithms.md#batched-full-q-states).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::rank_one`]`(m, n)` elements; `q` B·m·n and `r` B·n·n
/// read-writable, `u` B·m·kk, `v` B·n·kk readable, `status` B writable; B ≥ 1, kk ≥ 1,
/// 1 ≤ n ≤ 32, m ≥ n; u, v and status overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn rank_one<T: Float>(
    q: *mut T,
    r: *mut T,
    u: *const T,
    v: *const T,
    status: *mut u32,
    export: *mut T,
    batch: usize,
    m: usize,
    n: usize,
    kk: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, qs) = unsafe { setup::<T>(team, batch, smem::rank_one(m, n)) };
    // SAFETY: inside the team's region.
    let (rs, wv, w2, rot) = unsafe {
        let rs = qs.add(m * (n + 1));
        let wv = rs.add((n + 1) * n);
        (rs, wv, wv.add(n), wv.add(2 * n))
    };
    // SAFETY: problem k at m×n (contract).
    unsafe { load_state(team, (q as *const T, r as *const T), (qs, m, rs), (k, m, n)) };
    let z = qs.wrapping_add(n * m);
    let mut ok = true;
    for t in 0..kk {
        // SAFETY: every lane; the previous term's reads of z and of the rotations are done.
        unsafe { device::sync_warp() };
        let mut i = team.lane;
        while i < m {
            // SAFETY: own rows of u and of column n.
            unsafe {
                let x = device::ld(u, (k * m + i) * kk + t);
                ok &= x.is_finite();
                device::st(z, i, x);
            }
            i += team.size;
        }
        let mut vc = T::ZERO;
        if team.lane < n {
            // SAFETY: v holds B·n·kk; row n of rs exists.
            unsafe {
                vc = device::ld(v, (k * n + team.lane) * kk + t);
                device::st(rs, n * n + team.lane, T::ZERO);
            }
            ok &= vc.is_finite();
        }
        // SAFETY: the sum is convergent.
        let unorm2 = unsafe { norm2(team, z, m) };
        // Gram–Schmidt twice: w = Q₁ᵀu, z = u − Q₁w.
        let qv = (qs as *const T, m, m, n);
        // SAFETY: convergent warp; own rows; buffers sized by the contract.
        unsafe {
            project(team, qv, z, wv);
            subtract(team, qv, wv, z);
            project(team, qv, z, w2);
            subtract(team, qv, w2, z);
        }
        // SAFETY: convergent.
        let mut gamma = unsafe { norm2(team, z, m) }.sqrt();
        let small = T::from_f64(64.0 * T::UNIT_ROUNDOFF).mul(unorm2.sqrt());
        let zscale = if gamma <= small {
            gamma = T::ZERO;
            T::ZERO
        } else {
            T::ONE.div(gamma)
        };
        // SAFETY: own rows.
        unsafe { scale_rows(team, z, m, zscale) };
        let ex = if valid && !export.is_null() {
            export.wrapping_add((k * kk + t) * 2 * m)
        } else {
            core::ptr::null_mut()
        };
        if !ex.is_null() {
            // SAFETY: own rows of q̂ and of the term's export (2m, contract).
            unsafe { export_cols(team, (z as *const T, m), (0, 1), ex) };
        }
        // SAFETY: convergent; the working copy's parts as laid out above.
        unsafe {
            rotate_r(team, (rs, n), (wv, w2, rot), (gamma, vc));
            rotate_q(team, (qs, m, n), rot);
        }
        if !ex.is_null() {
            // SAFETY: own rows of the rotated q̂ (column n) and of the export.
            unsafe { export_cols(team, (qs as *const T, m), (n, 1), ex.wrapping_add(m)) };
        }
    }
    // SAFETY: own rows and column of the working copy; every lane votes.
    let (ok, fine) = unsafe {
        let mine = finite_rows(team, (qs, m), (m, n)) && finite_col(team, rs, n);
        (team.all(ok), team.all(mine))
    };
    if valid && ok && fine {
        // SAFETY: problem k's state; own rows and column.
        unsafe {
            store_q(team, (qs, m), q, (k, m, n));
            store_r(team, rs, r, k, n);
        }
    }
    if valid && team.lane == 0 {
        // SAFETY: k < B.
        unsafe { device::st(status, k, if ok && fine { OK } else { NON_FINITE }) };
    }
}

/// Stage A ([w + w₂; γ] → t·e₀ by rotations (j, j+1), j = n−1 … 0; every lane runs the same
/// chain from the shared w), row 0 of [R; 0] gaining t·vᵀ (`vc` the lane's entry of v), then
/// stage B (rotations clearing the subdiagonal), on the lanes' columns of `rs` (pitch n, n + 1
/// rows); the 2n rotations go to `rot` (stage A at 2j, stage B at 2n + 2j) and a warp barrier
/// ends the call.
///
/// # Safety
/// The whole warp calls convergently; `rs` holds (n+1)·n, `wv` and `w2` n (written before a
/// barrier), `rot` 4n elements of the team's working copy.
#[inline(always)]
unsafe fn rotate_r<T: Float>(
    team: Team,
    (rs, n): (*mut T, usize),
    (wv, w2, rot): (*const T, *const T, *mut T),
    (gamma, vc): (T, T),
) {
    let mut t = gamma;
    for j in (0..n).rev() {
        // SAFETY: w and w₂ were written before a barrier (contract).
        let wj = unsafe { device::ld(wv, j).add(device::ld(w2, j)) };
        let (c, s, rr) = givens(wj, t);
        t = rr;
        // SAFETY: rows j, j+1 ≤ n of rs; lane's own column.
        unsafe { rotate_col(team, rs, n, (j, j + 1), (c, s)) };
        if team.lane == 0 {
            // SAFETY: 4n rotation entries.
            unsafe {
                device::st(rot, 2 * j, c);
                device::st(rot, 2 * j + 1, s);
            }
        }
    }
    if team.lane < n {
        // SAFETY: own column of row 0.
        unsafe { device::st(rs, team.lane, t.mul_add(vc, device::ld(rs, team.lane))) };
    }
    for j in 0..n {
        // SAFETY: convergent; rows j, j+1 exist.
        let (c, s) = unsafe { zeroing_rotation(team, rs, n, j, j + 1) };
        // SAFETY: own column.
        unsafe { rotate_col(team, rs, n, (j, j + 1), (c, s)) };
        if team.lane == j {
            // SAFETY: own column j.
            unsafe { device::st(rs, (j + 1) * n + j, T::ZERO) };
        }
        if team.lane == 0 {
            // SAFETY: 4n entries.
            unsafe {
                device::st(rot, 2 * n + 2 * j, c);
                device::st(rot, 2 * n + 2 * j + 1, s);
            }
        }
    }
    // SAFETY: every lane; the rotations are visible after it.
    unsafe { device::sync_warp() };
}

/// Both stages' rotations (`rot`, as [`rotate_r`] wrote them) on the lanes' rows of [Q₁ q̂]
/// (`qs`, column-major, ld m, n + 1 columns), each row in two passes with the moving entry in
/// a register: stage A (j = n−1 … 0) leaves column j+1 final after rotation j; stage B (j = 0
/// … n−1) leaves column j final after rotation j, and column n (q̂ rotated: it leaves Q₁) is
/// stored back.
///
/// # Safety
/// `qs` holds m·(n+1) and `rot` 4n elements written before a barrier.
#[inline(always)]
unsafe fn rotate_q<T: Float>(team: Team, (qs, m, n): (*mut T, usize, usize), rot: *const T) {
    let mut i = team.lane;
    while i < m {
        // SAFETY: own row i of columns ≤ n; the rotations (contract).
        unsafe {
            let mut carry = device::ld(qs, n * m + i);
            for j in (0..n).rev() {
                let (c, s) = (device::ld(rot, 2 * j), device::ld(rot, 2 * j + 1));
                let x = device::ld(qs, j * m + i);
                device::st(qs, (j + 1) * m + i, c.mul_add(carry, s.neg().mul(x)));
                carry = c.mul_add(x, s.mul(carry));
            }
            for j in 0..n {
                let (c, s) = (
                    device::ld(rot, 2 * n + 2 * j),
                    device::ld(rot, 2 * n + 2 * j + 1),
                );
                let y = device::ld(qs, (j + 1) * m + i);
                device::st(qs, j * m + i, c.mul_add(carry, s.mul(y)));
                carry = c.mul_add(y, s.neg().mul(carry));
            }
            device::st(qs, n * m + i, carry);
        }
        i += team.size;
    }
}
