//! CPU numerical kernels: faer's blocked QR, Householder vectors, Givens rotations,
//! compact-WY blocks, and
//! the serial reference implementations of the published algorithms (the test oracle
//! and the benchmarks' "sequential update" baseline).
#![forbid(unsafe_code)]

pub mod blocked;
pub mod givens;
pub mod householder;
pub mod reference;
pub mod rfactor;
pub mod thin;
pub mod wy;
