//! The batched state (`cuqr::batch`) against B single-problem `CpuQr` states run one by one
//! on the same data (bit for bit) and against the f64 model of each problem (a fresh
//! factorisation by faer): every verb on every kind in f32 and f64, per-problem refusals
//! (left bit for bit unchanged), all-or-nothing shape changes and shared-argument errors.

mod common;

use common::{check_state, random_mat, rng, snapshot, typed_tests, Model, StateKind, ALL_KINDS};
use cuqr::batch::{BatchQr, BatchRef, BatchReport};
use cuqr::{CpuQr, Error, Mat, MatRef, QrUpdate, Result, Scalar, UpdateParams};
use rand::rngs::StdRng;
use rand::Rng;

/// Per-problem matrices packed into one buffer: C order (B, r, c) or B column-major blocks.
struct Packed<T> {
    mats: Vec<Mat<T>>,
    data: Vec<T>,
    row_major: bool,
}

impl<T: Scalar> Packed<T> {
    fn new(mats: Vec<Mat<T>>, row_major: bool) -> Self {
        let mut data = Vec::new();
        for a in &mats {
            if row_major {
                for i in 0..a.nrows() {
                    data.extend((0..a.ncols()).map(|j| a[(i, j)]));
                }
            } else {
                data.extend_from_slice(a.as_slice());
            }
        }
        Self {
            mats,
            data,
            row_major,
        }
    }
    fn random(g: &mut StdRng, b: usize, r: usize, c: usize) -> Self {
        let mats = (0..b).map(|_| random_mat(g, r, c)).collect();
        Self::new(mats, g.random_bool(0.5))
    }
    fn view(&self) -> BatchRef<'_, T> {
        let (r, c) = (self.mats[0].nrows(), self.mats[0].ncols());
        let b = self.mats.len();
        if self.row_major {
            BatchRef::row_major(&self.data, b, r, c).unwrap()
        } else {
            BatchRef::col_major(&self.data, b, r, c).unwrap()
        }
    }
    fn at(&self, i: usize) -> MatRef<'_, T> {
        self.mats[i].as_ref()
    }
    fn col(&self, i: usize) -> &[T] {
        self.mats[i].col(0)
    }
}

/// A batch, the same problems as single states, and their models.
struct Case<T: Scalar> {
    kind: StateKind,
    batch: BatchQr<T>,
    singles: Vec<CpuQr<T>>,
    models: Vec<Model>,
    g: StdRng,
}

impl<T: Scalar> Case<T> {
    fn new(kind: StateKind, seed: u64, b: usize, (m, n, q): (usize, usize, usize)) -> Self {
        let mut g = rng(seed);
        let a = Packed::<T>::random(&mut g, b, m, n);
        let rhs = Packed::<T>::random(&mut g, b, m, q);
        Self::from_packed(kind, g, &a, &rhs)
    }
    fn from_packed(kind: StateKind, g: StdRng, a: &Packed<T>, rhs: &Packed<T>) -> Self {
        let b = a.mats.len();
        let batch = BatchQr::factorize(a.view(), rhs.view(), kind.policy(), kind.params())
            .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        let singles = (0..b).map(|i| kind.cpu(&a.mats[i], &rhs.mats[i])).collect();
        let models = (0..b)
            .map(|i| Model::new(&a.mats[i], &rhs.mats[i]))
            .collect();
        let c = Self {
            kind,
            batch,
            singles,
            models,
            g,
        };
        c.check("factorize", true);
        c
    }
    fn dims(&self) -> (usize, usize, usize) {
        (self.batch.nrows(), self.batch.ncols(), self.batch.nrhs())
    }
    fn b(&self) -> usize {
        self.batch.batch()
    }

