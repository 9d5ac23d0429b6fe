//! The CPU backend against faer (docs/algorithms.md#accuracy-measures): for
//! `factorize` and each update kind, the updated state is compared with faer's
//! QR and least-squares solution of the updated matrix built from scratch in
//! f64, and the properties QR = Ã, QᵀQ = I and ‖L‖ = 0 are checked. Tolerances
//! are derived in `host/tests/common/model.rs` (module doc) from ε = 10·m·u.
//!
//! Sizes 1, 31, 33, 127, 257 (where they fit m ≥ n), k0 at the start, the middle
//! and the end, p = 1 and p > 1, one and two right-hand sides, f64 and f32 (f32
//! inputs are widened exactly, so faer in f64 solves the same problem).

mod common;

use common::{check_state, random_mat, random_vec, rng, Model};
use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate, Scalar};
use rand::rngs::StdRng;

/// The operation a case exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Factorize,
    InsertCols,
    DeleteCols,
    InsertRows,
    DeleteRows,
    RankOne,
}

/// Starting shapes (m, n) built from the sizes 1, 31, 33, 127, 257.
const SHAPES: [(usize, usize); 9] = [
    (1, 1),
    (31, 1),
    (31, 31),
    (33, 1),
    (33, 31),
    (127, 33),
    (257, 31),
    (257, 127),
    (257, 257),
];

/// Whether an m×n result is a fair test for `T`: m ≥ n, and for f32 either
/// 1×1 or m ≥ n + 2. A square uniform(−1, 1) matrix in f32 has |r_nn| below the
/// rank tolerance 10·max(m,n)·u·‖R‖_F with probability ~1e-3..1e-2 at these
/// sizes (a legitimate RankDeficient), while two spare rows make that ~ε³.
fn fits<T: Scalar>(m: usize, n: usize) -> bool {
    let f64_like = T::UNIT_ROUNDOFF < 1e-10;
    m >= n && n >= 1 && (f64_like || m == 1 || m >= n + 2)
}

/// Block sizes p to try for a dimension `len`: 1 and one p > 1.
fn p_values(len: usize) -> Vec<usize> {
    let big = match len {
        0..=1 => 2,
        2..=40 => 3,
        41..=150 => 5,
        _ => 17,
    };
    vec![1, big]
}

/// k0 at the start, the middle and the end of `0..=max`, deduplicated.
fn k0_values(max: usize) -> Vec<usize> {
    let mut v = vec![0, max / 2, max];
    v.dedup();
    v
}

/// One oracle case: the starting shape, the update's k0 and p, q and the seed.
#[derive(Clone, Copy, Debug)]
struct Case {
    kind: Kind,
    policy: QPolicy,
    /// `FactorParams::keep_data` (the R-only kind's column insertion, row deletion and
    /// rank-one need it).
    keep_data: bool,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    q: usize,
    seed: u64,
}

/// Applies one update of `kind` at (k0, p) with fresh random data from `g` to
/// `st` (the data times `s`, a power of two: exact) and to `model` (unscaled).
fn apply_kind<T: Scalar>(
    st: &mut CpuQr<T>,
    model: &mut Model,
    kind: Kind,
    g: &mut StdRng,
    (m, n, q): (usize, usize, usize),
    (k0, p): (usize, usize),
    s: f64,
) -> Result<(), String> {
    match kind {
        Kind::Factorize => {}
        Kind::InsertCols => {
            let u = random_mat::<T>(g, m, p);
            st.insert_cols(k0, scaled(&u, s).as_ref())
                .map_err(|e| format!("insert_cols: {e}"))?;
            model.insert_cols(k0, &u);
        }
        Kind::DeleteCols => {
            st.delete_cols(k0, p)
                .map_err(|e| format!("delete_cols: {e}"))?;
            model.delete_cols(k0, p);
        }
        Kind::InsertRows => {
            let u = random_mat::<T>(g, p, n);
            let e = random_mat::<T>(g, p, q);
            st.insert_rows(k0, scaled(&u, s).as_ref(), scaled(&e, s).as_ref())
                .map_err(|e| format!("insert_rows: {e}"))?;
            model.insert_rows(k0, &u, &e);
        }
        Kind::DeleteRows => {
            st.delete_rows(k0, p)
                .map_err(|e| format!("delete_rows: {e}"))?;
            model.delete_rows(k0, p);
        }
        Kind::RankOne => {
            let u = random_vec::<T>(g, m);
            let v = random_vec::<T>(g, n);
            let us: Vec<T> = u.iter().map(|&x| T::from_f64(x.to_f64() * s)).collect();
            st.rank_one(&us, &v).map_err(|e| format!("rank_one: {e}"))?;
            model.rank_one(&u, &v);
        }
    }
    Ok(())
}

