//! `cuqr bench qr`: cuqr's full GPU QR factorisation (docs/algorithms.md#blocked-householder-qr,
//! with TSQR panels for tall ones: docs/algorithms.md#tsqr) against cuSOLVER `geqrf`
//! and `geqrf` + `orgqr` in the same process, on the same device-resident random
//! matrix (entries ±[0.1, 1), never zero).
//!
//! * **cuqr**: [`GpuQr::factorize_dev`] (the public API on device data) with Q not
//!   kept ([`QPolicy::None`]: R and d = Qᵀb) and with the explicit m×m Q
//!   ([`QPolicy::Full`]); a fresh device copy of A and b per run (untimed), the
//!   previous state freed before it (untimed);
//! * **cuSOLVER**: `geqrf` on a fresh copy (untimed), and `geqrf` then `orgqr` to the
//!   same m×m Q.
//!
//! Timings are CUDA-event medians of ≥ 5 runs after one warm-up
//! ([`cuqr::internals::gpu::timing`]). Flops as LAPACK counts them: 2mn² − 2n³/3 for the
//! factorisation, 4m²n − 4mn² + 4n³/3 for forming the m×m Q from n reflectors
//! (`orgqr` with m = n_Q = m, k = n). Accuracy of cuqr (Kerr et al.'s criteria, the
//! required accuracy: docs/algorithms.md#accuracy-measures) on the state with Q: ‖QR − A‖_F/‖A‖_F ≤ m·u and
//! ‖QᵀQ − I‖_F ≤ m·u, norms on the device in f64 (cuBLAS DGEMM products, f32 data
//! widened exactly first; diagonal of the Gram matrix read by one kernel), and R's
//! strictly lower part exactly zero (checked on the host after a
//! download: exactness allows no reduction shortcut). Where the m×m Q does not fit,
//! R alone is checked: ‖RᵀR − AᵀA‖_F/‖A‖²_F ≤ 2m·u (a backward-error consequence of
//! QR = A + ΔA with orthogonal Q) and the exact zeros. cuSOLVER's Q (`geqrf` +
//! `orgqr`) is measured by the same ‖QᵀQ − I‖_F, for comparison.

mod accuracy;
mod measure;
mod tables;

use std::io::Write;
use std::sync::Arc;

use cuqr::{FactorParams, Gpu, Scalar};

use super::common::print_run_header;
use super::BenchOpts;
use cuqr_cli::cli::CliResult;
use measure::bench_shape;
use tables::{csv_row, phase_row, table_row, CSV_HEAD, PHASE_HEAD, TABLE_HEAD};

/// `cuqr bench qr --help`.
pub const HELP: &str = "\
cuqr bench qr: full QR factorisation (cuqr GPU) vs cuSOLVER geqrf and
geqrf + orgqr, same device-resident data, same process

Usage: cuqr bench qr [--quick] [--dtype f64|f32|both] [--reps R] [--csv FILE]
                     [--max-n N] [--shapes MxN,MxN,...] [--nb NB]

  --quick        Kerr grid and squares up to n = 8192 (default up to 16384)
  --dtype        f64, f32 or both (default both; --precision is a synonym)
  --reps         timed repetitions, at least 5 (default 5, after 1 warm-up)
  --csv FILE     also write every row as CSV
  --max-n N      largest n of the Kerr grid (m = 2n) and of the squares
                 (n = 1024, 2048, ... up to N; 32768 only when asked for here)
  --shapes       run these m×n shapes instead of the grids (m ≥ n)
  --nb           cuqr's Householder block size (default: cuqr's choice)

Shapes: Kerr et al.'s grid m = 2n; squares; tall-skinny 1048576×32,
1048576×128, 262144×512, 65536×2048 (shared baselines). A shape or a column
that does not fit in device memory is skipped with a note.

Columns: cuqr = GpuQr::factorize_dev without Q (R and d = Q^T b for one
right-hand side; includes the rank check's one small download, run with
tolerance 0: the default rejects random f32 squares); launches =
kernel/library launches and copies per factorisation; geqrf/cuqr = speed-up
(> 1: cuqr faster); GFLOP/s with 2mn^2 - 2n^3/3 flops; +Q = with the explicit
m×m Q, against geqrf + orgqr (m×m), flops + 4m^2n - 4mn^2 + 4n^3/3; Q phase =
(cuqr+Q) - cuqr, the difference of the medians, and its GFLOP/s with the Q
flops; |QR-A|/|A|, |Q^TQ-I| (Frobenius, on the device, in f64 also for f32
data) and whether R is exactly zero below its diagonal, each against m·u;
accuracy = pass when all hold; cuSOLVER |Q^TQ-I| = the same measure of
geqrf + orgqr's Q. Without the m×m Q: R only, |R^TR - A^TA|/|A|^2 <= 2m·u and the zeros.
A second table splits one more run per shape into Kerr et al.'s phases:
panels, trailing update, d, rank check and forming Q, from CUDA events
around each phase (that run has no look-ahead, so its total exceeds the median).
";

