//! TEMPORARY placeholder (being replaced in this session).
use crate::backend::Solution;
use crate::error::{Error, Result};
use crate::mat::Mat;
use crate::scalar::Scalar;

/// Placeholder.
pub fn solve_cpu<T: Scalar>(_r: &Mat<T>, _d: &Mat<T>, _n: usize) -> Result<Solution<T>> {
    Err(Error::InvalidParam { op: "solve", what: "-", why: "placeholder".into() })
}
