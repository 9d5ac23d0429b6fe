//! `cuqr update`: factorise A from a `.npy` file, apply one update, solve the
//! least-squares problem (docs/algorithms.md#least-squares), measure the accuracy
//! (docs/algorithms.md#accuracy-measures) and write R, Q, x and `summary.json`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use cuqr::explicit::{c32, c64};
use cuqr::{FactorParams, Mat, QPolicy, Scalar};

use crate::backend::{self, Choice};
use crate::json::Json;
use crate::ops::Update;
use cuqr_cli::cli::{self, CliError, CliResult, Precision};
use cuqr_cli::npy::{self, Array, NpyElem};

const OPTIONS: &[&str] = &[
    "a",
    "b",
    "op",
    "k0",
    "p",
    "u",
    "v",
    "e",
    "to",
    "q-policy",
    "precision",
    "backend",
    "threads",
    "out",
];

/// Which operation `--op` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    InsertCols,
    DeleteCols,
    InsertRows,
    DeleteRows,
    RankOne,
    RankK,
    ReplaceCols,
    ShiftCol,
}

impl Op {
    fn parse(s: &str) -> CliResult<Op> {
        Ok(match s {
            "insert-cols" => Op::InsertCols,
            "delete-cols" => Op::DeleteCols,
            "insert-rows" => Op::InsertRows,
            "delete-rows" => Op::DeleteRows,
            "rank-one" => Op::RankOne,
            "rank-k" => Op::RankK,
            "replace-cols" => Op::ReplaceCols,
            "shift-col" => Op::ShiftCol,
            _ => {
                return Err(format!(
                "update: --op must be insert-cols, delete-cols, insert-rows, delete-rows, rank-one, rank-k, replace-cols or shift-col, not '{s}'"
            )
                .into())
            }
        })
    }

    /// The `--op` spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::InsertCols => "insert-cols",
            Op::DeleteCols => "delete-cols",
            Op::InsertRows => "insert-rows",
            Op::DeleteRows => "delete-rows",
            Op::RankOne => "rank-one",
            Op::RankK => "rank-k",
            Op::ReplaceCols => "replace-cols",
            Op::ShiftCol => "shift-col",
        }
    }

    /// Options this operation accepts beyond the common ones.
    fn accepts(self, opt: &str) -> bool {
        match self {
            Op::InsertCols => matches!(opt, "k0" | "p" | "u"),
            Op::DeleteCols | Op::DeleteRows => matches!(opt, "k0" | "p"),
            Op::InsertRows => matches!(opt, "k0" | "p" | "u" | "e"),
            Op::RankOne => matches!(opt, "k0" | "u" | "v"),
            Op::RankK => matches!(opt, "u" | "v"),
            Op::ReplaceCols => matches!(opt, "k0" | "p" | "u"),
            Op::ShiftCol => matches!(opt, "k0" | "to"),
        }
    }
}

