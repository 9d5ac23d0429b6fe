//! What one measurement of `cuqr bench tall` holds: a time or why there is none, and
//! the row of one (shape, kind, case). Measuring fills rows; the tables print them.

use super::cases::{Case, Kind};

/// A median time in ms, or why there is none.
pub(super) type Cell = Result<f64, String>;

/// One measured (shape, kind, case).
#[derive(Clone, Debug)]
pub(super) struct Row {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) kind: Kind,
    pub(super) case: Case,
    /// cuqr's update alone.
    pub(super) cuqr_ms: Cell,
    /// cuSOLVER's refactorisation of A′ (with `orgqr` for the thin kind).
    pub(super) cusolver_ms: Cell,
    /// With `--stages`: cuqr's update split into its stages (ms), one run.
    pub(super) stages: Vec<(&'static str, f64)>,
}
