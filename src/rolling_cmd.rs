//! `cuqr rolling`: rolling least squares of one or many series (y of T or T × S) on a
//! shared design X (T × k), read from `.npy` files; writes each window's coefficients and
//! residual sum of squares (docs/algorithms.md#rolling-least-squares).

use std::path::PathBuf;
use std::time::Instant;

use cuqr::rolling::{rolling_lstsq, Missing, RollingData, RollingParams};
use cuqr::Device;

use crate::backend::Choice;
use crate::json::Json;
use cuqr_cli::cli::{self, CliError, CliResult, Precision};
use cuqr_cli::npy::{self, NpyElem};

const OPTIONS: &[&str] = &[
    "y",
    "x",
    "window",
    "min-nobs",
    "expanding",
    "forget",
    "missing",
    "precision",
    "backend",
    "out",
];

/// Runs `cuqr rolling` with the arguments after the command name. `--expanding` may be
/// given bare (or as `--expanding true|false`).
pub fn run(args: &[String]) -> CliResult<()> {
    let mut args = args.to_vec();
    let mut expanding = false;
    if let Some(i) = args.iter().position(|a| a == "--expanding") {
        let valued = args.get(i + 1).is_some_and(|v| v == "true" || v == "false");
        if !valued {
            args.remove(i);
            expanding = true;
        }
    }
    let Some(opts) = cli::parse_or_help("rolling", &args, OPTIONS, crate::help::ROLLING_HELP)?
    else {
        return Ok(());
    };
    if let Some(v) = opts.get("expanding") {
        expanding = match v {
            "true" => true,
            "false" => false,
            _ => return Err(format!("--expanding takes true or false, not '{v}'").into()),
        };
    }
    let forget = match opts.get("forget") {
        None => None,
        Some(v) => Some(
            v.parse::<f64>()
                .ok()
                .filter(|x| *x > 0.0 && *x <= 1.0)
                .ok_or_else(|| {
                    CliError(format!("--forget must be a number in (0, 1], not '{v}'"))
                })?,
        ),
    };
    let missing = match opts.get("missing") {
        None | Some("drop") => Missing::Drop,
        Some("skip") => Missing::Skip,
        Some("raise") => Missing::Raise,
        Some(s) => return Err(format!("--missing must be drop, skip or raise, not '{s}'").into()),
    };
    let job = Job {
        y: PathBuf::from(opts.require("rolling", "y")?),
        x: PathBuf::from(opts.require("rolling", "x")?),
        window: opts
            .usize("window")?
            .ok_or_else(|| CliError("rolling: missing required option --window".into()))?,
        params: RollingParams {
            min_nobs: opts.usize("min-nobs")?,
            expanding,
            forget,
            missing,
            device: match Choice::parse(opts.get("backend").unwrap_or("cpu"))? {
                Choice::Cpu => Device::Cpu,
                Choice::Auto => Device::Auto,
                Choice::Gpu => Device::Gpu(0),
            },
            ..Default::default()
        },
        out: PathBuf::from(opts.require("rolling", "out")?),
    };
    match Precision::from_opt(opts.get("precision"))? {
        Precision::F64 => job.run::<f64>(),
        Precision::F32 => job.run::<f32>(),
    }
}

/// Everything `cuqr rolling` was asked to do.
struct Job {
    y: PathBuf,
    x: PathBuf,
    window: usize,
    params: RollingParams,
    out: PathBuf,
}

impl Job {
    fn run<T: NpyElem>(&self) -> CliResult<()> {
        let ya = npy::read_file(&self.y)?;
        let xa = npy::read_file(&self.x)?;
        let (nt, ns, k) = (ya.nrows, ya.ncols, xa.ncols);
        if xa.nrows != nt {
            return Err(format!("rolling: X has {} rows, y has {nt}", xa.nrows).into());
        }
        // The reader's column-major f64 data to row-major T.
        let row_major = |a: &npy::Array| -> Vec<T> {
            (0..a.nrows)
                .flat_map(|i| (0..a.ncols).map(move |j| (i, j)))
                .map(|(i, j)| T::from_f64(a.data[i + j * a.nrows]))
                .collect()
        };
        let (y, x) = (row_major(&ya), row_major(&xa));
        let data = RollingData::shared(&y, &x, nt, ns, k);
        let t0 = Instant::now();
        let res = rolling_lstsq(&data, self.window, &self.params)
            .map_err(|e| CliError(format!("rolling: {e}")))?;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        std::fs::create_dir_all(&self.out).map_err(|e| {
            CliError(format!(
                "cannot create output folder {}: {e}",
                self.out.display()
            ))
        })?;
        let (p_shape, r_shape) = if ya.one_d {
            (vec![nt, k], vec![nt])
        } else {
            (vec![nt, ns, k], vec![nt, ns])
        };
        npy::write_file_c(&self.out.join("params.npy"), &res.params, &p_shape)?;
        npy::write_file_c(&self.out.join("rss.npy"), &res.rss, &r_shape)?;
        // A device other than the CPU that was not taken says why in the fallback.
        let ran_on = match (self.params.device, &res.fallback) {
            (Device::Cpu, _) | (_, Some(_)) => "cpu",
            _ => "gpu",
        };
        let estimated = res.rss.iter().filter(|v| v.is_finite()).count();
        let deficient = res.rank_deficient.iter().filter(|&&b| b).count();
        let summary = Json::Obj(vec![
            ("nobs".into(), Json::Int(nt as u64)),
            ("series".into(), Json::Int(ns as u64)),
            ("k".into(), Json::Int(k as u64)),
            ("window".into(), Json::Int(self.window as u64)),
            ("estimated_windows".into(), Json::Int(estimated as u64)),
            ("rank_deficient_windows".into(), Json::Int(deficient as u64)),
            (
                "refactorisations_scheduled".into(),
                Json::Int(res.refactorisations.scheduled as u64),
            ),
            (
                "refactorisations_after_failed_downdate".into(),
                Json::Int(res.refactorisations.after_failed_downdate as u64),
            ),
            ("precision".into(), Json::Str(T::NAME.into())),
            ("device".into(), Json::Str(ran_on.into())),
            ("ms".into(), Json::Num(ms)),
        ]);
        std::fs::write(self.out.join("summary.json"), summary.render())
            .map_err(|e| CliError(format!("cannot write summary.json: {e}")))?;
        if let Some(note) = &res.fallback {
            println!("note: {note}");
        }
        println!(
            "{ns} series x {nt} observations, k = {k}, window {}: {estimated} windows estimated ({deficient} rank-deficient) on the {} ({}) in {ms:.2} ms",
            self.window,
            ran_on.to_uppercase(),
            T::NAME
        );
        println!("wrote {}", self.out.display());
        Ok(())
    }
}
