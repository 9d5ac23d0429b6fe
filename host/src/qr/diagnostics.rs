//! TEMPORARY placeholder (being replaced in this session).
use crate::backend::{Diagnostics, QrUpdate};
use crate::error::{Error, Result};
use crate::mat::MatRef;
use crate::scalar::Scalar;

/// Placeholder: accuracy of `state` against the matrix `a` it should represent and its right-hand sides `b`.
pub fn diagnostics<T: Scalar>(
    _state: &dyn QrUpdate<T>,
    _a: MatRef<'_, T>,
    _b: MatRef<'_, T>,
) -> Result<Diagnostics> {
    Err(Error::InvalidParam { op: "diagnostics", what: "-", why: "placeholder".into() })
}
