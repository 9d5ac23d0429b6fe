//! `cargo xtask build-ptx [--check]`.

use crate::link;
use crate::util::{self, repo_root};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The host's kernel table, the one list of kernels (each must appear in the PTX as
/// `.entry <name>_f32(` and `_f64(`).
const HOST_KERNELS_RS: &str = "host/src/gpu/runtime/module.rs";

/// One committed PTX module: where it goes, the target it is built for, the `--cfg`
/// the kernel crate is built with, and where the host lists its kernels.
#[derive(Debug, Clone, Copy)]
struct Module {
    /// Committed PTX, relative to the repository root.
    path: &'static str,
    /// `-Ctarget-cpu` (and the `.target` the PTX must carry).
    cpu: &'static str,
    /// Extra `--cfg` for the kernel crate (selects the module's entries).
    cfg: Option<&'static str>,
    /// The host file and the macro whose body lists the module's kernels.
    table: (&'static str, &'static str),
    /// Sub-folder of the build's target dir (each module keeps its own build).
    subdir: &'static str,
}

/// The sm_80 module (every kernel but the Hopper ones) and the sm_90 module (kernels
/// that need thread-block clusters).
const MODULES: [Module; 2] = [
    Module {
        path: "host/ptx/cuqr_kernels.ptx",
        cpu: link::DEFAULT_CPU,
        cfg: None,
        table: (HOST_KERNELS_RS, "kernel_table! {"),
        subdir: "",
    },
    Module {
        path: "host/ptx/cuqr_kernels_sm90.ptx",
        cpu: "sm_90",
        cfg: Some("cuqr_sm90"),
        table: (HOST_KERNELS_RS, "sm90_kernel_table! {"),
        subdir: "sm90",
    },
];

/// Kernel base names from the body of the macro invocation `marker` in `src`
/// (e.g. `kernel_table! {` in host/src/gpu/runtime/module.rs): every line inside it that is a
/// bare identifier followed by a comma.
pub fn kernel_names_from(src: &str, marker: &str) -> Result<Vec<String>, String> {
    let start = src
        .find(marker)
        .ok_or_else(|| format!("no `{marker}` in the host kernel table"))?;
    let body = &src[start + marker.len()..];
    let end = body
        .find("\n}")
        .ok_or_else(|| format!("unterminated `{marker}`"))?;
    let names: Vec<String> = body[..end]
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_suffix(','))
        .filter(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_string)
        .collect();
    if names.is_empty() {
        return Err(format!("`{marker}` lists no kernels"));
    }
    Ok(names)
}

