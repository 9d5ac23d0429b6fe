//! `cuqr bench kernels`: micro-benchmarks of cuqr's kernels with the ceilings
//! measured in the same run (the method: docs/performance.md): device to device copy
//! bandwidth and the cuBLAS GEMM rate. Each kernel is timed with CUDA
//! events (one warm-up, median of ≥ 5) on random device-resident data (never zero);
//! memory-bound kernels report GB/s from a minimum-traffic model (every element
//! read/written once) and the fraction of the copy bandwidth, compute-bound ones
//! GFLOP/s and the fraction of the GEMM rate.
//!
//! The same kernels, sizes and byte/flop counts are timed by the criterion bench
//! `benches/kernels.rs`; this group prints them as one table with the ceilings.

use std::cell::RefCell;
use std::sync::Arc;

use cuqr::internals::gpu::givens_two_phase as tp;
use cuqr::internals::gpu::givens_wavefront as wf;
use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::two_phase_launch::{ApplyTarget, GenPath, RotList, RotSide};
use cuqr::internals::gpu::{DevMat, DevVec, GpuScalar};
use cuqr::Gpu;

use super::common::{
    copy_into, copy_rate, dup, gemm_rate, print_run_header, random_dev, time_keeping_last, time_ms,
};
use super::BenchOpts;
use crate::cli::CliResult;
use crate::rng::random_signed_matrix_serial;

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

/// One printed row's work: bytes moved (memory-bound) or flops (compute-bound).
enum Work {
    Bytes(f64),
    Flops(f64),
}

/// The ceilings of one precision, and the rows printed against them.
struct Rows<'a> {
    prec: &'a str,
    copy_gbs: f64,
    gemm_gfs: f64,
}

impl Rows<'_> {
    /// Prints one row: name, shape, ms, and the rate with its fraction of the ceiling.
    fn row(&self, name: &str, shape: &str, ms: f64, w: Work) {
        let (rate, frac) = match w {
            Work::Bytes(b) => {
                let gbs = b / (ms * 1e6);
                (
                    format!("{gbs:.0} GB/s"),
                    format!("{:.1} % of copy", 100.0 * gbs / self.copy_gbs),
                )
            }
            Work::Flops(f) => {
                let gfs = f / (ms * 1e6);
                (
                    format!("{gfs:.0} GFLOP/s"),
                    format!("{:.2} % of GEMM", 100.0 * gfs / self.gemm_gfs),
                )
            }
        };
        let prec = self.prec;
        println!("| {prec} | {name} | {shape} | {ms:.3} | {rate} | {frac} |");
    }
}

fn devvec<T: GpuScalar>(gpu: &Gpu, n: usize, seed: u64) -> cuqr::Result<DevVec<T>> {
    DevVec::from_slice(
        gpu,
        &random_signed_matrix_serial::<T>(n, 1, seed).into_vec(),
    )
}

/// Every kernel of one precision, after the ceilings.
fn bench<T: GpuScalar>(gpu: &Arc<Gpu>, prec: &str, quick: bool, reps: usize) -> cuqr::Result<()> {
    let (m, n) = if quick { (4096, 1024) } else { (16384, 4096) };
    let a = random_dev::<T>(gpu, m, n, 1)?;
    let mut b = DevMat::<T>::zeros(gpu, m, n)?;
    let rows = ceilings::<T>(gpu, prec, &a, &mut b, quick, reps)?;
    memory_bound(gpu, &rows, &a, &mut b, quick, reps)?;
    reflector_kernels::<T>(gpu, &rows, m, reps)?;
    drop((a, b));
    two_phase_kernels::<T>(gpu, &rows, quick, reps)?;
    strip_stages::<T>(gpu, &rows, quick, reps)
}

