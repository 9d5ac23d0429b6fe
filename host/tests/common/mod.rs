//! The one helper module of cuqr's integration tests (each test file says `mod common;`):
//!
//! * the GPU gate ([`gpu`], [`shared_gpu`]): a test without a usable device prints
//!   "skipped: …" and returns; with `CUQR_REQUIRE_GPU=1` a missing device is a failure;
//! * seeded random inputs in two families: [`random_mat`]/[`random_vec`] (uniform(−1, 1),
//!   never zero: the accuracy tests) and [`signed_mat`]/[`signed_vec`] (magnitude in
//!   [0.1, 1), random sign: the kernel tests);
//! * `model`: the dense f64 model of an updated problem and the accuracy checks against
//!   faer, with every tolerance derived in its module doc;
//! * `state`: the state kinds (Q policy × kept data) and the update steps shared by the
//!   CPU and GPU tests, and the composed-update sequences both backends run;
//! * `conditioned`: matrices of a given condition number, two right-hand sides and faer's
//!   least-squares solution (the mixed-precision tests);
//! * the `typed_tests!` and `gpu_tests!` macros that stamp one `#[test]` per scalar type.
#![allow(dead_code)]

mod conditioned;
mod model;
mod state;

#[allow(unused_imports)]
pub use conditioned::*;
#[allow(unused_imports)]
pub use model::*;
#[allow(unused_imports)]
pub use state::*;

use std::sync::Arc;

use cuqr::{Gpu, Mat, Scalar};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Opens GPU 0, or returns `None` after printing "skipped: …" when there is
/// no usable device. With `CUQR_REQUIRE_GPU=1` a missing device is a failure.
pub fn gpu() -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(g) => Some(g),
        Err(e) if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("CUQR_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// [`gpu`] behind an `Arc`, as the states and the distributed group hold it.
pub fn shared_gpu() -> Option<Arc<Gpu>> {
    gpu().map(Arc::new)
}

/// A seeded generator (each test uses its own seed, so failures reproduce).
pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A random value with magnitude in [0.1, 1) and random sign: never zero.
pub fn nonzero(rng: &mut StdRng) -> f64 {
    let m: f64 = rng.random_range(0.1..1.0);
    if rng.random_bool(0.5) {
        m
    } else {
        -m
    }
}

/// `n` random values of [`nonzero`].
pub fn signed_vec<T: Scalar>(rng: &mut StdRng, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_f64(nonzero(rng))).collect()
}

/// An `m × n` matrix of random values of [`nonzero`].
pub fn signed_mat<T: Scalar>(rng: &mut StdRng, m: usize, n: usize) -> Mat<T> {
    Mat::from_fn(m, n, |_, _| T::from_f64(nonzero(rng)))
}

/// One uniform(−1, 1) value, never exactly zero, rounded to `T`.
pub fn rand_scalar<T: Scalar>(rng: &mut StdRng) -> T {
    loop {
        let x = T::from_f64(rng.random_range(-1.0..1.0));
        if x != T::ZERO {
            return x;
        }
    }
}

/// An m×n matrix of uniform(−1, 1) entries (never zero).
pub fn random_mat<T: Scalar>(rng: &mut StdRng, m: usize, n: usize) -> Mat<T> {
    Mat::from_fn(m, n, |_, _| rand_scalar(rng))
}

/// A vector of uniform(−1, 1) entries (never zero).
pub fn random_vec<T: Scalar>(rng: &mut StdRng, n: usize) -> Vec<T> {
    (0..n).map(|_| rand_scalar(rng)).collect()
}

/// Unit roundoff of `T` (docs/algorithms.md#accuracy-measures).
pub fn u<T: Scalar>() -> f64 {
    T::UNIT_ROUNDOFF
}

/// max |a − b| over two equal-length slices, in f64.
pub fn max_abs_diff<T: Scalar>(a: &[T], b: &[T]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x.to_f64() - y.to_f64()).abs())
        .fold(0.0, f64::max)
}

/// max |x| over a slice, in f64.
pub fn max_abs<T: Scalar>(a: &[T]) -> f64 {
    a.iter().map(|x| x.to_f64().abs()).fold(0.0, f64::max)
}

/// Stamps one `#[test]` per (name, scalar type), each running `body::<T>(args…)`.
/// Usage: `typed_tests!(body { body_f64: f64, body_f32: f32 [arg] });`
#[allow(unused_macros)]
macro_rules! typed_tests {
    ($body:ident { $($name:ident: $t:ty $([$($arg:expr),*])?),+ $(,)? }) => {
        $(
            #[test]
            fn $name() {
                $body::<$t>($($($arg),*)?);
            }
        )+
    };
}
#[allow(unused_imports)]
pub(crate) use typed_tests;

/// Stamps one `#[test]` per (name, scalar type): each opens the device through
/// `gate` (returning early when it prints "skipped") and runs
/// `body::<T>(&gpu, args…)`. Usage:
/// `gpu_tests!(common::gpu => body { body_f32: f32, body_f64: f64 [seed] });`
#[allow(unused_macros)]
macro_rules! gpu_tests {
    ($gate:path => $body:ident { $($name:ident: $t:ty $([$($arg:expr),*])?),+ $(,)? }) => {
        $(
            #[test]
            fn $name() {
                let Some(gpu) = $gate() else { return };
                $body::<$t>(&gpu $($(, $arg)*)?);
            }
        )+
    };
}
#[allow(unused_imports)]
pub(crate) use gpu_tests;
