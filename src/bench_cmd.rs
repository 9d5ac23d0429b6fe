//! `cuqr bench ...`: runs the `cuqr-bench` program (the `bench/` crate, where every
//! benchmark lives) with the same arguments and exits with its status. The program is
//! looked for next to the running `cuqr`, then in the absolute folders of `PATH`.

use std::path::PathBuf;
use std::process::{Command, ExitStatus};

use cuqr_cli::cli::CliResult;

/// The benchmark program's file name.
const PROGRAM: &str = "cuqr-bench";

/// Runs `cuqr-bench ARGS...`; returns when it succeeds, else exits with its status (it
/// has printed its own error).
pub fn run(args: &[String]) -> CliResult<()> {
    let exe = find().ok_or_else(|| {
        format!(
            "bench: the {PROGRAM} program is not next to cuqr nor on PATH; build it with \
             `cargo build --release -p cuqr-bench` or install it with `cargo install --path bench`"
        )
    })?;
    let status = Command::new(&exe)
        .args(args)
        .status()
        .map_err(|e| format!("bench: cannot run {}: {e}", exe.display()))?;
    if status.success() {
        return Ok(());
    }
    std::process::exit(exit_code(status))
}

/// `cuqr-bench` in the running executable's folder, else the first in an absolute folder
/// of `PATH`.
fn find() -> Option<PathBuf> {
    let name = format!("{PROGRAM}{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&name)));
    let on_path: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            // only absolute folders: an empty or relative entry would run a program of
            // the working directory's
            std::env::split_paths(&p)
                .filter(|dir| dir.is_absolute())
                .map(|dir| dir.join(&name))
                .collect()
        })
        .unwrap_or_default();
    beside.into_iter().chain(on_path).find(|p| p.is_file())
}

/// The exit code that passes `status` on: its own, or 128 + the signal that ended it.
fn exit_code(status: ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            return 128 + sig;
        }
    }
    status.code().unwrap_or(1)
}