/// The ceilings, timed and printed: the copy of `a` into `b`, and a cuBLAS GEMM.
fn ceilings<'a, T: GpuScalar>(
    gpu: &Gpu,
    prec: &'a str,
    a: &DevMat<T>,
    b: &mut DevMat<T>,
    quick: bool,
    reps: usize,
) -> cuqr::Result<Rows<'a>> {
    let shape = format!("{}×{}", a.nrows(), a.ncols());
    let (copy_ms, copy_gbs) = copy_rate(gpu, a, b, reps)?;
    let k = if quick { 4096 } else { 8192 };
    let (gemm_ms, gemm_gfs) = gemm_rate::<T>(gpu, k, reps)?;
    println!(
        "| {prec} | ceiling: device copy | {shape} | {copy_ms:.3} | {copy_gbs:.0} GB/s | 100 % |"
    );
    println!(
        "| {prec} | ceiling: cuBLAS GEMM | {k}³ | {gemm_ms:.3} | {gemm_gfs:.0} GFLOP/s | 100 % |"
    );
    Ok(Rows {
        prec,
        copy_gbs,
        gemm_gfs,
    })
}

/// The memory-bound kernels on the m×n matrix `a` (`b` its target): copies and
/// transposes, column norms and the reductions.
fn memory_bound<T: GpuScalar>(
    gpu: &Gpu,
    rows: &Rows<'_>,
    a: &DevMat<T>,
    b: &mut DevMat<T>,
    quick: bool,
    reps: usize,
) -> cuqr::Result<()> {
    let s = std::mem::size_of::<T>() as f64;
    let (m, n) = (a.nrows(), a.ncols());
    let mn = (m * n) as f64;
    let shape = format!("{m}×{n}");
    let copied = Work::Bytes(2.0 * mn * s);
    let mut t = DevMat::<T>::zeros(gpu, n, m)?;
    let ms = time_ms(gpu, reps, || {
        gpu.transpose_padded(&a.view(), &mut t.view_mut())
    })?;
    rows.row("transpose_padded", &shape, ms, copied);
    drop(t);
    let ms = time_ms(gpu, reps, || {
        gpu.two_phase_copy(&a.view(), &mut b.view_mut(), 0..0, false)
    })?;
    rows.row("two_phase_copy", &shape, ms, Work::Bytes(2.0 * mn * s));
    let ms = time_ms(gpu, reps, || gpu.panel_copy(&a.view(), &mut b.view_mut()))?;
    rows.row("panel_copy", &shape, ms, Work::Bytes(2.0 * mn * s));
    let mut out = DevVec::<T>::zeros(gpu, 2 * n)?;
    let ms = time_ms(gpu, reps, || {
        gpu.panel_col_norms(&a.view(), &mut out.view_mut())
    })?;
    // Column c's norm reads its rows 0..=c only (R's upper triangle, the rank check).
    let tri: usize = (0..n).map(|c| (c + 1).min(m)).sum();
    let name = "panel_col_norms (upper triangle)";
    rows.row(name, &shape, ms, Work::Bytes(tri as f64 * s));
    let ms = time_ms(gpu, reps, || {
        gpu.reduce_nrm2(&a.buf().slice(..), &mut out.slice_mut(0..1))
    })?;
    rows.row("reduce_nrm2 (one block)", &shape, ms, Work::Bytes(mn * s));
    // The double sum's m×cc block: 64 columns in the quick run; 1024 (128 MiB a
    // matrix in f64, well past the 50 MiB L2) in the full one, a size that fills the GPU.
    let cc = if quick { 64 } else { 1024 };
    let len = m * cc;
    let x = devvec::<T>(gpu, len, 3)?;
    let y = devvec::<T>(gpu, len, 4)?;
    let ms = time_ms(gpu, reps, || {
        gpu.reduce_dot(&x.view(), &y.view(), &mut out.slice_mut(0..1))
    })?;
    let dot_bytes = Work::Bytes(2.0 * len as f64 * s);
    rows.row("reduce_dot (one block)", &format!("{len}"), ms, dot_bytes);
    let r = m;
    let mut cm = DevMat::<T>::zeros(gpu, r, cc)?;
    let ms = time_ms(gpu, reps, || {
        gpu.reduce_double_sum(&x.slice(0..r * cc), &y.slice(0..r * cc), &mut cm.view_mut())
    })?;
    let sum_bytes = Work::Bytes(4.0 * (r * cc) as f64 * s);
    rows.row("reduce_double_sum", &format!("{r}×{cc}"), ms, sum_bytes);
    Ok(())
}

