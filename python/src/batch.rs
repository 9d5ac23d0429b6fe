//! Batches of the SciPy-style updates (`cuqr.qr_update`, `qr_insert`, `qr_delete` and
//! `cholupdate` with leading batch dimensions) on NumPy arrays, in one call: with the
//! interpreter lock released, the CPU backend's threads each take a contiguous run of the
//! problems and read, update (by the same single-problem code as an unbatched call) and
//! write them one at a time.
//!
//! Unlike the single-problem calls, which copy their arguments while holding the lock,
//! a batch reads the caller's arrays in place from the worker threads, under NumPy
//! read-only borrows (as NumPy's own routines read operands without the lock): a batch
//! can be hundreds of megabytes, and a separate copying pass under the lock cost about
//! as much as the updates themselves (measured: 10,000 problems of 64×8 with full Q,
//! 1.04 s with the copy, 0.62 s without). Writing into the arrays from another thread
//! during the call gives undefined results, as it would for NumPy.
//!
//! The Python layer has checked everything that a whole batch shares (shapes, dtypes,
//! finiteness) and every problem's index; what is left to fail is numerical, per problem.
//! The first failing problem (in the batch's C order) fails the call, its error naming
//! the batch index; no result is returned then.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use cuqr::{CpuQr, FactorParams, FactorsParams, Mat, QrUpdate};
use numpy::ndarray::{Array3, ArrayView1, ArrayView3, Axis, ShapeBuilder};
use numpy::{PyArray3, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray3, PyUntypedArrayMethods};
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
    let new_cols = u.as_ref().map_or(0, |u| u.ncols());
    if let (Op::InsertCols, 0, 1..) = (job.op, r.ncols(), new_cols) {
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

/// A batch's arguments: views of the caller's (batch, rows, cols) arrays, problem `i` at
/// index `i` of axis 0, and one index `k` per problem.
struct Inputs<'a, T> {
    q: Option<ArrayView3<'a, T>>,
    r: ArrayView3<'a, T>,
    u: Option<ArrayView3<'a, T>>,
    v: Option<ArrayView3<'a, T>>,
    k: Option<ArrayView1<'a, i64>>,
}

impl<T: Real> Inputs<'_, T> {
    /// Problem `i`, copied out as column-major matrices. An index the Python layer would
    /// have refused (negative) becomes one the library refuses as out of bounds.
    fn problem(&self, i: usize) -> Problem<T> {
        let at = |a: &ArrayView3<'_, T>| mat_of(a.index_axis(Axis(0), i));
        Problem {
            q: self.q.as_ref().map(at),
            r: at(&self.r),
            u: self.u.as_ref().map(at),
            v: self.v.as_ref().map(at),
            k: self
                .k
                .as_ref()
                .map_or(0, |k| usize::try_from(k[i]).unwrap_or(usize::MAX)),
        }
    }
}

/// The results of a batch: Q (empty for R-only states) and R of every problem, each
/// column-major, one after the other, with their shapes.
struct Stacked<T> {
    q: Option<((usize, usize), Vec<T>)>,
    r: ((usize, usize), Vec<T>),
}

/// `buf` cut into `nb` slots of `len` elements (empty ones for `len` 0).
fn slots<T>(buf: &mut [T], len: usize, nb: usize) -> Vec<&mut [T]> {
    if len == 0 {
        (0..nb).map(|_| <&mut [T]>::default()).collect()
    } else {
        buf.chunks_mut(len).collect()
    }
}

fn shape_of<T: Real>(m: &Mat<T>) -> (usize, usize) {
    (m.nrows(), m.ncols())
}

/// Problem `i` read, updated and written into its slots; its error otherwise.
fn run_into<T: Real>(
    job: Job,
    inputs: &Inputs<'_, T>,
    i: usize,
    (q_shape, r_shape): ((usize, usize), (usize, usize)),
    (q_slot, r_slot): (&mut [T], &mut [T]),
) -> cuqr::Result<()> {
    let (q, r) = run_one(job, inputs.problem(i))?;
    let same = q.as_ref().is_none_or(|q| shape_of(q) == q_shape) && shape_of(&r) == r_shape;
    if !same {
        return Err(cuqr::Error::InvalidParam {
            op: "batch",
            what: "results",
            why: "the problems came out in different shapes".into(),
        });
    }
    if let Some(q) = q {
        q_slot.copy_from_slice(q.as_slice());
    }
    r_slot.copy_from_slice(r.as_slice());
    Ok(())
}

