//! Arrays across the boundary: NumPy arrays to cuqr's column-major [`Mat`] and back (one copy
//! in, none out), CUDA arrays through DLPack to [`DevMat`] and back, and the GPU contexts
//! shared by every state of a process.

use std::sync::{Arc, Mutex};

use cuqr::{DevMat, Gpu, GpuScalar, Mat};
use numpy::ndarray::{Array2, ArrayView2, ShapeBuilder};
use numpy::{Element, PyArray1, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::dlpack;
use crate::error::to_py;

/// The element types the extension handles.
pub trait Real: GpuScalar + Element {
    /// "float32" or "float64".
    const DTYPE_NAME: &'static str;
}
impl Real for f32 {
    const DTYPE_NAME: &'static str = "float32";
}
impl Real for f64 {
    const DTYPE_NAME: &'static str = "float64";
}

/// One GPU context per device ordinal for the whole process (opening one loads the CUDA
/// libraries and the kernels); a failure to open is remembered too.
static GPUS: Mutex<Vec<OpenedGpu>> = Mutex::new(Vec::new());

/// A device ordinal and its context, or why it did not open.
type OpenedGpu = (usize, Result<Arc<Gpu>, String>);

/// The shared context of CUDA device `ordinal`.
pub fn gpu(ordinal: usize) -> Result<Arc<Gpu>, String> {
    let mut all = GPUS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, g)) = all.iter().find(|(o, _)| *o == ordinal) {
        return g.clone();
    }
    // opening a device (also to ask whether it opens) leaves the thread's current device,
    // which CuPy and PyTorch follow, where it was
    let g = Gpu::new_leaving_context(ordinal)
        .map(Arc::new)
        .map_err(|e| e.to_string());
    all.push((ordinal, g.clone()));
    g
}

/// [`gpu`] as a Python error.
pub fn gpu_py(ordinal: usize) -> PyResult<Arc<Gpu>> {
    gpu(ordinal).map_err(|e| PyRuntimeError::new_err(format!("no usable CUDA device: {e}")))
}

/// The CUDA device of an array that speaks DLPack (`__dlpack_device__` says CUDA), or
/// `None` for a host array.
pub fn cuda_device_of(obj: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    if obj.cast::<numpy::PyUntypedArray>().is_ok() || !obj.hasattr("__dlpack_device__")? {
        return Ok(None);
    }
    let (kind, id): (i32, i32) = obj.call_method0("__dlpack_device__")?.extract()?;
    Ok(match kind {
        dlpack::DEVICE_CPU => None,
        2 | 13 => Some(id as usize),
        other => {
            return Err(PyValueError::new_err(format!(
                "arrays on DLPack device type {other} are not supported (CPU and CUDA are)"
            )))
        }
    })
}

/// Refuses a NumPy array whose elements cannot be read in place as `T`s: an unaligned one,
/// or one with a stride that is not a whole number of elements (a field of a structured
/// array), which a strided read in elements would misread. Axes of extent 0 or 1 never
/// move the address, so their strides do not matter.
pub fn check_layout<T: Real>(
    shape: &[usize],
    strides: &[isize],
    aligned: bool,
    what: &str,
) -> PyResult<()> {
    check_layout_as(
        std::mem::size_of::<T>(),
        <T as Real>::DTYPE_NAME,
        shape,
        strides,
        aligned,
        what,
    )
}

/// [`check_layout`] for elements of `item` bytes named `dtype` (any element type).
pub fn check_layout_as(
    item: usize,
    dtype: &str,
    shape: &[usize],
    strides: &[isize],
    aligned: bool,
    what: &str,
) -> PyResult<()> {
    let size = item as isize;
    let whole = shape
        .iter()
        .zip(strides)
        .all(|(&n, &s)| n <= 1 || s % size == 0);
    if aligned && whole {
        return Ok(());
    }
    Err(PyValueError::new_err(format!(
        "{what}: the array's memory layout cannot be read as {dtype} elements (unaligned, or \
         strides that are not a multiple of the item size); pass a copy, e.g. \
         numpy.asfortranarray({what})"
    )))
}

