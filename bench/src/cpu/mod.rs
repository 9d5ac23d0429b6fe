//! `cuqr bench cpu`: the CPU backend alone. Factorisation and every update for each
//! state kind, against refactorising the updated matrix with faer (cuqr's CPU
//! factorisation: faer's blocked QR plus the kind's Q) and against the serial
//! reference update (`cuqr::cpu::reference::run`), at one thread and at all, in one
//! process on the same random data.

mod cases;
pub mod micro;

use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate, Scalar};

use super::common::utc_date_time;
use super::stats::{median_in_budget, median_ms, wall_ms};
use super::{check_csv_path, BenchOpts};
use cases::{make_cases, Case, Op};
use cuqr_cli::cli::CliResult;

/// `cuqr bench cpu --help`.
pub const HELP: &str = "\
cuqr bench cpu: the CPU backend's factorisation and updates vs refactorising with
faer and vs the serial reference updates, same data, same process

Usage: cuqr bench cpu [--quick] [--large] [--shapes MxN,...] [--kinds full,thin,none]
                      [--precision f64|f32|both] [--threads LIST] [--reps R]
                      [--ops OP,...] [--no-reference] [--no-room] [--csv FILE]

  --quick          one shape, 1000x100
  --large          also 8000x800
  --shapes         m x n shapes, m > n (default 1000x100,2000x200,4000x400)
  --kinds          full (Q m×m), thin (Q1 m×n), none (R only, A and b kept)
                   (default full,thin,none)
  --precision      f64, f32 or both (default f64)
  --threads        thread counts, 'all' for every core (default 1,all)
  --reps           timed repetitions, at least 5 (default 5, after 1 warm-up)
  --ops            factorize, insert_rows, delete_rows, insert_cols, delete_cols,
                   rank_one (default all)
  --no-reference   skip the serial reference updates (slow at large shapes)
  --no-room        time the updates on copies without reserved room (Q's growth timed)
  --csv FILE       also write every row as CSV

Per shape and kind (one right-hand side, random entries in ±[0.1, 1)):
factorize; insert_rows and delete_rows at k0 = m/3, insert_cols and delete_cols at
k0 = n/2, each with p = 1 and p = n/10; rank_one with random u and v.

cuqr ms: the update alone on a fresh copy of the factorised state with room reserved
for it (CpuQr::reserve, as a state held across updates has after its first growth;
the copy and the reservation are untimed; --no-room times the growth too), median of --reps runs after one warm-up. refactor ms: CpuQr::factorize of
the updated A and b with the same kind (faer's blocked QR, Q^T b and, for full and
thin, the explicit Q), same threads, median of --reps. reference ms: the same
update inside cuqr::cpu::reference::run (serial), median of up to --reps runs
within 2 s (at least one), measured once per case and shown on each thread row.
x refactor = refactor / cuqr; x reference = reference / cuqr. For factorize, cuqr
ms is CpuQr::factorize and the other columns are empty.
";

const CMD: &str = "bench cpu";

/// Shapes of a default run.
const SHAPES: [(usize, usize); 3] = [(1000, 100), (2000, 200), (4000, 400)];

/// One measured row.
struct Row {
    m: usize,
    n: usize,
    precision: &'static str,
    kind: &'static str,
    op: &'static str,
    p: usize,
    threads: usize,
    cuqr_ms: f64,
    refactor_ms: Option<f64>,
    reference_ms: Option<f64>,
}

const CSV_HEAD: &str =
    "m,n,precision,kind,op,p,threads,cuqr_ms,refactor_ms,reference_ms,x_refactor,x_reference";

impl Row {
    fn ratios(&self) -> (Option<f64>, Option<f64>) {
        (
            self.refactor_ms.map(|r| r / self.cuqr_ms),
            self.reference_ms.map(|r| r / self.cuqr_ms),
        )
    }
    /// The cells that name the case: m, n, precision, kind, op, p, threads.
    fn key(&self) -> [String; 7] {
        [
            self.m.to_string(),
            self.n.to_string(),
            self.precision.to_string(),
            self.kind.to_string(),
            self.op.to_string(),
            self.p.to_string(),
            self.threads.to_string(),
        ]
    }
    fn csv(&self) -> String {
        let f = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.4}"));
        let (xr, xs) = self.ratios();
        format!(
            "{},{:.4},{},{},{},{}",
            self.key().join(","),
            self.cuqr_ms,
            f(self.refactor_ms),
            f(self.reference_ms),
            f(xr),
            f(xs)
        )
    }
    fn table(&self) -> String {
        let f = |x: Option<f64>, d: usize| x.map_or("—".to_string(), |v| format!("{v:.d$}"));
        let (xr, xs) = self.ratios();
        let [m, n, rest @ ..] = self.key();
        format!(
            "| {m}×{n} | {} | {:.3} | {} | {} | {} | {} |",
            rest.join(" | "),
            self.cuqr_ms,
            f(self.refactor_ms, 3),
            f(self.reference_ms, 3),
            f(xr, 1),
            f(xs, 1)
        )
    }
}

