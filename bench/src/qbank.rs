//! `cuqr bench qbank`: batched thin- and full-Q states on the GPU (`cuqr::batch::GpuQBatch`, a team of
//! lanes a problem) against refactorising every problem with cuBLAS `geqrfBatched` on the same
//! GPU, in one process (docs/performance.md#batched-states). Data already on the device;
//! wall clock of whole calls (each call's status download and wait included), median of the
//! repetitions after a warm-up.

use std::sync::Arc;
use std::time::Instant;

use cuqr::batch::GpuQBatch;
use cuqr::internals::gpu::{DevMat, DevVec, GeqrfBatched};
use cuqr::Gpu;
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix_serial;

use super::common::print_run_header;
use super::stats::upper_median;
use super::BenchOpts;

const CMD: &str = "bench qbank";

/// `cuqr bench qbank --help`.
pub const HELP: &str = "\
cuqr bench qbank: batched Q states on the GPU vs refactorising with cuBLAS geqrfBatched

Usage: cuqr bench qbank [--batch B] [--m M] [--n N] [--lanes L] [--reps R]
                        [--kind thin|full] [--precision f64|f32|both]

  --batch      problems B (default 10000)
  --m          rows of each problem (default 64)
  --n          columns, 1..32 (default 8)
  --lanes      lanes a problem, a power of two from n to 32 (default: chosen from m, n)
  --reps       timed repetitions (default 11, after a warm-up)
  --kind       thin (Q1, m x n; default) or full (Q, m x m: the complement carried too)
  --precision  f64, f32 or both (default both)

One right-hand side; data on the device. Rows: the factorisation with Q formed;
cuBLAS geqrfBatched on the same shapes (R and the reflectors only, no Q): the
refactorisation the updates are compared with; a rank-one update of every problem; one
row inserted at the end; one row deleted (the inserted one); a window step (insertion
then deletion, two launches); the solve. Wall clock of each whole call (status download
and wait included), median.
";

/// Runs `cuqr bench qbank`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(
        CMD,
        args,
        &[],
        &["batch", "m", "n", "lanes", "reps", "kind", "precision"],
    )?;
    let full = match o.get("kind").unwrap_or("thin") {
        "thin" => false,
        "full" => true,
        k => return Err(format!("{CMD}: --kind must be thin or full, not {k}").into()),
    };
    let b = o.usize("batch")?.unwrap_or(10_000);
    let m = o.usize("m")?.unwrap_or(64);
    let n = o.usize("n")?.unwrap_or(8);
    let reps = o.usize("reps")?.unwrap_or(11).max(1);
    let lanes = o.usize("lanes")?;
    if !(1..=32).contains(&n) || m < n + 1 || b == 0 {
        return Err(format!("{CMD}: need 1 <= n <= 32, m > n and batch >= 1").into());
    }
    let gpu = Arc::new(Gpu::new(0).map_err(|e| format!("{CMD}: {e}"))?);
    print_run_header(&gpu, CMD, args)?;
    for p in o.precisions()? {
        match *p {
            "f64" => measure::<f64>(&gpu, (b, m, n), (lanes, full), reps)?,
            _ => measure::<f32>(&gpu, (b, m, n), (lanes, full), reps)?,
        }
    }
    Ok(())
}

fn data<T: cuqr::GpuScalar>(gpu: &Gpu, len: usize, seed: u64) -> CliResult<DevVec<T>> {
    let v: Vec<T> = random_signed_matrix_serial::<f64>(len, 1, seed)
        .col(0)
        .iter()
        .map(|&x| T::from_f64(x))
        .collect();
    Ok(DevVec::from_slice(gpu, &v)?)
}

