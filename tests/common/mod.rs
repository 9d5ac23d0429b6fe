//! Shared helpers for integration tests: the GPU gate and seeded
//! random inputs that are never zero.
#![allow(dead_code)]

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

/// `n` random nonzero values.
pub fn rand_vec<T: Scalar>(rng: &mut StdRng, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_f64(nonzero(rng))).collect()
}

/// An `m × n` matrix of random nonzero values.
pub fn rand_mat<T: Scalar>(rng: &mut StdRng, m: usize, n: usize) -> Mat<T> {
    Mat::from_fn(m, n, |_, _| T::from_f64(nonzero(rng)))
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
