//! Random call sequences over every verb of [`QrUpdate`], on every state kind (full Q, thin
//! Q, R only with and without kept data), in f64 and f32, on the CPU and (when one opens)
//! GPU 0. Arguments are valid or deliberately not: positions off by one or at `usize::MAX`,
//! empty and wrong-sized blocks, NaN, ±∞, 1e300 and subnormal entries, a column copied from
//! A, a forgetting factor outside (0, 1], more rows to drop than held.
//!
//! What every call must do (the all-or-nothing promise of [`QrUpdate`]):
//! * return, never panic (each call runs under `catch_unwind`);
//! * on `Err`: leave R, d, Q and the shape bit for bit as they were, and leave the state
//!   usable (its getters and `solve` still work, no `Poisoned`);
//! * on `Ok`: be a call the test's own model of A and b can apply (right shapes, positions
//!   in range) and, for an update, take no NaN or ±∞ it should have refused;
//! * at every check (every [`CHECK_EVERY`] calls and at the end of an epoch) the state agrees
//!   with the model. With u the unit roundoff, k the updates accepted since the state was
//!   factorised, m + n, ‖A‖ and ‖b‖ the largest met since then (row deletions leave smaller
//!   matrices than the ones earlier steps erred on), τ = 10·(m + n)·u·(1 + k) (k
//!   backward-stable steps of O((m + n)·u) each, docs/algorithms.md#accuracy-measures) and
//!   the backward errors ΔA = τ·‖A‖, Δb = τ·‖b‖: ‖QᵀQ − I‖_F ≤ τ, ‖A − QR‖_F ≤ ΔA,
//!   ‖d − Qᵀb‖_F ≤ Δb; an R-only state ‖RᵀR − AᵀA‖_F ≤ 2·ΔA·‖A‖ and ‖Rᵀd − Aᵀb‖_F ≤
//!   2·max(ΔA·‖b‖, Δb·‖A‖); to first order (docs/algorithms.md#accuracy-measures) the solution to
//!   2·((ΔA·‖x‖ + Δb)/σ_n + ΔA·‖r‖/σ_n²) and the residual norms to 2·(ΔA·‖x‖ + Δb), or where an R-only state downdates ρ² to
//!   2·(ΔA·‖x‖ + Δb)·‖b‖/(ρ + ρ_ref) (the factor 2 for the f64 reference's own error).
//!
//! After an accepted extreme call (or where ΔA > 10⁻²·σ_n) the accuracy check is skipped
//! and the state is factorised afresh from a new random problem; the refusal checks hold
//! throughout.
//!
//! Environment: `CUQR_RANDOM_CALLS` (calls per backend, split over the eight streams of
//! type × kind; default [`DEFAULT_CALLS`]), `CUQR_RANDOM_SEED` (default [`DEFAULT_SEED`]),
//! `CUQR_RANDOM_EPOCH` (replay one epoch of each stream), `CUQR_RANDOM_STREAM` (run only
//! the streams whose label contains it, e.g. `cpu/f64/Full`), `CUQR_REQUIRE_GPU=1` (a
//! missing GPU fails the GPU test instead of skipping it). Each defect is printed with the
//! seed, the epoch and the shortest call sequence found that still shows it.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use cuqr::{
    Backend, Device, Error, FactorParams, GpuScalar, Mat, MatRef, QPolicy, Qr, QrUpdate, Scalar,
    UpdateParams,
};
use faer::linalg::solvers::SolveLstsq;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Calls per backend without `CUQR_RANDOM_CALLS` (about 15 to 40 s for the CPU test on two shared
/// cores in the `test` profile).
const DEFAULT_CALLS: usize = 1_000_000;
/// Seed without `CUQR_RANDOM_SEED`.
const DEFAULT_SEED: u64 = 0x5EED_CA11;
/// Calls per epoch: each epoch starts from a fresh random problem.
const EPOCH: usize = 200;
/// Calls between two accuracy checks.
const CHECK_EVERY: usize = 50;
/// Size limits of the problems: m ≤ MAX_M, n ≤ MAX_N, valid calls keep m ≥ n + 2.
const MAX_M: usize = 40;
const MAX_N: usize = 12;
/// Calls replayed at most when shortening one failing sequence.
const SHRINK_CALLS: usize = 20_000;
/// Reproductions printed per defect class and stream.
const REPROS_PER_CLASS: usize = 3;

// ---------------------------------------------------------------------------------------
// Defect classes and the report
// ---------------------------------------------------------------------------------------

const PANIC: &str = "panic";
const CHANGED: &str = "refusal changed the state";
const POISONED: &str = "refusal poisoned the state";
const UNREADABLE: &str = "state unreadable after an accepted call";
const ACCEPTED_INVALID: &str = "accepted a call the model cannot apply";
const ACCEPTED_NON_FINITE: &str = "accepted a non-finite operand";
const REFUSED_FINITE: &str = "refused finite operands as non-finite";
const INACCURATE: &str = "disagrees with a refactorisation";

/// One defect: its class and what was seen.
#[derive(Clone, Debug)]
struct Defect {
    class: &'static str,
    /// The call that showed it, with the kind of error it returned ("slide (RankDeficient)").
    call: String,
    detail: String,
}

fn defect(class: &'static str, detail: String) -> Option<Defect> {
    Some(Defect {
        class,
        call: String::new(),
        detail,
    })
}

/// What a run saw.
#[derive(Default)]
struct Report {
    calls: usize,
    accepted: usize,
    /// "verb: error kind" → count.
    refusals: BTreeMap<String, usize>,
    /// "class: verb" → count.
    defects_by_verb: BTreeMap<String, usize>,
    defects: BTreeMap<&'static str, usize>,
    checks: usize,
    checks_skipped: usize,
    /// Largest measured error over its bound at the checks that ran.
    worst_ratio: f64,
    repros: Vec<String>,
    /// Reproductions already printed, per (stream, class).
    printed: BTreeMap<(String, &'static str), usize>,
}

impl Report {
    fn merge(&mut self, o: Report) {
        self.calls += o.calls;
        self.accepted += o.accepted;
        for (k, v) in o.refusals {
            *self.refusals.entry(k).or_default() += v;
        }
        for (k, v) in o.defects {
            *self.defects.entry(k).or_default() += v;
        }
        for (k, v) in o.defects_by_verb {
            *self.defects_by_verb.entry(k).or_default() += v;
        }
        self.checks += o.checks;
        self.checks_skipped += o.checks_skipped;
        self.worst_ratio = self.worst_ratio.max(o.worst_ratio);
        self.repros.extend(o.repros);
    }

    fn print(&self, what: &str, seed: u64, secs: f64) {
        println!(
            "random calls on {what}: seed {seed:#x}, {} calls in {secs:.1} s ({} accepted, {} \
             refused), {} accuracy checks ({} skipped after extreme calls), worst error/bound {:.3}",
            self.calls,
            self.accepted,
            self.calls - self.accepted,
            self.checks,
            self.checks_skipped,
            self.worst_ratio
        );
        println!("refusals by verb and kind:");
        for (k, v) in &self.refusals {
            println!("  {v:>8}  {k}");
        }
        println!("defects:");
        for class in [
            PANIC,
            CHANGED,
            POISONED,
            UNREADABLE,
            ACCEPTED_INVALID,
            ACCEPTED_NON_FINITE,
            REFUSED_FINITE,
            INACCURATE,
        ] {
            println!("  {:>8}  {class}", self.defects.get(class).unwrap_or(&0));
        }
        for (k, v) in &self.defects_by_verb {
            println!("  {v:>8}  {k}");
        }
        for r in &self.repros {
            println!("{r}");
        }
    }
}

/// The name of an error's kind.
fn error_kind(e: &Error) -> &'static str {
    match e {
        Error::Shape { .. } => "Shape",
        Error::OutOfRange { .. } => "OutOfRange",
        Error::EmptyBlock { .. } => "EmptyBlock",
        Error::Underdetermined { .. } => "Underdetermined",
        Error::NonFinite { .. } => "NonFinite",
        Error::NeedsQ { .. } => "NeedsQ",
        Error::NeedsData { .. } => "NeedsData",
        Error::DowndateFailed { .. } => "DowndateFailed",
        Error::RankDeficient { .. } => "RankDeficient",
        Error::InvalidParam { .. } => "InvalidParam",
        Error::OutOfMemory { .. } => "OutOfMemory",
        Error::Poisoned => "Poisoned",
        _ => "other",
    }
}

// ---------------------------------------------------------------------------------------
// Calls
// ---------------------------------------------------------------------------------------

/// A column-major block with leading dimension `ld` ≥ rows; the padding holds NaN, so a
/// backend that reads outside the view sees it.
#[derive(Clone, Debug)]
struct Operand<T> {
    data: Vec<T>,
    rows: usize,
    cols: usize,
    ld: usize,
    /// How it was made, where that matters ("copy of column 3").
    note: Option<String>,
}

impl<T: Scalar> Operand<T> {
    fn from_fn(rows: usize, cols: usize, pad: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let ld = rows.max(1) + pad;
        let mut data = vec![T::from_f64(f64::NAN); ld * cols];
        for j in 0..cols {
            for i in 0..rows {
                data[i + j * ld] = f(i, j);
            }
        }
        Self {
            data,
            rows,
            cols,
            ld,
            note: None,
        }
    }
    fn view(&self) -> MatRef<'_, T> {
        MatRef::new(&self.data, self.rows, self.cols, self.ld).expect("operand view")
    }
    fn entries(&self) -> impl Iterator<Item = f64> + '_ {
        (0..self.cols)
            .flat_map(move |j| (0..self.rows).map(move |i| self.data[i + j * self.ld].to_f64()))
    }
    fn to_faer(&self) -> faer::Mat<f64> {
        faer::Mat::from_fn(self.rows, self.cols, |i, j| {
            self.data[i + j * self.ld].to_f64()
        })
    }
    fn describe(&self) -> String {
        let mut s = format!("{}×{}", self.rows, self.cols);
        if self.ld != self.rows.max(1) {
            s += &format!(" (ld {})", self.ld);
        }
        s += &describe_specials(self.entries(), self.rows);
        if let Some(n) = &self.note {
            s += &format!(" [{n}]");
        }
        s
    }
}

