//! `cuqr bench mixed`: cuqr's mixed-precision least squares
//! (docs/algorithms.md#mixed-precision: tensor-core f32 QR of an f32 copy,
//! R̃-preconditioned CG refinement in f64)
//! against cuSOLVER's f64 least squares (`geqrf` + `ormqr` + `trsm`, the baseline (b)
//! of `bench updates`) and cuSOLVER's iterative-refinement solvers (`DDgels`,
//! `DSgels`, `DHgels`, `DBgels`, `DXgels`), in the same process on the same
//! device-resident f64 problem: A = Q₁·diag(σ)·Vᵀ (Q₁, V orthonormal from cuSOLVER QR of
//! random ±[0.1, 1) matrices, σ geometric from 1 to 1/κ) and a random b. Medians of ≥ 5
//! CUDA-event timings after one warm-up; each timing is the whole solve from A and b
//! (cuqr: f32 copy, factorisation, refinement, all allocations; cuSOLVER: from a copy
//! of A, the copy not timed). Accuracy: the normwise LS backward error
//! η = ‖Aᵀr‖/(‖A‖_F(‖A‖_F‖x‖ + ‖b‖)) of every solution, computed the same way on the
//! device for all.

use std::cell::RefCell;

use cuqr::internals::gpu::irs::IrsKind;
use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::{DevMat, DevVec, Op};
use cuqr::mixed::{lstsq_mixed_gpu_phases, GemmPrecision, MixedFactor, MixedParams, MixedRoute};
use cuqr::Gpu;

use super::common::{copy_into, cusolver_ls};
use super::stats::median;
use super::BenchOpts;
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix;

/// `cuqr bench mixed --help`.
pub const HELP: &str = "\
cuqr bench mixed: mixed-precision least squares (cuqr, tensor-core QR + f64
refinement) vs cuSOLVER f64 least squares and cuSOLVER's IRS gels

Usage: cuqr bench mixed [--quick] [--shapes MxN,MxN,...] [--reps R]
                        [--precisions bf16,f16,tf32,f32] [--kappas 1e2,1e6]
                        [--routes auto,qr,gram64] [--block-size NB] [--no-irs]

  --quick    shapes 2000x300, 6000x1000 (default: 8192x1024, 16384x4096,
             65536x2048)
  --shapes   shapes to run, e.g. 8192x1024,20000x3000 (m >= n)
  --reps     timed repetitions, at least 5 (default 5; one warm-up run first)
  --precisions  cuqr GEMM precisions to run (default bf16,f16,tf32,f32)
  --kappas   condition numbers (default 1e2,1e6)
  --routes   cuqr routes to run (default auto,qr): auto = f32 Gram-Cholesky
             preconditioner first, then the f64 Gram-Cholesky one, then the
             QR, each when the one before fails or is poor; gram64 = auto
             without its f32 Gram stage; qr = the mixed QR only
  --block-size  Householder block size of cuqr's f32 factorisation (default:
             the QR's own choice for n)
  --no-irs   skip cuSOLVER's IRS gels rows

