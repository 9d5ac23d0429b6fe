//! The state kinds and update steps shared by the CPU and GPU tests, and the composed-update
//! sequences (sliding window, rank-k, column replacement and shift, drift control) that both
//! backends run with their own sizes and seeds: each driver takes the backend's state (or a
//! builder of it) and checks every step against the f64 model with `check_state`.

use std::sync::Arc;

use cuqr::{
    CpuQr, Diagnostics, DriftParams, DriftReport, Error, FactorParams, Gpu, GpuQr, GpuScalar, Mat,
    MatRef, QPolicy, QrUpdate, Scalar, UpdateParams,
};
use rand::rngs::StdRng;
use rand::Rng;

use super::{check_state, random_mat, random_vec, rng, Model};

/// A state kind: the Q policy and whether an R-only state keeps A and b.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StateKind {
    /// The m×m Q and R at full height.
    Full,
    /// Q₁ m×n and R n×n.
    Thin,
    /// R-only with kept A and b.
    NoneKeep,
    /// R-only without kept data.
    NoneBare,
}

/// Every state kind.
pub const ALL_KINDS: [StateKind; 4] = [
    StateKind::Full,
    StateKind::Thin,
    StateKind::NoneKeep,
    StateKind::NoneBare,
];

impl StateKind {
    /// The Q policy of the kind.
    pub fn policy(self) -> QPolicy {
        match self {
            StateKind::Full => QPolicy::Full,
            StateKind::Thin => QPolicy::Thin,
            StateKind::NoneKeep | StateKind::NoneBare => QPolicy::None,
        }
    }
    /// The factorisation parameters of the kind (kept data for `NoneKeep`).
    pub fn params(self) -> FactorParams {
        FactorParams {
            keep_data: self == StateKind::NoneKeep,
            ..FactorParams::default()
        }
    }
    /// Holds Q or the data, so every composed update applies.
    pub fn capable(self) -> bool {
        self != StateKind::NoneBare
    }
    /// Whether `update` runs on this kind (an R-only state without data cannot insert
    /// columns or make a rank-one change).
    pub fn runs(self, update: UpdateKind) -> bool {
        self != StateKind::NoneBare
            || !matches!(update, UpdateKind::InsertCols | UpdateKind::RankOne)
    }
    /// The CPU backend's state of this kind for A and b.
    pub fn cpu<T: Scalar>(self, a: &Mat<T>, b: &Mat<T>) -> CpuQr<T> {
        CpuQr::factorize(a.as_ref(), b.as_ref(), self.policy(), self.params())
            .unwrap_or_else(|e| panic!("factorize {self:?}: {e}"))
    }
    /// The GPU backend's state of this kind for A and b.
    pub fn gpu<T: GpuScalar>(self, g: &Arc<Gpu>, a: &Mat<T>, b: &Mat<T>) -> GpuQr<T> {
        GpuQr::factorize(g, a.as_ref(), b.as_ref(), self.policy(), self.params())
            .unwrap_or_else(|e| panic!("factorize {self:?} on the GPU: {e}"))
    }
}

/// The five basic updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateKind {
    InsertCols,
    DeleteCols,
    InsertRows,
    DeleteRows,
    RankOne,
}

impl UpdateKind {
    /// The last position the update takes on an m×n state with block size p (0 for the
    /// rank-one change, which has none).
    pub fn last_k0(self, (m, n): (usize, usize), p: usize) -> usize {
        match self {
            UpdateKind::InsertCols => n,
            UpdateKind::DeleteCols => n - p,
            UpdateKind::InsertRows => m,
            UpdateKind::DeleteRows => m - p,
            UpdateKind::RankOne => 0,
        }
    }
}

/// Every basic update.
pub const ALL_UPDATES: [UpdateKind; 5] = [
    UpdateKind::InsertCols,
    UpdateKind::DeleteCols,
    UpdateKind::InsertRows,
    UpdateKind::DeleteRows,
    UpdateKind::RankOne,
];

/// One update with its inputs, applied identically to every backend and to the model.
#[derive(Clone, Debug)]
pub enum Upd<T: Scalar> {
    InsertCols(usize, Mat<T>),
    DeleteCols(usize, usize),
    InsertRows(usize, Mat<T>, Mat<T>),
    DeleteRows(usize, usize),
    RankOne(Vec<T>, Vec<T>),
}