/// The Householder kernels for reflectors of length m: one vector, the T factor of
/// 64 of them and its τ entries.
fn reflector_kernels<T: GpuScalar>(
    gpu: &Gpu,
    rows: &Rows<'_>,
    m: usize,
    reps: usize,
) -> cuqr::Result<()> {
    let s = std::mem::size_of::<T>() as f64;
    let mut hx = devvec::<T>(gpu, m - 1, 5)?;
    let mut alpha = devvec::<T>(gpu, 1, 6)?;
    let mut tau = DevVec::<T>::zeros(gpu, 1)?;
    let ms = time_ms(gpu, reps, || {
        gpu.householder_house(
            &mut alpha.view_mut(),
            &mut hx.view_mut(),
            &mut tau.view_mut(),
        )
    })?;
    let name = "householder_house (one block)";
    rows.row(name, &format!("{m}"), ms, Work::Bytes(2.0 * m as f64 * s));
    drop((hx, alpha, tau));

    // T-factor build and set_tau (k = 64 reflectors of length m)
    let kk = 64;
    let v = random_dev::<T>(gpu, m, kk, 7)?;
    let taus = devvec::<T>(gpu, kk, 8)?;
    let mut tt = DevMat::<T>::zeros(gpu, kk, kk)?;
    let ms = time_ms(gpu, reps, || {
        gpu.wy_build_t(&v.view(), &taus.view(), &mut tt.view_mut())
    })?;
    let flops = Work::Flops((m * kk * kk) as f64);
    rows.row("wy_build_t", &format!("{m}×{kk}"), ms, flops);
    let ms = time_ms(gpu, reps, || {
        gpu.wy_set_tau(&taus.view(), &mut tt.view_mut())
    })?;
    let bytes = Work::Bytes(2.0 * kk as f64 * s);
    rows.row("wy_set_tau", &format!("{kk}"), ms, bytes);
    Ok(())
}