/// A shape of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) family: &'static str,
    pub(super) m: usize,
    pub(super) n: usize,
}

/// The tall-skinny shapes of the shared baselines.
const TALL_SKINNY: [(usize, usize); 4] = [
    (1 << 20, 32),
    (1 << 20, 128),
    (1 << 18, 512),
    (1 << 16, 2048),
];

/// The grid: Kerr (m = 2n) and squares for n = 1024, 2048, … ≤ `max_n`, then the
/// tall-skinny shapes with n ≤ `max_n`.
fn grid(max_n: usize) -> Vec<Shape> {
    let ns: Vec<usize> = (10..=15)
        .map(|e| 1usize << e)
        .filter(|&n| n <= max_n)
        .collect();
    let mut g: Vec<Shape> = ns
        .iter()
        .map(|&n| Shape {
            family: "kerr",
            m: 2 * n,
            n,
        })
        .collect();
    g.extend(ns.iter().map(|&n| Shape {
        family: "square",
        m: n,
        n,
    }));
    g.extend(
        TALL_SKINNY
            .iter()
            .filter(|&&(_, n)| n <= max_n)
            .map(|&(m, n)| Shape {
                family: "tall",
                m,
                n,
            }),
    );
    g
}

/// Parses `--shapes MxN,MxN` (m ≥ n ≥ 1).
fn parse_shapes(s: &str) -> CliResult<Vec<Shape>> {
    s.split(',')
        .map(|t| {
            let t = t.trim();
            let bad = || format!("--shapes: '{t}' is not MxN with m >= n >= 1");
            let (a, b) = t.split_once(['x', 'X']).ok_or_else(bad)?;
            let (m, n) = (a.trim().parse::<usize>(), b.trim().parse::<usize>());
            match (m, n) {
                (Ok(m), Ok(n)) if n >= 1 && m >= n => {
                    super::check_shape_fits("shapes", m, n)?;
                    Ok(Shape {
                        family: "custom",
                        m,
                        n,
                    })
                }
                _ => Err(bad().into()),
            }
        })
        .collect()
}

/// Validated options of `cuqr bench qr`.
#[derive(Debug)]
struct Opts {
    precs: Vec<&'static str>,
    reps: usize,
    shapes: Vec<Shape>,
    csv: Option<String>,
    params: FactorParams,
}

fn parse(args: &[String]) -> CliResult<Opts> {
    const CMD: &str = "bench qr";
    let o = BenchOpts::parse(
        CMD,
        args,
        &["quick"],
        &["dtype", "precision", "reps", "csv", "max-n", "shapes", "nb"],
    )?;
    let dtype = match (o.get("dtype"), o.get("precision")) {
        (Some(_), Some(_)) => return Err("--dtype and --precision are synonyms: give one".into()),
        (Some(d), None) | (None, Some(d)) => d,
        (None, None) => "both",
    };
    let precs = super::precision_list("dtype", dtype)?.to_vec();
    let reps = o.reps()?;
    let max_n = o.usize("max-n")?;
    let shapes = match o.get("shapes") {
        Some(s) => {
            if max_n.is_some() || o.flag("quick") {
                return Err("--shapes replaces the grid: not with --quick or --max-n".into());
            }
            parse_shapes(s)?
        }
        None => {
            let max = max_n.unwrap_or(if o.flag("quick") { 8192 } else { 16384 });
            let g = grid(max);
            if g.is_empty() {
                return Err(format!("--max-n {max}: no shape of the grid has n <= {max}").into());
            }
            g
        }
    };
    // The rank check runs with the default tolerance (max(m, n)·u/√min(m, n) relative
    // to ‖A‖_F); a refusal becomes a note under the table.
    let params = FactorParams {
        block_size: o.usize("nb")?,
        rank_tol: None,
        keep_data: false,
    };
    if let Some(path) = o.get("csv") {
        super::check_csv_path("bench qr", path)?;
    }
    Ok(Opts {
        precs,
        reps,
        shapes,
        csv: o.get("csv").map(str::to_string),
        params,
    })
}