/// Entries that are not ordinary (non-finite, zero, huge or tiny), as "[NaN at (i, j)]".
fn describe_specials(xs: impl Iterator<Item = f64>, rows: usize) -> String {
    let found: Vec<String> = xs
        .enumerate()
        .filter(|(_, x)| is_special(*x))
        .take(3)
        .map(|(k, x)| format!("{x:e} at ({}, {})", k % rows.max(1), k / rows.max(1)))
        .collect();
    if found.is_empty() {
        String::new()
    } else {
        format!(" [{}]", found.join(", "))
    }
}

fn is_special(x: f64) -> bool {
    !x.is_finite() || x == 0.0 || x.abs() > 1e10 || x.abs() < 1e-30
}

/// One call of the API with its arguments.
#[derive(Clone, Debug)]
enum Call<T> {
    InsertCols {
        k0: usize,
        u: Operand<T>,
    },
    InsertCol {
        k0: usize,
        u: Vec<T>,
    },
    DeleteCols {
        k0: usize,
        p: usize,
    },
    DeleteCol {
        k0: usize,
    },
    InsertRows {
        k0: usize,
        u: Operand<T>,
        e: Operand<T>,
    },
    InsertRow {
        k0: usize,
        u: Vec<T>,
        e: Vec<T>,
    },
    DeleteRows {
        k0: usize,
        p: usize,
    },
    DeleteRow {
        k0: usize,
    },
    DeleteRowsWith {
        k0: usize,
        rows: Operand<T>,
        rhs: Operand<T>,
    },
    RankOne {
        u: Vec<T>,
        v: Vec<T>,
    },
    RankK {
        u: Operand<T>,
        v: Operand<T>,
    },
    ReplaceCols {
        k0: usize,
        u: Operand<T>,
    },
    ShiftCol {
        from: usize,
        to: usize,
    },
    Slide {
        rows: Operand<T>,
        rhs: Operand<T>,
        drop: usize,
        forget: f64,
    },
    SetParams(UpdateParams),
    CheckDrift,
    Solve,
}

fn vec_desc<T: Scalar>(v: &[T]) -> String {
    format!(
        "len {}{}",
        v.len(),
        describe_specials(v.iter().map(|x| x.to_f64()), v.len())
    )
}