Prints one markdown table per
(shape, kappa): for each method the median milliseconds, the speed-up over
cuSOLVER f64 least squares (geqrf + ormqr + trsm; > 1 means faster), the
backward error eta of its solution, its refinement steps, and whether it meets
the bar (>= 2x faster at eta within 10x of the f64 solver's). A method that
fails (cuqr: NotConverged) shows the error instead of a time. cuqr rows add
the phase split of the same timed runs (CUDA events inside the solve, medians):
factorisation (f32 copy, QR, R̃ in f64) and refinement (preconditioner set-up,
inner CG, residuals), the inner CG steps, and the factor's precision when the
solver switched a tensor-core factor to f32 (large u_low*kappa). The GEMM
precision only matters where a QR runs.
";

const KAPPAS: [f64; 2] = [1e2, 1e6];
const PRECS: [GemmPrecision; 4] = [
    GemmPrecision::Bf16,
    GemmPrecision::F16,
    GemmPrecision::Tf32,
    GemmPrecision::F32,
];
const IRS: [IrsKind; 5] = [
    IrsKind::F64,
    IrsKind::F32,
    IrsKind::F16,
    IrsKind::Bf16,
    IrsKind::Tf32,
];

/// An orthonormal m×n basis: cuSOLVER geqrf + orgqr of a random matrix.
fn orthonormal(gpu: &Gpu, m: usize, n: usize, seed: u64) -> cuqr::Result<DevMat<f64>> {
    let mut q = DevMat::from_host(gpu, random_signed_matrix::<f64>(m, n, seed).as_ref())?;
    let mut tau = DevVec::<f64>::zeros(gpu, n)?;
    gpu.geqrf(&mut q.view_mut(), &mut tau.view_mut())?;
    gpu.orgqr(&mut q.view_mut(), n, &tau.view())?;
    Ok(q)
}

/// σ_j = κ^(−j/(n−1)), j = 0..n.
fn sigmas(n: usize, kappa: f64) -> Vec<f64> {
    (0..n)
        .map(|j| kappa.powf(-(j as f64) / (n.max(2) - 1) as f64))
        .collect()
}

/// A = Q₁·diag(σ)·Vᵀ on the device (‖A‖₂ = 1, κ₂(A) = κ; padding zero).
fn conditioned(gpu: &Gpu, m: usize, n: usize, kappa: f64, seed: u64) -> cuqr::Result<DevMat<f64>> {
    let mut q1 = orthonormal(gpu, m, n, seed)?;
    let v = orthonormal(gpu, n, n, seed ^ 0x5EED)?;
    for (j, s) in sigmas(n, kappa).into_iter().enumerate() {
        gpu.scal(s, &mut q1.col_mut(j, 0..m))?;
    }
    let mut a = DevMat::<f64>::zeros(gpu, m, n)?;
    gpu.gemm(
        Op::N,
        Op::T,
        1.0,
        &q1.view(),
        &v.view(),
        0.0,
        &mut a.view_mut(),
    )?;
    Ok(a)
}

/// η = ‖Aᵀ(b − Ax)‖₂ / (‖A‖_F(‖A‖_F‖x‖₂ + ‖b‖₂)) on the device, in f64 (x: the first
/// n entries of column 0 of `x`).
fn eta(
    gpu: &Gpu,
    a: &DevMat<f64>,
    a_fro: f64,
    b: &DevMat<f64>,
    x: &DevMat<f64>,
) -> cuqr::Result<f64> {
    let (m, n) = (a.nrows(), a.ncols());
    let mut r = DevVec::<f64>::zeros(gpu, m)?;
    let mut h = DevVec::<f64>::zeros(gpu, n)?;
    let xv = x.col(0, 0..n);
    gpu.copy(&b.col(0, 0..m), &mut r.view_mut())?;
    gpu.gemv(Op::N, -1.0, &a.view(), &xv, 1.0, &mut r.view_mut())?;
    gpu.gemv(Op::T, 1.0, &a.view(), &r.view(), 0.0, &mut h.view_mut())?;
    let (nh, nx, nb) = (
        gpu.nrm2(&h.view())?,
        gpu.nrm2(&xv)?,
        gpu.nrm2(&b.col(0, 0..m))?,
    );
    Ok(nh / (a_fro * (a_fro * nx + nb)))
}

/// One method's outcome at one point.
struct Res {
    name: String,
    ms: Option<f64>,
    eta: Option<f64>,
    iters: String,
    note: String,
    /// cuqr only: median factorisation / refinement ms and inner CG steps.
    split: Option<(f64, f64, usize)>,
}

/// What one (shape, κ) point runs.
struct PointOpts<'a> {
    reps: usize,
    precs: &'a [GemmPrecision],
    routes: &'a [MixedRoute],
    block_size: Option<usize>,
    irs: bool,
}

impl Res {
    /// A method that failed: the error instead of a time.
    fn failed(name: String, e: cuqr::Error) -> Self {
        Res {
            name,
            ms: None,
            eta: None,
            iters: "–".into(),
            note: format!("error: {e}"),
            split: None,
        }
    }
}

/// One point's problem on the device: A, b and ‖A‖_F.
struct Problem {
    a: DevMat<f64>,
    b: DevMat<f64>,
    a_fro: f64,
}

impl Problem {
    /// η of the solution `x` ([`eta`]).
    fn eta(&self, gpu: &Gpu, x: &DevMat<f64>) -> cuqr::Result<f64> {
        eta(gpu, &self.a, self.a_fro, &self.b, x)
    }
}

