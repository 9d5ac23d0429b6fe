//! `cuqr bench rbank`: batched R-only states (one right-hand side, n ≤ 16) on the GPU
//! (`cuqr::batch::GpuRBatch`, one thread a problem) against the CPU's batched state
//! (`cuqr::batch::BatchQr`, R only) on the same data, in one process
//! (docs/performance.md#batched-states). Wall clock of whole calls (host data in and out,
//! the GPU's uploads included), median of the repetitions after a warm-up.

use std::sync::Arc;
use std::time::Instant;

use cuqr::batch::{BatchQr, BatchRef, GpuRBatch};
use cuqr::{DevVec, FactorParams, Gpu, QPolicy};
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix_serial;

use super::common::print_run_header;
use super::stats::upper_median;
use super::BenchOpts;

const CMD: &str = "bench rbank";

/// `cuqr bench rbank --help`.
pub const HELP: &str = "\
cuqr bench rbank: batched R-only states on the GPU vs the CPU's batched state

Usage: cuqr bench rbank [--batch B] [--m M] [--n N] [--reps R] [--keep]

  --batch   problems B (default 10000)
  --m       rows of each problem (default 64)
  --n       columns, 1..16 (default 8)
  --reps    timed repetitions (default 7, after a warm-up)
  --keep    both sides keep each problem's rows (GpuRBatch::factorize_keep_data,
            BatchQr with FactorParams::keep_data) and time the calls that need them

f64, one right-hand side. Rows: factorisation, one row appended to every problem and
removed again (two calls), one window step (a row in and one out: one call on the GPU,
the same two calls on the CPU), and the solve; wall clock of the whole call (host data in
and out), median. The CPU side runs BatchQr with the R-only kind on all the machine's
cores. With --keep: factorisation, the window step by position (one call each side),
a row deleted by position and put back, a rank-one update, a column appended and
deleted again, the refactorisation (GPU) and the solve; the GPU's calls from host data
and again with every argument already in device memory (the *_device calls).
";

/// Runs `cuqr bench rbank`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(CMD, args, &["keep"], &["batch", "m", "n", "reps"])?;
    let b = o.usize("batch")?.unwrap_or(10_000);
    let m = o.usize("m")?.unwrap_or(64);
    let n = o.usize("n")?.unwrap_or(8);
    let reps = o.usize("reps")?.unwrap_or(7).max(1);
    if !(1..=16).contains(&n) || m < n + 1 || b == 0 {
        return Err(format!("{CMD}: need 1 <= n <= 16, m > n and batch >= 1").into());
    }
    let gpu = Arc::new(Gpu::new(0).map_err(|e| format!("{CMD}: {e}"))?);
    print_run_header(&gpu, CMD, args)?;
    let a = random_signed_matrix_serial::<f64>(b * m * n, 1, 21)
        .col(0)
        .to_vec();
    let y = random_signed_matrix_serial::<f64>(b * m, 1, 22)
        .col(0)
        .to_vec();
    let row = random_signed_matrix_serial::<f64>(b * n, 1, 23)
        .col(0)
        .to_vec();
    let e = random_signed_matrix_serial::<f64>(b, 1, 24).col(0).to_vec();
    fn view_of(v: &[f64], b: usize, r: usize, c: usize) -> BatchRef<'_, f64> {
        BatchRef::row_major(v, b, r, c).expect("sizes")
    }

    let time = |f: &mut dyn FnMut() -> cuqr::Result<()>| -> CliResult<f64> {
        f()?;
        let mut v = Vec::with_capacity(reps);
        for _ in 0..reps {
            let t0 = Instant::now();
            f()?;
            v.push(t0.elapsed().as_secs_f64() * 1e3);
        }
        Ok(upper_median(v))
    };
    if o.flag("keep") {
        let data = Data {
            a: &a,
            y: &y,
            row: &row,
            e: &e,
        };
        return run_kept(&gpu, (b, m, n), data, &time);
    }
    let fact =
        |a: &[f64], y: &[f64]| GpuRBatch::factorize(&gpu, view_of(a, b, m, n), view_of(y, b, m, 1));
    let g_fact = time(&mut || fact(&a, &y).map(|_| ()))?;
    let c_fact = time(&mut || {
        BatchQr::factorize(
            view_of(&a, b, m, n),
            view_of(&y, b, m, 1),
            QPolicy::None,
            FactorParams::default(),
        )
        .map(|_| ())
    })?;
    let mut g = fact(&a, &y)?;
    let mut c = BatchQr::factorize(
        view_of(&a, b, m, n),
        view_of(&y, b, m, 1),
        QPolicy::None,
        FactorParams::default(),
    )?;
    // Appending then removing the same row keeps the shapes for every repetition.
    let g_ins = time(&mut || {
        g.insert_rows(view_of(&row, b, 1, n), view_of(&e, b, 1, 1))?;
        g.delete_rows_with(view_of(&row, b, 1, n), view_of(&e, b, 1, 1))
    })?;
    let c_ins = time(&mut || {
        c.insert_rows(m, view_of(&row, b, 1, n), view_of(&e, b, 1, 1))?;
        c.delete_rows_with(m, view_of(&row, b, 1, n), view_of(&e, b, 1, 1))
            .map(|_| ())
    })?;
    let g_slide = time(&mut || {
        g.slide(
            view_of(&row, b, 1, n),
            view_of(&e, b, 1, 1),
            view_of(&row, b, 1, n),
            view_of(&e, b, 1, 1),
            1.0,
        )
        .map(|_| ())
    })?;
    // The CPU's R-only kind without kept data makes a window step as two calls.
    let c_slide = c_ins;
    let g_solve = time(&mut || g.solve().map(|_| ()))?;
    let c_solve = time(&mut || c.solve().map(|_| ()))?;
    println!();
    println!("B = {b}, m = {m}, n = {n}, f64, one right-hand side");
    println!();
    println!("| call | GPU ms | CPU (BatchQr, R only) ms | CPU / GPU |");
    println!("|---|---:|---:|---:|");
    for (what, gt, ct) in [
        ("factorize", g_fact, c_fact),
        ("row in + row out (2 calls)", g_ins, c_ins),
        ("window step (slide)", g_slide, c_slide),
        ("solve", g_solve, c_solve),
    ] {
        println!("| {what} | {gt:.3} | {ct:.3} | {:.1}x |", ct / gt);
    }
    Ok(())
}

