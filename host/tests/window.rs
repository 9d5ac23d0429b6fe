//! The composed updates of the CPU backend, every state kind, f32 and f64: the sliding window
//! (with and without forgetting), rank-k, column replacement and shift, and drift control,
//! against faer's refactorisation of the same data (the dense model in f64, `common`), with
//! the bounds of `common::model`'s module doc. Error paths leave the state bit for bit unchanged.

mod common;

use common::{
    assert_long_window_accuracy, assert_slide_refuses_drops, check_state, drift_refreshes_run,
    random_mat, rank_k_step, replace_cols_step, rng, shift_col_step, slide_sweep, snapshot,
    typed_tests, DriftCase, Model, SlideSweep, StateKind, ALL_KINDS,
};
use cuqr::{diagnostics, Error, Mat, QrUpdate, Scalar, UpdateParams};

fn slide_sequences<T: Scalar>() {
    slide_sweep::<T, _>(
        &SlideSweep {
            dims: (57, 13, 2),
            blocks: &[(1, 1), (5, 5), (3, 0), (0, 2), (4, 7)],
            steps: 12,
            min_rows: 13 + 20,
            seed: |p, drop| 11 + p as u64 * 7 + drop as u64,
        },
        |kind, a, b| kind.cpu(a, b),
    );
}
typed_tests!(slide_sequences {
    slide_sequences_f64: f64,
    slide_sequences_f32: f32
});

/// A window step whose oldest rows cannot leave before the new ones enter (fewer than n rows
/// in between) takes the insert-first path.
fn slide_through_a_short_middle<T: Scalar>() {
    for kind in [StateKind::Full, StateKind::Thin, StateKind::NoneKeep] {
        let mut g = rng(5);
        let (m, n, q) = (15, 12, 1);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        let mut st = kind.cpu(&a, &b);
        let mut model = Model::new(&a, &b);
        let rows = random_mat::<T>(&mut g, 6, n);
        let rhs = random_mat::<T>(&mut g, 6, q);
        st.slide(rows.as_ref(), rhs.as_ref(), 5).unwrap();
        model.insert_rows(m, &rows, &rhs);
        model.delete_rows(0, 5);
        check_state(&st, &model).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
    }
}
typed_tests!(slide_through_a_short_middle {
    short_middle_f64: f64,
    short_middle_f32: f32
});

fn slide_errors_leave_the_state<T: Scalar>() {
    for kind in ALL_KINDS {
        let mut g = rng(3);
        let (m, n, q) = (30, 9, 2);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        let mut st = kind.cpu(&a, &b);
        let before = snapshot(&st);
        let rows = random_mat::<T>(&mut g, 2, n);
        let rhs = random_mat::<T>(&mut g, 2, q);
        let bad_rows = random_mat::<T>(&mut g, 2, n + 1);
        let mut nan = rows.clone();
        nan[(1, 3)] = T::from_f64(f64::NAN);
        let e = assert_slide_refuses_drops(&mut st, rows.as_ref(), rhs.as_ref());
        assert!(
            e.to_string()
                .contains("31 rows to drop, but the window holds 30"),
            "{e}"
        );
        let e = st.slide(bad_rows.as_ref(), rhs.as_ref(), 2).unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{e}");
        let e = st.slide(nan.as_ref(), rhs.as_ref(), 2).unwrap_err();
        assert!(
            matches!(
                e,
                Error::NonFinite {
                    what: "rows",
                    row: 1,
                    col: 3,
                    ..
                }
            ),
            "{e}"
        );
        let empty = Mat::<T>::zeros(0, n);
        let empty_rhs = Mat::<T>::zeros(0, q);
        let e = st.slide(empty.as_ref(), empty_rhs.as_ref(), 0).unwrap_err();
        assert!(matches!(e, Error::EmptyBlock { .. }), "{e}");
        for forget in [0.0, 1.5, f64::NAN, -0.5] {
            st.set_params(UpdateParams {
                forget,
                ..UpdateParams::default()
            });
            let e = st.slide(rows.as_ref(), rhs.as_ref(), 2).unwrap_err();
            assert!(
                matches!(e, Error::InvalidParam { what: "forget", .. }),
                "{e}"
            );
        }
        st.set_params(UpdateParams::default());
        if kind == StateKind::NoneBare {
            let e = st.slide(rows.as_ref(), rhs.as_ref(), 2).unwrap_err();
            assert!(matches!(e, Error::NeedsData { op: "slide", .. }), "{e}");
        }
        assert_eq!(snapshot(&st), before, "{kind:?}");
    }
}
typed_tests!(slide_errors_leave_the_state {
    slide_errors_f64: f64,
    slide_errors_f32: f32
});

