//! The floating-point types cuqr works in: `f32` and `f64` through one trait.

use core::fmt::{Debug, Display, LowerExp};
use core::iter::Sum;
use core::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// A real floating-point scalar (`f32` or `f64`).
///
/// Everything the CPU backend needs is here, so algorithms are written once
/// and monomorphised for both precisions.
pub trait Scalar:
    Copy
    + Send
    + Sync
    + 'static
    + Debug
    + Display
    + LowerExp
    + PartialEq
    + PartialOrd
    + Default
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Sum
    + faer::traits::RealField
{
    /// Unit roundoff u = ε/2 (2⁻²⁴ for f32, 2⁻⁵³ for f64), as in
    /// docs/algorithms.md#accuracy-measures.
    const UNIT_ROUNDOFF: f64;
    /// Short type name used in kernel names and reports (`"f32"`, `"f64"`).
    const NAME: &'static str;
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// Smallest positive normal value (`f32::MIN_POSITIVE`, `f64::MIN_POSITIVE`).
    const MIN_POSITIVE: Self;
    /// Rounds an `f64` to this type.
    fn from_f64(x: f64) -> Self;
    /// Widens to `f64` (exact).
    fn to_f64(self) -> f64;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// Fused multiply-add `self * a + b` with one rounding.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// `sqrt(self² + other²)` without undue overflow or underflow.
    fn hypot(self, other: Self) -> Self;
    /// Magnitude of `self` with the sign of `sign`.
    fn copysign(self, sign: Self) -> Self;
    /// True unless NaN or ±∞.
    fn is_finite(self) -> bool;
    /// Larger of two values (NaN-ignoring, as `f64::max`).
    fn max(self, other: Self) -> Self;
}

macro_rules! impl_scalar {
    ($t:ty, $u:expr, $name:literal) => {
        impl Scalar for $t {
            const UNIT_ROUNDOFF: f64 = $u;
            const NAME: &'static str = $name;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const MIN_POSITIVE: Self = <$t>::MIN_POSITIVE;
            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                <$t>::mul_add(self, a, b)
            }
            #[inline(always)]
            fn hypot(self, other: Self) -> Self {
                <$t>::hypot(self, other)
            }
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                <$t>::copysign(self, sign)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                <$t>::max(self, other)
            }
        }
    };
}

impl_scalar!(f32, 5.960_464_477_539_063e-8, "f32");
impl_scalar!(f64, 1.110_223_024_625_156_5e-16, "f64");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_roundoff_is_half_epsilon() {
        assert_eq!(<f32 as Scalar>::UNIT_ROUNDOFF, f32::EPSILON as f64 / 2.0);
        assert_eq!(<f64 as Scalar>::UNIT_ROUNDOFF, f64::EPSILON / 2.0);
    }
}
