//! Householder reflectors, serial (docs/algorithms.md#householder-vectors, LAPACK convention H = I
//! − τvvᵀ, v(0) = 1).
//! Robust `house`: scaled norm, τ = 0 when the tail is zero
//! (docs/algorithms.md#householder-zero-tail).
#![forbid(unsafe_code)]

use crate::base::scalar::Scalar;

/// Scaled 2-norm of `x` (two passes: max |xᵢ|, then Σ(xᵢ/scale)²), as LAPACK `xNRM2`
/// guards against overflow and underflow (docs/algorithms.md#householder-norm-scaling).
pub fn nrm2<T: Scalar>(x: &[T]) -> T {
    let mut scale = T::ZERO;
    for &xi in x {
        scale = scale.max(xi.abs());
    }
    if scale == T::ZERO || !scale.is_finite() {
        return scale;
    }
    let mut ssq = T::ZERO;
    let inv = T::ONE / scale;
    if inv.is_finite() {
        for &xi in x {
            let t = xi * inv;
            ssq = t.mul_add(t, ssq);
        }
    } else {
        // scale is subnormal: 1/scale overflows, so divide instead.
        for &xi in x {
            let t = xi / scale;
            ssq = t.mul_add(t, ssq);
        }
    }
    scale * ssq.sqrt()
}

/// Generates the reflector that maps (α, x) to (β, 0): returns (β, τ) and
/// overwrites `x` with the tail of v (v(0) = 1 implicit). docs/algorithms.md#householder-vectors:
/// σ = ‖x‖; σ = 0 gives τ = 0, β = α, v_tail = 0 (H = I);
/// otherwise β = −copysign(hypot(α, σ), α), v_tail = x/(α − β), τ = (β − α)/β.
pub fn house<T: Scalar>(alpha: T, x: &mut [T]) -> (T, T) {
    let sigma = nrm2(x);
    if sigma == T::ZERO {
        for xi in x.iter_mut() {
            *xi = T::ZERO;
        }
        return (alpha, T::ZERO);
    }
    let mut mu = alpha.hypot(sigma);
    let mut alpha_s = alpha;
    let subnormal = mu < T::MIN_POSITIVE;
    if subnormal {
        // As LAPACK xLARFG: with a subnormal β, 1/(α − β) overflows and τ and v
        // computed from the few bits left are inconsistent (H not orthogonal). Scale
        // α and x by 1/MIN_POSITIVE (a power of two: exact, and into the normal
        // range), and scale β back at the end.
        let up = T::ONE / T::MIN_POSITIVE;
        alpha_s *= up;
        for xi in x.iter_mut() {
            *xi *= up;
        }
        mu = alpha_s.hypot(nrm2(x));
    }
    let beta_s = -mu.copysign(alpha_s);
    let inv = T::ONE / (alpha_s - beta_s);
    for xi in x.iter_mut() {
        *xi *= inv;
    }
    let tau = (beta_s - alpha_s) / beta_s;
    let beta = if subnormal {
        beta_s * T::MIN_POSITIVE
    } else {
        beta_s
    };
    (beta, tau)
}

/// Applies H = I − τ v vᵀ (v = [1; v_tail]) from the left to a vector whose
/// first entry is `*head` and remaining entries `tail` (same length as v_tail).
#[inline]
pub fn apply_left_split<T: Scalar>(v_tail: &[T], tau: T, head: &mut T, tail: &mut [T]) {
    if tau == T::ZERO {
        return;
    }
    debug_assert_eq!(v_tail.len(), tail.len());
    let mut w = *head;
    for (v, t) in v_tail.iter().zip(tail.iter()) {
        w = v.mul_add(*t, w);
    }
    let tw = tau * w;
    *head -= tw;
    for (v, t) in v_tail.iter().zip(tail.iter_mut()) {
        *t = (-tw).mul_add(*v, *t);
    }
}

