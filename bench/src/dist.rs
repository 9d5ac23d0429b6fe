//! `cuqr bench dist`: the distributed state on 1, 2, 4… GPUs of one host (one process
//! driving them all): strong scaling of the TSQR factorisation (one m×n problem) and weak
//! scaling of the factorisation and of one window step (m_g rows a GPU), with the
//! factorisation's split into local QR, all-gather and combine (docs/scaling.md).

use std::sync::Arc;
use std::time::Instant;

use cuqr::distributed::{Combine, DistGroup, DistQr};
use cuqr::internals::gpu::DevMat;
use cuqr::{FactorParams, Gpu, Mat, QPolicy};

use super::common::print_dated_run_header;
use super::stats::upper_median;
use super::BenchOpts;
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix;

const CMD: &str = "bench dist";

/// `cuqr bench dist --help`.
pub const HELP: &str = "\
cuqr bench dist: the row-distributed state over the GPUs of this host (NCCL)

Usage: cuqr bench dist [--gpus 1,2,4] [--m M] [--weak MG] [--n N] [--step P]
                       [--steps S] [--reps R] [--quick] [--combine C] [--parts LIST]

Strong scaling: one M x N f64 factorisation (TSQR: local QR, all-gather of the
R-factors, stacked QR) on each GPU count. Weak scaling: MG rows a GPU, the
factorisation and one window step (P rows in on one GPU, the oldest P out).
Times are wall-clock medians with every device synchronised; the split is local
QR (compute), all-gather (NCCL) and combine (stacked QR and broadcast).

Options:
  --gpus LIST   GPU counts (default 1,2,4; counts above the devices present are skipped)
  --m M         rows of the strong-scaling problem (default 8000000)
  --weak MG     rows a GPU of the weak-scaling problems (default 4000000)
  --n N         columns (default 512)
  --step P      rows a window step (default 1000)
  --steps S     window steps timed (default 20)
  --reps R      factorisation repetitions (default 3)
  --quick       M = 400000, MG = 200000, N = 128, 2 repetitions
  --combine C   auto (default), tree or all-gather: how the factorisations combine
                the ranks' R-factors (docs/scaling.md#the-tree-combine)
  --parts LIST  also time the combine alone on these counts of logical partitions
                of GPU 0, sharing one device handle and with handles of their own
                (the last table times it on the GPU counts too)

Keep NCCL_NVLS_ENABLE=0 (NVLink multicast off) on shared machines.
";

/// Device blocks of `rows` rows (A and b) made from one random host tile copied down the
/// rows (the values matter only for the rank, which the tile settles).
fn blocks(
    gpu: &Arc<Gpu>,
    tile: &(DevMat<f64>, DevMat<f64>),
    rows: usize,
) -> cuqr::Result<(DevMat<f64>, DevMat<f64>)> {
    let (ta, tb) = tile;
    let t = ta.nrows();
    let (n, q) = (ta.ncols(), tb.ncols());
    let mut a = DevMat::<f64>::zeros(gpu, rows, n)?;
    let mut b = DevMat::<f64>::zeros(gpu, rows, q)?;
    let mut r0 = 0;
    while r0 < rows {
        let len = t.min(rows - r0);
        gpu.panel_copy(&ta.block(0, 0, len, n), &mut a.block_mut(r0, 0, len, n))?;
        gpu.panel_copy(&tb.block(0, 0, len, q), &mut b.block_mut(r0, 0, len, q))?;
        r0 += len;
    }
    Ok((a, b))
}

/// Median factorisation times (total, local, all-gather, combine) of `rows_per` rows on each
/// of `gpus`.
fn time_factorize(
    group: &DistGroup,
    tiles: &[&(DevMat<f64>, DevMat<f64>)],
    rows_per: &[usize],
    reps: usize,
) -> cuqr::Result<[f64; 4]> {
    let gpus = group.gpus();
    let mut runs: Vec<[f64; 4]> = Vec::new();
    for _ in 0..reps + 1 {
        let bl: Vec<_> = gpus
            .iter()
            .zip(tiles)
            .zip(rows_per)
            .map(|((g, t), &r)| blocks(g, t, r))
            .collect::<cuqr::Result<_>>()?;
        for g in gpus {
            g.synchronize()?;
        }
        let t0 = Instant::now();
        let (st, t) =
            DistQr::factorize_in_dev_timed(group, bl, QPolicy::None, FactorParams::default())?;
        let total = t0.elapsed().as_secs_f64() * 1e3;
        drop(st);
        runs.push([total, t.local_ms, t.comm_ms, t.combine_ms]);
    }
    runs.remove(0);
    let mut out = [0.0; 4];
    for (k, o) in out.iter_mut().enumerate() {
        *o = upper_median(runs.iter().map(|r| r[k]).collect());
    }
    Ok(out)
}

