//! The `cuqr-bench` program: `cuqr-bench <GROUP> [OPTIONS]` (also reached as
//! `cuqr bench ...`). Errors are one line on stderr, `cuqr-bench: error: ...`, with exit
//! status 2.
#![forbid(unsafe_code)]

fn main() {
    cuqr_cli::run_main("cuqr-bench", cuqr_bench::run);
}
