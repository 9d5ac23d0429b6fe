//! Batched R-only states on the GPU (`cuqr::batch::GpuRBatch`) against each problem's
//! own least-squares solve (faer) and Gram matrix: factorisation, rows in and out, window
//! steps with forgetting, the rank test, and refusals that leave the refused problems (or,
//! for the all-or-nothing updates, every problem) bit for bit unchanged. Random data,
//! sizes not multiples of 32, n over the register instances (1..=8) and the general one
//! (9..=16). Without a GPU every test prints "skipped" (`CUQR_REQUIRE_GPU=1` fails).
//!
//! Tolerances: the states are updated by Givens rotations and downdates, backward stable
//! to about c·(m + n)·u per update; the checks allow 1e3·(m + n)·u on ‖RᵀR − AᵀA‖/‖A‖² and
//! on x relative to the well-conditioned direct solve.

mod common;

use std::sync::Arc;

use cuqr::batch::{BatchRef, GpuRBatch};
use cuqr::{Error, Gpu, GpuScalar, Scalar};
use faer::linalg::solvers::SolveLstsq;
use rand::rngs::StdRng;
use rand::Rng;

/// Each problem's rows (weighted) and right-hand sides, as the test's model.
struct Model {
    n: usize,
    /// Per problem: rows (each n long) with their right-hand sides, and the weight each
    /// row now carries (forgetting multiplies every weight by λ).
    rows: Vec<Vec<(Vec<f64>, f64, f64)>>,
}

impl Model {
    fn gram_error<T: GpuScalar>(&self, r: &[T], i: usize) -> f64 {
        let n = self.n;
        let mut ata = vec![0.0; n * n];
        let mut norm2 = 0.0;
        for (x, _, w) in &self.rows[i] {
            for a in 0..n {
                norm2 += w * x[a] * x[a];
                for c in 0..n {
                    ata[a * n + c] += w * x[a] * x[c];
                }
            }
        }
        let ri = &r[i * n * n..(i + 1) * n * n];
        let mut err = 0.0f64;
        for a in 0..n {
            for c in 0..n {
                let rtr: f64 = (0..n)
                    .map(|k| ri[k * n + a].to_f64() * ri[k * n + c].to_f64())
                    .sum();
                err += (rtr - ata[a * n + c]).powi(2);
            }
        }
        err.sqrt() / norm2
    }

    fn solve(&self, i: usize) -> Vec<f64> {
        let rows = &self.rows[i];
        let (m, n) = (rows.len(), self.n);
        let a = faer::Mat::from_fn(m, n, |r, c| rows[r].2.sqrt() * rows[r].0[c]);
        let b = faer::Mat::from_fn(m, 1, |r, _| rows[r].2.sqrt() * rows[r].1);
        let x = a.qr().solve_lstsq(&b);
        (0..n).map(|c| x[(c, 0)]).collect()
    }
}

