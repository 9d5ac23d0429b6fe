//! `cuqr.GpuBatchQR`: B thin-Q least-squares problems of one shape on one GPU, one launch
//! a call (`cuqr::batch::GpuQBatch`; docs/python.md#batches-on-the-gpu). The Python layer
//! passes every array flattened to 1-D in C order (a NumPy array from host memory, or a
//! CuPy / torch array read in place through DLPack).

use std::sync::{Arc, Mutex};

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use cuqr::batch::{BatchReport, BatchSolution, GpuQBatch};
use cuqr::{DevVec, Gpu, GpuScalar};

use crate::convert::{cuda_device_of, gpu_py};
use crate::dlpack;
use crate::error::to_py;

enum Inner {
    F64(GpuQBatch<f64>),
    F32(GpuQBatch<f32>),
}

/// Each refusing problem's index and reason.
pub(crate) type Refused = Vec<(usize, String)>;

/// B thin-Q problems on one GPU (see `cuqr.GpuBatchQR` in Python for the documentation).
#[pyclass(module = "cuqr._cuqr", name = "GpuBatchQR")]
pub struct GpuBatchQR {
    inner: Mutex<Inner>,
    gpu: Arc<Gpu>,
    ordinal: usize,
}

/// A 1-D array as a device vector: uploaded from NumPy, or copied on the device from a
/// CUDA array (DLPack), checked to be float`8·size_of::<T>()` and of length `len`.
pub(crate) fn dev_vec<T: GpuScalar + numpy::Element>(
    obj: &Bound<'_, PyAny>,
    gpu: &Arc<Gpu>,
    ordinal: usize,
    (what, len): (&str, usize),
) -> PyResult<DevVec<T>> {
    let bits = 8 * std::mem::size_of::<T>();
    let v = match cuda_device_of(obj)? {
        None => {
            let a: PyReadonlyArray1<'_, T> = obj.extract().map_err(|_| {
                PyTypeError::new_err(format!("{what} must be a 1-D float{bits} array"))
            })?;
            let host: Vec<T> = a.as_array().iter().copied().collect();
            if host.len() != len {
                return Err(PyValueError::new_err(format!(
                    "{what} holds {} values, expected {len}",
                    host.len()
                )));
            }
            DevVec::from_slice(gpu, &host).map_err(to_py)?
        }
        Some(dev) => {
            if dev != ordinal {
                return Err(PyValueError::new_err(format!(
                    "{what} is on CUDA device {dev}, the batch on device {ordinal}"
                )));
            }
            let imported = dlpack::import(obj, gpu.stream_handle())?;
            let d = &imported.desc;
            if d.complex || usize::from(d.bits) != bits {
                return Err(PyTypeError::new_err(format!(
                    "{what} is {}{}, the batch float{bits}",
                    if d.complex { "complex" } else { "float" },
                    d.bits
                )));
            }
            if d.shape != (len, 1) {
                return Err(PyValueError::new_err(format!(
                    "{what} holds {} values, expected {len}",
                    d.shape.0 * d.shape.1
                )));
            }
            imported
                .to_dev_mat::<T>(gpu)?
                .into_column_vec()
                .map_err(to_py)?
        }
    };
    Ok(v)
}

/// An update's outcome: `(applied, refused)`; a whole batch's refusal is `(false, …)`.
pub(crate) fn outcome(r: cuqr::Result<BatchReport>) -> PyResult<(bool, Refused)> {
    match r {
        Ok(rep) => Ok((
            true,
            rep.refused().map(|(i, e)| (i, e.to_string())).collect(),
        )),
        Err(cuqr::Error::BatchRefused { problems, .. }) => Ok((
            false,
            problems
                .into_iter()
                .map(|(i, e)| (i, e.to_string()))
                .collect(),
        )),
        Err(e) => Err(to_py(e)),
    }
}

