//! Rolling and recursive least squares (`cuqr.rolling_lstsq`, `cuqr.recursive_lstsq`) on
//! NumPy arrays: y of nobs × series and X of nobs × k or nobs × series × k, C-contiguous and
//! of one dtype (the Python layer arranges that). The inputs are copied while the
//! interpreter lock is held; the computation runs with it released.

use std::sync::Arc;

use cuqr::rolling::{
    recursive_lstsq, recursive_lstsq_device, rolling_lstsq, rolling_lstsq_device,
    DeviceRollingData, Missing, RecursiveParams, RollingData, RollingParams, RollingResult,
};
use cuqr::{DevMat, Device, Gpu, GpuScalar};
use numpy::ndarray::{Array2, Array3};
use numpy::{PyArray2, PyArray3, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::convert::{gpu_py, DeviceArray, Real, Wrap};
use crate::dlpack;
use crate::error::to_py;

/// y, X and their sizes, copied out of the NumPy arrays.
struct Input<T> {
    y: Vec<T>,
    x: Vec<T>,
    nobs: usize,
    series: usize,
    k: usize,
    per_series: bool,
}

impl<T: Real> Input<T> {
    fn data(&self) -> RollingData<'_, T> {
        if self.per_series {
            RollingData::per_series(&self.y, &self.x, self.nobs, self.series, self.k)
        } else {
            RollingData::shared(&self.y, &self.x, self.nobs, self.series, self.k)
        }
    }
}

/// Reads y (2-D) and X (2-D shared or 3-D per series) of dtype `T`; `None` when y is not
/// a `T` array.
fn read<T: Real>(y: &Bound<'_, PyAny>, x: &Bound<'_, PyAny>) -> PyResult<Option<Input<T>>> {
    let Ok(ya) = y.cast::<PyArray2<T>>() else {
        return Ok(None);
    };
    let ya = ya.readonly();
    let (nobs, series) = (ya.shape()[0], ya.shape()[1]);
    let y = ya.as_array().iter().copied().collect();
    if let Ok(xa) = x.cast::<PyArray2<T>>() {
        let xa = xa.readonly();
        let k = xa.shape()[1];
        let x = xa.as_array().iter().copied().collect();
        return Ok(Some(Input {
            y,
            x,
            nobs,
            series,
            k,
            per_series: false,
        }));
    }
    if let Ok(xa) = x.cast::<PyArray3<T>>() {
        let xa = xa.readonly();
        let k = xa.shape()[2];
        let x = xa.as_array().iter().copied().collect();
        return Ok(Some(Input {
            y,
            x,
            nobs,
            series,
            k,
            per_series: true,
        }));
    }
    Err(PyValueError::new_err(format!(
        "X must be a 2-D or 3-D array of {} like y",
        T::DTYPE_NAME
    )))
}

fn missing_of(s: &str) -> PyResult<Missing> {
    match s {
        "drop" => Ok(Missing::Drop),
        "skip" => Ok(Missing::Skip),
        "raise" => Ok(Missing::Raise),
        other => Err(PyValueError::new_err(format!(
            "missing must be 'drop', 'skip' or 'raise', got {other:?}"
        ))),
    }
}

/// "cpu", "auto", "cuda" or "cuda:N".
fn device_of(s: &str) -> PyResult<Device> {
    match s {
        "cpu" => Ok(Device::Cpu),
        "auto" => Ok(Device::Auto),
        "cuda" => Ok(Device::Gpu(0)),
        other => other
            .strip_prefix("cuda:")
            .and_then(|n| n.parse().ok())
            .map(Device::Gpu)
            .ok_or_else(|| {
                PyValueError::new_err(format!(
                    "device must be 'cpu', 'auto', 'cuda' or 'cuda:N', got {other:?}"
                ))
            }),
    }
}

/// (params nobs × series × k, rss nobs × series, rank_deficient nobs × series, fallback
/// reason or None, (scheduled, after_failed_downdate) refactorisations).
fn output<'py, T: Real>(py: Python<'py>, r: RollingResult<T>) -> PyResult<Bound<'py, PyTuple>> {
    let (nt, ns, k) = r.shape();
    let err = |e: numpy::ndarray::ShapeError| PyValueError::new_err(e.to_string());
    let params = PyArray3::from_owned_array(
        py,
        Array3::from_shape_vec((nt, ns, k), r.params).map_err(err)?,
    );
    let rss = PyArray2::from_owned_array(py, Array2::from_shape_vec((nt, ns), r.rss).map_err(err)?);
    let flags = PyArray2::from_owned_array(
        py,
        Array2::from_shape_vec((nt, ns), r.rank_deficient).map_err(err)?,
    );
    let counts = (
        r.refactorisations.scheduled,
        r.refactorisations.after_failed_downdate,
    );
    (params, rss, flags, r.fallback, counts).into_pyobject(py)
}

/// Runs `$f(&data, $arg, &$params)` in the dtype of y (float64 or float32) with the
/// interpreter lock released.
macro_rules! by_dtype {
    ($py:expr, $y:expr, $x:expr, $f:ident, $arg:expr, $params:expr) => {{
        if let Some(inp) = read::<f64>($y, $x)? {
            let r = $py
                .detach(|| $f(&inp.data(), $arg, &$params))
                .map_err(to_py)?;
            return output($py, r);
        }
        if let Some(inp) = read::<f32>($y, $x)? {
            let r = $py
                .detach(|| $f(&inp.data(), $arg, &$params))
                .map_err(to_py)?;
            return output($py, r);
        }
        Err(PyValueError::new_err(
            "y must be a 2-D float64 or float32 array",
        ))
    }};
}

