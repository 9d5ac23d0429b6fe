//! `cuqr.SmallState`: a small least-squares state on the GPU whose row updates are one
//! launch each and do not wait for the device (`cuqr::small::GpuSmallState`;
//! docs/python.md#small-states).

use std::sync::{Arc, Mutex};

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use cuqr::small::{GpuSmallState, RowSource, SmallParams};
use cuqr::{DevMat, Gpu, GpuScalar, Mat, Scalar};

use crate::convert::{cuda_device_of, gpu_py};
use crate::dlpack;
use crate::error::to_py;

/// Device rows kept alive (their Python objects) until the stream has passed the steps
/// that read them: after this many, a step waits for the stream and lets them go.
const PENDING_LIMIT: usize = 1024;

/// One precision's state and its recording buffer.
struct Typed<T: GpuScalar> {
    st: GpuSmallState<T>,
    /// (n+1) × capacity: column t = step t's x and ρ².
    record: Option<DevMat<T>>,
    recorded: usize,
}

enum Inner {
    F64(Typed<f64>),
    F32(Typed<f32>),
}

/// A least-squares problem of n ≤ 64 columns on one GPU, updated one row at a time in one
/// launch each (see `cuqr.SmallState` in Python for the documentation).
#[pyclass(module = "cuqr._cuqr", name = "SmallState")]
pub struct SmallState {
    inner: Mutex<Inner>,
    /// Python objects of device rows read by queued steps.
    pending: Mutex<Vec<Py<PyAny>>>,
    gpu: Arc<Gpu>,
    ordinal: usize,
    n: usize,
}

fn make<T: GpuScalar + numpy::Element>(
    gpu: &Arc<Gpu>,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    forget: Option<f64>,
    record: usize,
    params: &SmallParams,
) -> PyResult<Typed<T>> {
    let a: PyReadonlyArray2<'_, T> = a.extract()?;
    let b: PyReadonlyArray1<'_, T> = b.extract()?;
    let (m, n) = (a.shape()[0], a.shape()[1]);
    let av = a.as_array();
    let am = Mat::from_fn(m, n, |i, j| av[(i, j)]);
    let bv: Vec<T> = b.as_array().iter().copied().collect();
    let st = match forget {
        None => GpuSmallState::window(gpu, am.as_ref(), &bv, params),
        Some(f) => GpuSmallState::recursive(gpu, am.as_ref(), &bv, f, params),
    }
    .map_err(to_py)?;
    let record = if record > 0 {
        Some(DevMat::<T>::zeros(gpu, n + 1, record).map_err(to_py)?)
    } else {
        None
    };
    Ok(Typed {
        st,
        record,
        recorded: 0,
    })
}

/// A device vector argument: its address, element stride and length.
fn device_vec<T: GpuScalar>(
    obj: &Bound<'_, PyAny>,
    gpu: &Arc<Gpu>,
    ordinal: usize,
    what: &str,
) -> PyResult<(u64, usize, usize)> {
    let imported = dlpack::import(obj, gpu.stream_handle())?;
    let d = &imported.desc;
    if d.device.1 as usize != ordinal {
        return Err(PyValueError::new_err(format!(
            "{what} is on CUDA device {}, the state on device {ordinal}",
            d.device.1
        )));
    }
    if d.complex || usize::from(d.bits) != 8 * std::mem::size_of::<T>() {
        return Err(PyTypeError::new_err(format!(
            "{what} is {}{}, the state float{}",
            if d.complex { "complex" } else { "float" },
            d.bits,
            8 * std::mem::size_of::<T>()
        )));
    }
    let (len, cols) = d.shape;
    if cols != 1 {
        return Err(PyValueError::new_err(format!("{what} must be 1-D")));
    }
    let inc = if len <= 1 { 1 } else { d.strides.0 };
    if inc < 1 {
        return Err(PyValueError::new_err(format!(
            "{what} has element stride {inc}; pass a positively strided vector"
        )));
    }
    Ok((d.address, inc as usize, len))
}