/// A NumPy array (1-D: one column; 2-D) of `T` copied into a column-major [`Mat`].
/// Any strides are read (negative and zero ones too); an array whose layout cannot be read
/// as `T`s in place is refused ([`check_layout`]).
pub fn host_mat<T: Real>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Mat<T>> {
    if let Ok(a) = obj.cast::<PyArray2<T>>() {
        check_layout::<T>(a.shape(), a.strides(), a.is_aligned(), what)?;
        let a = a.readonly();
        let (m, n) = (a.shape()[0], a.shape()[1]);
        if a.is_fortran_contiguous() {
            if let Ok(s) = a.as_slice() {
                return Mat::from_col_major(m, n, s.to_vec()).map_err(to_py);
            }
        }
        return Ok(mat_of(a.as_array()));
    }
    if let Ok(a) = obj.cast::<PyArray1<T>>() {
        check_layout::<T>(a.shape(), a.strides(), a.is_aligned(), what)?;
        let a = a.readonly();
        return Ok(Mat::from_col(&a.as_array().to_vec()));
    }
    Err(PyValueError::new_err(format!(
        "{what}: expected a 1-D or 2-D NumPy array of {} in native byte order",
        <T as Real>::DTYPE_NAME
    )))
}

/// A copy of a 2-D view (any strides) as a column-major [`Mat`].
pub fn mat_of<T: Real>(v: ArrayView2<'_, T>) -> Mat<T> {
    let (m, n) = v.dim();
    // each column contiguous, one after the other: one copy
    if let Some(s) = v.t().as_slice() {
        if let Ok(out) = Mat::from_col_major(m, n, s.to_vec()) {
            return out;
        }
    }
    let mut out = Mat::<T>::zeros(m, n);
    // tiles keep both the strided reads and the column writes in cache
    const TILE: usize = 32;
    if n > 0 && (n == 1 || v.strides()[1] == 1) {
        // each row contiguous (a C-ordered array or a slice of its columns): a tiled
        // transpose from the rows' slices
        let rows: Vec<&[T]> = (0..m)
            .map(|i| v.row(i).to_slice().expect("a row of unit stride"))
            .collect();
        let dst = out.as_mut_slice();
        for i0 in (0..m).step_by(TILE) {
            let i1 = (i0 + TILE).min(m);
            for j0 in (0..n).step_by(TILE) {
                let j1 = (j0 + TILE).min(n);
                for j in j0..j1 {
                    let col = &mut dst[j * m + i0..j * m + i1];
                    for (x, r) in col.iter_mut().zip(&rows[i0..i1]) {
                        *x = r[j];
                    }
                }
            }
        }
        return out;
    }
    for j0 in (0..n).step_by(TILE) {
        for i0 in (0..m).step_by(TILE) {
            for j in j0..(j0 + TILE).min(n) {
                let col = out.col_mut(j);
                for (i, x) in col.iter_mut().enumerate().take((i0 + TILE).min(m)).skip(i0) {
                    *x = v[[i, j]];
                }
            }
        }
    }
    out
}

/// A column-major [`Mat`] handed to NumPy without a copy (a Fortran-ordered array).
pub fn to_numpy<T: Real>(py: Python<'_>, m: Mat<T>) -> PyResult<Bound<'_, PyArray2<T>>> {
    let (r, c) = (m.nrows(), m.ncols());
    let a = Array2::from_shape_vec((r, c).f(), m.into_vec())
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArray2::from_owned_array(py, a))
}

/// An argument of an update: on the host, or (for a GPU state given CUDA arrays) on the
/// device.
pub enum Arg<T: GpuScalar> {
    /// A host matrix.
    Host(Mat<T>),
    /// A device matrix, copied from the caller's array device to device.
    Device(DevMat<T>),
}

impl<T: Real> Arg<T> {
    /// Reads `obj`: a CUDA array when `gpu` is given and `obj` lives on that device, else
    /// a NumPy array.
    pub fn read(obj: &Bound<'_, PyAny>, gpu: Option<&Arc<Gpu>>, what: &str) -> PyResult<Self> {
        match (cuda_device_of(obj)?, gpu) {
            (Some(dev), Some(g)) => {
                if dev != g.device_ordinal() {
                    return Err(PyValueError::new_err(format!(
                        "{what} is on CUDA device {dev}, the factorisation on device {}",
                        g.device_ordinal()
                    )));
                }
                Ok(Arg::Device(device_mat(obj, g)?))
            }
            (Some(dev), None) => Err(PyValueError::new_err(format!(
                "{what} is on CUDA device {dev} but the factorisation is on the CPU"
            ))),
            (None, _) => Ok(Arg::Host(host_mat(obj, what)?)),
        }
    }

