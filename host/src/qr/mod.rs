//! Factorisation, least-squares solve and diagnostics (spec §1.1, §1.4, §3.7).

pub mod diagnostics;
pub mod factorize;
pub mod solve;
