//! `cuqr bench window`: one step of a sliding window (p rows in, the oldest p out,
//! docs/algorithms.md#sliding-window) on tall thin-Q and R-only states, against cuSOLVER
//! refactorising the window after the step to the same outputs (R and x; with Q₁ for the
//! thin kind), in the same process.

use std::sync::Arc;

use cuqr::internals::gpu::{DevMat, GpuQr, GpuScalar};
use cuqr::{FactorParams, Gpu, Mat, QPolicy, QrUpdate};

use super::common::{dup, print_dated_run_header, time_keeping_last};
use super::tall::measure::{check_free, time_cusolver};
use super::tall::update::{drop_rows, stack_rows};
use super::BenchOpts;
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix;

const CMD: &str = "bench window";

/// `cuqr bench window --help`.
pub const HELP: &str = "\
cuqr bench window: one window step (P rows in, the oldest P out) of a tall
least-squares state against cuSOLVER refactorising the window after the step.

Usage: cuqr bench window [--shapes WxN,...] [--steps P,...] [--kinds none,thin]
                         [--precision f64|f32|both] [--reps R] [--stages] [--quick]

  --shapes   windows W x N (default 1000000x256,4000000x64,200000x2048)
  --steps    rows in and out per step (default 1000,16)
  --kinds    none: R-only with the window's rows kept on the device;
             thin: Q1 (W x N), R and b (default both)
  --precision f64, f32 or both (default both)
  --reps     timed runs per point (default 5; the median is reported)
  --stages   also one step split into its stages (CUDA events), after each row
  --quick    one small shape (200000x64) in f64

cuqr: the step alone (the new rows uploaded from host memory inside the timing)
on a fresh device copy (untimed) of the factorised state after one untimed step
(the steady state: an R-only state's kept rows have room below them). cuSOLVER: geqrf +
ormqr + trsm on the window after the step (and orgqr to Q1 for the thin kind),
from a fresh copy (untimed). The last two columns time the same step with the
new rows already in device memory (slide_device). Bars: R-only with P = 1000 at
least 20x; thin with P = 16 at least 5x.
";

const SHAPES: [(usize, usize); 3] = [(1_000_000, 256), (4_000_000, 64), (200_000, 2048)];

/// Runs `cuqr bench window`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(
        CMD,
        args,
        &["quick", "stages"],
        &["shapes", "steps", "kinds", "precision", "reps"],
    )?;
    let quick = o.flag("quick");
    let shapes: Vec<(usize, usize)> = match o.get("shapes") {
        Some(s) => parse_list(s, |t| {
            let (a, b) = t.split_once(['x', 'X'])?;
            let (w, n) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            (n >= 1 && w >= n).then_some((w, n))
        })
        .ok_or_else(|| format!("{CMD}: --shapes must be WxN,... with W >= N >= 1"))?,
        None if quick => vec![(200_000, 64)],
        None => SHAPES.to_vec(),
    };
    let steps: Vec<usize> = match o.get("steps") {
        Some(s) => parse_list(s, |t| t.trim().parse().ok().filter(|&p: &usize| p >= 1))
            .ok_or_else(|| format!("{CMD}: --steps must be positive integers"))?,
        None => vec![1000, 16],
    };
    let kinds: Vec<QPolicy> = match o.get("kinds") {
        Some(s) => parse_list(s, |t| match t.trim() {
            "none" => Some(QPolicy::None),
            "thin" => Some(QPolicy::Thin),
            _ => None,
        })
        .ok_or_else(|| format!("{CMD}: --kinds must list none and/or thin"))?,
        None => vec![QPolicy::None, QPolicy::Thin],
    };
    let precs: Vec<&str> = match o.get("precision") {
        None | Some("both") if !quick => vec!["f64", "f32"],
        None | Some("f64") => vec!["f64"],
        Some("f32") => vec!["f32"],
        Some("both") => vec!["f64", "f32"],
        Some(v) => {
            return Err(format!("{CMD}: --precision must be f64, f32 or both, not '{v}'").into())
        }
    };
    let reps = o.reps()?;
    let stages = o.flag("stages");
    let gpu = Arc::new(Gpu::new(0).map_err(|e| format!("{CMD} needs a GPU: {e}"))?);
    print_dated_run_header(&gpu, CMD, args)?;
    println!(
        "| precision | window | kind | P | step ms | cuSOLVER ms | × | bar | step ms, rows on the device | × |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for prec in precs {
        for &(w, n) in &shapes {
            let res = if prec == "f64" {
                bench_shape::<f64>(&gpu, (w, n), &steps, &kinds, (reps, stages), prec)
            } else {
                bench_shape::<f32>(&gpu, (w, n), &steps, &kinds, (reps, stages), prec)
            };
            if let Err(e) = res {
                println!("| {prec} | {w}×{n} | – | – | n/a ({e}) | | | |");
            }
        }
    }
    Ok(())
}

