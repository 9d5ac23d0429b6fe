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

use crate::rng::random_signed_matrix_serial;

/// `dst` := `src`, device to device (same shape and leading dimension).
pub(crate) fn copy_into<T: GpuScalar>(
    gpu: &Gpu,
    src: &DevMat<T>,
    dst: &mut DevMat<T>,
) -> cuqr::Result<()> {
    gpu.stream()
        .memcpy_dtod(src.buf(), dst.buf_mut())
        .map_err(|e| cuqr::Error::Driver(format!("device copy: {e}")))
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
    let ms = time_ms(gpu, reps, || {
        gpu.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &x.view(),
            &x.view(),
            T::ZERO,
            &mut c.view_mut(),
        )
    })?;
    Ok((ms, 2.0 * (k as f64).powi(3) / (ms * 1e6)))
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

/// Prints the lines that open a group's report: the device and the command line.
pub(crate) fn print_run_header(gpu: &Gpu, cmd: &str, args: &[String]) -> cuqr::Result<()> {
    println!("device: {}", gpu.describe()?);
    println!("command: cuqr {cmd} {}", args.join(" "));
    Ok(())
}
