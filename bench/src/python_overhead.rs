//! `cuqr bench python`: the Rust side of the overhead benchmark
//! (`scripts/python_overhead.py`): the same update sequence as the script's Python loop,
//! on the same data (the script writes it to `.npy` files), timed in Rust. The script
//! runs this group once a round and reads the one JSON line it prints.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use cuqr::{Backend, FactorParams, Gpu, Mat, QPolicy, Qr, QrUpdate};
use cuqr_cli::cli::CliResult;
use cuqr_cli::npy;

use super::BenchOpts;

const CMD: &str = "bench python";

/// `cuqr bench python --help`.
pub const HELP: &str = "\
cuqr bench python: the Rust side of scripts/python_overhead.py

Usage: cuqr bench python --a A.npy --b b.npy --col c.npy --row r.npy
                         --op rows|cols|rank_one [--q full|thin|none]
                         [--device cpu|cuda] [--reps N] [--rounds R] [--threads T]

Factorises A (m x n, read as float64) and b with --q (default thin) on the CPU or
GPU 0, runs one untimed update pair, then times --rounds rounds (default 1) of
--reps pairs (default 50) and prints one JSON line {\"op\": ..., \"seconds\": ...}:
the best round's seconds per pair. Pairs: rows inserts the row r (length n) at the
end and deletes it; cols inserts the column c (length m) at the end and deletes it;
rank_one adds c r^T and subtracts it again.
";

/// The update pair to time.
#[derive(Clone, Copy)]
enum Pair {
    Rows,
    Cols,
    RankOne,
}

/// The data of the pairs on an m×n state: the new row (1×n, zero right-hand side)
/// and column (m×1); the rank-one change u vᵀ with u the column and v the row, and
/// −u for its reverse.
struct PairData {
    m: usize,
    n: usize,
    row: Mat<f64>,
    zero_e: Mat<f64>,
    col: Mat<f64>,
    v: Vec<f64>,
    neg: Vec<f64>,
}

impl Pair {
    fn parse(s: &str) -> CliResult<Self> {
        match s {
            "rows" => Ok(Pair::Rows),
            "cols" => Ok(Pair::Cols),
            "rank_one" => Ok(Pair::RankOne),
            _ => Err(format!("{CMD}: --op must be rows, cols or rank_one, not '{s}'").into()),
        }
    }

    /// One pair on `st` (m×n before and after).
    fn run(self, st: &mut Qr<f64>, d: &PairData) -> cuqr::Result<()> {
        let (m, n) = (d.m, d.n);
        match self {
            Pair::Rows => {
                st.insert_rows(m, d.row.as_ref(), d.zero_e.as_ref())?;
                st.delete_rows(m, 1)
            }
            Pair::Cols => {
                st.insert_cols(n, d.col.as_ref())?;
                st.delete_cols(n, 1)
            }
            Pair::RankOne => {
                st.rank_one(d.col.col(0), &d.v)?;
                st.rank_one(&d.neg, &d.v)
            }
        }
    }
}

fn read(o: &BenchOpts, name: &str) -> CliResult<Mat<f64>> {
    let path = o
        .get(name)
        .ok_or_else(|| format!("{CMD}: missing required option --{name}"))?;
    Ok(npy::read_file(Path::new(path))?.to_mat())
}

/// Runs `cuqr bench python`.
pub fn run(args: &[String]) -> CliResult<()> {
    let values = [
        "a", "b", "col", "row", "op", "q", "device", "reps", "rounds", "threads",
    ];
    let o = BenchOpts::parse(CMD, args, &[], &values)?;
    let pair = Pair::parse(o.get("op").unwrap_or(""))?;
    let policy = match o.get("q").unwrap_or("thin") {
        "full" => QPolicy::Full,
        "thin" => QPolicy::Thin,
        "none" => QPolicy::None,
        s => return Err(format!("{CMD}: --q must be full, thin or none, not '{s}'").into()),
    };
    let backend = match o.get("device").unwrap_or("cpu") {
        "cpu" => Backend::Cpu { fallback: None },
        "cuda" => Backend::Gpu(Arc::new(
            Gpu::new(0).map_err(|e| format!("{CMD}: no usable CUDA device: {e}"))?,
        )),
        s => return Err(format!("{CMD}: --device must be cpu or cuda, not '{s}'").into()),
    };
    if let Some(t) = o.usize("threads")? {
        cuqr::cpu::set_threads(t);
    }
    let (reps, rounds) = (
        o.usize("reps")?.unwrap_or(50),
        o.usize("rounds")?.unwrap_or(1),
    );
    let (a, b) = (read(&o, "a")?, read(&o, "b")?);
    let (col, row) = (read(&o, "col")?, read(&o, "row")?);
    let data = PairData {
        m: a.nrows(),
        n: a.ncols(),
        row: row.transpose(),
        zero_e: Mat::zeros(1, b.ncols()),
        v: row.col(0).to_vec(),
        neg: col.col(0).iter().map(|x| -x).collect(),
        col,
    };
    let mut st = Qr::<f64>::factorize_on(
        &backend,
        a.as_ref(),
        b.as_ref(),
        policy,
        FactorParams::default(),
    )?;
    let best = best_seconds(&mut st, pair, &data, reps, rounds)?;
    println!(
        "{{\"op\": \"{}\", \"seconds\": {best:e}}}",
        o.get("op").unwrap_or("")
    );
    Ok(())
}

/// One untimed pair, then the best of `rounds` rounds of `reps` pairs: seconds a pair
/// (a GPU state's stream is synchronised before each round ends).
fn best_seconds(
    st: &mut Qr<f64>,
    pair: Pair,
    data: &PairData,
    reps: usize,
    rounds: usize,
) -> cuqr::Result<f64> {
    pair.run(st, data)?;
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..reps {
            pair.run(st, data)?;
        }
        if let Some(g) = st.as_gpu() {
            g.gpu().synchronize_stream()?;
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    Ok(best)
}
