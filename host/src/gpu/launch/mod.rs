//! Typed kernel launchers: one file per kernel source file of the `cuqr-kernels` crate, each
//! launcher checking its bounds and holding one `unsafe` launch with its `// SAFETY:` reason.

pub mod basic;
pub mod convert;
pub mod fused_panel;
pub mod givens;
pub mod lu;
pub mod panel;
pub mod row_insert;
pub mod small_panel;
pub mod ts_gemm;
pub mod tsqr;
pub mod two_phase;
