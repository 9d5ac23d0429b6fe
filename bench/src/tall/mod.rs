//! `cuqr bench tall`: every update on tall matrices (m ≫ n) for the thin-Q state
//! and the R-only state, against cuSOLVER refactorising the updated matrix to the
//! same outputs, in the same process on the same device-resident random data
//! (entries ±[0.1, 1), never zero). The thin rows are also set against the
//! device copy bandwidth measured in the same run: an update of Q₁ must at least
//! read and write it.

pub(crate) mod cases;
pub(crate) mod measure;
mod row;
mod tables;
pub(crate) mod update;

use std::sync::Arc;

use cuqr::internals::gpu::GpuScalar;
use cuqr::Gpu;

use super::common::print_dated_run_header;
use super::BenchOpts;
use cases::{parse_names, Kind, Op};
use cuqr_cli::cli::CliResult;
use measure::{bench_shape, copy_bandwidth, ShapeRun};
use row::Row;
use tables::{csv_row, table_row, CSV_HEAD, TABLE_HEAD};

/// `cuqr bench tall --help`.
pub const HELP: &str = "\
cuqr bench tall: updates of tall factorisations (thin Q1 and R-only states) vs
cuSOLVER refactorisation, same device-resident data, same process

Usage: cuqr bench tall [--quick] [--precision f64,f32] [--shapes MxN,...]
                       [--kinds thin,none] [--ops OP,...] [--reps R] [--stages]
                       [--csv FILE]

  --quick        one small shape, 20000x64, in f64 (other options still apply)
  --precision    f64, f32, both, or a list f64,f32 (default f64,f32)
  --shapes       m x n shapes, m >= n (default 1000000x256,4000000x64,200000x2048)
  --kinds        state kinds: thin (Q1 m×n, R n×n, d, b) and none (R and d, with
                 A and b kept) (default thin,none)
  --ops          insert_rows, delete_rows, insert_cols, delete_cols, rank_one
                 (default all)
  --reps         timed repetitions, at least 5 (default 5, after 1 warm-up)
  --stages       also split each cuqr update into its stages (one extra run,
                 CUDA events between the stages; in the note column)
  --csv FILE     also write every row as CSV (rewritten after each row)

Cases per shape (one right-hand side): rows inserted or deleted at k0 = m/3,
columns inserted or deleted at k0 = n/2, each with p = 1 and p = n/10; one
rank-one update A + uv^T with random u (m) and v (n).