fn rel(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum();
    let den: f64 = b.iter().map(|q| q * q).sum();
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// Checks every problem against the model: the Gram matrix and the solution.
fn check<T: GpuScalar>(bank: &GpuRBatch<T>, model: &Model, what: &str) {
    let (r, _, _) = bank.to_host().unwrap();
    let sol = bank.solve().unwrap();
    let (m, n) = (bank.nrows(), bank.ncols());
    let u = common::u::<T>();
    let tol = 1e3 * (m + n) as f64 * u;
    let xtol = if u > 1e-10 { 1e-2 } else { 1e-9 };
    for i in 0..bank.batch() {
        let e = model.gram_error(&r, i);
        assert!(e <= tol, "{what}: problem {i}: gram error {e:e} > {tol:e}");
        assert!(
            sol.status[i].is_ok(),
            "{what}: problem {i}: {:?}",
            sol.status[i]
        );
        let x: Vec<f64> = sol.x[i * n..(i + 1) * n]
            .iter()
            .map(|v| v.to_f64())
            .collect();
        let d = rel(&x, &model.solve(i));
        assert!(d <= xtol, "{what}: problem {i}: x relative error {d:e}");
    }
}

fn random_rows(rng: &mut StdRng, b: usize, p: usize, n: usize) -> (Vec<f64>, Vec<f64>) {
    let rows = (0..b * p * n)
        .map(|_| rng.random::<f64>() * 2.0 - 1.0)
        .collect();
    let rhs = (0..b * p)
        .map(|_| rng.random::<f64>() * 2.0 - 1.0)
        .collect();
    (rows, rhs)
}

fn cast<T: Scalar>(v: &[f64]) -> Vec<T> {
    v.iter().map(|&x| T::from_f64(x)).collect()
}

/// Adds rows (b × p × n) to the model with weight 1.
fn model_add(model: &mut Model, rows: &[f64], rhs: &[f64], p: usize) {
    let n = model.n;
    for (i, pr) in model.rows.iter_mut().enumerate() {
        for r in 0..p {
            let at = (i * p + r) * n;
            pr.push((rows[at..at + n].to_vec(), rhs[i * p + r], 1.0));
        }
    }
}

fn run_kind<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64, b: usize, m: usize, n: usize) {
    let mut rng = common::rng(seed);
    let (a, y) = random_rows(&mut rng, b, m, n);
    let (at, yt) = (cast::<T>(&a), cast::<T>(&y));
    let mut bank = GpuRBatch::factorize(
        gpu,
        BatchRef::row_major(&at, b, m, n).unwrap(),
        BatchRef::row_major(&yt, b, m, 1).unwrap(),
    )
    .unwrap();
    let mut model = Model {
        n,
        rows: vec![Vec::new(); b],
    };
    model_add(&mut model, &a, &y, m);
    check(&bank, &model, "factorize");
    // Two rows in.
    let (u, e) = random_rows(&mut rng, b, 2, n);
    bank.insert_rows(
        BatchRef::row_major(&cast::<T>(&u), b, 2, n).unwrap(),
        BatchRef::row_major(&cast::<T>(&e), b, 2, 1).unwrap(),
    )
    .unwrap();
    model_add(&mut model, &u, &e, 2);
    assert_eq!(bank.nrows(), m + 2);
    check(&bank, &model, "insert_rows");
    // The first row of each problem out (as it entered).
    let first: Vec<f64> = (0..b).flat_map(|i| model.rows[i][0].0.clone()).collect();
    let first_y: Vec<f64> = (0..b).map(|i| model.rows[i][0].1).collect();
    bank.delete_rows_with(
        BatchRef::row_major(&cast::<T>(&first), b, 1, n).unwrap(),
        BatchRef::row_major(&cast::<T>(&first_y), b, 1, 1).unwrap(),
    )
    .unwrap();
    for pr in &mut model.rows {
        pr.remove(0);
    }
    check(&bank, &model, "delete_rows_with");
    // Window steps with forgetting: one row in, the oldest out with its current weight.
    let lambda = 0.97;
    for step in 0..3 {
        let (u, e) = random_rows(&mut rng, b, 1, n);
        for pr in &mut model.rows {
            for row in pr.iter_mut() {
                row.2 *= lambda;
            }
        }
        let w: Vec<f64> = (0..b).map(|i| model.rows[i][0].2.sqrt()).collect();
        let old: Vec<f64> = (0..b)
            .flat_map(|i| {
                model.rows[i][0]
                    .0
                    .iter()
                    .map(|v| v * w[i])
                    .collect::<Vec<_>>()
            })
            .collect();
        let old_y: Vec<f64> = (0..b).map(|i| model.rows[i][0].1 * w[i]).collect();
        let rep = bank
            .slide(
                BatchRef::row_major(&cast::<T>(&u), b, 1, n).unwrap(),
                BatchRef::row_major(&cast::<T>(&e), b, 1, 1).unwrap(),
                BatchRef::row_major(&cast::<T>(&old), b, 1, n).unwrap(),
                BatchRef::row_major(&cast::<T>(&old_y), b, 1, 1).unwrap(),
                lambda,
            )
            .unwrap();
        assert!(
            rep.all_ok(),
            "step {step}: {:?}",
            rep.refused().collect::<Vec<_>>()
        );
        for pr in &mut model.rows {
            pr.remove(0);
        }
        model_add(&mut model, &u, &e, 1);
        check(&bank, &model, "slide");
    }
    // Columns out (an interior block, or the first when n is small), then the residual
    // norms against the model's own least squares.
    if n >= 2 {
        let (k0, p) = if n > 3 { (1, 2) } else { (0, 1) };
        bank.delete_cols(k0, p).unwrap();
        assert_eq!(bank.ncols(), n - p);
        for pr in &mut model.rows {
            for row in pr.iter_mut() {
                row.0.drain(k0..k0 + p);
            }
        }
        model.n = n - p;
        check(&bank, &model, "delete_cols");
        let sol = bank.solve().unwrap();
        let rtol = if common::u::<T>() > 1e-10 {
            1e-3
        } else {
            1e-10
        };
        for i in 0..b {
            let x = model.solve(i);
            let (mut res, mut bn) = (0.0f64, 0.0f64);
            for (row, y, w) in &model.rows[i] {
                let ax: f64 = row.iter().zip(&x).map(|(a, c)| a * c).sum();
                res += w * (y - ax).powi(2);
                bn += w * y * y;
            }
            let d = (sol.residual_norms[i] - res.sqrt()).abs() / bn.sqrt();
            assert!(
                d <= rtol,
                "delete_cols: problem {i}: residual norm off by {d:e}"
            );
        }
    }
}

