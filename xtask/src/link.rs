//! The bitcode linker for the kernel crate.
//!
//! rustc's nvptx64 target expects `llvm-bitcode-linker`, which is not available; with
//! `-C linker=<this binary>` rustc calls us with the same arguments instead:
//! `--export-symbol NAME` per kernel, input objects (LLVM bitcode) and rlibs (ar archives
//! of bitcode), `--target-cpu sm_XX`, `-o OUT`, possibly via an `@file`. We run, from the
//! nightly sysroot's LLVM tools (directory in [`LLVM_BIN_ENV`]):
//! `llvm-link` → `opt -passes=internalize,globaldce` (keeping only the kernels) →
//! `opt -O3` → `llc -mcpu=sm_XX -O3`, which leaves no `.extern` for ptxas to reject.

use crate::util;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set by `build-ptx` for the nested cargo: "this process is the linker".
pub const LINKER_ENV: &str = "CUQR_XTASK_LINKER";
/// Directory holding `llvm-link`, `opt` and `llc` (nightly sysroot, llvm-tools).
pub const LLVM_BIN_ENV: &str = "CUQR_LLVM_BIN";
/// The PTX ISA version the module for `cpu` is written in, where llc's default is too
/// old: the sm_90 module uses `st.async` and `mbarrier` expect-tx (PTX 8.1).
pub fn ptx_version(cpu: &str) -> Option<&'static str> {
    (cpu == "sm_90").then_some("ptx81")
}

/// PTX target the kernels are built for (docs: sm_80 runs on A100, H100, H200 via JIT).
pub const DEFAULT_CPU: &str = "sm_80";

/// True when rustc runs us as its linker: the env marker, or llvm-bitcode-linker-style
/// arguments (`--export-symbol`, `--target-cpu`, or a response file).
pub fn invoked_as_linker(args: &[String]) -> bool {
    std::env::var_os(LINKER_ENV).is_some()
        || args
            .iter()
            .any(|a| a == "--export-symbol" || a == "--target-cpu")
}

/// Parsed linker invocation.
#[derive(Debug, Default)]
struct LinkArgs {
    exports: Vec<String>,
    inputs: Vec<PathBuf>,
    cpu: Option<String>,
    out: Option<PathBuf>,
}

/// Expands `@file` response files (one argument per line, as rustc writes them).
fn expand(args: &[String]) -> Result<Vec<String>, String> {
    let mut v = Vec::new();
    for a in args {
        if let Some(f) = a.strip_prefix('@') {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("cannot read linker response file {f}: {e}"))?;
            v.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
        } else {
            v.push(a.clone());
        }
    }
    Ok(v)
}

fn parse(args: &[String]) -> Result<LinkArgs, String> {
    let args = expand(args)?;
    let mut la = LinkArgs::default();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| format!("linker: {name} needs a value"))
        };
        match a.as_str() {
            "--export-symbol" => la.exports.push(value("--export-symbol")?),
            "--target-cpu" => la.cpu = Some(value("--target-cpu")?),
            "-o" => la.out = Some(PathBuf::from(value("-o")?)),
            // Accepted and ignored: the optimisation level is fixed (-O3) and so is the
            // target (the triple comes from the bitcode).
            // Library search paths: every input is named explicitly, so they are unused.
            "--target" | "-L" => {
                value(&a)?;
            }
            s if s.starts_with("-O") || s == "--debug" || s == "--fallback-arch" => {}
            s if s.starts_with('-') => return Err(format!("linker: unexpected argument `{s}`")),
            _ => la.inputs.push(PathBuf::from(a)),
        }
    }
    Ok(la)
}

fn tool(bin: &Path, name: &str) -> Result<PathBuf, String> {
    let p = bin.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} not found; install it with `rustup component add rust-src llvm-tools --toolchain nightly`",
            p.display()
        ))
    }
}