impl<T: GpuScalar + numpy::Element> Typed<T> {
    /// One step (slide or push) of a host or device row.
    fn step(
        &mut self,
        x: &Bound<'_, PyAny>,
        y: &Bound<'_, PyAny>,
        on_device: bool,
        (gpu, ordinal, n): (&Arc<Gpu>, usize, usize),
        slide: bool,
    ) -> PyResult<()> {
        if let Some(rec) = &self.record {
            if self.recorded >= rec.ncols() {
                return Err(PyValueError::new_err(format!(
                    "the recording holds {} steps; read it with recorded() and clear it \
                     with clear_recording()",
                    rec.ncols()
                )));
            }
        }
        let out = self.record.as_mut().map(|r| (r, self.recorded));
        if on_device {
            let (xa, inc, len) = device_vec::<T>(x, gpu, ordinal, "x")?;
            if len != n {
                return Err(PyValueError::new_err(format!(
                    "x has {len} entries, the state {n} columns"
                )));
            }
            let (ya, _, ylen) = device_vec::<T>(y, gpu, ordinal, "y")?;
            if ylen != 1 {
                return Err(PyValueError::new_err(
                    "a device y must hold one entry (e.g. y[t:t+1])",
                ));
            }
            // SAFETY: both are CUDA memory of this device (checked), of the state's float
            // type, n entries at stride `inc` and one entry (checked); the producers ordered
            // their pending writes before `gpu.stream` when asked for the capsules with it;
            // the caller keeps the Python objects (and so the memory) alive until the stream
            // has passed this step (the pending list, released after a wait).
            let row = unsafe { RowSource::foreign(xa, inc, ya) };
            if !slide {
                return Err(PyValueError::new_err(
                    "push takes host rows (a NumPy x and a float y)",
                ));
            }
            self.st.slide_source(&row, out).map_err(to_py)?;
        } else {
            let xv: PyReadonlyArray1<'_, T> = x.extract().map_err(|_| {
                PyTypeError::new_err(format!(
                    "x must be a 1-D float{} NumPy array or a CUDA array",
                    8 * std::mem::size_of::<T>()
                ))
            })?;
            let yv = T::from_f64(y.extract::<f64>()?);
            let xs = xv
                .as_slice()
                .map_or_else(|_| xv.as_array().to_vec(), |s| s.to_vec());
            let r = match (slide, out) {
                (true, Some((m, t))) => self.st.slide_solve(&xs, yv, m, t),
                (true, None) => self.st.slide(&xs, yv),
                (false, Some((m, t))) => self.st.push_solve(&xs, yv, m, t),
                (false, None) => self.st.push(&xs, yv),
            };
            r.map_err(to_py)?;
        }
        if self.record.is_some() {
            self.recorded += 1;
        }
        Ok(())
    }

    fn recorded<'py>(&self, py: Python<'py>, gpu: &Gpu) -> PyResult<Bound<'py, PyAny>> {
        let n = self.st.ncols();
        let steps = self.recorded;
        let (x, rss) = match &self.record {
            Some(r) if steps > 0 => {
                let h = r.to_host(gpu).map_err(to_py)?;
                let x: Vec<T> = (0..steps)
                    .flat_map(|t| (0..n).map(move |j| (t, j)))
                    .map(|(t, j)| h[(j, t)])
                    .collect();
                let rss: Vec<T> = (0..steps).map(|t| h[(n, t)]).collect();
                (x, rss)
            }
            _ => (Vec::new(), Vec::new()),
        };
        let x = PyArray1::from_vec(py, x).reshape([steps, n])?;
        let rss = PyArray1::from_vec(py, rss);
        Ok((x, rss).into_pyobject(py)?.into_any())
    }
}

macro_rules! with {
    ($inner:expr, $t:ident => $body:expr) => {
        match $inner {
            Inner::F64($t) => $body,
            Inner::F32($t) => $body,
        }
    };
}

