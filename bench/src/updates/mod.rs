//! `cuqr bench updates`: the seeds' update experiments and their grids on the GPU
//! against in-process baselines on the same data, device-resident protocol (the
//! method and the protocols: docs/performance.md):
//!
//! * **update**: restore the factorised state from a device snapshot (untimed),
//!   then time the update plus the solve R̃₁x = d̃(0:n′) (cuBLAS TRSM) — the
//!   update's inputs U, e, u, v come from host memory as the API takes them;
//! * **(a) refactorise**: cuSOLVER `geqrf` + `ormqr` + `trsm` on the updated
//!   matrix, plus `orgqr` to the explicit m′×m′ Q when the state keeps Q — the
//!   required speed-up (the bar) is against this;
//! * **(b) solution only**: `geqrf` + `ormqr` + `trsm` (the seeds' CULA `Sgels`
//!   comparison);
//! * **(c) CPU serial update** ([`cuqr::CpuQr`], started from the GPU's own
//!   factorisation copied to the host), only at the points marked for it.
//!
//! GPU timings are CUDA-event medians of ≥ 5 runs after one warm-up
//! ([`cuqr::internals::gpu::timing`]); data are random ±[0.1, 1) (never zero).

mod case;
mod charts;
mod cpu;
mod grid;
mod plots;
mod profile;
mod run;
mod sweep;
mod tables;
mod types;

use std::sync::Arc;

use cuqr::Gpu;

use super::BenchOpts;
use charts::speedup_charts;
use cuqr_cli::cli::CliResult;
use grid::{full_grid, quick_grid, Point, GROUPS};
use profile::ceilings;
use sweep::{sweep, Progress, SideRows};
use tables::{csv_key, csv_row, read_resume, side_tables, table_row, CSV_HEAD, TABLE_HEAD};
use types::{Ctx, Row};

/// `cuqr bench updates --help`.
pub const HELP: &str = "\
cuqr bench updates: QR updates (cuqr GPU) vs cuSOLVER refactorisation and the
serial CPU update, on the seeds' grids, device-resident protocol, with the seeds'
TUS and TUT protocols beside it

