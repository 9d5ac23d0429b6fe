//! # cuqr: QR factorisation and QR updating on NVIDIA GPUs
//!
//! cuqr factorises A = QR and then *updates* the factorisation when columns or
//! rows are inserted or deleted or a rank-one change arrives, instead of
//! refactorising (Andrew & Dingle's GPU QR updating; spec §1.7–§1.11).
//!
//! | operation | needs Q | CPU | GPU |
//! |---|---|---|---|
//! | `factorize` | – | ✓ | ✓ |
//! | `insert_cols` | yes | ✓ | ✓ |
//! | `delete_cols` | no | ✓ | ✓ |
//! | `insert_rows` | no | ✓ | ✓ |
//! | `delete_rows` | yes | ✓ | ✓ |
//! | `rank_one` | yes | ✓ | ✓ |
//! | `solve` | – | ✓ | ✓ |
//!
//! 1. Build a state with [`CpuQr::factorize`] (or the GPU backend's `factorize`).
//! 2. Apply updates through the [`QrUpdate`] trait; each validates first and
//!    leaves the state unchanged on error.
//! 3. Read the least-squares solution with [`QrUpdate::solve`] and check
//!    accuracy with [`diagnostics`].
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod backend;
pub mod cpu;
pub mod error;
pub mod gpu;
pub mod lu;
pub mod mat;
pub mod mixed;
pub mod params;
pub mod qr;
pub mod scalar;
pub mod update;

pub use backend::{Diagnostics, QrUpdate, Solution};
pub use cpu::CpuQr;
pub use error::{Error, Result};
pub use gpu::Gpu;
pub use mat::{Mat, MatRef};
pub use params::{ColumnStrip, FactorParams, Givens, QPolicy, RowRemoval, UpdateParams};
pub use qr::diagnostics::diagnostics;
pub use scalar::Scalar;