impl<T: Scalar> Upd<T> {
    /// A random update of `kind` with position `k0` and block size `p` for an m×n×q state.
    pub fn make(
        kind: UpdateKind,
        g: &mut StdRng,
        (m, n, q): (usize, usize, usize),
        k0: usize,
        p: usize,
    ) -> Self {
        match kind {
            UpdateKind::InsertCols => Upd::InsertCols(k0, random_mat(g, m, p)),
            UpdateKind::DeleteCols => Upd::DeleteCols(k0, p),
            UpdateKind::InsertRows => Upd::InsertRows(k0, random_mat(g, p, n), random_mat(g, p, q)),
            UpdateKind::DeleteRows => Upd::DeleteRows(k0, p),
            UpdateKind::RankOne => Upd::RankOne(random_vec(g, m), random_vec(g, n)),
        }
    }
    /// A random update of one of `kinds` for an m×n×q state: the kind, p in 1..5 and k0
    /// (anywhere the kind allows) drawn in that order, then the inputs. Returns the update
    /// with its k0 and p.
    pub fn random(
        kinds: &[UpdateKind],
        g: &mut StdRng,
        (m, n, q): (usize, usize, usize),
    ) -> (Self, usize, usize) {
        let kind = kinds[g.random_range(0..kinds.len())];
        let p = g.random_range(1..5);
        let k0 = match kind {
            UpdateKind::InsertCols => g.random_range(0..=n),
            UpdateKind::DeleteCols => g.random_range(0..=n - p),
            UpdateKind::InsertRows => g.random_range(0..=m),
            UpdateKind::DeleteRows => g.random_range(0..=m - p),
            UpdateKind::RankOne => 0,
        };
        (Self::make(kind, g, (m, n, q), k0, p), k0, p)
    }
    /// The kind of the update.
    pub fn kind(&self) -> UpdateKind {
        match self {
            Upd::InsertCols(..) => UpdateKind::InsertCols,
            Upd::DeleteCols(..) => UpdateKind::DeleteCols,
            Upd::InsertRows(..) => UpdateKind::InsertRows,
            Upd::DeleteRows(..) => UpdateKind::DeleteRows,
            Upd::RankOne(..) => UpdateKind::RankOne,
        }
    }
    /// Applies the update to a state.
    pub fn apply(&self, st: &mut dyn QrUpdate<T>) -> cuqr::Result<()> {
        match self {
            Upd::InsertCols(k0, u) => st.insert_cols(*k0, u.as_ref()),
            Upd::DeleteCols(k0, p) => st.delete_cols(*k0, *p),
            Upd::InsertRows(k0, u, e) => st.insert_rows(*k0, u.as_ref(), e.as_ref()),
            Upd::DeleteRows(k0, p) => st.delete_rows(*k0, *p),
            Upd::RankOne(u, v) => st.rank_one(u, v),
        }
    }
    /// [`Upd::apply`], with row deletion passing the deleted rows of the model's A and b
    /// (`delete_rows_with`), which only an R-only state without data reads.
    pub fn apply_with_rows(&self, st: &mut dyn QrUpdate<T>, model: &Model) -> cuqr::Result<()> {
        let Upd::DeleteRows(k0, p) = self else {
            return self.apply(st);
        };
        // rows past the end are the caller's mistake: pass what there is
        let take = (*p).min(model.m().saturating_sub(*k0));
        let rows = Mat::<T>::from_fn(take, model.n(), |i, j| T::from_f64(model.a[(k0 + i, j)]));
        let rhs = Mat::<T>::from_fn(take, model.q(), |i, k| T::from_f64(model.b[(k0 + i, k)]));
        if take == *p {
            st.delete_rows_with(*k0, rows.as_ref(), rhs.as_ref())
        } else {
            st.delete_rows(*k0, *p)
        }
    }
    /// Applies the update to the model.
    pub fn apply_model(&self, model: &mut Model) {
        match self {
            Upd::InsertCols(k0, u) => model.insert_cols(*k0, u),
            Upd::DeleteCols(k0, p) => model.delete_cols(*k0, *p),
            Upd::InsertRows(k0, u, e) => model.insert_rows(*k0, u, e),
            Upd::DeleteRows(k0, p) => model.delete_rows(*k0, *p),
            Upd::RankOne(u, v) => model.rank_one(u, v),
        }
    }
}

/// The model scaled by `s` (a forgetting step).
pub fn scale_model(model: &mut Model, s: f64) {
    model.a = &model.a * faer::Scale(s);
    model.b = &model.b * faer::Scale(s);
}

