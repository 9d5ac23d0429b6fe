//! `cuqr.GpuBatchR`: B R-only least-squares problems of one shape on one GPU, a fixed number
//! of launches a call (`cuqr::batch::GpuRBatch`; docs/python.md#batches-on-the-gpu). The
//! Python layer passes every array flattened to 1-D in C order (a NumPy array from host
//! memory, or a CuPy / torch array read in place through DLPack).

use std::sync::{Arc, Mutex};

use numpy::PyArray1;
use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;

use cuqr::batch::GpuRBatch;
use cuqr::{DevVec, Gpu, GpuScalar};

use crate::batch_gpu::{all_or_nothing, dev_vec, outcome, solution, Refused};
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
    gpu: Arc<Gpu>,
    ordinal: usize,
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

/// `p` rows (B·p·n) and their right-hand sides (B·p) as device vectors.
fn rows_of<T: GpuScalar + numpy::Element>(
    (rows, rhs): (&Bound<'_, PyAny>, &Bound<'_, PyAny>),
    (gpu, ordinal): (&Arc<Gpu>, usize),
    (batch, p, n): (usize, usize, usize),
) -> PyResult<(DevVec<T>, DevVec<T>)> {
    Ok((
        dev_vec::<T>(rows, gpu, ordinal, ("rows", batch * p * n))?,
        dev_vec::<T>(rhs, gpu, ordinal, ("right-hand sides", batch * p))?,
    ))
}

