//! Every error path of the CPU backend (docs/algorithms.md#conventions:
//! validate everything before touching state). Each call that must fail is
//! made on a valid state; the test matches the `cuqr::Error` variant and then
//! checks that R, d, Q and the dimensions are bit-for-bit what they were.

mod common;

use common::{check_state, random_mat, random_vec, rng, snapshot, Model};
use cuqr::{CpuQr, Error, FactorParams, Mat, MatRef, QPolicy, QrUpdate, Scalar, UpdateParams};

const M: usize = 37;
const N: usize = 11;
const Q: usize = 2;

/// A valid M×N state with Q right-hand sides, and its A and b.
fn state<T: Scalar>(policy: QPolicy, seed: u64) -> (CpuQr<T>, Mat<T>, Mat<T>) {
    let mut g = rng(seed);
    let a = random_mat::<T>(&mut g, M, N);
    let b = random_mat::<T>(&mut g, M, Q);
    let st = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
    (st, a, b)
}

/// Makes the failing call `f` on `st`, checks the error with `check`, and
/// asserts the state is bit-for-bit unchanged.
fn expect_err<T: Scalar>(
    st: &mut CpuQr<T>,
    what: &str,
    f: impl FnOnce(&mut CpuQr<T>) -> cuqr::Result<()>,
    check: impl FnOnce(&Error) -> bool,
) {
    let before = snapshot::<T>(st);
    let params = st.params();
    match f(st) {
        Ok(()) => panic!("{what}: succeeded, expected an error"),
        Err(e) => assert!(check(&e), "{what}: unexpected error {e:?}"),
    }
    assert_eq!(
        snapshot::<T>(st),
        before,
        "{what}: state changed by a failed call"
    );
    assert_eq!(st.params(), params, "{what}: params changed");
}

/// After the failed calls the state still works: a valid row insertion and
/// column deletion (allowed under every policy) give the factorisation of the
/// updated (a, b), checked by the shared test module against faer.
fn still_usable<T: Scalar>(st: &mut CpuQr<T>, a: &Mat<T>, b: &Mat<T>, seed: u64) {
    let mut g = rng(seed);
    let mut model = Model::new(a, b);
    let u = random_mat::<T>(&mut g, 2, a.ncols());
    let e = random_mat::<T>(&mut g, 2, b.ncols());
    st.insert_rows(3, u.as_ref(), e.as_ref()).unwrap();
    model.insert_rows(3, &u, &e);
    st.delete_cols(1, 1).unwrap();
    model.delete_cols(1, 1);
    check_state::<T>(st, &model).unwrap();
}

/// A failing call of a table of cases.
type Call<'a, T> = &'a dyn Fn(&mut CpuQr<T>) -> cuqr::Result<()>;

/// A case of `non_finite`: what, the failing call, and the (row, col) the
/// NonFinite error must name where it is checked.
type NonFiniteCase<'a, T> = (&'a str, Call<'a, T>, Option<(usize, usize)>);

/// A matrix with one entry replaced.
fn poke<T: Scalar>(a: &Mat<T>, i: usize, j: usize, x: T) -> Mat<T> {
    let mut a = a.clone();
    a[(i, j)] = x;
    a
}

