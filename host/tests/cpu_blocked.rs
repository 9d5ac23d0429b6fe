//! The CPU backend's blocked updates (the default path) against its serial reference
//! algorithms (`cuqr::cpu::reference::run`), every state kind and update, f64 and f32,
//! one thread and all, on random inputs whose sizes are not multiples of 32.
//!
//! # Bound
//! Both paths are backward stable QR updates of the same matrix, so R agrees up to row
//! signs within Sun's first-order bound 2·√(2n)·κ·(10·m·u)·‖A‖₂ (Frobenius), with κ and
//! ‖A‖₂ from the reference R's singular values; d and Q's columns take R's row signs and
//! agree within the same relative bound (times ‖b‖ for d). Q's extra columns of the full
//! kind (n..m) are not unique and are compared through QQᵀ's first n columns only.

mod common;

use common::{eps, random_mat, random_vec, rng, singular_values, to_faer};
use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate, Scalar};

/// One update, applied to a clone of the state.
#[derive(Clone, Debug)]
enum Update {
    InsertRows(usize, Mat<f64>, Mat<f64>),
    DeleteRows(usize, usize),
    InsertCols(usize, Mat<f64>),
    DeleteCols(usize, usize),
    RankOne(Vec<f64>, Vec<f64>),
}

fn cast<T: Scalar>(a: &Mat<f64>) -> Mat<T> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| T::from_f64(a[(i, j)]))
}

fn apply<T: Scalar>(st: &mut CpuQr<T>, up: &Update) {
    let v = |x: &[f64]| x.iter().map(|&y| T::from_f64(y)).collect::<Vec<T>>();
    match up {
        Update::InsertRows(k0, u, e) => {
            st.insert_rows(*k0, cast::<T>(u).as_ref(), cast::<T>(e).as_ref())
        }
        Update::DeleteRows(k0, p) => st.delete_rows(*k0, *p),
        Update::InsertCols(k0, u) => st.insert_cols(*k0, cast::<T>(u).as_ref()),
        Update::DeleteCols(k0, p) => st.delete_cols(*k0, *p),
        Update::RankOne(u, w) => st.rank_one(&v(u), &v(w)),
    }
    .unwrap_or_else(|e| panic!("{up:?}: {e}"));
}

/// max over entries of |x − y| after R's row signs are taken out of both.
fn compare<T: Scalar>(fast: &CpuQr<T>, refr: &CpuQr<T>, what: &str) {
    let (n, m) = (refr.ncols(), refr.nrows());
    let rr = to_faer(&refr.r().unwrap());
    let rf = to_faer(&fast.r().unwrap());
    let sv = singular_values(&faer::Mat::from_fn(n, n, |i, j| rr[(i, j)]));
    let (smax, smin) = (sv[0], sv[n - 1]);
    let bound = 2.0 * (2.0 * n as f64).sqrt() * (smax / smin) * eps::<T>(m + n);
    let sign = |r: &faer::Mat<f64>, i: usize| if r[(i, i)] < 0.0 { -1.0 } else { 1.0 };
    let mut e_r: f64 = 0.0;
    for j in 0..n {
        for i in 0..=j {
            let dx = sign(&rf, i) * rf[(i, j)] - sign(&rr, i) * rr[(i, j)];
            e_r = e_r.max(dx.abs());
        }
        for i in j + 1..rf.nrows() {
            assert_eq!(rf[(i, j)], 0.0, "{what}: R({i},{j}) below the diagonal");
        }
    }
    assert!(
        e_r <= bound * smax,
        "{what}: R differs by {e_r:e} > {:e}",
        bound * smax
    );
    let (df, dr) = (to_faer(&fast.d().unwrap()), to_faer(&refr.d().unwrap()));
    let bnorm = dr.norm_l2().max(1.0);
    for k in 0..dr.ncols() {
        for i in 0..n {
            let dx = sign(&rf, i) * df[(i, k)] - sign(&rr, i) * dr[(i, k)];
            assert!(
                dx.abs() <= bound * bnorm,
                "{what}: d({i},{k}) differs by {dx:e}"
            );
        }
    }
    if let (Some(qf), Some(qr)) = (fast.q().unwrap(), refr.q().unwrap()) {
        let (qf, qr) = (to_faer(&qf), to_faer(&qr));
        assert_eq!(
            (qf.nrows(), qf.ncols()),
            (qr.nrows(), qr.ncols()),
            "{what}: Q's shape"
        );
        for j in 0..n {
            for i in 0..m {
                let dx = sign(&rf, j) * qf[(i, j)] - sign(&rr, j) * qr[(i, j)];
                assert!(dx.abs() <= bound, "{what}: Q({i},{j}) differs by {dx:e}");
            }
        }
        // The full Q's columns n..m span the same complement.
        if qf.ncols() > n {
            let pf = qf.get(.., n..) * qf.get(.., n..).transpose();
            let pr = qr.get(.., n..) * qr.get(.., n..).transpose();
            let e = (pf - pr).norm_max();
            assert!(
                e <= bound * m as f64,
                "{what}: Q's complement differs by {e:e}"
            );
        }
    }
}