impl<T: Scalar> Call<T> {
    fn verb(&self) -> &'static str {
        match self {
            Call::InsertCols { .. } => "insert_cols",
            Call::InsertCol { .. } => "insert_col",
            Call::DeleteCols { .. } => "delete_cols",
            Call::DeleteCol { .. } => "delete_col",
            Call::InsertRows { .. } => "insert_rows",
            Call::InsertRow { .. } => "insert_row",
            Call::DeleteRows { .. } => "delete_rows",
            Call::DeleteRow { .. } => "delete_row",
            Call::DeleteRowsWith { .. } => "delete_rows_with",
            Call::RankOne { .. } => "rank_one",
            Call::RankK { .. } => "rank_k",
            Call::ReplaceCols { .. } => "replace_cols",
            Call::ShiftCol { .. } => "shift_col",
            Call::Slide { .. } => "slide",
            Call::SetParams(_) => "set_params",
            Call::CheckDrift => "check_drift",
            Call::Solve => "solve",
        }
    }

    fn describe(&self) -> String {
        let args = match self {
            Call::InsertCols { k0, u } | Call::ReplaceCols { k0, u } => {
                format!("k0={k0}, u={}", u.describe())
            }
            Call::InsertCol { k0, u } => format!("k0={k0}, u={}", vec_desc(u)),
            Call::DeleteCols { k0, p } | Call::DeleteRows { k0, p } => format!("k0={k0}, p={p}"),
            Call::DeleteCol { k0 } | Call::DeleteRow { k0 } => format!("k0={k0}"),
            Call::InsertRows { k0, u, e } => {
                format!("k0={k0}, u={}, e={}", u.describe(), e.describe())
            }
            Call::InsertRow { k0, u, e } => {
                format!("k0={k0}, u={}, e={}", vec_desc(u), vec_desc(e))
            }
            Call::DeleteRowsWith { k0, rows, rhs } => {
                format!("k0={k0}, rows={}, rhs={}", rows.describe(), rhs.describe())
            }
            Call::RankOne { u, v } => format!("u={}, v={}", vec_desc(u), vec_desc(v)),
            Call::RankK { u, v } => format!("u={}, v={}", u.describe(), v.describe()),
            Call::ShiftCol { from, to } => format!("from={from}, to={to}"),
            Call::Slide {
                rows,
                rhs,
                drop,
                forget,
            } => format!(
                "rows={}, rhs={}, drop={drop}, forget={forget:e}",
                rows.describe(),
                rhs.describe()
            ),
            Call::SetParams(p) => format!("{p:?}"),
            Call::CheckDrift | Call::Solve => String::new(),
        };
        format!("{}({args})", self.verb())
    }

    /// Every entry of every operand.
    fn entries(&self) -> Vec<f64> {
        let v = |x: &[T]| x.iter().map(|y| y.to_f64()).collect::<Vec<_>>();
        match self {
            Call::InsertCols { u, .. } | Call::ReplaceCols { u, .. } => u.entries().collect(),
            Call::InsertCol { u, .. } => v(u),
            Call::InsertRows { u, e, .. } => u.entries().chain(e.entries()).collect(),
            Call::InsertRow { u, e, .. } => [v(u), v(e)].concat(),
            Call::DeleteRowsWith { rows, rhs, .. } => rows.entries().chain(rhs.entries()).collect(),
            Call::RankOne { u, v: w } => [v(u), v(w)].concat(),
            Call::RankK { u, v } => u.entries().chain(v.entries()).collect(),
            Call::Slide { rows, rhs, .. } => rows.entries().chain(rhs.entries()).collect(),
            _ => Vec::new(),
        }
    }

    /// An update that the library may refuse or take only under extreme conditions: an
    /// entry that is non-finite, huge or tiny, a copied column, a tiny forgetting factor.
    fn extreme(&self) -> bool {
        let copied = match self {
            Call::InsertCols { u, .. } | Call::ReplaceCols { u, .. } => u.note.is_some(),
            Call::Slide { forget, .. } => *forget < 1e-3,
            _ => false,
        };
        copied || self.entries().iter().any(|x| is_special(*x) && *x != 0.0)
    }

    /// Whether a state changes when the call succeeds (`check_drift` may refresh it).
    fn changes_state(&self) -> bool {
        !matches!(self, Call::SetParams(_) | Call::Solve)
    }
}

/// Runs `call` on the state.
fn apply<T: GpuScalar>(st: &mut Qr<T>, call: &Call<T>) -> Result<(), Error> {
    match call {
        Call::InsertCols { k0, u } => st.insert_cols(*k0, u.view()),
        Call::InsertCol { k0, u } => st.insert_col(*k0, u),
        Call::DeleteCols { k0, p } => st.delete_cols(*k0, *p),
        Call::DeleteCol { k0 } => st.delete_col(*k0),
        Call::InsertRows { k0, u, e } => st.insert_rows(*k0, u.view(), e.view()),
        Call::InsertRow { k0, u, e } => st.insert_row(*k0, u, e),
        Call::DeleteRows { k0, p } => st.delete_rows(*k0, *p),
        Call::DeleteRow { k0 } => st.delete_row(*k0),
        Call::DeleteRowsWith { k0, rows, rhs } => st.delete_rows_with(*k0, rows.view(), rhs.view()),
        Call::RankOne { u, v } => st.rank_one(u, v),
        Call::RankK { u, v } => st.rank_k(u.view(), v.view()),
        Call::ReplaceCols { k0, u } => st.replace_cols(*k0, u.view()),
        Call::ShiftCol { from, to } => st.shift_col(*from, *to),
        Call::Slide {
            rows,
            rhs,
            drop,
            forget,
        } => {
            st.set_params(UpdateParams {
                forget: *forget,
                ..st.params()
            });
            st.slide(rows.view(), rhs.view(), *drop)
        }
        Call::SetParams(p) => {
            st.set_params(UpdateParams {
                forget: st.params().forget,
                ..*p
            });
            Ok(())
        }
        Call::CheckDrift => st.check_drift().map(|_| ()),
        Call::Solve => st.solve().map(|_| ()),
    }
}

// ---------------------------------------------------------------------------------------
// The model: A and b in f64, updated as the accepted calls say
// ---------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Model {
    a: faer::Mat<f64>,
    b: faer::Mat<f64>,
    /// The largest m + n, ‖A‖_F and ‖b‖_F met since the factorisation (slide's stacked
    /// problem included): earlier steps' errors are relative to the matrices of their time,
    /// which row deletions may leave larger than the current ones.
    peak: (usize, f64, f64),
}

