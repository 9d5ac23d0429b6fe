//! `_BatchState`: B least-squares problems of one shape in one [`BatchQr`] (CPU, float32
//! or float64) behind `cuqr.QR` given a 3-D A. Positions are shared; data come as
//! (B, rows, cols) NumPy arrays, read in place when C-contiguous (else copied once) with
//! the interpreter lock released for the work.
//!
//! Calls on one batch are serialised as on a single state (`state.rs`): each has the batch
//! to itself from start to end, in the order the calls arrive, and one that waits does so
//! with the interpreter lock released. A call made from inside one of the same batch's
//! calls is refused instead of waiting for itself.
//!
//! An update returns `(applied, refused)`: whether the accepted problems were updated and
//! each refusing problem's (index, message). A shape-preserving update applies to every
//! problem but the refusing ones; a shape-changing one (and factorisation) applies to all
//! or none. An error that the whole batch shares (a shape, a position) raises instead and
//! changes nothing. The Python layer turns refusals into `cuqr.BatchError`.

use cuqr::batch::{BatchQr, BatchRef, BatchReport};
use cuqr::{FactorParams, Mat, QPolicy, QrUpdate, UpdateParams};
use numpy::ndarray::{Array2, Array3};
use numpy::{PyArray2, PyArray3};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::batch::{borrow_batch, stack};
use crate::convert::Real;
use crate::error::to_py;
use crate::state::policy_of;
use crate::turns::Serialised;

enum Inner {
    F32(BatchQr<f32>),
    F64(BatchQr<f64>),
}

/// Runs `$body` with `$s` the batch (`&mut BatchQr<$T>`) of either precision.
macro_rules! with_batch {
    ($held:expr, $s:ident, $T:ident => $body:expr) => {
        match &mut *$held {
            Inner::F32($s) => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            Inner::F64($s) => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
        }
    };
}

/// Per-problem refusals as Python receives them: (problem index, message).
type Refused = Vec<(usize, String)>;

/// B factorisations of one shape on the CPU (see the Python `cuqr.QR` class given a 3-D
/// A, which wraps it). Calls on one batch from several threads are serialised.
#[pyclass(module = "cuqr._cuqr", name = "_BatchState", frozen)]
pub struct BatchState {
    /// The calls' value, served in turn.
    inner: Serialised<Inner>,
    has_rhs: bool,
}

/// One argument's per-problem data: the caller's C-ordered array read in place, or a copy
/// of any other layout, problem after problem, each column-major.
enum Data<'a, T> {
    Borrowed(&'a [T]),
    Owned(Vec<T>),
}

/// A (B, rows, cols) argument ready to lend as a [`BatchRef`].
struct Arg<'a, T> {
    data: Data<'a, T>,
    dims: (usize, usize, usize),
}

impl<T: Real> Arg<'_, T> {
    fn view(&self) -> cuqr::Result<BatchRef<'_, T>> {
        let (b, r, c) = self.dims;
        match &self.data {
            Data::Borrowed(s) => BatchRef::row_major(s, b, r, c),
            Data::Owned(v) => BatchRef::col_major(v, b, r, c),
        }
    }
}

/// Reads `obj`, a (B, rows, cols) NumPy array of `T`, and runs `f` on it: in place when it
/// is C-contiguous, else on a copy.
fn with_arg<T: Real, R>(
    obj: &Bound<'_, PyAny>,
    what: &str,
    f: impl FnOnce(Arg<'_, T>) -> PyResult<R>,
) -> PyResult<R> {
    let a = borrow_batch::<T>(obj, what)?;
    let v = a.as_array();
    let dims = v.dim();
    if let Some(s) = v.as_slice() {
        return f(Arg {
            data: Data::Borrowed(s),
            dims,
        });
    }
    // problem after problem, each column-major
    let data: Vec<T> = v.permuted_axes([0, 2, 1]).iter().copied().collect();
    f(Arg {
        data: Data::Owned(data),
        dims,
    })
}

/// Zeros for right-hand sides not given: B×p×q.
fn zeros<T: Real>(b: usize, p: usize, q: usize) -> Arg<'static, T> {
    Arg {
        data: Data::Owned(vec![T::from_f64(0.0); b * p * q]),
        dims: (b, p, q),
    }
}

