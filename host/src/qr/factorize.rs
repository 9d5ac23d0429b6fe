//! TEMPORARY placeholder (being replaced in this session).
use crate::cpu::CpuQr;
use crate::error::{Error, Result};
use crate::mat::MatRef;
use crate::params::{FactorParams, QPolicy};
use crate::scalar::Scalar;

/// Placeholder.
pub fn run_cpu<T: Scalar>(
    _a: MatRef<'_, T>,
    _b: MatRef<'_, T>,
    _policy: QPolicy,
    _params: FactorParams,
) -> Result<CpuQr<T>> {
    Err(Error::InvalidParam { op: "factorize", what: "-", why: "placeholder".into() })
}