/// Rows `keep` of `x`.
fn pick_rows(x: &faer::Mat<f64>, keep: &[usize]) -> faer::Mat<f64> {
    faer::Mat::from_fn(keep.len(), x.ncols(), |i, j| x[(keep[i], j)])
}

/// `x` with `blk`'s rows inserted at row k0.
fn with_rows(x: &faer::Mat<f64>, k0: usize, blk: &faer::Mat<f64>) -> faer::Mat<f64> {
    let p = blk.nrows();
    faer::Mat::from_fn(x.nrows() + p, x.ncols(), |i, j| {
        if i < k0 {
            x[(i, j)]
        } else if i < k0 + p {
            blk[(i - k0, j)]
        } else {
            x[(i - p, j)]
        }
    })
}

fn fits(k0: usize, p: usize, n: usize) -> Result<(), String> {
    match k0.checked_add(p) {
        Some(end) if p > 0 && end <= n => Ok(()),
        _ => Err(format!("block k0={k0}, p={p} does not fit 0..{n}")),
    }
}

fn same(what: &str, got: usize, want: usize) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what} is {got}, the state needs {want}"))
    }
}

impl Model {
    fn new(a: faer::Mat<f64>, b: faer::Mat<f64>) -> Self {
        let mut md = Self {
            a,
            b,
            peak: (0, 0.0, 0.0),
        };
        md.track(md.a.nrows() + md.a.ncols(), md.a.norm_l2(), md.b.norm_l2());
        md
    }

    fn track(&mut self, mn: usize, a: f64, b: f64) {
        let (p, pa, pb) = self.peak;
        self.peak = (p.max(mn), pa.max(a), pb.max(b));
    }

    fn dims(&self) -> (usize, usize, usize) {
        (self.a.nrows(), self.a.ncols(), self.b.ncols())
    }

    fn delete_rows(&mut self, k0: usize, p: usize) -> Result<(), String> {
        let (m, n, _) = self.dims();
        fits(k0, p, m)?;
        if m - p < n {
            return Err(format!("{} rows would be left for {n} columns", m - p));
        }
        let keep: Vec<usize> = (0..m).filter(|&i| i < k0 || i >= k0 + p).collect();
        self.a = pick_rows(&self.a, &keep);
        self.b = pick_rows(&self.b, &keep);
        Ok(())
    }

    fn insert_rows(
        &mut self,
        k0: usize,
        u: &faer::Mat<f64>,
        e: &faer::Mat<f64>,
    ) -> Result<(), String> {
        let (m, n, q) = self.dims();
        let p = u.nrows();
        if p == 0 {
            return Err("no rows".into());
        }
        same("columns of u", u.ncols(), n)?;
        same("rows of e", e.nrows(), p)?;
        same("columns of e", e.ncols(), q)?;
        if k0 > m {
            return Err(format!("row position {k0} past {m}"));
        }
        self.a = with_rows(&self.a, k0, u);
        self.b = with_rows(&self.b, k0, e);
        Ok(())
    }

    /// Columns of A in the order `cols`, with `u`'s columns at `at`.
    fn reorder_cols(&mut self, cols: &[usize], at: usize, u: Option<&faer::Mat<f64>>) {
        let a = &self.a;
        let p = u.map_or(0, |u| u.ncols());
        self.a = faer::Mat::from_fn(a.nrows(), cols.len() + p, |i, j| match u {
            Some(u) if j >= at && j < at + p => u[(i, j - at)],
            _ => a[(i, cols[if j >= at + p { j - p } else { j }])],
        });
    }

    fn slide(
        &mut self,
        rows: &faer::Mat<f64>,
        rhs: &faer::Mat<f64>,
        drop: usize,
        forget: f64,
    ) -> Result<(), String> {
        let (m, n, q) = self.dims();
        let p = rows.nrows();
        if p == 0 && drop == 0 {
            return Err("nothing enters or leaves".into());
        }
        if p > 0 {
            same("columns of rows", rows.ncols(), n)?;
            same("columns of rhs", rhs.ncols(), q)?;
        }
        same("rows of rhs", rhs.nrows(), p)?;
        if !(forget > 0.0 && forget <= 1.0) || drop > m || m + p - drop < n {
            return Err(format!(
                "forget {forget}, drop {drop} of {m} rows, {p} in, n = {n}"
            ));
        }
        let s = forget.sqrt();
        let (ra, rb) = (rows.norm_l2(), rhs.norm_l2());
        self.track(
            m + p + n,
            self.a.norm_l2().hypot(ra),
            self.b.norm_l2().hypot(rb),
        );
        let keep: Vec<usize> = (drop..m).collect();
        let (a, b) = (pick_rows(&self.a, &keep), pick_rows(&self.b, &keep));
        let (a, b) = (
            faer::Mat::from_fn(m - drop, n, |i, j| s * a[(i, j)]),
            faer::Mat::from_fn(m - drop, q, |i, j| s * b[(i, j)]),
        );
        self.a = with_rows(&a, m - drop, rows);
        self.b = with_rows(&b, m - drop, rhs);
        Ok(())
    }

    /// Applies an accepted call; `Err` when it cannot apply (the call was invalid).
    fn apply<T: Scalar>(&mut self, call: &Call<T>) -> Result<(), String> {
        self.apply_call(call)?;
        let (m, n, _) = self.dims();
        self.track(m + n, self.a.norm_l2(), self.b.norm_l2());
        Ok(())
    }