/// Runs `cuqr update` with the arguments after the command name.
pub fn run(args: &[String]) -> CliResult<()> {
    let Some(opts) = cli::parse_or_help("update", args, OPTIONS, crate::help::UPDATE_HELP)? else {
        return Ok(());
    };
    let op = Op::parse(opts.require("update", "op")?)?;
    let op_name = opts.require("update", "op")?.to_string();
    for name in ["k0", "p", "u", "v", "e", "to"] {
        if opts.get(name).is_some() && !op.accepts(name) {
            return Err(format!("update: option --{name} does not apply to --op {op_name}").into());
        }
    }
    let policy = match opts.get("q-policy") {
        Some("full") => QPolicy::Full,
        None | Some("thin") => QPolicy::Thin,
        Some("none") => QPolicy::None,
        Some(s) => return Err(format!("--q-policy must be full, thin or none, not '{s}'").into()),
    };
    let precision = Precision::from_opt(opts.get("precision"))?;
    let choice = Choice::parse(opts.get("backend").unwrap_or("auto"))?;
    opts.apply_threads()?;
    let path = |name: &str| opts.get(name).map(PathBuf::from);
    let job = Job {
        a: PathBuf::from(opts.require("update", "a")?),
        b: path("b"),
        op,
        k0: opts.usize("k0")?,
        to: opts.usize("to")?,
        p: opts.usize("p")?,
        u: path("u"),
        v: path("v"),
        e: path("e"),
        policy,
        choice,
        out: PathBuf::from(opts.require("update", "out")?),
    };
    if job.k0.is_none() && !matches!(op, Op::RankOne | Op::RankK) {
        return Err(format!("update: --op {op_name} needs --k0").into());
    }
    if job.to.is_none() && op == Op::ShiftCol {
        return Err("update: --op shift-col needs --to".into());
    }
    if npy::dtype_of(&job.a)?.is_complex() {
        // complex A: explicit factors (insert and delete rows and columns, rank-one, rank-k)
        return match precision {
            Precision::F64 => crate::update_complex::run::<c64>(&job),
            Precision::F32 => crate::update_complex::run::<c32>(&job),
        };
    }
    match precision {
        Precision::F64 => job.run::<f64>(),
        Precision::F32 => job.run::<f32>(),
    }
}

/// Everything `cuqr update` was asked to do.
pub(crate) struct Job {
    pub(crate) a: PathBuf,
    pub(crate) b: Option<PathBuf>,
    pub(crate) op: Op,
    pub(crate) k0: Option<usize>,
    pub(crate) to: Option<usize>,
    pub(crate) p: Option<usize>,
    pub(crate) u: Option<PathBuf>,
    pub(crate) v: Option<PathBuf>,
    pub(crate) e: Option<PathBuf>,
    pub(crate) policy: QPolicy,
    pub(crate) choice: Choice,
    pub(crate) out: PathBuf,
}

fn need<'p>(path: &'p Option<PathBuf>, name: &str, op: &str) -> CliResult<&'p Path> {
    path.as_deref()
        .ok_or_else(|| CliError(format!("update: --op {op} needs --{name}")))
}

/// Reads a `.npy` file whose values must fit the working precision `T`: a finite
/// value that would round to ±∞ (a float64 file above f32's range under
/// `--precision f32`) is an error naming the file and the entry, instead of a later
/// "non-finite entry" error about data that the file does not hold.
fn read<T: Scalar>(path: &Path) -> CliResult<Array> {
    let arr = npy::read_file(path)?;
    let rows = arr.nrows.max(1);
    if let Some(k) = arr
        .data
        .iter()
        .position(|&x| x.is_finite() && !T::from_f64(x).is_finite())
    {
        return Err(format!(
            "{}: entry ({}, {}) = {:e} overflows {} (try --precision f64)",
            path.display(),
            k % rows,
            k / rows,
            arr.data[k],
            T::NAME
        )
        .into());
    }
    Ok(arr)
}

/// A 1-D array, or a 2-D array with one row or one column, as a vector.
fn vector<T: Scalar>(arr: &Array, what: &str) -> CliResult<Vec<T>> {
    if arr.one_d || arr.ncols == 1 || arr.nrows == 1 {
        Ok(arr.data.iter().map(|&x| T::from_f64(x)).collect())
    } else {
        Err(format!(
            "{what} must be a vector, got a {}x{} matrix",
            arr.nrows, arr.ncols
        )
        .into())
    }
}

/// The `--q-policy` value of `policy`.
fn q_policy_name(policy: QPolicy) -> &'static str {
    match policy {
        QPolicy::Full => "full",
        QPolicy::Thin => "thin",
        _ => "none",
    }
}