cuqr: one GpuQr::factorize_dev per shape and kind (the R-only kind with
keep_data, which row deletion, column insertion and rank-one need); each timed
run updates a fresh copy of that state (try_clone, untimed): the update alone,
without a solve. New columns and the rank-one u and v come from the device
(insert_cols_device, rank_one_device, uploaded once before timing); insert_rows
takes its p new rows and right-hand sides from host memory, so its times include
that upload.
cuSOLVER: A' and b' (the updated data) built on the device once per case, copied
into a workspace before each run (untimed); timed geqrf + ormqr (Q^T b) + trsm
(x = R^-1 (Q^T b)(0..n)), and for the thin kind also the m'×n' Q1 (the geqrf
output copied into an m'×n' buffer, orgqr with k = n'). Timings: CUDA events, 1
warm-up, median of --reps runs.

Copy bandwidth: device-to-device copy of a 1 GiB buffer of the precision, median
of --reps, counted as read + write (2 bytes moved a byte copied).

Columns: cuqr ms, cuSOLVER ms, speed-up = cuSOLVER / cuqr; for the thin kind
Q1 GB = the bytes of Q1 the update must read and write, (m·n + m'·n')·size of an
entry, GB/s = those bytes / cuqr's time, % of copy = that rate over the copy
bandwidth and roofline ms = those bytes at the copy bandwidth. bar: thin kind (row updates with p <= n/8, column updates, rank-one):
speed-up >= 5 and >= 60% of the copy bandwidth; thin row updates with p > n/8
have none; R-only kind: speed-up >= 20 (against the baseline without orgqr).
verdict: holds or misses. A value that cannot be measured (an error from the
update, the factorisation or cuSOLVER, e.g. an unsupported kind, missing data or
device memory) is n/a with the error in the note; a shape that does not fit in
device memory is skipped with a note.
";

const CMD: &str = "bench tall";

/// The shapes of a full run.
const SHAPES: [(usize, usize); 3] = [(1_000_000, 256), (4_000_000, 64), (200_000, 2048)];

/// The shape of `--quick`.
const QUICK_SHAPE: (usize, usize) = (20_000, 64);

/// Validated options.
#[derive(Debug)]
struct Opts {
    precs: Vec<&'static str>,
    shapes: Vec<(usize, usize)>,
    kinds: Vec<Kind>,
    ops: Vec<Op>,
    reps: usize,
    stages: bool,
    csv: Option<String>,
}

/// Parses `--shapes MxN,MxN` (m ≥ n ≥ 1).
fn parse_shapes(s: &str) -> CliResult<Vec<(usize, usize)>> {
    s.split(',')
        .map(|t| {
            let t = t.trim();
            let bad = || format!("--shapes: '{t}' is not MxN with m >= n >= 1");
            let (a, b) = t.split_once(['x', 'X']).ok_or_else(bad)?;
            match (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                (Ok(m), Ok(n)) if n >= 1 && m >= n => {
                    super::check_shape_fits("shapes", m, n)?;
                    Ok((m, n))
                }
                _ => Err(bad().into()),
            }
        })
        .collect()
}

fn parse(args: &[String]) -> CliResult<Opts> {
    let o = BenchOpts::parse(
        CMD,
        args,
        &["quick", "stages"],
        &["precision", "shapes", "kinds", "ops", "reps", "csv"],
    )?;
    let quick = o.flag("quick");
    let precs = match o.get("precision") {
        Some("both") => vec!["f64", "f32"],
        Some(v) => parse_names("precision", v, &["f64", "f32"], |p| p)?,
        None if quick => vec!["f64"],
        None => vec!["f64", "f32"],
    };
    let shapes = match o.get("shapes") {
        Some(s) => parse_shapes(s)?,
        None if quick => vec![QUICK_SHAPE],
        None => SHAPES.to_vec(),
    };
    let kinds = match o.get("kinds") {
        Some(v) => parse_names("kinds", v, &Kind::ALL, Kind::name)?,
        None => Kind::ALL.to_vec(),
    };
    let ops = match o.get("ops") {
        Some(v) => parse_names("ops", v, &Op::ALL, Op::name)?,
        None => Op::ALL.to_vec(),
    };
    if let Some(path) = o.get("csv") {
        super::check_csv_path(CMD, path)?;
    }
    Ok(Opts {
        precs,
        shapes,
        kinds,
        ops,
        reps: o.reps()?,
        stages: o.flag("stages"),
        csv: o.get("csv").map(str::to_string),
    })
}

/// The CSV as it grows, rewritten to `--csv` after every row so that a run cut
/// short keeps what it measured.
struct Csv<'a> {
    text: String,
    path: Option<&'a str>,
}

impl Csv<'_> {
    fn push(&mut self, line: &str) -> CliResult<()> {
        self.text.push_str(line);
        self.text.push('\n');
        match self.path {
            Some(path) => std::fs::write(path, &self.text)
                .map_err(|e| format!("{CMD}: writing {path}: {e}").into()),
            None => Ok(()),
        }
    }
}

/// Runs `cuqr bench tall`.
pub(super) fn run(args: &[String]) -> CliResult<()> {
    let o = parse(args)?;
    let gpu = Arc::new(Gpu::new(0).map_err(|e| format!("{CMD} needs a GPU: {e}"))?);
    print_dated_run_header(&gpu, CMD, args)?;
    println!(
        "protocol: device-resident A and b (±[0.1, 1)); medians of {} CUDA-event runs after 1 \
         warm-up; cuqr: the update alone on a fresh copy of the state (untimed); cuSOLVER: \
         refactorisation of the updated A′ from a fresh copy (untimed), with orgqr for the thin kind",
        o.reps
    );
    let mut csv = Csv {
        text: String::new(),
        path: o.csv.as_deref(),
    };
    csv.push(CSV_HEAD)?;
    for &prec in &o.precs {
        if prec == "f64" {
            run_precision::<f64>(&gpu, &o, prec, &mut csv)?;
        } else {
            run_precision::<f32>(&gpu, &o, prec, &mut csv)?;
        }
    }
    if let Some(path) = csv.path {
        println!("\nCSV written to {path}");
    }
    Ok(())
}