    fn apply_call<T: Scalar>(&mut self, call: &Call<T>) -> Result<(), String> {
        let (m, n, _) = self.dims();
        let col = |v: &[T]| faer::Mat::from_fn(v.len(), 1, |i, _| v[i].to_f64());
        let row = |v: &[T]| faer::Mat::from_fn(1, v.len(), |_, j| v[j].to_f64());
        match call {
            Call::InsertCols { k0, u } => self.insert_cols(*k0, &u.to_faer()),
            Call::InsertCol { k0, u } => self.insert_cols(*k0, &col(u)),
            Call::DeleteCols { k0, p } => self.delete_cols(*k0, *p),
            Call::DeleteCol { k0 } => self.delete_cols(*k0, 1),
            Call::InsertRows { k0, u, e } => self.insert_rows(*k0, &u.to_faer(), &e.to_faer()),
            Call::InsertRow { k0, u, e } => self.insert_rows(*k0, &row(u), &row(e)),
            Call::DeleteRows { k0, p } => self.delete_rows(*k0, *p),
            Call::DeleteRow { k0 } => self.delete_rows(*k0, 1),
            Call::DeleteRowsWith { k0, rows, rhs } => {
                same("columns of rows", rows.cols, n)?;
                same("rows of rhs", rhs.rows, rows.rows)?;
                same("columns of rhs", rhs.cols, self.b.ncols())?;
                self.delete_rows(*k0, rows.rows)
            }
            Call::RankOne { u, v } => self.rank_k(&col(u), &col(v)),
            Call::RankK { u, v } => self.rank_k(&u.to_faer(), &v.to_faer()),
            Call::ReplaceCols { k0, u } => {
                fits(*k0, u.cols, n)?;
                same("rows of u", u.rows, m)?;
                let uf = u.to_faer();
                let a = &self.a;
                self.a = faer::Mat::from_fn(m, n, |i, j| {
                    if j >= *k0 && j < k0 + u.cols {
                        uf[(i, j - k0)]
                    } else {
                        a[(i, j)]
                    }
                });
                Ok(())
            }
            Call::ShiftCol { from, to } => {
                if *from >= n || *to >= n {
                    return Err(format!("shift {from} → {to} with n = {n}"));
                }
                let mut cols: Vec<usize> = (0..n).collect();
                let c = cols.remove(*from);
                cols.insert(*to, c);
                self.reorder_cols(&cols, 0, None);
                Ok(())
            }
            Call::Slide {
                rows,
                rhs,
                drop,
                forget,
            } => self.slide(&rows.to_faer(), &rhs.to_faer(), *drop, *forget),
            Call::SetParams(_) | Call::CheckDrift | Call::Solve => Ok(()),
        }
    }

    fn insert_cols(&mut self, k0: usize, u: &faer::Mat<f64>) -> Result<(), String> {
        let (m, n, _) = self.dims();
        same("rows of u", u.nrows(), m)?;
        if u.ncols() == 0 || k0 > n || n + u.ncols() > m {
            return Err(format!("{} columns at {k0} into {m}×{n}", u.ncols()));
        }
        let cols: Vec<usize> = (0..n).collect();
        self.reorder_cols(&cols, k0, Some(u));
        Ok(())
    }

    fn delete_cols(&mut self, k0: usize, p: usize) -> Result<(), String> {
        let n = self.a.ncols();
        fits(k0, p, n)?;
        let cols: Vec<usize> = (0..n).filter(|&j| j < k0 || j >= k0 + p).collect();
        self.reorder_cols(&cols, 0, None);
        Ok(())
    }

    fn rank_k(&mut self, u: &faer::Mat<f64>, v: &faer::Mat<f64>) -> Result<(), String> {
        let (m, n, _) = self.dims();
        same("rows of u", u.nrows(), m)?;
        same("rows of v", v.nrows(), n)?;
        same("columns of v", v.ncols(), u.ncols())?;
        if u.ncols() == 0 {
            return Err("k = 0".into());
        }
        self.a = &self.a + u * v.transpose();
        Ok(())
    }

    /// Every entry finite and at most 1e10 in magnitude.
    fn moderate(&self) -> bool {
        let ok = |x: &faer::Mat<f64>| {
            (0..x.ncols()).all(|j| (0..x.nrows()).all(|i| x[(i, j)].abs() <= 1e10))
        };
        ok(&self.a) && ok(&self.b)
    }
}

#[path = "random_calls/draw.rs"]
mod draw;
use draw::{random_call, value};

// ---------------------------------------------------------------------------------------
// One state under test
// ---------------------------------------------------------------------------------------

/// The state kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Full,
    Thin,
    NoneKeep,
    NoneBare,
}

const KINDS: [Kind; 4] = [Kind::Full, Kind::Thin, Kind::NoneKeep, Kind::NoneBare];

impl Kind {
    fn policy(self) -> QPolicy {
        match self {
            Kind::Full => QPolicy::Full,
            Kind::Thin => QPolicy::Thin,
            Kind::NoneKeep | Kind::NoneBare => QPolicy::None,
        }
    }
    /// Whether the state reads the rows that leave from its own Q or data.
    fn holds_rows(self) -> bool {
        self != Kind::NoneBare
    }
}

/// Bit patterns of a matrix.
fn bits<T: Scalar>(a: &Mat<T>) -> (usize, usize, Vec<u64>) {
    let v = a.as_slice().iter().map(|x| x.to_f64().to_bits()).collect();
    (a.nrows(), a.ncols(), v)
}

/// Everything observable about a state, bit for bit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Snapshot {
    dims: (usize, usize, usize),
    r: (usize, usize, Vec<u64>),
    d: (usize, usize, Vec<u64>),
    q: Option<(usize, usize, Vec<u64>)>,
}

impl Snapshot {
    fn of<T: GpuScalar>(st: &Qr<T>) -> Result<Self, Error> {
        Ok(Self {
            dims: (st.nrows(), st.ncols(), st.nrhs()),
            r: bits(&st.r()?),
            d: bits(&st.d()?),
            q: st.q()?.as_ref().map(bits),
        })
    }
    /// What differs from `after`.
    fn diff(&self, after: &Self) -> String {
        let mut s = Vec::new();
        if self.dims != after.dims {
            s.push(format!("(m, n, q) {:?} → {:?}", self.dims, after.dims));
        }
        for (what, x, y) in [("R", &self.r, &after.r), ("d", &self.d, &after.d)] {
            if x != y {
                s.push(format!("{what} changed"));
            }
        }
        if self.q != after.q {
            s.push("Q changed".into());
        }
        s.join(", ")
    }
}

/// A state, the model of what it represents, and the calls since it was factorised.
struct Subject<'b, T: GpuScalar> {
    backend: &'b Backend,
    kind: Kind,
    st: Qr<T>,
    md: Model,
    a0: Mat<T>,
    b0: Mat<T>,
    history: Vec<Call<T>>,
    /// Updates accepted since the factorisation.
    updates: usize,
    /// An extreme call was accepted: accuracy is no longer checked.
    tainted: bool,
    snap: Snapshot,
}

impl<'b, T: GpuScalar> Subject<'b, T> {
    fn new(backend: &'b Backend, kind: Kind, a0: Mat<T>, b0: Mat<T>) -> Result<Self, Error> {
        let fp = FactorParams {
            keep_data: kind == Kind::NoneKeep,
            ..FactorParams::default()
        };
        let st = Qr::factorize_on(backend, a0.as_ref(), b0.as_ref(), kind.policy(), fp)?;
        let snap = Snapshot::of(&st)?;
        Ok(Self {
            backend,
            kind,
            md: Model::new(widen(&a0), widen(&b0)),
            st,
            a0,
            b0,
            history: Vec::new(),
            updates: 0,
            tainted: false,
            snap,
        })
    }

