//! TEMPORARY placeholder (being replaced in this session).
#![allow(unused)]
use crate::cpu::CpuQr;
use crate::error::{Error, Result};
use crate::mat::MatRef;
use crate::scalar::Scalar;

/// Placeholder.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, p: usize) -> Result<()> {
    Err(Error::InvalidParam { op: "delete_cols", what: "-", why: "placeholder".into() })
}
