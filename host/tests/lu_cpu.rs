//! The CPU blocked LU with partial pivoting against faer's partial-pivoting
//! LU and solve: ‖PA − LU‖_F/‖A‖_F ≤ 10·max(m, n)·u, the solve's backward error
//! ‖AX − B‖_F/(‖A‖_F‖X‖_F) ≤ 10·n·u (docs/algorithms.md#accuracy-measures tolerances), the same row
//! permutation and log|det| as faer, on seeded random inputs (never zero), structured inputs that
//! need pivoting, rectangular shapes, and singular / non-finite matrices.

mod common;

use cuqr::lu::{CpuLu, LuParams};
use cuqr::{Error, Mat, Scalar};
use faer::linalg::solvers::Solve;

fn to_faer<T: Scalar>(a: &Mat<T>) -> faer::Mat<f64> {
    faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64())
}

fn fro(a: &faer::Mat<f64>) -> f64 {
    a.norm_l2()
}

/// ‖PA − LU‖_F/‖A‖_F in f64.
fn fact_err<T: Scalar>(a: &Mat<T>, perm: &[usize], l: &Mat<T>, u: &Mat<T>) -> f64 {
    let (fa, fl, fu) = (to_faer(a), to_faer(l), to_faer(u));
    let lu = &fl * &fu;
    let pa = faer::Mat::from_fn(a.nrows(), a.ncols(), |i, j| fa[(perm[i], j)]);
    fro(&(&pa - &lu)) / fro(&fa)
}

/// ‖AX − B‖_F/(‖A‖_F‖X‖_F) in f64.
fn backward_err<T: Scalar>(a: &Mat<T>, x: &Mat<T>, b: &Mat<T>) -> f64 {
    let (fa, fx, fb) = (to_faer(a), to_faer(x), to_faer(b));
    fro(&(&(&fa * &fx) - &fb)) / (fro(&fa) * fro(&fx))
}

fn params(nb: usize, base: usize) -> LuParams {
    let mut p = LuParams::default();
    p.block_size = Some(nb);
    p.panel_base = Some(base);
    p
}

fn check_square<T: Scalar>(a: &Mat<T>, p: LuParams, q: usize, seed: u64, same_perm_as_faer: bool) {
    let n = a.nrows();
    let u = common::u::<T>();
    let lu = CpuLu::factorize(a.as_ref(), p).unwrap();
    let e = fact_err(a, &lu.perm(), &lu.l(), &lu.u());
    assert!(
        e <= 10.0 * n as f64 * u,
        "n={n} {}: ‖PA−LU‖/‖A‖ = {e:e}",
        T::NAME
    );
    // L unit lower with |l_ij| ≤ 1 (partial pivoting), U upper
    let l = lu.l();
    for j in 0..n {
        assert_eq!(l[(j, j)], T::ONE);
        for i in j + 1..n {
            assert!(l[(i, j)].abs() <= T::ONE, "|l| > 1 at ({i},{j})");
        }
    }
    let mut rng = common::rng(seed);
    let b: Mat<T> = common::signed_mat(&mut rng, n, q);
    let x = lu.solve(b.as_ref()).unwrap();
    let be = backward_err(a, &x, &b);
    assert!(
        be <= 10.0 * n as f64 * u,
        "n={n} {}: backward error {be:e}",
        T::NAME
    );
    // faer on the exactly widened matrix
    let fa = to_faer(a);
    let flu = fa.partial_piv_lu();
    if same_perm_as_faer {
        let (fwd, _) = flu.P().arrays();
        assert_eq!(
            lu.perm(),
            fwd.to_vec(),
            "row permutation differs from faer (n={n})"
        );
    }
    let fu = flu.U();
    let flog: f64 = (0..n).map(|j| fu[(j, j)].abs().ln()).sum();
    let (sign, log) = lu.det_sign_log();
    assert!(sign == 1.0 || sign == -1.0);
    assert!(
        (log - flog).abs() <= 10.0 * (n * n) as f64 * u + 1e-12,
        "log|det| {log} vs faer {flog}"
    );
    // solution against faer's (x is well determined for these random matrices)
    let fx = flu.solve(to_faer(&b));
    let dx = fro(&(&to_faer(&x) - &fx)) / fro(&fx);
    let cond_bound = 1e4; // κ of these random matrices is far below this
    assert!(
        dx <= 10.0 * n as f64 * u * cond_bound,
        "‖x − x_faer‖/‖x‖ = {dx:e}"
    );
}

fn random_square<T: Scalar>() {
    for (idx, &n) in [1usize, 31, 33, 127, 257].iter().enumerate() {
        let mut rng = common::rng(100 + idx as u64);
        let a: Mat<T> = common::signed_mat(&mut rng, n, n);
        check_square(
            &a,
            LuParams::default(),
            3,
            200 + idx as u64,
            T::NAME == "f64",
        );
        check_square(&a, params(16, 4), 1, 300 + idx as u64, T::NAME == "f64");
    }
}

#[test]
fn random_square_f64() {
    random_square::<f64>();
}

#[test]
fn random_square_f32() {
    random_square::<f32>();
}

#[test]
fn blocked_and_unblocked_pick_the_same_pivots() {
    let mut rng = common::rng(7);
    let a: Mat<f64> = common::signed_mat(&mut rng, 129, 129);
    let blk = CpuLu::factorize(a.as_ref(), params(32, 8)).unwrap();
    let unb = CpuLu::factorize(a.as_ref(), params(1, 1)).unwrap();
    assert_eq!(blk.ipiv(), unb.ipiv());
}

