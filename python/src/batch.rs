//! Batches of the SciPy-style updates (`cuqr.qr_update`, `qr_insert`, `qr_delete` and
//! `cholupdate` with leading batch dimensions) on NumPy arrays, in one call: the problems
//! are read while the interpreter lock is held, then updated with it released, in
//! parallel over the CPU backend's threads, each by the same single-problem code as an
//! unbatched call.
//!
//! The Python layer has checked everything that a whole batch shares (shapes, dtypes,
//! finiteness) and every problem's index; what is left to fail is numerical, per problem.
//! The first failing problem (in the batch's C order) fails the call, its error naming
//! the batch index; no result is returned then.

use std::sync::atomic::{AtomicUsize, Ordering};

use cuqr::{CpuQr, FactorParams, FactorsParams, Mat, QrUpdate};
use numpy::ndarray::{Array3, Axis, ShapeBuilder};
use numpy::{PyArray3, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::convert::{check_layout, mat_of, Real};
use crate::error::to_py;

/// The update applied to every problem.
#[derive(Clone, Copy)]
enum Op {
    /// A ← A + U Vᵀ (U m×k, V n×k; nothing for k = 0).
    Rank,
    /// The rows U (p×n) inserted before row k.
    InsertRows,
    /// The columns U (m×p) inserted before column k (a factorisation of U alone for n = 0).
    InsertCols,
    /// Rows k..k+p deleted.
    DeleteRows,
    /// Columns k..k+p deleted.
    DeleteCols,
    /// The rows U (p×n) deleted from an R-only state, given their contents.
    DeleteRowsWith,
}

impl Op {
    fn parse(s: &str) -> PyResult<Self> {
        Ok(match s {
            "rank" => Op::Rank,
            "insert_rows" => Op::InsertRows,
            "insert_cols" => Op::InsertCols,
            "delete_rows" => Op::DeleteRows,
            "delete_cols" => Op::DeleteCols,
            "delete_rows_with" => Op::DeleteRowsWith,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown batch operation {other}"
                )))
            }
        })
    }
}

/// One problem of a batch: its factors, its update's arguments and its index.
struct Problem<T: Real> {
    q: Option<Mat<T>>,
    r: Mat<T>,
    u: Option<Mat<T>>,
    v: Option<Mat<T>>,
    k: usize,
}

/// The factors after the update: Q (none for an R-only state) and R.
type Factors<T> = (Option<Mat<T>>, Mat<T>);

/// The shared description of a batch's update.
#[derive(Clone, Copy)]
struct Job {
    op: Op,
    policy: cuqr::QPolicy,
    /// Rows the factors stand for (for an R-only state, at least n + p).
    m: usize,
    /// Rows or columns deleted.
    p: usize,
}

fn missing(what: &'static str) -> cuqr::Error {
    cuqr::Error::InvalidParam {
        op: "batch",
        what,
        why: "the operation needs it".into(),
    }
}

/// One problem updated by the single-problem code.
fn run_one<T: Real>(job: Job, pr: Problem<T>) -> cuqr::Result<Factors<T>> {
    let Problem { q, r, u, v, k } = pr;
    if let (Op::InsertCols, 0) = (job.op, r.ncols()) {
        // nothing to update: the factorisation of the new columns alone
        let u = u.ok_or_else(|| missing("U"))?;
        let b = Mat::zeros(u.nrows(), 1);
        let st = CpuQr::factorize(u.as_ref(), b.as_ref(), job.policy, FactorParams::default())?;
        return Ok(st.into_factors());
    }
    let params = FactorsParams {
        rank_tol: Some(0.0),
        check_finite: false,
    };
    let mut st = CpuQr::from_factors(
        job.policy,
        job.m,
        q.as_ref().map(|q| q.as_ref()),
        r.as_ref(),
        params,
    )?;
    let u = || u.as_ref().ok_or_else(|| missing("U"));
    match job.op {
        Op::Rank => {
            let (u, v) = (u()?, v.as_ref().ok_or_else(|| missing("V"))?);
            match u.ncols() {
                0 => {}
                1 => st.rank_one(u.col(0), v.col(0))?,
                _ => st.rank_k(u.as_ref(), v.as_ref())?,
            }
        }
        Op::InsertRows => {
            let u = u()?;
            let e = Mat::zeros(u.nrows(), st.nrhs());
            st.insert_rows(k, u.as_ref(), e.as_ref())?;
        }
        Op::InsertCols => {
            let u = u()?;
            if u.ncols() > 0 {
                st.insert_cols(k, u.as_ref())?;
            }
        }
        Op::DeleteRows => st.delete_rows(k, job.p)?,
        Op::DeleteCols => st.delete_cols(k, job.p)?,
        Op::DeleteRowsWith => {
            let u = u()?;
            let e = Mat::zeros(u.nrows(), st.nrhs());
            st.delete_rows_with(k, u.as_ref(), e.as_ref())?;
        }
    }
    Ok(st.into_factors())
}