/// The base names in the host's `COMPLEX_KERNELS` list (kernels that also exist as
/// `<name>_c32` and `<name>_c64`), read from `src`; none when the list is absent.
pub fn complex_kernel_names_from(src: &str) -> Vec<String> {
    let Some(start) = src.find("pub const COMPLEX_KERNELS") else {
        return Vec::new();
    };
    let body = &src[start..];
    let end = body.find(';').unwrap_or(body.len());
    body[..end]
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The complex kernels of module `m` (the sm_80 module's `COMPLEX_KERNELS`; none for
/// the sm_90 one).
fn module_complex_kernels(m: &Module) -> Result<Vec<String>, String> {
    if m.cfg.is_some() {
        return Ok(Vec::new());
    }
    let path = repo_root().join(m.table.0);
    let src =
        std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    Ok(complex_kernel_names_from(&src))
}

/// The kernel names of module `m`'s host table, read from the repository.
fn module_kernels(m: &Module) -> Result<Vec<String>, String> {
    let path = repo_root().join(m.table.0);
    let src =
        std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
    kernel_names_from(&src, m.table.1)
}

/// The cdylib artifact name rustc gives the kernel crate on nvptx64.
const ARTIFACT: &str = "nvptx64-nvidia-cuda/release/cuqr_kernels.ptx";
/// Where rustc writes the artifact before cargo uplifts it.
const ARTIFACT_DEPS: &str = "nvptx64-nvidia-cuda/release/deps/cuqr_kernels.ptx";
/// Architecture ptxas checks against (Hopper: the machines the project runs on).
const PTXAS_ARCH: &str = "sm_90";
/// PyPI wheel that ships a CPU-only `ptxas`.
const PTXAS_WHEEL: &str = "nvidia-cuda-nvcc-cu12";

const INSTALL_HINT: &str = "install the nightly toolchain and its components with \
`rustup toolchain install nightly` and \
`rustup component add rust-src llvm-tools --toolchain nightly`";

/// Entry point of `build-ptx`.
pub fn build_ptx(args: &[String]) -> Result<(), String> {
    let check = match args {
        [] => false,
        [a] if a == "--check" => true,
        _ => {
            return Err(format!(
                "build-ptx: unexpected arguments {args:?} (only --check)"
            ))
        }
    };
    let root = repo_root();
    for m in &MODULES {
        let committed = root.join(m.path);
        if check {
            let tmp = std::env::temp_dir().join(format!("cuqr-ptx-check-{}", std::process::id()));
            let result = check_ptx(&root, &tmp, &committed, m);
            let _ = std::fs::remove_dir_all(&tmp);
            result?;
        } else {
            let target = root.join("gpu-kernels/target").join(m.subdir);
            let ptx = build(&root, &target, m)?;
            validate(
                &ptx,
                &module_kernels(m)?,
                &module_complex_kernels(m)?,
                m.cpu,
            )?;
            if let Some(dir) = committed.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("create {}: {e}", dir.display()))?;
            }
            std::fs::write(&committed, &ptx)
                .map_err(|e| format!("write {}: {e}", committed.display()))?;
            println!("wrote {} ({} bytes)", committed.display(), ptx.len());
        }
    }
    Ok(())
}

fn check_ptx(root: &Path, tmp: &Path, committed: &Path, m: &Module) -> Result<(), String> {
    let fresh = build(root, tmp, m)?;
    let kernels = module_kernels(m)?;
    let complex = module_complex_kernels(m)?;
    validate(&fresh, &kernels, &complex, m.cpu)?;
    let old = std::fs::read_to_string(committed).map_err(|e| {
        format!(
            "cannot read {}: {e} (run `cargo xtask build-ptx`)",
            committed.display()
        )
    })?;
    let path = m.path;
    if old != fresh {
        let line = old
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .map_or_else(|| "length".to_string(), |i| format!("line {}", i + 1));
        return Err(format!(
            "{path} is stale: a fresh build differs (first difference at {line}); \
             run `cargo xtask build-ptx` and commit the result"
        ));
    }
    println!("{path} is up to date");
    let fresh_path = tmp.join("cuqr_kernels.ptx");
    std::fs::write(&fresh_path, &fresh)
        .map_err(|e| format!("write {}: {e}", fresh_path.display()))?;
    let ptxas = ensure_ptxas(root)?;
    let report = run_ptxas(&ptxas, &fresh_path, kernels.len() + complex.len())?;
    print_table(&report);
    Ok(())
}

