//! `cuqr bench chains`: the latency of each dependent chain in cuqr's updates, as time
//! per dependent step at the seeds' sizes (docs/performance.md#chain-latency). Each
//! chain runs alone on random device-resident data (never zero; a fresh copy of the
//! input before each run, untimed), timed with CUDA events (one warm-up, median of ≥ 5).
//!
//! Steps: a reflector for the row-insertion and band chains (n), a column for the QR and
//! LU panels (64), a chain (one strip column or one deleted row, p) for the Givens
//! generates.

use std::cell::RefCell;
use std::sync::Arc;

use cuqr::internals::chains::{
    band_chain, qr_panel, reflector_chain, ChainShape, ChainTuning, PanelKernel, PanelOut,
};
use cuqr::internals::gpu::timing::{time_with_setup, Timing};
use cuqr::internals::gpu::two_phase_launch::RotList;
use cuqr::internals::gpu::{DevMat, DevVec, GpuScalar};
use cuqr::lu::{GpuLu, LuParams};
use cuqr::{Gpu, Mat};

use super::common::{copy_into, print_run_header, random_dev};
use super::stats::upper_median;
use super::BenchOpts;
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix_serial;

/// `cuqr bench chains --help`.
pub const HELP: &str = "\
cuqr bench chains: time per dependent step of each chain in the updates

Usage: cuqr bench chains [--quick] [--precision f64|f32|both] [--reps R]
                         [--cpb C1,C2,..]

  --quick        the quick grid's sizes only (m = 1200, n = 500)
  --precision    f64, f32 or both (default both)
  --reps         timed repetitions, at least 5 (default 5, after 1 warm-up)
  --cpb          columns per block of the reflector and band chains to time beside
                 the planned launch (tuning runs; a shape whose blocks cannot all be
                 resident is reported as failed)

