//! GPU algorithms built on the launchers and cuBLAS: blocked Householder QR (with the fused,
//! small and TSQR panels), the two-phase and wavefront Givens schedules, the thin-Q and R-only blocks.

pub(crate) mod batch_q;
pub(crate) mod batch_r;
pub(crate) mod compose;
pub(crate) mod delete_cols;
pub(crate) mod delete_rows;
pub(crate) mod factorize;
pub(crate) mod factors;
pub mod givens_two_phase;
pub mod givens_wavefront;
pub mod householder;
pub(crate) mod insert_cols;
pub(crate) mod insert_rows;
pub(crate) mod rank;
pub(crate) mod rank_one;
pub(crate) mod reduced;
pub(crate) mod rolling;
pub(crate) mod thin;
pub(crate) mod window;
