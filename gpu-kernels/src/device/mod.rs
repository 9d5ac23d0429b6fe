//! The only home of intrinsics and `asm!` in the kernel crate: thread and block
//! indices, barriers, dynamic shared memory,
//! warp shuffles, raw loads and stores, and the [`Float`] trait that the generic kernels
//! (householder, givens, transpose, reduce, wy) are written against.
//!
//! Everything here is `#[inline(always)]`: after LTO each kernel is one flat function.

mod async_copy;
#[cfg(cuqr_sm90)]
mod cluster;
mod float;
mod grid;
mod memory;
mod thread;
mod warp;

pub use async_copy::*;
#[cfg(cuqr_sm90)]
pub use cluster::*;
pub use float::*;
pub use grid::*;
pub use memory::*;
pub use thread::*;
pub use warp::*;
