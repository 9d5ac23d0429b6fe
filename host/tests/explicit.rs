//! Explicit-factor updates (`cuqr::explicit`) in f32, f64, c32 and c64 on tall, square and
//! wide factorisations, full and economic: every update checked against the matrix it
//! must factor (‖QᴴQ − I‖, R's zero triangle, ‖QR − A′‖/‖A′‖) and the result shapes
//! SciPy's functions return; refusals leave the factorisation as it was.

use cuqr::explicit::{c32, c64, ExplicitQr, Field};
use cuqr::Error;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Elements the test builds from random numbers and converts to c64 for its checks.
trait TestField: Field + faer::traits::ComplexField {
    fn random(rng: &mut StdRng) -> Self;
    fn wide(self) -> c64;
    /// Unit roundoff of the real type.
    const U: f64;
}
impl TestField for f64 {
    fn random(rng: &mut StdRng) -> Self {
        rng.random_range(-1.0..1.0)
    }
    fn wide(self) -> c64 {
        c64::new(self, 0.0)
    }
    const U: f64 = f64::EPSILON / 2.0;
}
impl TestField for f32 {
    fn random(rng: &mut StdRng) -> Self {
        rng.random_range(-1.0..1.0)
    }
    fn wide(self) -> c64 {
        c64::new(self as f64, 0.0)
    }
    const U: f64 = f32::EPSILON as f64 / 2.0;
}
impl TestField for c64 {
    fn random(rng: &mut StdRng) -> Self {
        c64::new(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))
    }
    fn wide(self) -> c64 {
        self
    }
    const U: f64 = f64::EPSILON / 2.0;
}
impl TestField for c32 {
    fn random(rng: &mut StdRng) -> Self {
        c32::new(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))
    }
    fn wide(self) -> c64 {
        c64::new(self.re as f64, self.im as f64)
    }
    const U: f64 = f32::EPSILON as f64 / 2.0;
}

/// A column-major m×n matrix.
#[derive(Clone)]
struct A<T> {
    m: usize,
    n: usize,
    x: Vec<T>,
}

impl<T: TestField> A<T> {
    fn random(m: usize, n: usize, rng: &mut StdRng) -> Self {
        Self {
            m,
            n,
            x: (0..m * n).map(|_| T::random(rng)).collect(),
        }
    }
    fn at(&self, i: usize, j: usize) -> T {
        self.x[i + j * self.m]
    }
    fn rows_inserted(&self, k: usize, u: &A<T>) -> Self {
        let m = self.m + u.m;
        let x = (0..m * self.n)
            .map(|e| {
                let (i, j) = (e % m, e / m);
                if i < k {
                    self.at(i, j)
                } else if i < k + u.m {
                    u.at(i - k, j)
                } else {
                    self.at(i - u.m, j)
                }
            })
            .collect();
        Self { m, n: self.n, x }
    }
    fn rows_deleted(&self, k: usize, p: usize) -> Self {
        let m = self.m - p;
        let x = (0..m * self.n)
            .map(|e| {
                let (i, j) = (e % m, e / m);
                self.at(if i < k { i } else { i + p }, j)
            })
            .collect();
        Self { m, n: self.n, x }
    }
    fn cols_inserted(&self, k: usize, u: &A<T>) -> Self {
        let mut x = self.x[..k * self.m].to_vec();
        x.extend_from_slice(&u.x);
        x.extend_from_slice(&self.x[k * self.m..]);
        Self {
            m: self.m,
            n: self.n + u.n,
            x,
        }
    }
    fn cols_deleted(&self, k: usize, p: usize) -> Self {
        let mut x = self.x[..k * self.m].to_vec();
        x.extend_from_slice(&self.x[(k + p) * self.m..]);
        Self {
            m: self.m,
            n: self.n - p,
            x,
        }
    }
    /// A + U·Vᴴ.
    fn plus_outer(&self, u: &A<T>, v: &A<T>) -> Self {
        let mut out = self.clone();
        for l in 0..u.n {
            for j in 0..self.n {
                for i in 0..self.m {
                    out.x[i + j * self.m] += u.at(i, l) * v.at(j, l).conj();
                }
            }
        }
        out
    }
}