    /// A fresh random problem: n ≤ 8 columns, n + 4 ≤ m ≤ 32 rows, 1 to 3 right-hand sides.
    fn random(g: &mut StdRng, backend: &'b Backend, kind: Kind) -> Self {
        loop {
            let n = g.random_range(1..=8);
            let m = g.random_range(n + 4..=32);
            let q = g.random_range(1..=3);
            let a = Mat::from_fn(m, n, |_, _| T::from_f64(value(g)));
            let b = Mat::from_fn(m, q, |_, _| T::from_f64(value(g)));
            match Self::new(backend, kind, a, b) {
                Ok(s) => return s,
                Err(e) => eprintln!("a random problem did not factorise ({e}); drawing another"),
            }
        }
    }

    /// Runs one call and checks what the call must do.
    fn step(&mut self, call: &Call<T>, rep: &mut Report) -> Option<Defect> {
        self.history.push(call.clone());
        rep.calls += 1;
        match catch_unwind(AssertUnwindSafe(|| apply(&mut self.st, call))) {
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                defect(PANIC, format!("{} panicked: {msg}", call.verb()))
            }
            Ok(Err(e)) => {
                let key = format!("{}: {}", call.verb(), error_kind(&e));
                *rep.refusals.entry(key).or_default() += 1;
                let mut d = self.after_refusal(call, &e)?;
                d.call = format!("{} ({})", call.verb(), error_kind(&e));
                Some(d)
            }
            Ok(Ok(())) => {
                rep.accepted += 1;
                self.after_acceptance(call)
            }
        }
    }

    fn after_refusal(&mut self, call: &Call<T>, e: &Error) -> Option<Defect> {
        let now = match Snapshot::of(&self.st) {
            Ok(s) => s,
            Err(e2) => {
                return defect(
                    POISONED,
                    format!("{} refused ({e}); then r/d/q: {e2}", call.verb()),
                )
            }
        };
        if let Err(Error::Poisoned) = self.st.solve() {
            return defect(
                POISONED,
                format!("{} refused ({e}); then solve: poisoned", call.verb()),
            );
        }
        if now != self.snap {
            let diff = self.snap.diff(&now);
            return defect(
                CHANGED,
                format!("{} refused ({e}), yet {diff}", call.verb()),
            );
        }
        // finite operands may still overflow (1e300·1e300 in a rank-k product): only an
        // ordinary call on an ordinary state must not meet a non-finite value
        if matches!(e, Error::NonFinite { .. }) && !self.tainted && !call.extreme() {
            return defect(REFUSED_FINITE, format!("{} refused: {e}", call.verb()));
        }
        None
    }

    fn after_acceptance(&mut self, call: &Call<T>) -> Option<Defect> {
        if !call.changes_state() {
            return None;
        }
        if let Err(why) = self.md.apply(call) {
            return defect(
                ACCEPTED_INVALID,
                format!("{} accepted, but {why}", call.verb()),
            );
        }
        if !matches!(call, Call::CheckDrift) {
            self.updates += 1;
        }
        if call.extreme() || !self.md.moderate() {
            self.tainted = true;
        }
        // a state that reads the leaving rows from its own Q or data only checks the
        // shapes of the rows it is given
        let given_only = matches!(call, Call::DeleteRowsWith { .. }) && self.kind.holds_rows();
        if !given_only && call.entries().iter().any(|x| !x.is_finite()) {
            return defect(ACCEPTED_NON_FINITE, format!("{} accepted", call.verb()));
        }
        match Snapshot::of(&self.st) {
            Ok(s) => self.snap = s,
            Err(e) => {
                return defect(
                    UNREADABLE,
                    format!("{} accepted; then r/d/q: {e}", call.verb()),
                )
            }
        }
        None
    }
}

// ---------------------------------------------------------------------------------------
// Accuracy against a refactorisation of the model
// ---------------------------------------------------------------------------------------

/// Checks a measured error against its bound; keeps the largest ratio.
struct Bounds<'a> {
    worst: f64,
    context: &'a str,
}

impl Bounds<'_> {
    fn check(&mut self, what: &str, err: f64, tol: f64) -> Result<(), String> {
        self.worst = self.worst.max(err / tol);
        if err.is_nan() || err > tol {
            return Err(format!("{what} = {err:e} > {tol:e} ({})", self.context));
        }
        Ok(())
    }
}

fn widen<T: Scalar>(x: &Mat<T>) -> faer::Mat<f64> {
    faer::Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)].to_f64())
}

