//! Column shift: column `from` of A moves to position `to`, the columns between closing up
//! (docs/algorithms.md#column-shift).
#![forbid(unsafe_code)]

use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::scalar::Scalar;
use crate::ops::compose::{atomically, Composite};

pub(crate) const OP: &str = "shift_col";

/// Moves column `from` to position `to` (both < n; equal is a no-op): the column (from Q
/// and R, or the kept A) is deleted and inserted again at `to`, on a snapshot.
///
/// # Errors
/// [`Error::OutOfRange`]; [`Error::NeedsData`] on an R-only state without kept data; the
/// errors of column insertion. On error the state is unchanged.
pub(crate) fn run<T: Scalar, S: Composite<T>>(st: &mut S, from: usize, to: usize) -> Result<()> {
    let n = st.dims().n;
    for k0 in [from, to] {
        if k0 >= n {
            return Err(Error::OutOfRange {
                op: OP,
                k0,
                p: 1,
                n,
            });
        }
    }
    if from == to {
        return Ok(());
    }
    if !st.holds_q() && !st.keeps_a() {
        return Err(crate::ops::needs_q_or_data(OP));
    }
    let col = st.column_of_a(from)?;
    atomically(st, |w| {
        w.delete_cols_raw(from, 1)?;
        w.insert_cols_raw(to, MatRef::from_col(&col))
    })
}
