//! Batched thin-Q states on the GPU (`cuqr::batch::GpuQBatch`) against each problem's own
//! data: after every call each problem's Q₁R reproduces its A, Q₁ has orthonormal columns,
//! and x and the residual norm agree with faer's least squares of the same A and b.
//! Factorisation, rank-one updates, rows in and out at interior positions, window steps with
//! forgetting, the rank test, argument errors, and refusals that leave the refused problems
//! (or, for the all-or-nothing updates, every problem) bit for bit unchanged. Random data,
//! sizes not multiples of 32, n up to the largest (32), f32 and f64. Without a GPU every
//! test prints "skipped" (`CUQR_REQUIRE_GPU=1` fails).
//!
//! Tolerances: Householder factorisation and Givens updates are backward stable, ‖Q₁R −
//! A‖ ≤ c·m·n·u·‖A‖ per call and ‖Q₁ᵀQ₁ − I‖ ≤ c·m·n·u (c small); the checks allow
//! 20·(m + n)·u per call made so far on both, and for x (random A, κ below about 10)
//! 1e3·(m + n)·u relative to faer's solve.

mod common;

use std::sync::Arc;

use cuqr::batch::{BatchRef, GpuQBatch};
use cuqr::{DevVec, Error, Gpu, GpuScalar, Scalar};
use faer::linalg::solvers::SolveLstsq;
use rand::rngs::StdRng;
use rand::Rng;

/// Each problem's A (m×n, row-major) and b, in f64.
struct Model {
    n: usize,
    a: Vec<Vec<f64>>,
    b: Vec<Vec<f64>>,
}

impl Model {
    fn m(&self) -> usize {
        self.b[0].len()
    }

    fn lstsq(&self, k: usize) -> (Vec<f64>, f64) {
        let (m, n) = (self.m(), self.n);
        let a = faer::Mat::from_fn(m, n, |r, c| self.a[k][r * n + c]);
        let b = faer::Mat::from_fn(m, 1, |r, _| self.b[k][r]);
        let x = a.qr().solve_lstsq(&b);
        let xs: Vec<f64> = (0..n).map(|c| x[(c, 0)]).collect();
        let res: f64 = (0..m)
            .map(|r| {
                let ax: f64 = (0..n).map(|c| self.a[k][r * n + c] * xs[c]).sum();
                (self.b[k][r] - ax).powi(2)
            })
            .sum();
        (xs, res.sqrt())
    }
}

fn rel(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum();
    let den: f64 = b.iter().map(|q| q * q).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// Checks every problem of `bank` against the model after `calls` calls.
fn check<T: GpuScalar>(bank: &GpuQBatch<T>, model: &Model, calls: usize, what: &str) {
    let (q, r, b) = bank.to_host().unwrap();
    let (m, n) = (bank.nrows(), bank.ncols());
    assert_eq!(m, model.m(), "{what}: rows");
    let u = common::u::<T>();
    let tol = 20.0 * (m + n) as f64 * u * calls as f64;
    let xtol = 1e3 * (m + n) as f64 * u;
    let sol = bank.solve().unwrap();
    let full = bank.is_full().then(|| bank.full_q().unwrap());
    for k in 0..bank.batch() {
        let qk = |i: usize, c: usize| q[k * m * n + c * m + i].to_f64();
        let rk = |i: usize, c: usize| r[k * n * n + i * n + c].to_f64();
        let anorm: f64 = model.a[k].iter().map(|v| v * v).sum::<f64>().sqrt();
        let mut err = 0.0f64;
        for i in 0..m {
            for c in 0..n {
                let qr: f64 = (0..=c).map(|t| qk(i, t) * rk(t, c)).sum();
                err += (qr - model.a[k][i * n + c]).powi(2);
            }
        }
        let err = err.sqrt() / anorm;
        assert!(
            err <= tol,
            "{what}: problem {k}: ‖QR − A‖/‖A‖ = {err:e} > {tol:e}"
        );
        let mut orth = 0.0f64;
        for c in 0..n {
            for d in 0..n {
                let g: f64 = (0..m).map(|i| qk(i, c) * qk(i, d)).sum();
                orth += (g - if c == d { 1.0 } else { 0.0 }).powi(2);
            }
        }
        let orth = orth.sqrt();
        assert!(
            orth <= tol,
            "{what}: problem {k}: ‖QᵀQ − I‖ = {orth:e} > {tol:e}"
        );
        if let Some(qf) = &full {
            // [Q₁ Q₂] orthogonal: with Q₁R = A, Q·[R; 0] = A.
            let e = full_orthogonality(&qf[k * m * m..(k + 1) * m * m], m);
            assert!(
                e <= tol,
                "{what}: problem {k}: full ‖QᵀQ − I‖ = {e:e} > {tol:e}"
            );
            for i in 0..m {
                for c in 0..n {
                    assert_eq!(qf[k * m * m + c * m + i], q[k * m * n + c * m + i]);
                }
            }
        }
        for i in 0..n {
            for c in 0..i {
                assert_eq!(rk(i, c), 0.0, "{what}: problem {k}: R below the diagonal");
            }
        }
        for i in 0..m {
            let d = (b[k * m + i].to_f64() - model.b[k][i]).abs();
            assert!(
                d <= tol * (1.0 + model.b[k][i].abs()),
                "{what}: problem {k}: b[{i}]"
            );
        }
        assert!(
            sol.status[k].is_ok(),
            "{what}: problem {k}: {:?}",
            sol.status[k]
        );
        let x: Vec<f64> = sol.x[k * n..(k + 1) * n]
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let (want, res) = model.lstsq(k);
        let d = rel(&x, &want);
        assert!(
            d <= xtol,
            "{what}: problem {k}: x relative error {d:e} > {xtol:e}"
        );
        let bnorm: f64 = model.b[k].iter().map(|v| v * v).sum::<f64>().sqrt();
        let dr = (sol.residual_norms[k] - res).abs() / bnorm;
        assert!(
            dr <= xtol,
            "{what}: problem {k}: residual norm off by {dr:e}"
        );
    }
}

/// ‖QᵀQ − I‖_F of one problem's m×m column-major Q, in f64.
fn full_orthogonality<T: Scalar>(q: &[T], m: usize) -> f64 {
    let mut e2 = 0.0f64;
    for c in 0..m {
        for d in 0..=c {
            let g: f64 = (0..m)
                .map(|i| q[c * m + i].to_f64() * q[d * m + i].to_f64())
                .sum();
            let x = g - if c == d { 1.0 } else { 0.0 };
            e2 += if c == d { x * x } else { 2.0 * x * x };
        }
    }
    e2.sqrt()
}

/// `steps` random rank-one updates of every problem, applied to the model too.
fn rank_one_steps<T: GpuScalar>(
    bank: &mut GpuQBatch<T>,
    model: &mut Model,
    rng: &mut StdRng,
    steps: usize,
) {
    let (b, m, n) = (bank.batch(), bank.nrows(), bank.ncols());
    for _ in 0..steps {
        let (ut, u) = rounded::<T>(random(rng, b * m));
        let (vt, v) = rounded::<T>(random(rng, b * n));
        let rep = bank
            .rank_one(
                BatchRef::row_major(&ut, b, m, 1).unwrap(),
                BatchRef::row_major(&vt, b, n, 1).unwrap(),
            )
            .unwrap();
        assert!(rep.all_ok());
        for k in 0..b {
            for i in 0..m {
                for c in 0..n {
                    model.a[k][i * n + c] += u[k * m + i] * v[k * n + c];
                }
            }
        }
    }
}

fn random(rng: &mut StdRng, len: usize) -> Vec<f64> {
    (0..len).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect()
}

/// Values rounded to T, so that the model holds exactly what the GPU gets.
fn rounded<T: Scalar>(v: Vec<f64>) -> (Vec<T>, Vec<f64>) {
    let t: Vec<T> = v.iter().map(|&x| T::from_f64(x)).collect();
    let back = t.iter().map(|x| x.to_f64()).collect();
    (t, back)
}

fn factorize<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    rng: &mut StdRng,
    shape: (usize, usize, usize),
) -> (GpuQBatch<T>, Model) {
    factorize_kind(gpu, rng, shape, false)
}

