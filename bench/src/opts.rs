//! The options shared by the benchmark groups: flags and `--name value` pairs, the
//! common values (precisions, repetitions, list of sizes), and the checks made before
//! a run (shapes that overflow, output paths that cannot be written).

use cuqr_cli::cli::CliResult;

/// Options shared by the groups: flags (no value) and `--name value` /
/// `--name=value` pairs; unknown names are errors.
#[derive(Debug, Default)]
pub(crate) struct BenchOpts {
    pub flags: Vec<String>,
    pub values: Vec<(String, String)>,
}

impl BenchOpts {
    /// Parses `args` given the allowed flag and value names.
    pub fn parse(cmd: &str, args: &[String], flags: &[&str], values: &[&str]) -> CliResult<Self> {
        let mut o = BenchOpts::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let Some(body) = a.strip_prefix("--") else {
                return Err(format!("{cmd}: unexpected argument '{a}'").into());
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            if flags.contains(&name) {
                if inline.is_some() {
                    return Err(format!("{cmd}: option --{name} takes no value").into());
                }
                if o.flag(name) {
                    return Err(format!("{cmd}: option --{name} given twice").into());
                }
                o.flags.push(name.to_string());
            } else if values.contains(&name) {
                let v = match inline {
                    Some(v) => v,
                    None => it
                        .next()
                        .cloned()
                        .ok_or_else(|| format!("{cmd}: option --{name} needs a value"))?,
                };
                if o.values.iter().any(|(n, _)| n == name) {
                    return Err(format!("{cmd}: option --{name} given twice").into());
                }
                o.values.push((name.to_string(), v));
            } else {
                return Err(format!("{cmd}: unknown option --{name}").into());
            }
        }
        Ok(o)
    }

    /// Whether flag `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    /// The value of `--name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// `--precision f64|f32|both` (default both): the precisions to run, in order.
    pub fn precisions(&self) -> CliResult<&'static [&'static str]> {
        precision_list("precision", self.get("precision").unwrap_or("both"))
    }

    /// `--reps R`: timed repetitions, at least 5 (default 5).
    pub fn reps(&self) -> CliResult<usize> {
        let reps = self.usize("reps")?.unwrap_or(5);
        if reps < 5 {
            return Err("--reps must be at least 5 (medians of >= 5 runs)".into());
        }
        Ok(reps)
    }

    /// `--name` as a positive integer.
    pub fn usize(&self, name: &str) -> CliResult<Option<usize>> {
        self.get(name)
            .map(|v| match v.parse::<usize>() {
                Ok(x) if x > 0 => Ok(x),
                _ => Err(format!("--{name} must be a positive integer, not '{v}'").into()),
            })
            .transpose()
    }

    /// `--name` as a comma-separated list of positive integers.
    pub fn usize_list(&self, name: &str) -> CliResult<Option<Vec<usize>>> {
        self.get(name)
            .map(|v| {
                v.split(',')
                    .map(|s| match s.trim().parse::<usize>() {
                        Ok(x) if x > 0 => Ok(x),
                        _ => Err(format!("--{name}: '{s}' is not a positive integer").into()),
                    })
                    .collect()
            })
            .transpose()
    }
}

/// The precisions a value of option `--{opt}` names: f64, f32 or both (f64 first).
pub fn precision_list(opt: &str, v: &str) -> CliResult<&'static [&'static str]> {
    match v {
        "both" => Ok(&["f64", "f32"]),
        "f64" => Ok(&["f64"]),
        "f32" => Ok(&["f32"]),
        s => Err(format!("--{opt} must be f64, f32 or both, not '{s}'").into()),
    }
}

/// Refuses a benchmark shape m×n whose m·max(m, n) f64 elements (A, or an m×m Q)
/// overflow `usize`, before any host or device allocation (such a size wrapped to a
/// short device allocation, or panicked in the host allocator).
pub fn check_shape_fits(opt: &str, m: usize, n: usize) -> CliResult<()> {
    match m.checked_mul(m.max(n)).and_then(|c| c.checked_mul(8)) {
        Some(_) => Ok(()),
        None => Err(format!("--{opt}: {m}x{n} is too large (its size in bytes overflows)").into()),
    }
}

/// Checks before a run that `--csv FILE` can be written (opened for writing, created
/// if missing, not truncated: the run overwrites it at the end), so a bad path fails
/// at once instead of after a long sweep.
pub fn check_csv_path(cmd: &str, path: &str) -> CliResult<()> {
    check_out_path(cmd, "--csv", path)
}

