//! Drift control of batched thin-Q states (docs/algorithms.md#drift-control).

use super::factor::{form_q, householder_qr};
use super::team::*;
use super::{NON_FINITE, OK, REFRESHED, smem};
use crate::device::{self, Float};

/// Measures every problem's loss of orthogonality e = ‖Q₁ᵀQ₁ − I‖_F (into `drift`) and
/// refreshes, in place, each problem with e > `tol`: one Householder QR Q₁ = Q′R₂ and then
/// Q₁ ← Q′, R ← R₂R (docs/algorithms.md#drift-control: A = Q′(R₂R) is the same matrix, with
/// orthonormal columns again); b does not change. `status` says whether the problem was
/// left ([`OK`]), refreshed ([`REFRESHED`]) or would have been but its refreshed factors
/// were not finite ([`NON_FINITE`], nothing written). Each team reads its problem before it
/// writes anything back. A non-null `extra2` (B) adds each problem's complement share
/// 2‖Q₁ᵀQ₂‖² + ‖Q₂ᵀQ₂ − I‖² (a full-Q state's) to e² before the test.
///
/// # Safety
/// Grid (⌈B/(32/team)⌉, 1), block 32, team a power of two with n ≤ team ≤ 32, dynamic
/// shared memory (32/team)·[`smem::refresh`]`(m, n)` elements; `q` B·m·n and `r` B·n·n
/// read-writable, `drift` (B) and `status` (B) writable; B ≥ 1, m ≥ n, 1 ≤ n ≤ 32; `drift`
/// and `status` overlap nothing.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn refresh<T: Float>(
    q: *mut T,
    r: *mut T,
    drift: *mut T,
    status: *mut u32,
    extra2: *const T,
    batch: usize,
    m: usize,
    n: usize,
    tol: T,
    team: usize,
) {
    // SAFETY: shared memory sized per team (contract).
    let (team, k, valid, w) = unsafe { setup::<T>(team, batch, smem::refresh(m, n)) };
    // SAFETY: inside the team's region.
    let (qs, tau) = unsafe { (w.add(m * n), w.add(2 * m * n)) };
    // SAFETY: problem k's Q₁ into w (ld m), the lane's rows.
    unsafe { load_q(team, q as *const T, (w, m), (k, m, n)) };
    // e² = Σ_c ‖Q₁ᵀq_c − e_c‖², a column at a time through τ's space.
    let mut e2 = if extra2.is_null() {
        T::ZERO
    } else {
        // SAFETY: k < B (contract).
        unsafe { device::ld(extra2, k) }
    };
    for c in 0..n {
        // SAFETY: convergent; own rows of w; τ (n) written by lane 0 before the barrier
        // that ends `project`.
        unsafe {
            project(team, (w as *const T, m, m, n), w.add(c * m), tau);
            for d in 0..n {
                let g = device::ld(tau, d);
                let x = if c == d { g.sub(T::ONE) } else { g };
                e2 = x.mul_add(x, e2);
            }
            device::sync_warp();
        }
    }
    let e = e2.sqrt();
    let redo = e > tol;
    // Every team factors (the shuffles are whole-warp); only those past tol store.
    // SAFETY: convergent warp; w holds Q₁, τ and qs the team's working copy.
    unsafe {
        householder_qr(team, w, tau, (m, n));
        form_q(team, w, tau, qs, (m, n));
    }
    // R ← R₂R: lane l its column, R₂(i, t) = w(i, t) for i ≤ t (row i of R₂ written by
    // its owner before form_q's barriers).
    let l = team.lane;
    let mut col = [T::ZERO; 32];
    let mut fine = true;
    if l < n {
        for (i, slot) in col.iter_mut().enumerate().take(l + 1) {
            let mut acc = T::ZERO;
            for t in i..=l {
                // SAFETY: R₂ in w (m×n); problem k's R row-major (contract).
                unsafe {
                    acc =
                        device::ld(w, t * m + i).mul_add(device::ld(r, k * n * n + t * n + l), acc);
                }
            }
            fine &= acc.is_finite();
            *slot = acc;
        }
    }
    // SAFETY: own rows of qs; every lane votes.
    let fine = unsafe {
        let mine = fine && finite_rows(team, (qs as *const T, m), (m, n));
        team.all(mine)
    };
    if valid && redo && fine {
        // SAFETY: problem k's Q₁ and R; own rows and column (everything was read above).
        unsafe {
            store_q(team, (qs as *const T, m), q, (k, m, n));
            if l < n {
                for (i, &v) in col.iter().enumerate().take(l + 1) {
                    device::st(r, k * n * n + i * n + l, v);
                }
            }
        }
    }
    if valid && l == 0 {
        // SAFETY: k < B.
        unsafe {
            device::st(drift, k, e);
            let code = match (redo, fine) {
                (false, _) => OK,
                (true, true) => REFRESHED,
                (true, false) => NON_FINITE,
            };
            device::st(status, k, code);
        }
    }
}