/// [`factorize`] of the thin (`full` false) or the full kind.
fn factorize_kind<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    rng: &mut StdRng,
    (b, m, n): (usize, usize, usize),
    full: bool,
) -> (GpuQBatch<T>, Model) {
    let (at, a) = rounded::<T>(random(rng, b * m * n));
    let (yt, y) = rounded::<T>(random(rng, b * m));
    let (ar, br) = (
        BatchRef::row_major(&at, b, m, n).unwrap(),
        BatchRef::row_major(&yt, b, m, 1).unwrap(),
    );
    let bank = if full {
        GpuQBatch::factorize_full(gpu, ar, br)
    } else {
        GpuQBatch::factorize(gpu, ar, br)
    }
    .unwrap();
    assert_eq!(bank.is_full(), full);
    let model = Model {
        n,
        a: (0..b)
            .map(|k| a[k * m * n..(k + 1) * m * n].to_vec())
            .collect(),
        b: (0..b).map(|k| y[k * m..(k + 1) * m].to_vec()).collect(),
    };
    (bank, model)
}

/// Inserts p rows at k0 in the model.
fn model_insert(model: &mut Model, k0: usize, p: usize, rows: &[f64], rhs: &[f64]) {
    let n = model.n;
    for k in 0..model.a.len() {
        let at = k * p * n;
        model.a[k].splice(k0 * n..k0 * n, rows[at..at + p * n].iter().copied());
        model.b[k].splice(k0..k0, rhs[k * p..(k + 1) * p].iter().copied());
    }
}

fn model_delete(model: &mut Model, k0: usize, p: usize) {
    let n = model.n;
    for k in 0..model.a.len() {
        model.a[k].drain(k0 * n..(k0 + p) * n);
        model.b[k].drain(k0..k0 + p);
    }
}

fn run_sequence<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    seed: u64,
    (b, m, n): (usize, usize, usize),
    lanes: Option<usize>,
) {
    run_sequence_kind::<T>(gpu, seed, (b, m, n), lanes, false);
}

