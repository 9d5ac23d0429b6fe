//! # cuqr: QR factorisation and QR updating on NVIDIA GPUs and the CPU
//!
//! cuqr factorises A = QR and then *updates* the factorisation when columns or
//! rows are inserted or deleted, a rank-one or rank-k change arrives or a window of
//! observations slides, instead of refactorising (docs/algorithms.md).
//!
//! | operation | needs Q (or an R-only state's kept data) | CPU | GPU |
//! |---|---|---|---|
//! | `factorize` | – | ✓ | ✓ |
//! | `insert_cols` | yes | ✓ | ✓ |
//! | `delete_cols` | no | ✓ | ✓ |
//! | `insert_rows` | no | ✓ | ✓ |
//! | `delete_rows` | yes (or the rows: `delete_rows_with`) | ✓ | ✓ |
//! | `rank_one`, `rank_k` | yes | ✓ | ✓ |
//! | `replace_cols`, `shift_col` | yes | ✓ | ✓ |
//! | `slide` | when rows leave | ✓ | ✓ |
//! | `solve` | – | ✓ | ✓ |
//!
//! 1. Build a state with [`Qr::factorize`] on a [`Device`] (`Auto` takes the GPU when one
//!    opens, else the CPU).
//! 2. Apply updates through the [`QrUpdate`] trait; each validates first and
//!    leaves the state unchanged on error.
//! 3. Read the least-squares solution with [`QrUpdate::solve`] and check
//!    accuracy with [`diagnostics`].
//!
//! # Layers
//! Each module imports only from the layers below it (a test checks this):
//! `base` → `cpu` and `gpu` (`ffi::driver` → `runtime` → `ffi` → `launch` → `algo`) →
//! `state` → `ops` → `backend` → `batch`, `distributed`, `lu`, `mixed`, `rolling`, `small`,
//! `internals`.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub(crate) mod backend;
pub(crate) mod base;
pub mod batch;
pub mod cpu;
pub mod distributed;
pub mod explicit;
pub(crate) mod gpu;
#[cfg(feature = "internals")]
pub mod internals;
/// Fault injection for tests (feature `fault-injection`): the Nth device allocation,
/// cuBLAS/cuSOLVER call or kernel launch fails (docs/reliability.md).
#[cfg(feature = "fault-injection")]
pub mod fault {
    pub use crate::gpu::ffi::driver::fault::{arm, count, disarm, FaultCounts, FaultPoint};
}
pub mod lu;
pub mod mixed;
pub(crate) mod ops;
pub mod rolling;
pub mod small;
pub(crate) mod state;

pub use backend::device::{Backend, Device, Qr, QrState, AUTO_GPU_MIN_MN};
pub use backend::diagnostics::diagnostics;
pub use backend::QrUpdate;
pub use base::error::{CallError, Error, Result};
pub use base::mat::{Mat, MatRef};
pub use base::params::{
    ColumnStrip, DriftParams, FactorParams, FactorsParams, Givens, QPolicy, RowInsertion,
    RowRemoval, UpdateParams,
};
pub use base::precision::GemmPrecision;
pub use base::scalar::Scalar;
pub use base::solution::{Diagnostics, DriftReport, Solution};
pub use gpu::runtime::{DevMat, DevMatView, DevMatViewMut, DevVec, Gpu, GpuField, GpuScalar};
pub use state::cpu::CpuQr;
pub use state::gpu::GpuQr;
