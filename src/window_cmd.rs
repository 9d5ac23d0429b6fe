//! `cuqr window`: streams the rows of A (and b) through a sliding window of W rows, P rows a
//! step (docs/algorithms.md#sliding-window), and writes the window's least-squares solution
//! after every step with a summary of the run.

use std::path::PathBuf;
use std::time::Instant;

use cuqr::{FactorParams, Mat, QPolicy, UpdateParams};

use crate::backend::{self, Choice};
use crate::json::Json;
use cuqr_cli::cli::{self, CliError, CliResult, Precision};
use cuqr_cli::npy::{self, NpyElem};
use cuqr_cli::stats::upper_median;

const OPTIONS: &[&str] = &[
    "a",
    "b",
    "window",
    "step",
    "q-policy",
    "forget",
    "check-every",
    "precision",
    "backend",
    "out",
];

/// Runs `cuqr window` with the arguments after the command name.
pub fn run(args: &[String]) -> CliResult<()> {
    let Some(opts) = cli::parse_or_help("window", args, OPTIONS, crate::help::WINDOW_HELP)? else {
        return Ok(());
    };
    let policy = match opts.get("q-policy") {
        None | Some("thin") => QPolicy::Thin,
        Some("none") => QPolicy::None,
        Some("full") => QPolicy::Full,
        Some(s) => return Err(format!("--q-policy must be thin, none or full, not '{s}'").into()),
    };
    let forget = match opts.get("forget") {
        None => 1.0,
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|x| *x > 0.0 && *x <= 1.0)
            .ok_or_else(|| CliError(format!("--forget must be a number in (0, 1], not '{v}'")))?,
    };
    let job = Job {
        a: PathBuf::from(opts.require("window", "a")?),
        b: opts.get("b").map(PathBuf::from),
        window: opts
            .usize("window")?
            .ok_or_else(|| CliError("window: missing required option --window".into()))?,
        step: opts
            .usize("step")?
            .ok_or_else(|| CliError("window: missing required option --step".into()))?,
        check_every: opts.usize("check-every")?,
        policy,
        forget,
        choice: Choice::parse(opts.get("backend").unwrap_or("auto"))?,
        out: PathBuf::from(opts.require("window", "out")?),
    };
    if job.step == 0 {
        return Err("window: --step must be at least 1".into());
    }
    match Precision::from_opt(opts.get("precision"))? {
        Precision::F64 => job.run::<f64>(),
        Precision::F32 => job.run::<f32>(),
    }
}

/// Everything `cuqr window` was asked to do.
struct Job {
    a: PathBuf,
    b: Option<PathBuf>,
    window: usize,
    step: usize,
    check_every: Option<usize>,
    policy: QPolicy,
    forget: f64,
    choice: Choice,
    out: PathBuf,
}

