//! `cuqr bench kernels`: micro-benchmarks of cuqr's kernels (issue 7 item 1) with the
//! ceilings measured in the same run (architecture.md "Performance method"): device
//! to device copy bandwidth and the cuBLAS GEMM rate. Each kernel is timed with CUDA
//! events (one warm-up, median of ≥ 5) on random device-resident data (never zero);
//! memory-bound kernels report GB/s from a minimum-traffic model (every element
//! read/written once) and the fraction of the copy bandwidth, compute-bound ones
//! GFLOP/s and the fraction of the GEMM rate.
//!
//! Written as a `cuqr bench` group rather than a criterion bench: criterion 0.5 pulls
//! serde, regex, clap and plotting crates, a long build on the project's two-core
//! build machines, and its statistics add nothing to CUDA-event medians.

use std::cell::RefCell;
use std::sync::Arc;

use cuqr::internals::gpu::givens_two_phase as tp;
use cuqr::internals::gpu::givens_wavefront as wf;
use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::two_phase_launch::{ApplyTarget, GenPath, RotList, RotSide};
use cuqr::internals::gpu::{DevMat, DevVec, GpuScalar, Op};
use cuqr::{Gpu, Mat, Scalar};

use super::BenchOpts;
use crate::cli::CliResult;
use crate::rng::Rng;

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

fn random<T: Scalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
    let mut rng = Rng::new(seed);
    let data = (0..m * n)
        .map(|_| {
            let mag = 0.1 + 0.9 * rng.uniform();
            T::from_f64(if rng.next_u64() & 1 == 0 { mag } else { -mag })
        })
        .collect();
    Mat::from_col_major(m, n, data).expect("m·n values")
}

fn dev<T: GpuScalar>(gpu: &Gpu, m: usize, n: usize, seed: u64) -> cuqr::Result<DevMat<T>> {
    DevMat::from_host(gpu, random::<T>(m, n, seed).as_ref())
}

fn devvec<T: GpuScalar>(gpu: &Gpu, n: usize, seed: u64) -> cuqr::Result<DevVec<T>> {
    DevVec::from_slice(gpu, &random::<T>(n, 1, seed).into_vec())
}

/// Median milliseconds of `f` (1 warm-up, `reps` timed).
fn time(gpu: &Gpu, reps: usize, mut f: impl FnMut() -> cuqr::Result<()>) -> cuqr::Result<f64> {
    Ok(time_with_setup(gpu, 1, reps, || Ok(()), |()| f())?.median_ms())
}

/// One printed row: name, shape, ms, and either bytes or flops.
enum Work {
    Bytes(f64),
    Flops(f64),
}

struct Ceil {
    copy_gbs: f64,
    gemm_gfs: f64,
}

fn row(prec: &str, name: &str, shape: &str, ms: f64, w: Work, c: &Ceil) {
    let (rate, frac) = match w {
        Work::Bytes(b) => {
            let gbs = b / (ms * 1e6);
            (
                format!("{gbs:.0} GB/s"),
                format!("{:.1} % of copy", 100.0 * gbs / c.copy_gbs),
            )
        }
        Work::Flops(f) => {
            let gfs = f / (ms * 1e6);
            (
                format!("{gfs:.0} GFLOP/s"),
                format!("{:.2} % of GEMM", 100.0 * gfs / c.gemm_gfs),
            )
        }
    };
    println!("| {prec} | {name} | {shape} | {ms:.3} | {rate} | {frac} |");
}