fn shape_errors<T: Scalar>() {
    let (mut st, a0, b0) = state::<T>(QPolicy::Full, 1);
    let mut g = rng(2);
    // insert_cols: U with M+1 rows; insert_col with a short column.
    let u_tall = random_mat::<T>(&mut g, M + 1, 2);
    let u_short = random_mat::<T>(&mut g, M - 1, 1);
    // insert_rows: U with N+1 columns; e with the wrong row count; e with the wrong column count.
    let u_wide = random_mat::<T>(&mut g, 2, N + 1);
    let e2 = random_mat::<T>(&mut g, 2, Q);
    let ur = random_mat::<T>(&mut g, 2, N);
    let e3 = random_mat::<T>(&mut g, 3, Q);
    let e1 = random_mat::<T>(&mut g, 2, Q + 1);
    // insert_row convenience with a short row.
    let row = random_vec::<T>(&mut g, N - 1);
    let ee = random_vec::<T>(&mut g, Q);
    // rank_one: u of length M+1, v of length N-1.
    let u_long = random_vec::<T>(&mut g, M + 1);
    let v_ok = random_vec::<T>(&mut g, N);
    let u_ok = random_vec::<T>(&mut g, M);
    let v_short = random_vec::<T>(&mut g, N - 1);
    // (what, failing call, the Shape error's got and expected)
    let cases: [(&str, Call<T>, usize, usize); 8] = [
        (
            "insert_cols rows",
            &|s| s.insert_cols(3, u_tall.as_ref()),
            M + 1,
            M,
        ),
        (
            "insert_col short",
            &|s| s.insert_col(0, u_short.as_slice()),
            M - 1,
            M,
        ),
        (
            "insert_rows U cols",
            &|s| s.insert_rows(5, u_wide.as_ref(), e2.as_ref()),
            N + 1,
            N,
        ),
        (
            "insert_rows e rows",
            &|s| s.insert_rows(5, ur.as_ref(), e3.as_ref()),
            3,
            2,
        ),
        (
            "insert_rows e cols",
            &|s| s.insert_rows(5, ur.as_ref(), e1.as_ref()),
            Q + 1,
            Q,
        ),
        (
            "insert_row short",
            &|s| s.insert_row(0, &row, &ee),
            N - 1,
            N,
        ),
        ("rank_one u", &|s| s.rank_one(&u_long, &v_ok), M + 1, M),
        ("rank_one v", &|s| s.rank_one(&u_ok, &v_short), N - 1, N),
    ];
    for (what, f, want_got, want_expected) in cases {
        expect_err(
            &mut st,
            what,
            f,
            |e| matches!(e, Error::Shape { got, expected, .. } if *got == want_got && *expected == want_expected),
        );
    }
    // factorize: b with the wrong row count; m < n.
    let a = random_mat::<T>(&mut g, M, N);
    let b = random_mat::<T>(&mut g, M - 1, 1);
    let r = CpuQr::factorize(
        a.as_ref(),
        b.as_ref(),
        QPolicy::Full,
        FactorParams::default(),
    );
    assert!(
        matches!(r, Err(Error::Shape { got, expected, .. }) if got == M - 1 && expected == M),
        "factorize b rows: {r:?}"
    );
    let a = random_mat::<T>(&mut g, N - 1, N);
    let b = random_mat::<T>(&mut g, N - 1, 1);
    let r = CpuQr::factorize(
        a.as_ref(),
        b.as_ref(),
        QPolicy::Full,
        FactorParams::default(),
    );
    assert!(
        matches!(r, Err(Error::Underdetermined { m, n, .. }) if m == N - 1 && n == N),
        "factorize m < n: {r:?}"
    );
    still_usable(&mut st, &a0, &b0, 100);
}

common::typed_tests!(shape_errors {
    shape_errors_f64: f64,
    shape_errors_f32: f32
});

fn range_errors<T: Scalar>() {
    let (mut st, a0, b0) = state::<T>(QPolicy::Full, 3);
    let mut g = rng(4);
    let oor = |k: usize, pp: usize| move |e: &Error| matches!(e, Error::OutOfRange { k0, p, .. } if *k0 == k && *p == pp);
    let u = random_mat::<T>(&mut g, M, 2);
    let ur = random_mat::<T>(&mut g, 2, N);
    let e = random_mat::<T>(&mut g, 2, Q);
    // (what, failing call, the OutOfRange error's k0 and p)
    let out_of_range: [(&str, Call<T>, usize, usize); 7] = [
        (
            "insert_cols k0 > n",
            &|s| s.insert_cols(N + 1, u.as_ref()),
            N + 1,
            2,
        ),
        (
            "delete_cols k0+p > n",
            &|s| s.delete_cols(N - 2, 3),
            N - 2,
            3,
        ),
        ("delete_cols k0 = n", &|s| s.delete_cols(N, 1), N, 1),
        (
            "delete_col k0 huge",
            &|s| s.delete_col(usize::MAX),
            usize::MAX,
            1,
        ),
        (
            "insert_rows k0 > m",
            &|s| s.insert_rows(M + 1, ur.as_ref(), e.as_ref()),
            M + 1,
            2,
        ),
        (
            "delete_rows k0+p > m",
            &|s| s.delete_rows(M - 1, 2),
            M - 1,
            2,
        ),
        (
            "delete_rows overflow",
            &|s| s.delete_rows(usize::MAX, 2),
            usize::MAX,
            2,
        ),
    ];
    for (what, f, k, pp) in out_of_range {
        expect_err(&mut st, what, f, oor(k, pp));
    }

    // p = 0 for each op.
    let empty_cols: Vec<T> = Vec::new();
    let u0 = MatRef::new(&empty_cols, M, 0, M).unwrap();
    // 0×N and 0×Q views (ld = 1 needs N−1 and Q−1 backing elements).
    let backing = random_vec::<T>(&mut g, N.max(Q));
    let r0 = MatRef::new(&backing, 0, N, 1).unwrap();
    let e0 = MatRef::new(&backing, 0, Q, 1).unwrap();
    let empty: [(&str, Call<T>); 4] = [
        ("insert_cols p=0", &|s| s.insert_cols(2, u0)),
        ("delete_cols p=0", &|s| s.delete_cols(2, 0)),
        ("insert_rows p=0", &|s| s.insert_rows(2, r0, e0)),
        ("delete_rows p=0", &|s| s.delete_rows(2, 0)),
    ];
    for (what, f) in empty {
        expect_err(&mut st, what, f, |e| matches!(e, Error::EmptyBlock { .. }));
    }

    // Updates that would leave m < n.
    let u = random_mat::<T>(&mut g, M, M - N + 1);
    expect_err(
        &mut st,
        "insert_cols m < n",
        |s| s.insert_cols(N, u.as_ref()),
        |e| matches!(e, Error::Underdetermined { m, n, .. } if *m == M && *n == M + 1),
    );
    expect_err(
        &mut st,
        "delete_rows m < n",
        |s| s.delete_rows(0, M - N + 1),
        |e| matches!(e, Error::Underdetermined { m, n, .. } if *m == N - 1 && *n == N),
    );
    still_usable(&mut st, &a0, &b0, 101);
}