    /// Every problem equals its single state bit for bit (factors and solution), and,
    /// with `model`, its model to the tolerances of `check_state`.
    fn check(&self, what: &str, model: bool) {
        let sol = self.batch.solve().unwrap();
        for (i, s) in self.singles.iter().enumerate() {
            let p = self.batch.problem(i).unwrap();
            assert_eq!(
                snapshot(p),
                snapshot(s),
                "{what}, {:?}, problem {i}",
                self.kind
            );
            let one = s.solve().unwrap();
            assert_eq!(common::bits(&sol.x_of(i).unwrap()), common::bits(&one.x));
            let norms: Vec<u64> = one.residual_norms.iter().map(|x| x.to_bits()).collect();
            let got: Vec<u64> = sol
                .residual_norms_of(i)
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            assert_eq!(got, norms, "{what}: residual norms of problem {i}");
            if model {
                check_state(p, &self.models[i])
                    .unwrap_or_else(|e| panic!("{what}, {:?}, problem {i}: {e}", self.kind));
            }
        }
    }

    /// Runs one verb on the batch and on each single state. Where every single state takes
    /// it, the batch must too (and the models follow); where every one refuses alike, the
    /// batch must return that error and change nothing.
    fn step(
        &mut self,
        what: &str,
        on_batch: impl FnOnce(&mut BatchQr<T>) -> Result<BatchReport>,
        on_single: impl Fn(usize, &mut CpuQr<T>) -> Result<()>,
        on_model: impl Fn(usize, &mut Model),
    ) {
        let got = on_batch(&mut self.batch);
        let want: Vec<Result<()>> = self
            .singles
            .iter_mut()
            .enumerate()
            .map(|(i, s)| on_single(i, s))
            .collect();
        match &want[0] {
            Ok(()) => {
                assert!(
                    want.iter().all(Result::is_ok),
                    "{what}: a single state refused"
                );
                let report = got.unwrap_or_else(|e| panic!("{what}, {:?}: {e}", self.kind));
                assert!(report.all_ok() && report.outcomes.len() == self.b());
                for (i, m) in self.models.iter_mut().enumerate() {
                    on_model(i, m);
                }
                self.check(what, true);
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(want
                    .iter()
                    .all(|r| r.as_ref().err().map(ToString::to_string) == Some(msg.clone())));
                let err = got
                    .err()
                    .unwrap_or_else(|| panic!("{what}: {msg} expected"));
                assert_eq!(err.to_string(), msg, "{what}, {:?}", self.kind);
                self.check(what, false);
            }
        }
    }
}

/// The outcomes as messages, for comparing errors (`Error` is not `PartialEq`).
fn messages(outcomes: &[Result<()>]) -> Vec<Option<String>> {
    outcomes
        .iter()
        .map(|r| r.as_ref().err().map(ToString::to_string))
        .collect()
}

impl<T: Scalar> Case<T> {
    /// A shape-preserving verb with per-problem outcomes: the batch's report must list each
    /// single state's outcome; refused problems stay as they were (their single state is
    /// unchanged too), the others follow their model. Returns the refusing problems.
    fn step_each(
        &mut self,
        what: &str,
        on_batch: impl FnOnce(&mut BatchQr<T>) -> Result<BatchReport>,
        on_single: impl Fn(usize, &mut CpuQr<T>) -> Result<()>,
        on_model: impl Fn(usize, &mut Model),
    ) -> Vec<usize> {
        let report = on_batch(&mut self.batch).unwrap_or_else(|e| panic!("{what}: {e}"));
        let want: Vec<Result<()>> = self
            .singles
            .iter_mut()
            .enumerate()
            .map(|(i, s)| on_single(i, s))
            .collect();
        assert_eq!(messages(&report.outcomes), messages(&want), "{what}");
        for (i, m) in self.models.iter_mut().enumerate() {
            if want[i].is_ok() {
                on_model(i, m);
            }
        }
        self.check(what, true);
        report.refused().map(|(i, _)| i).collect()
    }

    /// A shape-changing verb some problems refuse: the batch must return
    /// `Error::BatchRefused` listing exactly the single states that refuse, with their
    /// errors, and change no problem. Returns the refusing problems.
    fn step_refused(
        &mut self,
        what: &str,
        on_batch: impl FnOnce(&mut BatchQr<T>) -> Result<BatchReport>,
        on_single: impl Fn(usize, &mut CpuQr<T>) -> Result<()>,
    ) -> Vec<usize> {
        let err = on_batch(&mut self.batch)
            .err()
            .unwrap_or_else(|| panic!("{what}: refusal expected"));
        let want: Vec<(usize, String)> = self
            .singles
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let mut trial = s.clone();
                on_single(i, &mut trial).err().map(|e| (i, e.to_string()))
            })
            .collect();
        let Error::BatchRefused { problems, .. } = &err else {
            panic!("{what}: {err:?}")
        };
        let got: Vec<(usize, String)> = problems.iter().map(|(i, e)| (*i, e.to_string())).collect();
        assert_eq!(got, want, "{what}");
        self.check(what, true);
        got.into_iter().map(|(i, _)| i).collect()
    }
}

