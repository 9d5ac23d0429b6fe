//! End-to-end tests of the `cuqr` binary: `cuqr update` for every operation on
//! small random `.npy` inputs (f64 C order, f32 Fortran order), checked against
//! plain-loop computations on the updated matrix Ã (tolerance 10·m·u, see
//! docs/algorithms.md#accuracy-measures); error handling (exit status 2, one stderr
//! line); `cuqr demo`; `cuqr bench` forwarding to the `cuqr-bench` program (whose own
//! tests are bench/tests/cli.rs).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

// ---------- helpers: temp dirs, running the binary ----------

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

fn temp_dir(tag: &str) -> PathBuf {
    let k = DIR_COUNTER.fetch_add(1, Ordering::SeqCst);
    let d = std::env::temp_dir().join(format!("cuqr-cli-{}-{tag}-{k}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The `cuqr` binary: cargo's build path, or, when the test runs from a GPU bundle
/// (`cargo xtask gpu-bundle`) on a machine without that path, the `cuqr` next to
/// this test executable.
fn cuqr_exe() -> PathBuf {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_cuqr"));
    if built.exists() {
        return built;
    }
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().join("cuqr")
}

fn cuqr(args: &[&str]) -> Output {
    Command::new(cuqr_exe()).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Asserts exit status 2 and exactly one stderr line `cuqr: error: ...`
/// containing `needle`, with no panic message.
fn assert_cli_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "stderr must be one line: {err:?}");
    assert!(err.starts_with("cuqr: error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains(needle), "expected {needle:?} in {err:?}");
}

// ---------- an independent .npy writer and reader ----------

/// A dense matrix held column-major in f64.
#[derive(Clone, Debug)]
struct M {
    r: usize,
    c: usize,
    d: Vec<f64>,
}

impl M {
    fn at(&self, i: usize, j: usize) -> f64 {
        self.d[i + j * self.r]
    }
    fn random(rng: &mut StdRng, r: usize, c: usize, f32_exact: bool) -> M {
        let d = (0..r * c)
            .map(|_| {
                let x: f64 = rng.random_range(-1.0..1.0);
                if f32_exact {
                    x as f32 as f64
                } else {
                    x
                }
            })
            .collect();
        M { r, c, d }
    }
    fn from_fn(r: usize, c: usize, f: impl Fn(usize, usize) -> f64) -> M {
        let mut d = Vec::with_capacity(r * c);
        for j in 0..c {
            for i in 0..r {
                d.push(f(i, j));
            }
        }
        M { r, c, d }
    }
    fn fro(&self) -> f64 {
        self.d.iter().map(|x| x * x).sum::<f64>().sqrt()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Layout {
    F64C,
    F32F,
}

/// Writes `a` as .npy: f64 C order or f32 Fortran order; `one_d` needs one column.
fn write_npy(path: &Path, a: &M, layout: Layout, one_d: bool) {
    let (descr, fortran) = match layout {
        Layout::F64C => ("<f8", "False"),
        Layout::F32F => ("<f4", "True"),
    };
    let shape = if one_d {
        assert_eq!(a.c, 1);
        format!("({},)", a.r)
    } else {
        format!("({}, {})", a.r, a.c)
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    let order: Vec<f64> = match layout {
        Layout::F32F => a.d.clone(),
        Layout::F64C => (0..a.r)
            .flat_map(|i| (0..a.c).map(move |j| (i, j)))
            .map(|(i, j)| a.at(i, j))
            .collect(),
    };
    for x in order {
        match layout {
            Layout::F64C => bytes.extend_from_slice(&x.to_le_bytes()),
            Layout::F32F => bytes.extend_from_slice(&(x as f32).to_le_bytes()),
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// Reads a little-endian f4/f8 .npy (either order); returns (shape, matrix).
fn read_npy(path: &Path) -> (Vec<usize>, M) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..6], b"\x93NUMPY");
    let (hl, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    assert_eq!((start + hl) % 64, 0, "data should be 64-byte aligned");
    let h = std::str::from_utf8(&b[start..start + hl]).unwrap();
    let descr_at = h.find("'descr': '").unwrap() + 10;
    let descr = &h[descr_at..descr_at + 3];
    let fortran = h.contains("'fortran_order': True");
    let s0 = h.find("'shape': (").unwrap() + 10;
    let s1 = s0 + h[s0..].find(')').unwrap();
    let shape: Vec<usize> = h[s0..s1]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let body = &b[start + hl..];
    let vals: Vec<f64> = match descr {
        "<f8" => body
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        "<f4" => body
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        d => panic!("unexpected dtype {d}"),
    };
    let (r, c) = match shape.as_slice() {
        [k] => (*k, 1),
        [r, c] => (*r, *c),
        s => panic!("shape {s:?}"),
    };
    assert_eq!(vals.len(), r * c);
    let m = if fortran || shape.len() == 1 {
        M { r, c, d: vals }
    } else {
        M::from_fn(r, c, |i, j| vals[i * c + j])
    };
    (shape, m)
}

/// The raw token after `"key": ` in summary.json.
fn json_field(json: &str, key: &str) -> String {
    let pat = format!("\"{key}\": ");
    let at = json
        .find(&pat)
        .unwrap_or_else(|| panic!("{key} missing in {json}"))
        + pat.len();
    json[at..]
        .chars()
        .take_while(|&c| c != ',' && c != '\n')
        .collect()
}

// ---------- checks with plain loops ----------

/// Checks R (upper triangular, RᵀR ≈ ÃᵀÃ), x (normal equations of Ã, b̃)
/// and Q when present (QᵀQ ≈ I, QR ≈ Ã), with tolerance 10·m·u. R is m×n with the full
/// m×m Q, n×n with the thin Q₁ (m×n) and without Q.
fn check_outputs(out: &Path, at: &M, bt: &M, u: f64, expect_q: bool, x_one_d: bool) {
    let (m, n) = (at.r, at.c);
    let tol = 10.0 * m as f64 * u;
    let (rshape, r) = read_npy(&out.join("R.npy"));
    let rows = rshape[0];
    assert!(
        rshape == vec![n, n] || (expect_q && rshape == vec![m, n]),
        "R {rshape:?}"
    );
    for j in 0..n {
        for i in j + 1..rows {
            assert_eq!(r.at(i, j), 0.0, "R({i},{j}) below the diagonal");
        }
    }
    let an = at.fro();
    let mut gram = 0.0f64;
    for j in 0..n {
        for k in 0..n {
            let rr: f64 = (0..rows).map(|i| r.at(i, j) * r.at(i, k)).sum();
            let aa: f64 = (0..m).map(|i| at.at(i, j) * at.at(i, k)).sum();
            gram += (rr - aa).powi(2);
        }
    }
    let e_gram = gram.sqrt() / (an * an);
    assert!(e_gram <= tol, "‖RᵀR − ÃᵀÃ‖/‖Ã‖² = {e_gram:e} > {tol:e}");

    let (xshape, x) = read_npy(&out.join("x.npy"));
    let q = bt.c;
    if x_one_d {
        assert_eq!(xshape, vec![n]);
    } else {
        assert_eq!(xshape, vec![n, q]);
    }
    for c in 0..q {
        let res: Vec<f64> = (0..m)
            .map(|i| bt.at(i, c) - (0..n).map(|j| at.at(i, j) * x.at(j, c)).sum::<f64>())
            .collect();
        let grad: f64 = (0..n)
            .map(|j| (0..m).map(|i| at.at(i, j) * res[i]).sum::<f64>().powi(2))
            .sum::<f64>()
            .sqrt();
        let xn = (0..n).map(|j| x.at(j, c).powi(2)).sum::<f64>().sqrt();
        let bn = (0..m).map(|i| bt.at(i, c).powi(2)).sum::<f64>().sqrt();
        let bound = tol * an * (an * xn + bn);
        assert!(
            grad <= bound,
            "‖Ãᵀ(b̃ − Ãx)‖ = {grad:e} > {bound:e} (rhs {c})"
        );
    }

    let qpath = out.join("Q.npy");
    assert_eq!(qpath.exists(), expect_q);
    if expect_q {
        let (qshape, qm) = read_npy(&qpath);
        // the full Q (m×m) with an m×n R, the thin Q₁ (m×n) with an n×n R
        let qc = rows.max(n);
        assert_eq!(qshape, vec![m, qc]);
        let mut orth = 0.0f64;
        for j in 0..qc {
            for k in 0..qc {
                let d: f64 = (0..m).map(|i| qm.at(i, j) * qm.at(i, k)).sum();
                orth += (d - if j == k { 1.0 } else { 0.0 }).powi(2);
            }
        }
        assert!(orth.sqrt() <= tol, "e_Q = {:e} > {tol:e}", orth.sqrt());
        let mut diff = 0.0f64;
        for j in 0..n {
            for i in 0..m {
                let qr: f64 = (0..=j).map(|k| qm.at(i, k) * r.at(k, j)).sum();
                diff += (qr - at.at(i, j)).powi(2);
            }
        }
        assert!(
            diff.sqrt() / an <= tol,
            "e_A = {:e} > {tol:e}",
            diff.sqrt() / an
        );
    }
}

fn check_summary(out: &Path, m: usize, n: usize, op: &str, precision: &str, with_q: bool) {
    let unit = if precision == "f64" { U64 } else { U32 };
    let tol = 10.0 * m as f64 * unit;
    let s = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert_eq!(json_field(&s, "m"), m.to_string());
    assert_eq!(json_field(&s, "n"), n.to_string());
    assert_eq!(json_field(&s, "op"), format!("\"{op}\""));
    assert_eq!(json_field(&s, "precision"), format!("\"{precision}\""));
    // `auto` runs on the GPU where one opens (the GPU bundle), else on the CPU.
    let backend = json_field(&s, "backend");
    assert!(
        backend == "\"cpu\"" || backend == "\"gpu\"",
        "backend {backend}"
    );
    for key in [
        "k0",
        "p",
        "residual_norm",
        "factorize",
        "update",
        "solve",
        "e_x",
    ] {
        json_field(&s, key);
    }
    let resid: f64 = json_field(&s, "residual_norm").parse().unwrap();
    assert!(resid.is_finite() && resid >= 0.0);
    for key in ["e_Q", "e_A"] {
        let v = json_field(&s, key);
        if with_q {
            let e: f64 = v.parse().unwrap_or_else(|_| panic!("{key} = {v}"));
            assert!((0.0..=tol).contains(&e), "{key} = {e:e} > {tol:e}");
        } else {
            assert_eq!(v, "null", "{key} without Q");
        }
    }
}

const M0: usize = 45;
const N0: usize = 13;

struct Case {
    dir: PathBuf,
    a: M,
    b: M,
}

impl Case {
    /// The path of `name` in the case's folder, as a string.
    fn path(&self, name: &str) -> String {
        p(&self.dir.join(name)).to_string()
    }

    /// Writes `m` as `name` in the case's folder; returns its path.
    fn write(&self, name: &str, m: &M, layout: Layout, one_d: bool) -> String {
        write_npy(&self.dir.join(name), m, layout, one_d);
        self.path(name)
    }

    /// `cuqr update` on the case's A (and its b.npy where one was written) with `op`
    /// and `args`, into `<dir>/out`, which it returns; the run must succeed.
    fn update_ok(&self, op: &str, args: &[&str]) -> PathBuf {
        let (a, b, out) = (self.path("A.npy"), self.path("b.npy"), self.path("out"));
        let mut all = vec!["update", "--a", &a, "--op", op];
        if self.dir.join("b.npy").exists() {
            all.extend(["--b", &b]);
        }
        all.extend(args);
        all.extend(["--out", &out]);
        run_ok(&all);
        self.dir.join("out")
    }
}

/// Writes A (M0×N0) and, when q > 0, b (M0×q) in `layout`.
fn setup(tag: &str, seed: u64, layout: Layout, q: usize) -> (Case, StdRng) {
    let mut rng = StdRng::seed_from_u64(seed);
    let f32_exact = layout == Layout::F32F;
    let dir = temp_dir(tag);
    let a = M::random(&mut rng, M0, N0, f32_exact);
    write_npy(&dir.join("A.npy"), &a, layout, false);
    let b = if q == 0 {
        M::from_fn(M0, 1, |_, _| 1.0)
    } else {
        let b = M::random(&mut rng, M0, q, f32_exact);
        write_npy(&dir.join("b.npy"), &b, layout, q == 1);
        b
    };
    (Case { dir, a, b }, rng)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn run_ok(args: &[&str]) -> Output {
    let o = cuqr(args);
    assert!(o.status.success(), "cuqr {args:?} failed: {}", stderr(&o));
    o
}

const U64: f64 = f64::EPSILON / 2.0;
const U32: f64 = f32::EPSILON as f64 / 2.0;

/// Checks the outputs in `out` of an update `op` that gave Ã (`at`) and b̃ (`bt`):
/// [`check_outputs`] and [`check_summary`] at the precision's unit roundoff.
fn check_update(out: &Path, at: &M, bt: &M, op: &str, precision: &str, with_q: bool, x_1d: bool) {
    let unit = if precision == "f64" { U64 } else { U32 };
    check_outputs(out, at, bt, unit, with_q, x_1d);
    check_summary(out, at.r, at.c, op, precision, with_q);
}

// ---------- update: one test per operation ----------

#[test]
fn insert_cols_f64_c_order_two_rhs() {
    let (c, mut rng) = setup("ic64", 1, Layout::F64C, 2);
    let u = M::random(&mut rng, M0, 3, false);
    let uu = c.write("U.npy", &u, Layout::F64C, false);
    let args = ["--k0", "4", "--u", &uu, "--backend", "cpu"];
    let out = c.update_ok("insert-cols", &args);
    let at = M::from_fn(M0, N0 + 3, |i, j| match j {
        _ if j < 4 => c.a.at(i, j),
        _ if j < 7 => u.at(i, j - 4),
        _ => c.a.at(i, j - 3),
    });
    check_update(&out, &at, &c.b, "insert-cols", "f64", true, false);
}

#[test]
fn insert_cols_f32_fortran_1d_append() {
    let (c, mut rng) = setup("ic32", 2, Layout::F32F, 1);
    let u = M::random(&mut rng, M0, 1, true);
    let uu = c.write("u.npy", &u, Layout::F32F, true);
    let args = ["--k0", "13", "--u", &uu, "--precision", "f32"];
    let out = c.update_ok("insert-cols", &args);
    let at = M::from_fn(
        M0,
        N0 + 1,
        |i, j| if j < N0 { c.a.at(i, j) } else { u.at(i, 0) },
    );
    check_update(&out, &at, &c.b, "insert-cols", "f32", true, true);
}

#[test]
fn delete_cols_f64_without_q() {
    let (c, _) = setup("dc64", 3, Layout::F64C, 1);
    let args = ["--k0", "5", "--p", "3", "--q-policy", "none"];
    let out = c.update_ok("delete-cols", &args);
    let at = M::from_fn(M0, N0 - 3, |i, j| c.a.at(i, if j < 5 { j } else { j + 3 }));
    check_update(&out, &at, &c.b, "delete-cols", "f64", false, true);
}

#[test]
fn insert_rows_f32_fortran_with_e_default_b() {
    let (c, mut rng) = setup("ir32", 4, Layout::F32F, 0);
    let u = M::random(&mut rng, 4, N0, true);
    let e = M::random(&mut rng, 4, 1, true);
    let uu = c.write("U.npy", &u, Layout::F32F, false);
    let ee = c.write("e.npy", &e, Layout::F32F, true);
    let args = ["--k0", "10", "--u", &uu, "--e", &ee, "--precision", "f32"];
    let out = c.update_ok("insert-rows", &args);
    let pick = |i: usize| {
        if i < 10 {
            Some(i)
        } else if i < 14 {
            None
        } else {
            Some(i - 4)
        }
    };
    let at = M::from_fn(M0 + 4, N0, |i, j| {
        pick(i).map_or_else(|| u.at(i - 10, j), |s| c.a.at(s, j))
    });
    let bt = M::from_fn(M0 + 4, 1, |i, _| {
        pick(i).map_or_else(|| e.at(i - 10, 0), |_| 1.0)
    });
    check_update(&out, &at, &bt, "insert-rows", "f32", true, true);
}

#[test]
fn insert_rows_f64_one_row_two_rhs_no_q() {
    let (c, mut rng) = setup("ir64", 5, Layout::F64C, 2);
    let u = M::random(&mut rng, N0, 1, false);
    let uu = c.write("u.npy", &u, Layout::F64C, true);
    let args = ["--k0", "45", "--u", &uu, "--q-policy", "none"];
    let out = c.update_ok("insert-rows", &args);
    let at = M::from_fn(
        M0 + 1,
        N0,
        |i, j| if i < M0 { c.a.at(i, j) } else { u.at(j, 0) },
    );
    let bt = M::from_fn(M0 + 1, 2, |i, j| if i < M0 { c.b.at(i, j) } else { 1.0 });
    check_update(&out, &at, &bt, "insert-rows", "f64", false, false);
}

#[test]
fn delete_rows_f64_c_order() {
    let (c, _) = setup("dr64", 6, Layout::F64C, 1);
    let out = c.update_ok("delete-rows", &["--k0", "20", "--p", "5"]);
    let src = |i: usize| if i < 20 { i } else { i + 5 };
    let at = M::from_fn(M0 - 5, N0, |i, j| c.a.at(src(i), j));
    let bt = M::from_fn(M0 - 5, 1, |i, _| c.b.at(src(i), 0));
    check_update(&out, &at, &bt, "delete-rows", "f64", true, true);
}

#[test]
fn rank_one_f32_files_f64_precision_and_f32_precision() {
    for precision in ["f64", "f32"] {
        let (c, mut rng) = setup(&format!("r1{precision}"), 7, Layout::F32F, 1);
        let u = M::random(&mut rng, M0, 1, true);
        let v = M::random(&mut rng, N0, 1, true);
        let uu = c.write("u.npy", &u, Layout::F32F, true);
        let vv = c.write("v.npy", &v, Layout::F32F, true);
        let args = ["--u", &uu, "--v", &vv, "--precision", precision];
        let out = c.update_ok("rank-one", &args);
        let at = M::from_fn(M0, N0, |i, j| c.a.at(i, j) + u.at(i, 0) * v.at(j, 0));
        check_update(&out, &at, &c.b, "rank-one", precision, true, true);
        let s = std::fs::read_to_string(out.join("summary.json")).unwrap();
        assert_eq!(json_field(&s, "p"), "null");
    }
}

/// An R-only state (`--q-policy none`) keeps the A and b the CLI read, so the updates that
/// need them (rank-one, row deletion, column insertion) work without Q.
#[test]
fn updates_that_need_data_work_without_q() {
    let (c, mut rng) = setup("noq", 11, Layout::F64C, 1);
    let u = M::random(&mut rng, M0, 1, true);
    let v = M::random(&mut rng, N0, 1, true);
    let (uu, vv) = (
        c.write("u.npy", &u, Layout::F64C, true),
        c.write("v.npy", &v, Layout::F64C, true),
    );
    let out = c.update_ok("rank-one", &["--u", &uu, "--v", &vv, "--q-policy", "none"]);
    let at = M::from_fn(M0, N0, |i, j| c.a.at(i, j) + u.at(i, 0) * v.at(j, 0));
    check_update(&out, &at, &c.b, "rank-one", "f64", false, true);

    let out = c.update_ok(
        "delete-rows",
        &["--k0", "7", "--p", "3", "--q-policy", "none"],
    );
    let keep = |i: usize| if i < 7 { i } else { i + 3 };
    let at = M::from_fn(M0 - 3, N0, |i, j| c.a.at(keep(i), j));
    let bt = M::from_fn(M0 - 3, 1, |i, j| c.b.at(keep(i), j));
    check_update(&out, &at, &bt, "delete-rows", "f64", false, true);

    let out = c.update_ok(
        "insert-cols",
        &["--k0", "2", "--u", &uu, "--q-policy", "none"],
    );
    let at = M::from_fn(M0, N0 + 1, |i, j| match j {
        _ if j < 2 => c.a.at(i, j),
        2 => u.at(i, 0),
        _ => c.a.at(i, j - 1),
    });
    check_update(&out, &at, &c.b, "insert-cols", "f64", false, true);
}

// ---------- errors ----------

/// Each mistake exits with 2 and one stderr line naming it, and writes no output.
#[test]
fn errors_exit_2_with_one_line() {
    let (c, _) = setup("err", 8, Layout::F64C, 1);
    let a = c.path("A.npy");
    // .npy inputs that are not what they should be
    let missing = c.path("nope.npy");
    let mut rng = StdRng::seed_from_u64(99);
    let junk: Vec<u8> = (0..200).map(|_| rng.random()).collect();
    std::fs::write(c.dir.join("junk.npy"), junk).unwrap();
    // A valid header whose data is cut short.
    let mut trunc = std::fs::read(c.dir.join("A.npy")).unwrap();
    trunc.truncate(trunc.len() - 5);
    std::fs::write(c.dir.join("trunc.npy"), trunc).unwrap();
    // U with the wrong number of rows.
    let wrong_u = M::from_fn(M0 - 1, 2, |i, j| (i + j) as f64 + 0.5);
    let u = c.write("U.npy", &wrong_u, Layout::F64C, false);
    let (junk, trunc) = (c.path("junk.npy"), c.path("trunc.npy"));
    let delete_cols = ["--op", "delete-cols", "--k0", "0"];
    // (A, the options after --a, the text the error line must hold); no A: no --a
    let cases: Vec<(Option<&str>, Vec<&str>, &str)> = vec![
        (None, vec!["--op", "delete-cols", "--k0", "1"], "--a"),
        (
            Some(&a),
            vec!["--op", "swap-cols", "--k0", "1"],
            "swap-cols",
        ),
        (
            Some(&a),
            vec!["--op", "delete-cols", "--k0", "12", "--p", "3"],
            "k0=12",
        ),
        (Some(&a), vec!["--op", "delete-rows", "--k0", "45"], "k0=45"),
        (Some(&missing), delete_cols.to_vec(), "nope.npy"),
        (Some(&junk), delete_cols.to_vec(), "junk.npy"),
        (Some(&trunc), delete_cols.to_vec(), "bytes"),
        (
            Some(&a),
            vec!["--op", "insert-cols", "--k0", "0", "--u", &u],
            "rows",
        ),
        // Options that do not apply, bad values.
        (Some(&a), [&delete_cols[..], &["--v", &u]].concat(), "--v"),
        (Some(&a), vec!["--op", "delete-cols", "--k0", "x"], "--k0"),
        (
            Some(&a),
            [&delete_cols[..], &["--precision", "f16"]].concat(),
            "f16",
        ),
    ];
    let out = c.path("out");
    for (a_path, opts, needle) in cases {
        let mut args = vec!["update"];
        if let Some(a_path) = a_path {
            args.extend(["--a", a_path]);
        }
        args.extend(opts);
        args.extend(["--out", &out]);
        assert_cli_error(&cuqr(&args), needle);
    }
    assert_cli_error(
        &cuqr(&["update", "--a", &a, "--frobnicate", "1"]),
        "frobnicate",
    );
    assert_cli_error(&cuqr(&["frobnicate"]), "frobnicate");
    assert_cli_error(&cuqr(&[]), "no command");
    assert!(
        !c.dir.join("out").exists(),
        "no output may be written on error"
    );
}

/// Malformed or out-of-range inputs found by a robustness sweep: each exits with 2
/// and one clear line (a truncated preamble said "bad magic", a `Trueish`
/// fortran_order was accepted, float64 values beyond f32's range under
/// `--precision f32` were reported as non-finite entries the file does not hold,
/// `--quick=yes` was an "unknown option"); a matrix of subnormal numbers, which
/// failed as rank deficient with |r_jj| = inf, now factorises.
#[test]
fn malformed_inputs_and_extreme_values() {
    let (c, _) = setup("robust", 21, Layout::F64C, 1);
    let out = c.path("out");
    let delete = |a: &str, k0: &str, extra: &[&str]| {
        let mut args = vec!["update", "--a", a, "--op", "delete-cols", "--k0", k0];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--backend", "cpu", "--out", &out]);
        cuqr(&args)
    };
    let good = std::fs::read(c.dir.join("A.npy")).unwrap();
    std::fs::write(c.dir.join("short.npy"), &good[..8]).unwrap();
    let mut text = good.clone();
    let at = text.windows(5).position(|w| w == b"False").unwrap();
    assert_eq!(text[at + 5], b',');
    text[at + 5] = b'y'; // fortran_order: Falsey 'shape': ...
    std::fs::write(c.dir.join("falsey.npy"), text).unwrap();
    let mut huge = b"\x93NUMPY\x01\x00".to_vec();
    let h = "{'descr': '<f8', 'fortran_order': True, 'shape': (4294967296, 4294967296), }\n";
    huge.extend_from_slice(&(h.len() as u16).to_le_bytes());
    huge.extend_from_slice(h.as_bytes());
    std::fs::write(c.dir.join("huge.npy"), huge).unwrap();
    // float64 values beyond f32's range, in A and in b
    let big = M::from_fn(M0, N0, |i, j| c.a.at(i, j) * 1e300);
    let big = c.write("big.npy", &big, Layout::F64C, false);
    let bb = M::from_fn(M0, 1, |i, _| i as f64 * 1e100);
    let bb = c.write("bb.npy", &bb, Layout::F64C, true);
    let f32_b = ["--precision", "f32", "--b", &bb];
    // (A, options, the text the error line must hold)
    let cases: [(String, &[&str], &str); 5] = [
        (c.path("short.npy"), &[], "truncated .npy header"),
        (c.path("falsey.npy"), &[], "fortran_order"),
        (c.path("huge.npy"), &[], "too large"),
        (big, &["--precision", "f32"], "overflows f32"),
        (
            c.path("A.npy"),
            &f32_b,
            "bb.npy: entry (1, 0) = 1e100 overflows f32",
        ),
    ];
    for (a, extra, needle) in cases {
        assert_cli_error(&delete(&a, "0", extra), needle);
    }
    assert!(
        !c.dir.join("out").exists(),
        "no output may be written on error"
    );

    // A matrix of subnormal numbers factorises (f64: scaled by 2^-1060).
    let s = 2f64.powi(-530) * 2f64.powi(-530);
    let tiny = M::from_fn(M0, N0, |i, j| c.a.at(i, j) * s);
    let tiny = c.write("tiny.npy", &tiny, Layout::F64C, false);
    let o = delete(&tiny, "2", &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(c.dir.join("out/R.npy").exists());
}

#[test]
fn backend_gpu_either_works_or_fails_cleanly() {
    let (c, _) = setup("gpu", 9, Layout::F64C, 1);
    let (a, out) = (c.dir.join("A.npy"), c.dir.join("out"));
    let o = cuqr(&[
        "update",
        "--a",
        p(&a),
        "--op",
        "delete-cols",
        "--k0",
        "2",
        "--backend",
        "gpu",
        "--out",
        p(&out),
    ]);
    if !o.status.success() {
        assert_cli_error(&o, "CUDA device");
    }
}

// ---------- help and demo ----------

#[test]
fn help_texts() {
    let o = run_ok(&["--help"]);
    assert!(stdout(&o).contains("update") && stdout(&o).contains("demo"));
    let o = run_ok(&["update", "--help"]);
    for op in [
        "insert-cols",
        "delete-cols",
        "insert-rows",
        "delete-rows",
        "rank-one",
    ] {
        assert!(stdout(&o).contains(op), "{op} missing from update help");
    }
    let o = run_ok(&["help", "demo"]);
    assert!(stdout(&o).contains("--size"));
}

/// `cuqr bench ...` runs the `cuqr-bench` next to `cuqr` (else on PATH) with the same
/// arguments and exits with its status; without one it fails with one line saying how
/// to build it. A copy of `cuqr` in a folder of its own, with an empty PATH, sees
/// first no program and then a stand-in that echoes its arguments.
#[cfg(unix)]
#[test]
fn bench_forwards_to_the_cuqr_bench_program() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("forward");
    let exe = dir.join("cuqr");
    // a hard link (the running path is the link's), else a copy
    if std::fs::hard_link(cuqr_exe(), &exe).is_err() {
        std::fs::copy(cuqr_exe(), &exe).unwrap();
    }
    let run = |args: &[&str]| {
        Command::new(&exe)
            .args(args)
            .env("PATH", "")
            .output()
            .unwrap()
    };
    for args in [&["bench", "--help"][..], &["help", "bench"]] {
        assert_cli_error(&run(args), "cargo build --release -p cuqr-bench");
    }
    let stand_in = dir.join("cuqr-bench");
    std::fs::write(&stand_in, "#!/bin/sh\necho \"args: $*\"\nexit 3\n").unwrap();
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = run(&["bench", "qr", "--quick"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(stdout(&o), "args: qr --quick\n");
    assert_eq!(stdout(&run(&["help", "bench"])), "args: --help\n");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn demo_small_prints_the_table() {
    let o = run_ok(&["demo", "--size", "small", "--seed", "7"]);
    let s = stdout(&o);
    assert!(s.starts_with("backend: "), "{s}");
    for needle in [
        "speed-up",
        "refactor ms",
        "factorize",
        "observations",
        "-1 variable",
        "+3 variables",
        "rescale variable",
        "coefficients",
    ] {
        assert!(s.contains(needle), "{needle:?} missing in\n{s}");
    }
    let o = run_ok(&[
        "demo",
        "--size",
        "small",
        "--precision",
        "f32",
        "--backend",
        "cpu",
    ]);
    assert!(stdout(&o).contains("f32"));
}

// ---------- the composed updates and the window ----------

#[test]
fn rank_k_replace_cols_and_shift_col_f64() {
    let (c, mut rng) = setup("composed", 41, Layout::F64C, 1);
    let u = M::random(&mut rng, M0, 2, false);
    let v = M::random(&mut rng, N0, 2, false);
    let (uu, vv) = (
        c.write("U.npy", &u, Layout::F64C, false),
        c.write("V.npy", &v, Layout::F64C, false),
    );
    let out = c.update_ok("rank-k", &["--u", &uu, "--v", &vv, "--backend", "cpu"]);
    let at = M::from_fn(M0, N0, |i, j| {
        c.a.at(i, j) + u.at(i, 0) * v.at(j, 0) + u.at(i, 1) * v.at(j, 1)
    });
    check_update(&out, &at, &c.b, "rank-k", "f64", true, true);

    let out = c.update_ok(
        "replace-cols",
        &["--k0", "3", "--u", &uu, "--backend", "cpu"],
    );
    let at = M::from_fn(M0, N0, |i, j| match j {
        3 | 4 => u.at(i, j - 3),
        _ => c.a.at(i, j),
    });
    check_update(&out, &at, &c.b, "replace-cols", "f64", true, true);

    let out = c.update_ok("shift-col", &["--k0", "2", "--to", "9", "--backend", "cpu"]);
    let mut order: Vec<usize> = (0..N0).collect();
    let moved = order.remove(2);
    order.insert(9, moved);
    let at = M::from_fn(M0, N0, |i, j| c.a.at(i, order[j]));
    check_update(&out, &at, &c.b, "shift-col", "f64", true, true);

    let (a, o) = (c.path("A.npy"), c.path("out2"));
    let e = cuqr(&[
        "update",
        "--a",
        &a,
        "--op",
        "shift-col",
        "--k0",
        "1",
        "--out",
        &o,
    ]);
    assert_cli_error(&e, "--op shift-col needs --to");
}

/// Least-squares solution of rows r0..r0+len of (A, b) by faer, for the window checks.
fn lstsq_rows(a: &M, b: &M, r0: usize, len: usize) -> Vec<f64> {
    use faer::linalg::solvers::SolveLstsq;
    let af = faer::Mat::from_fn(len, a.c, |i, j| a.at(r0 + i, j));
    let bf = faer::Mat::from_fn(len, 1, |i, _| b.at(r0 + i, 0));
    let x = af.qr().solve_lstsq(&bf);
    (0..a.c).map(|i| x[(i, 0)]).collect()
}

#[test]
fn window_streams_rows_and_solves_each_window() {
    let (c, _) = setup("window", 43, Layout::F64C, 1);
    let (a, b) = (c.path("A.npy"), c.path("b.npy"));
    for policy in ["thin", "none", "full"] {
        let out = c.path(&format!("win_{policy}"));
        let args = [
            "window",
            "--a",
            &a,
            "--b",
            &b,
            "--window",
            "20",
            "--step",
            "3",
            "--q-policy",
            policy,
            "--backend",
            "cpu",
            "--out",
            &out,
        ];
        let o = run_ok(&args);
        assert!(stdout(&o).contains("8 steps of 3 rows"), "{}", stdout(&o));
        let (shape, xs) = read_npy(&c.dir.join(format!("win_{policy}")).join("x.npy"));
        assert_eq!(shape, vec![8, N0], "{policy}");
        for s in [0usize, 7] {
            let x = lstsq_rows(&c.a, &c.b, 3 * (s + 1), 20);
            let xn = x.iter().map(|v| v * v).sum::<f64>().sqrt();
            let dx = (0..N0)
                .map(|i| (xs.at(s, i) - x[i]).powi(2))
                .sum::<f64>()
                .sqrt();
            // 20×13 random windows: κ ≲ 10², so 1e-10 is far above 100·n·u·κ²
            assert!(dx <= 1e-10 * xn, "{policy} step {s}: |dx| {dx:e}");
        }
        let summary =
            std::fs::read_to_string(c.dir.join(format!("win_{policy}")).join("summary.json"))
                .unwrap();
        assert_eq!(json_field(&summary, "steps"), "8");
        assert_eq!(json_field(&summary, "q_policy"), format!("\"{policy}\""));
    }
    let out = c.path("win_err");
    let e = cuqr(&[
        "window", "--a", &a, "--window", "12", "--step", "3", "--out", &out,
    ]);
    assert_cli_error(&e, "shorter than the 13 columns");
    let e = cuqr(&[
        "window", "--a", &a, "--window", "20", "--step", "3", "--forget", "1.5", "--out", &out,
    ]);
    assert_cli_error(&e, "--forget must be a number in (0, 1]");
}

/// `--threads N` sets the CPU backend's thread count for `demo` and `update`; 0 and
/// non-numbers are refused.
#[test]
fn threads_option() {
    let o = run_ok(&[
        "demo",
        "--size",
        "small",
        "--backend",
        "cpu",
        "--threads",
        "1",
    ]);
    assert!(stdout(&o).contains("rescale variable"), "{}", stdout(&o));
    assert_cli_error(
        &cuqr(&["demo", "--size", "small", "--threads", "0"]),
        "--threads must be a positive integer",
    );
    assert_cli_error(
        &cuqr(&["demo", "--size", "small", "--threads", "x"]),
        "--threads must be a non-negative integer",
    );
}

#[test]
fn rolling_writes_each_windows_coefficients() {
    let dir = temp_dir("rolling");
    let t_len = 40;
    // y = 1 + 2·t on [1, t], exactly; row 5 of y is NaN (left out under --missing drop).
    let x = M::from_fn(t_len, 2, |i, j| if j == 0 { 1.0 } else { i as f64 });
    let mut y = M::from_fn(t_len, 1, |i, _| 1.0 + 2.0 * i as f64);
    y.d[5] = f64::NAN;
    let (xp, yp) = (dir.join("X.npy"), dir.join("y.npy"));
    write_npy(&xp, &x, Layout::F64C, false);
    write_npy(&yp, &y, Layout::F64C, true);
    let out = dir.join("out");
    let o = run_ok(&[
        "rolling",
        "--y",
        p(&yp),
        "--x",
        p(&xp),
        "--window",
        "10",
        "--expanding",
        "--min-nobs",
        "3",
        "--out",
        p(&out),
    ]);
    assert!(stdout(&o).contains("window 10"), "{}", stdout(&o));
    let (shape, params) = read_npy(&out.join("params.npy"));
    assert_eq!(shape, vec![t_len, 2]);
    for t in 0..t_len {
        if t < 2 {
            assert!(params.at(t, 0).is_nan());
        } else {
            assert!((params.at(t, 0) - 1.0).abs() < 1e-10, "t={t}");
            assert!((params.at(t, 1) - 2.0).abs() < 1e-10, "t={t}");
        }
    }
    let (shape, rss) = read_npy(&out.join("rss.npy"));
    assert_eq!(shape, vec![t_len]);
    assert!(rss.d[20].abs() < 1e-16);
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert_eq!(json_field(&summary, "estimated_windows"), "38");
    // Two series: params is T × S × k.
    let y2 = M::from_fn(t_len, 2, |i, s| (s + 1) as f64 * i as f64);
    write_npy(&yp, &y2, Layout::F32F, false);
    run_ok(&[
        "rolling",
        "--y",
        p(&yp),
        "--x",
        p(&xp),
        "--window",
        "7",
        "--backend",
        "auto",
        "--out",
        p(&out),
    ]);
    let head = std::fs::read(out.join("params.npy")).unwrap();
    let head = String::from_utf8_lossy(&head[..128]);
    assert!(head.contains("'shape': (40, 2, 2)"), "{head}");
    assert_cli_error(
        &cuqr(&[
            "rolling",
            "--y",
            p(&yp),
            "--x",
            p(&xp),
            "--window",
            "0",
            "--out",
            p(&out),
        ]),
        "window",
    );
}

/// `cuqr dist`'s data and launcher options are checked before any GPU or NCCL is touched.
#[test]
fn dist_refuses_bad_data_and_launch_options() {
    let (c, _) = setup("dist", 12, Layout::F64C, 1);
    let a = c.path("A.npy");
    let b_short = c.write(
        "bs.npy",
        &M::from_fn(M0 - 2, 1, |i, _| i as f64),
        Layout::F64C,
        true,
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["factorize", "--a", &a], "--a and --b come together"),
        (
            vec!["factorize", "--a", &a, "--b", "b{rank}.npy"],
            "both have {rank}",
        ),
        (vec!["factorize", "--a", &a, "--b", &b_short], "rows"),
        (
            vec!["window", "--a", "a{rank}.npy", "--b", "b{rank}.npy"],
            "give one --a file",
        ),
        (
            vec!["window", "--a", &a, "--b", &a, "--window", "0"],
            "--window 0",
        ),
        (
            vec!["factorize", "--launcher", "mpi", "--rows", "100"],
            "--launcher env",
        ),
        (
            vec!["factorize", "--a", "nope.npy", "--b", "nope.npy"],
            "nope.npy",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["dist"];
        all.extend(args);
        assert_cli_error(&cuqr(&all), needle);
    }
    // a launcher's variables without a rendezvous address
    let o = Command::new(cuqr_exe())
        .args(["dist", "factorize", "--launcher", "env", "--rows", "100"])
        .env("RANK", "0")
        .env("WORLD_SIZE", "2")
        .env_remove("MASTER_ADDR")
        .env_remove("CUQR_RENDEZVOUS")
        .output()
        .unwrap();
    assert_cli_error(&o, "CUQR_RENDEZVOUS");
}

/// `cuqr dist` on `.npy` data, three logical partitions of GPU 0: `factorize` writes the
/// least-squares solution of the whole file, `window` that of the rows the window ends
/// on. Without a GPU it must fail with one clean line (and the test says it skipped);
/// with `CUQR_REQUIRE_GPU=1` it must run.
#[test]
fn dist_solves_npy_data_on_logical_partitions() {
    let mut rng = StdRng::seed_from_u64(77);
    let (m, n) = (301, 7);
    let a = M::random(&mut rng, m, n, false);
    let b = M::random(&mut rng, m, 1, false);
    let dir = temp_dir("dist-data");
    let (fa, fb) = (dir.join("A.npy"), dir.join("b.npy"));
    write_npy(&fa, &a, Layout::F64C, false);
    write_npy(&fb, &b, Layout::F32F, true);
    // b is read back as the f32 values it holds
    let b32 = M::from_fn(m, 1, |i, _| b.at(i, 0) as f32 as f64);
    let out = dir.join("fact");
    let o = cuqr(&[
        "dist",
        "factorize",
        "--gpus",
        "1",
        "--parts",
        "3",
        "--a",
        p(&fa),
        "--b",
        p(&fb),
        "--out",
        p(&out),
    ]);
    if !o.status.success() {
        if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") {
            panic!("CUQR_REQUIRE_GPU=1 but cuqr dist failed: {}", stderr(&o));
        }
        assert_cli_error(&o, "CUDA");
        eprintln!("skipped: no GPU for cuqr dist");
        return;
    }
    let check = |dir: &Path, r0: usize, len: usize| {
        let (shape, x) = read_npy(&dir.join("x.npy"));
        assert_eq!(shape, vec![n, 1]);
        let want = lstsq_rows(&a, &b32, r0, len);
        for (i, w) in want.iter().enumerate() {
            assert!((x.at(i, 0) - w).abs() <= 1e-10 * (1.0 + w.abs()), "x[{i}]");
        }
        let (rs, _) = read_npy(&dir.join("residual_norms.npy"));
        assert_eq!(rs, vec![1]);
    };
    check(&out, 0, m);
    let win = dir.join("win");
    let o = cuqr(&[
        "dist",
        "window",
        "--gpus",
        "1",
        "--parts",
        "3",
        "--a",
        p(&fa),
        "--b",
        p(&fb),
        "--window",
        "150",
        "--step",
        "25",
        "--out",
        p(&win),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // 150 rows, then (301 - 150) / 25 = 6 steps: the window ends on rows 150..300
    check(&win, 150, 150);
    assert!(stdout(&o).contains("6 steps of 25 rows"), "{}", stdout(&o));
}

// ---------- update on complex data ----------

/// A dense complex matrix, column-major (re, im) pairs.
#[derive(Clone, Debug)]
struct Z {
    r: usize,
    c: usize,
    d: Vec<(f64, f64)>,
}

fn zmul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

impl Z {
    fn at(&self, i: usize, j: usize) -> (f64, f64) {
        self.d[i + j * self.r]
    }
    fn random(rng: &mut StdRng, r: usize, c: usize) -> Z {
        let d = (0..r * c)
            .map(|_| (rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)))
            .collect();
        Z { r, c, d }
    }
    fn from_fn(r: usize, c: usize, f: impl Fn(usize, usize) -> (f64, f64)) -> Z {
        let d = (0..c)
            .flat_map(|j| (0..r).map(move |i| (i, j)))
            .map(|(i, j)| f(i, j))
            .collect();
        Z { r, c, d }
    }
    /// self·other.
    fn mul(&self, other: &Z) -> Z {
        Z::from_fn(self.r, other.c, |i, j| {
            (0..self.c).fold((0.0, 0.0), |s, l| {
                let p = zmul(self.at(i, l), other.at(l, j));
                (s.0 + p.0, s.1 + p.1)
            })
        })
    }
    fn adjoint(&self) -> Z {
        Z::from_fn(self.c, self.r, |i, j| {
            let (re, im) = self.at(j, i);
            (re, -im)
        })
    }
    fn fro_diff(&self, other: &Z) -> f64 {
        self.d
            .iter()
            .zip(&other.d)
            .map(|(a, b)| (a.0 - b.0).powi(2) + (a.1 - b.1).powi(2))
            .sum::<f64>()
            .sqrt()
    }
    fn fro(&self) -> f64 {
        self.fro_diff(&Z::from_fn(self.r, self.c, |_, _| (0.0, 0.0)))
    }
}

/// Writes `a` as complex .npy: `<c16` C order, or `<c8` Fortran order when `single`.
fn write_znpy(path: &Path, a: &Z, single: bool, one_d: bool) {
    let (descr, fortran) = if single {
        ("<c8", "True")
    } else {
        ("<c16", "False")
    };
    let shape = if one_d {
        format!("({},)", a.r * a.c)
    } else {
        format!("({}, {})", a.r, a.c)
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    let order: Vec<(f64, f64)> = if single || one_d {
        a.d.clone()
    } else {
        (0..a.r)
            .flat_map(|i| (0..a.c).map(move |j| (i, j)))
            .map(|(i, j)| a.at(i, j))
            .collect()
    };
    for (re, im) in order {
        if single {
            bytes.extend_from_slice(&(re as f32).to_le_bytes());
            bytes.extend_from_slice(&(im as f32).to_le_bytes());
        } else {
            bytes.extend_from_slice(&re.to_le_bytes());
            bytes.extend_from_slice(&im.to_le_bytes());
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// Reads a `<c16` Fortran-ordered .npy as cuqr writes it.
fn read_znpy(path: &Path) -> Z {
    let b = std::fs::read(path).unwrap();
    let hl = u16::from_le_bytes([b[8], b[9]]) as usize;
    let h = std::str::from_utf8(&b[10..10 + hl]).unwrap();
    assert!(
        h.contains("'descr': '<c16'") && h.contains("'fortran_order': True"),
        "{h}"
    );
    let s0 = h.find("'shape': (").unwrap() + 10;
    let s1 = s0 + h[s0..].find(')').unwrap();
    let shape: Vec<usize> = h[s0..s1]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let (r, c) = match shape.as_slice() {
        [k] => (*k, 1),
        [r, c] => (*r, *c),
        s => panic!("shape {s:?}"),
    };
    let d: Vec<(f64, f64)> = b[10 + hl..]
        .chunks_exact(16)
        .map(|x| {
            (
                f64::from_le_bytes(x[..8].try_into().unwrap()),
                f64::from_le_bytes(x[8..].try_into().unwrap()),
            )
        })
        .collect();
    assert_eq!(d.len(), r * c);
    Z { r, c, d }
}

/// Q·R = Ã and QᴴQ = I within 10·m·u; with `b`, x (when written) solves the least-squares
/// problem: Ãᴴ(b̃ − Ãx) = 0 within the bound of its error.
fn check_complex(out: &Path, at: &Z, bt: Option<&Z>, full: bool) {
    let (q, r) = (read_znpy(&out.join("Q.npy")), read_znpy(&out.join("R.npy")));
    let tol = 10.0 * at.r.max(at.c) as f64 * U64;
    assert_eq!((q.r, q.c), (at.r, if full { at.r } else { at.c }));
    assert!(q.mul(&r).fro_diff(at) <= tol * at.fro(), "QR ≠ Ã");
    let eye = Z::from_fn(
        q.c,
        q.c,
        |i, j| if i == j { (1.0, 0.0) } else { (0.0, 0.0) },
    );
    assert!(q.adjoint().mul(&q).fro_diff(&eye) <= tol, "QᴴQ ≠ I");
    for i in 0..r.r {
        for j in 0..i.min(r.c) {
            assert_eq!(r.at(i, j), (0.0, 0.0), "R below the diagonal");
        }
    }
    if at.r < at.c {
        assert!(!out.join("x.npy").exists(), "no x for a wide A");
        return;
    }
    if let Some(bt) = bt {
        {
            let x = read_znpy(&out.join("x.npy"));
            let ax = at.mul(&x);
            let res = Z::from_fn(bt.r, bt.c, |i, j| {
                (bt.at(i, j).0 - ax.at(i, j).0, bt.at(i, j).1 - ax.at(i, j).1)
            });
            let normal = at.adjoint().mul(&res);
            let zero = Z::from_fn(normal.r, normal.c, |_, _| (0.0, 0.0));
            assert!(normal.fro_diff(&zero) <= 1e3 * tol * at.fro() * bt.fro());
        }
    }
}

#[test]
fn complex_updates_of_tall_and_wide_data() {
    let dir = temp_dir("complex");
    let mut rng = StdRng::seed_from_u64(41);
    let path = |name: &str| dir.join(name);
    let (m, n) = (37, 9);
    let a = Z::random(&mut rng, m, n);
    write_znpy(&path("A.npy"), &a, false, false);
    let b = Z::random(&mut rng, m, 1);
    write_znpy(&path("b.npy"), &b, false, true);

    // two rows inserted at 5, thin Q, with b and the default new right-hand sides (1)
    let u = Z::random(&mut rng, 2, n);
    write_znpy(&path("U.npy"), &u, false, false);
    let out = path("rows");
    run_ok(&[
        "update",
        "--a",
        p(&path("A.npy")),
        "--b",
        p(&path("b.npy")),
        "--op",
        "insert-rows",
        "--k0",
        "5",
        "--u",
        p(&path("U.npy")),
        "--backend",
        "cpu",
        "--out",
        p(&out),
    ]);
    let grow = |x: &Z, new: &Z| {
        Z::from_fn(x.r + 2, x.c, |i, j| match i {
            _ if i < 5 => x.at(i, j),
            _ if i < 7 => new.at(i - 5, j),
            _ => x.at(i - 2, j),
        })
    };
    let ones = Z::from_fn(2, 1, |_, _| (1.0, 0.0));
    check_complex(&out, &grow(&a, &u), Some(&grow(&b, &ones)), false);
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    assert_eq!(json_field(&summary, "precision"), "\"c64\"");
    assert_eq!(json_field(&summary, "q_policy"), "\"thin\"");

    // rank-one A + u·vᴴ on a full Q, u a complex64 Fortran file, read at f64
    let (uu, vv) = (Z::random(&mut rng, m, 1), Z::random(&mut rng, n, 1));
    let uu = Z::from_fn(m, 1, |i, _| {
        (uu.at(i, 0).0 as f32 as f64, uu.at(i, 0).1 as f32 as f64)
    });
    write_znpy(&path("u1.npy"), &uu, true, false);
    write_znpy(&path("v1.npy"), &vv, false, true);
    let out = path("rank1");
    run_ok(&[
        "update",
        "--a",
        p(&path("A.npy")),
        "--op",
        "rank-one",
        "--u",
        p(&path("u1.npy")),
        "--v",
        p(&path("v1.npy")),
        "--q-policy",
        "full",
        "--backend",
        "cpu",
        "--out",
        p(&out),
    ]);
    let at = Z::from_fn(m, n, |i, j| {
        let p = zmul(uu.at(i, 0), (vv.at(j, 0).0, -vv.at(j, 0).1));
        (a.at(i, j).0 + p.0, a.at(i, j).1 + p.1)
    });
    check_complex(&out, &at, Some(&Z::from_fn(m, 1, |_, _| (1.0, 0.0))), true);

    // a wide A loses three columns: factors, no x
    let w = Z::random(&mut rng, 5, 11);
    write_znpy(&path("W.npy"), &w, false, false);
    let out = path("wide");
    run_ok(&[
        "update",
        "--a",
        p(&path("W.npy")),
        "--op",
        "delete-cols",
        "--k0",
        "2",
        "--p",
        "3",
        "--q-policy",
        "full",
        "--backend",
        "cpu",
        "--out",
        p(&out),
    ]);
    let at = Z::from_fn(5, 8, |i, j| w.at(i, if j < 2 { j } else { j + 3 }));
    check_complex(&out, &at, Some(&Z::from_fn(5, 1, |_, _| (1.0, 0.0))), true);

    // what complex data cannot do, in one line each
    let o = cuqr(&[
        "update",
        "--a",
        p(&path("A.npy")),
        "--op",
        "shift-col",
        "--k0",
        "1",
        "--to",
        "3",
        "--out",
        p(&path("x")),
    ]);
    assert_cli_error(&o, "takes real data");
    let o = cuqr(&[
        "update",
        "--a",
        p(&path("A.npy")),
        "--op",
        "delete-rows",
        "--k0",
        "1",
        "--q-policy",
        "none",
        "--out",
        p(&path("x")),
    ]);
    assert_cli_error(&o, "--q-policy thin or full");
    let o = cuqr(&[
        "window",
        "--a",
        p(&path("A.npy")),
        "--window",
        "20",
        "--step",
        "2",
        "--out",
        p(&path("x")),
    ]);
    assert_cli_error(&o, "complex data");
}
