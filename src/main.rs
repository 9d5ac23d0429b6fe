//! The `cuqr` command-line tool: `cuqr update` applies one QR update to a problem
//! read from `.npy` files and reports its accuracy, `cuqr window` streams rows through a
//! sliding window, `cuqr rolling` runs rolling least squares of many series, `cuqr demo` runs a regression
//! on synthetic data that compares updating with refactorising, `cuqr bench` runs the
//! `cuqr-bench` program (benchmarks against cuSOLVER). Errors are one line on stderr,
//! `cuqr: error: ...`, with exit status 2.
#![forbid(unsafe_code)]

mod backend;
mod bench_cmd;
mod demo;
mod dist_cmd;
mod help;
mod json;
mod ops;
mod rolling_cmd;
mod update_cmd;
mod update_complex;
mod window_cmd;

use cuqr_cli::cli::{CliError, CliResult};

fn dispatch(args: &[String]) -> CliResult<()> {
    let Some(cmd) = args.first() else {
        return Err("no command given (try cuqr --help)".into());
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "-h" | "--help" => {
            print!("{}", help::MAIN_HELP);
            Ok(())
        }
        "help" => {
            match rest.first().map(String::as_str) {
                None => print!("{}", help::MAIN_HELP),
                Some("update") => print!("{}", help::UPDATE_HELP),
                Some("demo") => print!("{}", help::DEMO_HELP),
                Some("window") => print!("{}", help::WINDOW_HELP),
                Some("rolling") => print!("{}", help::ROLLING_HELP),
                Some("dist") => print!("{}", dist_cmd::HELP),
                Some("bench") => return bench_cmd::run(&["--help".to_string()]),
                Some(other) => {
                    return Err(format!("unknown command '{other}' (try cuqr --help)").into())
                }
            }
            Ok(())
        }
        "-V" | "--version" => {
            println!("cuqr {}", env!("CARGO_PKG_VERSION"));
            Ok(())
        }
        "update" => update_cmd::run(rest),
        "window" => window_cmd::run(rest),
        "rolling" => rolling_cmd::run(rest),
        "dist" => dist_cmd::run(rest),
        "demo" => demo::run(rest),
        "bench" => bench_cmd::run(rest),
        other => Err(CliError(format!(
            "unknown command '{other}' (try cuqr --help)"
        ))),
    }
}

fn main() {
    cuqr_cli::run_main("cuqr", dispatch);
}