common::typed_tests!(range_errors {
    range_errors_f64: f64,
    range_errors_f32: f32
});

fn non_finite<T: Scalar>() {
    let bad = [
        T::from_f64(f64::NAN),
        T::from_f64(f64::INFINITY),
        T::from_f64(f64::NEG_INFINITY),
    ];
    let (mut st, a, b) = state::<T>(QPolicy::Full, 5);
    let mut g = rng(6);
    for (t, &x) in bad.iter().enumerate() {
        let nf = |r: usize, c: usize| move |e: &Error| matches!(e, Error::NonFinite { row, col, .. } if *row == r && *col == c);
        // factorize: A, then b.
        let a_bad = poke(&a, 4 + t, 7, x);
        let b_bad = poke(&b, 20, 1, x);
        for (what, aa, bb, policy, (row, col)) in [
            ("A", &a_bad, &b, QPolicy::Full, (4 + t, 7)),
            ("b", &a, &b_bad, QPolicy::None, (20, 1)),
        ] {
            let r = CpuQr::factorize(aa.as_ref(), bb.as_ref(), policy, FactorParams::default());
            assert!(
                matches!(&r, Err(e) if nf(row, col)(e)),
                "factorize {what} {x}: {r:?}"
            );
        }
        // insert_cols U.
        let u = poke(&random_mat::<T>(&mut g, M, 3), 30, 2, x);
        // insert_rows U, then e.
        let ur = random_mat::<T>(&mut g, 3, N);
        let e = random_mat::<T>(&mut g, 3, Q);
        let ur_bad = poke(&ur, 1, 9, x);
        let e_bad = poke(&e, 2, 0, x);
        // rank_one u, then v (u repaired to 1 at the bad entry).
        let mut u1 = random_vec::<T>(&mut g, M);
        let v1 = random_vec::<T>(&mut g, N);
        let mut u1_bad = u1.clone();
        u1_bad[12] = x;
        u1[12] = T::ONE;
        let mut v1_bad = v1.clone();
        v1_bad[N - 1] = x;
        // (what, failing call, the NonFinite error's (row, col) where it is checked)
        let cases: [NonFiniteCase<T>; 5] = [
            (
                "insert_cols U",
                &|s| s.insert_cols(1, u.as_ref()),
                Some((30, 2)),
            ),
            (
                "insert_rows U",
                &|s| s.insert_rows(0, ur_bad.as_ref(), e.as_ref()),
                Some((1, 9)),
            ),
            (
                "insert_rows e",
                &|s| s.insert_rows(M, ur.as_ref(), e_bad.as_ref()),
                Some((2, 0)),
            ),
            ("rank_one u", &|s| s.rank_one(&u1_bad, &v1), None),
            ("rank_one v", &|s| s.rank_one(&u1, &v1_bad), None),
        ];
        for (what, f, at) in cases {
            expect_err(&mut st, &format!("{what} {x}"), f, |e| match at {
                Some((row, col)) => nf(row, col)(e),
                None => matches!(e, Error::NonFinite { .. }),
            });
        }
    }
    still_usable(&mut st, &a, &b, 102);
}