fn parse_list<X>(s: &str, f: impl Fn(&str) -> Option<X>) -> Option<Vec<X>> {
    s.split(',').map(f).collect()
}

/// Every (kind, P) point of one window shape.
fn bench_shape<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    (w, n): (usize, usize),
    steps: &[usize],
    kinds: &[QPolicy],
    (reps, stages): (usize, bool),
    prec: &str,
) -> Result<(), String> {
    let elem = std::mem::size_of::<T>() as f64;
    let mat = w as f64 * n as f64 * elem;
    // A, the state, its copy, the step's new buffers and cuSOLVER's A′, work and Q₁
    check_free(gpu, "the window", 8.0 * mat)?;
    let seed = 0x51DE ^ ((w as u64) << 20) ^ n as u64;
    let host: Mat<T> = random_signed_matrix(w, n, seed);
    let a = DevMat::from_host(gpu, host.as_ref()).map_err(|e| e.to_string())?;
    drop(host);
    let b = DevMat::from_host(gpu, random_signed_matrix::<T>(w, 1, seed ^ 0xB).as_ref())
        .map_err(|e| e.to_string())?;
    for &p in steps {
        if p >= w || w - p < n {
            println!("| {prec} | {w}×{n} | – | {p} | n/a (a step of {p} leaves fewer than {n} rows) | | | |");
            continue;
        }
        let step = Step {
            p,
            rows: random_signed_matrix(p, n, seed ^ (p as u64) << 8),
            rhs: random_signed_matrix(p, 1, seed ^ (p as u64) << 9),
        };
        let after = window_after(gpu, &a, &b, &step).map_err(|e| e.to_string())?;
        for &kind in kinds {
            let point = Point {
                gpu,
                prec,
                kind,
                reps,
                stages,
            };
            point.run(&a, &b, &after, &step)?;
        }
    }
    Ok(())
}

/// One step's new rows and their right-hand sides (P of each).
struct Step<T: GpuScalar> {
    p: usize,
    rows: Mat<T>,
    rhs: Mat<T>,
}

/// The window (`a`, `b`) after `step`, for cuSOLVER: its oldest P rows dropped and the
/// new ones below.
fn window_after<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    b: &DevMat<T>,
    step: &Step<T>,
) -> cuqr::Result<(DevMat<T>, DevMat<T>)> {
    let (w, p) = (a.nrows(), step.p);
    let (ru, eu) = (
        DevMat::from_host(gpu, step.rows.as_ref())?,
        DevMat::from_host(gpu, step.rhs.as_ref())?,
    );
    let a1 = drop_rows(gpu, a, 0, p)?;
    let b1 = drop_rows(gpu, b, 0, p)?;
    Ok((
        stack_rows(gpu, &a1, w - p, &ru)?,
        stack_rows(gpu, &b1, w - p, &eu)?,
    ))
}

/// One (kind, P) point of a shape.
struct Point<'a> {
    gpu: &'a Arc<Gpu>,
    prec: &'a str,
    kind: QPolicy,
    reps: usize,
    stages: bool,
}

/// A time in ms, or why there is none.
type Cell = Result<f64, String>;