fn to_t<T: Scalar>(x: f64) -> T {
    T::from_f64(x)
}

/// The model's rows k0..k0+p of A and b, as the state's type (exact where the model is).
fn model_rows<T: Scalar>(m: &Model, k0: usize, p: usize) -> (Mat<T>, Mat<T>) {
    let a = Mat::from_fn(p, m.a.ncols(), |i, j| to_t(m.a[(k0 + i, j)]));
    let b = Mat::from_fn(p, m.b.ncols(), |i, j| to_t(m.b[(k0 + i, j)]));
    (a, b)
}

/// Row and column updates: inserts and deletes, with the rows given or not.
fn rows_and_cols<T: Scalar>(c: &mut Case<T>) {
    let (m, _, q) = c.dims();
    let b = c.b();
    let n = c.batch.ncols();
    let (k0, p) = (c.g.random_range(0..=m), c.g.random_range(1..=3));
    let (u, e) = (
        Packed::<T>::random(&mut c.g, b, p, n),
        Packed::<T>::random(&mut c.g, b, p, q),
    );
    c.step(
        "insert_rows",
        |bq| bq.insert_rows(k0, u.view(), e.view()),
        |i, s| s.insert_rows(k0, u.at(i), e.at(i)),
        |i, md| md.insert_rows(k0, &u.mats[i], &e.mats[i]),
    );
    let (m, n, _) = c.dims();
    let p = c.g.random_range(1..=(m - n).min(3));
    let k0 = c.g.random_range(0..=m - p);
    c.step(
        "delete_rows",
        |bq| bq.delete_rows(k0, p),
        |_, s| s.delete_rows(k0, p),
        |_, md| md.delete_rows(k0, p),
    );
    let (m, n, _) = c.dims();
    let k0 = c.g.random_range(0..=m - 2);
    let given: Vec<(Mat<T>, Mat<T>)> = c.models.iter().map(|md| model_rows(md, k0, 2)).collect();
    let rows = Packed::new(given.iter().map(|x| x.0.clone()).collect(), true);
    let rhs = Packed::new(given.iter().map(|x| x.1.clone()).collect(), false);
    if m - 2 >= n {
        c.step(
            "delete_rows_with",
            |bq| bq.delete_rows_with(k0, rows.view(), rhs.view()),
            |i, s| s.delete_rows_with(k0, rows.at(i), rhs.at(i)),
            |_, md| md.delete_rows(k0, 2),
        );
    }
    let (m, n, _) = c.dims();
    let (k0, p) = (c.g.random_range(0..=n), c.g.random_range(1..=2).min(m - n));
    let u = Packed::<T>::random(&mut c.g, b, m, p);
    c.step(
        "insert_cols",
        |bq| bq.insert_cols(k0, u.view()),
        |i, s| s.insert_cols(k0, u.at(i)),
        |i, md| md.insert_cols(k0, &u.mats[i]),
    );
    let n = c.batch.ncols();
    let k0 = c.g.random_range(0..n);
    c.step(
        "delete_cols",
        |bq| bq.delete_cols(k0, 1),
        |_, s| s.delete_cols(k0, 1),
        |_, md| md.delete_cols(k0, 1),
    );
}