/// Every method at one (shape, κ) point: the cuSOLVER f64 baseline first, then
/// cuSOLVER's IRS solvers, then cuqr's routes and precisions.
fn bench_point(
    gpu: &Gpu,
    m: usize,
    n: usize,
    kappa: f64,
    o: &PointOpts<'_>,
) -> cuqr::Result<Vec<Res>> {
    let seed = 0xA11CE ^ (m as u64) << 20 ^ n as u64;
    let a = conditioned(gpu, m, n, kappa, seed)?;
    let b = DevMat::from_host(gpu, random_signed_matrix::<f64>(m, 1, seed ^ 0xB).as_ref())?;
    let a_fro = gpu.nrm2(&a.buf().slice(..))?;
    let pb = Problem { a, b, a_fro };
    let work = RefCell::new(DevMat::<f64>::zeros(gpu, m, n)?);
    let mut out = vec![cusolver_f64(gpu, &pb, &work, o.reps)?];
    let x = RefCell::new(DevMat::<f64>::zeros(gpu, n, 1)?);
    let irs: &[IrsKind] = if o.irs { &IRS } else { &[] };
    for &kind in irs {
        out.push(cusolver_irs(gpu, &pb, &work, &x, kind, o.reps)?);
    }
    drop(work);
    // cuqr mixed-precision LS, device resident; the phase split from the same runs.
    for &route in o.routes {
        for &p in o.precs {
            let params = MixedParams {
                precision: p,
                route,
                block_size: o.block_size,
                ..MixedParams::default()
            };
            out.push(cuqr_mixed(gpu, &pb, &params, o.reps)?);
        }
    }
    Ok(out)
}

/// cuSOLVER f64 least squares: geqrf + ormqr (Qᵀb) + trsm, from a copy of A and b.
fn cusolver_f64(
    gpu: &Gpu,
    pb: &Problem,
    work: &RefCell<DevMat<f64>>,
    reps: usize,
) -> cuqr::Result<Res> {
    let (m, n) = (pb.a.nrows(), pb.a.ncols());
    let d = RefCell::new(DevMat::<f64>::zeros(gpu, m, 1)?);
    let tau = RefCell::new(DevVec::<f64>::zeros(gpu, n)?);
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || {
            copy_into(gpu, &pb.a, &mut work.borrow_mut())?;
            copy_into(gpu, &pb.b, &mut d.borrow_mut())
        },
        |()| {
            let (mut w, mut dd, mut tv) = (work.borrow_mut(), d.borrow_mut(), tau.borrow_mut());
            cusolver_ls(gpu, &mut w, &mut tv, &mut dd)
        },
    )?;
    let eta = pb.eta(gpu, &d.borrow())?;
    Ok(Res {
        name: "cuSOLVER f64 geqrf+ormqr+trsm".into(),
        ms: Some(t.median_ms()),
        eta: Some(eta),
        iters: "–".into(),
        note: String::new(),
        split: None,
    })
}

/// cuSOLVER's IRS gels of `kind`, from a copy of A (the copy untimed), solution in `x`.
fn cusolver_irs(
    gpu: &Gpu,
    pb: &Problem,
    work: &RefCell<DevMat<f64>>,
    x: &RefCell<DevMat<f64>>,
    kind: IrsKind,
    reps: usize,
) -> cuqr::Result<Res> {
    let iter = std::cell::Cell::new(0i32);
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || copy_into(gpu, &pb.a, &mut work.borrow_mut()),
        |()| {
            let it = gpu.irs_gels(kind, &mut work.borrow_mut(), &pb.b, &mut x.borrow_mut())?;
            iter.set(it);
            Ok(())
        },
    );
    let name = format!("cuSOLVER IRS {}", kind.routine());
    Ok(match t {
        Ok(t) => Res {
            name,
            ms: Some(t.median_ms()),
            eta: Some(pb.eta(gpu, &x.borrow())?),
            iters: iter.get().to_string(),
            note: if iter.get() < 0 {
                "fell back to f64".into()
            } else {
                String::new()
            },
            split: None,
        },
        Err(e) => Res::failed(name, e),
    })
}

