//! The batched least-squares solve with the rank test (docs/algorithms.md#batched-states).

use super::team::*;
use super::{OK, RANK_DEFICIENT, smem};
use crate::device::{self, Float};

/// Solves every problem: d = Q₁ᵀb, the residual ‖b − Q₁d‖² into `rss`, and x = R⁻¹d with
/// the rank test |R_jj| > tol·‖R‖_F (tol = `rank_tol` when non-negative, else
/// max(m, n)·u/√min(m, n)); a failing problem gets x = NaN and [`RANK_DEFICIENT`].
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::solve`]`(n)` elements; `q` B·m·n, `r` B·n·n, `b` B·m
/// readable; `x` B·n, `rss` B, `status` B writable; B ≥ 1, 1 ≤ n ≤ 32, m ≥ 1.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn solve<T: Float>(
    q: *const T,
    r: *const T,
    b: *const T,
    x: *mut T,
    rss: *mut T,
    status: *mut u32,
    batch: usize,
    m: usize,
    n: usize,
    rank_tol: f64,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, rs) = unsafe { setup::<T>(team, batch, smem::solve(n)) };
    // SAFETY: inside the team's region.
    let dv = unsafe { rs.add(n * n) };
    let l = team.lane;
    let mut fro = T::ZERO;
    if l < n {
        for row in 0..n {
            // SAFETY: problem k's R; own column of rs.
            unsafe {
                let v = device::ld(r, k * n * n + row * n + l);
                fro = v.mul_add(v, fro);
                device::st(rs, row * n + l, v);
            }
        }
    }
    // SAFETY: convergent; `project` ends with a barrier that also publishes rs.
    let fro = unsafe {
        project(team, (q.add(k * m * n), m, m, n), b.add(k * m), dv);
        team.sum(fro)
    }
    .sqrt();
    let mut res = T::ZERO;
    let mut i = l;
    while i < m {
        // SAFETY: problem k's rows; d written before the barrier.
        unsafe {
            let mut e = device::ld(b, k * m + i);
            for c in 0..n {
                e = device::ld(q, k * m * n + c * m + i)
                    .neg()
                    .mul_add(device::ld(dv, c), e);
            }
            res = e.mul_add(e, res);
        }
        i += team.size;
    }
    // SAFETY: convergent.
    let res = unsafe { team.sum(res) };
    let tol = if rank_tol >= 0.0 {
        rank_tol
    } else {
        let (big, small) = (m.max(n) as f64, m.min(n).max(1) as f64);
        big * T::UNIT_ROUNDOFF / sqrt_f64(small)
    };
    let bound = T::from_f64(tol).mul(fro);
    let mut ok = true;
    if l < n {
        // SAFETY: the lane's diagonal entry (its own write).
        let d = unsafe { device::ld(rs, l * n + l) }.abs();
        ok = d.is_finite() && d > bound;
    }
    // SAFETY: every lane votes.
    let ok = unsafe { team.all(ok) };
    // Back substitution: lane c holds y_c; x_j goes out from lane j by shuffle.
    let mut y = if l < n {
        // SAFETY: d written before the barrier.
        unsafe { device::ld(dv, l) }
    } else {
        T::ZERO
    };
    let mut xl = T::ZERO;
    for j in (0..n).rev() {
        let mine = if l == j {
            // SAFETY: visible after project's barrier.
            y.div(unsafe { device::ld(rs, j * n + j) })
        } else {
            T::ZERO
        };
        // SAFETY: convergent; j < n ≤ team size.
        let xj = unsafe { team.bcast(mine, j) };
        if l == j {
            xl = xj;
        }
        if l < j {
            // SAFETY: visible after the barrier.
            y = unsafe { device::ld(rs, l * n + j) }.neg().mul_add(xj, y);
        }
    }
    if valid && l < n {
        let out = if ok { xl } else { T::ZERO.div(T::ZERO) };
        // SAFETY: problem k's x.
        unsafe { device::st(x, k * n + l, out) };
    }
    if valid && l == 0 {
        // SAFETY: k < B.
        unsafe {
            device::st(rss, k, res);
            device::st(status, k, if ok { OK } else { RANK_DEFICIENT });
        }
    }
}