/// The shape-preserving updates: rank-one, rank-k, column replacement and shift.
fn same_shape<T: Scalar>(c: &mut Case<T>) {
    let (m, n, _) = c.dims();
    let b = c.b();
    let (u, v) = (
        Packed::<T>::random(&mut c.g, b, m, 1),
        Packed::<T>::random(&mut c.g, b, n, 1),
    );
    c.step(
        "rank_one",
        |bq| bq.rank_one(u.view(), v.view()),
        |i, s| s.rank_one(u.col(i), v.col(i)),
        |i, md| md.rank_one(u.col(i), v.col(i)),
    );
    let (u, v) = (
        Packed::<T>::random(&mut c.g, b, m, 2),
        Packed::<T>::random(&mut c.g, b, n, 2),
    );
    c.step(
        "rank_k",
        |bq| bq.rank_k(u.view(), v.view()),
        |i, s| s.rank_k(u.at(i), v.at(i)),
        |i, md| {
            for k in 0..2 {
                md.rank_one(u.mats[i].col(k), v.mats[i].col(k));
            }
        },
    );
    let p = c.g.random_range(1..=2).min(n);
    let k0 = c.g.random_range(0..=n - p);
    let u = Packed::<T>::random(&mut c.g, b, m, p);
    c.step(
        "replace_cols",
        |bq| bq.replace_cols(k0, u.view()),
        |i, s| s.replace_cols(k0, u.at(i)),
        |i, md| {
            md.delete_cols(k0, p);
            md.insert_cols(k0, &u.mats[i]);
        },
    );
    let (from, to) = (c.g.random_range(0..n), c.g.random_range(0..n));
    c.step(
        "shift_col",
        |bq| bq.shift_col(from, to),
        |_, s| s.shift_col(from, to),
        |_, md| {
            let col: Vec<f64> = (0..md.a.nrows()).map(|i| md.a[(i, from)]).collect();
            md.delete_cols(from, 1);
            md.insert_cols(to, &Mat::from_col(&col));
        },
    );
}

/// Window steps: as many rows in as out (per problem), more in than out, none out.
fn windows<T: Scalar>(c: &mut Case<T>) {
    for (p, drop) in [(2, 2), (3, 1), (2, 0)] {
        let (m, n, q) = c.dims();
        let b = c.b();
        let (rows, rhs) = (
            Packed::<T>::random(&mut c.g, b, p, n),
            Packed::<T>::random(&mut c.g, b, p, q),
        );
        c.step(
            "slide",
            |bq| bq.slide(rows.view(), rhs.view(), drop),
            |i, s| s.slide(rows.at(i), rhs.at(i), drop),
            |i, md| {
                md.delete_rows(0, drop);
                md.insert_rows(m - drop, &rows.mats[i], &rhs.mats[i]);
            },
        );
    }
}

/// Every verb on every kind, B and sizes drawn at random.
fn every_verb_every_kind<T: Scalar>(seed: u64) {
    let mut g = rng(seed);
    for kind in ALL_KINDS {
        let b = g.random_range(1..=37);
        let n = g.random_range(2..=9);
        let (m, q) = (n + g.random_range(4..=30), g.random_range(1..=2));
        let mut c = Case::<T>::new(kind, g.random(), b, (m, n, q));
        rows_and_cols(&mut c);
        same_shape(&mut c);
        windows(&mut c);
        let drift = c.batch.check_drift();
        for (i, (d, s)) in drift.iter().zip(&mut c.singles).enumerate() {
            let want = s.check_drift().map(|r| r.estimate.map(f64::to_bits));
            let got = d.as_ref().map(|r| r.estimate.map(f64::to_bits));
            assert_eq!(got.ok(), want.ok(), "check_drift of problem {i}");
        }
        c.check("check_drift", true);
    }
}

typed_tests!(every_verb_every_kind {
    every_verb_f64: f64[1],
    every_verb_f32: f32[2]
});

/// Sizes large enough that the batch runs on rayon's pool: still bit for bit.
fn parallel_batches<T: Scalar>(seed: u64) {
    let mut g = rng(seed);
    for kind in [StateKind::Full, StateKind::Thin] {
        let mut c = Case::<T>::new(kind, g.random(), 37, (150, 19, 2));
        rows_and_cols(&mut c);
        same_shape(&mut c);
        windows(&mut c);
    }
}

typed_tests!(parallel_batches {
    parallel_f64: f64[3],
    parallel_f32: f32[4]
});

