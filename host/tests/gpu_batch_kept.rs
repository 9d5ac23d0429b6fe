//! Batched R-only states on the GPU that keep their rows (`GpuRBatch::factorize_keep_data`)
//! against a model of every problem's rows on the host: rows in and out by position, window
//! steps with forgetting, rank-one and rank-k updates, columns in, replaced, moved and out,
//! and the refactorisation, from host slices and (alternating cases) from device memory. After each call the kept rows must equal the model's, R must
//! reproduce their Gram matrix, and x must match faer's least-squares solve of the model;
//! refused problems (per-problem calls) and every problem (all-or-nothing calls) must be
//! left bit for bit as they were. Without a GPU every test prints "skipped"
//! (`CUQR_REQUIRE_GPU=1` fails).
//!
//! Tolerances: every R comes from Givens rotations over the kept rows (a fold, a downdate
//! or a refold), backward stable to about c·(m + n)·u: 1e3·(m + n)·u on ‖RᵀR − AᵀA‖/‖A‖²,
//! and on x relative to the direct solve of these well-conditioned random problems 1e-9
//! (f64) and 1e-2 (f32). The kept rows are copies, scaled copies or A + UVᵀ with one fused
//! multiply-add a term: 8u relative to the row's size.

mod common;

use std::sync::Arc;

use cuqr::batch::{BatchRef, GpuRBatch};
use cuqr::{DevVec, Error, Gpu, GpuScalar, Scalar};
use faer::linalg::solvers::SolveLstsq;
use rand::rngs::StdRng;
use rand::Rng;

/// Every problem's kept rows (as weighted now) and right-hand sides.
#[derive(Clone)]
struct Model {
    n: usize,
    rows: Vec<Vec<Vec<f64>>>,
    rhs: Vec<Vec<f64>>,
}

impl Model {
    fn m(&self) -> usize {
        self.rhs[0].len()
    }

    fn solve(&self, i: usize) -> Vec<f64> {
        let (m, n) = (self.m(), self.n);
        let a = faer::Mat::from_fn(m, n, |r, c| self.rows[i][r][c]);
        let b = faer::Mat::from_fn(m, 1, |r, _| self.rhs[i][r]);
        let x = a.qr().solve_lstsq(&b);
        (0..n).map(|c| x[(c, 0)]).collect()
    }
}

fn cast<T: Scalar>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from_f64(x)).collect()
}

fn randn(rng: &mut StdRng, len: usize) -> Vec<f64> {
    (0..len).map(|_| rng.random::<f64>() * 2.0 - 1.0).collect()
}