Usage: cuqr bench updates [--quick] [--precision f64|f32|both] [--groups G,G,...]
                          [--reps R] [--csv FILE] [--no-cpu] [--cpu-budget S]
                          [--cpu-threads N] [--device-only] [--wavefront]
                          [--profile] [--stages] [--svg DIR] [--resume FILE]
                          [--md FILE] [--row-insertion structured|dense]

  --quick        a small grid (m = 1200, n = 500) that runs in well under a
                 minute; without a GPU it runs the CPU columns only and says so
  --precision    f64, f32 or both (default both)
  --groups       subset of BS, AC-k3, AC-k6, AC-stage, AC-p, RC-k, RC-m, AR-p, AR-n,
                 AR-m, RR-seq, RR-n, RR-m, RR-comp, ACC, R1 (default: all, every point
                 of the seeds' grids; ignored with --quick)
  --reps         timed GPU repetitions, at least 5 (default 5, after 1 warm-up)
  --csv FILE     also write every row as CSV
  --no-cpu       skip the serial CPU update and faer columns
  --cpu-budget   seconds of CPU repetitions per point (default 3; at least one run)
  --cpu-threads  worker threads for the CPU columns, each point serial on one of
                 them (default 1); they run beside the GPU measurements, so the
                 table prints a row once its CPU columns are in
  --device-only  skip the TUS and TUT protocols
  --wavefront    time the seeds' Wavefront strategy at every point with a Givens
                 stage (default: only on --quick and in RR-comp)
  --profile      also time the two-phase Givens stage of each insert_cols (k0 < n)
                 and delete_rows point alone (generate, apply in step order with the
                 default pipe kernel, apply in list order), and the ceilings
                 measured in the same run (device copy bandwidth, cuBLAS GEMM rate)
  --stages       also time each point's stages (uploads, copies, Givens generate
                 and apply, Householder panels and trailing updates, rank check,
                 the solve) by events on the main stream, median of --reps runs;
                 always on in AC-stage (the seeds' stage breakdown)
  --resume FILE  skip the points already in FILE, a CSV of an earlier run (same
                 columns); with --csv FILE (the same file) the new rows are added
                 after the old ones, so a run cut short can be continued
  --md FILE      also write the report (this table and the side tables: seed tables,
                 --stages, --profile) to FILE as Markdown, rewritten after every row,
                 so that a run cut short keeps every table measured so far
  --row-insertion  how the GPU states insert rows: structured (default; R's
                 triangle kept) or dense (geqrf of [R; U])
  --svg DIR      also write one SVG plot per (group, precision), DIR/<group>_<prec>.svg:
                 speed-up over (a) and over the CPU update (c) against the parameter
                 that varies in the group (k0, p, m or n), the bar dashed; without a
                 GPU, the ratio (d) faer / (c) CPU update instead (log y axis)

Columns: update = update + TRSM solve (median ms; column insertion takes U from
the device, insert_cols_device, as the device-resident protocol has no transfers;
row insertion and the rank-one update still upload their new rows or vectors, having
no device entry point yet); launches = kernel/library
launches and copies issued by the update alone; (a) = geqrf + ormqr + trsm
(+ orgqr when Q is kept), (b) = geqrf + ormqr + trsm; a/upd and b/upd are
speed-ups (> 1: the update wins); wavefront = the same update (+ solve) with the
seeds' Wavefront strategy (Givens::Wavefront, and for delete_rows the seeds'
composite [Q; R^T; d^T] layout) where the update has a Givens stage, a/wf its
speed-up over (a); TUS = the seeds' protocol: copy of Q (when kept),
R and d from page-locked host memory, update, solve; (b) TUS = copy of the updated
A and b from page-locked host memory, then (b) (the seeds' CULA analogue);
seed CULA/TUS = the seeds' ratio at the same point; cpu = serial
CPU update + solve (median over the runs that fit the budget); TUT = TUS plus
the copy of the new state back to page-locked host memory, cpu/TUT its
speed-up over the CPU update, seed seq/TUT the seeds' ratio; (d) faer = faer's
sequential QR of the updated matrix + least-squares solve, solution only (no Q),
at the points with a cpu column; bar = the required speed-up over (a) at this
point (50x for the rank-one update and for column deletion at k0 >= n/2, 10x where
the update changes at most a tenth of the matrix, 1x elsewhere) and whether it
holds, and at RR-seq, AC-k3 and AR-p whether the update is 50x the CPU update.
TUS is timed where the seeds give CULA/TUS, TUT where they give seq/TUT. RR-comp,
ACC and BS also print the tables of their seed experiments (three row-removal
layouts; e_x, e_Q, e_A, ||L||; n_b).
";

/// Runs `cuqr bench updates`.
pub fn run(args: &[String]) -> CliResult<()> {
    run_on(args, None)
}

/// The validated options of `cuqr bench updates`.
struct Opts {
    o: BenchOpts,
    precs: &'static [&'static str],
    reps: usize,
    cpu_budget: f64,
    cpu_threads: usize,
    /// `--resume`: the earlier CSV's text (`None`: no file, or an empty one).
    resumed: Option<String>,
    /// `--resume`: the keys of the points the earlier run measured ([`csv_key`]).
    done_keys: Vec<String>,
    /// `--row-insertion`.
    row_insertion: cuqr::RowInsertion,
}

const CMD: &str = "bench updates";

