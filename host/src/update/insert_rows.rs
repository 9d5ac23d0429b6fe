//! TEMPORARY placeholder (being replaced in this session).
#![allow(unused)]
use crate::cpu::CpuQr;
use crate::error::{Error, Result};
use crate::mat::MatRef;
use crate::scalar::Scalar;

/// Placeholder.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
    Err(Error::InvalidParam { op: "insert_rows", what: "-", why: "placeholder".into() })
}
