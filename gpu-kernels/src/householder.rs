//! Householder reflector generation on the device: the robust `house` of
//! docs/algorithms.md#householder-vectors (with the corrections of
//! docs/algorithms.md#corrections-to-the-published-descriptions), the scaled norm and the
//! reflector fused in one kernel.
//! Same formulas as `host/src/cpu/householder.rs` `house`, so results agree to rounding.

use crate::device::{self, Float};
use crate::reduce;

/// `householder_house`: reads α = `*alpha` and the tail `x[0..n)`; σ = scaled ‖x‖₂;
/// σ = 0 gives τ = 0, β = α, x := 0; otherwise β = −copysign(hypot(α, σ), α),
/// x := x/(α − β), τ = (β − α)/β. Writes `*alpha = β`, `*tau = τ` (LAPACK sign, τ ≥ 0).
/// Grid 1, block 256, dynamic shared memory ≥ 32·size_of::<T>() (docs/kernels.md).
///
/// # Safety
/// Launch shape as documented; `alpha` and `tau` point at one writable `T` each, `x`
/// at `n` read-writable `T`s, and the three regions do not overlap.
#[inline(always)]
pub unsafe fn house<T: Float>(alpha: *mut T, x: *mut T, n: usize, tau: *mut T) {
    let tid = device::thread_linear();
    let nt = device::block_threads();
    // Every thread reads α before the barriers inside `block_nrm2`; thread 0 writes it
    // only after them.
    // SAFETY: `alpha` readable (caller's contract).
    let a = unsafe { device::ld(alpha as *const T, 0) };
    // SAFETY: block-uniform call; `x` readable for n; shared memory per the launch.
    let (s, r) = unsafe { reduce::block_nrm2_parts(x as *const T, n) };
    let sigma = s.mul(r);
    // The tail becomes x·pre·inv: pre = 1/MIN_POSITIVE when β is subnormal (else 1),
    // inv = 1/(α − β) of the scaled α and β.
    let (beta, t, pre, inv) = if sigma == T::ZERO {
        (a, T::ZERO, T::ONE, T::ZERO)
    } else {
        let mu = a.hypot(sigma);
        if mu < T::MIN_POSITIVE {
            // As the CPU `house` (LAPACK xLARFG): with a subnormal β, 1/(α − β)
            // overflows and τ and v from the few bits left are inconsistent. Scale α
            // and x by 1/MIN_POSITIVE (exact, into the normal range; here max |xᵢ| ≤
            // σ < MIN_POSITIVE, so s = MIN_POSITIVE and the scaled ‖x‖ is r), and scale
            // β back.
            let up = T::ONE.div(T::MIN_POSITIVE);
            let a_s = a.mul(up);
            let mu_s = a_s.hypot(s.mul(up).mul(r));
            let beta_s = mu_s.copysign(a_s).neg();
            let inv = T::ONE.div(a_s.sub(beta_s));
            (
                beta_s.mul(T::MIN_POSITIVE),
                beta_s.sub(a_s).div(beta_s),
                up,
                inv,
            )
        } else {
            let beta = mu.copysign(a).neg();
            let inv = T::ONE.div(a.sub(beta));
            (beta, beta.sub(a).div(beta), T::ONE, inv)
        }
    };
    let mut i = tid;
    while i < n {
        // SAFETY: i < n; thread `tid` rewrites only its own strided elements, and all
        // reads of `x` by other threads happened before the last barrier of the norm.
        unsafe {
            let v = if sigma == T::ZERO {
                T::ZERO
            } else {
                device::ld(x as *const T, i).mul(pre).mul(inv)
            };
            device::st(x, i, v);
        }
        i += nt;
    }
    if tid == 0 {
        // SAFETY: single writer; every thread read `*alpha` before the norm's barriers.
        unsafe {
            device::st(alpha, 0, beta);
            device::st(tau, 0, t);
        }
    }
}