/// [`run_sequence`] on the thin (`full` false) or the full kind.
fn run_sequence_kind<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    seed: u64,
    (b, m, n): (usize, usize, usize),
    lanes: Option<usize>,
    full: bool,
) {
    let mut rng = common::rng(seed);
    let (mut bank, mut model) = factorize_kind::<T>(gpu, &mut rng, (b, m, n), full);
    if let Some(l) = lanes {
        bank.set_lanes_per_problem(l).unwrap();
    }
    let mut calls = 1;
    check(&bank, &model, calls, "factorize");
    // A + u vᵀ.
    let (ut, u) = rounded::<T>(random(&mut rng, b * m));
    let (vt, v) = rounded::<T>(random(&mut rng, b * n));
    let rep = bank
        .rank_one(
            BatchRef::row_major(&ut, b, m, 1).unwrap(),
            BatchRef::row_major(&vt, b, n, 1).unwrap(),
        )
        .unwrap();
    assert!(rep.all_ok());
    for k in 0..b {
        for i in 0..m {
            for c in 0..n {
                model.a[k][i * n + c] += u[k * m + i] * v[k * n + c];
            }
        }
    }
    calls += 1;
    check(&bank, &model, calls, "rank_one");
    // A + U Vᵀ with three terms.
    let kk = 3;
    let (ut, u) = rounded::<T>(random(&mut rng, b * m * kk));
    let (vt, v) = rounded::<T>(random(&mut rng, b * n * kk));
    let rep = bank
        .rank_k(
            BatchRef::row_major(&ut, b, m, kk).unwrap(),
            BatchRef::row_major(&vt, b, n, kk).unwrap(),
        )
        .unwrap();
    assert!(rep.all_ok());
    for k in 0..b {
        for i in 0..m {
            for c in 0..n {
                let add: f64 = (0..kk)
                    .map(|t| u[(k * m + i) * kk + t] * v[(k * n + c) * kk + t])
                    .sum();
                model.a[k][i * n + c] += add;
            }
        }
    }
    calls += kk;
    check(&bank, &model, calls, "rank_k");
    // Two rows in at an interior position, then three out elsewhere.
    let k0 = m / 3;
    let (rt, rows) = rounded::<T>(random(&mut rng, b * 2 * n));
    let (et, rhs) = rounded::<T>(random(&mut rng, b * 2));
    bank.insert_rows(
        k0,
        BatchRef::row_major(&rt, b, 2, n).unwrap(),
        BatchRef::row_major(&et, b, 2, 1).unwrap(),
    )
    .unwrap();
    model_insert(&mut model, k0, 2, &rows, &rhs);
    calls += 1;
    check(&bank, &model, calls, "insert_rows");
    let k1 = m / 2;
    bank.delete_rows(k1, 3).unwrap();
    model_delete(&mut model, k1, 3);
    calls += 1;
    check(&bank, &model, calls, "delete_rows");
    // Window steps with forgetting: the rows and b weighted by √λ, p = 1 and 2.
    let lambda = 0.95;
    for (step, p) in [1usize, 2, 1].into_iter().enumerate() {
        let (rt, rows) = rounded::<T>(random(&mut rng, b * p * n));
        let (et, rhs) = rounded::<T>(random(&mut rng, b * p));
        let rep = bank
            .slide(
                BatchRef::row_major(&rt, b, p, n).unwrap(),
                BatchRef::row_major(&et, b, p, 1).unwrap(),
                lambda,
            )
            .unwrap();
        assert!(
            rep.all_ok(),
            "step {step}: {:?}",
            rep.refused().collect::<Vec<_>>()
        );
        let w = lambda.sqrt();
        for k in 0..b {
            model.a[k].iter_mut().for_each(|x| *x *= w);
            model.b[k].iter_mut().for_each(|x| *x *= w);
        }
        let end = model.m();
        model_insert(&mut model, end, p, &rows, &rhs);
        model_delete(&mut model, 0, p);
        calls += 2;
        check(&bank, &model, calls, "slide");
    }
    column_sequence(&mut bank, &mut model, &mut rng, calls);
}

/// Moves column `from` to position `to` in the model.
fn model_shift_col(model: &mut Model, from: usize, to: usize) {
    let n = model.n;
    for a in &mut model.a {
        for row in a.chunks_mut(n) {
            let mut r: Vec<f64> = row.to_vec();
            let x = r.remove(from);
            r.insert(to, x);
            row.copy_from_slice(&r);
        }
    }
}

/// The column updates of [`run_sequence`]: deletions, insertions, a replacement and shifts,
/// each checked; `calls` counts the calls made before.
fn column_sequence<T: GpuScalar>(
    bank: &mut GpuQBatch<T>,
    model: &mut Model,
    rng: &mut StdRng,
    mut calls: usize,
) {
    let (b, n) = (bank.batch(), bank.ncols());
    // Columns out: one interior block, then the last column (when there are enough).
    if n > 1 {
        let (k0, p) = if n > 3 { (1, 2) } else { (0, 1) };
        bank.delete_cols(k0, p).unwrap();
        let no = n - p;
        for a in &mut model.a {
            let kept: Vec<f64> = a
                .chunks(n)
                .flat_map(|row| {
                    row.iter()
                        .enumerate()
                        .filter(|(c, _)| *c < k0 || *c >= k0 + p)
                        .map(|(_, v)| *v)
                        .collect::<Vec<_>>()
                })
                .collect();
            *a = kept;
        }
        model.n = no;
        assert_eq!(bank.ncols(), no);
        calls += p;
        check(bank, model, calls, "delete_cols");
        if no > 1 {
            bank.delete_cols(no - 1, 1).unwrap();
            for a in &mut model.a {
                let kept: Vec<f64> = a
                    .chunks(no)
                    .flat_map(|row| row[..no - 1].to_vec())
                    .collect();
                *a = kept;
            }
            model.n = no - 1;
            calls += 1;
            check(bank, model, calls, "delete_cols (last)");
        }
    }
    // Columns in: two at an interior position (when they fit), then one replaced.
    let (m, n) = (bank.nrows(), bank.ncols());
    if n + 2 <= 32 && m >= n + 2 {
        let k0 = n / 2;
        let (ct, cols) = rounded::<T>(random(rng, b * m * 2));
        bank.insert_cols(k0, BatchRef::row_major(&ct, b, m, 2).unwrap())
            .unwrap();
        model_insert_cols(model, k0, 2, &cols);
        assert_eq!(bank.ncols(), n + 2);
        calls += 2;
        check(bank, model, calls, "insert_cols");
        let (ct, cols) = rounded::<T>(random(rng, b * m));
        bank.replace_cols(0, BatchRef::row_major(&ct, b, m, 1).unwrap())
            .unwrap();
        model_delete_cols(model, 0, 1);
        model_insert_cols(model, 0, 1, &cols);
        calls += 2;
        check(bank, model, calls, "replace_cols");
    }
    // A column moved right, then one moved left.
    let n = bank.ncols();
    if n >= 2 {
        for (from, to) in [(0, n - 1), (n - 1, n / 2)] {
            bank.shift_col(from, to).unwrap();
            model_shift_col(model, from, to);
            calls += 2;
            check(bank, model, calls, "shift_col");
        }
    }
}

/// Inserts the p columns `cols` (B × m × p row-major) before column k0 in the model.
fn model_insert_cols(model: &mut Model, k0: usize, p: usize, cols: &[f64]) {
    let (m, n) = (model.m(), model.n);
    for (k, a) in model.a.iter_mut().enumerate() {
        let mut out = Vec::with_capacity(m * (n + p));
        for i in 0..m {
            out.extend_from_slice(&a[i * n..i * n + k0]);
            out.extend_from_slice(&cols[(k * m + i) * p..(k * m + i + 1) * p]);
            out.extend_from_slice(&a[i * n + k0..(i + 1) * n]);
        }
        *a = out;
    }
    model.n = n + p;
}