    /// The argument on the host (a device one is downloaded).
    pub fn into_host(self, gpu: Option<&Arc<Gpu>>) -> PyResult<Mat<T>> {
        match (self, gpu) {
            (Arg::Host(m), _) => Ok(m),
            (Arg::Device(d), Some(g)) => d.to_host(g).map_err(to_py),
            (Arg::Device(_), None) => Err(PyRuntimeError::new_err("device data without a GPU")),
        }
    }
}

/// A CUDA array copied (device to device) into a [`DevMat`] on `gpu`.
pub fn device_mat<T: Real>(obj: &Bound<'_, PyAny>, gpu: &Arc<Gpu>) -> PyResult<DevMat<T>> {
    let imported = dlpack::import(obj, gpu.stream_handle())?;
    let m = imported.to_dev_mat::<T>(gpu)?;
    drop(imported);
    Ok(m)
}

/// A device matrix on its way out: a one-shot DLPack exporter that CuPy's and PyTorch's
/// `from_dlpack` take over without a copy.
#[pyclass(module = "cuqr._cuqr", name = "_DeviceArray")]
pub struct DeviceArray {
    mat: Option<AnyDevMat>,
    gpu: Arc<Gpu>,
    shape: (usize, usize),
    dtype: &'static str,
    /// The matrix holds the interleaved parts of a complex one.
    complex: bool,
}

/// A device matrix of either precision.
pub enum AnyDevMat {
    /// float32.
    F32(DevMat<f32>),
    /// float64.
    F64(DevMat<f64>),
}

/// Which precision a generic `T` is, for wrapping its matrices.
pub trait Wrap: Real {
    /// The device matrix in the enum.
    fn wrap(m: DevMat<Self>) -> AnyDevMat;
}
impl Wrap for f32 {
    fn wrap(m: DevMat<f32>) -> AnyDevMat {
        AnyDevMat::F32(m)
    }
}
impl Wrap for f64 {
    fn wrap(m: DevMat<f64>) -> AnyDevMat {
        AnyDevMat::F64(m)
    }
}

impl DeviceArray {
    /// Wraps a finished device matrix (the caller has waited for the work writing it).
    pub fn new<T: Wrap>(gpu: Arc<Gpu>, m: DevMat<T>) -> Self {
        Self {
            shape: (m.nrows(), m.ncols()),
            dtype: <T as Real>::DTYPE_NAME,
            mat: Some(T::wrap(m)),
            gpu,
            complex: false,
        }
    }

    /// Wraps a finished device matrix of parts: with `complex`, the 2m×n interleaved real
    /// and imaginary parts of a complex m×n matrix (handed over as that matrix), else a
    /// real matrix as [`DeviceArray::new`].
    pub fn parts<T: Wrap>(gpu: Arc<Gpu>, m: DevMat<T>, complex: bool) -> Self {
        if !complex {
            return Self::new(gpu, m);
        }
        Self {
            shape: (m.nrows() / 2, m.ncols()),
            dtype: if <T as Real>::DTYPE_NAME == "float32" {
                "complex64"
            } else {
                "complex128"
            },
            mat: Some(T::wrap(m)),
            gpu,
            complex: true,
        }
    }
}

#[pymethods]
impl DeviceArray {
    /// Hands the matrix over (DLPack 1.0 when the consumer asks with `max_version`, else
    /// the legacy capsule). The data is complete: cuqr waited for it before returning it.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__<'py>(
        &mut self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let _ = stream;
        if let Some((kind, id)) = dl_device {
            if kind != dlpack::DEVICE_CUDA || id as usize != self.gpu.device_ordinal() {
                return Err(PyValueError::new_err(
                    "cuqr device arrays can be exported to their own CUDA device only",
                ));
            }
        }
        if copy == Some(true) {
            return Err(PyValueError::new_err(
                "cuqr device arrays are handed over without a copy",
            ));
        }
        let versioned = matches!(max_version, Some((major, _)) if major >= 1);
        match self.mat.take() {
            Some(AnyDevMat::F32(m)) => dlpack::export(py, &self.gpu, m, versioned, self.complex),
            Some(AnyDevMat::F64(m)) => dlpack::export(py, &self.gpu, m, versioned, self.complex),
            None => Err(dlpack::consumed()),
        }
    }

    /// (kDLCUDA, device ordinal).
    fn __dlpack_device__(&self) -> (i32, i32) {
        (dlpack::DEVICE_CUDA, self.gpu.device_ordinal() as i32)
    }

    /// (rows, columns).
    #[getter]
    fn shape(&self) -> (usize, usize) {
        self.shape
    }

    /// "float32", "float64", "complex64" or "complex128".
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype
    }
}