#[test]
fn tiny_leading_entry_needs_pivoting() {
    for &n in &[33usize, 100] {
        let mut rng = common::rng(11 + n as u64);
        let mut a: Mat<f64> = common::signed_mat(&mut rng, n, n);
        a[(0, 0)] = 1e-20;
        let lu = CpuLu::factorize(a.as_ref(), params(16, 4)).unwrap();
        assert_ne!(lu.ipiv()[0], 0, "the tiny entry must not be the pivot");
        check_square(&a, params(16, 4), 2, 12, true);
    }
}

#[test]
fn every_step_pivots() {
    // rows of a diagonally dominant matrix in reverse order: each step must swap
    let n = 45;
    let mut rng = common::rng(21);
    let d: Mat<f64> = common::signed_mat(&mut rng, n, n);
    let a = Mat::from_fn(n, n, |i, j| {
        let r = n - 1 - i;
        if r == j {
            10.0 * n as f64
        } else {
            d[(r, j)]
        }
    });
    let lu = CpuLu::factorize(a.as_ref(), params(8, 2)).unwrap();
    assert_eq!(lu.perm(), (0..n).rev().collect::<Vec<_>>());
    check_square(&a, params(8, 2), 2, 22, true);
}

fn rectangular<T: Scalar>() {
    for (idx, &(m, n)) in [(61usize, 29usize), (29, 61), (130, 97), (97, 130)]
        .iter()
        .enumerate()
    {
        let mut rng = common::rng(400 + idx as u64);
        let a: Mat<T> = common::signed_mat(&mut rng, m, n);
        for p in [LuParams::default(), params(16, 4)] {
            let lu = CpuLu::factorize(a.as_ref(), p).unwrap();
            let k = m.min(n);
            let (l, u) = (lu.l(), lu.u());
            assert_eq!((l.nrows(), l.ncols(), u.nrows(), u.ncols()), (m, k, k, n));
            let e = fact_err(&a, &lu.perm(), &l, &u);
            assert!(
                e <= 10.0 * m.max(n) as f64 * common::u::<T>(),
                "{m}x{n}: {e:e}"
            );
            if T::NAME == "f64" {
                let flu = to_faer(&a).partial_piv_lu();
                let (fwd, _) = flu.P().arrays();
                assert_eq!(
                    lu.perm(),
                    fwd.to_vec(),
                    "{m}x{n}: permutation differs from faer"
                );
            }
            // solve needs a square matrix
            let b: Mat<T> = common::signed_mat(&mut rng, m, 1);
            assert!(matches!(lu.solve(b.as_ref()), Err(Error::Shape { .. })));
        }
    }
}

#[test]
fn rectangular_f64() {
    rectangular::<f64>();
}

#[test]
fn rectangular_f32() {
    rectangular::<f32>();
}

#[test]
fn empty_matrix_is_a_shape_error() {
    for (m, n) in [(0, 4), (4, 0), (0, 0)] {
        match CpuLu::factorize(Mat::<f64>::zeros(m, n).as_ref(), LuParams::default()) {
            Err(Error::Shape { got: 0, .. }) => {}
            other => panic!("{m}x{n}: expected a Shape error, got {other:?}"),
        }
    }
}

#[test]
fn singular_zero_column() {
    let mut rng = common::rng(31);
    let n = 67;
    let a: Mat<f64> = Mat::from_fn(n, n, |_, j| {
        if j == 40 {
            0.0
        } else {
            common::nonzero(&mut rng)
        }
    });
    match CpuLu::factorize(a.as_ref(), params(16, 4)) {
        Err(Error::Singular { column, .. }) => assert_eq!(column, 40),
        other => panic!("expected Singular at column 40, got {other:?}"),
    }
}

#[test]
fn singular_duplicate_column() {
    let mut rng = common::rng(32);
    let n = 50;
    let mut a: Mat<f64> = common::signed_mat(&mut rng, n, n);
    for i in 0..n {
        a[(i, 37)] = a[(i, 5)];
    }
    match CpuLu::factorize(a.as_ref(), LuParams::default()) {
        Err(Error::Singular {
            column, pivot, tol, ..
        }) => {
            assert_eq!(column, 37);
            assert!(pivot <= tol);
        }
        other => panic!("expected Singular at column 37, got {other:?}"),
    }
}

#[test]
fn non_finite_names_the_entry() {
    let mut rng = common::rng(33);
    let mut a: Mat<f32> = common::signed_mat(&mut rng, 20, 20);
    a[(4, 13)] = f32::NAN;
    match CpuLu::factorize(a.as_ref(), LuParams::default()) {
        Err(Error::NonFinite { row, col, .. }) => assert_eq!((row, col), (4, 13)),
        other => panic!("expected NonFinite, got {other:?}"),
    }
    a[(4, 13)] = f32::INFINITY;
    assert!(matches!(
        CpuLu::factorize(a.as_ref(), LuParams::default()),
        Err(Error::NonFinite { .. })
    ));
}

#[test]
fn solve_rejects_bad_b() {
    let mut rng = common::rng(34);
    let a: Mat<f64> = common::signed_mat(&mut rng, 10, 10);
    let lu = CpuLu::factorize(a.as_ref(), LuParams::default()).unwrap();
    let b: Mat<f64> = common::signed_mat(&mut rng, 9, 2);
    assert!(matches!(lu.solve(b.as_ref()), Err(Error::Shape { .. })));
    let mut b: Mat<f64> = common::signed_mat(&mut rng, 10, 2);
    b[(3, 1)] = f64::NAN;
    assert!(matches!(lu.solve(b.as_ref()), Err(Error::NonFinite { .. })));
}