impl SmallState {
    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Inner>> {
        self.inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("a call on this state panicked earlier"))
    }

    fn step(&self, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>, slide: bool) -> PyResult<()> {
        let on_device = cuda_device_of(x)?.is_some();
        let mut inner = self.lock()?;
        let ctx = (&self.gpu, self.ordinal, self.n);
        with!(&mut *inner, s => s.step(x, y, on_device, ctx, slide))?;
        if on_device {
            let mut pending = self.pending.lock().expect("pending list");
            pending.push(x.clone().unbind());
            pending.push(y.clone().unbind());
            if pending.len() >= PENDING_LIMIT {
                self.gpu.synchronize_stream().map_err(to_py)?;
                pending.clear();
            }
        }
        Ok(())
    }
}

#[pymethods]
impl SmallState {
    #[new]
    #[pyo3(signature = (a, b, forget, device, record, refresh_every, rank_tol))]
    fn new(
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        forget: Option<f64>,
        device: usize,
        record: usize,
        refresh_every: Option<usize>,
        rank_tol: Option<f64>,
    ) -> PyResult<Self> {
        let gpu = gpu_py(device)?;
        let params = SmallParams {
            refresh_every,
            rank_tol,
        };
        let is_f32 = a
            .getattr("dtype")
            .and_then(|d| d.str())
            .map(|s| s == "float32")
            .unwrap_or(false);
        let inner = if is_f32 {
            Inner::F32(make::<f32>(&gpu, a, b, forget, record, &params)?)
        } else {
            Inner::F64(make::<f64>(&gpu, a, b, forget, record, &params)?)
        };
        let n = with!(&inner, s => s.st.ncols());
        Ok(Self {
            inner: Mutex::new(inner),
            pending: Mutex::new(Vec::new()),
            gpu,
            ordinal: device,
            n,
        })
    }

    /// Queues one window step (a row in, the oldest out).
    fn slide(&self, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<()> {
        self.step(x, y, true)
    }

    /// Queues one recursive step (R, d, ρ times √forget, then a row in).
    fn push(&self, x: &Bound<'_, PyAny>, y: &Bound<'_, PyAny>) -> PyResult<()> {
        self.step(x, y, false)
    }

    /// Waits; what the device did since the state was made.
    fn sync<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let rep = with!(&mut *self.lock()?, s => s.st.sync()).map_err(to_py)?;
        self.pending.lock().expect("pending list").clear();
        let d = PyDict::new(py);
        d.set_item("steps", rep.steps)?;
        d.set_item("refused", rep.refused)?;
        d.set_item("first_refused", rep.first_refused)?;
        d.set_item("last_reason", rep.last_reason)?;
        d.set_item("solves_refused", rep.solves_refused)?;
        Ok(d)
    }

    /// Waits; the solution (x, rss) of the state as it is.
    fn solve<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut inner = self.lock()?;
        with!(&mut *inner, s => {
            let sol = s.st.solve().map_err(to_py)?;
            let x = PyArray1::from_vec(py, sol.x);
            Ok((x, sol.rss.to_f64()).into_pyobject(py)?.into_any())
        })
    }

    /// Waits; the recorded solutions: x (steps, n) and rss (steps,).
    fn recorded<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let inner = self.lock()?;
        with!(&*inner, s => s.recorded(py, &self.gpu))
    }

    /// Empties the recording (the next step goes to column 0).
    fn clear_recording(&self) -> PyResult<()> {
        with!(&mut *self.lock()?, s => s.recorded = 0);
        Ok(())
    }

    /// Queues the window's refactorisation from its kept rows.
    fn refresh(&self) -> PyResult<()> {
        with!(&mut *self.lock()?, s => s.st.refresh()).map_err(to_py)
    }

    /// (m, n): the window's rows (or the rows folded so far) and the columns.
    #[getter]
    fn shape(&self) -> PyResult<(usize, usize)> {
        Ok(with!(&*self.lock()?, s => (s.st.nrows(), s.st.ncols())))
    }

    /// "float64" or "float32".
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(match &*self.lock()? {
            Inner::F64(_) => "float64",
            Inner::F32(_) => "float32",
        })
    }
}