fn measure<T: cuqr::GpuScalar>(
    gpu: &Arc<Gpu>,
    (b, m, n): (usize, usize, usize),
    (lanes, full): (Option<usize>, bool),
    reps: usize,
) -> CliResult<()> {
    let factorize = |gpu: &Arc<Gpu>, ab: (&DevVec<T>, &DevVec<T>)| {
        if full {
            GpuQBatch::factorize_full_device(gpu, ab, (b, m, n))
        } else {
            GpuQBatch::factorize_device(gpu, ab, (b, m, n))
        }
    };
    let a = data::<T>(gpu, b * m * n, 31)?;
    let y = data::<T>(gpu, b * m, 32)?;
    let u = data::<T>(gpu, b * m, 33)?;
    let v = data::<T>(gpu, b * n, 34)?;
    let row = data::<T>(gpu, b * n, 35)?;
    let e = data::<T>(gpu, b, 36)?;
    let sync = || {
        gpu.stream()
            .synchronize()
            .map_err(|e| format!("{CMD}: {e}"))
    };
    let time = |f: &mut dyn FnMut() -> cuqr::Result<()>| -> CliResult<f64> {
        f()?;
        sync()?;
        let mut t = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t0 = Instant::now();
            f()?;
            sync()?;
            t.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        Ok(upper_median(t))
    };
    let fact = time(&mut || factorize(gpu, (&a, &y)).map(|_| ()))?;
    let make = || -> cuqr::Result<GpuQBatch<T>> {
        let mut bank = factorize(gpu, (&a, &y))?;
        if let Some(l) = lanes {
            bank.set_lanes_per_problem(l)?;
        }
        Ok(bank)
    };
    // cuBLAS refactorises a copy of A (column-major; the values do not matter for time).
    let mut work = a.to_vec(gpu)?;
    work.truncate(b * m * n);
    let col = cuqr::Mat::from_fn(b * m * n, 1, |i, _| work[i]);
    let source = DevMat::from_host(gpu, col.as_ref())?;
    let mut buf = DevMat::from_host(gpu, col.as_ref())?;
    let mut geqrf_times = Vec::with_capacity(reps);
    {
        let slice = buf.buf_mut();
        let mut plan = GeqrfBatched::new(gpu, slice, (b, m, n))?;
        for rep in 0..=reps {
            gpu.stream()
                .memcpy_dtod(source.buf(), plan.a_mut())
                .map_err(|e| format!("{CMD}: {e}"))?;
            sync()?;
            let t0 = Instant::now();
            plan.run(gpu)?;
            sync()?;
            if rep > 0 {
                geqrf_times.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let geqrf = upper_median(geqrf_times);
    let mut bank = make()?;
    let rank_one = time(&mut || bank.rank_one_device(&u, &v).map(|_| ()))?;
    let (mut ins, mut del) = (Vec::with_capacity(reps), Vec::with_capacity(reps));
    for rep in 0..=reps {
        let t0 = Instant::now();
        bank.insert_rows_device(m, 1, (&row, &e))?;
        sync()?;
        let t1 = Instant::now();
        bank.delete_rows(m, 1)?;
        sync()?;
        if rep > 0 {
            ins.push((t1 - t0).as_secs_f64() * 1e3);
            del.push(t1.elapsed().as_secs_f64() * 1e3);
        }
    }
    let (ins, del) = (upper_median(ins), upper_median(del));
    let slide = time(&mut || bank.slide_device(1, (&row, &e), 1.0).map(|_| ()))?;
    let solve = time(&mut || bank.solve().map(|_| ()))?;
    let dtype = if std::mem::size_of::<T>() == 8 {
        "f64"
    } else {
        "f32"
    };
    println!();
    println!(
        "B = {b}, m = {m}, n = {n}, {dtype}, {} Q, one right-hand side, data on the device, {} \
         lanes a problem (the factorisation: the default)",
        if full { "full" } else { "thin" },
        bank.lanes_per_problem()
    );
    println!();
    println!("| call | ms | geqrfBatched / this | µs a problem |");
    println!("|---|---:|---:|---:|");
    println!(
        "| cuBLAS geqrfBatched (refactorise, R only) | {geqrf:.3} | 1.0 | {:.3} |",
        geqrf * 1e3 / b as f64
    );
    for (what, t) in [
        ("factorize (Q formed)", fact),
        ("rank_one", rank_one),
        ("insert_rows (1 row)", ins),
        ("delete_rows (1 row)", del),
        ("slide (1 in, 1 out)", slide),
        ("solve", solve),
    ] {
        println!(
            "| {what} | {t:.3} | {:.1}x | {:.3} |",
            geqrf / t,
            t * 1e3 / b as f64
        );
    }
    Ok(())
}