impl Point<'_> {
    /// Times cuSOLVER on the window after the step, then cuqr's step (the new rows from
    /// host memory, then from device memory), and prints the row.
    fn run<T: GpuScalar>(
        &self,
        a: &DevMat<T>,
        b: &DevMat<T>,
        (a2, b2): &(DevMat<T>, DevMat<T>),
        step: &Step<T>,
    ) -> Result<(), String> {
        let (gpu, reps, p) = (self.gpu, self.reps, step.p);
        let thin = self.kind == QPolicy::Thin;
        let base = time_cusolver(gpu, a2, b2, thin, reps).map_err(|e| e.to_string());
        let mut stage_note = None;
        let on_host = self
            .factorize_copy(a, b)?
            .and_then(|mut st| {
                // steady state: one untimed step first (an R-only state's kept rows then
                // have room below them)
                st.slide(step.rows.as_ref(), step.rhs.as_ref(), p)?;
                if self.stages {
                    stage_note = Some(stage_split(gpu, &st, step)?);
                }
                time_steps(gpu, reps, &st, |s| {
                    s.slide(step.rows.as_ref(), step.rhs.as_ref(), p)
                })
            })
            .map_err(|e| e.to_string());
        // the same step with the new rows already in device memory (`slide_device`)
        let on_device = self
            .factorize_copy(a, b)?
            .and_then(|mut st| {
                let (rd, ed) = (
                    DevMat::from_host(gpu, step.rows.as_ref())?,
                    DevMat::from_host(gpu, step.rhs.as_ref())?,
                );
                st.slide_device(&rd.view(), &ed.view(), p)?;
                time_steps(gpu, reps, &st, |s| {
                    s.slide_device(&rd.view(), &ed.view(), p)
                })
            })
            .map_err(|e| e.to_string());
        self.print_row(a.nrows(), a.ncols(), p, [on_host, base, on_device]);
        if let Some(line) = stage_note {
            println!("|  |  | stages (ms) | {p} | {line} | | | |");
        }
        Ok(())
    }

    /// A fresh device copy of `a` and `b` (an error ends the shape) factorised under
    /// the point's kind (an error is the cells').
    fn factorize_copy<T: GpuScalar>(
        &self,
        a: &DevMat<T>,
        b: &DevMat<T>,
    ) -> Result<cuqr::Result<GpuQr<T>>, String> {
        let params = FactorParams {
            keep_data: self.kind == QPolicy::None,
            ..FactorParams::default()
        };
        Ok(GpuQr::factorize_dev(
            self.gpu,
            dup(self.gpu, a).map_err(|e| e.to_string())?,
            dup(self.gpu, b).map_err(|e| e.to_string())?,
            self.kind,
            params,
        ))
    }

    /// Prints the row of cuqr's step, cuSOLVER, and cuqr's step with the rows on the
    /// device: times, speed-ups and the bar's verdict.
    fn print_row(&self, w: usize, n: usize, p: usize, [step, base, on_device]: [Cell; 3]) {
        let thin = self.kind == QPolicy::Thin;
        let (prec, name) = (self.prec, if thin { "thin" } else { "R-only" });
        let cell = |c: &Cell| match c {
            Ok(x) => format!("{x:.2}"),
            Err(e) => format!("n/a ({e})"),
        };
        let ratio = match (&step, &base) {
            (Ok(s), Ok(b)) if *s > 0.0 => Some(b / s),
            _ => None,
        };
        let bar = match (thin, p) {
            (false, 1000) => Some(20.0),
            (true, 16) => Some(5.0),
            _ => None,
        };
        let verdict = match (ratio, bar) {
            (Some(r), Some(x)) if r >= x => format!("≥ {x}×: holds"),
            (Some(_), Some(x)) => format!("≥ {x}×: misses"),
            _ => "–".into(),
        };
        let ratio_dev = match (&on_device, &base) {
            (Ok(s), Ok(b)) if *s > 0.0 => format!("{:.1}", b / s),
            _ => "–".into(),
        };
        println!(
            "| {prec} | {w}×{n} | {name} | {p} | {} | {} | {} | {verdict} | {} | {ratio_dev} |",
            cell(&step),
            cell(&base),
            ratio.map_or("–".into(), |r| format!("{r:.1}")),
            cell(&on_device)
        );
    }
}

/// One step of a copy of `st` split into its stages (stage marks): "name ms, ...",
/// each stage's marks summed.
fn stage_split<T: GpuScalar>(gpu: &Gpu, st: &GpuQr<T>, step: &Step<T>) -> cuqr::Result<String> {
    let mut s = st.try_clone()?;
    gpu.synchronize()?;
    gpu.stage_marks_begin()?;
    let r = s.slide(step.rows.as_ref(), step.rhs.as_ref(), step.p);
    gpu.stage_mark("rest");
    let marks = gpu.stage_marks_end()?;
    r?;
    let mut sum: Vec<(&str, f64)> = Vec::new();
    for (name, ms) in marks {
        match sum.iter_mut().find(|x| x.0 == name) {
            Some(x) => x.1 += ms,
            None => sum.push((name, ms)),
        }
    }
    let line: Vec<String> = sum.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
    Ok(line.join(", "))
}

/// Median ms of `step` on a fresh copy (untimed) of `st`, kept until the next copy.
fn time_steps<T: GpuScalar>(
    gpu: &Gpu,
    reps: usize,
    st: &GpuQr<T>,
    mut step: impl FnMut(&mut GpuQr<T>) -> cuqr::Result<()>,
) -> cuqr::Result<f64> {
    time_keeping_last(
        gpu,
        reps,
        || st.try_clone(),
        |mut s| {
            step(&mut s)?;
            Ok(s)
        },
    )
    .map(|(ms, _)| ms)
}
