//! Command-line parsing and one-line errors of the `cuqr` tool and the `cuqr-bench`
//! program. Options are `--name value` or `--name=value`; every option takes a value
//! except `-h`/`--help`.

use std::collections::BTreeMap;
use std::fmt;

/// A one-line error the CLI prints as `cuqr: error: ...` before exiting with 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keep the message on one line whatever the source said.
        f.write_str(&self.0.replace('\n', " "))
    }
}

impl From<String> for CliError {
    fn from(s: String) -> Self {
        CliError(s)
    }
}

impl From<&str> for CliError {
    fn from(s: &str) -> Self {
        CliError(s.to_string())
    }
}

impl From<cuqr::Error> for CliError {
    fn from(e: cuqr::Error) -> Self {
        CliError(e.to_string())
    }
}

impl From<crate::npy::NpyError> for CliError {
    fn from(e: crate::npy::NpyError) -> Self {
        CliError(e.0)
    }
}

/// `Result` with [`CliError`].
pub type CliResult<T> = Result<T, CliError>;

/// Parsed options of one sub-command.
#[derive(Debug, Default)]
pub struct Opts {
    map: BTreeMap<String, String>,
}

/// What the arguments asked for.
#[derive(Debug)]
pub enum Parsed {
    /// `-h` or `--help` appeared.
    Help,
    /// Options to run with.
    Run(Opts),
}

/// Whether `arg` asks for help (`-h` or `--help`).
pub fn is_help(arg: &str) -> bool {
    arg == "-h" || arg == "--help"
}

/// Parses `--name value` / `--name=value` pairs; `allowed` lists the names
/// without dashes. Unknown, repeated or value-less options are errors.
pub fn parse(cmd: &str, args: &[String], allowed: &[&str]) -> CliResult<Parsed> {
    if args.iter().any(|a| is_help(a)) {
        return Ok(Parsed::Help);
    }
    let mut opts = Opts::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(body) = arg.strip_prefix("--") else {
            return Err(
                format!("{cmd}: unexpected argument '{arg}' (options start with --)").into(),
            );
        };
        let (name, value) = match body.split_once('=') {
            Some((n, v)) => (n.to_string(), v.to_string()),
            None => {
                let Some(v) = it.next() else {
                    return Err(format!("{cmd}: option --{body} needs a value").into());
                };
                (body.to_string(), v.clone())
            }
        };
        if !allowed.contains(&name.as_str()) {
            return Err(format!("{cmd}: unknown option --{name} (see cuqr {cmd} --help)").into());
        }
        if opts.map.insert(name.clone(), value).is_some() {
            return Err(format!("{cmd}: option --{name} given twice").into());
        }
    }
    Ok(Parsed::Run(opts))
}

/// [`parse`], printing `help` when it was asked for: `None` then, else the options.
pub fn parse_or_help(
    cmd: &str,
    args: &[String],
    allowed: &[&str],
    help: &str,
) -> CliResult<Option<Opts>> {
    match parse(cmd, args, allowed)? {
        Parsed::Help => {
            print!("{help}");
            Ok(None)
        }
        Parsed::Run(o) => Ok(Some(o)),
    }
}

impl Opts {
    /// The value of `--name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    /// The value of `--name`, or an error saying it is required.
    pub fn require(&self, cmd: &str, name: &str) -> CliResult<&str> {
        self.get(name)
            .ok_or_else(|| format!("{cmd}: missing required option --{name}").into())
    }

    /// `--name` as a non-negative integer, if given.
    pub fn usize(&self, name: &str) -> CliResult<Option<usize>> {
        self.get(name)
            .map(|v| {
                v.parse::<usize>().map_err(|_| {
                    CliError(format!(
                        "--{name} must be a non-negative integer, not '{v}'"
                    ))
                })
            })
            .transpose()
    }

    /// `--threads N`, if given: sets the CPU backend's thread count (a positive
    /// integer; without it, all cores).
    pub fn apply_threads(&self) -> CliResult<()> {
        match self.usize("threads")? {
            Some(0) => Err("--threads must be a positive integer, not '0'".into()),
            Some(n) => {
                cuqr::cpu::set_threads(n);
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// `--name` as a u64, if given.
    pub fn u64(&self, name: &str) -> CliResult<Option<u64>> {
        self.get(name)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    CliError(format!(
                        "--{name} must be a non-negative integer, not '{v}'"
                    ))
                })
            })
            .transpose()
    }
}

/// Working precision (`--precision f64|f32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    /// Double precision.
    F64,
    /// Single precision.
    F32,
}

impl Precision {
    /// Parses `--precision`, default f64.
    pub fn from_opt(v: Option<&str>) -> CliResult<Self> {
        match v {
            None | Some("f64") => Ok(Precision::F64),
            Some("f32") => Ok(Precision::F32),
            Some(s) => Err(format!("--precision must be f64 or f32, not '{s}'").into()),
        }
    }
}

/// Owned copies of `v`, as `main` passes the arguments (for tests).
pub fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms_and_rejects_mistakes() {
        let allowed = ["a", "k0", "op"];
        let Parsed::Run(o) = parse("update", &strs(&["--a", "x.npy", "--k0=3"]), &allowed).unwrap()
        else {
            panic!("expected options");
        };
        assert_eq!(o.get("a"), Some("x.npy"));
        assert_eq!(o.usize("k0").unwrap(), Some(3));
        assert_eq!(o.get("op"), None);
        assert!(o.require("update", "op").unwrap_err().0.contains("--op"));

        assert!(matches!(
            parse("update", &strs(&["--a", "x", "--help"]), &allowed),
            Ok(Parsed::Help)
        ));
        for bad in [
            &["--zzz", "1"][..],
            &["--a"][..],
            &["stray"][..],
            &["--a", "1", "--a", "2"][..],
        ] {
            assert!(parse("update", &strs(bad), &allowed).is_err(), "{bad:?}");
        }
        let Parsed::Run(o) = parse("update", &strs(&["--k0", "-1"]), &allowed).unwrap() else {
            panic!("expected options");
        };
        assert!(o.usize("k0").is_err());
    }

    #[test]
    fn errors_are_one_line() {
        let e = CliError("a\nb".into());
        assert_eq!(e.to_string(), "a b");
    }
}
