//! What the composed updates (sliding window, rank-k, column replacement and shift, drift
//! control) need from a state, implemented once per backend: the primitive updates, a
//! rollback snapshot, scaling, a column of A, refactorisation of A + UVᵀ, and the drift
//! measure and refresh (docs/algorithms.md#composed-updates).
#![forbid(unsafe_code)]

/// The primitive-update hooks of [`Composite`] for one backend: each forwards to the
/// operation's entry point `$run` (`run_cpu` or `run_gpu`).
macro_rules! forward_primitive_updates {
    ($run:ident) => {
        fn insert_rows_raw(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
            crate::ops::insert_rows::$run(self, k0, u, e)
        }
        fn delete_rows_raw(&mut self, k0: usize, p: usize) -> Result<()> {
            crate::ops::delete_rows::$run(self, k0, p)
        }
        fn insert_cols_raw(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
            crate::ops::insert_cols::$run(self, k0, u)
        }
        fn delete_cols_raw(&mut self, k0: usize, p: usize) -> Result<()> {
            crate::ops::delete_cols::$run(self, k0, p)
        }
        fn rank_one_raw(&mut self, u: &[T], v: &[T]) -> Result<()> {
            crate::ops::rank_one::$run(self, u, v)
        }
    };
}

mod cpu;
mod gpu;

use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::mat::MatRef;
use crate::base::params::UpdateParams;
use crate::base::scalar::Scalar;
use crate::base::solution::DriftReport;

/// A state the composed updates can drive (docs/algorithms.md#composed-updates).
pub(crate) trait Composite<T: Scalar>: Sized {
    /// Dimensions and kind.
    fn dims(&self) -> Dims;
    /// The update options.
    fn update_params(&self) -> UpdateParams;
    /// Whether the state holds Q (full or thin kind).
    fn holds_q(&self) -> bool;
    /// Whether the state keeps A (an R-only state built with `keep_data`).
    fn keeps_a(&self) -> bool;
    /// A copy of the whole state: the rollback point of a composed update.
    fn snapshot(&self) -> Result<Self>;
    /// Multiplies R, d, the residual norms and the kept data by `s` (one forgetting step,
    /// docs/algorithms.md#sliding-window).
    fn scale(&mut self, s: T) -> Result<()>;
    /// Column `j` of A (m entries): Q·R(:, j) where the state holds Q, else the kept A's.
    fn column_of_a(&self, j: usize) -> Result<Vec<T>>;
    /// Replaces the state by a fresh factorisation of A + UVᵀ (U m×k, V n×k) and b, of the
    /// same kind, options and drift counts; A and b come from Q and R (and d or the kept b)
    /// or from the kept data.
    fn refactor_plus(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()>;
    /// The primitive updates (no drift bookkeeping).
    fn insert_rows_raw(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()>;
    /// See [`Composite::insert_rows_raw`].
    fn delete_rows_raw(&mut self, k0: usize, p: usize) -> Result<()>;
    /// See [`Composite::insert_rows_raw`].
    fn insert_cols_raw(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()>;
    /// See [`Composite::insert_rows_raw`].
    fn delete_cols_raw(&mut self, k0: usize, p: usize) -> Result<()>;
    /// See [`Composite::insert_rows_raw`].
    fn rank_one_raw(&mut self, u: &[T], v: &[T]) -> Result<()>;
    /// The drift record.
    fn drift_mut(&mut self) -> &mut DriftReport;
    /// The drift estimate now (docs/algorithms.md#drift-control), `None` where nothing can be
    /// measured; `sample` varies the sampled columns or the probe from check to check.
    fn measure_drift(&self, sample: usize) -> Result<Option<f64>>;
    /// Reorthogonalises Q or refactorises from the kept data; `false` where neither is
    /// possible (an R-only state without kept data).
    fn refresh(&mut self) -> Result<bool>;
}

/// The state-unchanged rule for a composed update: `f` runs on a snapshot that replaces the
/// state only when it succeeds.
pub(crate) fn atomically<T: Scalar, S: Composite<T>>(
    st: &mut S,
    f: impl FnOnce(&mut S) -> Result<()>,
) -> Result<()> {
    let mut work = st.snapshot()?;
    f(&mut work)?;
    *st = work;
    Ok(())
}

/// A deterministic pseudo-random index stream for the drift samples (SplitMix64).
pub(crate) fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The `s` distinct columns (of `n`) that drift check number `sample` looks at.
pub(crate) fn sampled_columns(n: usize, s: usize, sample: usize) -> Vec<usize> {
    let s = s.min(n);
    let mut out: Vec<usize> = Vec::with_capacity(s);
    let mut k = 0u64;
    while out.len() < s {
        let j = (mix((sample as u64) << 20 | k) % n as u64) as usize;
        if !out.contains(&j) {
            out.push(j);
        }
        k += 1;
    }
    out
}

/// The probe z (n entries in [−1, 1), not all zero) of drift check number `sample` on an
/// R-only state.
pub(crate) fn probe(n: usize, sample: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            let r = mix(((sample as u64) << 32) ^ i as u64);
            (r >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_distinct_and_in_range() {
        for (n, s) in [(1, 4), (5, 4), (300, 4), (7, 7)] {
            for sample in 0..20 {
                let c = sampled_columns(n, s, sample);
                assert_eq!(c.len(), s.min(n));
                assert!(c.iter().all(|&j| j < n));
                let mut d = c.clone();
                d.sort_unstable();
                d.dedup();
                assert_eq!(d.len(), c.len());
            }
        }
        let z = probe(50, 3);
        assert!(z.iter().all(|x| (-1.0..1.0).contains(x)) && z.iter().any(|&x| x != 0.0));
        assert_ne!(probe(50, 3), probe(50, 4));
    }
}