/// Deletes columns k0..k0+p from the model.
fn model_delete_cols(model: &mut Model, k0: usize, p: usize) {
    let n = model.n;
    for a in &mut model.a {
        *a = a
            .chunks(n)
            .flat_map(|row| [&row[..k0], &row[k0 + p..]].concat())
            .collect();
    }
    model.n = n - p;
}

/// A column that lies in range(Q₁) of one problem refuses the whole insertion (and the
/// replacement), naming that problem, and leaves every problem bit for bit as it was.
#[test]
fn dependent_columns_refuse_the_insertion() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut rng = common::rng(0x9C01);
    let (b, m, n) = (11, 29, 6);
    let (mut bank, model) = factorize::<f64>(&gpu, &mut rng, (b, m, n));
    let before = bank.to_host().unwrap();
    let mut cols = random(&mut rng, b * m * 2);
    // problem 4's second new column: 2·(column 1) − (column 5) of its A
    for i in 0..m {
        cols[(4 * m + i) * 2 + 1] = 2.0 * model.a[4][i * n + 1] - model.a[4][i * n + 5];
    }
    let err = bank
        .insert_cols(3, BatchRef::row_major(&cols, b, m, 2).unwrap())
        .unwrap_err();
    match &err {
        Error::BatchRefused { problems, .. } => {
            assert_eq!(problems.len(), 1, "{err}");
            assert_eq!(problems[0].0, 4);
            assert!(
                matches!(problems[0].1, Error::RankDeficient { .. }),
                "{err}"
            );
        }
        e => panic!("expected BatchRefused, got {e}"),
    }
    assert_eq!(bank.to_host().unwrap(), before);
    assert_eq!(bank.ncols(), n);
    let one: Vec<f64> = (0..b * m).map(|e| cols[2 * e + 1]).collect();
    assert!(matches!(
        bank.replace_cols(2, BatchRef::row_major(&one, b, m, 1).unwrap()),
        Err(Error::BatchRefused { .. })
    ));
    assert_eq!(bank.to_host().unwrap(), before);
    assert_eq!(bank.ncols(), n);
    // arguments
    let c1 = random(&mut rng, b * m);
    let c1 = BatchRef::row_major(&c1, b, m, 1).unwrap();
    assert!(matches!(
        bank.insert_cols(n + 1, c1),
        Err(Error::OutOfRange { .. })
    ));
    let big = random(&mut rng, b * m * 27);
    let big = BatchRef::row_major(&big, b, m, 27).unwrap();
    assert!(matches!(bank.insert_cols(0, big), Err(Error::Shape { .. })));
    let mut nan = random(&mut rng, b * m);
    nan[7 * m + 3] = f64::NAN;
    let err = bank
        .insert_cols(0, BatchRef::row_major(&nan, b, m, 1).unwrap())
        .unwrap_err();
    assert!(
        matches!(&err, Error::BatchRefused { problems, .. } if problems[0].0 == 7),
        "{err}"
    );
    assert_eq!(bank.to_host().unwrap(), before);
    assert!(matches!(
        bank.shift_col(n, 0),
        Err(Error::OutOfRange { .. })
    ));
    bank.shift_col(2, 2).unwrap();
    assert_eq!(bank.to_host().unwrap(), before);
}

/// A problem whose columns are dependent (R singular) refuses a column shift, which moves a
/// column that lies in the span of the others; every problem is left bit for bit.
#[test]
fn shifting_a_dependent_column_refuses() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut rng = common::rng(0x9E01);
    let (b, m, n) = (6, 21, 5);
    let mut a = random(&mut rng, b * m * n);
    // problem 2: column 3 = column 1
    for i in 0..m {
        a[(2 * m + i) * n + 3] = a[(2 * m + i) * n + 1];
    }
    let y = random(&mut rng, b * m);
    let mut bank = GpuQBatch::<f64>::factorize(
        &gpu,
        BatchRef::row_major(&a, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let before = bank.to_host().unwrap();
    let err = bank.shift_col(3, 0).unwrap_err();
    match &err {
        Error::BatchRefused { problems, .. } => {
            assert_eq!(problems.len(), 1, "{err}");
            assert_eq!(problems[0].0, 2);
            assert!(
                matches!(problems[0].1, Error::RankDeficient { .. }),
                "{err}"
            );
        }
        e => panic!("expected BatchRefused, got {e}"),
    }
    assert_eq!(bank.to_host().unwrap(), before);
}

#[test]
fn updates_follow_the_data() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    // Default lanes a problem: 32 (m ≥ 32), 16 (13×1); set: 8 and 16 (four and two
    // problems a warp, 37 = 9·4 + 1 leaves surplus teams), 1.
    run_sequence::<f64>(&gpu, 0x9B01, (37, 45, 7), None);
    run_sequence::<f64>(&gpu, 0x9B07, (37, 45, 7), Some(16));
    run_sequence::<f64>(&gpu, 0x9B08, (37, 45, 7), Some(8));
    run_sequence::<f64>(&gpu, 0x9B02, (19, 70, 20), None);
    run_sequence::<f64>(&gpu, 0x9B03, (5, 41, 32), None);
    run_sequence::<f64>(&gpu, 0x9B04, (9, 13, 1), None);
    run_sequence::<f64>(&gpu, 0x9B09, (9, 13, 1), Some(1));
    run_sequence::<f32>(&gpu, 0x9B05, (23, 45, 7), None);
    run_sequence::<f32>(&gpu, 0x9B06, (7, 100, 30), None);
}