/// cuqr's mixed-precision least squares with `params`, device resident; the phase
/// split (factorisation, refinement) from the same timed runs.
fn cuqr_mixed(gpu: &Gpu, pb: &Problem, params: &MixedParams, reps: usize) -> cuqr::Result<Res> {
    let last = RefCell::new(None);
    let phases = RefCell::new(Vec::new());
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || Ok(()),
        |()| {
            let sol = lstsq_mixed_gpu_phases(gpu, &pb.a, &pb.b, params)?;
            if let Some(ph) = sol.phases {
                phases.borrow_mut().push((ph.factor_ms, ph.refine_ms));
            }
            *last.borrow_mut() = Some(sol);
            Ok(())
        },
    );
    let name = format!(
        "cuqr mixed {:?} {}",
        params.precision,
        route_name(params.route)
    );
    let t = match t {
        Ok(t) => t,
        Err(e) => return Ok(Res::failed(name, e)),
    };
    let sol = last
        .borrow_mut()
        .take()
        .expect("a timed run stored its solution");
    // The warm-up run's split is the first entry: leave it out.
    let ph = phases.borrow();
    let timed = &ph[ph.len().saturating_sub(reps)..];
    let f = median(timed.iter().map(|x| x.0).collect());
    let r = median(timed.iter().map(|x| x.1).collect());
    let note = format!(
        "own η {:.1e}, R̃ from {}",
        sol.backward_error,
        match sol.factor {
            MixedFactor::GramCholesky => "Gram-Cholesky".to_string(),
            MixedFactor::GramCholeskyF64 => "f64 Gram-Cholesky".to_string(),
            MixedFactor::Qr(q) => format!("QR {q:?}"),
            other => format!("{other:?}"),
        }
    );
    Ok(Res {
        name,
        ms: Some(t.median_ms()),
        eta: Some(pb.eta(gpu, &sol.x)?),
        iters: sol.iterations.to_string(),
        note,
        split: Some((f, r, sol.inner_steps)),
    })
}

fn route_name(r: MixedRoute) -> &'static str {
    match r {
        MixedRoute::Qr => "qr",
        MixedRoute::GramF64 => "gram64",
        _ => "auto",
    }
}

fn parse_routes(s: &str) -> CliResult<Vec<MixedRoute>> {
    s.split(',')
        .map(|t| match t.trim() {
            "auto" => Ok(MixedRoute::Auto),
            "qr" => Ok(MixedRoute::Qr),
            "gram64" => Ok(MixedRoute::GramF64),
            other => Err(format!("--routes: '{other}' is not auto, qr or gram64").into()),
        })
        .collect()
}

fn parse_shapes(s: &str) -> CliResult<Vec<(usize, usize)>> {
    s.split(',')
        .map(|t| {
            let (m, n) = t
                .trim()
                .split_once('x')
                .ok_or_else(|| format!("--shapes: '{t}' is not MxN"))?;
            match (m.parse::<usize>(), n.parse::<usize>()) {
                (Ok(m), Ok(n)) if n > 0 && m >= n => {
                    super::check_shape_fits("shapes", m, n)?;
                    Ok((m, n))
                }
                _ => Err(format!("--shapes: '{t}' needs integers m >= n > 0").into()),
            }
        })
        .collect()
}

fn parse_precisions(s: &str) -> CliResult<Vec<GemmPrecision>> {
    s.split(',')
        .map(|t| match t.trim() {
            "bf16" => Ok(GemmPrecision::Bf16),
            "f16" => Ok(GemmPrecision::F16),
            "tf32" => Ok(GemmPrecision::Tf32),
            "f32" => Ok(GemmPrecision::F32),
            other => Err(format!("--precisions: '{other}' is not bf16, f16, tf32 or f32").into()),
        })
        .collect()
}

fn parse_kappas(s: &str) -> CliResult<Vec<f64>> {
    s.split(',')
        .map(|t| match t.trim().parse::<f64>() {
            Ok(k) if k.is_finite() && k >= 1.0 => Ok(k),
            _ => Err(format!("--kappas: '{t}' is not a number >= 1").into()),
        })
        .collect()
}

