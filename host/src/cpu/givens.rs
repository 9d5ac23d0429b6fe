//! Givens rotations, serial (docs/algorithms.md#conventions convention,
//! docs/algorithms.md#givens-rotations; docs/algorithms.md#safe-rotation-generation).
//! G = [[c, s], [−s, c]] maps (f, g) to (r, 0) with r = hypot(f, g) ≥ 0;
//! (0, 0) gives c = 1, s = 0.
#![forbid(unsafe_code)]

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;

/// Computes (c, s, r) with c·f + s·g = r ≥ 0 and −s·f + c·g = 0.
/// Safe at (0, 0) and against overflow (hypot scaling).
#[inline]
pub fn givens<T: Scalar>(f: T, g: T) -> (T, T, T) {
    if g == T::ZERO {
        if f >= T::ZERO {
            return (T::ONE, T::ZERO, f);
        }
        return (-T::ONE, T::ZERO, -f);
    }
    let r = f.hypot(g);
    (f / r, g / r, r)
}

/// Applies the rotation to a pair of entries: x ← c·x + s·y, y ← −s·x + c·y.
#[inline(always)]
pub fn rot_pair<T: Scalar>(c: T, s: T, x: &mut T, y: &mut T) {
    let (a, b) = (*x, *y);
    *x = c.mul_add(a, s * b);
    *y = c.mul_add(b, -(s * a));
}

/// Rotates rows (i, k) of `a` over the columns `cols` (x ← c·x + s·y, y ← −s·x + c·y).
pub fn rot_rows<T: Scalar>(
    a: &mut Mat<T>,
    i: usize,
    k: usize,
    c: T,
    s: T,
    cols: core::ops::Range<usize>,
) {
    for j in cols {
        let (mut x, mut y) = (a[(i, j)], a[(k, j)]);
        rot_pair(c, s, &mut x, &mut y);
        a[(i, j)] = x;
        a[(k, j)] = y;
    }
}

/// Applies the rotation to two equal-length vectors (rows of R or columns of Q).
#[inline]
pub fn rot<T: Scalar>(c: T, s: T, x: &mut [T], y: &mut [T]) {
    debug_assert_eq!(x.len(), y.len());
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        rot_pair(c, s, a, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_pair_is_identity() {
        assert_eq!(givens(0.0f64, 0.0), (1.0, 0.0, 0.0));
        assert_eq!(givens(0.0f32, 0.0), (1.0, 0.0, 0.0));
    }

    #[test]
    fn annihilates_with_nonnegative_r() {
        for &(f, g) in &[
            (3.0f64, 4.0),
            (-3.0, 4.0),
            (0.0, -2.0),
            (-5.0, 0.0),
            (1e300, 1e300),
        ] {
            let (c, s, r) = givens(f, g);
            assert!(r >= 0.0 && r.is_finite());
            let (mut x, mut y) = (f, g);
            rot_pair(c, s, &mut x, &mut y);
            assert!((x - r).abs() <= 1e-15 * r.max(1.0), "{f} {g}");
            assert!(y.abs() <= 1e-15 * r.max(1.0));
            assert!((c * c + s * s - 1.0).abs() < 1e-15);
        }
    }
}
