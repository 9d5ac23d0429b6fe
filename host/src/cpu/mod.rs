//! The CPU backend's kernels: faer's blocked QR, Householder vectors, Givens rotations,
//! compact-WY blocks, the blocked update building blocks (recorded column
//! transformations applied in row blocks, rows folded into R by block reflectors), and
//! the serial reference implementations of the published algorithms (the test oracle
//! and the benchmarks' "sequential update" baseline, [`reference::run`]).
//!
//! Public: the thread count ([`set_threads`], [`threads`]) and [`reference::run`].
#![forbid(unsafe_code)]

pub(crate) mod blocked;
pub(crate) mod chain_sweep;
pub(crate) mod compose;
pub(crate) mod delete_cols;
pub(crate) mod delete_rows;
pub(crate) mod dense;
pub(crate) mod explicit;
pub(crate) mod factorize;
pub(crate) mod factors;
pub(crate) mod fold;
#[doc(hidden)]
pub mod givens;
#[doc(hidden)]
pub mod householder;
pub(crate) mod insert_cols;
pub(crate) mod insert_rows;
pub(crate) mod rank_one;
pub(crate) mod reduced;
pub mod reference;
pub(crate) mod rfactor;
pub(crate) mod rolling;
pub(crate) mod rolling_series;
pub(crate) mod rotations;
mod settings;
pub(crate) mod solve;
pub(crate) mod thin;
pub(crate) mod thin_blocked;
#[doc(hidden)]
pub mod wy;

pub(crate) use settings::{par_for, PARALLEL_MIN_FLOPS};
pub use settings::{set_threads, threads};
