//! `cuqr bench small`: one small least-squares problem updated a row at a time on the GPU
//! (`cuqr::small::GpuSmallState`, one launch a step) against the general GPU state and the
//! CPU state (`cuqr::Qr`, R only with kept data, `slide` + `solve` a step) on the same data,
//! in one process (docs/performance.md#small-states).

use std::sync::Arc;
use std::time::Instant;

use cuqr::small::{GpuSmallState, SmallParams};
use cuqr::{DevMat, Device, FactorParams, Gpu, GpuScalar, Mat, MatRef, QPolicy, Qr, QrUpdate};
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix_serial;

use super::common::print_run_header;
use super::BenchOpts;

const CMD: &str = "bench small";

/// `cuqr bench small --help`.
pub const HELP: &str = "\
cuqr bench small: a window step (slide + solve) of one small problem, one launch a step

Usage: cuqr bench small [--shapes MxN,...] [--steps S] [--precision f32|f64|both]

  --shapes     window sizes (default 252x5,1000x50; n <= 64)
  --steps      steps timed on the small state (default 20000)
  --precision  f32, f64 or both (default f64)

Per step, microseconds: the small state's slide with the solution written to the device
(slide_solve) and without it, timed over S steps queued back to back and one wait at the
end; the general GPU state (Qr, R only with kept data) and the CPU state doing slide then
solve, each step waiting for its solution (min(S, 300) steps). Ratios against the small
state's slide_solve.
";

/// Runs `cuqr bench small`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(CMD, args, &[], &["shapes", "steps", "precision"])?;
    let shapes = match o.get("shapes") {
        Some(s) => parse_shapes(s)?,
        None => vec![(252, 5), (1000, 50)],
    };
    let steps = o.usize("steps")?.unwrap_or(20_000).max(10);
    let precisions = super::opts::precision_list("precision", o.get("precision").unwrap_or("f64"))?;
    let gpu = Arc::new(Gpu::new(0).map_err(|e| format!("{CMD}: {e}"))?);
    print_run_header(&gpu, CMD, args)?;
    println!(
        "| dtype | m×n | small slide+solve µs | small slide µs | GPU Qr slide+solve µs | CPU Qr slide+solve µs | vs GPU Qr | vs CPU Qr |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &p in precisions {
        for &(m, n) in &shapes {
            match p {
                "f32" => row::<f32>(&gpu, m, n, steps)?,
                _ => row::<f64>(&gpu, m, n, steps)?,
            }
        }
    }
    Ok(())
}

fn parse_shapes(s: &str) -> CliResult<Vec<(usize, usize)>> {
    s.split(',')
        .map(|t| {
            let (a, b) = t
                .split_once('x')
                .ok_or_else(|| format!("{CMD}: --shapes wants MxN,..., got {t:?}"))?;
            let (m, n) = (a.trim().parse::<usize>(), b.trim().parse::<usize>());
            match (m, n) {
                (Ok(m), Ok(n)) if (1..=64).contains(&n) && m >= n => Ok((m, n)),
                _ => Err(format!("{CMD}: {t:?} is not MxN with 1 <= N <= 64 and M >= N").into()),
            }
        })
        .collect()
}

/// One table row: the three paths on the same rows.
fn row<T: GpuScalar>(gpu: &Arc<Gpu>, m: usize, n: usize, steps: usize) -> CliResult<()> {
    let rows = m + 2 * steps + 400;
    let x: Vec<T> = random_signed_matrix_serial::<T>(rows * n, 1, 31)
        .col(0)
        .to_vec();
    let y: Vec<T> = random_signed_matrix_serial::<T>(rows, 1, 32)
        .col(0)
        .to_vec();
    let a = Mat::from_fn(m, n, |i, j| x[i * n + j]);
    let mut st = GpuSmallState::window(gpu, a.as_ref(), &y[..m], &SmallParams::default())?;
    let mut out = DevMat::<T>::zeros(gpu, n + 1, steps)?;
    let mut t_row = m;
    let mut run = |st: &mut GpuSmallState<T>,
                   out: &mut DevMat<T>,
                   count: usize,
                   solve: bool|
     -> CliResult<f64> {
        let t0 = Instant::now();
        for t in 0..count {
            let (xr, yr) = (&x[t_row * n..(t_row + 1) * n], y[t_row]);
            if solve {
                st.slide_solve(xr, yr, out, t)?;
            } else {
                st.slide(xr, yr)?;
            }
            t_row += 1;
        }
        st.sync()?;
        Ok(t0.elapsed().as_secs_f64() * 1e6 / count as f64)
    };
    run(&mut st, &mut out, 200, true)?;
    let small_solve = run(&mut st, &mut out, steps, true)?;
    let small_slide = run(&mut st, &mut out, steps, false)?;
    let rep = st.sync()?;
    if rep.refused > 0 {
        return Err(format!("{CMD}: {} steps refused on random data", rep.refused).into());
    }
    let general = |device: Device| -> CliResult<f64> {
        let b = MatRef::from_col(&y[..m]);
        let params = FactorParams {
            keep_data: true,
            ..FactorParams::default()
        };
        let mut q = Qr::factorize(device, a.as_ref(), b, QPolicy::None, params)?;
        let count = steps.min(300);
        let step = |q: &mut Qr<T>, i: usize| -> cuqr::Result<()> {
            let r = Mat::from_fn(1, n, |_, j| x[i * n + j]);
            q.slide(r.as_ref(), MatRef::from_col(&y[i..i + 1]), 1)?;
            q.solve().map(|_| ())
        };
        for i in 0..20 {
            step(&mut q, m + i)?;
        }
        let t0 = Instant::now();
        for i in 0..count {
            step(&mut q, m + 20 + i)?;
        }
        Ok(t0.elapsed().as_secs_f64() * 1e6 / count as f64)
    };
    let g = general(Device::Gpu(0))?;
    let c = general(Device::Cpu)?;
    println!(
        "| {} | {m}×{n} | {small_solve:.2} | {small_slide:.2} | {g:.1} | {c:.1} | {:.0}× | {:.1}× |",
        T::NAME,
        g / small_solve,
        c / small_solve
    );
    Ok(())
}