/// (Q, R) of `a` from faer's Householder QR: full, or economic (m > n).
fn factor<T: TestField>(a: &A<T>, economic: bool) -> ExplicitQr<T> {
    let f = faer::Mat::<T>::from_fn(a.m, a.n, |i, j| a.at(i, j));
    let qr = f.qr();
    let (q, r) = if economic {
        (qr.compute_thin_Q(), qr.thin_R().to_owned())
    } else {
        let r = qr.thin_R();
        // faer keeps min(m, n) rows of R: the full R has zero rows below
        (
            qr.compute_Q(),
            faer::Mat::from_fn(
                a.m,
                a.n,
                |i, j| if i < r.nrows() { r[(i, j)] } else { T::zero() },
            ),
        )
    };
    let col_major = |x: &faer::Mat<T>| {
        (0..x.ncols())
            .flat_map(|j| (0..x.nrows()).map(move |i| (i, j)))
            .map(|(i, j)| x[(i, j)])
            .collect::<Vec<_>>()
    };
    ExplicitQr::new(
        &col_major(&q),
        (q.nrows(), q.ncols()),
        &col_major(&r),
        (r.nrows(), r.ncols()),
    )
    .expect("faer's factors are accepted")
}

/// Checks that `qr` factors `a` within `tol`: ‖QᴴQ − I‖_max, R's strictly lower part and
/// ‖QR − A‖_F/‖A‖_F.
fn check<T: TestField>(qr: &ExplicitQr<T>, a: &A<T>, tol: f64, what: &str) {
    let ((m, t), (tr, n)) = (qr.q_shape(), qr.r_shape());
    assert_eq!((m, n, tr), (a.m, a.n, t), "{what}: shapes");
    assert!(
        t == m || (t == n && m > n),
        "{what}: Q {m}x{t} R {tr}x{n} is neither full nor economic"
    );
    let q: Vec<c64> = qr.q().iter().map(|&x| x.wide()).collect();
    let r: Vec<c64> = qr.r().iter().map(|&x| x.wide()).collect();
    let mut orth = 0.0f64;
    for a_ in 0..t {
        for b in 0..t {
            let d: c64 = (0..m).map(|i| q[i + a_ * m].conj() * q[i + b * m]).sum();
            let e = if a_ == b { d - c64::new(1.0, 0.0) } else { d };
            orth = orth.max(e.norm());
        }
    }
    assert!(orth <= tol, "{what}: ‖QᴴQ − I‖ = {orth:e} > {tol:e}");
    let norm_a =
        a.x.iter()
            .map(|x| x.wide().norm_sqr())
            .sum::<f64>()
            .sqrt()
            .max(f64::MIN_POSITIVE);
    let mut lower = 0.0f64;
    let mut resid = 0.0f64;
    for j in 0..n {
        for i in 0..t {
            if i > j {
                lower = lower.max(r[i + j * t].norm());
            }
        }
        for i in 0..m {
            let qr_ij: c64 = (0..t).map(|l| q[i + l * m] * r[l + j * t]).sum();
            resid += (qr_ij - a.at(i, j).wide()).norm_sqr();
        }
    }
    assert!(lower <= tol * norm_a, "{what}: R's lower part {lower:e}");
    let rel = resid.sqrt() / norm_a;
    assert!(rel <= tol, "{what}: ‖QR − A‖/‖A‖ = {rel:e} > {tol:e}");
}

/// Shapes (m, n): tall, square, wide, one row, one column; none a multiple of 32.
const SHAPES: &[(usize, usize)] = &[(9, 5), (7, 7), (5, 9), (1, 4), (6, 1), (13, 3)];