/// Dropping the only rows that carry column 0 makes the window rank deficient: refused, and
/// the state is unchanged.
fn slide_refused_downdate<T: Scalar>() {
    for kind in [StateKind::Full, StateKind::Thin, StateKind::NoneKeep] {
        let mut g = rng(9);
        let (m, n, q) = (40, 6, 1);
        let mut a = random_mat::<T>(&mut g, m, n);
        for i in 2..m {
            a[(i, 0)] = T::ZERO;
        }
        let b = random_mat::<T>(&mut g, m, q);
        let mut st = kind.cpu(&a, &b);
        let before = snapshot(&st);
        let mut rows = random_mat::<T>(&mut g, 2, n);
        rows[(0, 0)] = T::ZERO;
        rows[(1, 0)] = T::ZERO;
        let rhs = random_mat::<T>(&mut g, 2, q);
        let e = st.slide(rows.as_ref(), rhs.as_ref(), 2).unwrap_err();
        assert!(
            matches!(
                e,
                Error::DowndateFailed { .. } | Error::RankDeficient { .. }
            ),
            "{kind:?}: {e}"
        );
        assert_eq!(snapshot(&st), before, "{kind:?}");
    }
}
typed_tests!(slide_refused_downdate {
    refused_downdate_f64: f64,
    refused_downdate_f32: f32
});

fn rank_k_against_faer<T: Scalar>() {
    for kind in ALL_KINDS {
        // k = 2 updates one at a time; k = n refactorises for every kind
        for k in [1usize, 2, 11] {
            let mut g = rng(21 + k as u64);
            let (m, n, q) = (37, 11, 2);
            let a = random_mat::<T>(&mut g, m, n);
            let b = random_mat::<T>(&mut g, m, q);
            let mut st = kind.cpu(&a, &b);
            let u = random_mat::<T>(&mut g, m, k);
            let v = random_mat::<T>(&mut g, n, k);
            let what = format!("{kind:?} k={k}");
            rank_k_step(&mut st, kind, (&a, &b), (&u, &v), Some("rank_k"), &what);
        }
        // A + UVᵀ with a zero column is refused, state unchanged
        let mut g = rng(2);
        let (m, n) = (25, 5);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, 1);
        let mut st = kind.cpu(&a, &b);
        let before = snapshot(&st);
        let u = Mat::<T>::from_fn(m, 1, |i, _| -a[(i, 2)]);
        let v = Mat::<T>::from_fn(n, 1, |j, _| T::from_f64(f64::from(u8::from(j == 2))));
        assert!(st.rank_k(u.as_ref(), v.as_ref()).is_err(), "{kind:?}");
        let e = st
            .rank_k(u.as_ref(), Mat::<T>::zeros(n + 1, 1).as_ref())
            .unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{e}");
        let e = st.rank_k(
            Mat::<T>::zeros(m, 0).as_ref(),
            Mat::<T>::zeros(n, 0).as_ref(),
        );
        assert!(matches!(e, Err(Error::EmptyBlock { .. })), "{e:?}");
        assert_eq!(snapshot(&st), before, "{kind:?}");
    }
}
typed_tests!(rank_k_against_faer {
    rank_k_f64: f64,
    rank_k_f32: f32
});