/// Every problem read, updated by the single-problem code and written into the stacked
/// results, in parallel over [`cuqr::cpu::threads`] contiguous runs of the batch (the
/// first problem alone first: its results give the shapes). On failure, the index of the
/// first problem (in order) that failed and its error; problems after a known failure
/// are skipped.
fn run_all<T: Real>(
    job: Job,
    inputs: &Inputs<'_, T>,
    nb: usize,
) -> Result<Stacked<T>, (usize, cuqr::Error)> {
    let (q0, r0) = run_one(job, inputs.problem(0)).map_err(|e| (0, e))?;
    let q_shape = q0.as_ref().map_or((0, 0), shape_of);
    let r_shape = shape_of(&r0);
    let (q_len, r_len) = (q_shape.0 * q_shape.1, r_shape.0 * r_shape.1);
    let has_q = q0.is_some();
    let mut q_buf = vec![T::ZERO; if has_q { nb * q_len } else { 0 }];
    let mut r_buf = vec![T::ZERO; nb * r_len];
    let q_slots = slots(&mut q_buf, if has_q { q_len } else { 0 }, nb);
    let mut work: Vec<_> = q_slots
        .into_iter()
        .zip(slots(&mut r_buf, r_len, nb))
        .enumerate()
        .collect();
    if let Some(q0) = &q0 {
        work[0].1 .0.copy_from_slice(q0.as_slice());
    }
    work[0].1 .1.copy_from_slice(r0.as_slice());
    let rest = work.split_off(1);
    let first_failure = AtomicUsize::new(usize::MAX);
    let failures = Mutex::new(Vec::new());
    let one = |(i, slot): (usize, (&mut [T], &mut [T]))| {
        if i > first_failure.load(Ordering::Relaxed) {
            return;
        }
        if let Err(e) = run_into(job, inputs, i, (q_shape, r_shape), slot) {
            first_failure.fetch_min(i, Ordering::Relaxed);
            failures
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((i, e));
        }
    };
    let runs = cuqr::cpu::threads().clamp(1, nb);
    if runs == 1 {
        rest.into_iter().for_each(one);
    } else {
        rest.into_par_iter()
            .with_min_len(nb.div_ceil(runs))
            .for_each(one);
    }
    let failures = failures
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(first) = failures.into_iter().min_by_key(|(i, _)| *i) {
        return Err(first);
    }
    Ok(Stacked {
        q: has_q.then_some((q_shape, q_buf)),
        r: (r_shape, r_buf),
    })
}

/// A (batch, rows, cols) NumPy array of `T`, borrowed for reading in place (any strides,
/// zero ones of broadcast inputs included).
pub(crate) fn borrow_batch<'py, T: Real>(
    obj: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<PyReadonlyArray3<'py, T>> {
    let a = obj.cast::<PyArray3<T>>().map_err(|_| {
        PyValueError::new_err(format!(
            "{what}: expected a 3-D NumPy array of {} in native byte order",
            <T as Real>::DTYPE_NAME
        ))
    })?;
    check_layout::<T>(a.shape(), a.strides(), a.is_aligned(), what)?;
    Ok(a.readonly())
}

/// Stacked matrices as a (batch, rows, cols) NumPy array without a copy: each problem's
/// matrix column-major, as unbatched results are.
pub(crate) fn stack<T: Real>(
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
    let r = borrow_batch::<T>(r, "R")?;
    let nb = r.shape()[0];
    let borrow = |x: Option<&Bound<'py, PyAny>>, what: &str| -> PyResult<_> {
        let Some(x) = x else { return Ok(None) };
        let a = borrow_batch::<T>(x, what)?;
        if a.shape()[0] != nb {
            return Err(PyValueError::new_err(format!(
                "{what}: {} problems, R has {nb}",
                a.shape()[0]
            )));
        }
        Ok(Some(a))
    };
    let (q, u, v) = (borrow(q, "Q")?, borrow(u, "u")?, borrow(v, "v")?);
    if let Some(k) = &k {
        if k.len() != nb {
            return Err(PyValueError::new_err(format!(
                "k: {} indices for {nb} problems",
                k.len()
            )));
        }
    }
    if nb == 0 {
        return Err(PyValueError::new_err("a batch needs at least one problem"));
    }
    let inputs = Inputs {
        q: q.as_ref().map(|a| a.as_array()),
        r: r.as_array(),
        u: u.as_ref().map(|a| a.as_array()),
        v: v.as_ref().map(|a| a.as_array()),
        k: k.as_ref().map(|a| a.as_array()),
    };
    let out = py
        .detach(|| run_all(job, &inputs, nb))
        .map_err(|(i, e)| at_index(py, e, &batch_index(i, batch_shape)))?;
    let q = out.q.map(|(s, d)| stack(py, s, d, nb)).transpose()?;
    Ok((q, stack(py, out.r.0, out.r.1, nb)?))
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