/// Two-phase Givens: the strip and block generates (default and one-block
/// wavefront paths) and the default apply of the strip's rotations to Q and d.
fn two_phase_kernels<T: GpuScalar>(
    gpu: &Gpu,
    rows: &Rows<'_>,
    quick: bool,
    reps: usize,
) -> cuqr::Result<()> {
    let s = std::mem::size_of::<T>() as f64;
    let (qm, h, p) = if quick {
        (2000, 1000, 50)
    } else {
        (8000, 3000, 200)
    };
    let mut list = RotList::<T>::with_capacity(gpu, p * h)?;
    let x0 = random_dev::<T>(gpu, h + p, p, 9)?;
    let xs = RefCell::new(DevMat::<T>::zeros(gpu, h + p, p)?);
    // the driver block back to x0 before each generate (untimed)
    let reset = || copy_into(gpu, &x0, &mut xs.borrow_mut());
    let gen = time_with_setup(gpu, 1, reps, reset, |()| {
        gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list)
    })?
    .median_ms();
    // the driver block: O(p²h) rotation applications of 6 flops
    let gflops = 6.0 * (p * p * h) as f64 / 2.0;
    let strip = format!("h={h} p={p}");
    let name = "two_phase_gen_strip (default: chains of block scans)";
    rows.row(name, &strip, gen, Work::Flops(gflops));
    // the one-block wavefront it replaced (driver in global memory at this size)
    let wave = time_with_setup(gpu, 1, reps, reset, |()| {
        gpu.two_phase_gen_strip_path(
            &mut xs.borrow_mut().view_mut(),
            h,
            &mut list,
            GenPath::Pipe { shared: false },
        )
    })?
    .median_ms();
    let name = "two_phase_gen_strip (one-block wavefront)";
    rows.row(name, &strip, wave, Work::Flops(gflops));
    // the apply below takes the default generate's list
    reset()?;
    gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list)?;
    let mut q = random_dev::<T>(gpu, qm, h + p, 10)?;
    let mut d = random_dev::<T>(gpu, h + p, 1, 11)?;
    let ms = time_ms(gpu, reps, || {
        let (mut qv, mut dv) = (q.view_mut(), d.view_mut());
        gpu.two_phase_apply(
            &list,
            &mut [
                ApplyTarget {
                    view: &mut qv,
                    side: RotSide::Cols,
                    banded: false,
                },
                ApplyTarget {
                    view: &mut dv,
                    side: RotSide::Rows,
                    banded: false,
                },
            ],
        )
    })?;
    let fl = 6.0 * (p * h) as f64 * (qm + 1) as f64;
    let shape = format!("Q {qm}×{} p·h={}", h + p, p * h);
    rows.row(
        "two_phase_apply default (strip, Q+d: pipe kernel)",
        &shape,
        ms,
        Work::Flops(fl),
    );
    let traffic = Work::Bytes(2.0 * (qm * (h + p) + h + p) as f64 * s);
    rows.row("  same, as traffic", "each element once", ms, traffic);
    drop((q, d, x0, xs));
    let bp = p / 2;
    let z0 = random_dev::<T>(gpu, bp, qm, 12)?;
    let mut z = DevVec::<T>::zeros(gpu, bp * qm)?;
    let mut blist = RotList::<T>::with_capacity(gpu, bp * qm)?;
    let block = format!("p={bp} m={qm}");
    let block_flops = 6.0 * (bp * bp * qm) as f64 / 2.0;
    let ms = time_ms(gpu, reps, || {
        gpu.two_phase_gen_block(&z0.view(), &mut z, &mut blist)
    })?;
    let name = "two_phase_gen_block (default: chains of block scans)";
    rows.row(name, &block, ms, Work::Flops(block_flops));
    let ms = time_ms(gpu, reps, || {
        gpu.two_phase_gen_block_path(
            &z0.view(),
            &mut z,
            &mut blist,
            GenPath::Pipe { shared: false },
        )
    })?;
    let name = "two_phase_gen_block (one-block wavefront)";
    rows.row(name, &block, ms, Work::Flops(block_flops));
    Ok(())
}

/// The whole strip stage of column insertion, both Givens strategies on the same data.
fn strip_stages<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    rows: &Rows<'_>,
    quick: bool,
    reps: usize,
) -> cuqr::Result<()> {
    let (sm, sn, sp) = if quick {
        (2000, 500, 20)
    } else {
        (4000, 1000, 50)
    };
    let r0 = random_dev::<T>(gpu, sm, sn + sp, 13)?;
    let q0 = random_dev::<T>(gpu, sm, sm, 14)?;
    let d0 = random_dev::<T>(gpu, sm, 1, 15)?;
    for (name, two_phase) in [
        ("strip stage, two-phase", true),
        ("strip stage, wavefront", false),
    ] {
        let (ms, _) = time_keeping_last(
            gpu,
            reps,
            || Ok((dup(gpu, &r0)?, dup(gpu, &q0)?, dup(gpu, &d0)?)),
            |(mut r, mut q, mut d)| {
                if two_phase {
                    tp::insert_cols_strip_two_phase(gpu, &mut r, &mut q, &mut d, 0, sp, sn)?;
                } else {
                    wf::insert_cols_strip_wavefront(gpu, &mut r, &mut q, &mut d, 0, sp, sn)?;
                }
                Ok((r, q, d))
            },
        )?;
        let fl = 6.0 * (sp * sn) as f64 * (sm + sn + 1) as f64;
        let shape = format!("m={sm} n={sn} p={sp} k0=0");
        rows.row(name, &shape, ms, Work::Flops(fl));
    }
    Ok(())
}

/// Runs `cuqr bench kernels`.
pub fn run(args: &[String]) -> CliResult<()> {
    const CMD: &str = "bench kernels";
    let o = BenchOpts::parse(CMD, args, &["quick"], &["precision", "reps"])?;
    let precs = o.precisions()?;
    let reps = o.reps()?;
    let gpu = Arc::new(Gpu::new(0)?);
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
