//! The library's layering, checked from its source: each module imports only from the
//! layers below it (or its own layer's other files where the layer allows it), no two
//! modules import each other in a circle, and `unsafe` appears only in `gpu/ffi` and
//! `gpu/launch`. Test code (from a file's first `#[cfg(test)]` on) is not checked: tests
//! may use any oracle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first: (module path prefix, rank). A module may import a layer of
/// lower rank, and its own layer; never one of the same rank under another prefix.
const LAYERS: &[(&str, u32)] = &[
    ("base", 0),
    ("cpu", 1),
    // The raw driver wrappers: FFI (so `unsafe`, in gpu/ffi) but below the runtime they
    // serve, as cudarc's driver::result is below driver::safe; the cuBLAS/cuSOLVER
    // wrappers sit above the runtime because they take its device views.
    ("gpu::ffi::driver", 1),
    ("gpu::runtime", 2),
    ("gpu::ffi", 3),
    ("gpu::launch", 4),
    ("gpu::algo", 5),
    ("gpu", 5),
    ("state", 6),
    ("ops", 7),
    ("backend", 8),
    ("batch", 9),
    ("lu", 9),
    ("mixed", 9),
    ("rolling", 9),
    ("small", 9),
    ("distributed", 9),
    ("explicit", 9),
    ("internals", 10),
    ("", 11), // lib.rs: the crate root re-exports
];

/// Layers that must not import the CPU kernels (GPU code takes shared logic from `base`).
const NO_CPU: &[&str] = &["gpu"];

/// Where `unsafe` may appear.
const UNSAFE_OK: &[&str] = &["gpu::ffi", "gpu::launch"];

fn layer_of(module: &str) -> (&'static str, u32) {
    LAYERS
        .iter()
        .filter(|(p, _)| p.is_empty() || module == *p || module.starts_with(&format!("{p}::")))
        .max_by_key(|(p, _)| p.len())
        .map(|&(p, r)| (p, r))
        .expect("the root layer matches everything")
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `gpu/launch/two_phase.rs` → `gpu::launch::two_phase`; `ops/solve/mod.rs` → `ops::solve`.
fn module_path(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

/// The code lines of a file before its tests, with line comments removed.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("#[cfg(test)]") {
            break;
        }
        let code = match line.find("//") {
            Some(k) => &line[..k],
            None => line,
        };
        out.push((i + 1, code.to_string()));
    }
    out
}

/// Every `crate::a::b…` and `super::…` path a line names, resolved to a module path.
fn imported_modules(module: &str, line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let bytes = line.as_bytes();
    for start in [("crate::", true), ("super::", false)] {
        let mut from = 0;
        while let Some(k) = line[from..].find(start.0) {
            let at = from + k;
            from = at + start.0.len();
            if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
                continue;
            }
            // the path's segments: lower-case identifiers joined by `::`
            let rest = &line[at..];
            let segs: Vec<&str> = rest
                .split("::")
                .map(|s| {
                    let end = s
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(s.len());
                    &s[..end]
                })
                .take_while(|s| !s.is_empty())
                .collect();
            let mut base: Vec<String> = if start.1 {
                Vec::new()
            } else {
                // `super` of module a::b (file a/b.rs or a/b/mod.rs) is a
                let mut b: Vec<String> = module.split("::").map(str::to_string).collect();
                b.pop();
                b
            };
            let mut rest_segs = &segs[1..];
            while rest_segs.first() == Some(&"super") {
                base.pop();
                rest_segs = &rest_segs[1..];
            }
            for s in rest_segs {
                if s.chars().next().is_some_and(|c| c.is_ascii_lowercase()) {
                    base.push((*s).to_string());
                } else {
                    break;
                }
            }
            found.push(base.join("::"));
        }
    }
    found
}

/// A module's unit for the circle check: its layer prefix plus one more segment.
fn unit_of(module: &str) -> String {
    let (prefix, _) = layer_of(module);
    let depth = if prefix.is_empty() {
        0
    } else {
        prefix.split("::").count()
    };
    module
        .split("::")
        .take(depth + 1)
        .collect::<Vec<_>>()
        .join("::")
}

#[test]
fn imports_point_down_and_unsafe_stays_in_ffi_and_launch() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rs_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 40, "found only {} source files", files.len());
    let mut violations = Vec::new();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_path(&src, file);
        let (layer, rank) = layer_of(&module);
        let text = std::fs::read_to_string(file).expect("read source");
        let rel = file.strip_prefix(&src).unwrap().display().to_string();
        for (line_no, code) in code_lines(&text) {
            if code.contains("unsafe")
                && !code.contains("unsafe_code")
                && !code.contains("unsafe_op_in_unsafe_fn")
                && !code.contains("undocumented_unsafe_blocks")
                && !UNSAFE_OK.iter().any(|p| module.starts_with(p))
            {
                violations.push(format!(
                    "{rel}:{line_no}: `unsafe` outside gpu/ffi and gpu/launch"
                ));
            }
            for target in imported_modules(&module, &code) {
                if target.is_empty() || module.is_empty() {
                    continue;
                }
                let (t_layer, t_rank) = layer_of(&target);
                let same_layer = t_layer == layer;
                if t_rank > rank || (t_rank == rank && !same_layer) {
                    violations.push(format!(
                        "{rel}:{line_no}: {module} (layer {layer}) imports {target} (layer {t_layer})"
                    ));
                }
                if NO_CPU.iter().any(|p| layer.starts_with(p)) && t_layer == "cpu" {
                    violations.push(format!(
                        "{rel}:{line_no}: GPU module {module} imports the CPU kernels ({target})"
                    ));
                }
                let (a, b) = (unit_of(&module), unit_of(&target));
                if a != b && !b.is_empty() {
                    edges.entry(a).or_default().insert(b);
                }
            }
        }
    }
    // circles between units (depth-first search with colours)
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
        out: &mut Vec<String>,
    ) {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                0 => visit(m, edges, state, stack, out),
                1 => {
                    let k = stack.iter().position(|s| s == m).unwrap();
                    out.push(format!("import circle: {} -> {m}", stack[k..].join(" -> ")));
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
    }
    let mut state = BTreeMap::new();
    let mut circles = Vec::new();
    for n in edges.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            visit(n, &edges, &mut state, &mut Vec::new(), &mut circles);
        }
    }
    violations.extend(circles);
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_checker_sees_an_upward_import_and_a_relative_path() {
    assert_eq!(layer_of("gpu::launch::two_phase"), ("gpu::launch", 4));
    assert_eq!(layer_of("gpu::ffi::driver"), ("gpu::ffi::driver", 1));
    assert_eq!(layer_of("gpu::ffi::blas"), ("gpu::ffi", 3));
    let found = imported_modules("gpu::runtime::device", "use crate::ops::solve::Plan;");
    assert_eq!(found, vec!["ops::solve".to_string()]);
    let found = imported_modules("ops::solve::cpu", "use super::plan::Plan;");
    assert_eq!(found, vec!["ops::solve::plan".to_string()]);
    let found = imported_modules("ops::solve", "use super::factorize::{Plan, X};");
    assert_eq!(found, vec!["ops::factorize".to_string()]);
    assert!(imported_modules("base::mat", "let supercrate::x = 1;").is_empty());
}