/// Every update on every shape, full and economic, applied in a chain, each step checked.
fn every_update<T: TestField>(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for &(m, n) in SHAPES {
        for economic in [false, true] {
            if economic && m <= n {
                continue;
            }
            let mut a = A::<T>::random(m, n, &mut rng);
            let mut qr = factor(&a, economic);
            // first-order bound: each entry passes through O(m + n) rotations per update
            let tol = |a: &A<T>| 30.0 * (a.m + a.n) as f64 * T::U;
            let tag = |op: &str, a: &A<T>| {
                format!(
                    "{} {op} on {m}x{n} (now {}x{}), economic {economic}",
                    T::NAME,
                    a.m,
                    a.n
                )
            };

            let p = 2;
            let u = A::<T>::random(p, a.n, &mut rng);
            let k = rng.random_range(0..=a.m);
            qr.insert_rows(k, &u.x, p).unwrap();
            a = a.rows_inserted(k, &u);
            check(&qr, &a, tol(&a), &tag("insert_rows", &a));

            let u = A::<T>::random(a.m, 2, &mut rng);
            let k = rng.random_range(0..=a.n);
            qr.insert_cols(k, &u.x, 2, None).unwrap();
            a = a.cols_inserted(k, &u);
            check(&qr, &a, tol(&a), &tag("insert_cols", &a));

            let (u, v) = (
                A::<T>::random(a.m, 2, &mut rng),
                A::<T>::random(a.n, 2, &mut rng),
            );
            qr.rank_k(&u.x, &v.x, 2).unwrap();
            a = a.plus_outer(&u, &v);
            check(&qr, &a, tol(&a), &tag("rank_k", &a));

            let p = 3.min(a.m - 1);
            let k = rng.random_range(0..=a.m - p);
            qr.delete_rows(k, p).unwrap();
            a = a.rows_deleted(k, p);
            check(&qr, &a, tol(&a), &tag("delete_rows", &a));

            let p = 2.min(a.n - 1);
            let k = rng.random_range(0..=a.n - p);
            qr.delete_cols(k, p).unwrap();
            a = a.cols_deleted(k, p);
            check(&qr, &a, tol(&a), &tag("delete_cols", &a));
        }
    }
}

#[test]
fn every_update_f64() {
    every_update::<f64>(1);
}
#[test]
fn every_update_f32() {
    every_update::<f32>(2);
}
#[test]
fn every_update_c64() {
    every_update::<c64>(3);
}
#[test]
fn every_update_c32() {
    every_update::<c32>(4);
}

/// An economic factorisation goes wide the way SciPy's does: rows deleted past m = n leave
/// a square Q, and columns inserted past n = m make R wide.
#[test]
fn economic_factorisations_turn_full_at_the_square() {
    let mut rng = StdRng::seed_from_u64(5);
    let a = A::<c64>::random(8, 5, &mut rng);
    let mut qr = factor(&a, true);
    qr.delete_rows(2, 5).unwrap();
    assert_eq!((qr.q_shape(), qr.r_shape()), ((3, 3), (3, 5)));
    check(
        &qr,
        &a.rows_deleted(2, 5),
        1e-13,
        "economic rows past the square",
    );

    let mut qr = factor(&a, true);
    let u = A::<c64>::random(8, 4, &mut rng);
    qr.insert_cols(1, &u.x, 4, None).unwrap();
    assert_eq!((qr.q_shape(), qr.r_shape()), ((8, 8), (8, 9)));
    check(
        &qr,
        &a.cols_inserted(1, &u),
        1e-13,
        "economic columns past the square",
    );
}

/// Deleting everything gives SciPy's empty factors; deleting from a 1×n wide one works.
#[test]
fn everything_deleted() {
    let mut rng = StdRng::seed_from_u64(6);
    let a = A::<f64>::random(4, 6, &mut rng);
    let mut qr = factor(&a, false);
    qr.delete_rows(0, 4).unwrap();
    assert_eq!((qr.q_shape(), qr.r_shape()), ((0, 0), (0, 6)));
    let b = A::<f64>::random(7, 3, &mut rng);
    let mut qr = factor(&b, true);
    qr.delete_cols(0, 3).unwrap();
    assert_eq!((qr.q_shape(), qr.r_shape()), ((7, 0), (0, 0)));
}

