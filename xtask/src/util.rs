//! Small helpers shared by the sub-commands: printing and running commands, paths.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Repository root: the parent of this crate's manifest directory (set at compile time,
/// so it also holds when rustc runs the binary as a linker from another directory).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the repository root")
        .to_path_buf()
}

/// Renders a command the way a shell user would type it (env overrides included).
pub fn show(cmd: &Command) -> String {
    let mut s = String::new();
    if let Some(dir) = cmd.get_current_dir() {
        s.push_str(&format!("(cd {} && ", dir.display()));
    }
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            s.push_str(&format!(
                "{}={} ",
                k.to_string_lossy(),
                quote(&v.to_string_lossy())
            ));
        }
    }
    s.push_str(&quote(&cmd.get_program().to_string_lossy()));
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&quote(&a.to_string_lossy()));
    }
    if cmd.get_current_dir().is_some() {
        s.push(')');
    }
    s
}

fn quote(s: &str) -> String {
    if s.contains('\x1f') {
        // CARGO_ENCODED_RUSTFLAGS: show the separators as bash would need them.
        return format!(
            "$'{}'",
            s.replace('\\', "\\\\")
                .replace('\'', "\\'")
                .replace('\x1f', "\\x1f")
        );
    }
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// Prints the command, runs it with inherited stdio, fails on a non-zero exit.
pub fn run(cmd: &mut Command) -> Result<(), String> {
    println!("$ {}", show(cmd));
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {}: {e}", cmd.get_program().to_string_lossy()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("command failed ({status}): {}", show(cmd)))
    }
}

/// Prints the command, runs it capturing stdout and stderr, fails on a non-zero exit
/// (with the captured stderr in the message).
pub fn capture(cmd: &mut Command) -> Result<Output, String> {
    println!("$ {}", show(cmd));
    capture_quiet(cmd)
}

/// As [`capture`] without printing the command first (linker mode: rustc turns any
/// linker output into warnings); the command is still named on failure.
pub fn capture_quiet(cmd: &mut Command) -> Result<Output, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start {}: {e}", cmd.get_program().to_string_lossy()))?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(format!(
            "command failed ({}): {}\n{}{}",
            out.status,
            show(cmd),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