Chains: the row-insertion reflector chain (a step: one reflector), the band chain of
column deletion (one reflector), the QR panel (one column, one-block kernel up to 384
rows, else cooperative), the LU panel (one column, from the LU's phase times), the
Givens generates of column insertion (one strip column) and of row deletion (one row).
";

/// Prints one row: chain, sizes, the launch, median ms, steps, µs a step.
fn row(prec: &str, chain: &str, size: &str, launch: &str, ms: f64, steps: usize) {
    let us = 1e3 * ms / steps as f64;
    println!("| {prec} | {chain} | {size} | {launch} | {ms:.3} | {steps} | {us:.2} |");
}

fn shape_text(s: ChainShape) -> String {
    format!("{} a block, {} blocks", s.cpb, s.blocks)
}

/// A random n×n upper triangular matrix (zeros below the diagonal).
fn upper<T: GpuScalar>(n: usize, seed: u64) -> Mat<T> {
    let mut r = random_signed_matrix_serial::<T>(n, n, seed);
    for j in 0..n {
        for i in j + 1..n {
            r[(i, j)] = T::zero();
        }
    }
    r
}

/// A random (n+p)×n band: column c nonzero in rows 0..=c+p only.
fn band<T: GpuScalar>(n: usize, p: usize, seed: u64) -> Mat<T> {
    let mut b = random_signed_matrix_serial::<T>(n + p, n, seed);
    for j in 0..n {
        for i in j + p + 1..n + p {
            b[(i, j)] = T::zero();
        }
    }
    b
}

/// The tuning variants to time: the planned launch, then each `--cpb`.
fn tunings(cpbs: &[usize]) -> Vec<ChainTuning> {
    let mut v = vec![ChainTuning::default()];
    v.extend(cpbs.iter().map(|&c| ChainTuning { cpb: Some(c) }));
    v
}

/// Prints the row of one timed chain launch: its time, or that the sizes take the
/// blocked path, or the launch's error (a tuned shape that cannot be resident).
fn report(
    prec: &str,
    chain: &str,
    size: &str,
    n: usize,
    tune: ChainTuning,
    t: cuqr::Result<Timing>,
    shape: Option<ChainShape>,
) {
    match (t, shape) {
        (Ok(t), Some(s)) => row(prec, chain, size, &shape_text(s), t.median_ms(), n),
        (Ok(_), None) => println!("| {prec} | {chain} | {size} | blocked path | – | {n} | – |"),
        (Err(e), _) => println!("| {prec} | {chain} | {size} | {tune:?}: {e} | – | {n} | – |"),
    }
}

/// The row-insertion reflector chain at n columns and p new rows (one right-hand side).
fn reflector<T: GpuScalar>(
    gpu: &Gpu,
    prec: &str,
    n: usize,
    p: usize,
    reps: usize,
    tunes: &[ChainTuning],
) -> cuqr::Result<()> {
    let r0 = DevMat::from_host(gpu, upper::<T>(n, 1).as_ref())?;
    let d0 = random_dev::<T>(gpu, n, 1, 2)?;
    let u0 = random_dev::<T>(gpu, p, n, 3)?;
    let e0 = random_dev::<T>(gpu, p, 1, 4)?;
    let work = RefCell::new((
        DevMat::<T>::zeros(gpu, n, n)?,
        DevMat::<T>::zeros(gpu, n, 1)?,
        DevMat::<T>::zeros(gpu, p, n)?,
        DevMat::<T>::zeros(gpu, p, 1)?,
    ));
    let size = format!("n={n} p={p}");
    for &tune in tunes {
        let shape = RefCell::new(None);
        let reset = || {
            let mut w = work.borrow_mut();
            copy_into(gpu, &r0, &mut w.0)?;
            copy_into(gpu, &d0, &mut w.1)?;
            copy_into(gpu, &u0, &mut w.2)?;
            copy_into(gpu, &e0, &mut w.3)
        };
        let t = time_with_setup(gpu, 1, reps, reset, |()| {
            let mut w = work.borrow_mut();
            let (r, d, u, e) = &mut *w;
            *shape.borrow_mut() = reflector_chain(gpu, r, d, u, e, tune)?;
            Ok(())
        });
        report(
            prec,
            "reflector chain",
            &size,
            n,
            tune,
            t,
            shape.into_inner(),
        );
    }
    Ok(())
}

/// The band chain of column deletion: n band columns, p sub-diagonals.
fn band_run<T: GpuScalar>(
    gpu: &Gpu,
    prec: &str,
    n: usize,
    p: usize,
    reps: usize,
    tunes: &[ChainTuning],
) -> cuqr::Result<()> {
    let b0 = DevMat::from_host(gpu, band::<T>(n, p, 5).as_ref())?;
    let d0 = random_dev::<T>(gpu, n + p, 1, 6)?;
    let work = RefCell::new((
        DevMat::<T>::zeros(gpu, n + p, n)?,
        DevMat::<T>::zeros(gpu, n + p, 1)?,
        DevMat::<T>::zeros(gpu, p, n)?,
    ));
    let size = format!("n={n} p={p}");
    for &tune in tunes {
        let shape = RefCell::new(None);
        let reset = || {
            let mut w = work.borrow_mut();
            copy_into(gpu, &b0, &mut w.0)?;
            copy_into(gpu, &d0, &mut w.1)
        };
        let t = time_with_setup(gpu, 1, reps, reset, |()| {
            let mut w = work.borrow_mut();
            let (b, d, v) = &mut *w;
            *shape.borrow_mut() = band_chain(gpu, b, d, v, tune)?;
            Ok(())
        });
        report(prec, "band chain", &size, n, tune, t, shape.into_inner());
    }
    Ok(())
}

/// One QR panel of rows×64.
fn panel<T: GpuScalar>(gpu: &Gpu, prec: &str, rows: usize, reps: usize) -> cuqr::Result<()> {
    let jb = 64;
    let a0 = random_dev::<T>(gpu, rows, jb, 7)?;
    let a = RefCell::new(DevMat::<T>::zeros(gpu, rows, jb)?);
    let mut out = PanelOut::<T>::new(gpu, rows, jb)?;
    let mut kernel = PanelKernel::Cooperative;
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || copy_into(gpu, &a0, &mut a.borrow_mut()),
        |()| {
            kernel = qr_panel(gpu, &mut a.borrow_mut(), &mut out, rows <= 384)?;
            Ok(())
        },
    )?;
    let launch = match kernel {
        PanelKernel::OneBlock => "one block (small_panel_qr)",
        PanelKernel::Cooperative => "cooperative (fused_panel_qr)",
    };
    row(
        prec,
        "QR panel",
        &format!("{rows}×{jb}"),
        launch,
        t.median_ms(),
        jb,
    );
    Ok(())
}

/// The LU of one m×64 panel: its panel phase per column (median of `reps` profiled runs).
fn lu_panel<T: GpuScalar>(gpu: &Arc<Gpu>, prec: &str, m: usize, reps: usize) -> cuqr::Result<()> {
    let jb = 64;
    let a0 = random_dev::<T>(gpu, m, jb, 8)?;
    let mut params = LuParams::default();
    params.profile = true;
    params.block_size = Some(jb);
    let mut samples = Vec::with_capacity(reps);
    for i in 0..=reps {
        let mut a = DevMat::<T>::zeros(gpu, m, jb)?;
        copy_into(gpu, &a0, &mut a)?;
        let lu = GpuLu::factorize_dev(gpu, a, params)?;
        let prof = lu.profile().expect("profiled");
        if i > 0 {
            samples.push(prof.panel_ms);
        }
    }
    let ms = upper_median(samples);
    row(
        prec,
        "LU panel",
        &format!("{m}×{jb}"),
        "panel phase of GpuLu",
        ms,
        jb,
    );
    Ok(())
}

