//! The GPU backend's layers, each importing only the ones below it:
//! [`ffi`]`::driver` (raw driver calls) → [`runtime`] (context, streams, device memory) →
//! [`ffi`] (the only raw cuBLAS and cuSOLVER calls) → [`launch`] (one typed launcher per
//! kernel) → [`algo`] (blocked Householder, TSQR, Givens schedules). `unsafe` lives in
//! `ffi` and `launch` only.

pub(crate) mod algo;
pub(crate) mod ffi;
pub(crate) mod launch;
pub(crate) mod runtime;