fn nightly_sysroot() -> Result<PathBuf, String> {
    let mut cmd = Command::new("rustc");
    cmd.args(["+nightly", "--print", "sysroot"])
        .env_remove("RUSTUP_TOOLCHAIN");
    let out = util::capture(&mut cmd)
        .map_err(|e| format!("no nightly toolchain: {e}\n{INSTALL_HINT}"))?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Builds the kernel crate into `target_dir` and returns the PTX text.
fn build(root: &Path, target_dir: &Path, m: &Module) -> Result<String, String> {
    let sysroot = nightly_sysroot()?;
    let host = "x86_64-unknown-linux-gnu";
    let llvm_bin = sysroot.join("lib/rustlib").join(host).join("bin");
    for t in ["llvm-link", "opt", "llc"] {
        if !llvm_bin.join(t).is_file() {
            return Err(format!(
                "{} missing from the nightly sysroot; {INSTALL_HINT}",
                llvm_bin.join(t).display()
            ));
        }
    }
    if !sysroot.join("lib/rustlib/src/rust/library/core").is_dir() {
        return Err(format!(
            "rust-src is missing from the nightly toolchain; {INSTALL_HINT}"
        ));
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot locate the xtask binary: {e}"))?;
    // Encoded flags (0x1f-separated) so paths with spaces survive.
    let mut rustflags = vec![
        format!("-Clinker={}", exe.display()),
        format!("-Ctarget-cpu={}", m.cpu),
        // Reproducible output: no absolute paths of this machine in the artifact.
        format!("--remap-path-prefix={}=/cuqr", root.display()),
    ];
    if let Some(cfg) = m.cfg {
        rustflags.extend(["--cfg".to_string(), cfg.to_string()]);
    }
    let rustflags = rustflags.join("\x1f");
    let artifact = target_dir.join(ARTIFACT);
    // Force a relink: cargo does not know when the linker (this binary) changed.
    // Both the uplifted artifact and cargo's copy in deps/ must go, or cargo replays the
    // old link.
    let _ = std::fs::remove_file(&artifact);
    let _ = std::fs::remove_file(target_dir.join(ARTIFACT_DEPS));
    let mut cmd = Command::new("cargo");
    cmd.current_dir(root.join("gpu-kernels"))
        .args([
            "+nightly",
            "build",
            "--release",
            "--target",
            "nvptx64-nvidia-cuda",
            "-Zbuild-std=core",
        ])
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("RUSTC")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_BUILD_RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .env("CARGO_TARGET_DIR", target_dir)
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags)
        .env(link::LINKER_ENV, "1")
        .env(link::LLVM_BIN_ENV, &llvm_bin);
    util::run(&mut cmd)?;
    let ptx = std::fs::read_to_string(&artifact)
        .map_err(|e| format!("no PTX at {}: {e}", artifact.display()))?;
    Ok(with_directives(&ptx))
}

/// Per-kernel PTX performance directives (`.maxntid`), which Rust has no attribute for:
/// (kernel-name prefix, directive; the first match applies). `fused_panel_qr` runs 512
/// threads per block, so ptxas must keep it within 128 registers a thread; the TSQR
/// leaf kernels run 256 threads, in f32 two blocks an SM (128 registers, a few spills:
/// faster on the H100 than one block without), in f64 one block an SM (up to 255
/// registers: the chain keeps a 32-row column and the broadcast column in registers;
/// two blocks with 128 registers spilled and were slower), `tsqr_reconstruct` 1024 (64
/// registers).
const DIRECTIVES: &[(&str, &str)] = &[
    ("fused_panel_qr_", ".maxntid 512, 1, 1"),
    ("tsqr_leaf_qr_f32", ".maxntid 256, 1, 1\n.minnctapersm 2"),
    ("tsqr_leaf_apply_f32", ".maxntid 256, 1, 1\n.minnctapersm 2"),
    ("tsqr_leaf_", ".maxntid 256, 1, 1\n.minnctapersm 1"),
    ("tsqr_reconstruct_", ".maxntid 1024, 1, 1"),
    ("ts_gemm_partial_", ".maxntid 256, 1, 1\n.minnctapersm 2"),
    ("two_phase_gen_chains_", ".maxntid 256, 1, 1"),
];

/// Inserts [`DIRECTIVES`] between each matching entry's parameter list and its body.
fn with_directives(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len() + 64);
    let mut pending: Option<&str> = None;
    for line in ptx.split_inclusive('\n') {
        if let Some(name) = line.trim_start().strip_prefix(".visible .entry ") {
            pending = DIRECTIVES
                .iter()
                .find(|(prefix, _)| name.starts_with(prefix))
                .map(|(_, d)| *d);
        }
        if line.trim_end() == "{" {
            if let Some(d) = pending.take() {
                out.push_str(d);
                out.push('\n');
            }
        }
        out.push_str(line);
    }
    out
}