/// Parses and checks the options, the output paths included, before anything runs.
fn parse(args: &[String]) -> CliResult<Opts> {
    let o = BenchOpts::parse(
        CMD,
        args,
        &[
            "quick",
            "no-cpu",
            "profile",
            "stages",
            "device-only",
            "wavefront",
        ],
        &[
            "precision",
            "groups",
            "reps",
            "csv",
            "cpu-budget",
            "cpu-threads",
            "svg",
            "resume",
            "md",
            "row-insertion",
        ],
    )?;
    let precs = o.precisions()?;
    let reps = o.reps()?;
    let cpu_budget = match o.get("cpu-budget") {
        None => 3.0,
        Some(v) => match v.parse::<f64>() {
            Ok(x) if x >= 0.0 && x.is_finite() => x,
            _ => return Err(format!("--cpu-budget must be a number of seconds, not '{v}'").into()),
        },
    };
    let cpu_threads = o.usize("cpu-threads")?.unwrap_or(1);
    if cpu_threads == 0 {
        return Err("--cpu-threads must be at least 1".into());
    }
    // the points an earlier run measured (read before --csv may create the file)
    let (resumed, done_keys) = match o.get("resume") {
        None => (None, Vec::new()),
        Some(path) => read_resume(path).map_err(|e| format!("{CMD}: --resume {path}: {e}"))?,
    };
    if let Some(path) = o.get("csv") {
        super::check_csv_path(CMD, path)?;
    }
    if let Some(dir) = o.get("svg") {
        super::check_svg_dir(CMD, dir)?;
    }
    if let Some(path) = o.get("md") {
        super::check_out_path(CMD, "--md", path)?;
    }
    let row_insertion = match o.get("row-insertion").unwrap_or("structured") {
        "structured" => cuqr::RowInsertion::Structured,
        "dense" => cuqr::RowInsertion::Dense,
        other => {
            return Err(
                format!("{CMD}: --row-insertion takes structured or dense, not `{other}`").into(),
            )
        }
    };
    Ok(Opts {
        o,
        precs,
        reps,
        cpu_budget,
        cpu_threads,
        resumed,
        done_keys,
        row_insertion,
    })
}

/// The points to run: `grid` when given (tests), else the quick or the full grid, the
/// full one cut to `--groups`.
fn select_points(o: &BenchOpts, grid: Option<Vec<Point>>) -> CliResult<Vec<Point>> {
    let quick = o.flag("quick");
    let mut points = match grid {
        Some(g) => g,
        None if quick => quick_grid(),
        None => full_grid(),
    };
    if let (false, Some(gs)) = (quick, o.get("groups")) {
        let want: Vec<&str> = gs.split(',').map(str::trim).collect();
        for w in &want {
            if !GROUPS.contains(w) {
                return Err(format!(
                    "--groups: unknown group '{w}' (groups: {})",
                    GROUPS.join(", ")
                )
                .into());
            }
        }
        points.retain(|p| want.contains(&p.group));
    }
    Ok(points)
}

/// The GPU; without one, `--quick` runs the CPU columns only (and says so), a full run
/// is refused.
fn open_gpu(quick: bool) -> CliResult<Option<Arc<Gpu>>> {
    match Gpu::new(0) {
        Ok(g) => Ok(Some(Arc::new(g))),
        Err(e) if quick => {
            println!(
                "no GPU ({e}): CPU columns only (serial CPU update + solve, faer refactorisation)"
            );
            Ok(None)
        }
        Err(e) => Err(format!("{CMD}: needs a GPU without --quick: {e}").into()),
    }
}

/// The report as it grows: the text printed so far (rewritten to `--md` after every
/// row, with the side tables so far), the CSV (rewritten to `--csv`), and the rows the
/// side tables and the plots are made from.
struct Report<'a> {
    text: String,
    csv: String,
    rows: Vec<(&'static str, Point, Row)>,
    reps: usize,
    csv_path: Option<&'a str>,
    md_path: Option<&'a str>,
}