/// The random data of a run: A, b, one row per problem and its right-hand side.
struct Data<'a> {
    a: &'a [f64],
    y: &'a [f64],
    row: &'a [f64],
    e: &'a [f64],
}

/// Times a call (upper median of the repetitions after a warm-up), in ms.
type Timer<'a> = dyn Fn(&mut dyn FnMut() -> cuqr::Result<()>) -> CliResult<f64> + 'a;

/// `--keep`: the calls of batches that keep their rows, GPU against CPU.
fn run_kept(
    gpu: &Arc<Gpu>,
    (b, m, n): (usize, usize, usize),
    d: Data<'_>,
    time: &Timer<'_>,
) -> CliResult<()> {
    fn view_of(v: &[f64], b: usize, r: usize, c: usize) -> BatchRef<'_, f64> {
        BatchRef::row_major(v, b, r, c).expect("sizes")
    }
    let params = FactorParams {
        keep_data: true,
        ..FactorParams::default()
    };
    let u = random_signed_matrix_serial::<f64>(b * m, 1, 25)
        .col(0)
        .to_vec();
    let v: Vec<f64> = random_signed_matrix_serial::<f64>(b * n, 1, 26)
        .col(0)
        .iter()
        .map(|x| 1e-3 * x)
        .collect();
    let col = random_signed_matrix_serial::<f64>(b * m, 1, 27)
        .col(0)
        .to_vec();
    let g_fact = time(&mut || {
        GpuRBatch::factorize_keep_data(gpu, view_of(d.a, b, m, n), view_of(d.y, b, m, 1))
            .map(|_| ())
    })?;
    let c_fact = time(&mut || {
        BatchQr::factorize(
            view_of(d.a, b, m, n),
            view_of(d.y, b, m, 1),
            QPolicy::None,
            params,
        )
        .map(|_| ())
    })?;
    let mut g = GpuRBatch::factorize_keep_data(gpu, view_of(d.a, b, m, n), view_of(d.y, b, m, 1))?;
    let mut c = BatchQr::factorize(
        view_of(d.a, b, m, n),
        view_of(d.y, b, m, 1),
        QPolicy::None,
        params,
    )?;
    let g_slide = time(&mut || {
        g.slide_kept(view_of(d.row, b, 1, n), view_of(d.e, b, 1, 1), 1, 1.0)
            .map(|_| ())
    })?;
    let c_slide = time(&mut || {
        c.slide(view_of(d.row, b, 1, n), view_of(d.e, b, 1, 1), 1)
            .map(|_| ())
    })?;
    // A row out by position and back in keeps the shapes for every repetition.
    let g_rows = time(&mut || {
        g.delete_rows(m - 1, 1)?;
        g.insert_rows(view_of(d.row, b, 1, n), view_of(d.e, b, 1, 1))
    })?;
    let c_rows = time(&mut || {
        c.delete_rows(m - 1, 1)?;
        c.insert_rows(m - 1, view_of(d.row, b, 1, n), view_of(d.e, b, 1, 1))
            .map(|_| ())
    })?;
    let g_rank = time(&mut || {
        g.rank_one(view_of(&u, b, m, 1), view_of(&v, b, n, 1))
            .map(|_| ())
    })?;
    let c_rank = time(&mut || {
        c.rank_one(view_of(&u, b, m, 1), view_of(&v, b, n, 1))
            .map(|_| ())
    })?;
    let (g_cols, c_cols) = if n < 16 {
        (
            time(&mut || {
                g.insert_cols(n, view_of(&col, b, m, 1))?;
                g.delete_cols(n, 1)
            })?,
            time(&mut || {
                c.insert_cols(n, view_of(&col, b, m, 1))?;
                c.delete_cols(n, 1).map(|_| ())
            })?,
        )
    } else {
        (f64::NAN, f64::NAN)
    };
    let g_refold = time(&mut || g.refactorize())?;
    let g_solve = time(&mut || g.solve().map(|_| ()))?;
    let c_solve = time(&mut || c.solve().map(|_| ()))?;
    // The same calls with every argument already in device memory.
    let up = |v: &[f64]| DevVec::from_slice(gpu, v);
    let (ad, yd, rd, ed, ud, vd, cd) = (
        up(d.a)?,
        up(d.y)?,
        up(d.row)?,
        up(d.e)?,
        up(&u)?,
        up(&v)?,
        up(&col)?,
    );
    let dims = (b, m, n);
    let k_fact =
        time(&mut || GpuRBatch::factorize_keep_data_device(gpu, (&ad, &yd), dims).map(|_| ()))?;
    let mut k = GpuRBatch::factorize_keep_data_device(gpu, (&ad, &yd), dims)?;
    let k_slide = time(&mut || k.slide_kept_device(1, (&rd, &ed), 1, 1.0).map(|_| ()))?;
    let k_rows = time(&mut || {
        k.delete_rows(m - 1, 1)?;
        k.insert_rows_device(m - 1, 1, (&rd, &ed))
    })?;
    let k_rank = time(&mut || k.rank_one_device(&ud, &vd).map(|_| ()))?;
    let k_cols = if n < 16 {
        time(&mut || {
            k.insert_cols_device(n, 1, &cd)?;
            k.delete_cols(n, 1)
        })?
    } else {
        f64::NAN
    };
    println!();
    println!("B = {b}, m = {m}, n = {n}, f64, one right-hand side, rows kept on both sides");
    println!();
    println!("| call | GPU, host data ms | GPU, device data ms | CPU (BatchQr, R only, kept data) ms | CPU / GPU (host data) |");
    println!("|---|---:|---:|---:|---:|");
    for (what, gt, kt, ct) in [
        ("factorize (rows kept)", g_fact, k_fact, c_fact),
        (
            "window step (slide, 1 in, 1 out)",
            g_slide,
            k_slide,
            c_slide,
        ),
        (
            "row out by position + row in (2 calls)",
            g_rows,
            k_rows,
            c_rows,
        ),
        ("rank_one", g_rank, k_rank, c_rank),
        ("column in + column out (2 calls)", g_cols, k_cols, c_cols),
        ("solve", g_solve, g_solve, c_solve),
    ] {
        println!("| {what} | {gt:.3} | {kt:.3} | {ct:.3} | {:.1}x |", ct / gt);
    }
    println!("| refactorize (GPU only) | {g_refold:.3} | {g_refold:.3} | – | – |");
    Ok(())
}