fn factorize<T: GpuScalar + numpy::Element>(
    (gpu, ordinal): (&Arc<Gpu>, usize),
    (a, b): (&Bound<'_, PyAny>, &Bound<'_, PyAny>),
    (batch, m, n): (usize, usize, usize),
    keep: bool,
) -> PyResult<GpuRBatch<T>> {
    let (av, bv) = rows_of::<T>((a, b), (gpu, ordinal), (batch, m, n))?;
    if keep {
        GpuRBatch::factorize_keep_data_device(gpu, (&av, &bv), (batch, m, n))
    } else {
        GpuRBatch::factorize_device(gpu, (&av, &bv), (batch, m, n))
    }
    .map_err(to_py)
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
        let at = (&gpu, device);
        let inner = match bits {
            64 => Inner::F64(factorize(at, (a, b), (batch, m, n), keep)?),
            32 => Inner::F32(factorize(at, (a, b), (batch, m, n), keep)?),
            _ => return Err(PyTypeError::new_err("A must be float32 or float64")),
        };
        Ok(Self {
            inner: Mutex::new(inner),
            gpu,
            ordinal: device,
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
        let at = (&self.gpu, self.ordinal);
        with_bank!(self, st, T => {
            let (rv, ev) = rows_of::<T>((rows, rhs), at, (st.batch(), p, st.ncols()))?;
            all_or_nothing(st.insert_rows_device(k0, p, (&rv, &ev)))
        })
    }

    /// p rows out, as given (all-or-nothing). `(applied, refused)`.
    fn delete_rows(
        &self,
        p: usize,
        rows: &Bound<'_, PyAny>,
        rhs: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let at = (&self.gpu, self.ordinal);
        with_bank!(self, st, T => {
            let (rv, ev) = rows_of::<T>((rows, rhs), at, (st.batch(), p, st.ncols()))?;
            all_or_nothing(st.delete_rows_with_device(p, (&rv, &ev)))
        })
    }

    /// Rows k0..k0+p out, the kept ones (all-or-nothing). `(applied, refused)`.
    fn delete_rows_at(&self, k0: usize, p: usize) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, _T => all_or_nothing(st.delete_rows(k0, p)))
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
        let at = (&self.gpu, self.ordinal);
        with_bank!(self, st, T => {
            let (bs, n) = (st.batch(), st.ncols());
            let (rv, ev) = rows_of::<T>((rows, rhs), at, (bs, p_in, n))?;
            let (ov, fv) = rows_of::<T>((old_rows, old_rhs), at, (bs, p_out, n))?;
            outcome(st.slide_device((p_in, &rv, &ev), (p_out, &ov, &fv), forget))
        })
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
        let at = (&self.gpu, self.ordinal);
        with_bank!(self, st, T => {
            let (rv, ev) = rows_of::<T>((rows, rhs), at, (st.batch(), p_in, st.ncols()))?;
            outcome(st.slide_kept_device(p_in, (&rv, &ev), drop, forget))
        })
    }

    /// A + u vᵀ for every problem: u (B·m), v (B·n). `(applied, refused)`.
    fn rank_one(&self, u: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<(bool, Refused)> {
        let (gpu, ord) = (&self.gpu, self.ordinal);
        with_bank!(self, st, T => {
            let (bs, m, n) = (st.batch(), st.nrows(), st.ncols());
            let uv = dev_vec::<T>(u, gpu, ord, ("u", bs * m))?;
            let vv = dev_vec::<T>(v, gpu, ord, ("v", bs * n))?;
            outcome(st.rank_one_device(&uv, &vv))
        })
    }

    /// A + U Vᵀ for every problem: U (B·m·k), V (B·n·k), row-major a problem.
    fn rank_k(
        &self,
        u: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
        k: usize,
    ) -> PyResult<(bool, Refused)> {
        let (gpu, ord) = (&self.gpu, self.ordinal);
        with_bank!(self, st, T => {
            let (bs, m, n) = (st.batch(), st.nrows(), st.ncols());
            let uv = dev_vec::<T>(u, gpu, ord, ("U", bs * m * k))?;
            let vv = dev_vec::<T>(v, gpu, ord, ("V", bs * n * k))?;
            outcome(st.rank_k_device(&uv, &vv, k))
        })
    }

    /// p columns (B·m·p) in before column k0. `(applied, refused)`.
    fn insert_cols(
        &self,
        k0: usize,
        p: usize,
        cols: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let (gpu, ord) = (&self.gpu, self.ordinal);
        with_bank!(self, st, T => {
            let cv = dev_vec::<T>(cols, gpu, ord, ("columns", st.batch() * st.nrows() * p))?;
            all_or_nothing(st.insert_cols_device(k0, p, &cv))
        })
    }

    /// Columns k0..k0+p replaced by `cols` (B·m·p). `(applied, refused)`.
    fn replace_cols(
        &self,
        k0: usize,
        p: usize,
        cols: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let (gpu, ord) = (&self.gpu, self.ordinal);
        with_bank!(self, st, T => {
            let cv = dev_vec::<T>(cols, gpu, ord, ("columns", st.batch() * st.nrows() * p))?;
            outcome(st.replace_cols_device(k0, p, &cv))
        })
    }

    /// Column `from` moved to position `to`. `(applied, refused)`.
    fn shift_col(&self, from: usize, to: usize) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, _T => outcome(st.shift_col(from, to)))
    }

    /// Columns k0..k0+p out (all-or-nothing). `(applied, refused)`.
    fn delete_cols(&self, k0: usize, p: usize) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, _T => all_or_nothing(st.delete_cols(k0, p)))
    }

    /// Every problem folded afresh from its kept rows. `(applied, refused)`.
    fn refactorize(&self) -> PyResult<(bool, Refused)> {
        with_bank!(self, st, _T => all_or_nothing(st.refactorize()))
    }

    /// Whether the batch keeps its rows.
    fn keeps_data(&self) -> PyResult<bool> {
        with_bank!(self, st, _T => Ok(st.keeps_data()))
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

    /// (B, m, n).
    fn shape(&self) -> PyResult<(usize, usize, usize)> {
        with_bank!(self, st, _T => Ok((st.batch(), st.nrows(), st.ncols())))
    }

    /// "float32" or "float64".
    fn dtype(&self) -> PyResult<&'static str> {
        with_bank!(self, _st, T => Ok(if std::mem::size_of::<T>() == 8 { "float64" } else { "float32" }))
    }
}
