//! Why an update is refused where the algorithms meet a dependent column or an
//! undetermined row, and the tolerances they use (docs/algorithms.md#thin-q-updates):
//! shared by the CPU and GPU bodies and their dispatch.

use crate::base::error::Error;
use crate::base::scalar::Scalar;

/// Why a thin update could not be made.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThinFailure {
    /// The new column `column` (0-based within the inserted block) lies in the span of the
    /// existing columns to working precision: the result would be rank deficient.
    DependentColumn {
        /// The inserted column.
        column: usize,
        /// Its norm left after projecting out Q₁, relative to its norm.
        relative_norm: f64,
    },
    /// Row `row` (0-based within the deleted block) carries a direction no other row
    /// has: ‖(I − Q₁Q₁ᵀ)e_row‖ is below working precision, so the rows left do not
    /// determine the factorisation.
    IllDeterminedCompletion {
        /// The deleted row.
        row: usize,
        /// ‖(I − Q₁Q₁ᵀ)e‖ after reorthogonalisation.
        norm: f64,
    },
}

/// Relative norm below which a Gram–Schmidt residual counts as zero.
pub(crate) fn dependence_tol<T: Scalar>() -> f64 {
    64.0 * T::UNIT_ROUNDOFF
}

/// ‖(I − Q₁Q₁ᵀ)e‖ below which a deleted row is the only one carrying a direction.
pub(crate) fn completion_tol<T: Scalar>() -> f64 {
    T::UNIT_ROUNDOFF.sqrt()
}

/// The error of a refused thin update: a dependent new column or a deleted row no other
/// row determines (`k0` the block's first index).
pub(crate) fn thin_error(op: &'static str, k0: usize, e: ThinFailure, tol: f64) -> Error {
    match e {
        ThinFailure::DependentColumn {
            column,
            relative_norm,
        } => Error::RankDeficient {
            column: k0 + column,
            r_jj: relative_norm,
            tol,
        },
        ThinFailure::IllDeterminedCompletion { row, norm } => Error::DowndateFailed {
            op,
            row: k0 + row,
            why: format!(
                "the other rows do not determine the factorisation without it (‖(I − Q₁Q₁ᵀ)e‖ = {norm:e})"
            ),
        },
    }
}

/// The error of an update that needs Q or the kept data on a state that holds neither
/// (an R-only state without kept data, on either backend), naming what would do.
pub(crate) fn needs_q_or_data(op: &'static str) -> Error {
    Error::NeedsData {
        op,
        what: match op {
            "delete_rows" => {
                "Q, the kept data (FactorParams::keep_data) or the deleted rows (delete_rows_with)"
            }
            _ => "Q or the kept data A and b (FactorParams::keep_data)",
        },
    }
}