/// One precision's table: its copy bandwidth, then every shape's rows, then the notes.
fn run_precision<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    o: &Opts,
    prec: &'static str,
    csv: &mut Csv<'_>,
) -> CliResult<()> {
    let elem = std::mem::size_of::<T>();
    println!("\n### {prec}\n");
    let copy_gbs = match copy_bandwidth::<T>(gpu, o.reps) {
        Ok(gbs) => {
            println!(
                "copy bandwidth: {gbs:.0} GB/s (device-to-device copy of 1 GiB, read + write, \
                 median of {})\n",
                o.reps
            );
            Some(gbs)
        }
        Err(e) => {
            println!("copy bandwidth: n/a ({e})\n");
            None
        }
    };
    println!("{TABLE_HEAD}");
    let run = ShapeRun {
        gpu,
        prec,
        kinds: &o.kinds,
        ops: &o.ops,
        reps: o.reps,
        stages: o.stages,
    };
    let mut notes = Vec::new();
    let mut written = Ok(());
    for &(m, n) in &o.shapes {
        let mut out = |r: Row| {
            println!("{}", table_row(&r, elem, copy_gbs));
            if written.is_ok() {
                written = csv.push(&csv_row(prec, &r, elem, copy_gbs));
            }
        };
        if let Err(e) = bench_shape::<T>(&run, m, n, &mut out) {
            notes.push(format!("{m}×{n} skipped: {e}"));
        }
        eprint!("\r");
        written.clone()?;
    }
    eprintln!();
    if !notes.is_empty() {
        println!("\nNotes ({prec}):");
        for note in &notes {
            println!("- {note}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuqr_cli::cli::strs;

    #[test]
    fn defaults_quick_and_lists() {
        let full = parse(&[]).unwrap();
        assert_eq!(full.precs, ["f64", "f32"]);
        assert_eq!(
            full.shapes,
            [(1_000_000, 256), (4_000_000, 64), (200_000, 2048)]
        );
        assert_eq!(full.kinds, [Kind::Thin, Kind::NoQ]);
        assert_eq!(full.ops, Op::ALL);
        assert_eq!((full.reps, full.csv.as_deref()), (5, None));
        let quick = parse(&strs(&["--quick"])).unwrap();
        assert_eq!(
            (quick.precs, quick.shapes),
            (vec!["f64"], vec![(20_000, 64)])
        );
        let o = parse(&strs(&[
            "--precision",
            "f32,f64",
            "--shapes",
            "20000x64, 5000X100",
            "--kinds",
            "none",
            "--ops",
            "rank_one,delete_cols",
            "--reps",
            "7",
        ]))
        .unwrap();
        assert_eq!(o.precs, ["f64", "f32"]);
        assert_eq!(o.shapes, [(20_000, 64), (5000, 100)]);
        assert_eq!(o.kinds, [Kind::NoQ]);
        assert_eq!(o.ops, [Op::DeleteCols, Op::RankOne]);
        assert_eq!(o.reps, 7);
        assert_eq!(
            parse(&strs(&["--precision", "both"])).unwrap().precs.len(),
            2
        );
        let q32 = parse(&strs(&["--quick", "--precision", "f32"])).unwrap();
        assert_eq!(q32.precs, ["f32"]);
    }

    #[test]
    fn bad_options_are_errors() {
        for bad in [
            &["--precision", "f16"][..],
            &["--precision", "f64,"],
            &["--shapes", "64x128"],
            &["--shapes", "0x0"],
            &["--shapes", "100"],
            &["--shapes", "4294967296x4294967296"],
            &["--kinds", "full"],
            &["--ops", "insert_row"],
            &["--reps", "4"],
            &["--bogus"],
            &["--quick=1"],
        ] {
            assert!(parse(&strs(bad)).is_err(), "{bad:?}");
        }
        let dir = std::env::temp_dir().join("cuqr-no-such-dir/tall");
        let e = parse(&strs(&["--csv", dir.join("x.csv").to_str().unwrap()])).unwrap_err();
        assert!(e.to_string().contains("--csv"), "{e}");
    }
}