/// Refusals change nothing: a column in the span of an economic Q, non-finite data, bad
/// positions and shapes.
#[test]
fn refusals_leave_the_factors_unchanged() {
    let mut rng = StdRng::seed_from_u64(7);
    let a = A::<c64>::random(9, 4, &mut rng);
    let mut qr = factor(&a, true);
    let before = qr.clone();
    // a column in the span: a combination of A's columns (two inserted, the second bad)
    let mut u = A::<c64>::random(9, 2, &mut rng);
    for i in 0..9 {
        u.x[9 + i] = a.at(i, 0) * c64::new(0.5, 2.0) - a.at(i, 3);
    }
    let err = qr.insert_cols(2, &u.x, 2, None).unwrap_err();
    assert!(
        matches!(err, Error::RankDeficient { column: 3, .. }),
        "{err}"
    );
    assert_eq!(qr, before);
    let mut bad = A::<c64>::random(1, 4, &mut rng);
    bad.x[2] = c64::new(f64::NAN, 0.0);
    assert!(matches!(
        qr.insert_rows(0, &bad.x, 1),
        Err(Error::NonFinite { col: 2, .. })
    ));
    assert!(matches!(
        qr.delete_rows(8, 2),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        qr.delete_cols(0, 0),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        qr.insert_cols(5, &u.x[..9], 1, None),
        Err(Error::OutOfRange { .. })
    ));
    assert!(matches!(
        qr.rank_k(&u.x, &u.x[..7], 2),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        qr.insert_cols(0, &u.x[..9], 1, Some(f64::NAN)),
        Err(Error::InvalidParam { .. })
    ));
    assert_eq!(qr, before);
    // shapes that are neither full nor economic
    assert!(ExplicitQr::<f64>::new(&[1.0; 6], (3, 2), &[1.0; 6], (2, 3)).is_err());
    assert!(ExplicitQr::<f64>::new(&[1.0; 4], (2, 2), &[1.0; 5], (2, 3)).is_err());
}

/// A row whose basis vector lies in range(Q) (Q's row of norm one) is still deleted from
/// an economic factorisation, through the completion by the row of least norm.
#[test]
fn economic_row_in_the_span_is_deleted() {
    let mut rng = StdRng::seed_from_u64(8);
    // row 0 of A is the only one with a nonzero first entry, so e_0 lies in range(Q)
    let mut a = A::<c64>::random(7, 3, &mut rng);
    for i in 1..7 {
        a.x[i] = c64::new(0.0, 0.0);
    }
    let mut qr = factor(&a, true);
    qr.delete_rows(0, 1).unwrap();
    check(
        &qr,
        &a.rows_deleted(0, 1),
        1e-13,
        "row with e_k in range(Q)",
    );
}