/// The Givens generate of column insertion's strip: p chains over h rows.
fn gen_strip<T: GpuScalar>(
    gpu: &Gpu,
    prec: &str,
    h: usize,
    p: usize,
    reps: usize,
) -> cuqr::Result<()> {
    let mut list = RotList::<T>::with_capacity(gpu, p * h)?;
    let x0 = random_dev::<T>(gpu, h + p, p, 9)?;
    let xs = RefCell::new(DevMat::<T>::zeros(gpu, h + p, p)?);
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || copy_into(gpu, &x0, &mut xs.borrow_mut()),
        |()| gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list),
    )?;
    let size = format!("h={h} p={p}");
    row(
        prec,
        "Givens generate, strip",
        &size,
        "a block a chain",
        t.median_ms(),
        p,
    );
    Ok(())
}

/// The Givens generate of row deletion: p rows of Qᵀ over m entries.
fn gen_block<T: GpuScalar>(
    gpu: &Gpu,
    prec: &str,
    m: usize,
    p: usize,
    reps: usize,
) -> cuqr::Result<()> {
    let z0 = random_dev::<T>(gpu, p, m, 10)?;
    let mut z = DevVec::<T>::zeros(gpu, p * m)?;
    let mut list = RotList::<T>::with_capacity(gpu, p * m)?;
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || Ok(()),
        |()| gpu.two_phase_gen_block(&z0.view(), &mut z, &mut list),
    )?;
    let size = format!("m={m} p={p}");
    row(
        prec,
        "Givens generate, rows",
        &size,
        "a block a chain",
        t.median_ms(),
        p,
    );
    Ok(())
}

/// Every chain of one precision.
fn bench<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    prec: &str,
    quick: bool,
    reps: usize,
    tunes: &[ChainTuning],
) -> cuqr::Result<()> {
    // (n, p): the quick grid's row insertion; BS row insertion; AR-p n = 1000 and 2000.
    let rows: &[(usize, usize)] = if quick {
        &[(500, 20), (500, 100)]
    } else {
        &[(500, 20), (500, 100), (1000, 100), (1000, 200), (2000, 100)]
    };
    for &(n, p) in rows {
        reflector::<T>(gpu, prec, n, p, reps, tunes)?;
    }
    // (band columns, p): the quick grid's deletion at k0 = 0; BS; RC-k k0 = 1500, p = 100.
    let bands: &[(usize, usize)] = if quick {
        &[(480, 20)]
    } else {
        &[(480, 20), (1000, 200), (1400, 100)]
    };
    for &(n, p) in bands {
        band_run::<T>(gpu, prec, n, p, reps, tunes)?;
    }
    // Panel rows: stacked row-insertion panels (64 + p), column insertion's blocks.
    let panels: &[usize] = if quick {
        &[84, 1200]
    } else {
        &[164, 264, 1200, 3000, 8000]
    };
    for &r in panels {
        panel::<T>(gpu, prec, r, reps)?;
    }
    let lus: &[usize] = if quick { &[2000] } else { &[2000, 8000, 32000] };
    for &m in lus {
        lu_panel::<T>(gpu, prec, m, reps)?;
    }
    // Strips (h = n − k0, p): quick grid k0 = 0; AC-k3 k0 = 0; AC-stage k0 = 500.
    let strips: &[(usize, usize)] = if quick {
        &[(500, 20)]
    } else {
        &[(500, 20), (3000, 200), (5500, 200)]
    };
    for &(h, p) in strips {
        gen_strip::<T>(gpu, prec, h, p, reps)?;
    }
    // Row deletion (m, p): the quick grid; RR-seq; RR-n.
    let dels: &[(usize, usize)] = if quick {
        &[(1200, 20)]
    } else {
        &[
            (1200, 20),
            (2000, 20),
            (2000, 100),
            (6000, 100),
            (12000, 100),
        ]
    };
    for &(m, p) in dels {
        gen_block::<T>(gpu, prec, m, p, reps)?;
    }
    Ok(())
}

/// Runs `cuqr bench chains`.
pub fn run(args: &[String]) -> CliResult<()> {
    const CMD: &str = "bench chains";
    let o = BenchOpts::parse(CMD, args, &["quick"], &["precision", "reps", "cpb"])?;
    let precs = o.precisions()?;
    let reps = o.reps()?;
    let cpbs = o.usize_list("cpb")?.unwrap_or_default();
    let tunes = tunings(&cpbs);
    let gpu = Arc::new(Gpu::new(0)?);
    print_run_header(&gpu, CMD, args)?;
    println!();
    println!("| prec | chain | size | launch | median ms | steps | µs a step |");
    println!("|---|---|---|---|---:|---:|---:|");
    for &p in precs {
        if p == "f64" {
            bench::<f64>(&gpu, p, o.flag("quick"), reps, &tunes)?;
        } else {
            bench::<f32>(&gpu, p, o.flag("quick"), reps, &tunes)?;
        }
    }
    Ok(())
}