/// The state kinds by name.
fn kind_of(name: &str) -> CliResult<(&'static str, QPolicy, FactorParams)> {
    crate::opts::kind_of(CMD, "--kinds", name)
}

/// `cuqr bench cpu ...`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(
        CMD,
        args,
        &["quick", "large", "no-reference", "no-room"],
        &[
            "shapes",
            "kinds",
            "precision",
            "threads",
            "reps",
            "csv",
            "ops",
        ],
    )?;
    let mut shapes: Vec<(usize, usize)> = match o.get("shapes") {
        Some(s) => s
            .split(',')
            .map(|t| {
                let (m, n) = t
                    .trim()
                    .split_once('x')
                    .ok_or_else(|| format!("{CMD}: --shapes: '{t}' is not MxN"))?;
                match (m.parse::<usize>(), n.parse::<usize>()) {
                    (Ok(m), Ok(n)) if n >= 2 && m > n + n / 10 + 1 => Ok((m, n)),
                    _ => Err(format!(
                        "{CMD}: --shapes: '{t}' needs m > 1.1·n + 1, n >= 2"
                    )),
                }
            })
            .collect::<Result<_, _>>()?,
        None if o.flag("quick") => vec![SHAPES[0]],
        None => SHAPES.to_vec(),
    };
    if o.flag("large") {
        shapes.push((8000, 800));
    }
    let kinds = o
        .get("kinds")
        .unwrap_or("full,thin,none")
        .split(',')
        .map(|k| kind_of(k.trim()))
        .collect::<CliResult<Vec<_>>>()?;
    let precisions = super::precision_list("precision", o.get("precision").unwrap_or("f64"))?;
    let threads: Vec<usize> = o
        .get("threads")
        .unwrap_or("1,all")
        .split(',')
        .map(|t| match t.trim() {
            "all" => Ok(0),
            s => match s.parse::<usize>() {
                Ok(x) if x > 0 => Ok(x),
                _ => Err(format!(
                    "{CMD}: --threads: '{s}' is not a positive integer or 'all'"
                )),
            },
        })
        .collect::<Result<_, _>>()?;
    let reps = o.reps()?;
    let csv = o.get("csv").map(str::to_string);
    if let Some(path) = csv.as_deref() {
        check_csv_path(CMD, path)?;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!("date: {}", utc_date_time(now));
    println!(
        "cpu: {} cores available; faer blocked QR; rayon pool of {} threads",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        rayon_threads()
    );
    println!("command: cuqr {CMD} {}", args.join(" "));
    println!();
    println!("| shape | prec | kind | op | p | threads | cuqr ms | refactor ms | reference ms | × refactor | × reference |");
    println!("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut lines = vec![CSV_HEAD.to_string()];
    for &(m, n) in &shapes {
        for &prec in precisions {
            for &(kname, policy, params) in &kinds {
                let rows = if prec == "f32" {
                    bench_kind::<f32>(m, n, kname, policy, params, &threads, reps, &o)?
                } else {
                    bench_kind::<f64>(m, n, kname, policy, params, &threads, reps, &o)?
                };
                for r in rows {
                    println!("{}", r.table());
                    lines.push(r.csv());
                    if let Some(path) = csv.as_deref() {
                        std::fs::write(path, lines.join("\n") + "\n")
                            .map_err(|e| format!("{CMD}: --csv {path}: {e}"))?;
                    }
                }
            }
        }
    }
    cuqr::cpu::set_threads(0);
    Ok(())
}

/// The size of rayon's global pool (the most threads any setting gets).
fn rayon_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Every row of one shape, precision and kind.
#[allow(clippy::too_many_arguments)]
fn bench_kind<T: Scalar>(
    m: usize,
    n: usize,
    kind: &'static str,
    policy: QPolicy,
    params: FactorParams,
    threads: &[usize],
    reps: usize,
    o: &BenchOpts,
) -> CliResult<Vec<Row>> {
    let wanted = |op: &str| {
        o.get("ops")
            .is_none_or(|l| l.split(',').any(|x| x.trim() == op))
    };
    let seed = (m * 31 + n) as u64;
    let (a, b, cases) = make_cases::<T>(m, n, seed);
    let mut out = Vec::new();
    let base = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params)?;
    let no_room = o.flag("no-room");
    for &t in threads.iter().filter(|_| wanted("factorize")) {
        cuqr::cpu::set_threads(t);
        let ms = median_ms(reps, || {
            wall_ms(|| CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params))
        })?;
        out.push(Row {
            m,
            n,
            precision: T::NAME,
            kind,
            op: "factorize",
            p: n,
            threads: cuqr::cpu::threads(),
            cuqr_ms: ms,
            refactor_ms: None,
            reference_ms: None,
        });
    }
    for c in cases.iter().filter(|c| wanted(c.op.name())) {
        let reference_ms = if o.flag("no-reference") {
            None
        } else {
            Some(median_in_budget(reps, 2.0, || {
                let mut st = base.clone();
                wall_ms(move || cuqr::cpu::reference::run(|| apply(&mut st, c)).map(|()| st))
            })?)
        };
        for &t in threads {
            cuqr::cpu::set_threads(t);
            let cuqr_ms = median_ms(reps, || {
                let mut st = base.clone();
                if !no_room {
                    reserve_for(&mut st, c);
                }
                wall_ms(move || apply(&mut st, c).map(|()| st))
            })?;
            let refactor_ms = median_ms(reps, || {
                wall_ms(|| CpuQr::factorize(c.a_new.as_ref(), c.b_new.as_ref(), policy, params))
            })?;
            out.push(Row {
                m,
                n,
                precision: T::NAME,
                kind,
                op: c.op.name(),
                p: c.p,
                threads: cuqr::cpu::threads(),
                cuqr_ms,
                refactor_ms: Some(refactor_ms),
                reference_ms,
            });
        }
    }
    Ok(out)
}

/// Reserves the room the case's update grows Q into (untimed), as a held state has it.
fn reserve_for<T: Scalar>(st: &mut CpuQr<T>, c: &Case<T>) {
    match c.op {
        Op::InsertRows => st.reserve(c.p, 0),
        Op::InsertCols => st.reserve(0, c.p),
        Op::DeleteRows | Op::DeleteCols | Op::RankOne => {}
    }
}

/// Applies the case's update to `st`.
fn apply<T: Scalar>(st: &mut CpuQr<T>, c: &Case<T>) -> cuqr::Result<()> {
    match c.op {
        Op::InsertRows => st.insert_rows(c.k0, c.u.as_ref(), c.e.as_ref()),
        Op::DeleteRows => st.delete_rows(c.k0, c.p),
        Op::InsertCols => st.insert_cols(c.k0, c.u.as_ref()),
        Op::DeleteCols => st.delete_cols(c.k0, c.p),
        Op::RankOne => st.rank_one(c.u.col(0), c.e.col(0)),
    }
}

/// A matrix of random entries ±[0.1, 1).
fn random<T: Scalar>(rng: &mut cuqr_cli::rng::Rng, m: usize, n: usize) -> Mat<T> {
    Mat::from_fn(m, n, |_, _| rng.signed())
}