/// Opens the output file of option `flag` for writing without truncating it, so that a
/// bad path fails before a run (the file is written at the end, or as the run goes).
pub fn check_out_path(cmd: &str, flag: &str, path: &str) -> CliResult<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map(drop)
        .map_err(|e| format!("{cmd}: {flag} {path}: {e}").into())
}

/// Creates `--svg DIR` (and its parents) before a run, so a bad path fails at once.
pub fn check_svg_dir(cmd: &str, dir: &str) -> CliResult<()> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{cmd}: --svg {dir}: {e}").into())
}

/// A state kind by name (`full`, `thin`, `none`; `none` keeps the data, as row deletion
/// needs), with its label; `cmd` and `opt` name the option in the error.
pub fn kind_of(
    cmd: &str,
    opt: &str,
    name: &str,
) -> CliResult<(&'static str, cuqr::QPolicy, cuqr::FactorParams)> {
    use cuqr::{FactorParams, QPolicy};
    let keep = FactorParams {
        keep_data: true,
        ..FactorParams::default()
    };
    match name {
        "full" => Ok(("full", QPolicy::Full, FactorParams::default())),
        "thin" => Ok(("thin", QPolicy::Thin, FactorParams::default())),
        "none" => Ok(("none", QPolicy::None, keep)),
        s => Err(format!("{cmd}: {opt}: unknown kind '{s}' (full, thin, none)").into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cuqr_cli::cli::strs;

    #[test]
    fn output_paths_are_checked_up_front() {
        let dir = std::env::temp_dir().join(format!("cuqr-out-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.csv");
        let fs = f.to_str().unwrap();
        check_csv_path("bench qr", fs).unwrap();
        assert!(f.exists());
        // An existing file is not truncated by the check.
        std::fs::write(&f, "keep").unwrap();
        check_csv_path("bench qr", fs).unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "keep");
        // A directory, or a file under a missing directory, is refused with the path.
        let e = check_csv_path("bench qr", dir.to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("--csv"), "{e}");
        let missing = dir.join("no/such/dir/x.csv");
        let e = check_csv_path("bench updates", missing.to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("no/such/dir"), "{e}");
        // --svg: created, and a path under a regular file is refused.
        let sub = dir.join("plots/a");
        check_svg_dir("bench updates", sub.to_str().unwrap()).unwrap();
        assert!(sub.is_dir());
        let e = check_svg_dir("bench updates", f.join("p").to_str().unwrap()).unwrap_err();
        assert!(e.to_string().contains("--svg"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parses_flags_values_and_lists() {
        let o = BenchOpts::parse(
            "bench lu",
            &strs(&["--quick", "--sizes", "1024,2048", "--precision=f32"]),
            &["quick"],
            &["sizes", "precision"],
        )
        .unwrap();
        assert!(o.flag("quick"));
        assert_eq!(o.get("precision"), Some("f32"));
        assert_eq!(o.usize_list("sizes").unwrap(), Some(vec![1024, 2048]));
        for bad in [
            &["--nope"][..],
            &["--sizes"],
            &["x"],
            &["--sizes", "1", "--sizes", "2"],
        ] {
            assert!(BenchOpts::parse("b", &strs(bad), &["quick"], &["sizes"]).is_err());
        }
        // A flag given a value says so (it was "unknown option --quick").
        let e = BenchOpts::parse("b", &strs(&["--quick=yes"]), &["quick"], &[]).unwrap_err();
        assert!(e.0.contains("--quick takes no value"), "{}", e.0);
        let e = BenchOpts::parse("b", &strs(&["--quick", "--quick"]), &["quick"], &[]).unwrap_err();
        assert!(e.0.contains("given twice"), "{}", e.0);
        assert!(check_shape_fits("shapes", 1 << 20, 1 << 10).is_ok());
        let e = check_shape_fits("shapes", 1 << 32, 1).unwrap_err();
        assert!(
            e.0.contains("--shapes: 4294967296x1 is too large"),
            "{}",
            e.0
        );
        assert!(check_shape_fits("shapes", usize::MAX, 1).is_err());
        let o = BenchOpts::parse("b", &strs(&["--sizes", "4,0"]), &[], &["sizes"]).unwrap();
        assert!(o.usize_list("sizes").is_err());
    }
}