impl Report<'_> {
    /// Prints and records one finished row, and rewrites the output files, so that an
    /// interrupted sweep keeps what it measured.
    fn add(&mut self, prec: &'static str, p: &Point, r: &Row, side: &SideRows) {
        eprint!("\r");
        let line = table_row(prec, p, r);
        println!("{line}");
        self.text.push_str(&line);
        self.text.push('\n');
        self.csv.push_str(&csv_row(prec, p, r));
        self.csv.push('\n');
        self.rows.push((prec, *p, r.clone()));
        if let Some(path) = self.csv_path {
            let _ = std::fs::write(path, &self.csv);
        }
        if let Some(path) = self.md_path {
            let tables = self.side_tables(side, None);
            let _ = std::fs::write(path, format!("{}{tables}", self.text));
        }
    }

    /// The side tables of the rows so far ([`side_tables`]).
    fn side_tables(&self, side: &SideRows, ceilings: Option<&[(&str, f64, f64)]>) -> String {
        let (stages, prof) = (side.stages.borrow(), side.prof.borrow());
        side_tables(&self.rows, &stages, &prof, self.reps, ceilings)
    }
}

/// The lines that open the report: device, command, protocol, the table's header.
fn report_head(gpu: Option<&Arc<Gpu>>, args: &[String], o: &Opts) -> CliResult<String> {
    let mut head = String::new();
    if let Some(g) = gpu {
        head.push_str(&format!("device: {}\n", g.describe()?));
    }
    head.push_str(&format!("command: cuqr bench updates {}\n", args.join(" ")));
    head.push_str(&format!(
        "protocol: device-resident; GPU medians of {} CUDA-event runs after 1 warm-up; \
         update = restore snapshot (untimed), update + TRSM solve (timed), column insertion's U \
         on the device (uploaded untimed: no transfers); TUS/TUT {}; \
         CPU columns on {} worker thread(s) beside the GPU runs, each point serial\n\n",
        o.reps,
        if o.o.flag("device-only") || gpu.is_none() {
            "off"
        } else {
            "from page-locked host memory where the seeds give them"
        },
        o.cpu_threads,
    ));
    head.push_str(&format!("{TABLE_HEAD}\n"));
    Ok(head)
}

/// [`run`], with `grid` (when given) replacing the quick or full grid (tests).
fn run_on(args: &[String], grid: Option<Vec<Point>>) -> CliResult<()> {
    let opts = parse(args)?;
    let o = &opts.o;
    let quick = o.flag("quick");
    let points = select_points(o, grid)?;
    let gpu = open_gpu(quick)?;
    let text = report_head(gpu.as_ref(), args, &opts)?;
    print!("{text}");
    let csv = match (&opts.resumed, o.get("csv") == o.get("resume")) {
        (Some(text), true) => text.clone(),
        _ => format!("{CSV_HEAD}\n"),
    };
    let mut report = Report {
        text,
        csv,
        rows: Vec::new(),
        reps: opts.reps,
        csv_path: o.get("csv"),
        md_path: o.get("md"),
    };
    let ctx = Ctx {
        gpu: gpu.as_ref(),
        reps: opts.reps,
        cpu: !o.flag("no-cpu"),
        cpu_budget: opts.cpu_budget,
        cpu_threads: opts.cpu_threads,
        transfers: !o.flag("device-only"),
        wavefront: quick || o.flag("wavefront"),
        profile: o.flag("profile"),
        stages: o.flag("stages"),
        row_insertion: opts.row_insertion,
    };
    let side = SideRows::default();
    sweep_all(&ctx, &opts, &points, &mut report, &side)?;
    let mut ceil = Vec::new();
    if let (true, Some(g)) = (ctx.profile, &gpu) {
        for &prec in opts.precs {
            let (bw, gf) = if prec == "f64" {
                ceilings::<f64>(g, opts.reps)?
            } else {
                ceilings::<f32>(g, opts.reps)?
            };
            ceil.push((prec, bw, gf));
        }
    }
    let tables = report.side_tables(&side, (!ceil.is_empty()).then_some(&ceil[..]));
    print!("{tables}");
    if let Some(path) = report.md_path {
        std::fs::write(path, format!("{}{tables}", report.text))
            .map_err(|e| format!("{CMD}: writing {path}: {e}"))?;
    }
    if let Some(path) = report.csv_path {
        std::fs::write(path, &report.csv).map_err(|e| format!("{CMD}: writing {path}: {e}"))?;
        println!("\nCSV written to {path}");
    }
    if let Some(dir) = o.get("svg") {
        write_plots(dir, &report.rows, gpu.is_some())?;
    }
    Ok(())
}