/// A Python index (negative: counted back from `limit`) as a position; the batch checks
/// the upper bound.
fn index(k: isize, limit: usize, name: &str) -> PyResult<usize> {
    let pos = if k < 0 {
        limit.checked_sub(k.unsigned_abs())
    } else {
        Some(k.unsigned_abs())
    };
    pos.ok_or_else(|| PyValueError::new_err(format!("'{name}' is out of bounds")))
}

/// An update's outcome for Python: `(applied, refused)`. A whole batch's refusal of a
/// shape-changing update is `(false, refusals)`; other errors raise.
fn outcome(r: cuqr::Result<BatchReport>) -> PyResult<(bool, Refused)> {
    match r {
        Ok(rep) => Ok((
            true,
            rep.refused().map(|(i, e)| (i, e.to_string())).collect(),
        )),
        Err(cuqr::Error::BatchRefused { problems, .. }) => Ok((false, refusals(problems))),
        Err(e) => Err(to_py(e)),
    }
}

fn refusals(problems: Vec<(usize, cuqr::Error)>) -> Refused {
    problems
        .into_iter()
        .map(|(i, e)| (i, e.to_string()))
        .collect()
}

/// Each problem's matrix stacked as a (B, rows, cols) array (each problem column-major).
fn stacked<'py, T: Real>(
    py: Python<'py>,
    b: usize,
    mats: impl Iterator<Item = Mat<T>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut shape = (0, 0);
    let mut data = Vec::new();
    for m in mats {
        shape = (m.nrows(), m.ncols());
        data.extend_from_slice(m.as_slice());
    }
    stack(py, shape, data, b)
}

fn policy_name(p: QPolicy) -> &'static str {
    match p {
        QPolicy::Full => "full",
        QPolicy::Thin => "thin",
        _ => "none",
    }
}

fn factorize_t<T: Real>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: Option<&Bound<'_, PyAny>>,
    policy: QPolicy,
    keep_data: bool,
) -> PyResult<Result<BatchQr<T>, Refused>> {
    let params = FactorParams {
        keep_data,
        ..FactorParams::default()
    };
    with_arg::<T, _>(a, "A", |a| {
        let (nb, m, _) = a.dims;
        let run = |bv: &Arg<'_, T>| {
            let r = py.detach(|| BatchQr::factorize(a.view()?, bv.view()?, policy, params));
            match r {
                Ok(s) => Ok(Ok(s)),
                Err(cuqr::Error::BatchRefused { problems, .. }) => Ok(Err(refusals(problems))),
                Err(e) => Err(to_py(e)),
            }
        };
        match b {
            Some(b) => with_arg::<T, _>(b, "b", |bv| run(&bv)),
            None => run(&zeros(nb, m, 1)),
        }
    })
}

/// Dispatches on the dtype name.
macro_rules! by_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            "float32" => {
                type $T = f32;
                $body
            }
            "float64" => {
                type $T = f64;
                $body
            }
            other => Err(PyValueError::new_err(format!(
                "cuqr supports float32 and float64, not {other}"
            ))),
        }
    };
}

impl BatchState {
    fn wrap(inner: Inner, has_rhs: bool) -> Self {
        Self {
            inner: Serialised::new(inner, "batched factorisation"),
            has_rhs,
        }
    }
}

/// (B, m, n, q) of a batch.
fn dims(s: &Inner) -> (usize, usize, usize, usize) {
    match s {
        Inner::F32(s) => (s.batch(), s.nrows(), s.ncols(), s.nrhs()),
        Inner::F64(s) => (s.batch(), s.nrows(), s.ncols(), s.nrhs()),
    }
}

