//! Helpers shared by the benchmark groups: device copies and random device data,
//! CUDA-event timings (with and without an untimed set-up, keeping the last run's
//! result), the copy and GEMM ceilings, cuSOLVER's least-squares baseline, table cells
//! and the lines that open a report.

use std::cell::RefCell;

use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::{
    DevMat, DevMatView, DevMatViewMut, DevVec, Diag, GpuScalar, Op, Side, Uplo,
};
use cuqr::Gpu;

use cuqr_cli::rng::random_signed_matrix_serial;

/// `dst` := `src`, device to device (same shape and leading dimension).
pub(crate) fn copy_into<T: GpuScalar>(
    gpu: &Gpu,
    src: &DevMat<T>,
    dst: &mut DevMat<T>,
) -> cuqr::Result<()> {
    gpu.stream()
        .memcpy_dtod(src.buf(), dst.buf_mut())
        .map_err(|e| cuqr::Error::driver("device copy", e))
}

/// A fresh device copy of `a`.
pub(crate) fn dup<T: GpuScalar>(gpu: &Gpu, a: &DevMat<T>) -> cuqr::Result<DevMat<T>> {
    let mut b = DevMat::zeros(gpu, a.nrows(), a.ncols())?;
    copy_into(gpu, a, &mut b)?;
    Ok(b)
}

/// A device matrix of random entries ±[0.1, 1) (never zero), from one stream seeded
/// by `seed`.
pub(crate) fn random_dev<T: GpuScalar>(
    gpu: &Gpu,
    m: usize,
    n: usize,
    seed: u64,
) -> cuqr::Result<DevMat<T>> {
    DevMat::from_host(gpu, random_signed_matrix_serial::<T>(m, n, seed).as_ref())
}

/// Median milliseconds of `f`: one warm-up, then `reps` CUDA-event timed runs.
pub(crate) fn time_ms(
    gpu: &Gpu,
    reps: usize,
    mut f: impl FnMut() -> cuqr::Result<()>,
) -> cuqr::Result<f64> {
    Ok(time_with_setup(gpu, 1, reps, || Ok(()), |()| f())?.median_ms())
}

/// Times `run` on a fresh input from `setup` (one warm-up, then `reps` CUDA-event
/// runs; `setup` untimed). The result of each run is kept until the next set-up, so
/// that freeing it is not timed. Returns (median ms, the last run's result).
pub(crate) fn time_keeping_last<I, S>(
    gpu: &Gpu,
    reps: usize,
    mut setup: impl FnMut() -> cuqr::Result<I>,
    mut run: impl FnMut(I) -> cuqr::Result<S>,
) -> cuqr::Result<(f64, S)> {
    let keep: RefCell<Option<S>> = RefCell::new(None);
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || {
            keep.borrow_mut().take();
            setup()
        },
        |input| {
            let out = run(input)?;
            *keep.borrow_mut() = Some(out);
            Ok(())
        },
    )?;
    let last = keep.into_inner().expect("at least one timed run");
    Ok((t.median_ms(), last))
}

/// The copy ceiling: `b` := `a` device to device, timed; returns (median ms, GB/s
/// counting each element read and written once).
pub(crate) fn copy_rate<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    b: &mut DevMat<T>,
    reps: usize,
) -> cuqr::Result<(f64, f64)> {
    let ms = time_ms(gpu, reps, || copy_into(gpu, a, b))?;
    let bytes = 2.0 * (a.ld() * a.ncols() * std::mem::size_of::<T>()) as f64;
    Ok((ms, bytes / (ms * 1e6)))
}

/// The GEMM ceiling: cuBLAS C := X·X for random k×k X, timed; returns (median ms,
/// GFLOP/s with 2k³ flops).
pub(crate) fn gemm_rate<T: GpuScalar>(
    gpu: &Gpu,
    k: usize,
    reps: usize,
) -> cuqr::Result<(f64, f64)> {
    let x = random_dev::<T>(gpu, k, k, 2)?;
    let mut c = DevMat::<T>::zeros(gpu, k, k)?;
    let ms = time_ms(gpu, reps, || gemm_square(gpu, &x, &mut c))?;
    Ok((ms, 2.0 * (k as f64).powi(3) / (ms * 1e6)))
}