/// The library's error in the CLI's words: an update that needs Q (or data the CLI
/// cannot keep, which the library names by its parameters) says which `--q-policy`
/// gives it.
fn needs_q_in_cli_words(e: cuqr::Error, op: &str, q_policy: &str) -> CliError {
    match e {
        cuqr::Error::NeedsQ { .. } | cuqr::Error::NeedsData { .. } => CliError(format!(
            "update: --op {op} needs Q, which --q-policy {q_policy} does not keep \
             (use --q-policy thin or full)"
        )),
        e => e.into(),
    }
}

pub(crate) fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// What `summary.json` records of a run, for real and complex data alike.
pub(crate) struct Summary<'a> {
    /// m, n (after the update) and q.
    pub shape: (usize, usize, usize),
    pub op: &'a str,
    /// (k0, p), `None` where they do not apply.
    pub block: (Option<usize>, Option<usize>),
    pub backend: &'a backend::Backend,
    /// Why `auto` fell back to the CPU.
    pub note: Option<String>,
    pub precision: &'a str,
    pub q_policy: &'a str,
    /// ‖b̃ − Ãx‖ per right-hand side (`None` when no x was computed).
    pub residual_norms: Option<&'a [f64]>,
    pub e_q: Option<f64>,
    pub e_a: Option<f64>,
    /// e_x, e_gram and l_norm (`cuqr::diagnostics`; `None` for complex data).
    pub more: Option<(f64, f64, f64)>,
    /// Milliseconds: factorize, update, solve.
    pub timings: (f64, f64, f64),
}

impl Summary<'_> {
    /// The overall residual norm over all right-hand sides.
    fn residual_norm(&self) -> Option<f64> {
        self.residual_norms
            .map(|r| r.iter().map(|v| v * v).sum::<f64>().sqrt())
    }

    /// Writes `summary.json` into `out`.
    pub fn write(&self, out: &Path) -> CliResult<()> {
        let int = |x: Option<usize>| x.map_or(Json::Null, |v| Json::Int(v as u64));
        let (m, n, q) = self.shape;
        let (t_fact, t_update, t_solve) = self.timings;
        let more = |f: fn((f64, f64, f64)) -> f64| Json::opt(self.more.map(f));
        let summary = Json::Obj(vec![
            ("m".into(), Json::Int(m as u64)),
            ("n".into(), Json::Int(n as u64)),
            ("q".into(), Json::Int(q as u64)),
            ("op".into(), Json::Str(self.op.into())),
            ("k0".into(), int(self.block.0)),
            ("p".into(), int(self.block.1)),
            ("backend".into(), Json::Str(self.backend.kind().into())),
            ("device".into(), Json::Str(self.backend.to_string())),
            ("precision".into(), Json::Str(self.precision.into())),
            ("q_policy".into(), Json::Str(self.q_policy.into())),
            ("residual_norm".into(), Json::opt(self.residual_norm())),
            (
                "residual_norms".into(),
                self.residual_norms.map_or(Json::Null, |r| {
                    Json::Arr(r.iter().map(|&v| Json::Num(v)).collect())
                }),
            ),
            ("e_Q".into(), Json::opt(self.e_q)),
            ("e_A".into(), Json::opt(self.e_a)),
            ("e_x".into(), more(|m| m.0)),
            ("e_gram".into(), more(|m| m.1)),
            ("l_norm".into(), more(|m| m.2)),
            (
                "timings_ms".into(),
                Json::Obj(vec![
                    ("factorize".into(), Json::Num(t_fact)),
                    ("update".into(), Json::Num(t_update)),
                    ("solve".into(), Json::Num(t_solve)),
                ]),
            ),
        ]);
        let sp = out.join("summary.json");
        std::fs::write(&sp, summary.render())
            .map_err(|e| CliError(format!("cannot write {}: {e}", sp.display())))?;
        Ok(())
    }

    /// Prints the backend line and the run's line (A was m×n before the update).
    pub fn print_header(&self, (m, n): (usize, usize)) {
        match &self.note {
            Some(why) => println!("backend: {} (auto: {why})", self.backend),
            None => println!("backend: {}", self.backend),
        }
        let (m2, n2, _) = self.shape;
        let (t_fact, t_update, t_solve) = self.timings;
        println!(
            "{} on {m}x{n} -> {m2}x{n2} ({}): factorize {t_fact:.2} ms, update {t_update:.2} ms, solve {t_solve:.2} ms",
            self.op, self.precision
        );
    }
}