#[test]
fn gpu_batched_r_states_match_each_problems_solve() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    for (case, n) in [1usize, 3, 5, 8, 11, 16].into_iter().enumerate() {
        let (b, m) = (37 + 211 * (case % 2), n + 7 + case);
        run_kind::<f64>(&gpu, 10 + case as u64, b, m, n);
        run_kind::<f32>(&gpu, 20 + case as u64, b, m, n);
    }
}

#[test]
fn gpu_batched_refusals_leave_problems_unchanged() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (b, m, n) = (53usize, 19usize, 4usize);
    let mut rng = common::rng(40);
    let (a, y) = random_rows(&mut rng, b, m, n);
    let mut bank = GpuRBatch::<f64>::factorize(
        &gpu,
        BatchRef::row_major(&a, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let before = bank.to_host().unwrap();
    // A NaN in problem 7's new row: insert_rows is all-or-nothing.
    let (mut u, e) = random_rows(&mut rng, b, 1, n);
    u[7 * n + 2] = f64::NAN;
    match bank.insert_rows(
        BatchRef::row_major(&u, b, 1, n).unwrap(),
        BatchRef::row_major(&e, b, 1, 1).unwrap(),
    ) {
        Err(Error::BatchRefused { problems, .. }) => {
            assert_eq!(problems.iter().map(|p| p.0).collect::<Vec<_>>(), vec![7]);
        }
        other => panic!("expected BatchRefused, got {other:?}"),
    }
    assert_eq!(bank.to_host().unwrap(), before);
    assert_eq!(bank.nrows(), m);
    // A window step: problem 7 refuses alone (NaN), problem 11's downdate removes a row
    // that carries nearly all of column 0 (refused), the others move.
    let mut old: Vec<f64> = (0..b * n).map(|_| 0.01).collect();
    let old_y = vec![0.0; b];
    for j in 0..n {
        old[11 * n + j] = if j == 0 { 1e8 } else { 0.0 };
    }
    let rep = bank
        .slide(
            BatchRef::row_major(&u, b, 1, n).unwrap(),
            BatchRef::row_major(&e, b, 1, 1).unwrap(),
            BatchRef::row_major(&old, b, 1, n).unwrap(),
            BatchRef::row_major(&old_y, b, 1, 1).unwrap(),
            1.0,
        )
        .unwrap();
    let refused: Vec<usize> = rep.refused().map(|(i, _)| i).collect();
    assert_eq!(refused, vec![7, 11]);
    assert!(matches!(rep.outcomes[7], Err(Error::NonFinite { .. })));
    assert!(matches!(
        rep.outcomes[11],
        Err(Error::DowndateFailed { .. })
    ));
    let after = bank.to_host().unwrap();
    for i in 0..b {
        let same = after.0[i * n * n..(i + 1) * n * n] == before.0[i * n * n..(i + 1) * n * n]
            && after.1[i * n..(i + 1) * n] == before.1[i * n..(i + 1) * n]
            && after.2[i] == before.2[i];
        assert_eq!(same, i == 7 || i == 11, "problem {i}");
    }
    // Shared arguments: wrong batch, wrong n, λ, too many rows out.
    let short = BatchRef::row_major(&u[..(b - 1) * n], b - 1, 1, n).unwrap();
    assert!(matches!(
        bank.insert_rows(
            short,
            BatchRef::row_major(&e[..b - 1], b - 1, 1, 1).unwrap()
        ),
        Err(Error::Shape { .. })
    ));
    let ok_rows = BatchRef::row_major(&e, b, 1, 1).unwrap();
    assert!(matches!(
        bank.slide(ok_rows, ok_rows, ok_rows, ok_rows, 0.5),
        Err(Error::Shape { .. })
    ));
    let r1 = BatchRef::row_major(&u, b, 1, n).unwrap();
    assert!(matches!(
        bank.slide(r1, ok_rows, r1, ok_rows, 1.5),
        Err(Error::InvalidParam { .. })
    ));
    let many: Vec<f64> = vec![0.5; b * m * n];
    let many_y = vec![0.0; b * m];
    assert!(matches!(
        bank.delete_rows_with(
            BatchRef::row_major(&many, b, m, n).unwrap(),
            BatchRef::row_major(&many_y, b, m, 1).unwrap()
        ),
        Err(Error::Underdetermined { .. })
    ));
    // Column deletion's arguments: nothing changes.
    let before = bank.to_host().unwrap();
    assert!(matches!(
        bank.delete_cols(0, 0),
        Err(Error::EmptyBlock { .. })
    ));
    assert!(matches!(
        bank.delete_cols(n - 1, 2),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        bank.delete_cols(0, n),
        Err(Error::InvalidParam { .. })
    ));
    assert_eq!(bank.to_host().unwrap(), before);
    // A rank-deficient problem: zero rows only for problem 3 after a fresh factorisation.
    let mut a2 = a.clone();
    for r in 0..m {
        a2[(3 * m + r) * n + 1] = 0.0;
    }
    let bank2 = GpuRBatch::<f64>::factorize(
        &gpu,
        BatchRef::row_major(&a2, b, m, n).unwrap(),
        BatchRef::row_major(&y, b, m, 1).unwrap(),
    )
    .unwrap();
    let sol = bank2.solve().unwrap();
    for i in 0..b {
        assert_eq!(sol.status[i].is_err(), i == 3, "problem {i}");
    }
    assert!(matches!(
        sol.status[3],
        Err(Error::RankDeficient { column: 1, .. })
    ));
    assert!(sol.x[3 * n..4 * n].iter().all(|v| v.is_nan()));
    // n outside 1..=16 and m < n are refused before any launch.
    let wide = vec![1.0f64; b * 3 * 17];
    assert!(matches!(
        GpuRBatch::<f64>::factorize(
            &gpu,
            BatchRef::row_major(&wide, b, 3, 17).unwrap(),
            BatchRef::row_major(&vec![0.0; b * 3], b, 3, 1).unwrap()
        ),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        GpuRBatch::<f64>::factorize(
            &gpu,
            BatchRef::row_major(&wide[..b * 3 * 4], b, 3, 4).unwrap(),
            BatchRef::row_major(&vec![0.0; b * 3], b, 3, 1).unwrap()
        ),
        Err(Error::Underdetermined { .. })
    ));
}
