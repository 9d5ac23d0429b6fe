//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

pub(super) const OP: &str = "solve";