impl Job {
    fn run<T: NpyElem>(&self) -> CliResult<()> {
        let (backend, note) = backend::resolve(self.choice)?;
        let a_arr = read::<T>(&self.a)?;
        let a: Mat<T> = a_arr.to_mat();
        let (m, n) = (a.nrows(), a.ncols());
        let (b, b_one_d) = match &self.b {
            None => (Mat::from_fn(m, 1, |_, _| T::ONE), true),
            Some(p) => {
                let arr = read::<T>(p)?;
                if arr.nrows != m {
                    return Err(format!(
                        "b has {} rows, A has {m} (b must be of length m or m x q)",
                        arr.nrows
                    )
                    .into());
                }
                (arr.to_mat(), arr.one_d)
            }
        };
        let q = b.ncols();
        let update = self.build_update::<T>(m, n, q)?;
        let (m2, n2) = update.check(m, n, q)?;

        let t = Instant::now();
        // an R-only state keeps A and b, which the CLI has read anyway: row deletion, column
        // insertion and rank-one need them (docs/algorithms.md#updates-without-q)
        let params = FactorParams {
            keep_data: self.policy == QPolicy::None,
            ..FactorParams::default()
        };
        let mut qr =
            backend::factorize_with(&backend, a.as_ref(), b.as_ref(), self.policy, params)?;
        let t_fact = ms(t);
        let t = Instant::now();
        update
            .apply(qr.as_mut())
            .map_err(|e| needs_q_in_cli_words(e, update.name(), q_policy_name(self.policy)))?;
        let t_update = ms(t);
        let t = Instant::now();
        let sol = qr.solve()?;
        let t_solve = ms(t);

        let (at, bt) = update.apply_dense(&a, &b);
        let diag = cuqr::diagnostics(qr.as_ref(), at.as_ref(), bt.as_ref())?;

        std::fs::create_dir_all(&self.out).map_err(|e| {
            CliError(format!(
                "cannot create output folder {}: {e}",
                self.out.display()
            ))
        })?;
        let r = qr.r()?;
        npy::write_file(&self.out.join("R.npy"), &r, false)?;
        if let Some(qm) = qr.q()? {
            npy::write_file(&self.out.join("Q.npy"), &qm, false)?;
        }
        npy::write_file(&self.out.join("x.npy"), &sol.x, b_one_d && q == 1)?;

        let residual_norm = sol.residual_norms.iter().map(|r| r * r).sum::<f64>().sqrt();
        let (k0, p) = match update.block() {
            Some((k0, p)) => (Some(k0), Some(p)),
            None => (self.k0, None),
        };
        let summary = Summary {
            shape: (m2, n2, q),
            op: update.name(),
            block: (k0, p),
            backend: &backend,
            note,
            precision: T::NAME,
            q_policy: q_policy_name(self.policy),
            residual_norms: Some(&sol.residual_norms),
            e_q: diag.e_q,
            e_a: diag.e_a,
            more: Some((diag.e_x, diag.e_gram, diag.l_norm)),
            timings: (t_fact, t_update, t_solve),
        };
        summary.write(&self.out)?;
        summary.print_header((m, n));
        let fmt_opt = |x: Option<f64>| x.map_or("n/a".to_string(), |v| format!("{v:.2e}"));
        println!(
            "residual norm {residual_norm:.6e}, e_Q {}, e_A {}, e_x {:.2e}",
            fmt_opt(diag.e_q),
            fmt_opt(diag.e_a),
            diag.e_x
        );
        println!("wrote {}", self.out.display());
        Ok(())
    }