impl Job {
    fn run<T: NpyElem>(&self) -> CliResult<()> {
        let (backend, note) = backend::resolve(self.choice)?;
        let a: Mat<T> = npy::read_file(&self.a)?.to_mat();
        let (rows, n) = (a.nrows(), a.ncols());
        let b: Mat<T> = match &self.b {
            None => Mat::from_fn(rows, 1, |_, _| T::ONE),
            Some(p) => {
                let arr = npy::read_file(p)?;
                if arr.nrows != rows {
                    return Err(format!("b has {} rows, A has {rows}", arr.nrows).into());
                }
                arr.to_mat()
            }
        };
        let q = b.ncols();
        let (w, p) = (self.window, self.step);
        if w < n {
            return Err(
                format!("window: --window {w} is shorter than the {n} columns of A").into(),
            );
        }
        if w > rows {
            return Err(format!("window: --window {w} exceeds the {rows} rows of A").into());
        }
        let steps = (rows - w) / p;
        let block =
            |x: &Mat<T>, r0: usize, len: usize| Mat::from_fn(len, x.ncols(), |i, j| x[(r0 + i, j)]);
        let params = FactorParams {
            keep_data: self.policy == QPolicy::None,
            ..FactorParams::default()
        };
        let t = Instant::now();
        let mut qr = backend::factorize_with(
            &backend,
            block(&a, 0, w).as_ref(),
            block(&b, 0, w).as_ref(),
            self.policy,
            params,
        )?;
        let t_fact = t.elapsed().as_secs_f64() * 1e3;
        let mut up = UpdateParams {
            forget: self.forget,
            ..qr.params()
        };
        if let Some(c) = self.check_every {
            up.drift.check_every = c;
        }
        qr.set_params(up);
        let mut xs = Mat::<T>::zeros(steps, n * q);
        let (mut t_step, mut t_solve) = (Vec::with_capacity(steps), Vec::with_capacity(steps));
        let mut last = None;
        for s in 0..steps {
            let r0 = w + s * p;
            let (new_rows, new_rhs) = (block(&a, r0, p), block(&b, r0, p));
            let t = Instant::now();
            qr.slide(new_rows.as_ref(), new_rhs.as_ref(), p)
                .map_err(|e| CliError(format!("window: step {s}: {e}")))?;
            t_step.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let sol = qr.solve()?;
            t_solve.push(t.elapsed().as_secs_f64() * 1e3);
            for k in 0..q {
                for i in 0..n {
                    xs[(s, k * n + i)] = sol.x[(i, k)];
                }
            }
            last = Some(sol);
        }
        std::fs::create_dir_all(&self.out).map_err(|e| {
            CliError(format!(
                "cannot create output folder {}: {e}",
                self.out.display()
            ))
        })?;
        npy::write_file(&self.out.join("x.npy"), &xs, false)?;
        npy::write_file(&self.out.join("R.npy"), &qr.r()?, false)?;
        if let Some(qm) = qr.q()? {
            npy::write_file(&self.out.join("Q.npy"), &qm, false)?;
        }
        let drift = qr.drift();
        let (med_step, med_solve) = (upper_median(t_step), upper_median(t_solve));
        let residual: Vec<f64> = last.map(|s| s.residual_norms).unwrap_or_default();
        let summary = Json::Obj(vec![
            ("steps".into(), Json::Int(steps as u64)),
            ("window".into(), Json::Int(w as u64)),
            ("step".into(), Json::Int(p as u64)),
            ("n".into(), Json::Int(n as u64)),
            ("q".into(), Json::Int(q as u64)),
            (
                "q_policy".into(),
                Json::Str(
                    match self.policy {
                        QPolicy::Full => "full",
                        QPolicy::Thin => "thin",
                        _ => "none",
                    }
                    .into(),
                ),
            ),
            ("forget".into(), Json::Num(self.forget)),
            ("backend".into(), Json::Str(backend.kind().into())),
            ("device".into(), Json::Str(backend.to_string())),
            ("precision".into(), Json::Str(T::NAME.into())),
            ("factorize_ms".into(), Json::Num(t_fact)),
            ("median_step_ms".into(), Json::Num(med_step)),
            ("median_solve_ms".into(), Json::Num(med_solve)),
            ("refreshes".into(), Json::Int(drift.refreshes as u64)),
            ("drift_checks".into(), Json::Int(drift.checks as u64)),
            ("drift_estimate".into(), Json::opt(drift.estimate)),
            (
                "final_residual_norms".into(),
                Json::Arr(residual.iter().map(|&r| Json::Num(r)).collect()),
            ),
        ]);
        std::fs::write(self.out.join("summary.json"), summary.render())
            .map_err(|e| CliError(format!("cannot write summary.json: {e}")))?;
        if let Some(note) = note {
            println!("note: {note}");
        }
        println!(
            "{steps} steps of {p} rows through a window of {w}×{n} on {backend} ({}): factorise {t_fact:.1} ms, median step {med_step:.3} ms + solve {med_solve:.3} ms, refreshes {}",
            T::NAME,
            drift.refreshes
        );
        println!("wrote {}", self.out.display());
        Ok(())
    }
}
