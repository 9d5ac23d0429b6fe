//! What the `cuqr` tool shares with the `cuqr-bench` program (the `bench/` crate):
//! option parsing and one-line errors ([`cli`]), `.npy` files ([`npy`]), the seeded
//! random numbers ([`rng`]), medians ([`stats`]) and the `main` of both ([`run_main`]).
#![forbid(unsafe_code)]

pub mod cli;
pub mod npy;
pub mod rng;
pub mod stats;

use cli::CliResult;

/// The `main` of a command-line program named `program`: runs `dispatch` on the
/// arguments; an error is one stderr line, `<program>: error: ...`, and exit status 2.
pub fn run_main(program: &'static str, dispatch: impl FnOnce(&[String]) -> CliResult<()>) {
    install_panic_hook(program);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Err(e) = dispatch(&args) {
        eprintln!("{program}: error: {e}");
        std::process::exit(2);
    }
}

/// Output piped into a program that stops reading (`cuqr demo | head`) ends the
/// run quietly, as other command-line tools do, instead of with a panic trace; any
/// other panic is a bug and is reported in one line.
fn install_panic_hook(program: &'static str) {
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("unknown panic");
        if msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        eprintln!("{}", panic_line(program, msg));
    }));
}

/// The one stderr line for a panic message (`assert_eq!` messages span lines).
fn panic_line(program: &str, msg: &str) -> String {
    let flat: Vec<&str> = msg.split_whitespace().collect();
    format!(
        "{program}: internal error (a bug, please report): {}",
        flat.join(" ")
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn panic_messages_are_one_line() {
        let line = super::panic_line(
            "cuqr",
            "assertion `left == right` failed\n  left: 1\n right: 2",
        );
        assert_eq!(
            line,
            "cuqr: internal error (a bug, please report): assertion `left == right` failed left: 1 right: 2"
        );
    }
}
