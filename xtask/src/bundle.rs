//! `cargo xtask gpu-bundle [--out DIR]`: release test, bench
//! and bin executables of the workspace plus `run.sh`, in one folder that runs on a GPU
//! machine with no Rust toolchain (the host crate embeds its PTX; cudarc loads the CUDA
//! libraries at run time).

use crate::json::{self, Value};
use crate::util::{self, repo_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What an executable is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Test,
    Bench,
    Bin,
}

/// One executable reported by cargo.
#[derive(Debug, Clone, PartialEq)]
struct Exe {
    kind: Kind,
    path: PathBuf,
}

/// Entry point of `gpu-bundle`.
pub fn gpu_bundle(args: &[String]) -> Result<(), String> {
    let root = repo_root();
    let out = match args {
        [] => root.join("bundle"),
        [flag, dir] if flag == "--out" => PathBuf::from(dir),
        _ => {
            return Err(format!(
                "gpu-bundle: unexpected arguments {args:?} (only --out DIR)"
            ))
        }
    };
    let exes = build(&root)?;
    if !exes.iter().any(|e| e.kind == Kind::Test) {
        return Err("gpu-bundle: cargo produced no test executables".into());
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let mut names: Vec<(Kind, String)> = Vec::new();
    for e in &exes {
        let name = e
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("odd executable name {}", e.path.display()))?
            .to_string();
        let dst = out.join(&name);
        println!("copy {} -> {}", e.path.display(), dst.display());
        std::fs::copy(&e.path, &dst).map_err(|err| format!("copy {}: {err}", e.path.display()))?;
        strip_debug_info(&dst);
        names.push((e.kind, name));
    }
    let script = out.join("run.sh");
    std::fs::write(&script, run_script(&names))
        .map_err(|e| format!("write {}: {e}", script.display()))?;
    set_executable(&script)?;
    let count = |k| names.iter().filter(|(kk, _)| *kk == k).count();
    println!(
        "bundle at {}: {} test, {} bench, {} bin executables; run `{}/run.sh [sanitize|racecheck|bench]`",
        out.display(),
        count(Kind::Test),
        count(Kind::Bench),
        count(Kind::Bin),
        out.display()
    );
    Ok(())
}

/// Drops debug info from a bundled executable (`strip --strip-debug`) so the bundle
/// stays small enough to ship to the GPU machine; symbols stay, so backtraces still
/// name functions. Without a `strip` on PATH the file is left as it is.
fn strip_debug_info(p: &Path) {
    match Command::new("strip")
        .arg("--strip-debug")
        .arg(p)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => {}
        _ => println!(
            "note: could not strip {} (left with debug info)",
            p.display()
        ),
    }
}

#[cfg(unix)]
fn set_executable(p: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", p.display()))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> Result<(), String> {
    Ok(())
}

fn build(root: &Path) -> Result<Vec<Exe>, String> {
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root)
        .args([
            "build",
            "--release",
            "--workspace",
            "--tests",
            "--benches",
            "--bins",
            "--message-format=json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    println!("$ {}", util::show(&cmd));
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo build failed ({})", out.status));
    }
    parse_messages(&String::from_utf8_lossy(&out.stdout))
}