/// Applies H = I − τ v vᵀ from the left to a contiguous vector `c` whose first
/// entry meets v(0) = 1.
#[inline]
pub fn apply_left<T: Scalar>(v_tail: &[T], tau: T, c: &mut [T]) {
    let (head, tail) = c.split_first_mut().expect("non-empty");
    apply_left_split(v_tail, tau, head, tail);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn house_zero_tail_is_identity() {
        let mut x = [0.0f64; 3];
        let (beta, tau) = house(-2.5, &mut x);
        assert_eq!((beta, tau), (-2.5, 0.0));
        let mut y: [f64; 0] = [];
        assert_eq!(house(3.0, &mut y), (3.0, 0.0));
    }

    #[test]
    fn house_annihilates_and_is_orthogonal() {
        for &alpha in &[1.5f64, -0.7, 0.0] {
            let x0 = [0.3f64, -1.2, 2.0, 1e-3];
            let mut v = x0;
            let (beta, tau) = house(alpha, &mut v);
            // Apply H to the original vector: must give (β, 0, ...).
            let mut c = [alpha, x0[0], x0[1], x0[2], x0[3]];
            apply_left(&v, tau, &mut c);
            assert!((c[0] - beta).abs() < 1e-14);
            for ci in &c[1..] {
                assert!(ci.abs() < 1e-14, "{c:?}");
            }
            let norm = (alpha * alpha + x0.iter().map(|t| t * t).sum::<f64>()).sqrt();
            assert!((beta.abs() - norm).abs() < 1e-14);
            assert!((1.0..=2.0).contains(&tau));
        }
    }

    #[test]
    fn house_scaled_norm_survives_extremes() {
        let mut x = [1e200f64, 1e200];
        let (beta, _) = house(1e200, &mut x);
        assert!(beta.is_finite() && (beta.abs() / (3f64.sqrt() * 1e200) - 1.0).abs() < 1e-14);
        let mut y = [1e-200f64, 1e-200];
        let (beta, tau) = house(0.0, &mut y);
        assert!(beta != 0.0 && tau.is_finite());
        let mut z = [3e30f32, 4e30];
        let (b32, _) = house(0.0f32, &mut z);
        assert!((b32.abs() / 5e30 - 1.0).abs() < 1e-6);
    }

    /// Subnormal columns: 1/scale and 1/(α − β) overflowed to ∞, which made the norm
    /// ∞ and the reflector NaN (a full-rank matrix with entries ~1e-310 was refused
    /// as rank deficient with |r_00| = ∞); H must stay orthogonal.
    #[test]
    fn house_handles_subnormal_columns() {
        let s = 1e-310f64;
        assert!(s < f64::MIN_POSITIVE);
        let n = nrm2(&[3.0 * s, 4.0 * s]);
        assert!((n / (5.0 * s) - 1.0).abs() < 1e-12, "{n:e}");
        for alpha in [s, -2.0 * s, 0.0] {
            let x0 = [3.0 * s, -4.0 * s, s];
            let mut v = x0;
            let (beta, tau) = house(alpha, &mut v);
            assert!(beta.is_finite() && tau.is_finite(), "{beta:e} {tau:e}");
            assert!(v.iter().all(|t| t.is_finite()), "{v:?}");
            let norm = (alpha / s).hypot((9.0f64 + 16.0 + 1.0).sqrt()) * s;
            assert!(
                (beta.abs() / norm - 1.0).abs() < 1e-12,
                "{beta:e} vs {norm:e}"
            );
            assert!((1.0..=2.0).contains(&tau), "{tau}");
            // H = I − τ v vᵀ is orthogonal to working precision: τ(1 + ‖v‖²) = 2.
            let vv: f64 = 1.0 + v.iter().map(|t| t * t).sum::<f64>();
            assert!((tau * vv - 2.0).abs() < 1e-14, "τ·vᵀv = {}", tau * vv);
        }
        let t = 1e-40f32;
        assert!(t < f32::MIN_POSITIVE);
        let mut w = [t, t];
        let (b32, tau32) = house(t, &mut w);
        assert!(b32.is_finite() && tau32.is_finite() && w.iter().all(|x| x.is_finite()));
    }
}