/// The window sequences one backend runs: for every kind, forgetting factor 1 and 0.81 and
/// every (rows in, rows out) block, `steps` window steps on an m×n×q state, each checked
/// against the model (an R-only state without data must refuse a step that drops rows).
pub struct SlideSweep {
    /// (m, n, q) of the first window.
    pub dims: (usize, usize, usize),
    /// (p rows in, rows dropped) per sequence.
    pub blocks: &'static [(usize, usize)],
    /// Window steps per sequence.
    pub steps: usize,
    /// A sequence ends (unchecked) once the window holds fewer rows than this.
    pub min_rows: usize,
    /// The seed of the sequence for (p, drop).
    pub seed: fn(usize, usize) -> u64,
}

/// Runs `sweep` on the states `build` makes.
pub fn slide_sweep<T: Scalar, S: QrUpdate<T>>(
    sweep: &SlideSweep,
    build: impl Fn(StateKind, &Mat<T>, &Mat<T>) -> S,
) {
    for kind in ALL_KINDS {
        for forget in [1.0, 0.81] {
            for &(p, drop) in sweep.blocks {
                let mut g = rng((sweep.seed)(p, drop));
                let (m, n, q) = sweep.dims;
                let a = random_mat::<T>(&mut g, m, n);
                let b = random_mat::<T>(&mut g, m, q);
                let mut st = build(kind, &a, &b);
                st.set_params(UpdateParams {
                    forget,
                    ..UpdateParams::default()
                });
                let mut model = Model::new(&a, &b);
                for step in 0..sweep.steps {
                    let rows = random_mat::<T>(&mut g, p, n);
                    let rhs = random_mat::<T>(&mut g, p, q);
                    let out = st.slide(rows.as_ref(), rhs.as_ref(), drop);
                    if kind == StateKind::NoneBare && drop > 0 {
                        assert!(
                            matches!(out, Err(Error::NeedsData { op: "slide", .. })),
                            "{out:?}"
                        );
                        break;
                    }
                    let what = format!("{kind:?} λ={forget} p={p} drop={drop} step {step}");
                    out.unwrap_or_else(|e| panic!("{what}: {e}"));
                    model.delete_rows(0, drop);
                    scale_model(&mut model, forget.sqrt());
                    let mm = model.m();
                    model.insert_rows(mm, &rows, &rhs);
                    if model.m() < sweep.min_rows {
                        // keep the window tall: the next steps add rows only
                        break;
                    }
                    check_state(&st, &model).unwrap_or_else(|e| panic!("{what}: {e}"));
                }
            }
        }
    }
}

/// A window step on a 9-column state, given two rows, that refuses to drop too many
/// rows: `m − 6` leaves 8 rows (underdetermined) and `m + 1` is more than the window holds.
pub fn assert_slide_refuses_drops<T: Scalar>(
    st: &mut dyn QrUpdate<T>,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
) -> Error {
    let m = st.nrows();
    let e = st.slide(rows, rhs, m - 6).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Underdetermined {
                op: "slide",
                m: 8,
                n: 9
            }
        ),
        "{e}"
    );
    let e = st.slide(rows, rhs, m + 1).unwrap_err();
    assert!(matches!(e, Error::InvalidParam { what: "drop", .. }), "{e}");
    e
}

