//! CPU backend benchmarks (criterion) of the cases in `cuqr_bench::cpu::micro`:
//! [`CpuQr::factorize`] under each Q policy, and each single-column / single-row update
//! applied to a fresh clone of a factorised `QPolicy::Full` state, at each size.
//! Cloning the state is criterion's untimed setup (`iter_batched`) and the updated
//! state is dropped after the timing, so only the update is measured; criterion's
//! statistics stand in for the CLI's medians.
//!
//! Run with `cargo bench -p cuqr-bench --bench cpu` (add `-- --quick` for a short run).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use cuqr::{CpuQr, FactorParams};
use cuqr_bench::cpu::micro::{Data, FACTOR_POLICIES, SIZES, UPDATES};

fn shape(m: usize, n: usize) -> String {
    format!("{m}x{n}")
}

fn factorize(c: &mut Criterion) {
    let mut g = c.benchmark_group("cpu/factorize");
    for (m, n) in SIZES {
        let d = Data::new(m, n, 1);
        for (name, policy) in FACTOR_POLICIES {
            g.bench_with_input(BenchmarkId::new(name, shape(m, n)), &policy, |bch, &p| {
                bch.iter(|| {
                    CpuQr::factorize(
                        black_box(d.a.as_ref()),
                        black_box(d.b.as_ref()),
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
        let d = Data::new(m, n, 2);
        let state = d.state().expect("random inputs have full rank");
        for (name, update) in UPDATES {
            g.bench_function(BenchmarkId::new(name, shape(m, n)), |bch| {
                // Each routine returns the updated state, so criterion drops it untimed.
                bch.iter_batched(
                    || state.clone(),
                    |mut s| {
                        update(&mut s, black_box(&d)).expect("a valid update");
                        s
                    },
                    BatchSize::LargeInput,
                )
            });
        }
    }
    g.finish();
}

criterion_group!(benches, factorize, updates);
criterion_main!(benches);