/// Runs one case; returns a description of the failure, if any.
fn run_case<T: Scalar>(c: Case) -> Result<(), String> {
    let Case {
        kind,
        policy,
        keep_data,
        m,
        n,
        k0,
        p,
        q,
        seed,
    } = c;
    let mut g = rng(seed);
    let a = random_mat::<T>(&mut g, m, n);
    let b = random_mat::<T>(&mut g, m, q);
    let mut model = Model::new(&a, &b);
    let params = FactorParams {
        keep_data,
        ..FactorParams::default()
    };
    let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params)
        .map_err(|e| format!("factorize: {e}"))?;
    apply_kind(&mut st, &mut model, kind, &mut g, (m, n, q), (k0, p), 1.0)?;
    check_state::<T>(&st, &model).map(|_| ())
}

/// All cases of `kind` for `T`; panics listing every failing case.
fn run_kind<T: Scalar>(kind: Kind) {
    let mut failures = Vec::new();
    let mut count = 0usize;
    for (si, &(m, n)) in SHAPES.iter().enumerate() {
        // (k0 range end, p, result dims) for each p.
        let mut cases: Vec<(usize, usize)> = Vec::new(); // (k0, p)
        match kind {
            Kind::Factorize | Kind::RankOne => {
                if fits::<T>(m, n) {
                    cases.push((0, 0));
                }
            }
            Kind::InsertCols => {
                for p in p_values(n) {
                    if fits::<T>(m, n + p) {
                        cases.extend(k0_values(n).into_iter().map(|k| (k, p)));
                    }
                }
            }
            Kind::DeleteCols => {
                for p in p_values(n) {
                    if p < n && fits::<T>(m, n) && fits::<T>(m, n - p) {
                        cases.extend(k0_values(n - p).into_iter().map(|k| (k, p)));
                    }
                }
            }
            Kind::InsertRows => {
                for p in p_values(m) {
                    if fits::<T>(m, n) {
                        cases.extend(k0_values(m).into_iter().map(|k| (k, p)));
                    }
                }
            }
            Kind::DeleteRows => {
                for p in p_values(m) {
                    if p < m && fits::<T>(m, n) && fits::<T>(m - p, n) {
                        cases.extend(k0_values(m - p).into_iter().map(|k| (k, p)));
                    }
                }
            }
        }
        // every state kind; the R-only kind without kept data where it needs none
        let policies: &[(QPolicy, bool)] = match kind {
            Kind::Factorize | Kind::DeleteCols | Kind::InsertRows => &[
                (QPolicy::Full, false),
                (QPolicy::Thin, false),
                (QPolicy::None, false),
                (QPolicy::None, true),
            ],
            _ => &[
                (QPolicy::Full, false),
                (QPolicy::Thin, false),
                (QPolicy::None, true),
            ],
        };
        for (ci, &(k0, p)) in cases.iter().enumerate() {
            for &(policy, keep_data) in policies {
                let q = 1 + (ci + si) % 2;
                let seed = 0x5eed_0000 + (si as u64) * 1000 + ci as u64;
                count += 1;
                let case = Case {
                    kind,
                    policy,
                    keep_data,
                    m,
                    n,
                    k0,
                    p,
                    q,
                    seed,
                };
                if let Err(msg) = run_case::<T>(case) {
                    failures.push(format!(
                        "{kind:?} {} {policy:?} keep_data={keep_data} m={m} n={n} k0={k0} p={p} q={q} seed={seed:#x}: {msg}",
                        T::NAME
                    ));
                }
            }
        }
    }
    assert!(count > 0);
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

common::typed_tests!(run_kind {
    factorize_f64: f64[Kind::Factorize],
    factorize_f32: f32[Kind::Factorize],
    insert_cols_f64: f64[Kind::InsertCols],
    insert_cols_f32: f32[Kind::InsertCols],
    delete_cols_f64: f64[Kind::DeleteCols],
    delete_cols_f32: f32[Kind::DeleteCols],
    insert_rows_f64: f64[Kind::InsertRows],
    insert_rows_f32: f32[Kind::InsertRows],
    delete_rows_f64: f64[Kind::DeleteRows],
    delete_rows_f32: f32[Kind::DeleteRows],
    rank_one_f64: f64[Kind::RankOne],
    rank_one_f32: f32[Kind::RankOne],
});

/// The single-row/column conveniences (p = 1) agree with the model.
fn conveniences<T: Scalar>() {
    let (m, n, q) = (45, 13, 2);
    let mut g = rng(0xc0417);
    let a = random_mat::<T>(&mut g, m, n);
    let b = random_mat::<T>(&mut g, m, q);
    let mut model = Model::new(&a, &b);
    let mut st = common::StateKind::Full.cpu(&a, &b);

    let col = random_vec::<T>(&mut g, m);
    st.insert_col(5, &col).unwrap();
    model.insert_cols(5, &Mat::from_col(&col));
    check_state::<T>(&st, &model).unwrap();

    st.delete_col(11).unwrap();
    model.delete_cols(11, 1);
    check_state::<T>(&st, &model).unwrap();

    let row = random_vec::<T>(&mut g, n);
    let e = random_vec::<T>(&mut g, q);
    st.insert_row(17, &row, &e).unwrap();
    model.insert_rows(
        17,
        &Mat::from_fn(1, n, |_, j| row[j]),
        &Mat::from_fn(1, q, |_, j| e[j]),
    );
    check_state::<T>(&st, &model).unwrap();

    st.delete_row(0).unwrap();
    model.delete_rows(0, 1);
    check_state::<T>(&st, &model).unwrap();
}

common::typed_tests!(conveniences {
    conveniences_f64: f64,
    conveniences_f32: f32
});

/// `cuqr::diagnostics` (docs/algorithms.md#accuracy-measures) on an updated state: ‖L‖ = 0, e_Q
/// and e_A reported under Full and absent under None, within the 2-norm target
/// carried to the Frobenius norm (‖X‖_F ≤ √m·‖X‖₂ for m×m X, and √n for the
/// m×n QR − A), and e_x within 2·ε·(2κ/cosθ + tanθ·κ²) computed by the shared test
/// module's reference.
fn diagnostics_agree<T: Scalar>() {
    let (m, n, q) = (70, 21, 1);
    for policy in [QPolicy::Full, QPolicy::None] {
        let mut g = rng(0xd1a9);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        let mut model = Model::new(&a, &b);
        let mut st =
            CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
        let u = random_mat::<T>(&mut g, 3, n);
        let e = random_mat::<T>(&mut g, 3, q);
        st.insert_rows(9, u.as_ref(), e.as_ref()).unwrap();
        model.insert_rows(9, &u, &e);
        st.delete_cols(4, 2).unwrap();
        model.delete_cols(4, 2);
        check_state::<T>(&st, &model).unwrap();

        let (mm, nn) = (model.m(), model.n());
        let at = Mat::<T>::from_fn(mm, nn, |i, j| T::from_f64(model.a[(i, j)]));
        let bt = Mat::<T>::from_fn(mm, q, |i, j| T::from_f64(model.b[(i, j)]));
        let dg = cuqr::diagnostics(&st, at.as_ref(), bt.as_ref()).unwrap();
        let eps = common::eps::<T>(mm);
        assert_eq!(dg.l_norm, 0.0, "{policy:?}");
        match policy {
            QPolicy::None => assert!(dg.e_q.is_none() && dg.e_a.is_none(), "{dg:?}"),
            _ => {
                let e_q = dg.e_q.unwrap();
                let e_a = dg.e_a.unwrap();
                assert!(e_q <= (mm as f64).sqrt() * eps, "e_Q = {e_q:e} {dg:?}");
                assert!(e_a <= (nn as f64).sqrt() * eps, "e_A = {e_a:e} {dg:?}");
            }
        }
        let refc = common::Reference::of(&model);
        let sin_t = refc.res[0] / refc.b_norm[0];
        let cos_t = (1.0 - sin_t * sin_t).sqrt();
        let k = refc.kappa;
        let x_tol = 2.0 * eps * (2.0 * k / cos_t + sin_t / cos_t * k * k);
        assert!(dg.e_x <= x_tol, "{policy:?} e_x = {:e} > {x_tol:e}", dg.e_x);
        assert_eq!(dg.residual.len(), q);
    }
}

common::typed_tests!(diagnostics_agree {
    diagnostics_agree_f64: f64,
    diagnostics_agree_f32: f32
});

/// `s·M` for a power of two `s` (exact: no rounding as long as no entry leaves
/// the normal range).
fn scaled<T: Scalar>(a: &Mat<T>, s: f64) -> Mat<T> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| {
        T::from_f64(a[(i, j)].to_f64() * s)
    })
}