/// Runs `cuqr bench qr`.
pub fn run(args: &[String]) -> CliResult<()> {
    const CMD: &str = "bench qr";
    let o = parse(args)?;
    let gpu = match Gpu::new(0) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            println!("no GPU ({e}): cuqr bench qr measures GPU factorisations only; nothing run");
            return Ok(());
        }
    };
    print_run_header(&gpu, CMD, args)?;
    println!(
        "protocol: device-resident A (±[0.1, 1)); medians of {} CUDA-event runs after 1 warm-up; \
         fresh device copy of A per run (untimed)",
        o.reps
    );
    println!();
    println!("{TABLE_HEAD}");
    let mut csv = String::from(CSV_HEAD);
    csv.push('\n');
    let mut notes = Vec::new();
    let mut phase_rows = Vec::new();
    let total = o.precs.len() * o.shapes.len();
    let mut done = 0;
    for &prec in &o.precs {
        for sh in &o.shapes {
            done += 1;
            eprint!(
                "\r[{done}/{total}] {prec} {} {}×{}        ",
                sh.family, sh.m, sh.n
            );
            let _ = std::io::stderr().flush();
            let (row, u) = if prec == "f64" {
                (
                    bench_shape::<f64>(&gpu, *sh, o.reps, o.params)?,
                    f64::UNIT_ROUNDOFF,
                )
            } else {
                (
                    bench_shape::<f32>(&gpu, *sh, o.reps, o.params)?,
                    f32::UNIT_ROUNDOFF,
                )
            };
            eprint!("\r");
            println!("{}", table_row(prec, sh, &row, u));
            phase_rows.extend(phase_row(prec, sh, &row));
            csv.push_str(&csv_row(prec, sh, &row, u));
            csv.push('\n');
            for note in &row.notes {
                notes.push(format!("{prec} {}×{}: {note}", sh.m, sh.n));
            }
        }
    }
    eprintln!();
    if !phase_rows.is_empty() {
        println!(
            "\nPhase split (Kerr et al.'s phases): one more run per shape with CUDA events \
             around each phase and no look-ahead (so its total exceeds the median above); \
             panel = Householder vectors, their application inside the panel and T; \
             trailing = A -= V(T^T(V^T A)); d = the right-hand side's update; Q = forming \
             the m×m Q backwards; other = allocations and gaps. GFLOP/s: panel \
             sum 2l·jb^2 - 2jb^3/3, trailing sum 4l·jb·c over the panels taken, Q the \
             orgqr count.\n"
        );
        println!("{PHASE_HEAD}");
        for r in &phase_rows {
            println!("{r}");
        }
    }
    if !notes.is_empty() {
        println!("\nNotes:");
        for n in &notes {
            println!("- {n}");
        }
    }
    if let Some(path) = &o.csv {
        std::fs::write(path, csv).map_err(|e| format!("{CMD}: writing {path}: {e}"))?;
        println!("\nCSV written to {path}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuqr_cli::cli::strs;

    #[test]
    fn quick_full_and_max_n_grids() {
        let quick = parse(&strs(&["--quick"])).unwrap();
        let ns = |o: &Opts, fam: &str| -> Vec<(usize, usize)> {
            o.shapes
                .iter()
                .filter(|s| s.family == fam)
                .map(|s| (s.m, s.n))
                .collect()
        };
        assert_eq!(
            ns(&quick, "kerr"),
            [(2048, 1024), (4096, 2048), (8192, 4096), (16384, 8192)]
        );
        assert_eq!(ns(&quick, "square").last(), Some(&(8192, 8192)));
        assert_eq!(ns(&quick, "tall").len(), 4);
        let full = parse(&[]).unwrap();
        assert_eq!(ns(&full, "kerr").last(), Some(&(32768, 16384)));
        assert_eq!(ns(&full, "square").last(), Some(&(16384, 16384)));
        assert_eq!(full.precs, ["f64", "f32"]);
        let big = parse(&strs(&["--max-n", "32768", "--dtype", "f32"])).unwrap();
        assert_eq!(ns(&big, "square").last(), Some(&(32768, 32768)));
        assert_eq!(big.precs, ["f32"]);
        let small = parse(&strs(&["--max-n", "512"])).unwrap();
        assert_eq!(
            ns(&small, "tall"),
            [(1 << 20, 32), (1 << 20, 128), (1 << 18, 512)]
        );
        assert!(ns(&small, "kerr").is_empty());
    }

    #[test]
    fn bad_options_are_errors() {
        for bad in [
            &["--dtype", "f16"][..],
            &["--reps", "3"],
            &["--reps", "x"],
            &["--max-n", "0"],
            &["--max-n", "16"],
            &["--shapes", "10x20"],
            &["--shapes", "10"],
            &["--shapes", "0x0"],
            &["--shapes", "18446744073709551615x1"],
            &["--shapes", "4294967296x4294967296"],
            &["--shapes", "64x32", "--quick"],
            &["--dtype", "f32", "--precision", "f64"],
            &["--nb", "0"],
            &["--bogus"],
        ] {
            assert!(parse(&strs(bad)).is_err(), "{bad:?}");
        }
        let o = parse(&strs(&["--shapes", "64x32, 100X100", "--nb", "16"])).unwrap();
        assert_eq!(
            o.shapes.iter().map(|s| (s.m, s.n)).collect::<Vec<_>>(),
            [(64, 32), (100, 100)]
        );
        assert_eq!(o.params.block_size, Some(16));
        assert_eq!(o.params.rank_tol, None);
    }
}
