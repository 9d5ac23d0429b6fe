//! `cuqr bench kernels`: micro-benchmarks of cuqr's kernels with the ceilings
//! measured in the same run (the method: docs/performance.md): device to device copy
//! bandwidth and the cuBLAS GEMM rate. Each kernel is timed with CUDA
//! events (one warm-up, median of ≥ 5) on random device-resident data (never zero);
//! memory-bound kernels report GB/s from a minimum-traffic model (every element
//! read/written once) and the fraction of the copy bandwidth, compute-bound ones
//! GFLOP/s and the fraction of the GEMM rate.
//!
//! The cases ([`cases`]) are those the criterion bench `benches/kernels.rs` times;
//! this group prints them as one table with the ceilings.

pub mod cases;
pub mod meter;

use cuqr::internals::gpu::GpuScalar;
use cuqr::Gpu;
use cuqr_cli::cli::CliResult;

use super::common::{print_run_header, time_keeping_last};
use super::BenchOpts;
use cases::{Case, Meter, Role, Sizes, Work};

/// `cuqr bench kernels --help`.
pub const HELP: &str = "\
cuqr bench kernels: kernel micro-benchmarks against ceilings measured in the same run

Usage: cuqr bench kernels [--quick] [--precision f64|f32|both] [--reps R]

  --quick        smaller sizes (matrices 4096×1024 instead of 16384×4096)
  --precision    f64, f32 or both (default both)
  --reps         timed repetitions, at least 5 (default 5, after 1 warm-up)

Ceilings: device-to-device copy (GB/s, read + write) and cuBLAS GEMM (GFLOP/s).
Memory-bound kernels: GB/s with every element read/written once, and % of the copy
bandwidth; compute-bound ones: GFLOP/s and % of GEMM. The two Givens strategies
(two-phase, seeds' wavefront) are timed as whole strip stages on the same data.
";

/// The table of one precision: medians of CUDA-event runs, each row's rate against
/// the ceilings measured first.
struct Table<'a> {
    gpu: &'a Gpu,
    prec: &'a str,
    reps: usize,
    copy_gbs: f64,
    gemm_gfs: f64,
}

impl Table<'_> {
    /// Prints one row: name, shape, ms, and the rate with its fraction of the ceiling
    /// (a ceiling's own row is 100 % and sets the ceiling).
    fn row(&mut self, name: &str, shape: &str, ms: f64, w: Work, ceiling: bool) {
        let (rate, frac) = match w {
            Work::Bytes(b) => {
                let gbs = b / (ms * 1e6);
                if ceiling {
                    self.copy_gbs = gbs;
                }
                (
                    format!("{gbs:.0} GB/s"),
                    format!("{:.1} % of copy", 100.0 * gbs / self.copy_gbs),
                )
            }
            Work::Flops(f) => {
                let gfs = f / (ms * 1e6);
                if ceiling {
                    self.gemm_gfs = gfs;
                }
                (
                    format!("{gfs:.0} GFLOP/s"),
                    format!("{:.2} % of GEMM", 100.0 * gfs / self.gemm_gfs),
                )
            }
        };
        let frac = if ceiling { "100 %".to_string() } else { frac };
        let prec = self.prec;
        println!("| {prec} | {name} | {shape} | {ms:.3} | {rate} | {frac} |");
    }
}

impl Meter for Table<'_> {
    fn measure<S>(
        &mut self,
        case: Case,
        setup: impl FnMut() -> cuqr::Result<S>,
        mut run: impl FnMut(&mut S) -> cuqr::Result<()>,
    ) -> cuqr::Result<()> {
        let (ms, _) = time_keeping_last(self.gpu, self.reps, setup, |mut s| {
            run(&mut s)?;
            Ok(s)
        })?;
        let ceiling = matches!(case.role, Role::Ceiling);
        self.row(case.name, &case.shape, ms, case.work, ceiling);
        if let Role::KernelAndTraffic(bytes) = case.role {
            self.row(
                "  same, as traffic",
                "each element once",
                ms,
                Work::Bytes(bytes),
                false,
            );
        }
        Ok(())
    }
}

/// Every case of one precision into its table.
fn bench<T: GpuScalar>(gpu: &Gpu, prec: &str, quick: bool, reps: usize) -> cuqr::Result<()> {
    let mut table = Table {
        gpu,
        prec,
        reps,
        copy_gbs: f64::NAN,
        gemm_gfs: f64::NAN,
    };
    cases::run_all::<T, _>(gpu, &Sizes::new(quick), &mut table)
}

/// Runs `cuqr bench kernels`.
pub fn run(args: &[String]) -> CliResult<()> {
    const CMD: &str = "bench kernels";
    let o = BenchOpts::parse(CMD, args, &["quick"], &["precision", "reps"])?;
    let precs = o.precisions()?;
    let reps = o.reps()?;
    let gpu = Gpu::new(0)?;
    print_run_header(&gpu, CMD, args)?;
    println!();
    println!("| prec | kernel | shape | median ms | rate | fraction of ceiling |");
    println!("|---|---|---|---|---|---|");
    for &p in precs {
        if p == "f64" {
            bench::<f64>(&gpu, p, o.flag("quick"), reps)?;
        } else {
            bench::<f32>(&gpu, p, o.flag("quick"), reps)?;
        }
    }
    Ok(())
}
