//! `cuqr bench lu`: cuqr's blocked LU with partial pivoting
//! (docs/algorithms.md#lu-factorisation) against
//! cuSOLVER `getrf` (+ `getrs` for one right-hand side) in the same process, on the
//! same device-resident random matrix (entries ±[0.1, 1), never zero). Medians of ≥ 5
//! CUDA-event timings after one warm-up; the factorisation timings include reading
//! back cuqr's pivots and diagonal and cuSOLVER's devInfo. Accuracy: the backward
//! error ‖Ax − b‖/(‖A‖_F‖x‖) of each library's solve. Profile: cuqr's time per phase
//! (panel, laswp, TRSM, GEMM) from one extra profiled run.

use std::cell::RefCell;
use std::sync::Arc;

use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::{DevMat, GpuScalar, Op};
use cuqr::lu::{GpuLu, LuParams};
use cuqr::{Gpu, Mat};

use super::common::{copy_into, dup, print_run_header, time_keeping_last};
use super::BenchOpts;
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix;

/// `cuqr bench lu --help`.
pub const HELP: &str = "\
cuqr bench lu: blocked LU with partial pivoting (cuqr) vs cuSOLVER getrf + getrs

Usage: cuqr bench lu [--quick] [--precision f64|f32|both] [--sizes N,N,...]
                     [--reps R] [--nb NB] [--base B] [--fused-rows F]
                     [--coop on|off] [--coop-rows R] [--coop-smem on|off]
                     [--lookahead on|off] [--cluster on|off] [--leaf-min W]
                     [--u12-inverse on|off]

  --quick        sizes 1024,2048,4096 (default: 1024,2048,4096,6144,8192,16384,32768)
  --precision    f64, f32 or both (default both)
  --sizes        square orders to run
  --reps         timed repetitions, at least 5 (default 5; one warm-up run first)
  --nb           cuqr block size (default: cuqr::lu::gpu_default_block_size)
  --base         cuqr recursive-panel base width (default: the block size with
                 the cooperative panel, else cuqr::lu::DEFAULT_PANEL_BASE)
  --fused-rows   column-step path: one-block base panels up to this many rows
                 (default cuqr::lu::DEFAULT_FUSED_ROWS; 0 never fuses)
  --coop         cooperative multi-block panel (on, the default) or the
                 column-step kernels (off)
  --coop-rows    cooperative panel: target rows per block (default
                 cuqr::lu::DEFAULT_COOP_ROWS)
  --coop-smem    cooperative panel: slabs in shared memory where they fit (on,
                 the default) or always in global memory (off)
  --lookahead    factor the next panel on a second stream during the Schur
                 GEMM (default cuqr::lu::DEFAULT_LOOKAHEAD)
  --cluster      panels that fit in one thread-block cluster's shared memory
                 on that cluster (on, the default; sm_90 and later) or always
                 on the whole-GPU cooperative launch (off)
  --leaf-min     with the cluster panel: panels too tall for one cluster split
                 in halves down to this width to fit one (default
                 cuqr::lu::DEFAULT_CLUSTER_LEAF_MIN; the block size or more: never)
  --u12-inverse  U12 of each block step by the inverse of L11 and one GEMM (on,
                 the default) or by a TRSM across the matrix (off)

Prints one markdown table row per (precision, n): median milliseconds of cuqr and
cuSOLVER, the ratio cuSOLVER/cuqr (> 1 means cuqr is faster), GFLOP/s of cuqr
(2n^3/3 flops), the solve times (1 right-hand side), both backward errors and
cuqr's time per phase.
";

/// ‖A x − b‖₂/(‖A‖_F‖x‖₂) with the residual formed on the device (cuBLAS GEMM).
fn backward_error<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    a_fro: f64,
    x: &DevMat<T>,
    b: &DevMat<T>,
) -> cuqr::Result<f64> {
    let mut r = dup(gpu, b)?;
    gpu.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &a.view(),
        &x.view(),
        -T::ONE,
        &mut r.view_mut(),
    )?;
    let (rh, xh) = (r.to_host(gpu)?, x.to_host(gpu)?);
    Ok(rh.as_ref().norm_fro() / (a_fro * xh.as_ref().norm_fro()))
}