/// A batch's solve as `(x (B·n), residual norms (B), failed)`: NumPy arrays and a list.
pub(crate) fn solution<'py, T: GpuScalar + numpy::Element>(
    py: Python<'py>,
    sol: cuqr::Result<BatchSolution<T>>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Refused)> {
    let sol = sol.map_err(to_py)?;
    let failed = sol
        .status
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.as_ref().err().map(|e| (i, e.to_string())))
        .collect();
    let x = PyArray1::<T>::from_vec(py, sol.x).into_any();
    let r = PyArray1::<f64>::from_vec(py, sol.residual_norms).into_any();
    Ok((x, r, failed))
}

/// `outcome` for an all-or-nothing update.
pub(crate) fn all_or_nothing(r: cuqr::Result<()>) -> PyResult<(bool, Refused)> {
    outcome(r.map(|()| BatchReport {
        outcomes: Vec::new(),
    }))
}

macro_rules! with_batch {
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

/// The batch of either kind from device buffers.
fn factorize<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    ab: (&DevVec<T>, &DevVec<T>),
    shape: (usize, usize, usize),
    full: bool,
) -> PyResult<GpuQBatch<T>> {
    if full {
        GpuQBatch::factorize_full_device(gpu, ab, shape)
    } else {
        GpuQBatch::factorize_device(gpu, ab, shape)
    }
    .map_err(to_py)
}

