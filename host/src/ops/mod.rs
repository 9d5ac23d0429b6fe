//! One folder per operation: `plan.rs` (validation and shapes, shared so that both backends
//! fail alike), `cpu.rs` and `gpu.rs` (the two paths).
#![forbid(unsafe_code)]

pub(crate) mod compose;
pub mod delete_cols;
pub mod delete_rows;
pub(crate) mod drift;
pub mod factorize;
pub mod from_factors;
pub mod insert_cols;
pub mod insert_rows;
pub mod rank_k;
pub mod rank_one;
pub mod replace_cols;
pub mod shift_col;
pub mod slide;
pub mod solve;
#[cfg(test)]
pub(crate) mod test_support;

pub(crate) use crate::base::refusal::needs_q_or_data;
