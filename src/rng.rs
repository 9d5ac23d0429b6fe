//! A small deterministic PRNG (xoshiro256** seeded by splitmix64) for the demo
//! and the tests, so the CLI needs no random-number dependency, and the benchmarks'
//! random matrices.

use cuqr::{Mat, Scalar};

/// xoshiro256** generator (Blackman & Vigna), seeded through splitmix64.
#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
    /// A second normal deviate left over from the last Box–Muller pair.
    spare: Option<f64>,
}

impl Rng {
    /// A generator whose stream is fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Self {
            s: [next(), next(), next(), next()],
            spare: None,
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let out = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        out
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal deviate (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare.take() {
            return z;
        }
        // 1 − uniform() lies in (0, 1], so the logarithm is finite.
        let r = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        let t = std::f64::consts::TAU * self.uniform();
        self.spare = Some(r * t.sin());
        r * t.cos()
    }

    /// A value ±[0.1, 1) (never zero), uniform in magnitude, of random sign.
    pub fn signed<T: Scalar>(&mut self) -> T {
        let mag = 0.1 + 0.9 * self.uniform();
        T::from_f64(if self.next_u64() & 1 == 0 { mag } else { -mag })
    }

    /// Uniform integer in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        assert!(n > 0);
        (self.uniform() * n as f64) as usize % n
    }
}

/// An m×n matrix with entries ±[0.1, 1) (never zero), generated in parallel in fixed
/// chunks of 2²⁰ values so the values depend on `seed` only, not on the thread count.
/// The benchmarks' input generator.
pub fn random_signed_matrix<T: Scalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
    const CHUNK: usize = 1 << 20;
    let mut data = vec![T::ZERO; m * n];
    let threads = std::thread::available_parallelism()
        .map(|t| t.get())
        .unwrap_or(1)
        .clamp(1, 32);
    let chunks: Vec<(usize, &mut [T])> = data.chunks_mut(CHUNK).enumerate().collect();
    let per = chunks.len().div_ceil(threads).max(1);
    let mut groups: Vec<Vec<(usize, &mut [T])>> = Vec::new();
    for c in chunks {
        match groups.last_mut() {
            Some(g) if g.len() < per => g.push(c),
            _ => groups.push(vec![c]),
        }
    }
    std::thread::scope(|s| {
        for g in groups {
            s.spawn(move || {
                for (i, part) in g {
                    let mut rng = Rng::new(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    for v in part.iter_mut() {
                        *v = rng.signed();
                    }
                }
            });
        }
    });
    Mat::from_col_major(m, n, data).expect("m·n values")
}

/// An m×n matrix with entries ±[0.1, 1) (never zero) from one stream seeded by `seed`,
/// generated serially: the inputs of `cuqr bench updates` and `cuqr bench kernels`.
/// [`random_signed_matrix`] gives the same values where m·n ≤ 2²⁰ (one chunk).
pub fn random_signed_matrix_serial<T: Scalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
    let mut rng = Rng::new(seed);
    let data = (0..m * n).map(|_| rng.signed()).collect();
    Mat::from_col_major(m, n, data).expect("m·n values")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_roughly_standard_normal() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        assert_eq!(a.next_u64(), b.next_u64());
        let mut c = Rng::new(8);
        assert_ne!(a.next_u64(), c.next_u64());
        let k = 20_000;
        let xs: Vec<f64> = (0..k).map(|_| a.normal()).collect();
        let mean = xs.iter().sum::<f64>() / k as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / k as f64;
        // Standard errors: 1/√k ≈ 0.007 for the mean, √(2/k) ≈ 0.01 for the variance.
        assert!(mean.abs() < 0.04, "mean {mean}");
        assert!((var - 1.0).abs() < 0.06, "variance {var}");
        for _ in 0..1000 {
            let u = a.uniform();
            assert!((0.0..1.0).contains(&u));
            assert!(a.below(13) < 13);
        }
    }

    #[test]
    fn random_matrix_is_deterministic_and_never_zero() {
        let a = random_signed_matrix::<f64>(1500, 1500, 7);
        let b = random_signed_matrix::<f64>(1500, 1500, 7);
        assert_eq!(a.as_slice(), b.as_slice());
        assert!(a.as_slice().iter().all(|v| (0.1..1.0).contains(&v.abs())));
        let c = random_signed_matrix::<f64>(1500, 1500, 8);
        assert_ne!(a.as_slice(), c.as_slice());
        // One chunk: the serial generator gives the same values.
        let s = random_signed_matrix_serial::<f64>(300, 200, 7);
        assert_eq!(
            s.as_slice(),
            random_signed_matrix::<f64>(300, 200, 7).as_slice()
        );
    }
}