common::typed_tests!(non_finite {
    non_finite_f64: f64,
    non_finite_f32: f32
});

/// Under QPolicy::None without kept data: NeedsData for the updates that need Q or the
/// data (docs/algorithms.md#q-policy), and ordinary validation for the two it allows.
fn needs_q<T: Scalar>() {
    let (mut st, a0, b0) = state::<T>(QPolicy::None, 7);
    assert!(st.q().unwrap().is_none());
    let mut g = rng(8);
    let nq = |e: &Error| matches!(e, Error::NeedsData { .. });
    let u = random_mat::<T>(&mut g, M, 2);
    let col = random_vec::<T>(&mut g, M);
    let v = random_vec::<T>(&mut g, N);
    let needs_data: [(&str, Call<T>); 5] = [
        ("insert_cols", &|s| s.insert_cols(1, u.as_ref())),
        ("insert_col", &|s| s.insert_col(N, &col)),
        ("delete_rows", &|s| s.delete_rows(3, 2)),
        ("delete_row", &|s| s.delete_row(0)),
        ("rank_one", &|s| s.rank_one(&col, &v)),
    ];
    for (what, f) in needs_data {
        expect_err(&mut st, what, f, nq);
    }
    // The operations QPolicy::None allows still validate their arguments.
    let ur = random_mat::<T>(&mut g, 2, N);
    let e_bad = random_mat::<T>(&mut g, 2, Q + 1);
    expect_err(
        &mut st,
        "None: insert_rows e cols",
        |s| s.insert_rows(1, ur.as_ref(), e_bad.as_ref()),
        |e| matches!(e, Error::Shape { got, expected, .. } if *got == Q + 1 && *expected == Q),
    );
    let ur_nan = poke(&ur, 1, 3, T::from_f64(f64::NAN));
    let e = random_mat::<T>(&mut g, 2, Q);
    expect_err(
        &mut st,
        "None: insert_rows NaN",
        |s| s.insert_rows(M, ur_nan.as_ref(), e.as_ref()),
        |e| matches!(e, Error::NonFinite { row: 1, col: 3, .. }),
    );
    expect_err(
        &mut st,
        "None: delete_cols k0+p > n",
        |s| s.delete_cols(N - 1, 2),
        |e| matches!(e, Error::OutOfRange { k0, p: 2, .. } if *k0 == N - 1),
    );
    expect_err(
        &mut st,
        "None: delete_cols p = 0",
        |s| s.delete_cols(0, 0),
        |e| matches!(e, Error::EmptyBlock { .. }),
    );
    still_usable(&mut st, &a0, &b0, 103);
}

common::typed_tests!(needs_q {
    needs_q_f64: f64,
    needs_q_f32: f32
});