/// Checks the kept rows, R's Gram matrix and x of every problem against the model.
fn check<T: GpuScalar>(bank: &GpuRBatch<T>, model: &Model, what: &str) {
    let (b, m, n) = (bank.batch(), bank.nrows(), bank.ncols());
    assert_eq!((m, n), (model.m(), model.n), "{what}: shape");
    let u = common::u::<T>();
    let (a, y) = bank.kept_data().unwrap();
    for i in 0..b {
        for r in 0..m {
            let row = &model.rows[i][r];
            let size = row
                .iter()
                .fold(model.rhs[i][r].abs(), |s, v| s.max(v.abs()));
            for c in 0..n {
                let d = (a[(i * m + r) * n + c].to_f64() - row[c]).abs();
                assert!(
                    d <= 8.0 * u * size.max(1.0),
                    "{what}: problem {i} kept A({r}, {c}) off by {d:e}"
                );
            }
            let d = (y[i * m + r].to_f64() - model.rhs[i][r]).abs();
            assert!(
                d <= 8.0 * u * size.max(1.0),
                "{what}: problem {i} kept b({r}) off by {d:e}"
            );
        }
    }
    let (rf, _, _) = bank.to_host().unwrap();
    let sol = bank.solve().unwrap();
    let tol = 1e3 * (m + n) as f64 * u;
    let xtol = if u > 1e-10 { 1e-2 } else { 1e-9 };
    for i in 0..b {
        let ri = &rf[i * n * n..(i + 1) * n * n];
        let (mut err, mut norm2) = (0.0f64, 0.0f64);
        for a_ in 0..n {
            for c in 0..n {
                let ata: f64 = model.rows[i].iter().map(|row| row[a_] * row[c]).sum();
                let rtr: f64 = (0..n)
                    .map(|k| ri[k * n + a_].to_f64() * ri[k * n + c].to_f64())
                    .sum();
                err += (rtr - ata).powi(2);
            }
            norm2 += model.rows[i]
                .iter()
                .map(|row| row[a_] * row[a_])
                .sum::<f64>();
        }
        let g = err.sqrt() / norm2;
        assert!(
            g <= tol,
            "{what}: problem {i}: ‖RᵀR − AᵀA‖/‖A‖² = {g:e} > {tol:e}"
        );
        assert!(
            sol.status[i].is_ok(),
            "{what}: problem {i}: {:?}",
            sol.status[i]
        );
        let x = model.solve(i);
        let got: Vec<f64> = sol.x[i * n..(i + 1) * n]
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let num: f64 = got.iter().zip(&x).map(|(p, q)| (p - q).powi(2)).sum();
        let den: f64 = x.iter().map(|q| q * q).sum();
        let e = (num / den.max(f64::MIN_POSITIVE)).sqrt();
        assert!(e <= xtol, "{what}: problem {i}: x off by {e:e}");
    }
}

/// Everything a problem holds on the host: R, d, ρ and the kept rows.
type Snapshot<T> = (Vec<T>, Vec<T>, Vec<T>, Vec<T>, Vec<T>);

fn snapshot<T: GpuScalar>(bank: &GpuRBatch<T>) -> Snapshot<T> {
    let (r, d, rho) = bank.to_host().unwrap();
    let (a, y) = bank.kept_data().unwrap();
    (r, d, rho, a, y)
}

/// Problem i's part of a snapshot.
fn part<T: GpuScalar>(s: &Snapshot<T>, i: usize, (m, n): (usize, usize)) -> Vec<u64> {
    let bits = |v: &[T]| v.iter().map(|x| x.to_f64().to_bits()).collect::<Vec<_>>();
    let mut out = bits(&s.0[i * n * n..(i + 1) * n * n]);
    out.extend(bits(&s.1[i * n..(i + 1) * n]));
    out.extend(bits(&s.2[i..i + 1]));
    out.extend(bits(&s.3[i * m * n..(i + 1) * m * n]));
    out.extend(bits(&s.4[i * m..(i + 1) * m]));
    out
}

/// Device memory holding `v`.
fn dev<T: GpuScalar>(gpu: &Gpu, v: &[T]) -> DevVec<T> {
    DevVec::from_slice(gpu, v).unwrap()
}

/// Runs every call on random data; with `device`, through the `*_device` calls (arguments
/// already in device memory).
fn run_kind<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    seed: u64,
    (b, m, n): (usize, usize, usize),
    device: bool,
) {
    let mut rng = common::rng(seed);
    let a = randn(&mut rng, b * m * n);
    let y = randn(&mut rng, b * m);
    let (at, yt) = (cast::<T>(&a), cast::<T>(&y));
    let mut bank = if device {
        GpuRBatch::factorize_keep_data_device(gpu, (&dev(gpu, &at), &dev(gpu, &yt)), (b, m, n))
    } else {
        GpuRBatch::factorize_keep_data(
            gpu,
            BatchRef::row_major(&at, b, m, n).unwrap(),
            BatchRef::row_major(&yt, b, m, 1).unwrap(),
        )
    }
    .unwrap();
    assert!(bank.keeps_data());
    let mut model = Model {
        n,
        rows: (0..b)
            .map(|i| {
                (0..m)
                    .map(|r| a[(i * m + r) * n..(i * m + r + 1) * n].to_vec())
                    .collect()
            })
            .collect(),
        rhs: (0..b).map(|i| y[i * m..(i + 1) * m].to_vec()).collect(),
    };
    // The data as T sees them.
    for i in 0..b {
        for row in &mut model.rows[i] {
            for v in row.iter_mut() {
                *v = T::from_f64(*v).to_f64();
            }
        }
        for v in &mut model.rhs[i] {
            *v = T::from_f64(*v).to_f64();
        }
    }
    check(&bank, &model, "factorize_keep_data");
    rows_phase::<T>(gpu, (&mut bank, &mut model), &mut rng, device);
    rank_phase::<T>(gpu, (&mut bank, &mut model), &mut rng, device);
    cols_phase::<T>(gpu, (&mut bank, &mut model), &mut rng, device);
    bank.refactorize().unwrap();
    check(&bank, &model, "refactorize");
}