fn updates(seed: u64, m: usize, n: usize, q: usize) -> Vec<Update> {
    let mut g = rng(seed);
    let p = (n / 10).max(2);
    vec![
        Update::InsertRows(0, random_mat(&mut g, 1, n), random_mat(&mut g, 1, q)),
        Update::InsertRows(m / 3, random_mat(&mut g, p, n), random_mat(&mut g, p, q)),
        Update::InsertRows(
            m,
            random_mat(&mut g, 3 * n / 2, n),
            random_mat(&mut g, 3 * n / 2, q),
        ),
        Update::DeleteRows(m - 1, 1),
        Update::DeleteRows(m / 2, p),
        // more rows than columns: Q₁′ is made of the completion's columns alone
        Update::DeleteRows(0, n + 3),
        Update::InsertCols(0, random_mat(&mut g, m, 1)),
        Update::InsertCols(n / 2, random_mat(&mut g, m, p)),
        Update::InsertCols(n, random_mat(&mut g, m, p)),
        // 19 columns: three Householder panels of the default block size (8), merged into
        // one block reflector for the full Q
        Update::InsertCols(n / 3, random_mat(&mut g, m, 19)),
        Update::DeleteCols(0, 1),
        Update::DeleteCols(n / 3, p),
        Update::DeleteCols(n - p, p),
        Update::RankOne(random_vec(&mut g, m), random_vec(&mut g, n)),
    ]
}

fn run_all<T: Scalar>(seed: u64, m: usize, n: usize, q: usize) {
    let mut g = rng(seed);
    let a: Mat<T> = random_mat(&mut g, m, n);
    let b: Mat<T> = random_mat(&mut g, m, q);
    for (policy, keep) in [
        (QPolicy::Full, false),
        (QPolicy::Thin, false),
        (QPolicy::None, true),
    ] {
        let params = FactorParams {
            keep_data: keep,
            ..FactorParams::default()
        };
        let st = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params).unwrap();
        // u in range(A) (the thin kind's two-pass projection; a random u takes the one-pass
        // direction) and u with a fifth of its norm outside it
        let ax: Vec<f64> = (0..m)
            .map(|i| {
                (0..n)
                    .map(|j| a[(i, j)].to_f64() * (1.0 + j as f64 / n as f64))
                    .sum()
            })
            .collect();
        let mut g2 = rng(seed + 2);
        let noise: Vec<f64> = random_vec(&mut g2, m);
        let scale = (ax.iter().map(|x| x * x).sum::<f64>()
            / noise.iter().map(|x| x * x).sum::<f64>())
        .sqrt();
        let mixed: Vec<f64> = ax
            .iter()
            .zip(&noise)
            .map(|(x, e)| x + 0.2 * scale * e)
            .collect();
        let more = [
            Update::RankOne(ax, random_vec(&mut g2, n)),
            Update::RankOne(mixed, random_vec(&mut g2, n)),
        ];
        for up in updates(seed + 1, m, n, q).into_iter().chain(more) {
            let what = format!("{} {policy:?} {up:?}", T::NAME);
            matches_reference(&st, &up, &what[..what.len().min(110)]);
        }
    }
}

/// `up` on clones of `st` by the blocked path, with one thread and all, against the serial
/// reference (the thread count restored to all afterwards).
fn matches_reference<T: Scalar>(st: &CpuQr<T>, up: &Update, what: &str) {
    let refr = cuqr::cpu::reference::run(|| {
        let mut s = st.clone();
        apply(&mut s, up);
        s
    });
    for threads in [1, 0] {
        cuqr::cpu::set_threads(threads);
        let mut fast = st.clone();
        apply(&mut fast, up);
        compare(&fast, &refr, &format!("{what} threads {threads}"));
    }
    cuqr::cpu::set_threads(0);
}