    /// Reads the operation's operands and builds the [`Update`].
    fn build_update<T: Scalar>(&self, m: usize, n: usize, q: usize) -> CliResult<Update<T>> {
        let k0 = self.k0.unwrap_or(0);
        let name = self.op.name();
        let check_p = |got: usize, what: &str| -> CliResult<()> {
            match self.p {
                Some(p) if p != got => {
                    Err(format!("update: --p {p} does not match the {got} {what} of U").into())
                }
                _ => Ok(()),
            }
        };
        Ok(match self.op {
            Op::InsertCols => {
                let arr = read::<T>(need(&self.u, "u", name)?)?;
                if arr.nrows != m {
                    return Err(format!(
                        "insert-cols: U has {} rows, A has {m} (U must be m x p)",
                        arr.nrows
                    )
                    .into());
                }
                check_p(arr.ncols, "columns")?;
                Update::InsertCols {
                    k0,
                    u: arr.to_mat(),
                }
            }
            Op::DeleteCols => Update::DeleteCols {
                k0,
                p: self.p.unwrap_or(1),
            },
            Op::DeleteRows => Update::DeleteRows {
                k0,
                p: self.p.unwrap_or(1),
            },
            Op::InsertRows => {
                let arr = read::<T>(need(&self.u, "u", name)?)?;
                // A 1-D U is one row.
                let u: Mat<T> = if arr.one_d {
                    arr.to_mat::<T>().transpose()
                } else {
                    arr.to_mat()
                };
                if u.ncols() != n {
                    return Err(format!(
                        "insert-rows: U has {} columns, A has {n} (U must be p x n)",
                        u.ncols()
                    )
                    .into());
                }
                let p = u.nrows();
                check_p(p, "rows")?;
                let e = match &self.e {
                    None => Mat::from_fn(p, q, |_, _| T::ONE),
                    Some(path) => {
                        let arr = read::<T>(path)?;
                        let e: Mat<T> = arr.to_mat();
                        if arr.one_d && q != 1 && p == 1 {
                            e.transpose()
                        } else {
                            e
                        }
                    }
                };
                if e.nrows() != p || e.ncols() != q {
                    return Err(format!(
                        "insert-rows: e is {}x{}, expected {p}x{q} (rows of U x columns of b)",
                        e.nrows(),
                        e.ncols()
                    )
                    .into());
                }
                Update::InsertRows { k0, u, e }
            }
            Op::RankOne => {
                let u = vector::<T>(&read::<T>(need(&self.u, "u", name)?)?, "u")?;
                let v = vector::<T>(&read::<T>(need(&self.v, "v", name)?)?, "v")?;
                Update::RankOne { u, v }
            }
            Op::RankK => {
                let u: Mat<T> = read::<T>(need(&self.u, "u", name)?)?.to_mat();
                let v: Mat<T> = read::<T>(need(&self.v, "v", name)?)?.to_mat();
                if u.nrows() != m || v.nrows() != n || u.ncols() != v.ncols() {
                    return Err(format!(
                        "rank-k: U is {}x{} and V {}x{}, expected {m} x k and {n} x k",
                        u.nrows(),
                        u.ncols(),
                        v.nrows(),
                        v.ncols()
                    )
                    .into());
                }
                Update::RankK { u, v }
            }
            Op::ReplaceCols => {
                let arr = read::<T>(need(&self.u, "u", name)?)?;
                if arr.nrows != m {
                    return Err(format!(
                        "replace-cols: U has {} rows, A has {m} (U must be m x p)",
                        arr.nrows
                    )
                    .into());
                }
                check_p(arr.ncols, "columns")?;
                Update::ReplaceCols {
                    k0,
                    u: arr.to_mat(),
                }
            }
            Op::ShiftCol => Update::ShiftCol {
                from: k0,
                to: self.to.unwrap_or(0),
            },
        })
    }
}