#[test]
fn device_inputs_match_host_inputs() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (b, m, n) = (29, 50, 6);
    let mut rng = common::rng(0x9B10);
    let a = random(&mut rng, b * m * n);
    let y = random(&mut rng, b * m);
    let host = GpuQBatch::<f64>::factorize(
        &gpu,
        BatchRef::row_major(&a, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let (ad, yd) = (
        DevVec::from_slice(&gpu, &a).unwrap(),
        DevVec::from_slice(&gpu, &y).unwrap(),
    );
    let mut dev = GpuQBatch::<f64>::factorize_device(&gpu, (&ad, &yd), (b, m, n)).unwrap();
    assert_eq!(host.to_host().unwrap(), dev.to_host().unwrap());
    let mut host = host;
    let (u, v) = (random(&mut rng, b * m), random(&mut rng, b * n));
    host.rank_one(
        BatchRef::row_major(&u, b, m, 1).unwrap(),
        BatchRef::row_major(&v, b, n, 1).unwrap(),
    )
    .unwrap();
    let (ud, vd) = (
        DevVec::from_slice(&gpu, &u).unwrap(),
        DevVec::from_slice(&gpu, &v).unwrap(),
    );
    dev.rank_one_device(&ud, &vd).unwrap();
    let (rows, rhs) = (random(&mut rng, b * n), random(&mut rng, b));
    host.insert_rows(
        7,
        BatchRef::row_major(&rows, b, 1, n).unwrap(),
        BatchRef::row_major(&rhs, b, 1, 1).unwrap(),
    )
    .unwrap();
    let (rd, ed) = (
        DevVec::from_slice(&gpu, &rows).unwrap(),
        DevVec::from_slice(&gpu, &rhs).unwrap(),
    );
    dev.insert_rows_device(7, 1, (&rd, &ed)).unwrap();
    host.slide(
        BatchRef::row_major(&rows, b, 1, n).unwrap(),
        BatchRef::row_major(&rhs, b, 1, 1).unwrap(),
        0.9,
    )
    .unwrap();
    dev.slide_device(1, (&rd, &ed), 0.9).unwrap();
    assert_eq!(host.to_host().unwrap(), dev.to_host().unwrap());
}

#[test]
fn refusals_leave_problems_unchanged() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (b, m, n) = (11, 40, 5);
    let mut rng = common::rng(0x9B20);
    let mut a = random(&mut rng, b * m * n);
    // Problem 2: its last column lives only in row 9; problem 4: only in row 0.
    for i in 0..m {
        if i != 9 {
            a[(2 * m + i) * n + n - 1] = 0.0;
        }
        if i != 0 {
            a[(4 * m + i) * n + n - 1] = 0.0;
        }
    }
    let y = random(&mut rng, b * m);
    let mut bank = GpuQBatch::<f64>::factorize(
        &gpu,
        BatchRef::row_major(&a, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let before = bank.to_host().unwrap();
    // rank_one with a NaN in problem 3's u: problem 3 refuses alone.
    let mut u = random(&mut rng, b * m);
    let mut v = random(&mut rng, b * n);
    u[3 * m + 5] = f64::NAN;
    // v's last entries zero: the last columns keep their single rows.
    for k in 0..b {
        v[k * n + n - 1] = 0.0;
    }
    let rep = bank
        .rank_one(
            BatchRef::row_major(&u, b, m, 1).unwrap(),
            BatchRef::row_major(&v, b, n, 1).unwrap(),
        )
        .unwrap();
    let refused: Vec<usize> = rep.refused().map(|(i, _)| i).collect();
    assert_eq!(refused, vec![3]);
    assert!(matches!(rep.outcomes[3], Err(Error::NonFinite { .. })));
    let after = bank.to_host().unwrap();
    let (q0, r0, b0) = &before;
    let (q1, r1, b1) = &after;
    assert_eq!(q0[3 * m * n..4 * m * n], q1[3 * m * n..4 * m * n]);
    assert_eq!(r0[3 * n * n..4 * n * n], r1[3 * n * n..4 * n * n]);
    assert_eq!(b0, b1);
    assert_ne!(q0[..m * n], q1[..m * n], "problem 0 was updated");
    // rank_k with a NaN in problem 5's V: problem 5 refuses alone (the last columns of V
    // zero, so that problems 2 and 4 keep their single-row columns).
    let before_k = bank.to_host().unwrap();
    let uu = random(&mut rng, b * m * 2);
    let mut vv = random(&mut rng, b * n * 2);
    for k in 0..b {
        vv[(k * n + n - 1) * 2] = 0.0;
        vv[(k * n + n - 1) * 2 + 1] = 0.0;
    }
    vv[(5 * n + 1) * 2 + 1] = f64::NAN;
    let rep = bank
        .rank_k(
            BatchRef::row_major(&uu, b, m, 2).unwrap(),
            BatchRef::row_major(&vv, b, n, 2).unwrap(),
        )
        .unwrap();
    assert_eq!(rep.refused().map(|(i, _)| i).collect::<Vec<_>>(), vec![5]);
    let after_k = bank.to_host().unwrap();
    assert_eq!(
        before_k.0[5 * m * n..6 * m * n],
        after_k.0[5 * m * n..6 * m * n]
    );
    assert_eq!(
        before_k.1[5 * n * n..6 * n * n],
        after_k.1[5 * n * n..6 * n * n]
    );
    // Deleting row 9: problem 2 would lose its last column, so nothing changes.
    let state = bank.to_host().unwrap();
    match bank.delete_rows(9, 1) {
        Err(Error::BatchRefused { problems, .. }) => {
            assert_eq!(problems.len(), 1);
            assert_eq!(problems[0].0, 2);
            assert!(matches!(problems[0].1, Error::DowndateFailed { .. }));
        }
        other => panic!("expected BatchRefused, got {other:?}"),
    }
    assert_eq!(bank.nrows(), m);
    assert_eq!(bank.to_host().unwrap(), state);
    // Rows with a NaN in problem 6: all-or-nothing insertion refuses, nothing changes.
    let mut rows = random(&mut rng, b * n);
    rows[6 * n + 1] = f64::INFINITY;
    rows[4 * n + n - 1] = 0.0;
    let rhs = random(&mut rng, b);
    match bank.insert_rows(
        m,
        BatchRef::row_major(&rows, b, 1, n).unwrap(),
        BatchRef::row_major(&rhs, b, 1, 1).unwrap(),
    ) {
        Err(Error::BatchRefused { problems, .. }) => {
            assert_eq!(problems.iter().map(|p| p.0).collect::<Vec<_>>(), vec![6]);
        }
        other => panic!("expected BatchRefused, got {other:?}"),
    }
    assert_eq!(bank.to_host().unwrap(), state);
    // A window step: problem 4 cannot lose row 0 and problem 6's new row is not finite;
    // both stay as they were, the others slide.
    let rep = bank
        .slide(
            BatchRef::row_major(&rows, b, 1, n).unwrap(),
            BatchRef::row_major(&rhs, b, 1, 1).unwrap(),
            1.0,
        )
        .unwrap();
    let refused: Vec<usize> = rep.refused().map(|(i, _)| i).collect();
    assert_eq!(refused, vec![4, 6]);
    assert!(matches!(rep.outcomes[4], Err(Error::DowndateFailed { .. })));
    assert!(matches!(rep.outcomes[6], Err(Error::NonFinite { .. })));
    let now = bank.to_host().unwrap();
    for k in [4usize, 6] {
        assert_eq!(
            state.0[k * m * n..(k + 1) * m * n],
            now.0[k * m * n..(k + 1) * m * n]
        );
        assert_eq!(
            state.1[k * n * n..(k + 1) * n * n],
            now.1[k * n * n..(k + 1) * n * n]
        );
        assert_eq!(state.2[k * m..(k + 1) * m], now.2[k * m..(k + 1) * m]);
    }
    assert_ne!(state.2[..m], now.2[..m], "problem 0 slid");
}

#[test]
fn rank_test_and_argument_errors() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (b, m, n) = (4, 33, 3);
    let mut rng = common::rng(0x9B30);
    let mut a = random(&mut rng, b * m * n);
    // Problem 1: column 2 = column 0 (exactly dependent).
    for i in 0..m {
        a[(m + i) * n + 2] = a[(m + i) * n];
    }
    let y = random(&mut rng, b * m);
    let bank = GpuQBatch::<f64>::factorize(
        &gpu,
        BatchRef::row_major(&a, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let sol = bank.solve().unwrap();
    assert!(matches!(sol.status[1], Err(Error::RankDeficient { .. })));
    assert!(sol.x[n..2 * n].iter().all(|v| v.is_nan()));
    assert!(sol.residual_norms[1].is_nan());
    for k in [0usize, 2, 3] {
        assert!(sol.status[k].is_ok());
        assert!(sol.x[k * n..(k + 1) * n].iter().all(|v| v.is_finite()));
    }
    let mut bank = bank;
    let state = bank.to_host().unwrap();
    let one = vec![1.0; b * 100];
    let row = |p: usize, c: usize| BatchRef::row_major(&one[..b * p * c], b, p, c).unwrap();
    assert!(matches!(
        bank.delete_rows(0, 0),
        Err(Error::EmptyBlock { .. })
    ));
    assert!(matches!(
        bank.delete_rows(32, 2),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        bank.delete_rows(0, 31),
        Err(Error::Underdetermined { .. })
    ));
    assert!(matches!(
        bank.insert_rows(34, row(1, n), row(1, 1)),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        bank.insert_rows(0, row(1, n + 1), row(1, 1)),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        bank.slide(row(1, n), row(1, 1), 1.5),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        bank.slide(row(1, n), row(1, 1), f64::NAN),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        bank.rank_one(row(m - 1, 1), row(n, 1)),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        bank.delete_cols(0, 0),
        Err(Error::EmptyBlock { .. })
    ));
    assert!(matches!(
        bank.delete_cols(2, 2),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        bank.delete_cols(0, 3),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        bank.rank_k(row(m, 2), row(n, 3)),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        bank.set_lanes_per_problem(2),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        bank.set_lanes_per_problem(12),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        bank.set_lanes_per_problem(64),
        Err(Error::InvalidParam { .. })
    ));
    assert_eq!(bank.to_host().unwrap(), state);
    let big = vec![1.0; 2 * 4000 * 8];
    assert!(matches!(
        GpuQBatch::<f64>::factorize(
            &gpu,
            BatchRef::row_major(&big, 2, 4000, 8).unwrap(),
            BatchRef::row_major(&big[..8000], 2, 4000, 1).unwrap()
        ),
        Err(Error::InvalidParam { .. })
    ));
    let wide = vec![1.0; 33 * 40];
    assert!(matches!(
        GpuQBatch::<f64>::factorize(
            &gpu,
            BatchRef::row_major(&wide, 1, 40, 33).unwrap(),
            BatchRef::row_major(&wide[..40], 1, 40, 1).unwrap()
        ),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        GpuQBatch::<f64>::factorize(
            &gpu,
            BatchRef::row_major(&wide[..12], 1, 3, 4).unwrap(),
            BatchRef::row_major(&wide[..3], 1, 3, 1).unwrap()
        ),
        Err(Error::Underdetermined { .. })
    ));
}

/// Drift control: the estimate is ‖Q₁ᵀQ₁ − I‖_F of the state as the host computes it from
/// the downloaded Q₁; problems above the tolerance are refreshed and still factor their
/// data, with Q₁ orthonormal to the factorisation's accuracy; those below are left bit for
/// bit.
#[test]
fn drift_check_measures_and_refreshes() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut rng = common::rng(0x9D01);
    let (b, m, n) = (13, 40, 9);
    let (mut bank, mut model) = factorize::<f32>(&gpu, &mut rng, (b, m, n));
    // f32 rank-one updates: each leaves O((m + n)u) behind
    let steps = 40;
    rank_one_steps(&mut bank, &mut model, &mut rng, steps);
    let calls = steps + 1;
    let before = bank.to_host().unwrap();
    let host: Vec<f64> = (0..b)
        .map(|k| {
            let q = |i: usize, c: usize| before.0[k * m * n + c * m + i] as f64;
            let mut e2 = 0.0;
            for c in 0..n {
                for d in 0..n {
                    let g: f64 = (0..m).map(|i| q(i, c) * q(i, d)).sum();
                    e2 += (g - if c == d { 1.0 } else { 0.0 }).powi(2);
                }
            }
            e2.sqrt()
        })
        .collect();
    let u = common::u::<f32>();
    // measured only: the device's estimate (f32 sums) within a few ulps of the Gram entries
    let none = bank.check_drift(Some(f64::INFINITY)).unwrap();
    assert!(none.refreshed.is_empty() && none.failed.is_empty());
    for (k, (&got, &want)) in none.estimates.iter().zip(&host).enumerate() {
        let d = (got - want).abs();
        assert!(
            d <= 4.0 * m as f64 * n as f64 * u,
            "problem {k}: {got} vs {want}"
        );
    }
    assert_eq!(bank.to_host().unwrap(), before);
    // refresh the upper half
    let mut sorted = none.estimates.clone();
    sorted.sort_by(f64::total_cmp);
    let tol = sorted[b / 2];
    let half = bank.check_drift(Some(tol)).unwrap();
    let want: Vec<usize> = (0..b).filter(|&k| none.estimates[k] > tol).collect();
    assert_eq!(half.refreshed, want);
    let after = bank.to_host().unwrap();
    for k in 0..b {
        let (q0, q1) = (
            &before.0[k * m * n..(k + 1) * m * n],
            &after.0[k * m * n..(k + 1) * m * n],
        );
        assert_eq!(
            q0 == q1,
            !want.contains(&k),
            "problem {k}: refreshed iff above tol"
        );
    }
    check(&bank, &model, calls + 1, "check_drift (half)");
    let again = bank.check_drift(Some(f64::INFINITY)).unwrap();
    for &k in &want {
        assert!(
            again.estimates[k] <= 10.0 * m as f64 * u,
            "problem {k}: {}",
            again.estimates[k]
        );
    }
    // tol = 0 refreshes every problem
    let all = bank.check_drift(Some(0.0)).unwrap();
    assert_eq!(all.refreshed, (0..b).collect::<Vec<_>>());
    check(&bank, &model, calls + 2, "check_drift (all)");
    assert!(matches!(
        bank.check_drift(Some(-1.0)),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        bank.check_drift(Some(f64::NAN)),
        Err(Error::InvalidParam { .. })
    ));
}

/// The full kind (Q = [Q₁ Q₂], m×m) through every call of the thin sequence: after each,
/// besides the thin checks, [Q₁ Q₂] is orthogonal and its first n columns are Q₁. Shapes
/// with surplus teams and lanes set, a square result (m = n: an empty complement) and f32.
#[test]
fn full_q_updates_follow_the_data() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    run_sequence_kind::<f64>(&gpu, 0x9F01, (37, 45, 7), None, true);
    run_sequence_kind::<f64>(&gpu, 0x9F02, (37, 45, 7), Some(8), true);
    run_sequence_kind::<f64>(&gpu, 0x9F03, (11, 70, 20), None, true);
    run_sequence_kind::<f64>(&gpu, 0x9F04, (5, 9, 8), None, true);
    run_sequence_kind::<f64>(&gpu, 0x9F05, (9, 13, 1), Some(1), true);
    run_sequence_kind::<f32>(&gpu, 0x9F06, (23, 45, 7), None, true);
}

/// A block of more rows than one complement launch drops (40 > 32) out of a full-Q batch,
/// at an interior position, then a window step of 33 rows.
#[test]
fn full_q_large_row_blocks() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut rng = common::rng(0x9F10);
    let (b, m, n) = (6, 83, 5);
    let (mut bank, mut model) = factorize_kind::<f64>(&gpu, &mut rng, (b, m, n), true);
    bank.delete_rows(10, 40).unwrap();
    model_delete(&mut model, 10, 40);
    check(&bank, &model, 2, "delete_rows (40)");
    let p = 33;
    let (rows, rhs) = (random(&mut rng, b * p * n), random(&mut rng, b * p));
    let rep = bank
        .slide(
            BatchRef::row_major(&rows, b, p, n).unwrap(),
            BatchRef::row_major(&rhs, b, p, 1).unwrap(),
            1.0,
        )
        .unwrap();
    assert!(rep.all_ok());
    let end = model.m();
    model_insert(&mut model, end, p, &rows, &rhs);
    model_delete(&mut model, 0, p);
    check(&bank, &model, 4, "slide (33)");
}

