//! cuqr build tasks:
//!
//! * `cargo xtask build-ptx` — builds `gpu-kernels` for nvptx64 with nightly and writes
//!   `host/ptx/cuqr_kernels.ptx`;
//! * `cargo xtask build-ptx --check` — rebuilds from scratch into a temporary target dir,
//!   fails if the result differs from the committed PTX, if any `.extern` is left, if a
//!   kernel of the host's `kernel_table!` is missing, or if `ptxas` rejects it; prints each kernel's
//!   registers and spills;
//! * `cargo xtask gpu-bundle [--out DIR]` — release test/bench/bin executables plus a
//!   `run.sh` in one folder, for a GPU machine without a Rust toolchain.
//!
//! The xtask binary is also the bitcode linker rustc calls for the kernel crate (see
//! [`link`]): when [`link::LINKER_ENV`] is set, or argv looks like llvm-bitcode-linker's,
//! `main` links instead of parsing a sub-command.

mod bundle;
mod json;
mod link;
mod ptx;
mod util;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = if link::invoked_as_linker(&args) {
        link::run(&args)
    } else {
        match args.first().map(String::as_str) {
            Some("build-ptx") => ptx::build_ptx(&args[1..]),
            Some("gpu-bundle") => bundle::gpu_bundle(&args[1..]),
            Some("help" | "--help" | "-h") | None => {
                print_help();
                Ok(())
            }
            Some(other) => Err(format!("unknown sub-command `{other}`\n{HELP}")),
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            ExitCode::FAILURE
        }
    }
}

const HELP: &str = "usage:
  cargo xtask build-ptx            build gpu-kernels -> host/ptx/cuqr_kernels.ptx
  cargo xtask build-ptx --check    rebuild, compare with the committed PTX, run ptxas
  cargo xtask gpu-bundle [--out DIR]   release test/bench binaries + run.sh (default bundle/)";

fn print_help() {
    println!("{HELP}");
}
