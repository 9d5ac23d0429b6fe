//! The element types of explicit-factor updates ([`crate::explicit`]): the real scalars
//! `f32` and `f64` and the complex ones [`c32`] and [`c64`], through one trait.
//!
//! Everything an update in unitary rotations needs is here: conjugation, moduli without
//! undue overflow, and scaling by a real number (docs/algorithms.md#complex-rotations).

use core::fmt::Debug;
use core::ops::{Add, AddAssign, Div, Mul, Neg, Sub, SubAssign};

use crate::base::scalar::Scalar;

/// Single-precision complex numbers (`num_complex::Complex<f32>`, as faer and NumPy's
/// bindings use).
#[allow(non_camel_case_types)]
pub type c32 = faer::c32;
/// Double-precision complex numbers (`num_complex::Complex<f64>`).
#[allow(non_camel_case_types)]
pub type c64 = faer::c64;

/// A real or complex floating-point element.
pub trait Field:
    Copy
    + Send
    + Sync
    + 'static
    + Debug
    + PartialEq
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
{
    /// The real type of moduli and rotation cosines.
    type Real: Scalar;
    /// `"f32"`, `"f64"`, `"c32"` or `"c64"`.
    const NAME: &'static str;
    /// Whether the type is complex.
    const IS_COMPLEX: bool;
    /// Zero.
    fn zero() -> Self;
    /// One.
    fn one() -> Self;
    /// The real number `r` as an element.
    fn from_real(r: Self::Real) -> Self;
    /// The complex conjugate (the value itself for a real type).
    fn conj(self) -> Self;
    /// |x|, without overflow for large parts.
    fn modulus(self) -> Self::Real;
    /// x·r for a real r.
    fn scale(self, r: Self::Real) -> Self;
    /// True unless a part is NaN or ±∞.
    fn is_finite(self) -> bool;
    /// Real parts per element: 1 for a real type, 2 for a complex one (stored real part
    /// first, as NumPy, faer and cuBLAS store them).
    const PARTS: usize = if Self::IS_COMPLEX { 2 } else { 1 };
    /// The real part.
    fn re(self) -> Self::Real;
    /// The imaginary part (zero for a real type).
    fn im(self) -> Self::Real;
    /// The element's real parts in storage order (`[re]` or `[re, im]`), appended to `out`.
    fn push_parts(self, out: &mut Vec<Self::Real>);
    /// The element whose storage-order parts start `parts` (its first [`Field::PARTS`]).
    fn from_parts(parts: &[Self::Real]) -> Self;
}

/// `x` as its real parts in storage order ([`Field::push_parts`] of each element).
pub fn to_parts<T: Field>(x: &[T]) -> Vec<T::Real> {
    let mut out = Vec::with_capacity(x.len() * T::PARTS);
    for &v in x {
        v.push_parts(&mut out);
    }
    out
}

/// The elements whose storage-order parts are `parts` (its length a multiple of
/// [`Field::PARTS`]).
pub fn from_parts<T: Field>(parts: &[T::Real]) -> Vec<T> {
    parts.chunks_exact(T::PARTS).map(T::from_parts).collect()
}

macro_rules! impl_real_field {
    ($t:ty, $name:literal) => {
        impl Field for $t {
            type Real = $t;
            const NAME: &'static str = $name;
            const IS_COMPLEX: bool = false;
            #[inline(always)]
            fn zero() -> Self {
                0.0
            }
            #[inline(always)]
            fn one() -> Self {
                1.0
            }
            #[inline(always)]
            fn from_real(r: $t) -> Self {
                r
            }
            #[inline(always)]
            fn conj(self) -> Self {
                self
            }
            #[inline(always)]
            fn modulus(self) -> $t {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn scale(self, r: $t) -> Self {
                self * r
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn re(self) -> $t {
                self
            }
            #[inline(always)]
            fn im(self) -> $t {
                0.0
            }
            #[inline(always)]
            fn push_parts(self, out: &mut Vec<$t>) {
                out.push(self);
            }
            #[inline(always)]
            fn from_parts(parts: &[$t]) -> Self {
                parts[0]
            }
        }
    };
}

macro_rules! impl_complex_field {
    ($t:ty, $r:ty, $name:literal) => {
        impl Field for $t {
            type Real = $r;
            const NAME: &'static str = $name;
            const IS_COMPLEX: bool = true;
            #[inline(always)]
            fn zero() -> Self {
                <$t>::new(0.0, 0.0)
            }
            #[inline(always)]
            fn one() -> Self {
                <$t>::new(1.0, 0.0)
            }
            #[inline(always)]
            fn from_real(r: $r) -> Self {
                <$t>::new(r, 0.0)
            }
            #[inline(always)]
            fn conj(self) -> Self {
                <$t>::new(self.re, -self.im)
            }
            #[inline(always)]
            fn modulus(self) -> $r {
                <$r>::hypot(self.re, self.im)
            }
            #[inline(always)]
            fn scale(self, r: $r) -> Self {
                <$t>::new(self.re * r, self.im * r)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                self.re.is_finite() && self.im.is_finite()
            }
            #[inline(always)]
            fn re(self) -> $r {
                self.re
            }
            #[inline(always)]
            fn im(self) -> $r {
                self.im
            }
            #[inline(always)]
            fn push_parts(self, out: &mut Vec<$r>) {
                out.push(self.re);
                out.push(self.im);
            }
            #[inline(always)]
            fn from_parts(parts: &[$r]) -> Self {
                <$t>::new(parts[0], parts[1])
            }
        }
    };
}

impl_real_field!(f32, "f32");
impl_real_field!(f64, "f64");
impl_complex_field!(c32, f32, "c32");
impl_complex_field!(c64, f64, "c64");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modulus_and_conjugate() {
        let z = c64::new(3.0, -4.0);
        assert_eq!(z.modulus(), 5.0);
        assert_eq!(z.conj(), c64::new(3.0, 4.0));
        assert_eq!((z * z.conj()).im, 0.0);
        let big = c64::new(3e300, 4e300);
        assert!((big.modulus() / 5e300 - 1.0).abs() < 1e-15);
        assert_eq!((-2.5f32).modulus(), 2.5);
        assert!(!c32::new(1.0, f32::NAN).is_finite());
    }

    #[test]
    fn parts_round_trip() {
        let x = [c64::new(1.0, -2.0), c64::new(3.5, 0.25)];
        let p = to_parts(&x);
        assert_eq!(p, [1.0, -2.0, 3.5, 0.25]);
        assert_eq!(from_parts::<c64>(&p), x);
        assert_eq!(to_parts(&[1.5f32, -2.0]), [1.5, -2.0]);
        assert_eq!(<c32 as Field>::PARTS + <f64 as Field>::PARTS, 3);
    }
}