/// `cuqr bench mixed [...]`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(
        "bench mixed",
        args,
        &["quick", "no-irs"],
        &[
            "shapes",
            "reps",
            "precisions",
            "kappas",
            "block-size",
            "routes",
        ],
    )?;
    let block_size = o.usize("block-size")?;
    if block_size == Some(0) {
        return Err("--block-size must be at least 1".into());
    }
    let reps = o.usize("reps")?.unwrap_or(5);
    if reps < 5 {
        return Err(format!("--reps must be at least 5 (a median of ≥ 5), not {reps}").into());
    }
    let shapes = match o.get("shapes") {
        Some(s) => parse_shapes(s)?,
        None if o.flag("quick") => vec![(2000, 300), (6000, 1000)],
        None => vec![(8192, 1024), (16384, 4096), (65536, 2048)],
    };
    let precs = match o.get("precisions") {
        Some(s) => parse_precisions(s)?,
        None => PRECS.to_vec(),
    };
    let routes = match o.get("routes") {
        Some(s) => parse_routes(s)?,
        None => vec![MixedRoute::Auto, MixedRoute::Qr],
    };
    let kappas = match o.get("kappas") {
        Some(s) => parse_kappas(s)?,
        None => KAPPAS.to_vec(),
    };
    let gpu = Gpu::new(0).map_err(|e| format!("bench mixed needs a GPU: {e}"))?;
    println!("device: {}", gpu.describe()?);
    println!("reps: {reps} (median), 1 warm-up; η = ‖Aᵀr‖/(‖A‖_F(‖A‖_F‖x‖+‖b‖))\n");
    for (m, n) in shapes {
        for &kappa in &kappas {
            let po = PointOpts {
                reps,
                precs: &precs,
                routes: &routes,
                block_size,
                irs: !o.flag("no-irs"),
            };
            let rows = bench_point(&gpu, m, n, kappa, &po)?;
            let base_ms = rows[0].ms.expect("the f64 baseline has a time");
            let base_eta = rows[0].eta.expect("the f64 baseline has an η");
            println!("### {m}×{n}, κ = {kappa:.0e}\n");
            println!(
                "| method | ms | speed-up | η | steps | bar | factor ms | refine ms | CG steps | note |"
            );
            println!("|---|---:|---:|---:|---:|---|---:|---:|---:|---|");
            for r in &rows {
                let sp = r.ms.map(|t| base_ms / t);
                let bar = match (sp, r.eta) {
                    (Some(s), Some(e)) if r.name.starts_with("cuqr") => {
                        let acc = e <= 10.0 * base_eta;
                        if s >= 2.0 && acc {
                            "met".to_string()
                        } else {
                            format!("missed ({})", if acc { "speed" } else { "accuracy" })
                        }
                    }
                    (None, _) if r.name.starts_with("cuqr") => "missed (failed)".into(),
                    _ => String::new(),
                };
                let (f, rf, cg) = match r.split {
                    Some((f, rf, cg)) => (format!("{f:.2}"), format!("{rf:.2}"), cg.to_string()),
                    None => ("–".into(), "–".into(), "–".into()),
                };
                println!(
                    "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.name,
                    r.ms.map_or("–".into(), |t| format!("{t:.2}")),
                    sp.map_or("–".into(), |s| format!("{s:.2}×")),
                    r.eta.map_or("–".into(), |e| format!("{e:.1e}")),
                    r.iters,
                    bar,
                    f,
                    rf,
                    cg,
                    r.note
                );
            }
            println!();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_parse_and_reject() {
        assert_eq!(
            parse_shapes("8192x1024, 100x100").unwrap(),
            vec![(8192, 1024), (100, 100)]
        );
        for bad in ["8192", "10x20", "ax3", "5x0", ""] {
            assert!(parse_shapes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn precisions_and_kappas_parse_and_reject() {
        assert_eq!(
            parse_precisions("bf16, f32").unwrap(),
            vec![GemmPrecision::Bf16, GemmPrecision::F32]
        );
        assert!(parse_precisions("fp8").is_err());
        assert_eq!(
            parse_routes("qr, auto,gram64").unwrap(),
            vec![MixedRoute::Qr, MixedRoute::Auto, MixedRoute::GramF64]
        );
        assert!(parse_routes("gram").is_err());
        assert_eq!(parse_kappas("1e2,1e6").unwrap(), vec![1e2, 1e6]);
        for bad in ["0.5", "x", "inf", ""] {
            assert!(parse_kappas(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sigmas_span_kappa() {
        let s = sigmas(5, 1e4);
        assert_eq!(s[0], 1.0);
        assert!((s[4] - 1e-4).abs() < 1e-16);
        assert!(s.windows(2).all(|w| w[1] < w[0]));
    }

    #[test]
    fn options_are_validated() {
        let a = cuqr_cli::cli::strs;
        assert!(run(&a(&["--reps", "3"])).is_err());
        assert!(run(&a(&["--shapes", "10x20"])).is_err());
        assert!(run(&a(&["--shapes", "4294967296x4294967296"])).is_err());
        assert!(run(&a(&["--nope"])).is_err());
        assert!(run(&a(&["--precisions", "fp8"])).is_err());
        assert!(run(&a(&["--kappas", "0"])).is_err());
        assert!(run(&a(&["--block-size", "0"])).is_err());
        assert!(run(&a(&["--routes", "x"])).is_err());
    }
}