/// Median wall time of one window step (p rows in, p out) on a weak-scaling state.
fn time_window(
    group: &DistGroup,
    tiles: &[(DevMat<f64>, DevMat<f64>)],
    rows_per: usize,
    p: usize,
    steps: usize,
) -> cuqr::Result<f64> {
    let gpus = group.gpus();
    let n = tiles[0].0.ncols();
    let bl: Vec<_> = gpus
        .iter()
        .zip(tiles)
        .map(|(g, t)| blocks(g, t, rows_per))
        .collect::<cuqr::Result<_>>()?;
    let keep = FactorParams {
        keep_data: true,
        ..FactorParams::default()
    };
    let (mut st, _) = DistQr::factorize_in_dev_timed(group, bl, QPolicy::None, keep)?;
    let rows: Vec<Mat<f64>> = (0..4)
        .map(|k| random_signed_matrix::<f64>(p, n, 90 + k))
        .collect();
    let rhs: Vec<Mat<f64>> = (0..4)
        .map(|k| random_signed_matrix::<f64>(p, 1, 95 + k))
        .collect();
    let mut times = Vec::new();
    for s in 0..steps + 2 {
        let t0 = Instant::now();
        st.slide(rows[s % 4].as_ref(), rhs[s % 4].as_ref(), p)?;
        st.synchronize()?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    times.drain(..2);
    Ok(upper_median(times))
}

/// Runs `cuqr bench dist`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(
        CMD,
        args,
        &["quick"],
        &[
            "gpus", "m", "weak", "n", "step", "steps", "reps", "combine", "parts",
        ],
    )?;
    let combine = match o.get("combine") {
        None | Some("auto") => Combine::Auto,
        Some("tree") => Combine::Tree,
        Some("all-gather") => Combine::AllGather,
        Some(c) => {
            return Err(format!("{CMD}: --combine is auto, tree or all-gather, not '{c}'").into())
        }
    };
    let quick = o.flag("quick");
    let counts = o.usize_list("gpus")?.unwrap_or_else(|| vec![1, 2, 4]);
    let m = o
        .usize("m")?
        .unwrap_or(if quick { 400_000 } else { 8_000_000 });
    let weak = o
        .usize("weak")?
        .unwrap_or(if quick { 200_000 } else { 4_000_000 });
    let n = o.usize("n")?.unwrap_or(if quick { 128 } else { 512 });
    let p = o.usize("step")?.unwrap_or(1000);
    let steps = o.usize("steps")?.unwrap_or(20);
    let reps = o.usize("reps")?.unwrap_or(if quick { 2 } else { 3 });
    let all: Vec<Arc<Gpu>> = (0..16)
        .map_while(|i| Gpu::new(i).ok().map(Arc::new))
        .collect();
    if all.is_empty() {
        return Err(format!("{CMD}: no GPU").into());
    }
    print_dated_run_header(&all[0], CMD, args)?;
    println!("GPUs present: {}", all.len());
    let tile_rows = 65_536.min(weak.max(n)).max(n);
    let tiles: Vec<_> = all
        .iter()
        .enumerate()
        .map(|(i, g)| {
            Ok((
                DevMat::from_host(
                    g,
                    random_signed_matrix::<f64>(tile_rows, n, 7 + i as u64).as_ref(),
                )?,
                DevMat::from_host(
                    g,
                    random_signed_matrix::<f64>(tile_rows, 1, 17 + i as u64).as_ref(),
                )?,
            ))
        })
        .collect::<cuqr::Result<_>>()?;
    let counts: Vec<usize> = counts
        .into_iter()
        .filter(|&c| c >= 1 && c <= all.len())
        .collect();
    // the communicators of each group size, made once (NCCL's set-up is timed apart: it is
    // paid once a process, not once a factorisation)
    println!("\nset-up of the communicators (once a process), ms");
    println!("| GPUs | set-up |");
    println!("|---|---|");
    let mut groups = Vec::new();
    for &g in &counts {
        let t0 = Instant::now();
        let group = DistGroup::new(&all[..g])?.with_combine(combine);
        println!("| {g} | {:.1} |", t0.elapsed().as_secs_f64() * 1e3);
        groups.push(group);
    }
    println!("\nstrong scaling: factorisation of {m} x {n} f64 (R only), ms");
    println!("| GPUs | total | local QR | all-gather | combine | speed-up |");
    println!("|---|---|---|---|---|---|");
    let mut base = None;
    for (group, &g) in groups.iter().zip(&counts) {
        let rows_per: Vec<usize> = (0..g).map(|i| m / g + usize::from(i < m % g)).collect();
        let t = time_factorize(group, &refs(&tiles[..g]), &rows_per, reps)?;
        let b = *base.get_or_insert(t[0]);
        println!(
            "| {g} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2}x |",
            t[0],
            t[1],
            t[2],
            t[3],
            b / t[0]
        );
    }
    println!("\nweak scaling: factorisation of {weak} x {n} f64 a GPU (R only), ms");
    println!("| GPUs | rows | total | local QR | all-gather | combine | vs 1 GPU |");
    println!("|---|---|---|---|---|---|---|");
    let mut base = None;
    for (group, &g) in groups.iter().zip(&counts) {
        let t = time_factorize(group, &refs(&tiles[..g]), &vec![weak; g], reps)?;
        let b = *base.get_or_insert(t[0]);
        println!(
            "| {g} | {} | {:.1} | {:.1} | {:.2} | {:.2} | {:.2}x |",
            weak * g,
            t[0],
            t[1],
            t[2],
            t[3],
            t[0] / b
        );
    }
    println!("\nweak scaling: one window step ({p} rows in, {p} out), {weak} x {n} f64 a GPU, kept data, ms");
    println!("| GPUs | window rows | step | vs 1 GPU |");
    println!("|---|---|---|---|");
    let mut base = None;
    for (group, &g) in groups.iter().zip(&counts) {
        let t = time_window(group, &tiles[..g], weak, p, steps)?;
        let b = *base.get_or_insert(t);
        println!("| {g} | {} | {t:.3} | {:.2}x |", weak * g, t / b);
    }
    combine_table(&all, &counts, o.usize_list("parts")?, &tiles, (n, reps))
}

