//! Medians of timings, one home for the groups: the median of samples (the mean of the
//! two middle ones for an even count, as the CUDA-event timings report), the upper
//! median, and the timed loops of the CPU groups.

use std::time::Instant;

use cuqr::internals::gpu::timing::Timing;
pub(crate) use cuqr_cli::stats::upper_median;

/// The median of `v`: the middle sample, or the mean of the two middle ones for an even
/// count (NaN when empty), as [`Timing::median_ms`] reports.
pub(crate) fn median(v: Vec<f64>) -> f64 {
    Timing { samples_ms: v }.median_ms()
}

/// Milliseconds `f` takes by the wall clock; its result is dropped after the clock
/// stops, so that freeing it is not timed.
pub(crate) fn wall_ms<S, E>(f: impl FnOnce() -> Result<S, E>) -> Result<f64, E> {
    let t0 = Instant::now();
    let out = f()?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    std::hint::black_box(out);
    Ok(ms)
}

/// Upper median of `reps` timed runs after one warm-up; `run` returns its timed
/// milliseconds.
pub(crate) fn median_ms<E>(reps: usize, mut run: impl FnMut() -> Result<f64, E>) -> Result<f64, E> {
    run()?;
    let v = (0..reps).map(|_| run()).collect::<Result<Vec<_>, E>>()?;
    Ok(upper_median(v))
}

/// Upper median of up to `reps` runs within `budget_s` seconds (at least one, no
/// warm-up).
pub(crate) fn median_in_budget<E>(
    reps: usize,
    budget_s: f64,
    mut run: impl FnMut() -> Result<f64, E>,
) -> Result<f64, E> {
    let t = Instant::now();
    let mut v = Vec::new();
    while v.len() < reps && (v.is_empty() || t.elapsed().as_secs_f64() < budget_s) {
        v.push(run()?);
    }
    Ok(upper_median(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
        let mut k = 0.0;
        let ms = median_ms(4, || -> Result<f64, ()> {
            k += 1.0;
            Ok(k)
        });
        // the warm-up's 1 is not a sample: 2, 3, 4, 5 → 4
        assert_eq!(ms, Ok(4.0));
    }
}
