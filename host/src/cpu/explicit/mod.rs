//! Updates of explicit factors (Q, R) in real or complex arithmetic, for tall, square and
//! wide factorisations, full (Q m×m, R m×n) or economic (Q m×n, R n×n with m > n): the
//! algorithms behind [`crate::explicit`] (docs/algorithms.md#explicit-factors).
//!
//! Every step is a unitary 2×2 rotation G applied to two rows of R (and of any vector that
//! transforms as Qᴴu) with Q ← Q·Gᴴ on the same two columns, so Q·R is unchanged; each
//! update is a sequence of such steps chosen to zero one entry at a time, followed by
//! dropping a row and a column that the steps have decoupled. A factorisation is economic
//! exactly when Q has fewer columns than rows; an update that would need a column of Q
//! that cannot exist (a square Q) works on the full form instead, as SciPy does.
#![forbid(unsafe_code)]

mod cols;
mod dense;
mod orth;
mod rank;
mod rotation;
mod rows;

pub(crate) use cols::{delete_col, insert_col};
pub(crate) use dense::Dense;
pub(crate) use rank::rank_one;
pub(crate) use rows::{delete_row, insert_row};

use crate::base::field::Field;

/// The factors an update works on: Q (m×t) and R (t×n), t = m (full) or t = n < m
/// (economic).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Factors<T> {
    /// Q, m×t with orthonormal columns.
    pub q: Dense<T>,
    /// R, t×n upper trapezoidal.
    pub r: Dense<T>,
}

impl<T: Field> Factors<T> {
    /// Rows of A = Q·R.
    pub fn m(&self) -> usize {
        self.q.rows()
    }
    /// Columns of A.
    pub fn n(&self) -> usize {
        self.r.cols()
    }
    /// Whether Q is economic (fewer columns than rows).
    pub fn economic(&self) -> bool {
        self.q.cols() < self.q.rows()
    }
}
