//! GPU kernel micro-benchmarks (criterion): the cases of `cuqr bench kernels`
//! (`cuqr_bench::kernels::cases`: the same kernels, sizes, data and byte/flop counts),
//! in f64 and f32, with the two ceilings it measures in the same run (device-to-device
//! copy and cuBLAS GEMM) so a kernel's rate can be read against them. Memory-bound
//! kernels report bytes per second, compute-bound ones flops per second as elements
//! per second (1 element = 1 flop).
//!
//! The method is that of docs/performance.md ("Method"): each run bracketed by CUDA
//! events on the main stream after an untimed setup (restoring an input the kernel
//! overwrites) and a device synchronisation; criterion sums those event times
//! (`iter_custom`) in place of the CLI's medians of five.
//!
//! Without a GPU the bench prints `kernels: skipped (no GPU: <reason>)` and exits 0;
//! with `CUQR_REQUIRE_GPU=1` it prints that on stderr and exits 1.
//! `CUQR_KERNELS_QUICK=1` takes the CLI's `--quick` sizes (4096×1024 instead of
//! 16384×4096).

use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};
use cuqr::internals::gpu::timing::EventTimer;
use cuqr::internals::gpu::GpuScalar;
use cuqr::Gpu;
use cuqr_bench::kernels::cases::{self, Case, Meter, Sizes, Work};

/// Criterion's group of one precision as the cases' meter.
struct Group<'a, 'c> {
    gpu: &'a Gpu,
    group: BenchmarkGroup<'c, WallTime>,
}

impl Meter for Group<'_, '_> {
    /// Each iteration runs `setup` (untimed), synchronises the device, and times `run`
    /// between two CUDA events on the main stream; the setup's value is dropped after
    /// the end event.
    fn measure<S>(
        &mut self,
        case: Case,
        mut setup: impl FnMut() -> cuqr::Result<S>,
        mut run: impl FnMut(&mut S) -> cuqr::Result<()>,
    ) -> cuqr::Result<()> {
        let gpu = self.gpu;
        let timer = EventTimer::new(gpu)?;
        self.group.throughput(match case.work {
            Work::Bytes(b) => Throughput::BytesDecimal(b as u64),
            Work::Flops(f) => Throughput::Elements(f as u64),
        });
        let id = BenchmarkId::new(case.name, case.shape);
        self.group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut ms = 0.0;
                for _ in 0..iters {
                    let mut s = setup().expect("untimed setup");
                    gpu.synchronize().expect("device synchronisation");
                    timer.start(gpu).expect("start event");
                    run(&mut s).expect("timed kernel");
                    ms += timer.stop(gpu).expect("end event");
                    drop(s);
                }
                Duration::from_secs_f64(ms * 1e-3)
            })
        });
        Ok(())
    }
}

fn kernels<T: GpuScalar>(c: &mut Criterion, gpu: &Gpu, prec: &str, sizes: &Sizes) {
    let mut group = c.benchmark_group(format!("kernels/{prec}"));
    // Kernels of tens of milliseconds sit beside ones of microseconds: the same
    // iteration count in every sample, and fewer samples than criterion's 100.
    group.sampling_mode(SamplingMode::Flat).sample_size(20);
    let mut meter = Group { gpu, group };
    cases::run_all::<T, _>(gpu, sizes, &mut meter).expect("kernel cases");
    meter.group.finish();
}

fn main() {
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            let msg = format!("kernels: skipped (no GPU: {e})");
            if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") {
                eprintln!("{msg}");
                std::process::exit(1);
            }
            println!("{msg}");
            return;
        }
    };
    let sizes = Sizes::new(std::env::var("CUQR_KERNELS_QUICK").as_deref() == Ok("1"));
    let mut c = Criterion::default().configure_from_args();
    kernels::<f64>(&mut c, &gpu, "f64", &sizes);
    kernels::<f32>(&mut c, &gpu, "f32", &sizes);
    c.final_summary();
}
