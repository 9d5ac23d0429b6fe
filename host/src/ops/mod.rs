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
pub(crate) mod reduced;
pub mod replace_cols;
pub mod shift_col;
pub mod slide;
pub mod solve;
#[cfg(test)]
pub(crate) mod test_support;

/// The error of an update that needs Q or the kept data on a state that holds neither
/// (an R-only state without kept data, on either backend), naming what would do.
pub(crate) fn needs_q_or_data(op: &'static str) -> crate::base::error::Error {
    crate::base::error::Error::NeedsData {
        op,
        what: match op {
            "delete_rows" => {
                "Q, the kept data (FactorParams::keep_data) or the deleted rows (delete_rows_with)"
            }
            _ => "Q or the kept data A and b (FactorParams::keep_data)",
        },
    }
}
