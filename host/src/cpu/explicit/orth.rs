//! The part of a vector orthogonal to the columns of Q, by classical Gram–Schmidt with one
//! reorthogonalisation when the first pass cancelled (docs/algorithms.md#explicit-factors).

use super::dense::norm;
use super::{Factors, QStore};
use crate::base::error::Result;
use crate::base::field::Field;
use crate::base::scalar::Scalar;

/// u = Q·coeffs + rest with rest ⟂ range(Q) to working accuracy.
pub(super) struct Projection<T: Field> {
    /// Qᴴu (both passes summed).
    pub coeffs: Vec<T>,
    /// u − Q·coeffs.
    pub rest: Vec<T>,
    /// ‖rest‖.
    pub norm: T::Real,
    /// Whether u lies in range(Q) to working accuracy: the second pass cancelled as much
    /// as the first (each keeping less than 1/√2 of the norm), or u = 0.
    pub in_span: bool,
}

/// Projects `u` (length `q.rows()`) onto the orthogonal complement of range(`q`). A second
/// pass runs when the first kept less than 1/√2 of ‖u‖.
pub(super) fn project_out<T: Field, Q: QStore<T>>(q: &mut Q, u: &[T]) -> Result<Projection<T>> {
    let keep = <T::Real as Scalar>::from_f64(core::f64::consts::FRAC_1_SQRT_2);
    let n0 = norm(u);
    let mut rest = u.to_vec();
    let mut coeffs = q.project_pass(&mut rest)?;
    let n1 = norm(&rest);
    if n0 == <T::Real as Scalar>::ZERO {
        return Ok(Projection {
            coeffs,
            rest,
            norm: n1,
            in_span: true,
        });
    }
    if n1 > keep * n0 {
        return Ok(Projection {
            coeffs,
            rest,
            norm: n1,
            in_span: false,
        });
    }
    let again = q.project_pass(&mut rest)?;
    for (c, a) in coeffs.iter_mut().zip(again) {
        *c += a;
    }
    let n2 = norm(&rest);
    Ok(Projection {
        coeffs,
        rest,
        norm: n2,
        in_span: !Scalar::is_finite(n2) || n2 < keep * n1 || n2 == <T::Real as Scalar>::ZERO,
    })
}

/// Extends the factors by the direction of `p` (its `rest` normalised, or a zero column
/// when `unit` is false or the rest is zero) as Q's new last column and a zero last row of
/// R; returns the vector [Qᴴu; ‖rest‖] (‖rest‖ = 0 for a zero column) that u becomes in the
/// extended factors.
pub(super) fn extend<T: Field, Q: QStore<T>>(
    f: &mut Factors<T, Q>,
    p: Projection<T>,
    unit: bool,
) -> Result<Vec<T>> {
    let zero = <T::Real as Scalar>::ZERO;
    let norm = if unit && p.norm > zero { p.norm } else { zero };
    let col: Vec<T> = if norm > zero {
        let inv = <T::Real as Scalar>::ONE / norm;
        p.rest.iter().map(|&x| x.scale(inv)).collect()
    } else {
        vec![T::zero(); f.q.rows()]
    };
    let t = f.q.cols();
    f.q.push_col(&col)?;
    debug_assert_eq!(f.r.rows(), t);
    f.r.push_row(&vec![T::zero(); f.r.cols()]);
    let mut w = p.coeffs;
    w.push(T::from_real(norm));
    Ok(w)
}