/// Checks that the PTX has no `.extern` other than the dynamic shared memory
/// declaration (`.extern .shared ... []`, which is how PTX spells launch-sized shared
/// memory), targets `cpu`, and has every kernel of `kernels` in both dtypes and every one
/// of `complex` as `_c32` and `_c64` too.
fn validate(ptx: &str, kernels: &[String], complex: &[String], cpu: &str) -> Result<(), String> {
    let is_dyn_smem =
        |l: &str| l.trim_start().starts_with(".extern .shared") && l.trim_end().ends_with("[];");
    if let Some(l) = ptx
        .lines()
        .find(|l| l.contains(".extern") && !is_dyn_smem(l))
    {
        return Err(format!(
            "PTX still has an external reference: `{}`",
            l.trim()
        ));
    }
    if !ptx.contains(&format!(".target {cpu}")) {
        return Err(format!("PTX does not target {cpu}"));
    }
    let mut missing = Vec::new();
    let typed = kernels
        .iter()
        .flat_map(|k| ["f32", "f64"].map(|t| format!("{k}_{t}")))
        .chain(
            complex
                .iter()
                .flat_map(|k| ["c32", "c64"].map(|t| format!("{k}_{t}"))),
        );
    for name in typed {
        if !ptx.contains(&format!(".entry {name}(")) {
            missing.push(name);
        }
    }
    if missing.is_empty() {
        println!(
            "all {} kernels present in f32 and f64; no .extern besides dynamic shared memory",
            kernels.len()
        );
        Ok(())
    } else {
        Err(format!(
            "kernels missing from the PTX: {}",
            missing.join(", ")
        ))
    }
}

fn find_ptxas(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    for py in std::fs::read_dir(&lib).ok()?.flatten() {
        let p = py.path().join("site-packages/nvidia/cuda_nvcc/bin/ptxas");
        if p.is_file() {
            return Some(p);
        }
    }
    None
}