fn refs<T>(v: &[T]) -> Vec<&T> {
    v.iter().collect()
}

/// The combine alone, all-gather against tree: on the GPU counts of the run (distinct
/// devices) and, with `--parts`, on logical partitions of GPU 0, sharing one device handle
/// (a level's pair QRs one after the other) and with handles of their own (`Gpu::partition`:
/// a level's pair QRs side by side); 2n rows a rank, so that the local QRs are small.
fn combine_table(
    all: &[Arc<Gpu>],
    counts: &[usize],
    parts: Option<Vec<usize>>,
    tiles: &[(DevMat<f64>, DevMat<f64>)],
    (n, reps): (usize, usize),
) -> CliResult<()> {
    println!(
        "\ncombine of G ranks of {} x {n} f64 each (R only), all-gather against tree, ms",
        2 * n
    );
    println!("| ranks | on | all-gather: comm | combine | tree: comm | combine |");
    println!("|---|---|---|---|---|---|");
    // (ranks, devices, each rank's tile: its device's, where else)
    type Case<'t> = (
        usize,
        Vec<Arc<Gpu>>,
        Vec<&'t (DevMat<f64>, DevMat<f64>)>,
        &'static str,
    );
    let mut cases: Vec<Case<'_>> = counts
        .iter()
        .filter(|&&g| g >= 2)
        .map(|&g| (g, all[..g].to_vec(), refs(&tiles[..g]), "GPUs"))
        .collect();
    let parts: Vec<usize> = parts
        .unwrap_or_default()
        .into_iter()
        .filter(|&g| g >= 2)
        .collect();
    // partitions with handles of their own (`Gpu::partition`): a level's pair QRs overlap
    let mut own = vec![all[0].clone()];
    while own.len() < parts.iter().copied().max().unwrap_or(0) {
        own.push(Arc::new(all[0].partition()?));
    }
    for &g in &parts {
        let on = "partitions of GPU 0, one handle";
        cases.push((g, vec![all[0].clone(); g], vec![&tiles[0]; g], on));
        let on = "partitions of GPU 0, own handles";
        cases.push((g, own[..g].to_vec(), vec![&tiles[0]; g], on));
    }
    for (g, gpus, ts, on) in cases {
        let mut row = Vec::new();
        for c in [Combine::AllGather, Combine::Tree] {
            let group = DistGroup::new(&gpus)?.with_combine(c);
            let t = time_factorize(&group, &ts, &vec![2 * n; g], reps)?;
            row.push((t[2], t[3]));
        }
        println!(
            "| {g} | {on} | {:.2} | {:.2} | {:.2} | {:.2} |",
            row[0].0, row[0].1, row[1].0, row[1].1
        );
    }
    Ok(())
}
