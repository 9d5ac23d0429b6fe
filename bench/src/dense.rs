//! The updated dense matrices that the refactorisation baselines start from: A with
//! rows or columns inserted or deleted (pure copies, no arithmetic).

pub(crate) use cuqr::internals::splice::{
    cols_deleted, cols_inserted, rows_deleted, rows_inserted,
};