fn rank_deficient<T: Scalar>() {
    let mut g = rng(9);
    // factorize with column 6 equal to column 2: column 6 is named.
    let a = random_mat::<T>(&mut g, M, N);
    let b = random_mat::<T>(&mut g, M, 1);
    let dup = Mat::from_fn(M, N, |i, j| if j == 6 { a[(i, 2)] } else { a[(i, j)] });
    // A zero column is rank deficient too (column 0 here).
    let z = Mat::from_fn(M, N, |i, j| if j == 0 { T::ZERO } else { a[(i, j)] });
    for (what, aa, policy, want) in [
        ("duplicated column", &dup, QPolicy::Full, 6),
        ("zero column", &z, QPolicy::None, 0),
    ] {
        let r = CpuQr::factorize(aa.as_ref(), b.as_ref(), policy, FactorParams::default());
        assert!(
            matches!(r, Err(Error::RankDeficient { column, .. }) if column == want),
            "factorize {what}: {r:?}"
        );
    }

    let (mut st, a, b10) = state::<T>(QPolicy::Full, 10);
    // Insert a copy of column 4 after it (at the end, then in the middle): the copy is named.
    let c4 = a.col(4).to_vec();
    // A block holding a copy in its second column.
    let mut blk = random_mat::<T>(&mut g, M, 3);
    blk.col_mut(1).copy_from_slice(a.col(9));
    // rank_one making column 3 zero: u = −A(:,3), v = e_3.
    let u3: Vec<T> = a.col(3).iter().map(|&x| -x).collect();
    let e_j = |k: usize| -> Vec<T> {
        (0..N)
            .map(|j| if j == k { T::ONE } else { T::ZERO })
            .collect()
    };
    let (v3, v8) = (e_j(3), e_j(8));
    // rank_one making column 8 equal to column 1: u = A(:,1) − A(:,8), v = e_8.
    let u8: Vec<T> = (0..M).map(|i| a[(i, 1)] - a[(i, 8)]).collect();
    // (what, failing call, the dependent column the RankDeficient error names)
    let cases: [(&str, Call<T>, usize); 6] = [
        ("insert_col copy at end", &|s| s.insert_col(N, &c4), N),
        ("insert_col copy in middle", &|s| s.insert_col(7, &c4), 7),
        // Before it, the shifted original becomes the dependent column.
        ("insert_col copy before", &|s| s.insert_col(1, &c4), 5),
        (
            "insert_cols block with a copy",
            &|s| s.insert_cols(N, blk.as_ref()),
            N + 1,
        ),
        ("rank_one zeroes column 3", &|s| s.rank_one(&u3, &v3), 3),
        (
            "rank_one copies column 1 into 8",
            &|s| s.rank_one(&u8, &v8),
            8,
        ),
    ];
    for (what, f, want) in cases {
        expect_err(
            &mut st,
            what,
            f,
            |e| matches!(e, Error::RankDeficient { column, .. } if *column == want),
        );
    }

    still_usable(&mut st, &a, &b10, 105);

    // delete_rows removing the only rows where column 5 is nonzero.
    let mut g = rng(11);
    let a = Mat::from_fn(M, N, |i, j| {
        if j == 5 {
            if (20..23).contains(&i) {
                T::from_f64(1.0 + i as f64 / 8.0)
            } else {
                T::ZERO
            }
        } else {
            common::rand_scalar::<T>(&mut g)
        }
    });
    let b = random_mat::<T>(&mut g, M, 1);
    let mut st = common::StateKind::Full.cpu(&a, &b);
    expect_err(
        &mut st,
        "delete_rows leaves column 5 zero",
        |s| s.delete_rows(20, 3),
        |e| matches!(e, Error::RankDeficient { column: 5, .. }),
    );
    still_usable(&mut st, &a, &b, 106);
}

common::typed_tests!(rank_deficient {
    rank_deficient_f64: f64,
    rank_deficient_f32: f32
});

fn invalid_params<T: Scalar>() {
    let mut g = rng(12);
    let a = random_mat::<T>(&mut g, M, N);
    let b = random_mat::<T>(&mut g, M, 1);
    let bad = [
        FactorParams {
            block_size: Some(0),
            rank_tol: None,
            keep_data: false,
        },
        FactorParams {
            block_size: None,
            rank_tol: Some(-1.0),
            keep_data: false,
        },
        FactorParams {
            block_size: None,
            rank_tol: Some(f64::NAN),
            keep_data: false,
        },
    ];
    for p in bad {
        let r = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, p);
        assert!(
            matches!(r, Err(Error::InvalidParam { .. })),
            "factorize {p:?}: {r:?}"
        );
    }
    // UpdateParams { block_size: Some(0) } is refused by the block updates.
    let (mut st, a0, b0) = state::<T>(QPolicy::Full, 13);
    st.set_params(UpdateParams {
        block_size: Some(0),
        ..UpdateParams::default()
    });
    let u = random_mat::<T>(&mut g, M, 3);
    expect_err(
        &mut st,
        "insert_cols with block_size 0",
        |s| s.insert_cols(2, u.as_ref()),
        |e| matches!(e, Error::InvalidParam { .. }),
    );
    let ur = random_mat::<T>(&mut g, 3, N);
    let e = random_mat::<T>(&mut g, 3, Q);
    expect_err(
        &mut st,
        "insert_rows with block_size 0",
        |s| s.insert_rows(2, ur.as_ref(), e.as_ref()),
        |e| matches!(e, Error::InvalidParam { .. }),
    );
    st.set_params(UpdateParams::default());
    still_usable(&mut st, &a0, &b0, 104);
}

common::typed_tests!(invalid_params {
    invalid_params_f64: f64,
    invalid_params_f32: f32
});