/// Every problem updated, in parallel over [`cuqr::cpu::threads`] contiguous runs of the
/// batch; the results in order, or the index of the first problem that failed and its
/// error. Problems after a known failure are skipped.
fn run_all<T: Real>(
    job: Job,
    problems: Vec<Problem<T>>,
) -> Result<Vec<Factors<T>>, (usize, cuqr::Error)> {
    let nb = problems.len();
    let runs = cuqr::cpu::threads().clamp(1, nb.max(1));
    let first_failure = AtomicUsize::new(usize::MAX);
    let one = |(i, pr): (usize, Problem<T>)| {
        if i > first_failure.load(Ordering::Relaxed) {
            return None;
        }
        let out = run_one(job, pr);
        if out.is_err() {
            first_failure.fetch_min(i, Ordering::Relaxed);
        }
        Some(out)
    };
    let outs: Vec<Option<cuqr::Result<Factors<T>>>> = if runs == 1 {
        problems.into_iter().enumerate().map(one).collect()
    } else {
        problems
            .into_par_iter()
            .with_min_len(nb.div_ceil(runs))
            .enumerate()
            .map(one)
            .collect()
    };
    let mut done = Vec::with_capacity(nb);
    for (i, out) in outs.into_iter().enumerate() {
        match out {
            Some(Ok(f)) => done.push(f),
            Some(Err(e)) => return Err((i, e)),
            // skipped only after an earlier failure, which the loop has returned
            None => return Err((i, missing("an earlier problem to succeed"))),
        }
    }
    Ok(done)
}

/// A (batch, rows, cols) NumPy array of `T` as one column-major [`Mat`] per problem (any
/// strides, zero ones of broadcast inputs included), copied while the interpreter lock is
/// held.
fn read_batch<T: Real>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<Mat<T>>> {
    let a = obj.cast::<PyArray3<T>>().map_err(|_| {
        PyValueError::new_err(format!(
            "{what}: expected a 3-D NumPy array of {} in native byte order",
            <T as Real>::DTYPE_NAME
        ))
    })?;
    check_layout::<T>(a.shape(), a.strides(), a.is_aligned(), what)?;
    let a = a.readonly();
    let view = a.as_array();
    Ok(view.axis_iter(Axis(0)).map(mat_of).collect())
}

/// Matrices of one shape stacked into a (batch, rows, cols) NumPy array without a further
/// copy of the stacked buffer: each problem's matrix column-major, as unbatched results are.
fn stack<T: Real>(
    py: Python<'_>,
    (rows, cols): (usize, usize),
    data: Vec<T>,
    nb: usize,
) -> PyResult<Bound<'_, PyAny>> {
    let a = Array3::from_shape_vec(
        (nb, rows, cols).strides((rows * cols, 1, rows.max(1))),
        data,
    )
    .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray3::from_owned_array(py, a).into_any())
}

/// The matrices' common shape and their elements one after the other; an error if the
/// shapes differ (they cannot: the Python layer checked that the problems agree).
fn concat<T: Real>(
    mats: impl Iterator<Item = Mat<T>>,
    nb: usize,
) -> cuqr::Result<((usize, usize), Vec<T>)> {
    let mut shape = None;
    let mut data = Vec::new();
    for m in mats {
        let s = (m.nrows(), m.ncols());
        match shape {
            None => {
                shape = Some(s);
                data.reserve_exact(nb * s.0 * s.1);
            }
            Some(s0) if s0 != s => {
                return Err(cuqr::Error::InvalidParam {
                    op: "batch",
                    what: "results",
                    why: format!("the problems came out in different shapes, {s0:?} and {s:?}"),
                })
            }
            Some(_) => {}
        }
        data.extend_from_slice(m.as_slice());
    }
    Ok((shape.unwrap_or((0, 0)), data))
}