/// Refusals in a full-Q batch leave the refused problems' whole Q bit for bit: a rank-one
/// update with a NaN, a window step whose rows are not finite, and an all-or-nothing row
/// insertion (every problem unchanged); a thin batch has no full Q.
#[test]
fn full_q_refusals_leave_problems_unchanged() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut rng = common::rng(0x9F20);
    let (b, m, n) = (9, 30, 6);
    let (mut bank, _) = factorize_kind::<f64>(&gpu, &mut rng, (b, m, n), true);
    let before = bank.full_q().unwrap();
    let mut u = random(&mut rng, b * m);
    let v = random(&mut rng, b * n);
    u[3 * m + 7] = f64::NAN;
    let rep = bank
        .rank_one(
            BatchRef::row_major(&u, b, m, 1).unwrap(),
            BatchRef::row_major(&v, b, n, 1).unwrap(),
        )
        .unwrap();
    assert_eq!(rep.refused().map(|(i, _)| i).collect::<Vec<_>>(), vec![3]);
    let after = bank.full_q().unwrap();
    let mm = m * m;
    assert_eq!(before[3 * mm..4 * mm], after[3 * mm..4 * mm]);
    assert_ne!(before[..mm], after[..mm], "problem 0 was updated");
    let mut rows = random(&mut rng, b * n);
    rows[6 * n + 2] = f64::INFINITY;
    let rhs = random(&mut rng, b);
    let state = bank.full_q().unwrap();
    assert!(matches!(
        bank.insert_rows(
            4,
            BatchRef::row_major(&rows, b, 1, n).unwrap(),
            BatchRef::row_major(&rhs, b, 1, 1).unwrap(),
        ),
        Err(Error::BatchRefused { .. })
    ));
    assert_eq!(bank.full_q().unwrap(), state);
    let rep = bank
        .slide(
            BatchRef::row_major(&rows, b, 1, n).unwrap(),
            BatchRef::row_major(&rhs, b, 1, 1).unwrap(),
            0.9,
        )
        .unwrap();
    assert_eq!(rep.refused().map(|(i, _)| i).collect::<Vec<_>>(), vec![6]);
    let now = bank.full_q().unwrap();
    assert_eq!(state[6 * mm..7 * mm], now[6 * mm..7 * mm]);
    assert_ne!(state[..mm], now[..mm], "problem 0 slid");
    let (thin, _) = factorize::<f64>(&gpu, &mut rng, (2, 5, 2));
    assert!(matches!(thin.full_q(), Err(Error::InvalidParam { .. })));
}

