//! The foundation every other layer builds on: matrices and views, the scalar trait, the
//! error type, parameters, dimensions and rank checks, and the result types.
#![forbid(unsafe_code)]

pub mod dims;
pub mod error;
pub mod field;
pub mod interop;
pub mod mat;
pub mod params;
pub mod precision;
pub(crate) mod refusal;
pub mod rolling;
pub mod rotation_chain;
pub mod scalar;
pub mod solution;
pub mod splice;
pub mod wavefront;
