//! `tsqr_reconstruct`: the Householder reconstruction (V₁, T, τ, M = U⁻¹, R) from the
//! top of level 0's explicit Q by an LU without pivoting.

use super::COLS;
use crate::device::{self, Float};

/// Threads of [`reconstruct()`] (one per entry of a COLS×COLS matrix).
pub const RECON_THREADS: usize = COLS * COLS;

/// Leading dimension of [`reconstruct()`]'s shared matrices.
const LDR: usize = COLS + 1;

/// Shared memory of [`reconstruct()`], in elements: the LU, L₁⁻¹, U⁻¹ and the signs.
pub const RECON_SMEM: usize = 3 * COLS * LDR + COLS;

/// `tsqr_reconstruct`: from Q₁ = the top n×n of level 0's explicit Q (in `y`, ld
/// `ldy`) and the tree's R (`r_top`, ld `ldr`): the LU without pivoting Q₁ − S = L₁U
/// with sᵢ = −1 when the i-th pivot's Schur value is ≥ 0, else +1 — except for the
/// last column of a square panel (`rows` = n), whose reflector has no rows below the
/// diagonal and is the identity as in LAPACK: there sᵢ is the Schur value's sign (±1
/// in exact arithmetic) and uᵢᵢ = 0, so τᵢ = 0; writes V₁ = L₁ (unit
/// diagonal, zeros above) over `y`'s top n×n, T = −U·S·L₁⁻ᵀ (n×n, zeros below) to `t`
/// (ld `ldt`), τᵢ = tᵢᵢ to `tau`, M = U⁻¹ to `m` (ld COLS) and R = S·R_tree (zeros
/// below the diagonal) to `rh` (ld COLS).
///
/// # Safety
/// Grid 1, block [`RECON_THREADS`], dynamic shared memory [`RECON_SMEM`] elements;
/// 1 ≤ n ≤ COLS; `y` read-writable n×n; `r_top` readable n×n; `t` writable n×n; `tau`
/// writable for n; `m`, `rh` writable COLS×n; no overlap.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn reconstruct<T: Float>(
    y: *mut T,
    ldy: usize,
    rows: usize,
    n: usize,
    r_top: *const T,
    ldr: usize,
    t: *mut T,
    ldt: usize,
    tau: *mut T,
    m: *mut T,
    rh: *mut T,
) {
    let tid = device::thread_x();
    let (i, j) = (tid % COLS, tid / COLS);
    let sm = device::shared::<T>();
    // SAFETY: the offsets stay inside RECON_SMEM elements (launch contract).
    let (lu, linv, uinv, sv) = unsafe {
        let linv = sm.add(COLS * LDR);
        let uinv = linv.add(COLS * LDR);
        (sm, linv, uinv, uinv.add(COLS * LDR))
    };
    let inside = i < n && j < n;
    if inside {
        // SAFETY: inside y and the shared LU.
        unsafe { device::st(lu, i + j * LDR, device::ld(y as *const T, i + j * ldy)) };
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    for k in 0..n {
        // SAFETY: inside the shared LU; written before the last barrier.
        let akk = unsafe { device::ld(lu, k + k * LDR) };
        let (s, ukk) = if k + 1 == rows {
            (if akk >= T::ZERO { T::ONE } else { T::ONE.neg() }, T::ZERO)
        } else {
            let s = if akk >= T::ZERO { T::ONE.neg() } else { T::ONE };
            (s, akk.sub(s))
        };
        // SAFETY: block-uniform barrier: every thread read a_kk before it changes.
        unsafe { device::sync_threads() };
        if j == k && inside {
            // SAFETY: one writer per entry.
            unsafe {
                if i == k {
                    device::st(lu, k + k * LDR, ukk);
                    device::st(sv, k, s);
                } else if i > k {
                    device::st(lu, i + k * LDR, device::ld(lu, i + k * LDR).div(ukk));
                }
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        if inside && i > k && j > k {
            // SAFETY: one writer per entry; the operands (column k, row k) are final.
            unsafe {
                let x = device::ld(lu, i + k * LDR)
                    .neg()
                    .mul_add(device::ld(lu, k + j * LDR), device::ld(lu, i + j * LDR));
                device::st(lu, i + j * LDR, x);
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    // L₁⁻¹ and U⁻¹ by substitution on all columns at once: step k makes row k of
    // L₁⁻¹ (forward) and row n−1−k of U⁻¹ (backward) final.
    if inside {
        let e = if i == j { T::ONE } else { T::ZERO };
        // SAFETY: one writer per entry.
        unsafe {
            device::st(linv, i + j * LDR, e);
            device::st(uinv, i + j * LDR, e);
        }
    }
    // SAFETY: block-uniform barrier.
    unsafe { device::sync_threads() };
    for k in 0..n {
        let kk = n - 1 - k;
        if inside && i == kk {
            // SAFETY: one writer per entry of row kk. u_kk = 0 only for a square
            // panel's last column, whose row of U⁻¹ no output uses.
            unsafe {
                let u = device::ld(lu, kk + kk * LDR);
                let x = device::ld(uinv, kk + j * LDR);
                device::st(
                    uinv,
                    kk + j * LDR,
                    if u == T::ZERO { T::ZERO } else { x.div(u) },
                );
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
        if inside {
            // SAFETY: one writer per entry; rows k of L₁⁻¹ and kk of U⁻¹ are final.
            unsafe {
                if i > k {
                    let x = device::ld(lu, i + k * LDR)
                        .neg()
                        .mul_add(device::ld(linv, k + j * LDR), device::ld(linv, i + j * LDR));
                    device::st(linv, i + j * LDR, x);
                }
                if i < kk {
                    let x = device::ld(lu, i + kk * LDR).neg().mul_add(
                        device::ld(uinv, kk + j * LDR),
                        device::ld(uinv, i + j * LDR),
                    );
                    device::st(uinv, i + j * LDR, x);
                }
            }
        }
        // SAFETY: block-uniform barrier.
        unsafe { device::sync_threads() };
    }
    if inside {
        // SAFETY: inside every buffer (i, j < n); one writer per entry.
        unsafe {
            let si = device::ld(sv, i);
            // T_ij = Σ_{i≤k≤j} (−u_ik·s_k)·(L₁⁻¹)_jk.
            let mut tij = T::ZERO;
            if i <= j {
                for k in i..=j {
                    let w = device::ld(lu, i + k * LDR).mul(device::ld(sv, k)).neg();
                    tij = w.mul_add(device::ld(linv, j + k * LDR), tij);
                }
            }
            device::st(t, i + j * ldt, tij);
            if i == j {
                device::st(tau, i, tij);
            }
            let v1 = if i > j {
                device::ld(lu, i + j * LDR)
            } else if i == j {
                T::ONE
            } else {
                T::ZERO
            };
            device::st(y, i + j * ldy, v1);
            device::st(m, i + j * COLS, device::ld(uinv, i + j * LDR));
            let r = if i <= j {
                si.mul(device::ld(r_top, i + j * ldr))
            } else {
                T::ZERO
            };
            device::st(rh, i + j * COLS, r);
        }
    }
}