/// The GEMM of the ceiling: c := x·x (cuBLAS, square x).
pub(crate) fn gemm_square<T: GpuScalar>(
    gpu: &Gpu,
    x: &DevMat<T>,
    c: &mut DevMat<T>,
) -> cuqr::Result<()> {
    gpu.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &x.view(),
        &x.view(),
        T::ZERO,
        &mut c.view_mut(),
    )
}

/// cuSOLVER's least-squares solve in place, the refactorisation baseline: `w` (m×n)
/// := its QR (`geqrf`, the scalar factors in `tau`), `d` := Qᵀd (`ormqr`), then
/// d(0..n) := R⁻¹d(0..n) (`trsm`).
pub(crate) fn cusolver_ls<T: GpuScalar>(
    gpu: &Gpu,
    w: &mut DevMat<T>,
    tau: &mut DevVec<T>,
    d: &mut DevMat<T>,
) -> cuqr::Result<()> {
    let n = w.ncols();
    gpu.geqrf(&mut w.view_mut(), &mut tau.view_mut())?;
    gpu.ormqr(
        Side::Left,
        Op::T,
        &w.view(),
        n,
        &tau.view(),
        &mut d.view_mut(),
    )?;
    solve_upper(gpu, &w.block(0, 0, n, n), &mut d.block_mut(0, 0, n, 1))
}

/// x := R⁻¹x for upper triangular R (cuBLAS TRSM).
pub(crate) fn solve_upper<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMatView<'_, T>,
    x: &mut DevMatViewMut<'_, T>,
) -> cuqr::Result<()> {
    gpu.trsm(Side::Left, Uplo::Upper, Op::N, Diag::NonUnit, T::ONE, r, x)
}

/// A table cell: the value with `digits` decimals, or "–" when absent.
pub(crate) fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

/// a / b when both are present.
pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

/// Prints the lines that open a group's report with its date: the date (UTC), the
/// device, the NVIDIA driver version and the command line.
pub(crate) fn print_dated_run_header(gpu: &Gpu, cmd: &str, args: &[String]) -> cuqr::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!("date: {}", utc_date_time(now));
    println!("device: {}", gpu.describe()?);
    println!("driver: {}", driver_version());
    println!("command: cuqr {cmd} {}", args.join(" "));
    Ok(())
}

/// `secs` after 1970-01-01 00:00 UTC as "YYYY-MM-DD HH:MM:SS UTC" (proleptic
/// Gregorian calendar, days to civil date by era arithmetic).
pub(crate) fn utc_date_time(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // days since 0000-03-01 in 400-year eras of 146097 days
    let z = days + 719_468;
    let (era, doe) = (z / 146_097, z % 146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The NVIDIA driver version: from /proc/driver/nvidia/version, else from
/// `nvidia-smi`, else "unknown".
pub(crate) fn driver_version() -> String {
    let from_proc = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|s| version_in(&s));
    let from_smi = || {
        std::process::Command::new("nvidia-smi")
            .args(["--query-gpu=driver_version", "--format=csv,noheader"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| version_in(&String::from_utf8_lossy(&o.stdout)))
    };
    from_proc
        .or_else(from_smi)
        .unwrap_or_else(|| "unknown".to_string())
}

/// The first dotted number (e.g. 580.159.04) in `text`.
fn version_in(text: &str) -> Option<String> {
    text.split_whitespace()
        .find(|t| {
            t.contains('.')
                && t.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// Prints the lines that open a group's report: the device and the command line.
pub(crate) fn print_run_header(gpu: &Gpu, cmd: &str, args: &[String]) -> cuqr::Result<()> {
    println!("device: {}", gpu.describe()?);
    println!("command: cuqr {cmd} {}", args.join(" "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_driver_versions() {
        assert_eq!(utc_date_time(0), "1970-01-01 00:00:00 UTC");
        // a leap day, and the last second of a year
        assert_eq!(utc_date_time(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_date_time(1_704_067_199), "2023-12-31 23:59:59 UTC");
        assert_eq!(utc_date_time(1_700_000_000), "2023-11-14 22:13:20 UTC");
        let proc = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  \
                    Release Build  (dvs-builder@U16-I3-B08-1-2)  Thu Oct  2 01:15:15 UTC 2025\n\
                    GCC version:  gcc version 12.3.0";
        assert_eq!(version_in(proc).as_deref(), Some("580.159.04"));
        assert_eq!(version_in("550.54.15\n").as_deref(), Some("550.54.15"));
        assert_eq!(version_in("no version here 1. .2"), None);
    }
}
