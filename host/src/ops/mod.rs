//! One folder per operation: `plan.rs` (validation and shapes, shared so that both backends
//! fail alike), `cpu.rs` and `gpu.rs` (the two paths).
#![forbid(unsafe_code)]

pub mod delete_cols;
pub mod delete_rows;
pub mod factorize;
pub mod insert_cols;
pub mod insert_rows;
pub mod rank_one;
pub(crate) mod reduced;
pub mod solve;