impl<T: GpuScalar> Subject<'_, T> {
    /// The checks of the module doc. `Ok(None)`: skipped (extreme or ill-conditioned);
    /// `Ok(Some(r))`: passed with the largest error/bound ratio r.
    fn check(&self) -> Result<Option<f64>, String> {
        let (m, n, q) = self.md.dims();
        let dims = (self.st.nrows(), self.st.ncols(), self.st.nrhs());
        if dims != (m, n, q) {
            return Err(format!(
                "(m, n, q) = {dims:?}, the model has {:?}",
                (m, n, q)
            ));
        }
        if self.tainted || n == 0 {
            return Ok(None);
        }
        let s = self
            .md
            .a
            .singular_values()
            .map_err(|e| format!("SVD: {e:?}"))?;
        let sn = s[n - 1];
        let (mn, peak_a, peak_b) = self.md.peak;
        let tau = 10.0 * mn as f64 * T::UNIT_ROUNDOFF * (1 + self.updates) as f64;
        let (da, db) = (tau * peak_a, tau * peak_b);
        if da.is_nan() || sn.is_nan() || da >= 1e-2 * sn {
            return Ok(None);
        }
        let context = format!(
            "m={m}, n={n}, σ_n={sn:.2e}, ‖A‖_peak={peak_a:.2e}, {} updates",
            self.updates
        );
        let mut bd = Bounds {
            worst: 0.0,
            context: &context,
        };
        let err = |e: Error| e.to_string();
        let r = widen(&self.st.r().map_err(err)?);
        let d = widen(&self.st.d().map_err(err)?);
        let rows = if self.kind == Kind::Full { m } else { n };
        if (r.nrows(), r.ncols(), d.nrows(), d.ncols()) != (rows, n, rows, q) {
            return Err(format!(
                "R is {}×{}, d {}×{}",
                r.nrows(),
                r.ncols(),
                d.nrows(),
                d.ncols()
            ));
        }
        if let Some((i, j)) = (0..n)
            .flat_map(|j| (j + 1..rows).map(move |i| (i, j)))
            .find(|&(i, j)| r[(i, j)] != 0.0)
        {
            return Err(format!("R({i}, {j}) = {:e} below the diagonal", r[(i, j)]));
        }
        let (a, b) = (&self.md.a, &self.md.b);
        match self.st.q().map_err(err)? {
            Some(qm) => {
                let qf = widen(&qm);
                let eye = faer::Mat::<f64>::identity(qf.ncols(), qf.ncols());
                bd.check("‖QᵀQ − I‖_F", (qf.transpose() * &qf - eye).norm_l2(), tau)?;
                bd.check("‖A − QR‖_F", (a - &qf * &r).norm_l2(), da)?;
                let e_d = if self.kind == Kind::Full {
                    (&qf * &d - b).norm_l2()
                } else {
                    (&d - qf.transpose() * b).norm_l2()
                };
                bd.check("‖d − Qᵀb‖_F", e_d, db)?;
            }
            None => {
                let gram = (r.transpose() * &r - a.transpose() * a).norm_l2();
                bd.check("‖RᵀR − AᵀA‖_F", gram, 2.0 * da * peak_a)?;
                let rd = (r.transpose() * &d - a.transpose() * b).norm_l2();
                bd.check("‖Rᵀd − Aᵀb‖_F", rd, 2.0 * (da * peak_b).max(db * peak_a))?;
            }
        }
        let sol = self.st.solve().map_err(err)?;
        let x_ref = a.qr().solve_lstsq(b);
        let res_ref = b - a * &x_ref;
        for k in 0..q {
            let col = |x: &faer::Mat<f64>, rows: usize| {
                (0..rows).map(|i| x[(i, k)].powi(2)).sum::<f64>().sqrt()
            };
            let (xn, rn) = (col(&x_ref, n), col(&res_ref, m));
            let dx = (0..n)
                .map(|i| (sol.x[(i, k)].to_f64() - x_ref[(i, k)]).powi(2))
                .sum::<f64>()
                .sqrt();
            let x_tol = 2.0 * ((da * xn + db) / sn + da * rn / (sn * sn));
            bd.check("‖x − x_ref‖", dx, x_tol)?;
            let rho = sol.residual_norms[k];
            let mut res_tol = 2.0 * (da * xn + db);
            if self.st.q().map_err(err)?.is_none() {
                // An R-only state carries ρ² and downdates it (ρ′² = ρ² − ‖e‖²): its error
                // is one in ρ², |ρ′² − ρ_ref²| ≤ 2·(ΔA·‖x‖ + Δb)·‖b‖, so
                // |ρ′ − ρ_ref| ≤ 2·(ΔA·‖x‖ + Δb)·‖b‖/(ρ′ + ρ_ref).
                res_tol = res_tol.max(2.0 * (da * xn + db) * peak_b / (rho + rn));
            }
            bd.check("|ρ − ρ_ref|", (rho - rn).abs(), res_tol)?;
        }
        Ok(Some(bd.worst))
    }
}

// ---------------------------------------------------------------------------------------
// Reproduction: the shortest call sequence found that still shows the defect
// ---------------------------------------------------------------------------------------

/// Whether replaying `calls` on a fresh state of (a0, b0) shows a defect of `class`.
fn reproduces<T: GpuScalar>(
    backend: &Backend,
    kind: Kind,
    a0: &Mat<T>,
    b0: &Mat<T>,
    calls: &[Call<T>],
    class: &str,
) -> bool {
    let Ok(mut s) = Subject::new(backend, kind, a0.clone(), b0.clone()) else {
        return false;
    };
    let mut scratch = Report::default();
    for c in calls {
        if let Some(d) = s.step(c, &mut scratch) {
            return d.class == class;
        }
    }
    class == INACCURATE && s.check().is_err()
}

/// The failing call alone (or after the update options in force), on a fresh factorisation
/// of the A and b held just before it, when that shows the defect too.
fn one_call<T: GpuScalar>(s: &Subject<'_, T>, class: &str) -> Option<Vec<Call<T>>> {
    let last = s.history.last()?.clone();
    if class == INACCURATE || matches!(last, Call::CheckDrift) {
        return None;
    }
    let narrow =
        |x: &faer::Mat<f64>| Mat::from_fn(x.nrows(), x.ncols(), |i, j| T::from_f64(x[(i, j)]));
    let (a, b) = (narrow(&s.md.a), narrow(&s.md.b));
    let alone = vec![last.clone()];
    let with_params = vec![Call::SetParams(s.st.params()), last];
    [alone, with_params]
        .into_iter()
        .find(|calls| reproduces(s.backend, s.kind, &a, &b, calls, class))
}

/// Drops calls one at a time while the defect still shows.
fn shrink<T: GpuScalar>(s: &Subject<'_, T>, class: &str) -> Vec<Call<T>> {
    let mut calls = s.history.clone();
    let mut replayed = 0;
    let mut i = calls.len();
    while i > 0 && replayed < SHRINK_CALLS {
        i -= 1;
        let mut fewer = calls.clone();
        fewer.remove(i);
        replayed += fewer.len();
        if reproduces(s.backend, s.kind, &s.a0, &s.b0, &fewer, class) {
            calls = fewer;
        }
        i = i.min(calls.len());
    }
    calls
}

// ---------------------------------------------------------------------------------------
// Streams: one (backend, type, kind) each
// ---------------------------------------------------------------------------------------

/// What a stream needs to know.
#[derive(Clone, Debug)]
struct Plan {
    label: String,
    seed: u64,
    calls: usize,
    only_epoch: Option<usize>,
}

/// SplitMix64: one seed per (seed, stream, epoch).
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn epoch_rng(plan: &Plan, epoch: usize) -> StdRng {
    let h = plan
        .label
        .bytes()
        .fold(plan.seed, |h, c| mix(h ^ u64::from(c)));
    StdRng::seed_from_u64(mix(h ^ epoch as u64))
}