/// Badly scaled data (docs/algorithms.md#householder-vectors with a scaled norm,
/// docs/algorithms.md#givens-rotations Givens
/// safe against overflow): the whole problem times a power of two s whose
/// square overflows or underflows the type (f64: 2^540, 2^-560; f32: 2^66,
/// 2^-80). Scaling by s is exact, so the state must be s times the state of the
/// unscaled problem up to the usual tolerances: checked with
/// `check_state_scaled` against faer on the unscaled model.
fn extreme_scaling<T: Scalar>() {
    let f64_like = T::UNIT_ROUNDOFF < 1e-10;
    let scales: [f64; 2] = if f64_like {
        [2f64.powi(540), 2f64.powi(-560)]
    } else {
        [2f64.powi(66), 2f64.powi(-80)]
    };
    let (m, n, q, p, k0) = (67, 23, 2, 3, 9);
    let kinds = [
        Kind::Factorize,
        Kind::InsertCols,
        Kind::DeleteCols,
        Kind::InsertRows,
        Kind::DeleteRows,
        Kind::RankOne,
    ];
    let mut failures = Vec::new();
    for (ki, &kind) in kinds.iter().enumerate() {
        for &s in &scales {
            let mut g = rng(0x5ca1e + ki as u64);
            let a = random_mat::<T>(&mut g, m, n);
            let b = random_mat::<T>(&mut g, m, q);
            let mut model = Model::new(&a, &b);
            let mut run = || -> Result<(), String> {
                let mut st = CpuQr::factorize(
                    scaled(&a, s).as_ref(),
                    scaled(&b, s).as_ref(),
                    QPolicy::Full,
                    FactorParams::default(),
                )
                .map_err(|e| format!("factorize: {e}"))?;
                apply_kind(&mut st, &mut model, kind, &mut g, (m, n, q), (k0, p), s)?;
                common::check_state_scaled::<T>(&st, &model, s).map(|_| ())
            };
            if let Err(msg) = run() {
                failures.push(format!("{kind:?} {} scale=2^{}: {msg}", T::NAME, s.log2()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

common::typed_tests!(extreme_scaling {
    extreme_scaling_f64: f64,
    extreme_scaling_f32: f32
});

/// Structured inputs that hit the special cases of the primitives
/// (docs/algorithms.md#householder-vectors
/// τ = 0 when the tail is already zero; docs/algorithms.md#givens-rotations Givens at (0, 0)):
/// inserting columns of Q itself (Qᵀu is a unit vector e_j with j ≥ n), a rank-one change
/// with u = 0 (nothing to rotate) and with u = a column of Q (Qᵀu = e_j).
fn structured<T: Scalar>() {
    let (m, n, q) = (41, 13, 1);
    let mut g = rng(0x57c);
    let a = random_mat::<T>(&mut g, m, n);
    let b = random_mat::<T>(&mut g, m, q);
    let base = common::StateKind::Full.cpu(&a, &b);
    let qm = base.q().unwrap().unwrap();
    let mut failures = Vec::new();
    // Insert Q(:, n) at the end (its Qᵀu = e_n: no reflection needed), then
    // Q(:, m−1) in the middle (Qᵀu = e_{m−1}).
    for (k0, col) in [(n, n), (4, m - 1), (0, n + 5)] {
        let mut st = base.clone();
        let mut model = Model::new(&a, &b);
        let u = Mat::from_col(qm.col(col));
        let r = st
            .insert_cols(k0, u.as_ref())
            .map_err(|e| e.to_string())
            .and_then(|_| {
                model.insert_cols(k0, &u);
                check_state::<T>(&st, &model).map(|_| ())
            });
        if let Err(e) = r {
            failures.push(format!("insert Q(:, {col}) at {k0}: {e}"));
        }
    }
    // rank_one with u = 0 and with u = Q(:, 2), Q(:, m−1).
    let v = random_vec::<T>(&mut g, n);
    let zeros = vec![T::ZERO; m];
    for (name, u) in [
        ("u = 0", zeros),
        ("u = Q(:,2)", qm.col(2).to_vec()),
        ("u = Q(:,m-1)", qm.col(m - 1).to_vec()),
    ] {
        let mut st = base.clone();
        let mut model = Model::new(&a, &b);
        let r = st
            .rank_one(&u, &v)
            .map_err(|e| e.to_string())
            .and_then(|_| {
                model.rank_one(&u, &v);
                check_state::<T>(&st, &model).map(|_| ())
            });
        if let Err(e) = r {
            failures.push(format!("rank_one {name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{} {}", T::NAME, failures.join("\n"));
}

common::typed_tests!(structured {
    structured_f64: f64,
    structured_f32: f32
});

/// Block-size boundaries (docs/algorithms.md#blocked-householder-qr,
/// docs/algorithms.md#block-size): factorisation and the
/// block updates with n_b = 1, a size that does not divide n, n itself and
/// one larger than n must all give the same factorisation within tolerance.
fn block_sizes<T: Scalar>() {
    let (m, n, q, p) = (83, 45, 2, 7);
    let mut failures = Vec::new();
    for nb in [1, 2, 7, 45, 64, 200] {
        let mut g = rng(0xb10c + nb as u64);
        let a = random_mat::<T>(&mut g, m, n);
        let b = random_mat::<T>(&mut g, m, q);
        let mut model = Model::new(&a, &b);
        let fp = FactorParams {
            block_size: Some(nb),
            rank_tol: None,
            keep_data: false,
        };
        let mut run = || -> Result<(), String> {
            let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, fp)
                .map_err(|e| format!("factorize: {e}"))?;
            check_state::<T>(&st, &model).map_err(|e| format!("factorize: {e}"))?;
            st.set_params(cuqr::UpdateParams {
                block_size: Some(nb),
                ..cuqr::UpdateParams::default()
            });
            let u = random_mat::<T>(&mut g, m, p);
            st.insert_cols(11, u.as_ref())
                .map_err(|e| format!("insert_cols: {e}"))?;
            model.insert_cols(11, &u);
            check_state::<T>(&st, &model).map_err(|e| format!("insert_cols: {e}"))?;
            let ur = random_mat::<T>(&mut g, p, n + p);
            let e = random_mat::<T>(&mut g, p, q);
            st.insert_rows(40, ur.as_ref(), e.as_ref())
                .map_err(|e| format!("insert_rows: {e}"))?;
            model.insert_rows(40, &ur, &e);
            check_state::<T>(&st, &model).map_err(|e| format!("insert_rows: {e}"))?;
            st.delete_cols(3, p + 2)
                .map_err(|e| format!("delete_cols: {e}"))?;
            model.delete_cols(3, p + 2);
            check_state::<T>(&st, &model).map_err(|e| format!("delete_cols: {e}"))?;
            st.delete_rows(20, p)
                .map_err(|e| format!("delete_rows: {e}"))?;
            model.delete_rows(20, p);
            check_state::<T>(&st, &model).map_err(|e| format!("delete_rows: {e}"))?;
            Ok(())
        };
        if let Err(msg) = run() {
            failures.push(format!("{} n_b={nb}: {msg}", T::NAME));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

common::typed_tests!(block_sizes {
    block_sizes_f64: f64,
    block_sizes_f32: f32
});
