//! `cuqr.GpuBatchR`: B R-only least-squares problems of one shape on one GPU, one launch a
//! call (`cuqr::batch::GpuRBatch`; docs/python.md#batches-on-the-gpu). The Python layer
//! passes every array as a 1-D NumPy array in C order (device arrays are brought to the host
//! first: the batch reads its rows from host memory).

use std::sync::{Arc, Mutex};

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use cuqr::batch::{BatchRef, GpuRBatch};
use cuqr::{Gpu, GpuScalar};

use crate::batch_gpu::{all_or_nothing, outcome, solution, Refused};
use crate::convert::gpu_py;
use crate::error::to_py;

enum Inner {
    F64(GpuRBatch<f64>),
    F32(GpuRBatch<f32>),
}

/// B R-only problems on one GPU (see `cuqr.GpuBatchR` in Python for the documentation).
#[pyclass(module = "cuqr._cuqr", name = "GpuBatchR")]
pub struct GpuBatchR {
    inner: Mutex<Inner>,
}

/// A 1-D NumPy array of `T` with `len` values.
fn host_vec<T: GpuScalar + numpy::Element>(
    obj: &Bound<'_, PyAny>,
    (what, len): (&str, usize),
) -> PyResult<Vec<T>> {
    let bits = 8 * std::mem::size_of::<T>();
    let a: PyReadonlyArray1<'_, T> = obj
        .extract()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a 1-D float{bits} array")))?;
    let v: Vec<T> = a.as_array().iter().copied().collect();
    if v.len() != len {
        return Err(PyValueError::new_err(format!(
            "{what} holds {} values, expected {len}",
            v.len()
        )));
    }
    Ok(v)
}

/// `p` rows (B·p·n) and their right-hand sides (B·p) of a batch of B problems of n columns.
fn rows_of<T: GpuScalar + numpy::Element>(
    (rows, rhs): (&Bound<'_, PyAny>, &Bound<'_, PyAny>),
    (batch, p, n): (usize, usize, usize),
) -> PyResult<(Vec<T>, Vec<T>)> {
    Ok((
        host_vec::<T>(rows, ("rows", batch * p * n))?,
        host_vec::<T>(rhs, ("right-hand sides", batch * p))?,
    ))
}

macro_rules! with_bank {
    ($self:ident, $b:ident, $T:ident => $body:expr) => {{
        let mut guard = $self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the batch's lock is poisoned"))?;
        match &mut *guard {
            Inner::F64($b) => {
                type $T = f64;
                $body
            }
            Inner::F32($b) => {
                type $T = f32;
                $body
            }
        }
    }};
}

fn factorize<T: GpuScalar + numpy::Element>(
    gpu: &Arc<Gpu>,
    (a, b): (&Bound<'_, PyAny>, &Bound<'_, PyAny>),
    (batch, m, n): (usize, usize, usize),
    keep: bool,
) -> PyResult<GpuRBatch<T>> {
    let av = host_vec::<T>(a, ("A", batch * m * n))?;
    let bv = host_vec::<T>(b, ("b", batch * m))?;
    let ar = BatchRef::row_major(&av, batch, m, n).map_err(to_py)?;
    let br = BatchRef::row_major(&bv, batch, m, 1).map_err(to_py)?;
    if keep {
        GpuRBatch::factorize_keep_data(gpu, ar, br).map_err(to_py)
    } else {
        GpuRBatch::factorize(gpu, ar, br).map_err(to_py)
    }
}