/// Problems with A's column 0 zero but for row 0: deleting row 0 leaves them rank
/// deficient, so their downdates fail.
fn lonely_row<T: Scalar>(a: &mut Mat<T>) {
    for i in 1..a.nrows() {
        a[(i, 0)] = T::ZERO;
    }
}

/// Per-problem refusals (a NaN, a dependent column, a failed downdate) leave those
/// problems bit for bit unchanged; shape changes are refused as a whole.
fn refusals<T: Scalar>(seed: u64) {
    let mut g = rng(seed);
    for kind in [StateKind::Full, StateKind::Thin, StateKind::NoneKeep] {
        let (b, m, n, q) = (9, 31, 5, 2);
        let mut a = Packed::<T>::random(&mut g, b, m, n).mats;
        lonely_row(&mut a[5]);
        let a = Packed::new(a, g.random_bool(0.5));
        let rhs = Packed::<T>::random(&mut g, b, m, q);
        let mut c = Case::from_packed(kind, rng(seed + 1), &a, &rhs);

        // a window step: problem 1's new row holds ∞, problem 5 cannot lose row 0
        let mut rows = Packed::<T>::random(&mut c.g, b, 1, n).mats;
        rows[1][(0, 2)] = to_t(f64::INFINITY);
        let (rows, rhs) = (
            Packed::new(rows, true),
            Packed::<T>::random(&mut c.g, b, 1, q),
        );
        let refused = c.step_each(
            "slide",
            |bq| bq.slide(rows.view(), rhs.view(), 1),
            |i, s| s.slide(rows.at(i), rhs.at(i), 1),
            |i, md| {
                md.delete_rows(0, 1);
                md.insert_rows(m - 1, &rows.mats[i], &rhs.mats[i]);
            },
        );
        assert!(refused.contains(&1), "{kind:?}: {refused:?}");
        if kind != StateKind::NoneKeep {
            assert!(refused.contains(&5), "{kind:?}: {refused:?}");
        }
        // problem 5 still cannot lose row 0: deleting it is refused for the whole batch
        let lonely = c
            .singles
            .iter()
            .any(|s| s.clone().delete_rows(0, 1).is_err());
        if lonely {
            let refused = c.step_refused(
                "delete_rows",
                |bq| bq.delete_rows(0, 1),
                |_, s| s.delete_rows(0, 1),
            );
            assert_eq!(refused, vec![5], "{kind:?}");
        }

        let mut u = Packed::<T>::random(&mut c.g, b, m, 1).mats;
        u[2][(3, 0)] = to_t(f64::NAN);
        let (u, v) = (Packed::new(u, true), Packed::<T>::random(&mut c.g, b, n, 1));
        let refused = c.step_each(
            "rank_one",
            |bq| bq.rank_one(u.view(), v.view()),
            |i, s| s.rank_one(u.col(i), v.col(i)),
            |i, md| md.rank_one(u.col(i), v.col(i)),
        );
        assert_eq!(refused, vec![2], "{kind:?}");

        // problem 4's new column 0 repeats its column 1 (exactly, from the model)
        let mut u = Packed::<T>::random(&mut c.g, b, m, 1).mats;
        u[4] = Mat::from_fn(m, 1, |i, _| to_t(c.models[4].a[(i, 1)]));
        let u = Packed::new(u, false);
        let refused = c.step_each(
            "replace_cols",
            |bq| bq.replace_cols(0, u.view()),
            |i, s| s.replace_cols(0, u.at(i)),
            |i, md| {
                md.delete_cols(0, 1);
                md.insert_cols(0, &u.mats[i]);
            },
        );
        assert_eq!(refused, vec![4], "{kind:?}");

        // shape changes: all or nothing
        let mut u = Packed::<T>::random(&mut c.g, b, 2, n).mats;
        u[3][(1, 1)] = to_t(f64::NAN);
        let (u, e) = (
            Packed::new(u, false),
            Packed::<T>::random(&mut c.g, b, 2, q),
        );
        let refused = c.step_refused(
            "insert_rows",
            |bq| bq.insert_rows(0, u.view(), e.view()),
            |i, s| s.insert_rows(0, u.at(i), e.at(i)),
        );
        assert_eq!(refused, vec![3]);
        let mut u = Packed::<T>::random(&mut c.g, b, m, 1).mats;
        u[6] = Mat::from_fn(m, 1, |i, _| to_t(c.models[6].a[(i, 2)]));
        let u = Packed::new(u, true);
        let refused = c.step_refused(
            "insert_cols",
            |bq| bq.insert_cols(1, u.view()),
            |i, s| s.insert_cols(1, u.at(i)),
        );
        assert_eq!(refused, vec![6]);
    }
}