/// `ptxas` from the PyPI wheel, in the repository's `.venv` (created on demand).
fn ensure_ptxas(root: &Path) -> Result<PathBuf, String> {
    let venv = root.join(".venv");
    if let Some(p) = find_ptxas(&venv) {
        return Ok(p);
    }
    if !venv.join("bin/pip").is_file() {
        util::run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    util::run(Command::new(venv.join("bin/pip")).args(["install", "--quiet", PTXAS_WHEEL]))?;
    find_ptxas(&venv).ok_or_else(|| {
        format!(
            "ptxas not found in {} after installing {PTXAS_WHEEL}",
            venv.display()
        )
    })
}

/// Per-kernel resource usage reported by `ptxas -v`.
#[derive(Debug, Default, Clone, PartialEq)]
struct Usage {
    name: String,
    registers: u32,
    stack: u32,
    spill_stores: u32,
    spill_loads: u32,
}

fn run_ptxas(ptxas: &Path, ptx: &Path, kernels: usize) -> Result<Vec<Usage>, String> {
    let mut cmd = Command::new(ptxas);
    cmd.args(["-arch", PTXAS_ARCH, "-v"])
        .arg(ptx)
        .arg("-o")
        .arg(ptx.with_extension("cubin"));
    let out = util::capture(&mut cmd)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let usage = parse_ptxas(&text);
    let expected = 2 * kernels;
    if usage.len() != expected {
        return Err(format!(
            "ptxas reported {} kernels, expected {expected} (every kernel_table! entry in f32 and f64, every COMPLEX_KERNELS one in c32 and c64 too):\n{text}",
            usage.len(),
        ));
    }
    Ok(usage)
}

/// Number right before `word` in `line` ("... 32 registers", "8 bytes spill stores").
fn number_before(line: &str, word: &str) -> Option<u32> {
    let i = line.find(word)?;
    line[..i].split_whitespace().last()?.parse().ok()
}

fn parse_ptxas(text: &str) -> Vec<Usage> {
    let mut v: Vec<Usage> = Vec::new();
    for line in text.lines() {
        if let Some(i) = line.find("Compiling entry function '") {
            let rest = &line[i + "Compiling entry function '".len()..];
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            v.push(Usage {
                name,
                ..Usage::default()
            });
        } else if let Some(u) = v.last_mut() {
            if line.contains("bytes stack frame") {
                u.stack = number_before(line, "bytes stack frame").unwrap_or(0);
                u.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
                u.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains(" registers") {
                u.registers = number_before(line, "registers").unwrap_or(0);
            }
        }
    }
    v
}

fn print_table(usage: &[Usage]) {
    println!("ptxas -arch={PTXAS_ARCH} -v:");
    println!("| kernel | registers | stack (B) | spill stores (B) | spill loads (B) |");
    println!("|---|---:|---:|---:|---:|");
    for u in usage {
        println!(
            "| {} | {} | {} | {} | {} |",
            u.name, u.registers, u.stack, u.spill_stores, u.spill_loads
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_verbose_output() {
        let text = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'reduce_dot_f64' for 'sm_90'\n\
ptxas info    : Function properties for reduce_dot_f64\n\
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n\
ptxas info    : Used 17 registers, used 1 barriers, 384 bytes cmem[0]\n\
ptxas info    : Compiling entry function 'wy_set_tau_f32' for 'sm_90'\n\
ptxas info    : Function properties for wy_set_tau_f32\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 8 registers, 380 bytes cmem[0]\n";
        let u = parse_ptxas(text);
        assert_eq!(u.len(), 2);
        assert_eq!(
            u[0],
            Usage {
                name: "reduce_dot_f64".into(),
                registers: 17,
                stack: 8,
                spill_stores: 4,
                spill_loads: 12
            }
        );
        assert_eq!(
            (u[1].name.as_str(), u[1].registers, u[1].spill_loads),
            ("wy_set_tau_f32", 8, 0)
        );
    }

    #[test]
    fn directives_go_between_parameters_and_body() {
        let ptx = ".visible .entry fused_panel_qr_f64(\n\t.param .u64 a\n)\n{\n\tret;\n}\n\
                   .visible .entry other_f64(\n)\n{\n\tret;\n}\n";
        let out = with_directives(ptx);
        assert!(out.contains(")\n.maxntid 512, 1, 1\n{\n\tret;"));
        assert_eq!(out.matches(".maxntid").count(), 1);
    }

    #[test]
    fn validate_rejects_extern_and_missing_kernels() {
        let mut ptx = String::from(".version 7.0\n.target sm_80\n");
        let kernels = module_kernels(&MODULES[0]).unwrap();
        for k in &kernels {
            ptx.push_str(&format!(
                ".visible .entry {k}_f32(\n.visible .entry {k}_f64(\n"
            ));
        }
        assert!(kernels.iter().any(|k| k == "wy_build_t") && kernels.len() > 20);
        let complex = module_complex_kernels(&MODULES[0]).unwrap();
        assert_eq!(complex, ["rotation_chain_apply"]);
        assert!(module_complex_kernels(&MODULES[1]).unwrap().is_empty());
        for k in &complex {
            ptx.push_str(&format!(
                ".visible .entry {k}_c32(\n.visible .entry {k}_c64(\n"
            ));
        }
        let v = |p: &str, cpu: &str| validate(p, &kernels, &complex, cpu);
        assert!(v(&ptx, "sm_80").is_ok());
        assert!(v(&format!("{ptx}.extern .func foo\n"), "sm_80").is_err());
        let dyn_smem = format!("{ptx}.extern .shared .align 8 .b8 smem[];\n");
        assert!(v(&dyn_smem, "sm_80").is_ok());
        let sized = format!("{ptx}.extern .shared .align 8 .b8 smem[64];\n");
        assert!(v(&sized, "sm_80").is_err());
        let missing = ptx.replace(".entry wy_build_t_f64(", "");
        assert!(v(&missing, "sm_80").is_err());
        let no_complex = ptx.replace(".entry rotation_chain_apply_c64(", "");
        assert!(v(&no_complex, "sm_80").is_err());
        // a module must carry its own target
        assert!(v(&ptx, "sm_90").is_err());
    }

    #[test]
    fn both_modules_list_their_kernels() {
        let main = module_kernels(&MODULES[0]).unwrap();
        let sm90 = module_kernels(&MODULES[1]).unwrap();
        assert!(main.iter().any(|k| k == "lu_panel_coop"));
        assert_eq!(sm90, vec!["lu_cluster_panel".to_string()]);
        assert!(main.iter().all(|k| !sm90.contains(k)));
        assert_eq!((MODULES[0].cpu, MODULES[1].cpu), ("sm_80", "sm_90"));
    }
}
