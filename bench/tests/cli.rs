//! End-to-end tests of the `cuqr-bench` program (run by users as `cuqr bench ...`):
//! option checks of the groups (exit status 2, one stderr line), the quick tour
//! without a GPU, the CPU group, the Rust side of the Python overhead script, and GPU
//! smoke runs of `qr`, `tall` and `updates` (skipped without a GPU).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use cuqr::Mat;

// ---------- helpers: temp dirs, running the program ----------

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

fn temp_dir(tag: &str) -> PathBuf {
    let k = DIR_COUNTER.fetch_add(1, Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("cuqr-bench-{}-{tag}-{k}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The `cuqr-bench` program: cargo's build path, or, when the test runs from a GPU
/// bundle (`cargo xtask gpu-bundle`) on a machine without that path, the one next to
/// this test executable.
fn bench_exe() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_cuqr-bench"));
    if built.exists() {
        return built;
    }
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().join("cuqr-bench")
}

fn bench(args: &[&str]) -> Output {
    Command::new(bench_exe()).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn run_ok(args: &[&str]) -> Output {
    let o = bench(args);
    assert!(
        o.status.success(),
        "cuqr-bench {args:?} failed: {}",
        stderr(&o)
    );
    o
}

/// Asserts exit status 2 and exactly one stderr line `cuqr-bench: error: ...`
/// containing `needle`, with no panic message.
fn assert_cli_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "stderr must be one line: {err:?}");
    assert!(err.starts_with("cuqr-bench: error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in {err:?}");
}

#[test]
fn flags_take_no_value_and_unknown_groups_are_refused() {
    assert_cli_error(&bench(&["qr", "--quick=yes"]), "--quick takes no value");
    assert_cli_error(&bench(&["nope"]), "unknown group 'nope'");
    let o = bench(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("Groups:"));
}

// ---------- the groups ----------

/// Whether a GPU is usable; with `CUQR_REQUIRE_GPU=1` a missing one fails.
fn have_gpu() -> bool {
    match cuqr::Gpu::new(0) {
        Ok(_) => true,
        Err(e) if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("CUQR_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            false
        }
    }
}

/// Cells of a markdown table line.
fn md_cells(line: &str) -> Vec<String> {
    line.trim()
        .trim_matches('|')
        .split(" | ")
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn bench_qr_rejects_bad_options() {
    for (args, needle) in [
        (&["qr", "--dtype", "f16"][..], "--dtype must be"),
        (&["qr", "--reps", "2"], "at least 5"),
        (&["qr", "--shapes", "10x20"], "m >= n"),
        (&["qr", "--shapes", "64"], "not MxN"),
        (&["qr", "--max-n", "0"], "positive integer"),
        (&["qr", "--max-n", "16"], "no shape"),
        (&["qr", "--quick", "--shapes", "64x32"], "replaces the grid"),
        (&["qr", "--nope"], "unknown option --nope"),
        (&["qr", "stray"], "unexpected argument"),
        // Shapes whose byte size overflows (they wrapped to short device allocations).
        (&["qr", "--shapes", "18446744073709551615x1"], "too large"),
        (&["mixed", "--shapes", "4294967296x4294967296"], "too large"),
        (&["lu", "--sizes", "1024,4294967296"], "too large"),
    ] {
        assert_cli_error(&bench(args), needle);
    }
    let o = run_ok(&["qr", "--help"]);
    for needle in ["--dtype", "--max-n", "--shapes", "geqrf + orgqr", "m·u"] {
        assert!(stdout(&o).contains(needle), "{needle:?} missing from help");
    }
    assert!(stdout(&run_ok(&["--help"])).contains("qr "));
}

#[test]
fn bench_tall_rejects_bad_options() {
    for (args, needle) in [
        (&["tall", "--kinds", "full"][..], "--kinds: unknown 'full'"),
        (&["tall", "--ops", "insert_row"], "--ops: unknown"),
        (&["tall", "--precision", "f16"], "--precision: unknown"),
        (&["tall", "--shapes", "10x20"], "m >= n"),
        (&["tall", "--reps", "3"], "at least 5"),
        (&["tall", "--nope"], "unknown option --nope"),
    ] {
        assert_cli_error(&bench(args), needle);
    }
    let o = run_ok(&["tall", "--help"]);
    for needle in ["--kinds", "--ops", "orgqr", "insert_cols_device", "60%"] {
        assert!(stdout(&o).contains(needle), "{needle:?} missing from help");
    }
    assert!(stdout(&run_ok(&["--help"])).contains("tall "));
}

/// GPU smoke run of `bench tall` on one small shape: the header lines, one row per
/// kind and case with as many cells as the header, every cuSOLVER time measured, each
/// cuqr time measured or n/a with the reason, and the CSV with the same rows.
#[test]
fn bench_tall_small_shape_on_gpu() {
    if !have_gpu() {
        return;
    }
    let dir = temp_dir("bench-tall");
    let csv = dir.join("tall.csv");
    let o = run_ok(&[
        "tall",
        "--shapes",
        "3000x40",
        "--precision",
        "f64",
        "--csv",
        p(&csv),
    ]);
    let s = stdout(&o);
    for line in [
        "date: ",
        "device: ",
        "driver: ",
        "command: ",
        "copy bandwidth: ",
    ] {
        assert!(s.contains(line), "{line:?} missing from\n{s}");
    }
    let head = s
        .lines()
        .find(|l| l.starts_with("| shape |"))
        .map(md_cells)
        .unwrap_or_else(|| panic!("no table in\n{s}"));
    let col = |name: &str| head.iter().position(|c| c == name).unwrap();
    let rows: Vec<Vec<String>> = s
        .lines()
        .filter(|l| l.starts_with("| 3000×40 |"))
        .map(md_cells)
        .collect();
    // two kinds × (four block operations at p = 1 and p = 4, and rank-one)
    assert_eq!(rows.len(), 18, "{s}");
    for r in &rows {
        assert_eq!(r.len(), head.len(), "{r:?}");
        let base: f64 = r[col("cuSOLVER ms")]
            .parse()
            .unwrap_or_else(|_| panic!("{r:?}"));
        assert!(base > 0.0, "{r:?}");
        let cuqr = &r[col("cuqr ms")];
        let note = &r[col("note")];
        match cuqr.parse::<f64>() {
            Ok(t) => assert!(t > 0.0 && note.is_empty(), "{r:?}"),
            Err(_) => assert!(cuqr == "n/a" && note.starts_with("cuqr: "), "{r:?}"),
        }
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1 + 18, "{text}");
    assert!(text.starts_with("prec,m,n,kind,op,"), "{text}");
}

#[test]
fn bench_qr_quick_without_gpu_says_so() {
    if cuqr::Gpu::new(0).is_ok() {
        eprintln!("skipped: a GPU is present (the --quick grid would run in full)");
        return;
    }
    let o = run_ok(&["qr", "--quick"]);
    let s = stdout(&o);
    assert!(s.starts_with("no GPU"), "{s}");
    assert!(s.contains("nothing run"), "{s}");
    assert_eq!(s.lines().count(), 1, "{s}");
}

/// `cuqr bench --quick` (once "unknown group '--quick'") runs each group's `--quick` in
/// turn. Without a GPU it needs none, as `cuqr bench updates --quick` does not: the
/// groups that run on the GPU only are skipped with a line saying so, qr says it has
/// nothing to run and updates times its CPU columns. With a GPU the whole tour would
/// run, too long for a test: only the checks of its arguments run then.
#[test]
fn bench_quick_runs_each_group_in_turn() {
    let o = bench(&["--quick", "--reps", "5"]);
    assert_cli_error(&o, "bench --quick: unexpected argument '--reps'");
    assert!(stdout(&run_ok(&["--quick", "--help"])).contains("cuqr bench --quick"));
    if cuqr::Gpu::new(0).is_ok() {
        eprintln!("skipped: a GPU is present (the tour would run every group's quick grid)");
        return;
    }
    let s = stdout(&run_ok(&["--quick"]));
    assert!(s.starts_with("cuqr bench --quick: "), "{s}");
    assert!(s.contains("no GPU ("), "{s}");
    let heads: Vec<&str> = s.lines().filter(|l| l.starts_with("## ")).collect();
    assert_eq!(
        heads,
        [
            "## cuqr bench lu --quick",
            "## cuqr bench qr --quick",
            "## cuqr bench updates --quick",
            "## cuqr bench tall --quick",
            "## cuqr bench window --quick",
            "## cuqr bench mixed --quick",
            "## cuqr bench chains --quick",
            "## cuqr bench kernels --quick",
        ]
    );
    assert_eq!(s.matches("\nskipped: no GPU\n").count(), 6, "{s}");
    assert!(s.contains("cuqr bench qr measures GPU factorisations only; nothing run"));
    assert!(s.contains("CPU columns only"), "{s}");
    // the quick grid's nine points in both precisions, each with its CPU columns
    let rows: Vec<Vec<String>> = s
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| group"))
        .map(md_cells)
        .collect();
    assert_eq!(rows.len(), 18, "{s}");
    assert!(rows.iter().all(|r| r[20].ends_with(')')), "{s}");
}

/// GPU smoke run on tiny shapes: every column present, cuqr and both cuSOLVER
/// baselines timed, Kerr's accuracy criteria pass, the CSV matches the table.
#[test]
fn bench_qr_tiny_shapes_on_gpu() {
    if !have_gpu() {
        return;
    }
    let dir = temp_dir("bench-qr");
    let csv = dir.join("qr.csv");
    let o = run_ok(&[
        "qr",
        "--shapes",
        "384x192,257x257",
        "--dtype",
        "both",
        "--nb",
        "32",
        "--csv",
        p(&csv),
    ]);
    let out = stdout(&o);
    // the main table, then the phase split
    let (s, split) = out
        .split_once("\nPhase split")
        .unwrap_or_else(|| panic!("no phase split in\n{out}"));
    let head = s
        .lines()
        .find(|l| l.starts_with("| prec |"))
        .unwrap_or_else(|| panic!("no table in\n{s}"));
    let cols = md_cells(head);
    let col = |name: &str| {
        cols.iter()
            .position(|c| c == name)
            .unwrap_or_else(|| panic!("no column {name:?} in {cols:?}"))
    };
    let data_rows = |t: &str| -> Vec<Vec<String>> {
        t.lines()
            .filter(|l| l.starts_with("| f64 |") || l.starts_with("| f32 |"))
            .map(md_cells)
            .collect()
    };
    let rows = data_rows(s);
    assert_eq!(rows.len(), 4, "{s}");
    // one phase row per shape and precision, every time present and finite
    let split_head = split
        .lines()
        .find(|l| l.starts_with("| prec |"))
        .map(md_cells)
        .unwrap_or_else(|| panic!("no phase table in\n{split}"));
    let split_rows = data_rows(split);
    assert_eq!(split_rows.len(), 4, "{split}");
    for r in &split_rows {
        assert_eq!(r.len(), split_head.len(), "{r:?}");
        for name in ["total ms", "panel ms", "trailing ms", "Q ms"] {
            let i = split_head.iter().position(|c| c == name).unwrap();
            let v: f64 = r[i].parse().unwrap_or_else(|_| panic!("{name} in {r:?}"));
            assert!(v.is_finite() && v > 0.0, "{name} = {v}");
        }
    }
    for r in &rows {
        assert_eq!(r.len(), cols.len(), "{r:?}");
        for name in [
            "cuqr ms",
            "geqrf ms",
            "geqrf/cuqr",
            "cuqr+Q ms",
            "geqrf+orgqr ms",
            "‖QR−A‖/‖A‖",
            "‖QᵀQ−I‖",
        ] {
            let v: f64 = r[col(name)]
                .parse()
                .unwrap_or_else(|_| panic!("{name} = {:?} in {r:?}", r[col(name)]));
            assert!(v.is_finite() && v >= 0.0, "{name} = {v}");
        }
        let launches: u64 = r[col("launches")].parse().unwrap();
        assert!(launches > 0);
        assert_eq!(r[col("R zero below diag")], "yes", "{r:?}");
        assert!(r[col("accuracy")].starts_with("pass"), "{r:?}");
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    let head: Vec<&str> = lines[0].split(',').collect();
    let pass = head.iter().position(|c| *c == "accuracy_pass").unwrap();
    for l in &lines[1..] {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), head.len(), "{l}");
        assert_eq!(f[pass], "true", "{l}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// GPU smoke run of `bench updates --quick`: the Wavefront strategy columns are
/// filled exactly for the updates with a Givens stage, and its solution agrees
/// with the refactorisation's.
#[test]
fn bench_updates_quick_wavefront_columns_on_gpu() {
    if !have_gpu() {
        return;
    }
    let dir = temp_dir("bench-upd");
    let csv = dir.join("upd.csv");
    run_ok(&[
        "updates",
        "--quick",
        "--no-cpu",
        "--precision",
        "f64",
        "--csv",
        p(&csv),
    ]);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| head.iter().position(|c| *c == name).unwrap();
    let mut with_wf = 0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!(f.len(), head.len(), "{l}");
        let (kind, k0, n) = (f[at("update")], f[at("k0")], f[at("n")]);
        let givens = matches!(kind, "delete_rows" | "rank_one")
            || (kind == "insert_cols"
                && k0.parse::<usize>().unwrap() < n.parse::<usize>().unwrap());
        let wf = f[at("wavefront_ms")];
        assert_eq!(!wf.is_empty(), givens, "{l}");
        if givens {
            with_wf += 1;
            assert!(wf.parse::<f64>().unwrap() > 0.0);
            let e: f64 = f[at("e_x_wavefront")].parse().unwrap();
            assert!(e < 1e-8, "{l}");
            assert!(f[at("refac_over_wavefront")].parse::<f64>().unwrap() > 0.0);
        }
    }
    assert_eq!(with_wf, 4, "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `--csv` file that cannot be written, or an `--svg` directory that cannot be
/// created, is refused before the run (exit 2, one line naming the path), with or
/// without a GPU; before, the error came only after the whole sweep.
#[test]
fn bench_output_paths_are_checked_before_the_run() {
    let dir = temp_dir("bench-out");
    let bad_csv = dir.join("missing/dir/out.csv");
    let o = bench(&["qr", "--shapes", "64x32", "--csv", p(&bad_csv)]);
    assert_cli_error(&o, "missing/dir/out.csv");
    let o = bench(&["updates", "--quick", "--csv", p(&bad_csv)]);
    assert_cli_error(&o, "missing/dir/out.csv");
    let file = dir.join("plain");
    std::fs::write(&file, "x").unwrap();
    let bad_svg = file.join("plots");
    let o = bench(&["updates", "--quick", "--svg", p(&bad_svg)]);
    assert_cli_error(&o, "--svg");
}

/// `cuqr bench cpu` times a small shape with the reference and writes its CSV.
#[test]
fn bench_cpu_small_shape() {
    let dir = std::env::temp_dir().join(format!("cuqr-bench-cpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("cpu.csv");
    let o = run_ok(&[
        "cpu",
        "--shapes",
        "67x13",
        "--kinds",
        "thin,none",
        "--threads",
        "1,2",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let s = stdout(&o);
    let rows = s.lines().filter(|l| l.starts_with("| 67×13 ")).count();
    // factorize + 9 updates (4 operations with p = 1 and n/10, rank-one), two kinds,
    // two thread counts
    assert_eq!(rows, 2 * 2 * 10, "{s}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1 + rows, "{text}");
    assert!(
        text.starts_with("m,n,precision,kind,op,p,threads,cuqr_ms"),
        "{text}"
    );
    std::fs::remove_dir_all(&dir).ok();
    assert_cli_error(&bench(&["cpu", "--kinds", "both"]), "unknown kind 'both'");
}

/// `cuqr bench python` (the Rust side of scripts/python_overhead.py) times an update
/// pair on data read from .npy files and prints one JSON line with the seconds.
#[test]
fn bench_python_times_a_pair_on_the_cpu() {
    let dir = temp_dir("python");
    let (m, n) = (60, 8);
    let file = |name: &str, rows: usize, cols: usize, seed: usize| -> PathBuf {
        let a = Mat::<f64>::from_fn(rows, cols, |i, j| {
            let k = (i * 31 + j * 17 + seed) % 97;
            0.1 + 0.9 * k as f64 / 97.0 + if i == j { 2.0 } else { 0.0 }
        });
        let path = dir.join(format!("{name}.npy"));
        cuqr_cli::npy::write_file(&path, &a, false).unwrap();
        path
    };
    let paths = [
        ("--a", file("a", m, n, 1)),
        ("--b", file("b", m, 1, 2)),
        ("--col", file("col", m, 1, 3)),
        ("--row", file("row", n, 1, 4)),
    ];
    for op in ["rows", "cols", "rank_one"] {
        let mut args = vec!["python", "--op", op, "--reps", "3", "--rounds", "2"];
        for (flag, path) in &paths {
            args.extend([*flag, p(path)]);
        }
        let s = stdout(&run_ok(&args));
        let line = s.trim();
        assert!(
            line.starts_with(&format!("{{\"op\": \"{op}\", \"seconds\": ")),
            "{line}"
        );
        let secs: f64 = line
            .trim_end_matches('}')
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap_or_else(|_| panic!("{line}"));
        assert!(secs > 0.0 && secs.is_finite(), "{line}");
    }
    assert_cli_error(
        &bench(&["python", "--op", "rows"]),
        "missing required option --a",
    );
    assert_cli_error(&bench(&["python", "--op", "x"]), "--op must be");
    std::fs::remove_dir_all(&dir).ok();
}

/// `cuqr bench batch` on a small batch: four rows (factorize and three updates) per kind,
/// each with finite times; bad shapes and kinds are refused before the run.
#[test]
fn bench_batch_small_on_the_cpu() {
    let s = stdout(&run_ok(&[
        "batch",
        "--batch",
        "7",
        "--m",
        "13",
        "--n",
        "3",
        "--q",
        "none,thin,full",
    ]));
    assert!(s.starts_with("date: "), "{s}");
    assert!(s.contains("command: cuqr bench batch --batch 7"), "{s}");
    let rows: Vec<Vec<String>> = s
        .lines()
        .filter(|l| l.starts_with("| ") && l.contains("| 7 | 13×3 |"))
        .map(md_cells)
        .collect();
    assert_eq!(rows.len(), 3 * 4, "{s}");
    for r in &rows {
        for cell in &r[5..8] {
            let ms: f64 = cell.parse().unwrap_or_else(|_| panic!("{r:?}"));
            assert!(ms >= 0.0 && ms.is_finite(), "{r:?}");
        }
    }
    assert_cli_error(
        &bench(&["batch", "--m", "9", "--n", "8"]),
        "need m >= n + 2",
    );
    assert_cli_error(&bench(&["batch", "--q", "both"]), "unknown kind 'both'");
    assert_cli_error(
        &bench(&["batch", "--batch", "0"]),
        "--batch must be a positive",
    );
}