#[test]
fn gpu_kept_r_batches_follow_their_rows() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    for (case, n) in [1usize, 2, 5, 8, 12, 16].into_iter().enumerate() {
        let (b, m) = (29 + 150 * (case % 2), n + 9 + case);
        run_kind::<f64>(&gpu, 70 + case as u64, (b, m, n), case % 2 == 0);
        run_kind::<f32>(&gpu, 80 + case as u64, (b, m, n), case % 2 == 1);
    }
}

/// The refusal tests' batch: B = 45 problems of 23 × 5 with their rows kept, and its data.
const SHAPE: (usize, usize, usize) = (45, 23, 5);

fn refusal_bank(gpu: &Arc<Gpu>, rng: &mut StdRng) -> (GpuRBatch<f64>, Vec<f64>, Vec<f64>) {
    let (b, m, n) = SHAPE;
    let a = randn(rng, b * m * n);
    let y = randn(rng, b * m);
    let bank = GpuRBatch::<f64>::factorize_keep_data(
        gpu,
        BatchRef::row_major(&a, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    (bank, a, y)
}

/// Problem i of two snapshots is the same, bit for bit.
fn same(s0: &Snapshot<f64>, s1: &Snapshot<f64>, i: usize) -> bool {
    let (_, m, n) = SHAPE;
    part(s0, i, (m, n)) == part(s1, i, (m, n))
}

/// Per-problem calls (rank-one, a window step) leave a refusing problem — non-finite data,
/// a rank-deficient result — bit for bit as it was while the others proceed.
#[test]
fn gpu_kept_r_per_problem_refusals() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (b, m, n) = SHAPE;
    let mut rng = common::rng(90);
    let (mut bank, a, _) = refusal_bank(&gpu, &mut rng);
    // rank_one: problem 3's u holds a NaN; problem 7's update makes column 2 equal column 0.
    let mut u = randn(&mut rng, b * m);
    let mut v = randn(&mut rng, b * n);
    u[3 * m + 4] = f64::NAN;
    for r in 0..m {
        u[7 * m + r] = a[(7 * m + r) * n] - a[(7 * m + r) * n + 2];
    }
    for c in 0..n {
        v[7 * n + c] = if c == 2 { 1.0 } else { 0.0 };
    }
    let before = snapshot(&bank);
    let rep = bank
        .rank_one(
            BatchRef::row_major(&u, b, m, 1).unwrap(),
            BatchRef::row_major(&v, b, n, 1).unwrap(),
        )
        .unwrap();
    let refused: Vec<usize> = rep.refused().map(|(i, _)| i).collect();
    assert_eq!(refused, vec![3, 7]);
    assert!(
        matches!(rep.outcomes[3], Err(Error::NonFinite { .. })),
        "{:?}",
        rep.outcomes[3]
    );
    assert!(
        matches!(rep.outcomes[7], Err(Error::RankDeficient { .. })),
        "{:?}",
        rep.outcomes[7]
    );
    let after = snapshot(&bank);
    for i in 0..b {
        assert_eq!(
            same(&before, &after, i),
            i == 3 || i == 7,
            "rank_one: problem {i}"
        );
    }

    // slide_kept: problem 30's new row holds an infinity; the others step.
    let mut row = randn(&mut rng, b * n);
    row[30 * n + 1] = f64::INFINITY;
    let e = randn(&mut rng, b);
    let before = snapshot(&bank);
    let rep = bank
        .slide_kept(
            BatchRef::row_major(&row, b, 1, n).unwrap(),
            BatchRef::row_major(&e, b, 1, 1).unwrap(),
            1,
            0.9,
        )
        .unwrap();
    assert_eq!(rep.refused().map(|(i, _)| i).collect::<Vec<_>>(), vec![30]);
    let after = snapshot(&bank);
    for i in 0..b {
        assert_eq!(same(&before, &after, i), i == 30, "slide_kept: problem {i}");
    }
}

/// All-or-nothing calls (a column in, rows out) refused by one problem leave every problem
/// as it was.
#[test]
fn gpu_kept_r_all_or_nothing_refusals() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (b, m, n) = SHAPE;
    let mut rng = common::rng(91);
    let (mut bank, a, y) = refusal_bank(&gpu, &mut rng);
    // insert_cols: problem 11's column is a copy of its column 1 → the call refuses.
    let (a_now, _) = bank.kept_data().unwrap();
    let mut col = randn(&mut rng, b * m);
    for r in 0..m {
        col[11 * m + r] = a_now[(11 * m + r) * n + 1];
    }
    let before = snapshot(&bank);
    match bank.insert_cols(2, BatchRef::row_major(&col, b, m, 1).unwrap()) {
        Err(Error::BatchRefused { problems, .. }) => {
            assert_eq!(problems.len(), 1);
            assert_eq!(problems[0].0, 11);
            assert!(matches!(problems[0].1, Error::RankDeficient { .. }));
        }
        other => panic!("insert_cols: {other:?}"),
    }
    assert_eq!(bank.ncols(), n);
    let after = snapshot(&bank);
    assert!(
        (0..b).all(|i| same(&before, &after, i)),
        "insert_cols changed a problem"
    );

    // delete_rows: problem 20's column 3 is zero but in row 6, so that row cannot leave.
    let mut a2 = a.clone();
    for r in 0..m {
        a2[(20 * m + r) * n + 3] = if r == 6 { 1.5 } else { 0.0 };
    }
    let mut bank2 = GpuRBatch::<f64>::factorize_keep_data(
        &gpu,
        BatchRef::row_major(&a2, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let before = snapshot(&bank2);
    match bank2.delete_rows(5, 3) {
        Err(Error::BatchRefused { problems, .. }) => {
            assert_eq!(problems.iter().map(|p| p.0).collect::<Vec<_>>(), vec![20]);
            assert!(matches!(problems[0].1, Error::DowndateFailed { .. }));
        }
        other => panic!("delete_rows: {other:?}"),
    }
    assert_eq!(bank2.nrows(), m);
    let after = snapshot(&bank2);
    assert!(
        (0..b).all(|i| same(&before, &after, i)),
        "delete_rows changed a problem"
    );
}

/// Arguments the problems share refuse the call; the calls that need kept rows refuse on a
/// batch without them, and the calls that give rows out on a batch with them.
#[test]
fn gpu_kept_r_argument_refusals() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (b, m, n) = SHAPE;
    let mut rng = common::rng(92);
    let (mut bank, a, y) = refusal_bank(&gpu, &mut rng);
    let (row, e, col) = (
        randn(&mut rng, b * n),
        randn(&mut rng, b),
        randn(&mut rng, b * m),
    );
    let (u, v) = (randn(&mut rng, b * m), randn(&mut rng, b * n));
    // Shared arguments refuse the call; calls that need kept rows refuse without them.
    assert!(matches!(
        bank.delete_rows(m - 1, 2),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        bank.insert_cols(n + 1, BatchRef::row_major(&col, b, m, 1).unwrap()),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        bank.shift_col(0, n),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        bank.slide_kept(
            BatchRef::row_major(&row, b, 1, n).unwrap(),
            BatchRef::row_major(&e, b, 1, 1).unwrap(),
            1,
            1.5
        ),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        bank.delete_rows_with(
            BatchRef::row_major(&row, b, 1, n).unwrap(),
            BatchRef::row_major(&e, b, 1, 1).unwrap()
        ),
        Err(Error::InvalidParam { .. })
    ));
    let plain = GpuRBatch::<f64>::factorize(
        &gpu,
        BatchRef::row_major(&a, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let mut plain = plain;
    assert!(!plain.keeps_data());
    assert!(matches!(
        plain.delete_rows(0, 1),
        Err(Error::NeedsData { .. })
    ));
    assert!(matches!(plain.refactorize(), Err(Error::NeedsData { .. })));
    assert!(matches!(plain.kept_data(), Err(Error::NeedsData { .. })));
    assert!(matches!(
        plain.rank_one(
            BatchRef::row_major(&u, b, m, 1).unwrap(),
            BatchRef::row_major(&v, b, n, 1).unwrap()
        ),
        Err(Error::NeedsData { .. })
    ));
}

/// The `*_device` calls of a batch without kept data give what the host calls give, bit for
/// bit (the same kernels on the same values).
#[test]
fn gpu_r_batch_device_calls_match_host_calls() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (b, m, n) = (61usize, 17usize, 6usize);
    let mut rng = common::rng(95);
    let a = randn(&mut rng, b * m * n);
    let y = randn(&mut rng, b * m);
    let (rows, rhs) = (randn(&mut rng, b * 2 * n), randn(&mut rng, b * 2));
    let mut host = GpuRBatch::<f64>::factorize(
        &gpu,
        BatchRef::row_major(&a, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let mut devb =
        GpuRBatch::<f64>::factorize_device(&gpu, (&dev(&gpu, &a), &dev(&gpu, &y)), (b, m, n))
            .unwrap();
    let same = |x: &GpuRBatch<f64>, z: &GpuRBatch<f64>, what: &str| {
        let (p, q) = (x.to_host().unwrap(), z.to_host().unwrap());
        assert!(p == q, "{what}: host and device calls differ");
    };
    same(&host, &devb, "factorize");
    host.insert_rows(
        BatchRef::row_major(&rows, b, 2, n).unwrap(),
        BatchRef::row_major(&rhs, b, 2, 1).unwrap(),
    )
    .unwrap();
    devb.insert_rows_device(devb.nrows(), 2, (&dev(&gpu, &rows), &dev(&gpu, &rhs)))
        .unwrap();
    same(&host, &devb, "insert_rows");
    host.delete_rows_with(
        BatchRef::row_major(&rows, b, 2, n).unwrap(),
        BatchRef::row_major(&rhs, b, 2, 1).unwrap(),
    )
    .unwrap();
    devb.delete_rows_with_device(2, (&dev(&gpu, &rows), &dev(&gpu, &rhs)))
        .unwrap();
    same(&host, &devb, "delete_rows_with");
    let (old, old_y): (Vec<f64>, Vec<f64>) = (
        (0..b)
            .flat_map(|i| a[i * m * n..i * m * n + n].to_vec())
            .collect(),
        (0..b).map(|i| y[i * m]).collect(),
    );
    let r1 = host
        .slide(
            BatchRef::row_major(&rows[..b * n], b, 1, n).unwrap(),
            BatchRef::row_major(&rhs[..b], b, 1, 1).unwrap(),
            BatchRef::row_major(&old, b, 1, n).unwrap(),
            BatchRef::row_major(&old_y, b, 1, 1).unwrap(),
            1.0,
        )
        .unwrap();
    let r2 = devb
        .slide_device(
            (1, &dev(&gpu, &rows[..b * n]), &dev(&gpu, &rhs[..b])),
            (1, &dev(&gpu, &old), &dev(&gpu, &old_y)),
            1.0,
        )
        .unwrap();
    assert_eq!(r1.all_ok(), r2.all_ok());
    same(&host, &devb, "slide");
    // Short buffers are refused before anything runs.
    assert!(matches!(
        devb.insert_rows_device(0, 3, (&dev(&gpu, &rows), &dev(&gpu, &rhs))),
        Err(Error::Shape { .. })
    ));
    same(&host, &devb, "refused insert_rows_device");
}

/// Rows in at a position, rows out by position, window steps with forgetting.
fn rows_phase<T: GpuScalar>(
    gpu: &Gpu,
    (bank, model): (&mut GpuRBatch<T>, &mut Model),
    rng: &mut StdRng,
    device: bool,
) {
    let b = bank.batch();
    let n = model.n;
    // Two rows in at position 2.
    let (u, e) = (randn(rng, b * 2 * n), randn(rng, b * 2));
    let (ut, et) = (cast::<T>(&u), cast::<T>(&e));
    if device {
        bank.insert_rows_device(2, 2, (&dev(gpu, &ut), &dev(gpu, &et)))
    } else {
        bank.insert_rows_at(
            2,
            BatchRef::row_major(&ut, b, 2, n).unwrap(),
            BatchRef::row_major(&et, b, 2, 1).unwrap(),
        )
    }
    .unwrap();
    for i in 0..b {
        for t in 0..2 {
            let row: Vec<f64> = ut[(i * 2 + t) * n..(i * 2 + t + 1) * n]
                .iter()
                .map(|v| v.to_f64())
                .collect();
            model.rows[i].insert(2 + t, row);
            model.rhs[i].insert(2 + t, et[i * 2 + t].to_f64());
        }
    }
    check(bank, model, "insert_rows_at");

    // Rows 1 and 2 out.
    bank.delete_rows(1, 2).unwrap();
    for i in 0..b {
        model.rows[i].drain(1..3);
        model.rhs[i].drain(1..3);
    }
    check(bank, model, "delete_rows");

    // Window steps with forgetting: one in and one out (per problem), then two in and one out.
    let lambda = 0.97;
    for (p, drop) in [(1usize, 1usize), (1, 1), (2, 1)] {
        let (u, e) = (randn(rng, b * p * n), randn(rng, b * p));
        let (ut, et) = (cast::<T>(&u), cast::<T>(&e));
        let rep = if device {
            bank.slide_kept_device(p, (&dev(gpu, &ut), &dev(gpu, &et)), drop, lambda)
        } else {
            bank.slide_kept(
                BatchRef::row_major(&ut, b, p, n).unwrap(),
                BatchRef::row_major(&et, b, p, 1).unwrap(),
                drop,
                lambda,
            )
        }
        .unwrap();
        assert!(
            rep.all_ok(),
            "slide_kept: {:?}",
            rep.refused().collect::<Vec<_>>()
        );
        let s = T::from_f64(lambda.sqrt());
        for i in 0..b {
            model.rows[i].drain(..drop);
            model.rhs[i].drain(..drop);
            for row in &mut model.rows[i] {
                for v in row.iter_mut() {
                    *v = (T::from_f64(*v) * s).to_f64();
                }
            }
            for v in &mut model.rhs[i] {
                *v = (T::from_f64(*v) * s).to_f64();
            }
            for t in 0..p {
                model.rows[i].push(
                    ut[(i * p + t) * n..(i * p + t + 1) * n]
                        .iter()
                        .map(|v| v.to_f64())
                        .collect(),
                );
                model.rhs[i].push(et[i * p + t].to_f64());
            }
        }
        check(bank, model, "slide_kept");
    }
}

/// Rank-one and rank-two updates.
fn rank_phase<T: GpuScalar>(
    gpu: &Gpu,
    (bank, model): (&mut GpuRBatch<T>, &mut Model),
    rng: &mut StdRng,
    device: bool,
) {
    let b = bank.batch();
    let (m, n) = (model.m(), model.n);
    // A + u·vᵀ, then A + U·Vᵀ with two terms.
    for k in [1usize, 2] {
        let (u, v) = (randn(rng, b * m * k), randn(rng, b * n * k));
        let (ut, vt) = (cast::<T>(&u), cast::<T>(&v));
        let (ur, vr) = (
            BatchRef::row_major(&ut, b, m, k).unwrap(),
            BatchRef::row_major(&vt, b, n, k).unwrap(),
        );
        let (ud, vd) = (dev(gpu, &ut), dev(gpu, &vt));
        let rep = match (device, k) {
            (true, 1) => bank.rank_one_device(&ud, &vd),
            (true, _) => bank.rank_k_device(&ud, &vd, k),
            (false, 1) => bank.rank_one(ur, vr),
            (false, _) => bank.rank_k(ur, vr),
        }
        .unwrap();
        assert!(
            rep.all_ok(),
            "rank-{k}: {:?}",
            rep.refused().collect::<Vec<_>>()
        );
        for i in 0..b {
            for r in 0..m {
                for c in 0..n {
                    let mut acc = T::from_f64(model.rows[i][r][c]);
                    for t in 0..k {
                        acc = ut[(i * m + r) * k + t].mul_add(vt[(i * n + c) * k + t], acc);
                    }
                    model.rows[i][r][c] = acc.to_f64();
                }
            }
        }
        check(bank, model, "rank_k");
    }
}

/// Columns in, replaced, moved and out.
fn cols_phase<T: GpuScalar>(
    gpu: &Gpu,
    (bank, model): (&mut GpuRBatch<T>, &mut Model),
    rng: &mut StdRng,
    device: bool,
) {
    let b = bank.batch();
    let (m, n) = (model.m(), model.n);
    // A column in at n/2 (where n + 1 ≤ 16), the first column replaced, column 0 moved last.
    let fresh_col = |rng: &mut StdRng| {
        let c = randn(rng, b * m);
        cast::<T>(&c)
    };
    if n < 16 {
        let k0 = n / 2;
        let ct = fresh_col(rng);
        if device {
            bank.insert_cols_device(k0, 1, &dev(gpu, &ct))
        } else {
            bank.insert_cols(k0, BatchRef::row_major(&ct, b, m, 1).unwrap())
        }
        .unwrap();
        for i in 0..b {
            for r in 0..m {
                model.rows[i][r].insert(k0, ct[i * m + r].to_f64());
            }
        }
        model.n += 1;
        check(bank, model, "insert_cols");
    }
    let n = model.n;
    let ct = fresh_col(rng);
    let rep = if device {
        bank.replace_cols_device(0, 1, &dev(gpu, &ct))
    } else {
        bank.replace_cols(0, BatchRef::row_major(&ct, b, m, 1).unwrap())
    }
    .unwrap();
    assert!(rep.all_ok());
    for i in 0..b {
        for r in 0..m {
            model.rows[i][r][0] = ct[i * m + r].to_f64();
        }
    }
    check(bank, model, "replace_cols");
    if n >= 2 {
        assert!(bank.shift_col(0, n - 1).unwrap().all_ok());
        for row in model.rows.iter_mut().flatten() {
            let v = row.remove(0);
            row.push(v);
        }
        check(bank, model, "shift_col");
        bank.delete_cols(n / 2, 1).unwrap();
        for row in model.rows.iter_mut().flatten() {
            row.remove(n / 2);
        }
        model.n -= 1;
        check(bank, model, "delete_cols");
    }
}
