//! The updates, one file per operation (spec §1.7–§1.11). Each file holds
//! `plan` (pure validation shared by both backends), then the backends' runs.

pub mod delete_cols;
pub mod delete_rows;
pub mod insert_cols;
pub mod insert_rows;
pub mod rank_one;