/// Times `solve` on a fresh device copy of `b` a run (the copy untimed); returns
/// (median ms, the last run's solution). A run's solution is freed when the next run's
/// takes its place.
fn time_solve<T: GpuScalar>(
    gpu: &Gpu,
    reps: usize,
    b: &DevMat<T>,
    mut solve: impl FnMut(&mut DevMat<T>) -> cuqr::Result<()>,
) -> cuqr::Result<(f64, DevMat<T>)> {
    let xs: RefCell<Option<DevMat<T>>> = RefCell::new(None);
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || dup(gpu, b),
        |mut x| {
            solve(&mut x)?;
            *xs.borrow_mut() = Some(x);
            Ok(())
        },
    )?;
    Ok((t.median_ms(), xs.into_inner().expect("solved")))
}

struct Row {
    n: usize,
    nb: usize,
    cuqr_ms: f64,
    cusolver_ms: f64,
    cuqr_solve_ms: f64,
    getrs_ms: f64,
    cuqr_berr: f64,
    cusolver_berr: f64,
    phases: [f64; 4],
}

fn bench_one<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    n: usize,
    reps: usize,
    params: LuParams,
) -> cuqr::Result<Row> {
    let a_host: Mat<T> = random_signed_matrix(n, n, 0xC0FFEE ^ n as u64);
    let a_fro = a_host.as_ref().norm_fro();
    let a = DevMat::from_host(gpu, a_host.as_ref())?;
    drop(a_host);
    let b_host: Mat<T> = random_signed_matrix::<T>(n, n, 0xBEEF ^ n as u64)
        .as_ref()
        .to_owned();
    let b_col = Mat::from_fn(n, 1, |i, _| b_host[(i, 0)]);
    let b = DevMat::from_host(gpu, b_col.as_ref())?;
    let nb_used = GpuLu::<T>::block_size_for(gpu, n, n, &params);

    // cuqr factorisation: a fresh copy of A per run (untimed), result kept alive
    // until the next setup so that freeing it is not timed.
    let (t_cuqr, lu) = time_keeping_last(
        gpu,
        reps,
        || dup(gpu, &a),
        |m| GpuLu::factorize_dev(gpu, m, params),
    )?;
    let (t_solve, x) = time_solve(gpu, reps, &b, |x| lu.solve_in_place_dev(x))?;
    let cuqr_berr = backward_error(gpu, &a, a_fro, &x, &b)?;
    drop((lu, x));
    // one profiled run for the phase split
    let mut pp = params;
    pp.profile = true;
    let prof = GpuLu::factorize_dev(gpu, dup(gpu, &a)?, pp)?
        .profile()
        .unwrap_or_default();

    // cuSOLVER getrf on a preallocated copy
    let work = RefCell::new(DevMat::<T>::zeros(gpu, n, n)?);
    let ipiv = RefCell::new(
        gpu.stream()
            .alloc_zeros::<i32>(n)
            .map_err(|e| cuqr::Error::driver("ipiv", e))?,
    );
    let t_getrf = time_with_setup(
        gpu,
        1,
        reps,
        || copy_into(gpu, &a, &mut work.borrow_mut()),
        |()| {
            let mut w = work.borrow_mut();
            let mut p = ipiv.borrow_mut();
            gpu.getrf(&mut w.view_mut(), &mut p.slice_mut(..))
        },
    )?;
    let (t_getrs, x) = time_solve(gpu, reps, &b, |x| {
        let (w, p) = (work.borrow(), ipiv.borrow());
        gpu.getrs(&w.view(), &p.slice(..), &mut x.view_mut())
    })?;
    let cusolver_berr = backward_error(gpu, &a, a_fro, &x, &b)?;
    Ok(Row {
        n,
        nb: nb_used,
        cuqr_ms: t_cuqr,
        cusolver_ms: t_getrf.median_ms(),
        cuqr_solve_ms: t_solve,
        getrs_ms: t_getrs,
        cuqr_berr,
        cusolver_berr,
        phases: [prof.panel_ms, prof.laswp_ms, prof.trsm_ms, prof.gemm_ms],
    })
}

