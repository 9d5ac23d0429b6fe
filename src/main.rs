//! The `cuqr` command-line tool: `cuqr update` applies one QR update to a problem
//! read from `.npy` files and reports its accuracy, `cuqr window` streams rows through a
//! sliding window, `cuqr demo` runs a regression
//! on synthetic data that compares updating with refactorising, `cuqr bench` measures against
//! cuSOLVER. Errors are one line on stderr, `cuqr: error: ...`, with exit status 2.
#![forbid(unsafe_code)]

mod backend;
mod bench;
mod cli;
mod demo;
mod dist_cmd;
mod json;
mod npy;
mod ops;
mod rng;
mod update_cmd;
mod window_cmd;

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
                Some("window") => print!("{}", cli::WINDOW_HELP),
                Some("dist") => print!("{}", dist_cmd::HELP),
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
        "window" => window_cmd::run(rest),
        "dist" => dist_cmd::run(rest),
        "demo" => demo::run(rest),
        "bench" => bench::run(rest),
        other => Err(CliError(format!(
            "unknown command '{other}' (try cuqr --help)"
        ))),
    }
}

/// Output piped into a program that stops reading (`cuqr demo | head`) ends the
/// run quietly, as other command-line tools do, instead of with a panic trace; any
/// other panic is a cuqr bug and is reported in one line.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        if msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        eprintln!("{}", panic_line(msg));
    }));
}

/// The one stderr line for a panic message (`assert_eq!` messages span lines).
fn panic_line(msg: &str) -> String {
    let flat: Vec<&str> = msg.split_whitespace().collect();
    format!(
        "cuqr: internal error (a bug, please report): {}",
        flat.join(" ")
    )
}

fn main() {
    install_panic_hook();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = dispatch(&args) {
        eprintln!("cuqr: error: {e}");
        std::process::exit(2);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn panic_messages_are_one_line() {
        let line = super::panic_line("assertion `left == right` failed\n  left: 1\n right: 2");
        assert_eq!(
            line,
            "cuqr: internal error (a bug, please report): assertion `left == right` failed left: 1 right: 2"
        );
    }
}