/// Runs the link pipeline for one rustc link request.
pub fn run(args: &[String]) -> Result<(), String> {
    let la = parse(args)?;
    let out = la.out.ok_or("linker: no -o OUT given")?;
    if la.exports.is_empty() {
        return Err("linker: no --export-symbol given (no kernels?)".into());
    }
    if la.inputs.is_empty() {
        return Err("linker: no input files".into());
    }
    let bin = PathBuf::from(std::env::var_os(LLVM_BIN_ENV).ok_or_else(|| {
        format!("linker: {LLVM_BIN_ENV} is not set (run through `cargo xtask build-ptx`)")
    })?);
    let cpu = la.cpu.unwrap_or_else(|| DEFAULT_CPU.to_string());
    let stem = out.with_extension("");
    let linked = stem.with_extension("linked.bc");
    let internal = stem.with_extension("internal.bc");
    let optimised = stem.with_extension("opt.bc");

    let work = stem.with_extension("xtask-link");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("create {}: {e}", work.display()))?;
    let inputs = bitcode_inputs(&bin, &la.inputs, &work)?;

    let mut link = Command::new(tool(&bin, "llvm-link")?);
    link.args(&inputs).arg("-o").arg(&linked);
    util::capture_quiet(&mut link)?;

    let mut keep = Command::new(tool(&bin, "opt")?);
    keep.arg("-passes=internalize,globaldce")
        .arg(format!(
            "-internalize-public-api-list={}",
            la.exports.join(",")
        ))
        .arg(&linked)
        .arg("-o")
        .arg(&internal);
    util::capture_quiet(&mut keep)?;

    let mut opt = Command::new(tool(&bin, "opt")?);
    opt.arg("-O3")
        .arg(format!("-mcpu={cpu}"))
        .arg(&internal)
        .arg("-o")
        .arg(&optimised);
    util::capture_quiet(&mut opt)?;

    let mut llc = Command::new(tool(&bin, "llc")?);
    llc.arg(format!("-mcpu={cpu}"));
    if let Some(ptx) = ptx_version(&cpu) {
        llc.arg(format!("-mattr=+{ptx}"));
    }
    llc.arg("-O3").arg(&optimised).arg("-o").arg(&out);
    util::capture_quiet(&mut llc)?;
    for f in [&linked, &internal, &optimised] {
        let _ = std::fs::remove_file(f);
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// True for LLVM bitcode: raw (`BC` 0xC0DE) or in the bitcode wrapper (0x0B17C0DE).
fn is_bitcode(bytes: &[u8]) -> bool {
    bytes.starts_with(b"BC\xC0\xDE") || bytes.starts_with(&[0xDE, 0xC0, 0x17, 0x0B])
}

/// The bitcode files to link: plain inputs as they are; archives (rlibs) unpacked with
/// `llvm-ar` into their own folder under `work`, keeping only bitcode members (an rlib
/// also holds `lib.rmeta`, which llvm-link rejects). Order is the command-line order,
/// then the archive's member order, so the link is deterministic.
fn bitcode_inputs(bin: &Path, inputs: &[PathBuf], work: &Path) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for (n, input) in inputs.iter().enumerate() {
        let head =
            std::fs::read(input).map_err(|e| format!("linker: read {}: {e}", input.display()))?;
        if head.starts_with(b"!<arch>\n") {
            let dir = work.join(format!("ar{n}"));
            std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
            let mut list = Command::new(tool(bin, "llvm-ar")?);
            list.arg("t").arg(input);
            let names = util::capture_quiet(&mut list)?;
            let mut x = Command::new(tool(bin, "llvm-ar")?);
            x.arg("x").arg(input).current_dir(&dir);
            util::capture_quiet(&mut x)?;
            for name in String::from_utf8_lossy(&names.stdout).lines() {
                let member = dir.join(name);
                let bytes = std::fs::read(&member)
                    .map_err(|e| format!("linker: read {}: {e}", member.display()))?;
                if is_bitcode(&bytes) && !out.contains(&member) {
                    out.push(member);
                }
            }
        } else if is_bitcode(&head) {
            out.push(input.clone());
        } else {
            return Err(format!(
                "linker: {} is neither bitcode nor an archive",
                input.display()
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bitcode_linker_arguments() {
        let args: Vec<String> = [
            "--export-symbol",
            "a_f32",
            "/tmp/x.o",
            "--export-symbol",
            "a_f64",
            "/tmp/libcore.rlib",
            "-L",
            "/tmp/raw-dylibs",
            "--target",
            "nvptx64-nvidia-cuda",
            "--target-cpu",
            "sm_80",
            "-O3",
            "--debug",
            "-o",
            "/tmp/out.ptx",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert!(invoked_as_linker(&args));
        let la = parse(&args).unwrap();
        assert_eq!(la.exports, ["a_f32", "a_f64"]);
        assert_eq!(
            la.inputs,
            [
                PathBuf::from("/tmp/x.o"),
                PathBuf::from("/tmp/libcore.rlib")
            ]
        );
        assert_eq!(la.cpu.as_deref(), Some("sm_80"));
        assert_eq!(la.out, Some(PathBuf::from("/tmp/out.ptx")));
        assert!(parse(&["--bogus".to_string()]).is_err());
    }
}