#[pymethods]
impl GpuBatchR {
    /// Factorises A (B·m·n values, each problem m×n row-major) with b (B·m), keeping the
    /// rows on the device when `keep`.
    #[new]
    #[pyo3(signature = (a, b, batch, m, n, bits, device, keep))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        batch: usize,
        m: usize,
        n: usize,
        bits: usize,
        device: usize,
        keep: bool,
    ) -> PyResult<Self> {
        let gpu = gpu_py(device)?;
        let inner = match bits {
            64 => Inner::F64(factorize(&gpu, (a, b), (batch, m, n), keep)?),
            32 => Inner::F32(factorize(&gpu, (a, b), (batch, m, n), keep)?),
            _ => return Err(PyTypeError::new_err("A must be float32 or float64")),
        };
        Ok(Self {
            inner: Mutex::new(inner),
        })
    }

    /// p rows in at k0 (all-or-nothing). `(applied, refused)`.
    fn insert_rows(
        &self,
        k0: usize,
        p: usize,
        rows: &Bound<'_, PyAny>,
        rhs: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, T => {
            let (bs, n) = (st.batch(), st.ncols());
            let (rv, ev) = rows_of::<T>((rows, rhs), (bs, p, n))?;
            let (r, e) = (
                BatchRef::row_major(&rv, bs, p, n).map_err(to_py)?,
                BatchRef::row_major(&ev, bs, p, 1).map_err(to_py)?,
            );
            all_or_nothing(st.insert_rows_at(k0, r, e))
        })
    }

    /// Rows k0..k0+p out, the kept ones (all-or-nothing). `(applied, refused)`.
    fn delete_rows_at(&self, k0: usize, p: usize) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, _T => all_or_nothing(st.delete_rows(k0, p)))
    }

    /// A window step of a batch that keeps its rows: weights λ, `p_in` rows in, the oldest
    /// `drop` out. `(applied, refused)`.
    fn slide_kept(
        &self,
        p_in: usize,
        rows: &Bound<'_, PyAny>,
        rhs: &Bound<'_, PyAny>,
        drop: usize,
        forget: f64,
    ) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, T => {
            let (bs, n) = (st.batch(), st.ncols());
            let (rv, ev) = rows_of::<T>((rows, rhs), (bs, p_in, n))?;
            let (r, e) = (
                BatchRef::row_major(&rv, bs, p_in, n).map_err(to_py)?,
                BatchRef::row_major(&ev, bs, p_in, 1).map_err(to_py)?,
            );
            outcome(st.slide_kept(r, e, drop, forget))
        })
    }

    /// A + u vᵀ for every problem: u (B·m), v (B·n). `(applied, refused)`.
    fn rank_one(&self, u: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, T => {
            let (bs, m, n) = (st.batch(), st.nrows(), st.ncols());
            let (uv, vv) = (host_vec::<T>(u, ("u", bs * m))?, host_vec::<T>(v, ("v", bs * n))?);
            outcome(st.rank_one(
                BatchRef::row_major(&uv, bs, m, 1).map_err(to_py)?,
                BatchRef::row_major(&vv, bs, n, 1).map_err(to_py)?,
            ))
        })
    }

    /// A + U Vᵀ for every problem: U (B·m·k), V (B·n·k), row-major a problem.
    fn rank_k(
        &self,
        u: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
        k: usize,
    ) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, T => {
            let (bs, m, n) = (st.batch(), st.nrows(), st.ncols());
            let uv = host_vec::<T>(u, ("U", bs * m * k))?;
            let vv = host_vec::<T>(v, ("V", bs * n * k))?;
            outcome(st.rank_k(
                BatchRef::row_major(&uv, bs, m, k).map_err(to_py)?,
                BatchRef::row_major(&vv, bs, n, k).map_err(to_py)?,
            ))
        })
    }

    /// p columns (B·m·p) in before column k0. `(applied, refused)`.
    fn insert_cols(
        &self,
        k0: usize,
        p: usize,
        cols: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, T => {
            let (bs, m) = (st.batch(), st.nrows());
            let cv = host_vec::<T>(cols, ("columns", bs * m * p))?;
            all_or_nothing(st.insert_cols(k0, BatchRef::row_major(&cv, bs, m, p).map_err(to_py)?))
        })
    }

    /// Columns k0..k0+p replaced by `cols` (B·m·p). `(applied, refused)`.
    fn replace_cols(
        &self,
        k0: usize,
        p: usize,
        cols: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, T => {
            let (bs, m) = (st.batch(), st.nrows());
            let cv = host_vec::<T>(cols, ("columns", bs * m * p))?;
            outcome(st.replace_cols(k0, BatchRef::row_major(&cv, bs, m, p).map_err(to_py)?))
        })
    }

    /// Column `from` moved to position `to`. `(applied, refused)`.
    fn shift_col(&self, from: usize, to: usize) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, _T => outcome(st.shift_col(from, to)))
    }

    /// Every problem folded afresh from its kept rows. `(applied, refused)`.
    fn refactorize(&self) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, _T => all_or_nothing(st.refactorize()))
    }

    /// Whether the batch keeps its rows.
    fn keeps_data(&self) -> PyResult<bool> {
        with_bank!(self, st, _T => Ok(st.keeps_data()))
    }

    /// `(A (B·m·n), b (B·m))` kept, as NumPy.
    fn kept_data<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        with_bank!(self, st, T => {
            let (a, b) = st.kept_data().map_err(to_py)?;
            Ok((
                PyArray1::<T>::from_vec(py, a).into_any(),
                PyArray1::<T>::from_vec(py, b).into_any(),
            ))
        })
    }

    /// p rows out, as given (all-or-nothing). `(applied, refused)`.
    fn delete_rows(
        &self,
        p: usize,
        rows: &Bound<'_, PyAny>,
        rhs: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, T => {
            let (bs, n) = (st.batch(), st.ncols());
            let (rv, ev) = rows_of::<T>((rows, rhs), (bs, p, n))?;
            let (r, e) = (
                BatchRef::row_major(&rv, bs, p, n).map_err(to_py)?,
                BatchRef::row_major(&ev, bs, p, 1).map_err(to_py)?,
            );
            all_or_nothing(st.delete_rows_with(r, e))
        })
    }

    /// A window step: weights λ, `p_in` rows in, `p_out` rows out as given.
    #[allow(clippy::too_many_arguments)]
    fn slide(
        &self,
        p_in: usize,
        rows: &Bound<'_, PyAny>,
        rhs: &Bound<'_, PyAny>,
        p_out: usize,
        old_rows: &Bound<'_, PyAny>,
        old_rhs: &Bound<'_, PyAny>,
        forget: f64,
    ) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, T => {
            let (bs, n) = (st.batch(), st.ncols());
            let (rv, ev) = rows_of::<T>((rows, rhs), (bs, p_in, n))?;
            let (ov, fv) = rows_of::<T>((old_rows, old_rhs), (bs, p_out, n))?;
            let refs = (
                BatchRef::row_major(&rv, bs, p_in, n).map_err(to_py)?,
                BatchRef::row_major(&ev, bs, p_in, 1).map_err(to_py)?,
                BatchRef::row_major(&ov, bs, p_out, n).map_err(to_py)?,
                BatchRef::row_major(&fv, bs, p_out, 1).map_err(to_py)?,
            );
            outcome(st.slide(refs.0, refs.1, refs.2, refs.3, forget))
        })
    }

    /// Columns k0..k0+p out (all-or-nothing). `(applied, refused)`.
    fn delete_cols(&self, k0: usize, p: usize) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, _T => all_or_nothing(st.delete_cols(k0, p)))
    }

    /// `(x (B·n), residual norms (B), failed)` as NumPy arrays and a list.
    fn solve<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Refused)> {
        with_bank!(self, st, T => solution::<T>(py, st.solve()))
    }

    /// `(R (B·n·n row-major), d (B·n), ρ (B))` as NumPy.
    fn factors<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        with_bank!(self, st, T => {
            let (r, d, rho) = st.to_host().map_err(to_py)?;
            Ok((
                PyArray1::<T>::from_vec(py, r).into_any(),
                PyArray1::<T>::from_vec(py, d).into_any(),
                PyArray1::<T>::from_vec(py, rho).into_any(),
            ))
        })
    }

    /// (B, m, n).
    fn shape(&self) -> PyResult<(usize, usize, usize)> {
        with_bank!(self, st, _T => Ok((st.batch(), st.nrows(), st.ncols())))
    }

    /// "float32" or "float64".
    fn dtype(&self) -> PyResult<&'static str> {
        with_bank!(self, _st, T => Ok(if std::mem::size_of::<T>() == 8 { "float64" } else { "float32" }))
    }
}