fn print_row(prec: &str, r: &Row) {
    let flops = 2.0 * (r.n as f64).powi(3) / 3.0;
    println!(
        "| {prec} | {} | {} | {:.2} | {:.2} | {:.2} | {:.0} | {:.3} | {:.3} | {:.1e} | {:.1e} | {:.1} / {:.1} / {:.1} / {:.1} |",
        r.n,
        r.nb,
        r.cuqr_ms,
        r.cusolver_ms,
        r.cusolver_ms / r.cuqr_ms,
        flops / (r.cuqr_ms * 1e6),
        r.cuqr_solve_ms,
        r.getrs_ms,
        r.cuqr_berr,
        r.cusolver_berr,
        r.phases[0],
        r.phases[1],
        r.phases[2],
        r.phases[3],
    );
}

/// Runs `cuqr bench lu`.
pub fn run(args: &[String]) -> CliResult<()> {
    const CMD: &str = "bench lu";
    let o = BenchOpts::parse(
        CMD,
        args,
        &["quick"],
        &[
            "precision",
            "sizes",
            "reps",
            "nb",
            "base",
            "fused-rows",
            "coop",
            "coop-rows",
            "coop-smem",
            "lookahead",
            "cluster",
            "leaf-min",
            "u12-inverse",
        ],
    )?;
    let precs = o.precisions()?;
    let sizes = match o.usize_list("sizes")? {
        Some(s) => s,
        None if o.flag("quick") => vec![1024, 2048, 4096],
        None => vec![1024, 2048, 4096, 6144, 8192, 16384, 32768],
    };
    for &n in &sizes {
        super::check_shape_fits("sizes", n, n)?;
    }
    let reps = o.reps()?;
    let (nb, base) = (o.usize("nb")?, o.usize("base")?);
    let fused = match o.get("fused-rows") {
        None => None,
        Some(v) => Some(
            v.parse::<usize>()
                .map_err(|_| format!("--fused-rows must be a non-negative integer, not '{v}'"))?,
        ),
    };
    let on_off = |key: &str| -> CliResult<Option<bool>> {
        match o.get(key) {
            None => Ok(None),
            Some("on") => Ok(Some(true)),
            Some("off") => Ok(Some(false)),
            Some(v) => Err(format!("--{key} must be on or off, not '{v}'").into()),
        }
    };
    let mut params = LuParams::default();
    params.block_size = nb;
    params.panel_base = base;
    params.fused_rows = fused;
    params.coop_panel = on_off("coop")?;
    params.coop_smem = on_off("coop-smem")?;
    params.coop_rows = o.usize("coop-rows")?;
    params.lookahead = on_off("lookahead")?;
    params.cluster_panel = on_off("cluster")?;
    params.cluster_leaf_min = o.usize("leaf-min")?;
    params.u12_by_inverse = on_off("u12-inverse")?;
    if params.coop_rows == Some(0) {
        return Err("--coop-rows must be at least 1".into());
    }
    let gpu = Arc::new(Gpu::new(0)?);
    print_run_header(&gpu, CMD, args)?;
    println!();
    println!("| prec | n | nb | cuqr LU ms | cuSOLVER getrf ms | getrf/cuqr | cuqr GFLOP/s | cuqr solve ms | getrs ms | berr cuqr | berr cuSOLVER | cuqr panel / laswp / trsm / gemm ms |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &p in precs {
        for &n in &sizes {
            let r = if p == "f64" {
                bench_one::<f64>(&gpu, n, reps, params)?
            } else {
                bench_one::<f32>(&gpu, n, reps, params)?
            };
            print_row(p, &r);
        }
    }
    Ok(())
}