/// `rank_k(U, V)` on a state of `kind` made from (a, b), against the model; a kind that is not
/// [`StateKind::capable`] must refuse it (with `NeedsData` naming `needs_data_op` when given).
#[allow(clippy::too_many_arguments)]
pub fn rank_k_step<T: Scalar>(
    st: &mut dyn QrUpdate<T>,
    kind: StateKind,
    (a, b): (&Mat<T>, &Mat<T>),
    (u, v): (&Mat<T>, &Mat<T>),
    needs_data_op: Option<&str>,
    what: &str,
) {
    let out = st.rank_k(u.as_ref(), v.as_ref());
    if !kind.capable() {
        assert!(
            matches!(&out, Err(Error::NeedsData { op, .. }) if needs_data_op.is_none_or(|o| o == *op)),
            "{out:?}"
        );
        return;
    }
    out.unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut model = Model::new(a, b);
    for c in 0..u.ncols() {
        model.rank_one(u.col(c), v.col(c));
    }
    check_state(st, &model).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// `replace_cols(k0, U)` on a state of `kind` made from (a, b), against the model; a kind
/// that is not [`StateKind::capable`] must refuse it.
pub fn replace_cols_step<T: Scalar>(
    st: &mut dyn QrUpdate<T>,
    kind: StateKind,
    (a, b): (&Mat<T>, &Mat<T>),
    k0: usize,
    u: &Mat<T>,
    what: &str,
) {
    let out = st.replace_cols(k0, u.as_ref());
    if !kind.capable() {
        assert!(matches!(out, Err(Error::NeedsData { .. })), "{out:?}");
        return;
    }
    out.unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut model = Model::new(a, b);
    model.delete_cols(k0, u.ncols());
    model.insert_cols(k0, u);
    check_state(st, &model).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// `shift_col(from, to)` on a state of `kind` made from (a, b), against the model with the
/// columns reordered; a kind that is not [`StateKind::capable`] must refuse a real move.
pub fn shift_col_step<T: Scalar>(
    st: &mut dyn QrUpdate<T>,
    kind: StateKind,
    (a, b): (&Mat<T>, &Mat<T>),
    (from, to): (usize, usize),
    what: &str,
) {
    let out = st.shift_col(from, to);
    if !kind.capable() && from != to {
        assert!(matches!(out, Err(Error::NeedsData { .. })), "{out:?}");
        return;
    }
    out.unwrap_or_else(|e| panic!("{what}: {e}"));
    let (m, n) = (a.nrows(), a.ncols());
    let mut order: Vec<usize> = (0..n).collect();
    let c = order.remove(from);
    order.insert(to, c);
    let moved = Mat::<T>::from_fn(m, n, |i, j| a[(i, order[j])]);
    check_state(st, &Model::new(&moved, b)).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// Drift control with a zero threshold: a check every `check_every` updates, `steps` row
/// insertions of `rows` rows at the end.
pub struct DriftCase {
    pub check_every: usize,
    pub steps: usize,
    pub rows: usize,
}

/// Runs `case` on `st` (a state of `kind` for `model`): every step against the model; after
/// it two checks with one update since, and (with Q or data) two refreshes and an estimate
/// below 100·m·u; an R-only state without data reports nothing. Returns the report.
pub fn drift_refreshes_run<T: Scalar>(
    st: &mut dyn QrUpdate<T>,
    kind: StateKind,
    model: &mut Model,
    g: &mut StdRng,
    case: &DriftCase,
) -> DriftReport {
    let (m, n, q) = (model.m(), model.n(), model.q());
    st.set_params(UpdateParams {
        drift: DriftParams {
            check_every: case.check_every,
            tol: Some(0.0),
            refresh: true,
        },
        ..UpdateParams::default()
    });
    let mut history = Vec::new();
    for step in 0..case.steps {
        let rows = random_mat::<T>(g, case.rows, n);
        let rhs = random_mat::<T>(g, case.rows, q);
        st.insert_rows(st.nrows(), rows.as_ref(), rhs.as_ref())
            .unwrap();
        history.push(st.drift());
        let mm = model.m();
        model.insert_rows(mm, &rows, &rhs);
        check_state(st, model).unwrap_or_else(|e| panic!("{kind:?} step {step}: {e}"));
    }
    let d = st.drift();
    let history = format!("{kind:?}: {history:?}");
    assert_eq!((d.checks, d.since_check), (2, 1), "{history}");
    if kind == StateKind::NoneBare {
        assert_eq!((d.estimate, d.refreshes), (None, 0));
    } else {
        let e = d.estimate.unwrap();
        assert!(
            e.is_finite() && e < 100.0 * m as f64 * T::UNIT_ROUNDOFF,
            "{history} {e:e}"
        );
        assert_eq!(d.refreshes, 2, "{history}");
    }
    d
}

/// The accuracy of a long window (f64, m rows): e_Q and e_A (when held) and e_gram within
/// 100·m·u, e_x within `e_x_bar`.
pub fn assert_long_window_accuracy(dg: &Diagnostics, kind: StateKind, m: usize, e_x_bar: f64) {
    let bar = 100.0 * m as f64 * f64::UNIT_ROUNDOFF;
    if let (Some(eq), Some(ea)) = (dg.e_q, dg.e_a) {
        assert!(
            eq <= bar && ea <= bar,
            "{kind:?}: e_Q {eq:e}, e_A {ea:e} > {bar:e}"
        );
    }
    assert!(dg.e_gram <= bar, "{kind:?}: e_gram {:e}", dg.e_gram);
    assert!(dg.e_x <= e_x_bar, "{kind:?}: e_x {:e}", dg.e_x);
}
