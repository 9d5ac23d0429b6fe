//! CPU backend benchmarks (criterion): [`CpuQr::factorize`] with [`QPolicy::Full`] and
//! [`QPolicy::None`], and each single-column / single-row update (`insert_col`,
//! `delete_col`, `insert_row`, `delete_row`, `rank_one`) applied to a fresh clone of a
//! factorised `QPolicy::Full` state, at two f64 sizes (401×41 and 1001×101, not
//! multiples of 32) with one right-hand side. Updates act in the middle of the
//! matrix (column ⌊n/2⌋, row ⌊m/2⌋).
//!
//! The data follows docs/performance.md ("Method"): seeded random entries ±[0.1, 1),
//! never zero, made once per size. Cloning the state is criterion's untimed setup
//! (`iter_batched`) and the updated state is dropped after the timing, so only the
//! update is measured; criterion's statistics stand in for the CLI's medians.
//!
//! Run with `cargo bench --bench cpu` (add `-- --quick` for a short run).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// The m×n sizes benchmarked.
const SIZES: [(usize, usize); 2] = [(401, 41), (1001, 101)];

/// Seeded random values in ±[0.1, 1).
struct Values(StdRng);

impl Values {
    fn new(seed: u64) -> Self {
        Self(StdRng::seed_from_u64(seed))
    }

    fn next(&mut self) -> f64 {
        let mag = 0.1 + 0.9 * self.0.random::<f64>();
        if self.0.random::<bool>() {
            mag
        } else {
            -mag
        }
    }

    fn mat(&mut self, m: usize, n: usize) -> Mat<f64> {
        Mat::from_fn(m, n, |_, _| self.next())
    }

    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn shape(m: usize, n: usize) -> String {
    format!("{m}x{n}")
}

fn factorize(c: &mut Criterion) {
    let mut g = c.benchmark_group("cpu/factorize");
    for (m, n) in SIZES {
        let mut v = Values::new(1);
        let a = v.mat(m, n);
        let b = v.mat(m, 1);
        for (name, policy) in [("q_full", QPolicy::Full), ("q_none", QPolicy::None)] {
            g.bench_with_input(BenchmarkId::new(name, shape(m, n)), &policy, |bch, &p| {
                bch.iter(|| {
                    CpuQr::factorize(
                        black_box(a.as_ref()),
                        black_box(b.as_ref()),
                        p,
                        FactorParams::default(),
                    )
                    .expect("random inputs have full rank")
                })
            });
        }
    }
    g.finish();
}

fn updates(c: &mut Criterion) {
    let mut g = c.benchmark_group("cpu/update");
    for (m, n) in SIZES {
        let mut v = Values::new(2);
        let a = v.mat(m, n);
        let b = v.mat(m, 1);
        let state = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            FactorParams::default(),
        )
        .expect("random inputs have full rank");
        let col = v.vec(m);
        let row = v.vec(n);
        let rhs = v.vec(1);
        let u = v.vec(m);
        let w = v.vec(n);
        let id = |op: &str| BenchmarkId::new(op, shape(m, n));
        // Each routine returns the updated state, so criterion drops it untimed.
        let run = |g: &mut criterion::BenchmarkGroup<'_, _>,
                   op: &str,
                   f: &dyn Fn(&mut CpuQr<f64>) -> cuqr::Result<()>| {
            g.bench_function(id(op), |bch| {
                bch.iter_batched(
                    || state.clone(),
                    |mut s| {
                        f(&mut s).expect("a valid update");
                        s
                    },
                    BatchSize::LargeInput,
                )
            });
        };
        run(&mut g, "insert_col", &|s| {
            s.insert_col(n / 2, black_box(&col))
        });
        run(&mut g, "delete_col", &|s| s.delete_col(black_box(n / 2)));
        run(&mut g, "insert_row", &|s| {
            s.insert_row(m / 2, black_box(&row), black_box(&rhs))
        });
        run(&mut g, "delete_row", &|s| s.delete_row(black_box(m / 2)));
        run(&mut g, "rank_one", &|s| {
            s.rank_one(black_box(&u), black_box(&w))
        });
    }
    g.finish();
}

criterion_group!(benches, factorize, updates);
criterion_main!(benches);
