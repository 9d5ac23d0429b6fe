//! Medians of timings: the `cuqr window` summary and the benchmarks' CPU timings.

/// The upper median of `v` (the middle sample; of the two middle ones, the larger for
/// an even count), NaN when `v` is empty.
pub fn upper_median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    #[test]
    fn upper_median_takes_the_middle_or_the_larger_middle() {
        assert_eq!(super::upper_median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::upper_median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(super::upper_median(Vec::new()).is_nan());
    }
}