fn bench<T: GpuScalar>(gpu: &Arc<Gpu>, prec: &str, quick: bool, reps: usize) -> cuqr::Result<()> {
    let s = std::mem::size_of::<T>() as f64;
    let (m, n) = if quick { (4096, 1024) } else { (16384, 4096) };
    let mn = (m * n) as f64;
    let shape = format!("{m}×{n}");

    // ceilings
    let a = dev::<T>(gpu, m, n, 1)?;
    let mut b = DevMat::<T>::zeros(gpu, m, n)?;
    let copy_ms = time(gpu, reps, || {
        gpu.stream()
            .memcpy_dtod(a.buf(), b.buf_mut())
            .map_err(|e| cuqr::Error::Driver(format!("device copy: {e}")))
    })?;
    let copy_gbs = 2.0 * (a.ld() * n) as f64 * s / (copy_ms * 1e6);
    let k = if quick { 4096 } else { 8192 };
    let g = dev::<T>(gpu, k, k, 2)?;
    let mut gc = DevMat::<T>::zeros(gpu, k, k)?;
    let gemm_ms = time(gpu, reps, || {
        gpu.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &g.view(),
            &g.view(),
            T::ZERO,
            &mut gc.view_mut(),
        )
    })?;
    let gemm_gfs = 2.0 * (k as f64).powi(3) / (gemm_ms * 1e6);
    drop((g, gc));
    let c = Ceil { copy_gbs, gemm_gfs };
    println!(
        "| {prec} | ceiling: device copy | {shape} | {copy_ms:.3} | {copy_gbs:.0} GB/s | 100 % |"
    );
    println!(
        "| {prec} | ceiling: cuBLAS GEMM | {k}³ | {gemm_ms:.3} | {gemm_gfs:.0} GFLOP/s | 100 % |"
    );

    // memory-bound kernels
    let mut t = DevMat::<T>::zeros(gpu, n, m)?;
    let ms = time(gpu, reps, || {
        gpu.transpose_padded(&a.view(), &mut t.view_mut())
    })?;
    row(
        prec,
        "transpose_padded",
        &shape,
        ms,
        Work::Bytes(2.0 * mn * s),
        &c,
    );
    drop(t);
    let ms = time(gpu, reps, || {
        gpu.two_phase_copy(&a.view(), &mut b.view_mut(), 0..0, false)
    })?;
    row(
        prec,
        "two_phase_copy",
        &shape,
        ms,
        Work::Bytes(2.0 * mn * s),
        &c,
    );
    let ms = time(gpu, reps, || gpu.panel_copy(&a.view(), &mut b.view_mut()))?;
    row(
        prec,
        "panel_copy",
        &shape,
        ms,
        Work::Bytes(2.0 * mn * s),
        &c,
    );
    let mut out = DevVec::<T>::zeros(gpu, 2 * n)?;
    let ms = time(gpu, reps, || {
        gpu.panel_col_norms(&a.view(), &mut out.view_mut())
    })?;
    // Column c's norm reads its rows 0..=c only (R's upper triangle, the rank check).
    let tri: usize = (0..n).map(|c| (c + 1).min(m)).sum();
    row(
        prec,
        "panel_col_norms (upper triangle)",
        &shape,
        ms,
        Work::Bytes(tri as f64 * s),
        &c,
    );
    let ms = time(gpu, reps, || {
        gpu.reduce_nrm2(&a.buf().slice(..), &mut out.slice_mut(0..1))
    })?;
    row(
        prec,
        "reduce_nrm2 (one block)",
        &shape,
        ms,
        Work::Bytes(mn * s),
        &c,
    );
    // The double sum's m×cc block: 64 columns in the quick run; 1024 (128 MiB a
    // matrix in f64, well past the 50 MiB L2) in the full one, a size that fills the GPU.
    let cc = if quick { 64 } else { 1024 };
    let len = m * cc;
    let x = devvec::<T>(gpu, len, 3)?;
    let y = devvec::<T>(gpu, len, 4)?;
    let ms = time(gpu, reps, || {
        gpu.reduce_dot(&x.view(), &y.view(), &mut out.slice_mut(0..1))
    })?;
    row(
        prec,
        "reduce_dot (one block)",
        &format!("{len}"),
        ms,
        Work::Bytes(2.0 * len as f64 * s),
        &c,
    );
    let r = m;
    let mut cm = DevMat::<T>::zeros(gpu, r, cc)?;
    let ms = time(gpu, reps, || {
        gpu.reduce_double_sum(&x.slice(0..r * cc), &y.slice(0..r * cc), &mut cm.view_mut())
    })?;
    row(
        prec,
        "reduce_double_sum",
        &format!("{r}×{cc}"),
        ms,
        Work::Bytes(4.0 * (r * cc) as f64 * s),
        &c,
    );
    drop((cm, x, y));
    let mut hx = devvec::<T>(gpu, m - 1, 5)?;
    let mut alpha = devvec::<T>(gpu, 1, 6)?;
    let mut tau = DevVec::<T>::zeros(gpu, 1)?;
    let ms = time(gpu, reps, || {
        gpu.householder_house(
            &mut alpha.view_mut(),
            &mut hx.view_mut(),
            &mut tau.view_mut(),
        )
    })?;
    row(
        prec,
        "householder_house (one block)",
        &format!("{m}"),
        ms,
        Work::Bytes(2.0 * m as f64 * s),
        &c,
    );
    drop((hx, alpha, tau));

    // T-factor build and set_tau (k = 64 reflectors of length m)
    let kk = 64;
    let v = dev::<T>(gpu, m, kk, 7)?;
    let taus = devvec::<T>(gpu, kk, 8)?;
    let mut tt = DevMat::<T>::zeros(gpu, kk, kk)?;
    let ms = time(gpu, reps, || {
        gpu.wy_build_t(&v.view(), &taus.view(), &mut tt.view_mut())
    })?;
    row(
        prec,
        "wy_build_t",
        &format!("{m}×{kk}"),
        ms,
        Work::Flops((m * kk * kk) as f64),
        &c,
    );
    let ms = time(gpu, reps, || {
        gpu.wy_set_tau(&taus.view(), &mut tt.view_mut())
    })?;
    row(
        prec,
        "wy_set_tau",
        &format!("{kk}"),
        ms,
        Work::Bytes(2.0 * kk as f64 * s),
        &c,
    );
    drop((v, taus, tt, a, b));

    // two-phase Givens: generate (strip, block) and the blocked apply
    let (qm, h, p) = if quick {
        (2000, 1000, 50)
    } else {
        (8000, 3000, 200)
    };
    let mut list = RotList::<T>::with_capacity(gpu, p * h)?;
    let x0 = dev::<T>(gpu, h + p, p, 9)?;
    let xs = RefCell::new(DevMat::<T>::zeros(gpu, h + p, p)?);
    // the driver block back to x0 before each generate (untimed)
    let reset = || {
        gpu.stream()
            .memcpy_dtod(x0.buf(), xs.borrow_mut().buf_mut())
            .map_err(|e| cuqr::Error::Driver(format!("device copy: {e}")))
    };
    let gen = time_with_setup(gpu, 1, reps, reset, |()| {
        gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list)
    })?
    .median_ms();
    // the driver block: O(p²h) rotation applications of 6 flops
    let gflops = 6.0 * (p * p * h) as f64 / 2.0;
    row(
        prec,
        "two_phase_gen_strip (default: chains of block scans)",
        &format!("h={h} p={p}"),
        gen,
        Work::Flops(gflops),
        &c,
    );
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
    row(
        prec,
        "two_phase_gen_strip (one-block wavefront)",
        &format!("h={h} p={p}"),
        wave,
        Work::Flops(gflops),
        &c,
    );
    // the apply below takes the default generate's list
    reset()?;
    gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list)?;
    let mut q = dev::<T>(gpu, qm, h + p, 10)?;
    let mut d = dev::<T>(gpu, h + p, 1, 11)?;
    let ms = time(gpu, reps, || {
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
    row(
        prec,
        "two_phase_apply default (strip, Q+d: pipe kernel)",
        &format!("Q {qm}×{} p·h={}", h + p, p * h),
        ms,
        Work::Flops(fl),
        &c,
    );
    row(
        prec,
        "  same, as traffic",
        "each element once",
        ms,
        Work::Bytes(2.0 * (qm * (h + p) + h + p) as f64 * s),
        &c,
    );
    drop((q, d, x0, xs));
    let bp = p / 2;
    let z0 = dev::<T>(gpu, bp, qm, 12)?;
    let mut z = DevVec::<T>::zeros(gpu, bp * qm)?;
    let mut blist = RotList::<T>::with_capacity(gpu, bp * qm)?;
    let ms = time(gpu, reps, || {
        gpu.two_phase_gen_block(&z0.view(), &mut z, &mut blist)
    })?;
    row(
        prec,
        "two_phase_gen_block (default: chains of block scans)",
        &format!("p={bp} m={qm}"),
        ms,
        Work::Flops(6.0 * (bp * bp * qm) as f64 / 2.0),
        &c,
    );
    let ms = time(gpu, reps, || {
        gpu.two_phase_gen_block_path(
            &z0.view(),
            &mut z,
            &mut blist,
            GenPath::Pipe { shared: false },
        )
    })?;
    row(
        prec,
        "two_phase_gen_block (one-block wavefront)",
        &format!("p={bp} m={qm}"),
        ms,
        Work::Flops(6.0 * (bp * bp * qm) as f64 / 2.0),
        &c,
    );
    drop((z0, z, blist, list));

    // whole strip stage, both strategies, same data
    let (sm, sn, sp) = if quick {
        (2000, 500, 20)
    } else {
        (4000, 1000, 50)
    };
    let r0 = dev::<T>(gpu, sm, sn + sp, 13)?;
    let q0 = dev::<T>(gpu, sm, sm, 14)?;
    let d0 = dev::<T>(gpu, sm, 1, 15)?;
    for (name, two_phase) in [
        ("strip stage, two-phase", true),
        ("strip stage, wavefront", false),
    ] {
        type State<T> = (DevMat<T>, DevMat<T>, DevMat<T>);
        let st: RefCell<Option<State<T>>> = RefCell::new(None);
        let ms = time_with_setup(
            gpu,
            1,
            reps,
            || {
                st.borrow_mut().take();
                let cp = |a: &DevMat<T>| -> cuqr::Result<DevMat<T>> {
                    let mut b = DevMat::<T>::zeros(gpu, a.nrows(), a.ncols())?;
                    gpu.stream()
                        .memcpy_dtod(a.buf(), b.buf_mut())
                        .map_err(|e| cuqr::Error::Driver(format!("device copy: {e}")))?;
                    Ok(b)
                };
                Ok((cp(&r0)?, cp(&q0)?, cp(&d0)?))
            },
            |(mut r, mut q, mut d)| {
                if two_phase {
                    tp::insert_cols_strip_two_phase(gpu, &mut r, &mut q, &mut d, 0, sp, sn)?;
                } else {
                    wf::insert_cols_strip_wavefront(gpu, &mut r, &mut q, &mut d, 0, sp, sn)?;
                }
                *st.borrow_mut() = Some((r, q, d));
                Ok(())
            },
        )?
        .median_ms();
        let fl = 6.0 * (sp * sn) as f64 * (sm + sn + 1) as f64;
        row(
            prec,
            name,
            &format!("m={sm} n={sn} p={sp} k0=0"),
            ms,
            Work::Flops(fl),
            &c,
        );
    }
    Ok(())
}

/// Runs `cuqr bench kernels`.
pub fn run(args: &[String]) -> CliResult<()> {
    const CMD: &str = "bench kernels";
    let o = BenchOpts::parse(CMD, args, &["quick"], &["precision", "reps"])?;
    let precs: &[&str] = match o.get("precision").unwrap_or("both") {
        "both" => &["f64", "f32"],
        "f64" => &["f64"],
        "f32" => &["f32"],
        s => return Err(format!("--precision must be f64, f32 or both, not '{s}'").into()),
    };
    let reps = o.usize("reps")?.unwrap_or(5);
    if reps < 5 {
        return Err("--reps must be at least 5 (medians of >= 5 runs)".into());
    }
    let gpu = Arc::new(Gpu::new(0)?);
    println!("device: {}", gpu.describe()?);
    println!("command: cuqr bench kernels {}", args.join(" "));
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