/// The sweeps of every precision over the points not yet measured (`--resume`), each
/// finished row added to the report.
fn sweep_all(
    ctx: &Ctx<'_>,
    opts: &Opts,
    points: &[Point],
    report: &mut Report,
    side: &SideRows,
) -> CliResult<()> {
    let todo = |prec: &str| -> Vec<Point> {
        points
            .iter()
            .filter(|p| !opts.done_keys.contains(&csv_key(prec, p)))
            .copied()
            .collect()
    };
    let total: usize = opts.precs.iter().map(|prec| todo(prec).len()).sum();
    if !opts.done_keys.is_empty() {
        println!(
            "resume: {} of the points already measured, {total} to go",
            points.len() * opts.precs.len() - total
        );
    }
    let mut progress = Progress { done: 0, total };
    for &prec in opts.precs {
        let points = todo(prec);
        let mut out = |p: &Point, r: &Row| report.add(prec, p, r, side);
        if prec == "f64" {
            sweep::<f64>(ctx, &points, &mut progress, &mut out, side)?;
        } else {
            sweep::<f32>(ctx, &points, &mut progress, &mut out, side)?;
        }
    }
    eprintln!();
    Ok(())
}

/// `--svg DIR`: one plot a chart of [`speedup_charts`].
fn write_plots(dir: &str, rows: &[(&str, Point, Row)], gpu: bool) -> CliResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{CMD}: creating {dir}: {e}"))?;
    let mut names = Vec::new();
    for (name, chart) in speedup_charts(rows, gpu) {
        let path = std::path::Path::new(dir).join(&name);
        std::fs::write(&path, plots::line_chart(&chart))
            .map_err(|e| format!("{CMD}: writing {}: {e}", path.display()))?;
        names.push(name);
    }
    println!("\nSVG plots written to {dir}: {}", names.join(", "));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use grid::Kind;

    /// `--quick` in both precisions with one CPU run a point, then `extra`.
    fn quick_cpu_args(extra: &[&str]) -> Vec<String> {
        let quick = ["--quick", "--precision", "both", "--cpu-budget", "0"];
        cuqr_cli::cli::strs(&[&quick[..], extra].concat())
    }

    /// `--md FILE` holds the whole report: the header, one table row a point and
    /// precision, and the side tables; a path that cannot be written fails before the run.
    #[test]
    fn md_report_holds_the_tables() {
        use Kind::*;
        let grid = vec![
            Point::new("AR", InsertRows, 130, 50, 0, 3).cpu(),
            Point::new("RC", DeleteCols, 130, 50, 10, 4).cpu(),
        ];
        let path = std::env::temp_dir().join(format!("cuqr-report-{}.md", std::process::id()));
        let f = path.to_str().unwrap().to_string();
        let args = |md: &str| quick_cpu_args(&["--md", md]);
        let _ = std::fs::remove_file(&path);
        run_on(&args(&f), Some(grid.clone())).unwrap();
        let md = std::fs::read_to_string(&path).unwrap();
        assert!(md.contains("command: cuqr bench updates --quick"), "{md}");
        assert!(md.contains(TABLE_HEAD), "{md}");
        let rows = md
            .lines()
            .filter(|l| l.starts_with("| AR |") || l.starts_with("| RC |"))
            .count();
        assert_eq!(rows, 4, "{md}");
        let _ = std::fs::remove_file(&path);
        let bad = std::env::temp_dir().join("cuqr-no-such-dir/x/report.md");
        let e = run_on(&args(bad.to_str().unwrap()), Some(grid)).unwrap_err();
        assert!(e.to_string().contains("--md"), "{e}");
    }

    /// `--resume`: a run cut short is continued. The points already in the CSV are
    /// skipped, the old rows are kept as they were, and the missing rows are added.
    /// A file with another header is refused.
    #[test]
    fn resume_skips_the_measured_points() {
        use Kind::*;
        let grid = || {
            vec![
                Point::new("AR", InsertRows, 130, 50, 0, 3).cpu(),
                Point::new("RC", DeleteCols, 130, 50, 10, 4).cpu(),
                Point::new("R1", RankOne, 97, 41, 0, 1).cpu(),
            ]
        };
        let path = std::env::temp_dir().join(format!("cuqr-resume-{}.csv", std::process::id()));
        let f = path.to_str().unwrap().to_string();
        let args = |extra: &[&str]| quick_cpu_args(&[&["--csv", &f], extra].concat());
        let _ = std::fs::remove_file(&path);
        run_on(&args(&[]), Some(grid())).unwrap();
        let full = std::fs::read_to_string(&path).unwrap();
        assert_eq!(full.lines().count(), 1 + 6);
        // cut the run short: the header and the first four rows remain
        let cut: String = full.lines().take(5).map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, &cut).unwrap();
        run_on(&args(&["--resume", &f]), Some(grid())).unwrap();
        let again = std::fs::read_to_string(&path).unwrap();
        assert!(again.starts_with(&cut), "the old rows are kept");
        assert_eq!(again.lines().count(), 1 + 6);
        let key = |l: &str| l.split(',').take(8).collect::<Vec<_>>().join(",");
        let mut keys: Vec<String> = again.lines().skip(1).map(key).collect();
        let mut want: Vec<String> = full.lines().skip(1).map(key).collect();
        keys.sort();
        want.sort();
        assert_eq!(keys, want, "each point once");
        // nothing left to do: the file stays as it is
        run_on(&args(&["--resume", &f]), Some(grid())).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), again);
        // another header is refused before anything runs
        std::fs::write(&path, "group,prec\nx,f64\n").unwrap();
        let e = run_on(&args(&["--resume", &f]), Some(grid())).unwrap_err();
        assert!(e.to_string().contains("header differs"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    /// End to end: the quick path (CPU-only without a GPU) on a reduced grid with
    /// `--svg` writes one parseable SVG per (group, precision).
    #[test]
    fn svg_option_writes_valid_plots() {
        use Kind::*;
        let grid = vec![
            Point::new("AC-k", InsertCols, 130, 50, 0, 5).cpu(),
            Point::new("AC-k", InsertCols, 130, 50, 25, 5).cpu(),
            Point::new("AC-k", InsertCols, 130, 50, 50, 5).cpu(),
            Point::new("AR-p", InsertRows, 130, 50, 0, 3).cpu(),
            Point::new("AR-p", InsertRows, 130, 50, 0, 7).cpu(),
            Point::new("AR-p", InsertRows, 130, 37, 0, 7).cpu(),
            Point::new("R1", RankOne, 97, 41, 0, 1).cpu(),
        ];
        let dir = std::env::temp_dir().join(format!("cuqr-svg-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let args = quick_cpu_args(&["--svg", dir.to_str().unwrap()]);
        run_on(&args, Some(grid)).unwrap();
        for g in ["AC-k", "AR-p", "R1"] {
            for prec in ["f64", "f32"] {
                let svg = std::fs::read_to_string(dir.join(format!("{g}_{prec}.svg"))).unwrap();
                let names = plots::check_xml(&svg).unwrap();
                let want = match g {
                    "AC-k" => 3,
                    "AR-p" => 3,
                    _ => 1,
                };
                let circles = names.iter().filter(|n| *n == "circle").count();
                assert!(circles >= want, "{g} {prec}: {circles} points");
                assert!(svg.contains("stroke-dasharray"));
            }
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 6);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
