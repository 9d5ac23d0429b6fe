//! TEMPORARY placeholder (being replaced in this session).
#![allow(unused)]
use crate::cpu::CpuQr;
use crate::error::{Error, Result};
use crate::mat::MatRef;
use crate::scalar::Scalar;

/// Placeholder.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, u: &[T], v: &[T]) -> Result<()> {
    Err(Error::InvalidParam { op: "rank_one", what: "-", why: "placeholder".into() })
}
