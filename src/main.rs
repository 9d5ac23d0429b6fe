//! The `cuqr` command-line tool (issue "The cuqr API and its CPU backend",
//! item 5): `cuqr update` applies one QR update to a problem read from `.npy`
//! files (spec §1.7–§1.11, §3.7), `cuqr demo` runs a regression session that
//! compares updating with refactorising. Errors are one line on stderr,
//! `cuqr: error: ...`, with exit status 2.
#![forbid(unsafe_code)]

mod backend;
mod bench;
mod cli;
mod demo;
mod json;
mod npy;
mod ops;
mod rng;
mod update_cmd;

use cli::{CliError, CliResult};

fn dispatch(args: &[String]) -> CliResult<()> {
    let Some(cmd) = args.first() else {
        return Err("no command given (try cuqr --help)".into());
    };
    let rest = &args[1..];
    match cmd.as_str() {
        "-h" | "--help" => {
            print!("{}", cli::MAIN_HELP);
            Ok(())
        }
        "help" => {
            match rest.first().map(String::as_str) {
                None => print!("{}", cli::MAIN_HELP),
                Some("update") => print!("{}", cli::UPDATE_HELP),
                Some("demo") => print!("{}", cli::DEMO_HELP),
                Some("bench") => print!("{}", bench::help()),
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
        "demo" => demo::run(rest),
        "bench" => bench::run(rest),
        other => Err(CliError(format!(
            "unknown command '{other}' (try cuqr --help)"
        ))),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = dispatch(&args) {
        eprintln!("cuqr: error: {e}");
        std::process::exit(2);
    }
}