/// Executables from cargo's JSON messages, deduplicated, in cargo's order. The xtask's
/// own binaries are left out (they need a Rust toolchain to be of any use).
fn parse_messages(stdout: &str) -> Result<Vec<Exe>, String> {
    let mut v: Vec<Exe> = Vec::new();
    for line in stdout.lines().filter(|l| l.starts_with('{')) {
        let msg = json::parse(line).map_err(|e| format!("cargo JSON: {e}: {line}"))?;
        if msg.get("reason").and_then(Value::as_str) != Some("compiler-artifact") {
            continue;
        }
        let Some(path) = msg.get("executable").and_then(Value::as_str) else {
            continue;
        };
        if msg
            .get("package_id")
            .and_then(Value::as_str)
            .is_some_and(|p| p.contains("xtask"))
        {
            continue;
        }
        let target = msg.get("target");
        let kinds: Vec<&str> = target
            .and_then(|t| t.get("kind"))
            .and_then(Value::as_array)
            .unwrap_or(&[])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let test = msg
            .get("profile")
            .and_then(|p| p.get("test"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let kind = if kinds.contains(&"bench") {
            Kind::Bench
        } else if test {
            Kind::Test
        } else {
            Kind::Bin
        };
        let exe = Exe {
            kind,
            path: PathBuf::from(path),
        };
        if !v.contains(&exe) {
            v.push(exe);
        }
    }
    Ok(v)
}

/// The bundle's `run.sh`: runs every test binary with `CUQR_REQUIRE_GPU=1` and
/// `--test-threads=1`, optionally under compute-sanitizer, prints a summary, exits
/// non-zero on any failure. `run.sh bench` runs the criterion bench binaries instead
/// (`--bench`, short warm-up and measurement times unless `CUQR_BENCH_FULL=1`).
fn run_script(names: &[(Kind, String)]) -> String {
    let list = |k: Kind| -> String {
        names
            .iter()
            .filter(|(kk, _)| *kk == k)
            .map(|(_, n)| format!("  \"{n}\"\n"))
            .collect()
    };
    format!(
        r#"#!/usr/bin/env bash
# Generated by `cargo xtask gpu-bundle`. Runs cuqr's release test binaries on a GPU
# machine (no Rust toolchain needed).
#   ./run.sh             every test binary, CUQR_REQUIRE_GPU=1, --test-threads=1
#   ./run.sh sanitize    the same under `compute-sanitizer --tool memcheck`
#   ./run.sh racecheck   the same under `compute-sanitizer --tool racecheck`
#   ./run.sh bench       every bench binary (criterion, --bench), a short run (1 s
#                        warm-up, 2 s measurement); CUQR_BENCH_FULL=1 keeps criterion's
#                        own times
# Extra arguments after the mode go to each test or bench binary (e.g. a name filter).
set -u
cd "$(dirname "$0")"
MODE="${{1:-test}}"
[ $# -gt 0 ] && shift
TESTS=(
{tests})
BENCHES=(
{benches})
export CUQR_REQUIRE_GPU=1
case "$MODE" in
  test) WRAP=() ;;
  sanitize) WRAP=(compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check full) ;;
  racecheck) WRAP=(compute-sanitizer --tool racecheck --error-exitcode 99) ;;
  bench)
    fail=0
    TIMES=(--warm-up-time 1 --measurement-time 2)
    [ "${{CUQR_BENCH_FULL:-0}}" = 1 ] && TIMES=()
    for b in ${{BENCHES[@]+"${{BENCHES[@]}}"}}; do
      echo "=== $b"
      ./"$b" --bench ${{TIMES[@]+"${{TIMES[@]}}"}} "$@" || fail=1
    done
    exit $fail ;;
  *) echo "usage: $0 [test|sanitize|racecheck|bench] [test args...]" >&2; exit 2 ;;
esac
if [ ${{#WRAP[@]}} -gt 0 ] && ! command -v "${{WRAP[0]}}" >/dev/null; then
  echo "compute-sanitizer not found on PATH (it ships with the CUDA toolkit)" >&2
  exit 2
fi
passed=()
failed=()
for t in "${{TESTS[@]}}"; do
  echo "=== $MODE: $t"
  if ${{WRAP[@]+"${{WRAP[@]}}"}} ./"$t" --test-threads=1 "$@"; then
    passed+=("$t")
  else
    failed+=("$t")
  fi
done
echo
echo "summary ($MODE): ${{#passed[@]}} passed, ${{#failed[@]}} failed, of ${{#TESTS[@]}} test binaries"
for t in ${{failed[@]+"${{failed[@]}}"}}; do echo "  FAILED: $t"; done
[ ${{#failed[@]}} -eq 0 ]
"#,
        tests = list(Kind::Test),
        benches = list(Kind::Bench),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_cargo_messages() {
        let out = concat!(
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/host#cuqr@0.1.0","target":{"kind":["lib"]},"profile":{"test":true},"executable":"/r/target/release/deps/cuqr-11"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r#cuqr-cli@0.1.0","target":{"kind":["bench"]},"profile":{"test":false},"executable":"/r/target/release/deps/kernels-22"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r#cuqr-cli@0.1.0","target":{"kind":["bin"]},"profile":{"test":false},"executable":"/r/target/release/cuqr"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r#cuqr-cli@0.1.0","target":{"kind":["lib"]},"profile":{"test":false},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","package_id":"path+file:///r/xtask#0.1.0","target":{"kind":["bin"]},"profile":{"test":false},"executable":"/r/target/release/xtask"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n"
        );
        let v = parse_messages(out).unwrap();
        assert_eq!(
            v.iter()
                .map(|e| (e.kind, e.path.to_str().unwrap()))
                .collect::<Vec<_>>(),
            [
                (Kind::Test, "/r/target/release/deps/cuqr-11"),
                (Kind::Bench, "/r/target/release/deps/kernels-22"),
                (Kind::Bin, "/r/target/release/cuqr"),
            ]
        );
        let s = run_script(&[
            (Kind::Test, "cuqr-11".into()),
            (Kind::Bench, "kernels-22".into()),
        ]);
        assert!(s.contains("TESTS=(\n  \"cuqr-11\"\n)"));
        assert!(s.contains("BENCHES=(\n  \"kernels-22\"\n)"));
        assert!(s.contains("CUQR_REQUIRE_GPU=1") && s.contains("--test-threads=1"));
        assert!(s.contains("./\"$b\" --bench ") && s.contains("--measurement-time 2"));
    }
}