#[test]
fn blocked_updates_match_the_reference_f64() {
    run_all::<f64>(11, 157, 23, 2);
    run_all::<f64>(12, 301, 67, 1);
}

#[test]
fn blocked_updates_match_the_reference_f32() {
    run_all::<f32>(13, 131, 19, 2);
}

/// Q grows and shrinks in its own buffer: with room reserved (`CpuQr::reserve`) a chain
/// of row and column insertions and row deletions moves no buffer, and every factor
/// equals, bit for bit, that of a state that had to reallocate.
#[test]
fn q_updates_in_its_own_buffer() {
    let (m, n, p) = (67, 13, 3);
    let mut g = rng(41);
    let a = random_mat::<f64>(&mut g, m, n);
    let b = random_mat::<f64>(&mut g, m, 2);
    let rows = |g: &mut _, k: usize, cols: usize| (random_mat(g, k, cols), random_mat(g, k, 2));
    let (u1, e1) = rows(&mut g, p, n);
    let (u6, e6) = rows(&mut g, 6, n + 2);
    let (u4, e4) = rows(&mut g, p + 1, n + 2);
    let full = [
        Update::InsertRows(5, u1.clone(), e1.clone()),
        Update::InsertCols(4, random_mat(&mut g, m + p, 2)),
        Update::DeleteRows(m / 3, p + 1),
        Update::InsertRows(m - 2, u4, e4),
    ];
    // A block of 6 rows takes the three-product path of the row fold; the row deletions
    // shrink Q₁ in its buffer.
    let thin = [
        Update::InsertRows(5, u1, e1),
        Update::InsertCols(4, random_mat(&mut g, m + p, 2)),
        Update::DeleteRows(m / 3, p + 1),
        Update::InsertRows(0, u6, e6),
        Update::DeleteRows(0, 1),
    ];
    for (policy, steps, reserve) in [
        (QPolicy::Full, &full[..], (2 * p, 0)),
        (QPolicy::Thin, &thin[..], (p + 6, 2)),
    ] {
        let mut plain =
            CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
        let mut held = plain.clone();
        held.reserve(reserve.0, reserve.1);
        let at = |st: &CpuQr<f64>| st.q_ref().unwrap().as_slice().as_ptr();
        let buffer = at(&held);
        for (k, up) in steps.iter().enumerate() {
            apply(&mut plain, up);
            apply(&mut held, up);
            assert_eq!(at(&held), buffer, "{policy:?} step {k}: Q left its buffer");
            assert!(
                held.q_ref() == plain.q_ref(),
                "{policy:?} step {k}: Q differs"
            );
            assert!(
                held.r_ref() == plain.r_ref(),
                "{policy:?} step {k}: R differs"
            );
            assert!(
                held.d_ref() == plain.d_ref(),
                "{policy:?} step {k}: d differs"
            );
        }
    }
}

/// A thin deletion of one row makes its completion in the rotation pass where the row
/// holds at most half of Q₁'s norm (‖Q₁(k, :)‖² ≤ 1/2) and forms and reorthogonalises it
/// otherwise (a row 300 times the others holds most of a direction); both agree with the
/// reference, f64 and f32, one thread and all.
fn thin_single_row_deletion_case<T: Scalar>() {
    let (m, n) = (97, 11);
    let mut g = rng(77);
    let mut a = random_mat::<f64>(&mut g, m, n);
    for j in 0..n {
        a[(5, j)] *= 300.0;
    }
    let b = random_mat::<f64>(&mut g, m, 2);
    let st = CpuQr::factorize(
        cast::<T>(&a).as_ref(),
        cast::<T>(&b).as_ref(),
        QPolicy::Thin,
        FactorParams::default(),
    )
    .unwrap();
    let q1 = st.q_ref().unwrap();
    let weight = |k: usize| (0..n).map(|j| q1[(k, j)].to_f64().powi(2)).sum::<f64>();
    assert!(weight(5) > 0.5 && weight(40) < 0.5 && weight(m - 1) < 0.5);
    for k in [5, 40, m - 1] {
        matches_reference(
            &st,
            &Update::DeleteRows(k, 1),
            &format!("{} row {k}", T::NAME),
        );
    }
}

#[test]
fn thin_single_row_deletion_takes_either_completion() {
    thin_single_row_deletion_case::<f64>();
    thin_single_row_deletion_case::<f32>();
}