typed_tests!(refusals {
    refusals_f64: f64[5],
    refusals_f32: f32[6]
});

/// A factorisation some problems refuse returns every refusal and no state.
#[test]
fn factorize_refusals() {
    let mut g = rng(7);
    let mut a = Packed::<f64>::random(&mut g, 4, 12, 3).mats;
    a[1][(5, 2)] = f64::NAN;
    a[3] = Mat::from_fn(12, 3, |i, j| {
        (i + 1) as f64 * (j == 0 || j == 1) as u8 as f64
    });
    let (a, b) = (
        Packed::new(a, true),
        Packed::<f64>::random(&mut g, 4, 12, 1),
    );
    let err = BatchQr::factorize(a.view(), b.view(), cuqr::QPolicy::Thin, Default::default())
        .unwrap_err();
    let Error::BatchRefused {
        op: "factorize",
        problems,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert!(
        matches!(
            problems[..],
            [
                (1, Error::NonFinite { .. }),
                (3, Error::RankDeficient { .. })
            ]
        ),
        "{err}"
    );
    assert!(err.to_string().contains("problem 1"), "{err}");
}

/// `got` is an error of `variant`, with the single state's message where it has one; the
/// batch is unchanged.
fn expect_shared<T: Scalar>(
    c: &Case<T>,
    what: &str,
    got: Result<BatchReport>,
    single: Option<Result<()>>,
    variant: fn(&Error) -> bool,
) {
    let err = got
        .err()
        .unwrap_or_else(|| panic!("{what}: an error expected"));
    assert!(variant(&err), "{what}: {err:?}");
    if let Some(single) = single {
        assert_eq!(
            Some(err.to_string()),
            single.err().map(|e| e.to_string()),
            "{what}"
        );
    }
    c.check(what, true);
}

/// Shared-argument errors (batch sizes, shapes, positions, empty blocks, parameters, the
/// state kind) return `Err` and change no problem; where a single state has the same
/// argument, the error is its error.
fn shared_errors<T: Scalar>(seed: u64) {
    let mut g = rng(seed);
    for kind in ALL_KINDS {
        let (b, m, n, q) = (g.random_range(2..=6), 23, 4, 1);
        let mut c = Case::<T>::new(kind, g.random(), b, (m, n, q));
        let mut s0 = c.singles[0].clone();
        let (u, e) = (
            Packed::<T>::random(&mut g, b + 1, 1, n),
            Packed::<T>::random(&mut g, b + 1, 1, q),
        );
        let (u1, e1) = (u.at(0), e.at(0));
        let is_shape = |e: &Error| matches!(e, Error::Shape { .. });
        let is_range = |e: &Error| matches!(e, Error::OutOfRange { .. });
        expect_shared(
            &c,
            "batch of u",
            c.batch.clone().insert_rows(0, u.view(), e.view()),
            None,
            is_shape,
        );
        let (u, e) = (
            Packed::<T>::random(&mut g, b, 1, n),
            Packed::<T>::random(&mut g, b, 1, q),
        );
        let mut bq = c.batch.clone();
        expect_shared(
            &c,
            "k0",
            bq.insert_rows(m + 1, u.view(), e.view()),
            Some(s0.insert_rows(m + 1, u1, e1)),
            is_range,
        );
        let wide = Packed::<T>::random(&mut g, b, 1, n + 1);
        let w1 = wide.mats[0].clone();
        expect_shared(
            &c,
            "columns",
            bq.insert_rows(0, wide.view(), e.view()),
            Some(s0.insert_rows(0, w1.as_ref(), e1)),
            is_shape,
        );
        expect_shared(
            &c,
            "delete_rows",
            bq.delete_rows(m, 1),
            Some(s0.delete_rows(m, 1)),
            |e| matches!(e, Error::OutOfRange { .. } | Error::NeedsData { .. }),
        );
        expect_shared(
            &c,
            "p = 0",
            bq.delete_cols(0, 0),
            Some(s0.delete_cols(0, 0)),
            |e| matches!(e, Error::EmptyBlock { .. }),
        );
        expect_shared(
            &c,
            "all columns",
            bq.delete_cols(0, n),
            Some(s0.delete_cols(0, n)),
            |e| matches!(e, Error::InvalidParam { .. }),
        );
        expect_shared(
            &c,
            "shift_col",
            bq.shift_col(n, 0),
            Some(s0.shift_col(n, 0)),
            is_range,
        );
        let long = Packed::<T>::random(&mut g, b, m + 1, 1);
        let v = Packed::<T>::random(&mut g, b, n, 1);
        expect_shared(
            &c,
            "rank_one",
            bq.rank_one(long.view(), v.view()),
            Some(s0.rank_one(long.col(0), v.col(0))),
            is_shape,
        );
        let empty: Vec<T> = Vec::new();
        let none = BatchRef::row_major(&empty, b, m, 0).unwrap();
        let none_v = BatchRef::row_major(&empty, b, n, 0).unwrap();
        expect_shared(&c, "rank_k", bq.rank_k(none, none_v), None, |e| {
            matches!(e, Error::EmptyBlock { .. })
        });
        let p = UpdateParams {
            forget: 1.5,
            ..UpdateParams::default()
        };
        bq.set_params(p);
        s0.set_params(p);
        expect_shared(
            &c,
            "forget",
            bq.slide(u.view(), e.view(), 1),
            Some(s0.slide(u1, e1, 1)),
            |e| matches!(e, Error::InvalidParam { .. }),
        );
        // a NaN in problem 0's block does not hide a shared error
        let mut nan = Packed::<T>::random(&mut g, b, 1, n + 1).mats;
        nan[0][(0, 0)] = to_t(f64::NAN);
        let nan = Packed::new(nan, true);
        expect_shared(
            &c,
            "shape under NaN",
            c.batch.clone().insert_rows(0, nan.view(), e.view()),
            None,
            is_shape,
        );
        assert_eq!(c.batch.params(), UpdateParams::default());
        c.batch = bq;
        assert_eq!(c.batch.params().forget, 1.5);
    }
    let data = vec![T::ONE; 6];
    let (a, b0) = (
        BatchRef::row_major(&data[..0], 0, 3, 2).unwrap(),
        BatchRef::row_major(&data[..0], 0, 3, 2).unwrap(),
    );
    assert!(matches!(
        BatchQr::factorize(a, b0, cuqr::QPolicy::Full, Default::default()),
        Err(Error::Shape {
            what: "batch size",
            ..
        })
    ));
    let a = BatchRef::row_major(&data, 1, 3, 2).unwrap();
    let b2 = BatchRef::row_major(&data, 2, 3, 1).unwrap();
    assert!(matches!(
        BatchQr::factorize(a, b2, cuqr::QPolicy::Full, Default::default()),
        Err(Error::Shape {
            what: "batch size of b",
            ..
        })
    ));
}

typed_tests!(shared_errors {
    shared_errors_f64: f64[8],
    shared_errors_f32: f32[9]
});

/// A forgetting factor acts on every problem as on a single state.
#[test]
fn forgetting_matches_single_states() {
    let mut c = Case::<f64>::new(StateKind::Thin, 10, 11, (40, 6, 2));
    let p = UpdateParams {
        forget: 0.9,
        ..UpdateParams::default()
    };
    c.batch.set_params(p);
    for s in &mut c.singles {
        s.set_params(p);
    }
    for _ in 0..5 {
        let (rows, rhs) = (
            Packed::<f64>::random(&mut c.g, 11, 3, 6),
            Packed::<f64>::random(&mut c.g, 11, 3, 2),
        );
        c.batch.slide(rows.view(), rhs.view(), 3).unwrap();
        for (i, s) in c.singles.iter_mut().enumerate() {
            s.slide(rows.at(i), rhs.at(i), 3).unwrap();
        }
        c.check("forgetting", false);
    }
}

/// Views of a list of matrices, and a shared matrix (batch stride 0), read as the packed
/// layouts do.
#[test]
fn views_of_lists_and_broadcasts() {
    let mut g = rng(11);
    let (b, m, n) = (5, 17, 3);
    let a = Packed::<f64>::random(&mut g, b, m, n);
    let rhs = Packed::<f64>::random(&mut g, b, m, 1);
    let views: Vec<MatRef<'_, f64>> = a.mats.iter().map(Mat::as_ref).collect();
    let listed = BatchRef::from_mats(&views).unwrap();
    let p = cuqr::QPolicy::Full;
    let x = BatchQr::factorize(listed, rhs.view(), p, Default::default()).unwrap();
    let y = BatchQr::factorize(a.view(), rhs.view(), p, Default::default()).unwrap();
    for i in 0..b {
        assert_eq!(
            snapshot(x.problem(i).unwrap()),
            snapshot(y.problem(i).unwrap())
        );
    }
    // the same v for every problem, without copies
    let v = [0.5, -0.25, 2.0];
    let shared_v = BatchRef::new(&v, b, n, 1, [0, 1, n]).unwrap();
    let u = Packed::<f64>::random(&mut g, b, m, 1);
    let mut x = x;
    assert!(x.rank_one(u.view(), shared_v).unwrap().all_ok());
    let mut single = y.problem(0).unwrap().clone();
    single.rank_one(u.col(0), &v).unwrap();
    assert_eq!(snapshot(x.problem(0).unwrap()), snapshot(&single));
    assert!(x.problem(b).is_none());
}

/// A row insertion that one problem refuses, on a batch large enough to run on rayon's
/// pool (each problem copied and updated by its own thread): no problem changes; without
/// the refusal every problem gains the rows, as its single state does.
#[test]
fn parallel_all_or_nothing() {
    use cuqr::{FactorParams, QPolicy};
    let mut g = rng(17);
    let (b, m, n) = (40, 150, 19);
    let a = Packed::<f64>::random(&mut g, b, m, n);
    let rhs = Packed::<f64>::random(&mut g, b, m, 1);
    let params = FactorParams::default();
    let mut bq = BatchQr::factorize(a.view(), rhs.view(), QPolicy::Full, params).unwrap();
    let before = bq.clone();
    let mut rows = Packed::<f64>::random(&mut g, b, 2, n).mats;
    rows[b - 3][(1, 4)] = f64::NAN;
    let rows = Packed::new(rows, true);
    let e = Packed::<f64>::random(&mut g, b, 2, 1);
    match bq.insert_rows(m / 2, rows.view(), e.view()) {
        Err(Error::BatchRefused { problems, .. }) => {
            assert_eq!(
                problems.iter().map(|p| p.0).collect::<Vec<_>>(),
                vec![b - 3]
            );
        }
        other => panic!("expected BatchRefused, got {other:?}"),
    }
    for (x, y) in bq.problems().iter().zip(before.problems()) {
        assert_eq!(x.nrows(), m);
        assert_eq!(x.r_ref().as_slice(), y.r_ref().as_slice());
        assert_eq!(x.q_ref().unwrap().as_slice(), y.q_ref().unwrap().as_slice());
        assert_eq!(x.d_ref().as_slice(), y.d_ref().as_slice());
    }
    let mut fixed = rows.mats.clone();
    fixed[b - 3][(1, 4)] = 0.5;
    let rows = Packed::new(fixed, false);
    let report = bq.insert_rows(m / 2, rows.view(), e.view()).unwrap();
    assert!(report.all_ok());
    let mut singles = before.into_problems();
    for (i, s) in singles.iter_mut().enumerate() {
        s.insert_rows(m / 2, rows.at(i), e.at(i)).unwrap();
        let x = &bq.problems()[i];
        assert_eq!(x.r_ref().as_slice(), s.r_ref().as_slice(), "problem {i}");
        assert_eq!(x.q_ref().unwrap().as_slice(), s.q_ref().unwrap().as_slice());
    }
}