/// Records a defect: counts it, prints a shortened reproduction (a few per class), and
/// starts the stream on a fresh problem.
fn record<'b, T: GpuScalar>(
    plan: &Plan,
    epoch: usize,
    s: &mut Subject<'b, T>,
    d: Defect,
    g: &mut StdRng,
    rep: &mut Report,
) {
    *rep.defects.entry(d.class).or_default() += 1;
    let call = match (d.class, s.history.last()) {
        _ if !d.call.is_empty() => d.call.clone(),
        (INACCURATE, _) | (_, None) => "the calls before a check".into(),
        (_, Some(c)) => c.verb().into(),
    };
    *rep.defects_by_verb
        .entry(format!("{}: {call}", d.class))
        .or_default() += 1;
    let shown = rep
        .printed
        .entry((plan.label.clone(), d.class))
        .or_default();
    if *shown < REPROS_PER_CLASS {
        *shown += 1;
        let mut text = format!(
            "DEFECT [{}] {}: {}\n  replay: CUQR_RANDOM_SEED={:#x} CUQR_RANDOM_STREAM={} CUQR_RANDOM_EPOCH={epoch}",
            plan.label, d.class, d.detail, plan.seed, plan.label
        );
        let (a0, calls) = match one_call(s, d.class) {
            Some(c) => (s.md.a.clone(), c),
            None => (widen(&s.a0), shrink(s, d.class)),
        };
        text += &format!(
            "\n  from a fresh factorisation of a {}×{} A ({} right-hand sides), {} calls reproduce it:",
            a0.nrows(),
            a0.ncols(),
            s.md.b.ncols(),
            calls.len()
        );
        for c in &calls {
            text += &format!("\n    {}", c.describe());
        }
        rep.repros.push(text);
    }
    *s = Subject::random(g, s.backend, s.kind);
}

/// Runs one stream's epochs.
fn run_stream<T: GpuScalar>(backend: &Backend, kind: Kind, plan: &Plan) -> Report {
    let mut rep = Report::default();
    let epochs = plan.calls.div_ceil(EPOCH);
    for epoch in 0..epochs {
        if plan.only_epoch.is_some_and(|e| e != epoch) {
            continue;
        }
        let mut g = epoch_rng(plan, epoch);
        let mut s = Subject::<T>::random(&mut g, backend, kind);
        let len = EPOCH.min(plan.calls - epoch * EPOCH);
        for i in 1..=len {
            if s.md.a.ncols() == 0 {
                s = Subject::random(&mut g, backend, kind);
            }
            let call = random_call::<T>(&mut g, &s.md);
            if let Some(d) = s.step(&call, &mut rep) {
                record(plan, epoch, &mut s, d, &mut g, &mut rep);
                continue;
            }
            if i % CHECK_EVERY == 0 || i == len {
                rep.checks += 1;
                match s.check() {
                    Ok(Some(r)) => rep.worst_ratio = rep.worst_ratio.max(r),
                    Ok(None) => {
                        rep.checks_skipped += 1;
                        s = Subject::random(&mut g, backend, kind);
                    }
                    Err(detail) => record(
                        plan,
                        epoch,
                        &mut s,
                        Defect {
                            class: INACCURATE,
                            call: String::new(),
                            detail,
                        },
                        &mut g,
                        &mut rep,
                    ),
                }
            }
        }
    }
    rep
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name}={v}: not a number"))
    })
}

fn env_seed() -> u64 {
    match std::env::var("CUQR_RANDOM_SEED") {
        Ok(v) => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|_| panic!("CUQR_RANDOM_SEED={v}: not a number"))
        }
        Err(_) => DEFAULT_SEED,
    }
}

/// The eight streams (type × kind) of a backend, filtered by `CUQR_RANDOM_STREAM`.
fn plans(backend: &str, seed: u64) -> Vec<(Plan, Kind, bool)> {
    let total = env_usize("CUQR_RANDOM_CALLS").unwrap_or(DEFAULT_CALLS);
    let only_epoch = env_usize("CUQR_RANDOM_EPOCH");
    let filter = std::env::var("CUQR_RANDOM_STREAM").unwrap_or_default();
    let mut out = Vec::new();
    for f64_type in [true, false] {
        for kind in KINDS {
            let ty = if f64_type { "f64" } else { "f32" };
            let label = format!("{backend}/{ty}/{kind:?}");
            if label.contains(&filter) {
                let plan = Plan {
                    label,
                    seed,
                    calls: total.div_ceil(8),
                    only_epoch,
                };
                out.push((plan, kind, f64_type));
            }
        }
    }
    out
}

fn run_plan(backend: &Backend, (plan, kind, f64_type): &(Plan, Kind, bool)) -> Report {
    if *f64_type {
        run_stream::<f64>(backend, *kind, plan)
    } else {
        run_stream::<f32>(backend, *kind, plan)
    }
}

/// Runs every stream, fails on any defect.
fn run_backend(
    what: &str,
    plans: Vec<(Plan, Kind, bool)>,
    run: impl Fn(&[(Plan, Kind, bool)]) -> Report,
    seed: u64,
) {
    let t0 = std::time::Instant::now();
    let rep = run(&plans);
    rep.print(what, seed, t0.elapsed().as_secs_f64());
    let bad: usize = rep.defects.values().sum();
    assert_eq!(
        bad, 0,
        "{bad} defects on {what} (seed {seed:#x}); see the reproductions above"
    );
}

#[test]
fn random_calls_cpu() {
    let seed = env_seed();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(8);
    run_backend(
        "the CPU",
        plans("cpu", seed),
        |plans| {
            let next = AtomicUsize::new(0);
            let total = Mutex::new(Report::default());
            std::thread::scope(|sc| {
                for _ in 0..workers {
                    sc.spawn(|| {
                        let backend = Device::Cpu.open().expect("the CPU opens");
                        while let Some(p) = plans.get(next.fetch_add(1, Ordering::Relaxed)) {
                            let rep = run_plan(&backend, p);
                            total.lock().unwrap().merge(rep);
                        }
                    });
                }
            });
            total.into_inner().unwrap()
        },
        seed,
    );
}

#[test]
fn random_calls_gpu() {
    let backend = match Device::Gpu(0).open() {
        Ok(b) => b,
        Err(e) if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("CUQR_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let seed = env_seed();
    run_backend(
        &format!("GPU 0 ({backend})"),
        plans("gpu", seed),
        |plans| {
            let mut total = Report::default();
            for p in plans {
                total.merge(run_plan(&backend, p));
            }
            total
        },
        seed,
    );
}