/// Ill-conditioned data (κ = 1e10): the rotations are backward stable whatever κ, and the
/// economic completions (Gram–Schmidt twice) keep Q orthonormal; every update is checked
/// against ‖A′‖ as above.
#[test]
fn ill_conditioned_factors_stay_accurate() {
    let mut rng = StdRng::seed_from_u64(10);
    let (m, n) = (23, 7);
    // A = U·diag(σ)·V with σ from 1 to 1e-10 and U, V from QRs of random matrices
    let u = factor(&A::<c64>::random(m, m, &mut rng), false);
    let v = factor(&A::<c64>::random(n, n, &mut rng), false);
    let mut a = A::<c64> {
        m,
        n,
        x: vec![c64::new(0.0, 0.0); m * n],
    };
    for k in 0..n {
        let s = 10f64.powf(-10.0 * k as f64 / (n - 1) as f64);
        for j in 0..n {
            for i in 0..m {
                a.x[i + j * m] += u.q()[i + k * m] * v.q()[k + j * n].scale(s);
            }
        }
    }
    for economic in [false, true] {
        let mut a = a.clone();
        let mut qr = factor(&a, economic);
        let tol = 30.0 * (m + n) as f64 * <c64 as TestField>::U;
        qr.delete_rows(4, 3).unwrap();
        a = a.rows_deleted(4, 3);
        check(&qr, &a, tol, "κ 1e10: delete_rows");
        let w = A::<c64>::random(2, n, &mut rng);
        qr.insert_rows(0, &w.x, 2).unwrap();
        a = a.rows_inserted(0, &w);
        check(&qr, &a, tol, "κ 1e10: insert_rows");
        let (x, y) = (
            A::<c64>::random(a.m, 1, &mut rng),
            A::<c64>::random(n, 1, &mut rng),
        );
        qr.rank_k(&x.x, &y.x, 1).unwrap();
        a = a.plus_outer(&x, &y);
        check(&qr, &a, tol, "κ 1e10: rank_k");
    }
}

/// `ExplicitQr::factorize` on every shape (and empty ones), full and economic: unitary
/// Q, upper trapezoidal R, QR = A; a length that does not fit and a NaN are refused.
fn factorize_shapes<T: TestField + cuqr::explicit::QrField>(seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    for &(m, n) in SHAPES.iter().chain(&[(0, 3), (4, 0), (0, 0)]) {
        let a = A::<T>::random(m, n, &mut rng);
        for economic in [false, true] {
            let qr = ExplicitQr::factorize(&a.x, (m, n), economic).unwrap();
            let t = if economic && m > n { n } else { m };
            assert_eq!(qr.q_shape(), (m, t));
            check(&qr, &a, 20.0 * (m.max(n) + 1) as f64 * T::U, "factorize");
        }
    }
    let a = A::<T>::random(6, 4, &mut rng);
    assert!(matches!(
        ExplicitQr::factorize(&a.x[1..], (6, 4), true).unwrap_err(),
        cuqr::Error::Shape { .. }
    ));
    let mut bad = a.x.clone();
    bad[9] = T::from_real(<<T as Field>::Real as cuqr::Scalar>::from_f64(f64::NAN));
    assert!(matches!(
        ExplicitQr::factorize(&bad, (6, 4), false).unwrap_err(),
        cuqr::Error::NonFinite { row: 3, col: 1, .. }
    ));
}

#[test]
fn factorize_every_shape() {
    factorize_shapes::<f64>(31);
    factorize_shapes::<f32>(32);
    factorize_shapes::<c64>(33);
    factorize_shapes::<c32>(34);
}

/// Complex factors large enough that R's sweeps of row deletion and rank-one run over the
/// CPU backend's threads: the same arithmetic as on one thread (equal bit for bit), and
/// the factors of the updated matrix.
#[test]
fn parallel_sweeps_match_one_thread() {
    let mut rng = StdRng::seed_from_u64(61);
    let (m, n) = (803, 601);
    let a = A::<c64>::random(m, n, &mut rng);
    let (u, v) = (
        A::<c64>::random(m, 1, &mut rng),
        A::<c64>::random(n, 1, &mut rng),
    );
    let run = |threads: usize| {
        cuqr::cpu::set_threads(threads);
        let mut qr = factor(&a, true);
        qr.rank_k(&u.x, &v.x, 1).unwrap();
        qr.delete_rows(17, 2).unwrap();
        cuqr::cpu::set_threads(0);
        qr
    };
    let (one, all) = (run(1), run(2));
    assert_eq!(one, all, "the threads change the arithmetic");
    let dense = a.plus_outer(&u, &v).rows_deleted(17, 2);
    check(
        &all,
        &dense,
        20.0 * m as f64 * c64::U,
        "rank-one and row deletion",
    );
}