/// The full kind's drift check measures ‖[Q₁ Q₂]ᵀ[Q₁ Q₂] − I‖_F (against the host's Gram
/// matrix) and a refresh leaves the whole Q orthogonal to working precision.
#[test]
fn full_q_drift_check() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let mut rng = common::rng(0x9F30);
    let (b, m, n) = (7, 33, 5);
    let (mut bank, mut model) = factorize_kind::<f32>(&gpu, &mut rng, (b, m, n), true);
    let steps = 30;
    rank_one_steps(&mut bank, &mut model, &mut rng, steps);
    let q = bank.full_q().unwrap();
    let host: Vec<f64> = (0..b)
        .map(|k| full_orthogonality(&q[k * m * m..(k + 1) * m * m], m))
        .collect();
    let u = common::u::<f32>();
    let none = bank.check_drift(Some(f64::INFINITY)).unwrap();
    assert!(none.refreshed.is_empty());
    for (k, (&got, &want)) in none.estimates.iter().zip(&host).enumerate() {
        assert!(
            (got - want).abs() <= 4.0 * (m * m) as f64 * u,
            "problem {k}: {got} vs {want}"
        );
    }
    assert_eq!(bank.full_q().unwrap(), q);
    let all = bank.check_drift(Some(0.0)).unwrap();
    assert_eq!(all.refreshed, (0..b).collect::<Vec<_>>());
    check(&bank, &model, steps + 2, "check_drift (full)");
    let q = bank.full_q().unwrap();
    for k in 0..b {
        let e = full_orthogonality(&q[k * m * m..(k + 1) * m * m], m);
        assert!(e <= 10.0 * m as f64 * u, "problem {k}: {e:e}");
    }
}