#[pymethods]
impl BatchState {
    /// Factorises every problem: A (B, m, n) with right-hand sides b (B, m, k, or none).
    /// Returns (the batch, []) or (None, refusals) when problems refused (then none is
    /// kept).
    #[staticmethod]
    #[pyo3(signature = (a, b, policy, keep_data, dtype))]
    fn factorize(
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        b: Option<&Bound<'_, PyAny>>,
        policy: &str,
        keep_data: bool,
        dtype: &str,
    ) -> PyResult<(Option<Self>, Refused)> {
        let policy = policy_of(policy)?;
        let has_rhs = b.is_some();
        let built = by_dtype!(dtype, T => factorize_t::<T>(py, a, b, policy, keep_data).map(|r| r.map(|s| {
            let inner: Inner = From::from(s);
            inner
        })))?;
        Ok(match built {
            Ok(inner) => (Some(Self::wrap(inner, has_rhs)), Vec::new()),
            Err(refused) => (None, refused),
        })
    }

    /// Inserts each problem's columns U (B, m, p) before column k (negative: counted back
    /// from n + 1).
    fn insert_cols(
        &self,
        py: Python<'_>,
        k: isize,
        u: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        let k = index(k, dims(&st).2 + 1, "k")?;
        with_batch!(st, s, T => with_arg::<T, _>(u, "U", |u| {
            outcome(py.detach(|| s.insert_cols(k, u.view()?)))
        }))
    }

    /// Deletes columns k..k+p of every A (k negative: counted back from n).
    fn delete_cols(&self, py: Python<'_>, k: isize, p: usize) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        let k = index(k, dims(&st).2, "k")?;
        with_batch!(st, s, T => outcome(py.detach(|| s.delete_cols(k, p))))
    }

    /// Inserts each problem's rows U (B, p, n) with right-hand sides e (B, p, k; zeros when
    /// none) before row k (negative: counted back from m + 1).
    #[pyo3(signature = (k, u, e=None))]
    fn insert_rows(
        &self,
        py: Python<'_>,
        k: isize,
        u: &Bound<'_, PyAny>,
        e: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        let (nb, m, _, q) = dims(&st);
        let k = index(k, m + 1, "k")?;
        with_batch!(st, s, T => with_arg::<T, _>(u, "U", |u| {
            let mut run = |e: &Arg<'_, T>| outcome(py.detach(|| s.insert_rows(k, u.view()?, e.view()?)));
            match e {
                Some(e) => with_arg::<T, _>(e, "e", |e| run(&e)),
                None => run(&zeros(nb, u.dims.1, q)),
            }
        }))
    }

    /// Deletes rows k..k+p of every A (k negative: counted back from m).
    fn delete_rows(&self, py: Python<'_>, k: isize, p: usize) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        let k = index(k, dims(&st).1, "k")?;
        with_batch!(st, s, T => outcome(py.detach(|| s.delete_rows(k, p))))
    }

