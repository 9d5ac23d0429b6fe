//! The batched factorisation: Householder QR of each problem in shared memory, Q₁ formed
//! (docs/algorithms.md#batched-states).

use super::team::*;
use super::{NON_FINITE, OK, smem};
use crate::device::{self, Float};

/// Factorises every problem: A = Q₁R by Householder reflectors (docs/algorithms.md#batched-states),
/// Q₁ formed by backward accumulation, b copied. A problem with a non-finite entry in A or b
/// gets [`NON_FINITE`] (its outputs are not written: the call is all-or-nothing).
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::factor`]`(m, n)` elements; `a` readable B·m·n, `b` B·m;
/// `q` writable B·m·n, `r` B·n·n, `b_out` B·m, `status` B; B ≥ 1, m ≥ n, 1 ≤ n ≤ 32; outputs
/// overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn factor<T: Float>(
    a: *const T,
    b: *const T,
    q: *mut T,
    r: *mut T,
    b_out: *mut T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, w) = unsafe { setup::<T>(team, batch, smem::factor(m, n)) };
    // SAFETY: inside the team's region.
    let (qs, tau) = unsafe { (w.add(m * n), w.add(2 * m * n)) };
    let mut ok = true;
    let mut i = team.lane;
    while i < m {
        // SAFETY: row i of problem k (contract); the lane's own rows of `w`.
        unsafe {
            for c in 0..n {
                let v = device::ld(a, (k * m + i) * n + c);
                ok &= v.is_finite();
                device::st(w, c * m + i, v);
            }
            let bv = device::ld(b, k * m + i);
            ok &= bv.is_finite();
            if valid {
                device::st(b_out, k * m + i, bv);
            }
        }
        i += team.size;
    }
    // SAFETY: every lane reaches the vote.
    let ok = unsafe { team.all(ok) };
    // SAFETY: convergent warp; w holds A (m×n) and tau n elements (contract).
    unsafe {
        householder_qr(team, w, tau, (m, n));
        form_q(team, w, tau, qs, (m, n));
    }
    if valid && ok {
        // SAFETY: problem k's outputs (contract); R's entry (row, lane) sits in column
        // `lane` of w, row `row`, written by the owner of `row` before the barrier above.
        unsafe {
            store_q(team, (qs, m), q, (k, m, n));
            if team.lane < n {
                let l = team.lane;
                for row in 0..n {
                    let v = if row <= l {
                        device::ld(w, l * m + row)
                    } else {
                        T::ZERO
                    };
                    device::st(r, k * n * n + row * n + l, v);
                }
            }
        }
    }
    if valid && team.lane == 0 {
        // SAFETY: k < B.
        unsafe { device::st(status, k, if ok { OK } else { NON_FINITE }) };
    }
}

/// Householder QR of the column-major m×n block `w` in place (docs/algorithms.md#batched-states):
/// R on and above the diagonal, the reflectors' vectors below it (v_j = 1 implied), their
/// τ in `tau`; a zero tail makes the reflector the identity (τ = 0). Every team of the warp
/// runs the same instructions.
///
/// # Safety
/// The whole warp calls convergently with the same m and n; `w` holds m·n and `tau` n
/// elements of the team's working copy; each lane has written only its own rows of `w`.
#[inline(always)]
pub(super) unsafe fn householder_qr<T: Float>(
    team: Team,
    w: *mut T,
    tau: *mut T,
    (m, n): (usize, usize),
) {
    for j in 0..n {
        // The reflector of column j from rows j..m: scaled norm of the tail.
        let mut amax = T::ZERO;
        let mut i = team.first_row(j + 1);
        while i < m {
            // SAFETY: own row i > j.
            amax = amax.max(unsafe { device::ld(w, j * m + i) }.abs());
            i += team.size;
        }
        // SAFETY: convergent warp (j is uniform).
        let amax = unsafe { team.max(amax) };
        let mine = if team.owns(j) {
            // SAFETY: the owner reads its row j.
            unsafe { device::ld(w, j * m + j) }
        } else {
            T::ZERO
        };
        // SAFETY: convergent warp.
        let alpha = unsafe { team.bcast(mine, j & (team.size - 1)) };
        // A zero tail makes the reflector the identity (τ = 0, β = α): computed alike, so
        // that every team runs the same shuffles.
        let zero = amax == T::ZERO;
        let inv = if zero { T::ZERO } else { T::ONE.div(amax) };
        let mut ss = T::ZERO;
        let mut i = team.first_row(j + 1);
        while i < m {
            // SAFETY: own row i > j.
            let v = unsafe { device::ld(w, j * m + i) }.mul(inv);
            ss = v.mul_add(v, ss);
            i += team.size;
        }
        // SAFETY: convergent warp.
        let ss = unsafe { team.sum(ss) };
        let an = alpha.mul(inv);
        let norm = amax.mul(an.mul_add(an, ss).sqrt());
        let beta = if zero {
            alpha
        } else {
            norm.copysign(alpha).neg()
        };
        let tau_j = if zero {
            T::ZERO
        } else {
            beta.sub(alpha).div(beta)
        };
        let scal = if zero {
            T::ONE
        } else {
            T::ONE.div(alpha.sub(beta))
        };
        let mut i = team.first_row(j + 1);
        while i < m {
            // SAFETY: own row i > j.
            unsafe { device::st(w, j * m + i, device::ld(w, j * m + i).mul(scal)) };
            i += team.size;
        }
        if team.owns(j) {
            // SAFETY: own row j.
            unsafe { device::st(w, j * m + j, beta) };
        }
        if team.lane == 0 {
            // SAFETY: j < n.
            unsafe { device::st(tau, j, tau_j) };
        }
        // SAFETY: convergent warp; own rows only.
        unsafe { apply_reflector(team, w, (m, n), j, tau_j, (w, j + 1)) };
    }
}

/// Q₁ (m×n, column-major in `qs`) by backward accumulation of [`householder_qr`]'s reflectors
/// (in `w` and `tau`) on [I; 0].
///
/// # Safety
/// As [`householder_qr`], after it; `qs` holds m·n elements.
#[inline(always)]
pub(super) unsafe fn form_q<T: Float>(
    team: Team,
    w: *const T,
    tau: *const T,
    qs: *mut T,
    (m, n): (usize, usize),
) {
    // SAFETY: every lane; τ written by each team's lane 0 above.
    unsafe { device::sync_warp() };
    let mut i = team.lane;
    while i < m {
        for c in 0..n {
            let v = if i == c { T::ONE } else { T::ZERO };
            // SAFETY: own row i of qs.
            unsafe { device::st(qs, c * m + i, v) };
        }
        i += team.size;
    }
    for j in (0..n).rev() {
        // SAFETY: τ (n) was written before the barrier.
        let tau_j = unsafe { device::ld(tau, j) };
        // SAFETY: convergent warp (j uniform; τ = 0 is the identity); own rows.
        unsafe { apply_reflector(team, w, (m, n), j, tau_j, (qs, j)) };
    }
}

/// Applies the reflector I − τvvᵀ of column j of `w` (v_j = 1, v_i = w(i, j) below) to
/// columns c0..n of `target` (column-major, ld m), rows j..m, four columns a pass.
///
/// # Safety
/// The whole warp calls convergently with the same j and c0; each lane touches only its own
/// rows of `target`; `w` and `target` hold m·n elements.
#[inline(always)]
pub(super) unsafe fn apply_reflector<T: Float>(
    team: Team,
    w: *const T,
    (m, n): (usize, usize),
    j: usize,
    tau: T,
    (target, c0): (*mut T, usize),
) {
    let first = team.first_row(j);
    let v_of = |i: usize| {
        if i == j {
            T::ONE
        } else {
            // SAFETY: own row i > j of w (contract).
            unsafe { device::ld(w, j * m + i) }
        }
    };
    let mut c = c0;
    while c < n {
        let (mut p0, mut p1, mut p2, mut p3) = (T::ZERO, T::ZERO, T::ZERO, T::ZERO);
        let mut i = first;
        while i < m {
            let v = v_of(i);
            // SAFETY: own rows, columns below n (guards).
            unsafe {
                p0 = device::ld(target, c * m + i).mul_add(v, p0);
                if c + 1 < n {
                    p1 = device::ld(target, (c + 1) * m + i).mul_add(v, p1);
                }
                if c + 2 < n {
                    p2 = device::ld(target, (c + 2) * m + i).mul_add(v, p2);
                }
                if c + 3 < n {
                    p3 = device::ld(target, (c + 3) * m + i).mul_add(v, p3);
                }
            }
            i += team.size;
        }
        // SAFETY: convergent warp (c uniform).
        let (s0, s1, s2, s3) = unsafe { team.sum4((p0, p1, p2, p3)) };
        let (t0, t1, t2, t3) = (tau.mul(s0), tau.mul(s1), tau.mul(s2), tau.mul(s3));
        let mut i = first;
        while i < m {
            let v = v_of(i);
            // SAFETY: as above.
            unsafe {
                let e = c * m + i;
                device::st(target, e, t0.neg().mul_add(v, device::ld(target, e)));
                if c + 1 < n {
                    let e = (c + 1) * m + i;
                    device::st(target, e, t1.neg().mul_add(v, device::ld(target, e)));
                }
                if c + 2 < n {
                    let e = (c + 2) * m + i;
                    device::st(target, e, t2.neg().mul_add(v, device::ld(target, e)));
                }
                if c + 3 < n {
                    let e = (c + 3) * m + i;
                    device::st(target, e, t3.neg().mul_add(v, device::ld(target, e)));
                }
            }
            i += team.size;
        }
        c += 4;
    }
}