/// The batch index of problem `i` (C order) as Python writes a tuple.
fn batch_index(mut i: usize, shape: &[usize]) -> String {
    let mut idx = vec![0; shape.len()];
    for (slot, &n) in idx.iter_mut().zip(shape).rev() {
        if n > 0 {
            *slot = i % n;
            i /= n;
        }
    }
    match idx.as_slice() {
        [one] => format!("({one},)"),
        many => format!(
            "({})",
            many.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The exception of `e` with the batch index of the problem appended to its message.
fn at_index(py: Python<'_>, e: cuqr::Error, index: &str) -> PyErr {
    let e = to_py(e);
    let msg = format!("{} (at batch index {index})", e.value(py));
    PyErr::from_type(e.get_type(py), msg)
}

#[allow(clippy::too_many_arguments)]
fn batch_t<'py, T: Real>(
    py: Python<'py>,
    job: Job,
    q: Option<&Bound<'py, PyAny>>,
    r: &Bound<'py, PyAny>,
    u: Option<&Bound<'py, PyAny>>,
    v: Option<&Bound<'py, PyAny>>,
    k: Option<PyReadonlyArray1<'py, i64>>,
    batch_shape: &[usize],
) -> PyResult<(Option<Bound<'py, PyAny>>, Bound<'py, PyAny>)> {
    let rs = read_batch::<T>(r, "R")?;
    let nb = rs.len();
    let per_problem =
        |x: Option<&Bound<'py, PyAny>>, what: &str| -> PyResult<Vec<Option<Mat<T>>>> {
            match x {
                None => Ok((0..nb).map(|_| None).collect()),
                Some(x) => {
                    let ms = read_batch::<T>(x, what)?;
                    if ms.len() != nb {
                        return Err(PyValueError::new_err(format!(
                            "{what}: {} problems, R has {nb}",
                            ms.len()
                        )));
                    }
                    Ok(ms.into_iter().map(Some).collect())
                }
            }
        };
    let (qs, us, vs) = (
        per_problem(q, "Q")?,
        per_problem(u, "u")?,
        per_problem(v, "v")?,
    );
    let ks: Vec<usize> = match &k {
        None => vec![0; nb],
        Some(k) => k
            .as_array()
            .iter()
            .map(|&x| usize::try_from(x).map_err(|_| PyValueError::new_err("'k' is out of bounds")))
            .collect::<PyResult<_>>()?,
    };
    if ks.len() != nb {
        return Err(PyValueError::new_err(format!(
            "k: {} indices for {nb} problems",
            ks.len()
        )));
    }
    let problems: Vec<Problem<T>> = qs
        .into_iter()
        .zip(rs)
        .zip(us.into_iter().zip(vs))
        .zip(ks)
        .map(|(((q, r), (u, v)), k)| Problem { q, r, u, v, k })
        .collect();
    let out = py.detach(|| {
        let done = run_all(job, problems)?;
        let (qs, rs): (Vec<_>, Vec<_>) = done.into_iter().unzip();
        let q = if qs.iter().all(Option::is_some) {
            Some(concat(qs.into_iter().flatten(), nb).map_err(|e| (0, e))?)
        } else {
            None
        };
        let r = concat(rs.into_iter(), nb).map_err(|e| (0, e))?;
        Ok::<_, (usize, cuqr::Error)>((q, r))
    });
    let (q, r) = out.map_err(|(i, e)| at_index(py, e, &batch_index(i, batch_shape)))?;
    let q = q.map(|(s, d)| stack(py, s, d, nb)).transpose()?;
    Ok((q, stack(py, r.0, r.1, nb)?))
}

/// A batch of updates of factorisations on the CPU: Q (batch × m × m or m × n; none for an
/// R-only state), R, U and V as 3-D NumPy arrays of one dtype with the batch flattened into
/// the first axis, `k` one non-negative index per problem. Returns the new Q (or None) and
/// R as 3-D arrays; a failing problem raises its error with `batch_shape`'s index of it.
#[pyfunction]
#[pyo3(signature = (op, policy, m, q, r, u, v, k, p, batch_shape))]
#[allow(clippy::too_many_arguments)]
pub fn batch<'py>(
    py: Python<'py>,
    op: &str,
    policy: &str,
    m: usize,
    q: Option<&Bound<'py, PyAny>>,
    r: &Bound<'py, PyAny>,
    u: Option<&Bound<'py, PyAny>>,
    v: Option<&Bound<'py, PyAny>>,
    k: Option<PyReadonlyArray1<'py, i64>>,
    p: usize,
    batch_shape: Vec<usize>,
) -> PyResult<(Option<Bound<'py, PyAny>>, Bound<'py, PyAny>)> {
    let job = Job {
        op: Op::parse(op)?,
        policy: crate::state::policy_of(policy)?,
        m,
        p,
    };
    if r.cast::<PyArray3<f64>>().is_ok() {
        batch_t::<f64>(py, job, q, r, u, v, k, &batch_shape)
    } else if r.cast::<PyArray3<f32>>().is_ok() {
        batch_t::<f32>(py, job, q, r, u, v, k, &batch_shape)
    } else {
        Err(PyValueError::new_err(
            "R: expected a 3-D float32 or float64 NumPy array",
        ))
    }
}