    /// Deletes rows k..k+p given their contents: rows (B, p, n) and rhs (B, p, k; zeros
    /// when none), for an R-only batch without kept data.
    #[pyo3(signature = (k, rows, rhs=None))]
    fn delete_rows_with(
        &self,
        py: Python<'_>,
        k: isize,
        rows: &Bound<'_, PyAny>,
        rhs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        let (nb, m, _, q) = dims(&st);
        let k = index(k, m, "k")?;
        with_batch!(st, s, T => with_arg::<T, _>(rows, "rows", |rows| {
            let mut run = |e: &Arg<'_, T>| {
                outcome(py.detach(|| s.delete_rows_with(k, rows.view()?, e.view()?)))
            };
            match rhs {
                Some(e) => with_arg::<T, _>(e, "rhs", |e| run(&e)),
                None => run(&zeros(nb, rows.dims.1, q)),
            }
        }))
    }

    /// A ← A + u vᵀ per problem (u (B, m, 1), v (B, n, 1)).
    fn rank_one(
        &self,
        py: Python<'_>,
        u: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        with_batch!(st, s, T => with_arg::<T, _>(u, "u", |u| with_arg::<T, _>(v, "v", |v| {
            outcome(py.detach(|| s.rank_one(u.view()?, v.view()?)))
        })))
    }

    /// A ← A + U Vᵀ per problem (U (B, m, k), V (B, n, k)).
    fn rank_k(
        &self,
        py: Python<'_>,
        u: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        with_batch!(st, s, T => with_arg::<T, _>(u, "U", |u| with_arg::<T, _>(v, "V", |v| {
            outcome(py.detach(|| s.rank_k(u.view()?, v.view()?)))
        })))
    }

    /// Replaces columns k..k+p of each A by its U (B, m, p; k negative: counted back from
    /// n).
    fn replace_cols(
        &self,
        py: Python<'_>,
        k: isize,
        u: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        let k = index(k, dims(&st).2, "k")?;
        with_batch!(st, s, T => with_arg::<T, _>(u, "U", |u| {
            outcome(py.detach(|| s.replace_cols(k, u.view()?)))
        }))
    }

    /// Moves column `source` of every A to position `target` (negative: counted back from
    /// n).
    fn shift_col(&self, py: Python<'_>, source: isize, target: isize) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        let n = dims(&st).2;
        let (source, target) = (index(source, n, "source")?, index(target, n, "target")?);
        with_batch!(st, s, T => outcome(py.detach(|| s.shift_col(source, target))))
    }

    /// One window step per problem: rows (B, p, n) with rhs (B, p, k; zeros when none)
    /// enter at the bottom, the `drop` oldest rows leave; `forget` (λ) sets every
    /// problem's forgetting factor from now on (unchanged when the call applies to no
    /// problem).
    #[pyo3(signature = (rows, rhs=None, drop=0, forget=None))]
    fn slide(
        &self,
        py: Python<'_>,
        rows: &Bound<'_, PyAny>,
        rhs: Option<&Bound<'_, PyAny>>,
        drop: usize,
        forget: Option<f64>,
    ) -> PyResult<(bool, Refused)> {
        let mut st = self.inner.lock(py)?;
        let (nb, _, _, q) = dims(&st);
        with_batch!(st, s, T => {
            let before = s.params();
            if let Some(l) = forget {
                s.set_params(UpdateParams { forget: l, ..before });
            }
            let out = with_arg::<T, _>(rows, "rows", |rows| {
                let mut run = |e: &Arg<'_, T>| {
                    outcome(py.detach(|| s.slide(rows.view()?, e.view()?, drop)))
                };
                match rhs {
                    Some(e) => with_arg::<T, _>(e, "rhs", |e| run(&e)),
                    None => run(&zeros(nb, rows.dims.1, q)),
                }
            });
            if !matches!(out, Ok((true, _))) {
                s.set_params(before);
            }
            out
        })
    }

    /// The least-squares solutions x (B, n, k), the residual norms (B, k), and each
    /// problem whose solve failed (its x and norms NaN).
    #[allow(clippy::type_complexity)]
    fn solve<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Refused)> {
        if !self.has_rhs {
            return Err(PyValueError::new_err(
                "this factorisation has no right-hand side: pass b when building it",
            ));
        }
        let mut st = self.inner.lock(py)?;
        with_batch!(st, s, T => {
            let s: &BatchQr<T> = s;
            let sol = py.detach(|| s.solve()).map_err(to_py)?;
            let nb = sol.status.len();
            let failed = sol
                .status
                .into_iter()
                .enumerate()
                .filter_map(|(i, r)| r.err().map(|e| (i, e.to_string())))
                .collect();
            let x = Array3::from_shape_vec((nb, sol.n, sol.q), sol.x)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            let res = Array2::from_shape_vec((nb, sol.q), sol.residual_norms)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
            Ok((
                PyArray3::from_owned_array(py, x).into_any(),
                PyArray2::from_owned_array(py, res).into_any(),
                failed,
            ))
        })
    }

    /// R of every problem, (B, m, n) for the full kind, (B, n, n) otherwise.
    fn r<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut st = self.inner.lock(py)?;
        with_batch!(st, s, T => {
            stacked(py, s.batch(), s.problems().iter().map(|p| p.r_ref().clone()))
        })
    }

    /// Q (B, m, m), Q₁ (B, m, n), or None.
    fn q<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let mut st = self.inner.lock(py)?;
        with_batch!(st, s, T => {
            if s.q_policy() == QPolicy::None {
                return Ok(None);
            }
            let qs = s.problems().iter().map(|p| p.q().map(|q| q.unwrap_or_else(|| Mat::zeros(0, 0))));
            let qs = qs.collect::<cuqr::Result<Vec<_>>>().map_err(to_py)?;
            stacked(py, s.batch(), qs.into_iter()).map(Some)
        })
    }

    /// d = Qᵀb of every problem: (B, m, k) for the full kind, (B, n, k) otherwise.
    fn d<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut st = self.inner.lock(py)?;
        with_batch!(st, s, T => {
            stacked(py, s.batch(), s.problems().iter().map(|p| p.d_ref().clone()))
        })
    }

    /// (B, m, n, k): problems, rows, columns, right-hand sides.
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(usize, usize, usize, usize)> {
        let st = self.inner.lock(py)?;
        Ok(dims(&st))
    }

    /// "full", "thin" or "none".
    #[getter]
    fn policy(&self, py: Python<'_>) -> PyResult<&'static str> {
        let st = self.inner.lock(py)?;
        Ok(match &*st {
            Inner::F32(s) => policy_name(s.q_policy()),
            Inner::F64(s) => policy_name(s.q_policy()),
        })
    }

    /// "float32" or "float64".
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<&'static str> {
        let st = self.inner.lock(py)?;
        Ok(match &*st {
            Inner::F32(_) => "float32",
            Inner::F64(_) => "float64",
        })
    }

    /// Whether the batch was built with right-hand sides.
    #[getter]
    fn has_rhs(&self) -> bool {
        self.has_rhs
    }

    /// The forgetting factor λ of `slide` (shared by the problems).
    #[getter]
    fn forget(&self, py: Python<'_>) -> PyResult<f64> {
        let mut st = self.inner.lock(py)?;
        Ok(with_batch!(st, s, T => s.params().forget))
    }

    /// Each problem's drift record (docs: drift control).
    fn drift<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let mut st = self.inner.lock(py)?;
        let all = with_batch!(st, s, T => s.drift());
        all.iter().map(|r| drift_dict(py, r)).collect()
    }

    /// Measures every problem's drift now (refreshing those past the threshold): each
    /// problem's record, or its error message where its refresh failed.
    fn check_drift<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let mut st = self.inner.lock(py)?;
        let all = with_batch!(st, s, T => py.detach(|| s.check_drift()));
        all.into_iter()
            .map(|r| match r {
                Ok(r) => drift_dict(py, &r).map(|d| d.into_any()),
                Err(e) => Ok(e.to_string().into_pyobject(py)?.into_any()),
            })
            .collect()
    }
}

fn drift_dict<'py>(py: Python<'py>, r: &cuqr::DriftReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("estimate", r.estimate)?;
    d.set_item("checks", r.checks)?;
    d.set_item("refreshes", r.refreshes)?;
    d.set_item("since_check", r.since_check)?;
    Ok(d)
}

impl From<BatchQr<f32>> for Inner {
    fn from(s: BatchQr<f32>) -> Self {
        Inner::F32(s)
    }
}
impl From<BatchQr<f64>> for Inner {
    fn from(s: BatchQr<f64>) -> Self {
        Inner::F64(s)
    }
}
