//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

pub(super) const OP: &str = "solve";

/// Scaled 2-norm of `x` in f64 (max |xᵢ|, then Σ(xᵢ/scale)²), as LAPACK `xNRM2`.
pub(crate) fn nrm2_f64<T: Scalar>(x: &[T]) -> f64 {
    let scale = x.iter().fold(0.0f64, |s, v| s.max(v.to_f64().abs()));
    if scale == 0.0 || !scale.is_finite() {
        return scale;
    }
    let ssq: f64 = x
        .iter()
        .map(|v| {
            let t = v.to_f64() / scale;
            t * t
        })
        .sum();
    scale * ssq.sqrt()
}