/// Random call sequences on full-Q batches (positions, block sizes and calls drawn at
/// random; shapes drift as rows and columns come and go), every problem checked after
/// each call against its own data and the whole Q for orthogonality.
#[test]
fn full_q_random_call_sequences() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    for (seed, shape) in [
        (0x9F40u64, (7, 23, 5)),
        (0x9F41, (5, 40, 9)),
        (0x9F42, (3, 12, 2)),
        // reaches square problems (an empty complement) and back
        (0x9F43, (3, 7, 2)),
    ] {
        let mut rng = common::rng(seed);
        let (mut bank, mut model) = factorize_kind::<f64>(&gpu, &mut rng, shape, true);
        let b = shape.0;
        let mut calls = 1;
        for step in 0..40 {
            let (m, n) = (bank.nrows(), bank.ncols());
            let what = match rng.random_range(0..8) {
                0 => {
                    rank_one_steps(&mut bank, &mut model, &mut rng, 1);
                    "rank_one"
                }
                1 => {
                    let (k0, p) = (rng.random_range(0..=m), rng.random_range(1..=3));
                    let (rows, rhs) = (random(&mut rng, b * p * n), random(&mut rng, b * p));
                    bank.insert_rows(
                        k0,
                        BatchRef::row_major(&rows, b, p, n).unwrap(),
                        BatchRef::row_major(&rhs, b, p, 1).unwrap(),
                    )
                    .unwrap();
                    model_insert(&mut model, k0, p, &rows, &rhs);
                    "insert_rows"
                }
                2 if m > n + 3 => {
                    let p = rng.random_range(1..=2);
                    let k0 = rng.random_range(0..=m - p);
                    bank.delete_rows(k0, p).unwrap();
                    model_delete(&mut model, k0, p);
                    "delete_rows"
                }
                3 if m > n + 2 => {
                    let (rows, rhs) = (random(&mut rng, b * n), random(&mut rng, b));
                    let rep = bank
                        .slide(
                            BatchRef::row_major(&rows, b, 1, n).unwrap(),
                            BatchRef::row_major(&rhs, b, 1, 1).unwrap(),
                            0.9,
                        )
                        .unwrap();
                    assert!(rep.all_ok());
                    let w = 0.9f64.sqrt();
                    for k in 0..b {
                        model.a[k].iter_mut().for_each(|x| *x *= w);
                        model.b[k].iter_mut().for_each(|x| *x *= w);
                    }
                    let end = model.m();
                    model_insert(&mut model, end, 1, &rows, &rhs);
                    model_delete(&mut model, 0, 1);
                    calls += 1;
                    "slide"
                }
                4 if n < m && n < 12 => {
                    let k0 = rng.random_range(0..=n);
                    let cols = random(&mut rng, b * m);
                    bank.insert_cols(k0, BatchRef::row_major(&cols, b, m, 1).unwrap())
                        .unwrap();
                    model_insert_cols(&mut model, k0, 1, &cols);
                    "insert_cols"
                }
                5 if n > 1 => {
                    let k0 = rng.random_range(0..n);
                    bank.delete_cols(k0, 1).unwrap();
                    model_delete_cols(&mut model, k0, 1);
                    "delete_cols"
                }
                6 if n > 1 => {
                    let (from, to) = (rng.random_range(0..n), rng.random_range(0..n));
                    bank.shift_col(from, to).unwrap();
                    model_shift_col(&mut model, from, to);
                    calls += 1;
                    "shift_col"
                }
                _ => {
                    let d = bank.check_drift(Some(0.0)).unwrap();
                    assert_eq!(d.refreshed.len(), b);
                    "check_drift"
                }
            };
            calls += 1;
            check(
                &bank,
                &model,
                calls,
                &format!("seed {seed:#x} step {step}: {what}"),
            );
        }
    }
}