/// Rolling least squares (see `cuqr.rolling_lstsq`).
#[pyfunction]
#[pyo3(signature = (y, x, window, min_nobs, expanding, forget, missing, refresh, rank_tol, device))]
#[allow(clippy::too_many_arguments)]
pub fn rolling<'py>(
    py: Python<'py>,
    y: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    window: usize,
    min_nobs: Option<usize>,
    expanding: bool,
    forget: Option<f64>,
    missing: &str,
    refresh: Option<usize>,
    rank_tol: Option<f64>,
    device: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let params = RollingParams {
        min_nobs,
        expanding,
        forget,
        missing: missing_of(missing)?,
        refresh,
        rank_tol,
        device: device_of(device)?,
    };
    by_dtype!(py, y, x, rolling_lstsq, window, params)
}

/// Recursive least squares (see `cuqr.recursive_lstsq`).
#[pyfunction]
#[pyo3(signature = (y, x, forget, missing, rank_tol, device))]
pub fn recursive<'py>(
    py: Python<'py>,
    y: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    forget: f64,
    missing: &str,
    rank_tol: Option<f64>,
    device: &str,
) -> PyResult<Bound<'py, PyTuple>> {
    let params = RecursiveParams {
        missing: missing_of(missing)?,
        rank_tol,
        device: device_of(device)?,
    };
    by_dtype!(py, y, x, recursive_lstsq, forget, params)
}

/// A device input's element type: 64 or 32 bits.
fn device_bits(obj: &Bound<'_, PyAny>, gpu: &Arc<Gpu>) -> PyResult<u8> {
    let imported = dlpack::import(obj, gpu.stream_handle())?;
    if imported.desc.complex {
        return Err(PyTypeError::new_err(
            "rolling least squares takes float32 or float64 data, not complex",
        ));
    }
    Ok(imported.desc.bits)
}

/// y (T × S) and X (T × k or T × S·k), row-major CUDA arrays, as matrices whose column t
/// is time step t.
fn device_inputs<T: GpuScalar>(
    y: &Bound<'_, PyAny>,
    x: &Bound<'_, PyAny>,
    gpu: &Arc<Gpu>,
) -> PyResult<(DevMat<T>, DevMat<T>)> {
    let yi = dlpack::import(y, gpu.stream_handle())?;
    let ym = yi.to_dev_mat_transposed::<T>(gpu)?;
    drop(yi);
    let xi = dlpack::import(x, gpu.stream_handle())?;
    let xm = xi.to_dev_mat_transposed::<T>(gpu)?;
    Ok((ym, xm))
}

/// What a device run does: a rolling window or recursive least squares.
enum DeviceRun {
    Rolling(usize, RollingParams),
    Recursive(f64, RecursiveParams),
}

fn device_run<'py, T: GpuScalar + Wrap>(
    py: Python<'py>,
    gpu: Arc<Gpu>,
    (y, x): (&Bound<'py, PyAny>, &Bound<'py, PyAny>),
    (k, per_series): (usize, bool),
    run: &DeviceRun,
) -> PyResult<Bound<'py, PyTuple>> {
    let (ym, xm) = device_inputs::<T>(y, x, &gpu)?;
    let res = py
        .detach(|| {
            let data = DeviceRollingData::from_columns(&ym, &xm, k, per_series);
            match run {
                DeviceRun::Rolling(w, p) => rolling_lstsq_device(&gpu, &data, *w, p),
                DeviceRun::Recursive(f, p) => recursive_lstsq_device(&gpu, &data, *f, p),
            }
        })
        .map_err(to_py)?;
    let counts = res.refactorisations();
    let (params, rss) = res.into_matrices();
    let params = DeviceArray::new(gpu.clone(), params);
    let rss = DeviceArray::new(gpu, rss);
    let counts = (counts.scheduled, counts.after_failed_downdate);
    (params, rss, counts).into_pyobject(py)
}

/// Rolling (`forget_recursive` None) or recursive least squares on CUDA arrays: y (T, S)
/// and X (T, k) or (T, S·k), row-major, one float dtype, on CUDA device `ordinal`.
/// Returns (params as an (S·k) × T device array, rss as S × T, (scheduled,
/// after_failed_downdate) refactorisations); column t of each is time step t.
#[pyfunction]
#[pyo3(signature = (y, x, k, per_series, ordinal, window, min_nobs, expanding, forget, missing, rank_tol, recursive))]
#[allow(clippy::too_many_arguments)]
pub fn rolling_device<'py>(
    py: Python<'py>,
    y: &Bound<'py, PyAny>,
    x: &Bound<'py, PyAny>,
    k: usize,
    per_series: bool,
    ordinal: usize,
    window: usize,
    min_nobs: Option<usize>,
    expanding: bool,
    forget: Option<f64>,
    missing: &str,
    rank_tol: Option<f64>,
    recursive: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let gpu = gpu_py(ordinal)?;
    let run = if recursive {
        DeviceRun::Recursive(
            forget.unwrap_or(1.0),
            RecursiveParams {
                missing: missing_of(missing)?,
                rank_tol,
                device: Device::Gpu(ordinal),
            },
        )
    } else {
        DeviceRun::Rolling(
            window,
            RollingParams {
                min_nobs,
                expanding,
                forget,
                missing: missing_of(missing)?,
                refresh: None,
                rank_tol,
                device: Device::Gpu(ordinal),
            },
        )
    };
    match device_bits(y, &gpu)? {
        64 => device_run::<f64>(py, gpu, (y, x), (k, per_series), &run),
        32 => device_run::<f32>(py, gpu, (y, x), (k, per_series), &run),
        b => Err(PyValueError::new_err(format!(
            "y must hold float32 or float64 values, found {b}-bit ones"
        ))),
    }
}