#[pymethods]
impl GpuBatchQR {
    /// Factorises A (B·m·n values, each problem m×n row-major) with b (B·m), keeping each
    /// problem's full Q (m×m) when `full`.
    #[new]
    #[pyo3(signature = (a, b, batch, m, n, bits, device, full=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        batch: usize,
        m: usize,
        n: usize,
        bits: usize,
        device: usize,
        full: bool,
    ) -> PyResult<Self> {
        let gpu = gpu_py(device)?;
        let inner = match bits {
            64 => {
                let av = dev_vec::<f64>(a, &gpu, device, ("A", batch * m * n))?;
                let bv = dev_vec::<f64>(b, &gpu, device, ("b", batch * m))?;
                Inner::F64(factorize(&gpu, (&av, &bv), (batch, m, n), full)?)
            }
            32 => {
                let av = dev_vec::<f32>(a, &gpu, device, ("A", batch * m * n))?;
                let bv = dev_vec::<f32>(b, &gpu, device, ("b", batch * m))?;
                Inner::F32(factorize(&gpu, (&av, &bv), (batch, m, n), full)?)
            }
            _ => return Err(PyTypeError::new_err("A must be float32 or float64")),
        };
        Ok(Self {
            inner: Mutex::new(inner),
            gpu,
            ordinal: device,
        })
    }

    /// A + u vᵀ for every problem: u (B·m), v (B·n). `(applied, refused)`.
    fn rank_one(&self, u: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<(bool, Refused)> {
        let (gpu, ord) = (&self.gpu, self.ordinal);
        with_batch!(self, st, T => {
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
        with_batch!(self, st, T => {
            let (bs, m, n) = (st.batch(), st.nrows(), st.ncols());
            let uv = dev_vec::<T>(u, gpu, ord, ("U", bs * m * k))?;
            let vv = dev_vec::<T>(v, gpu, ord, ("V", bs * n * k))?;
            outcome(st.rank_k_device(&uv, &vv, k))
        })
    }

    /// Columns k0..k0+p out. `(applied, refused)`.
    fn delete_cols(&self, k0: usize, p: usize) -> PyResult<(bool, Refused)> {
        with_batch!(self, st, _T => all_or_nothing(st.delete_cols(k0, p)))
    }

    /// p columns (B·m·p) in before column k0. `(applied, refused)`.
    fn insert_cols(
        &self,
        k0: usize,
        p: usize,
        cols: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let (gpu, ord) = (&self.gpu, self.ordinal);
        with_batch!(self, st, T => {
            let (bs, m) = (st.batch(), st.nrows());
            let cv = dev_vec::<T>(cols, gpu, ord, ("columns", bs * m * p))?;
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
        with_batch!(self, st, T => {
            let (bs, m) = (st.batch(), st.nrows());
            let cv = dev_vec::<T>(cols, gpu, ord, ("columns", bs * m * p))?;
            all_or_nothing(st.replace_cols_device(k0, p, &cv))
        })
    }

    /// Column `from` moved to position `to`. `(applied, refused)`.
    fn shift_col(&self, from: usize, to: usize) -> PyResult<(bool, Refused)> {
        with_batch!(self, st, _T => all_or_nothing(st.shift_col(from, to)))
    }

    /// p rows (B·p·n) with right-hand sides (B·p) in at k0. `(applied, refused)`.
    fn insert_rows(
        &self,
        k0: usize,
        p: usize,
        rows: &Bound<'_, PyAny>,
        rhs: &Bound<'_, PyAny>,
    ) -> PyResult<(bool, Refused)> {
        let (gpu, ord) = (&self.gpu, self.ordinal);
        with_batch!(self, st, T => {
            let (bs, n) = (st.batch(), st.ncols());
            let rv = dev_vec::<T>(rows, gpu, ord, ("rows", bs * p * n))?;
            let ev = dev_vec::<T>(rhs, gpu, ord, ("right-hand sides", bs * p))?;
            all_or_nothing(st.insert_rows_device(k0, p, (&rv, &ev)))
        })
    }

    /// Rows k0..k0+p out. `(applied, refused)`.
    fn delete_rows(&self, k0: usize, p: usize) -> PyResult<(bool, Refused)> {
        with_batch!(self, st, _T => all_or_nothing(st.delete_rows(k0, p)))
    }

    /// A window step: weights λ, p rows in at the end, the p oldest out.
    fn slide(
        &self,
        p: usize,
        rows: &Bound<'_, PyAny>,
        rhs: &Bound<'_, PyAny>,
        forget: f64,
    ) -> PyResult<(bool, Refused)> {
        let (gpu, ord) = (&self.gpu, self.ordinal);
        with_batch!(self, st, T => {
            let (bs, n) = (st.batch(), st.ncols());
            let rv = dev_vec::<T>(rows, gpu, ord, ("rows", bs * p * n))?;
            let ev = dev_vec::<T>(rhs, gpu, ord, ("right-hand sides", bs * p))?;
            outcome(st.slide_device(p, (&rv, &ev), forget))
        })
    }

    /// `(x (B·n), residual norms (B), failed)` as NumPy arrays and a list.
    fn solve<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Refused)> {
        with_batch!(self, st, T => solution::<T>(py, st.solve()))
    }

    /// Drift check: `(estimates (B), refreshed, failed)`, the problems above `tol`
    /// (default 10·max(m, n)·u) refreshed in place.
    #[pyo3(signature = (tol=None))]
    fn check_drift<'py>(
        &self,
        py: Python<'py>,
        tol: Option<f64>,
    ) -> PyResult<(Bound<'py, PyAny>, Vec<usize>, Vec<usize>)> {
        with_batch!(self, st, _T => {
            let d = st.check_drift(tol).map_err(to_py)?;
            let e = PyArray1::<f64>::from_vec(py, d.estimates).into_any();
            Ok((e, d.refreshed, d.failed))
        })
    }

    /// `(Q (B·m·n, or B·m·m for the full kind, each problem column-major), R (B·n·n
    /// row-major), b (B·m))` as NumPy.
    fn factors<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        with_batch!(self, st, T => {
            let (mut q, r, b) = st.to_host().map_err(to_py)?;
            if st.is_full() {
                q = st.full_q().map_err(to_py)?;
            }
            Ok((
                PyArray1::<T>::from_vec(py, q).into_any(),
                PyArray1::<T>::from_vec(py, r).into_any(),
                PyArray1::<T>::from_vec(py, b).into_any(),
            ))
        })
    }

    /// Whether each problem keeps its full Q.
    fn is_full(&self) -> PyResult<bool> {
        with_batch!(self, st, _T => Ok(st.is_full()))
    }

    /// (B, m, n).
    fn shape(&self) -> PyResult<(usize, usize, usize)> {
        with_batch!(self, st, _T => Ok((st.batch(), st.nrows(), st.ncols())))
    }

    /// "float32" or "float64".
    fn dtype(&self) -> PyResult<&'static str> {
        with_batch!(self, _st, T => Ok(if std::mem::size_of::<T>() == 8 { "float64" } else { "float32" }))
    }
}