fn replace_and_shift_against_faer<T: Scalar>() {
    for kind in ALL_KINDS {
        let mut g = rng(31);
        let (m, n, q) = (41, 10, 2);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        for (k0, p) in [(0, 1), (4, 3), (7, 3), (9, 1)] {
            let mut st = kind.cpu(&a, &b);
            let u = random_mat::<T>(&mut g, m, p);
            let what = format!("{kind:?} k0={k0} p={p}");
            replace_cols_step(&mut st, kind, (&a, &b), k0, &u, &what);
        }
        for (from, to) in [(0, 9), (9, 0), (3, 6), (6, 3), (4, 4)] {
            let mut st = kind.cpu(&a, &b);
            let what = format!("{kind:?} {from}->{to}");
            shift_col_step(&mut st, kind, (&a, &b), (from, to), &what);
        }
        // errors: out of range, a dependent replacement; the state is unchanged
        let mut st = kind.cpu(&a, &b);
        let before = snapshot(&st);
        let e = st.shift_col(10, 0).unwrap_err();
        assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
        let e = st
            .replace_cols(9, random_mat::<T>(&mut g, m, 2).as_ref())
            .unwrap_err();
        assert!(matches!(e, Error::OutOfRange { .. }), "{e}");
        if kind.capable() {
            let dup = Mat::<T>::from_fn(m, 1, |i, _| a[(i, 1)]);
            let e = st.replace_cols(5, dup.as_ref()).unwrap_err();
            assert!(matches!(e, Error::RankDeficient { .. }), "{kind:?}: {e}");
        }
        assert_eq!(snapshot(&st), before, "{kind:?}");
    }
}
typed_tests!(replace_and_shift_against_faer {
    replace_shift_f64: f64,
    replace_shift_f32: f32
});

/// Drift control: with a threshold below any estimate every check refreshes, and the
/// refreshed state still represents the data; an R-only state without data reports nothing.
fn drift_refreshes<T: Scalar>() {
    for kind in ALL_KINDS {
        let mut g = rng(41);
        let (m, n, q) = (50, 8, 1);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        let mut st = kind.cpu(&a, &b);
        let mut model = Model::new(&a, &b);
        let case = DriftCase {
            check_every: 3,
            steps: 7,
            rows: 2,
        };
        let d = drift_refreshes_run(&mut st, kind, &mut model, &mut g, &case);
        let dg = diagnostics(
            &st,
            support_mat::<T>(&model.a).as_ref(),
            support_mat::<T>(&model.b).as_ref(),
        )
        .unwrap();
        assert_eq!(dg.drift, st.drift());
        // an explicit check with the default threshold reports without refreshing
        st.set_params(UpdateParams::default());
        let r = st.check_drift().unwrap();
        assert_eq!(r.checks, 3);
        assert_eq!(r.refreshes, d.refreshes, "{kind:?}");
    }
}
typed_tests!(drift_refreshes {
    drift_refreshes_f64: f64,
    drift_refreshes_f32: f32
});

/// The model's f64 data rounded to T (exact for data that came from T).
fn support_mat<T: Scalar>(a: &faer::Mat<f64>) -> Mat<T> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| T::from_f64(a[(i, j)]))
}

/// A long window: 600 steps of one row in and one out on 150×9 (f64), thin and R-only with
/// kept data, drift control on by default. Q₁ stays orthonormal and QR = A within 100·m·u, and
/// x agrees with a fresh factorisation of the final window within the least-squares bound.
#[test]
fn long_window_stays_accurate() {
    for kind in [StateKind::Thin, StateKind::NoneKeep, StateKind::Full] {
        let mut g = rng(77);
        let (m, n, q) = (150, 9, 1);
        let a = random_mat::<f64>(&mut g, m, n);
        let b = random_mat::<f64>(&mut g, m, q);
        let mut st = kind.cpu(&a, &b);
        let mut model = Model::new(&a, &b);
        for _ in 0..600 {
            let rows = random_mat::<f64>(&mut g, 1, n);
            let rhs = random_mat::<f64>(&mut g, 1, q);
            st.slide(rows.as_ref(), rhs.as_ref(), 1).unwrap();
            model.delete_rows(0, 1);
            model.insert_rows(m - 1, &rows, &rhs);
        }
        let (am, bm) = (support_mat::<f64>(&model.a), support_mat::<f64>(&model.b));
        let dg = diagnostics(&st, am.as_ref(), bm.as_ref()).unwrap();
        // random 150×9 windows are well conditioned (κ < 10): the bound 100·n·u·κ² is ample
        let e_x_bar = 100.0 * n as f64 * f64::UNIT_ROUNDOFF * 100.0;
        assert_long_window_accuracy(&dg, kind, m, e_x_bar);
        assert!(st.drift().checks >= 600 / 32, "{kind:?}");
    }
}
