//! `_ExplicitState`: explicit factors (Q, R) of any shape in float32, float64, complex64 or
//! complex128, held between updates (the Python `cuqr.ExplicitQR` class): on the CPU
//! ([`ExplicitQr`]) or with Q in device memory ([`GpuExplicitQr`]). Arguments are read
//! while the interpreter lock is held; the update runs with it released. Calls on one
//! state are served in turn, as `_State`'s are.

use cuqr::explicit::{c32, c64, ExplicitQr, Field, GpuExplicitQr};
use numpy::PyArray2;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::{gpu_py, DeviceArray};
use crate::dlpack;
use crate::error::to_py;
use crate::explicit::{read, span_error, write, Elem, Updates};
use crate::turns::Serialised;

/// The factors, of one of the four element types, on the CPU or a GPU.
enum Any {
    CpuF32(ExplicitQr<f32>),
    CpuF64(ExplicitQr<f64>),
    CpuC32(ExplicitQr<c32>),
    CpuC64(ExplicitQr<c64>),
    GpuF32(GpuExplicitQr<f32>),
    GpuF64(GpuExplicitQr<f64>),
    GpuC32(GpuExplicitQr<c32>),
    GpuC64(GpuExplicitQr<c64>),
}

/// Runs `$body` with `$s` the factors (`&mut` an [`Updates`] of `$T`) of any variant.
macro_rules! with_any {
    ($any:expr, $s:ident, $T:ident => $body:expr) => {
        match $any {
            Any::CpuF32($s) => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            Any::CpuF64($s) => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            Any::CpuC32($s) => {
                #[allow(dead_code)]
                type $T = c32;
                $body
            }
            Any::CpuC64($s) => {
                #[allow(dead_code)]
                type $T = c64;
                $body
            }
            Any::GpuF32($s) => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            Any::GpuF64($s) => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            Any::GpuC32($s) => {
                #[allow(dead_code)]
                type $T = c32;
                $body
            }
            Any::GpuC64($s) => {
                #[allow(dead_code)]
                type $T = c64;
                $body
            }
        }
    };
}

/// Shapes and the element type of either state.
trait Shapes {
    fn q_shape(&self) -> (usize, usize);
    fn r_shape(&self) -> (usize, usize);
}
impl<T: Field> Shapes for ExplicitQr<T> {
    fn q_shape(&self) -> (usize, usize) {
        ExplicitQr::q_shape(self)
    }
    fn r_shape(&self) -> (usize, usize) {
        ExplicitQr::r_shape(self)
    }
}
impl<T: cuqr::GpuField> Shapes for GpuExplicitQr<T> {
    fn q_shape(&self) -> (usize, usize) {
        GpuExplicitQr::q_shape(self)
    }
    fn r_shape(&self) -> (usize, usize) {
        GpuExplicitQr::r_shape(self)
    }
}

/// Which element type a NumPy array holds (R's, which decides the state's).
fn dtype_of(r: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    Ok(if r.cast::<PyArray2<f64>>().is_ok() {
        "float64"
    } else if r.cast::<PyArray2<f32>>().is_ok() {
        "float32"
    } else if r.cast::<PyArray2<c64>>().is_ok() {
        "complex128"
    } else if r.cast::<PyArray2<c32>>().is_ok() {
        "complex64"
    } else {
        return Err(PyValueError::new_err(
            "expected a 2-D NumPy array of float32, float64, complex64 or complex128",
        ));
    })
}

/// Host factors from NumPy Q and R.
fn host_state<T: Elem>(q: &Bound<'_, PyAny>, r: &Bound<'_, PyAny>) -> PyResult<ExplicitQr<T>> {
    let (qm, qn, qd) = read::<T>(q, "Q")?;
    let (rm, rn, rd) = read::<T>(r, "R")?;
    ExplicitQr::new(&qd, (qm, qn), &rd, (rm, rn)).map_err(to_py)
}

/// Factors with Q a CUDA array (complex ones in Fortran order) on `device`, R on the host.
fn device_state<T: Elem>(
    q: &Bound<'_, PyAny>,
    r: &Bound<'_, PyAny>,
    device: usize,
) -> PyResult<GpuExplicitQr<T>> {
    let (rm, rn, rd) = read::<T>(r, "R")?;
    let gpu = gpu_py(device)?;
    let imported = dlpack::import(q, gpu.stream_handle())?;
    let desc = imported.desc.clone();
    if desc.complex != T::IS_COMPLEX || desc.device.1 as usize != device {
        return Err(PyValueError::new_err(format!(
            "Q must be a {} array on CUDA device {device}",
            T::DTYPE
        )));
    }
    let parts = imported.to_dev_parts::<<T as Field>::Real>(&gpu)?;
    drop(imported);
    GpuExplicitQr::from_device(&gpu, parts, desc.shape, &rd, (rm, rn)).map_err(to_py)
}

/// Explicit factors held between updates (see the Python `cuqr.ExplicitQR`).
#[pyclass(module = "cuqr._cuqr", name = "_ExplicitState", frozen)]
pub struct ExplicitState {
    inner: Serialised<Any>,
    device: Option<usize>,
}

impl ExplicitState {
    fn new(any: Any, device: Option<usize>) -> Self {
        Self {
            inner: Serialised::new(any, "ExplicitQR"),
            device,
        }
    }

    /// Runs an update that takes no arrays with the lock released.
    fn update<F>(&self, py: Python<'_>, f: F) -> PyResult<()>
    where
        F: FnOnce(&mut Any) -> cuqr::Result<()> + Send,
    {
        let mut st = self.inner.lock(py)?;
        let any: &mut Any = &mut st;
        py.detach(|| f(any)).map_err(to_py)
    }
}

#[pymethods]
impl ExplicitState {
    /// The factors (Q, R) as given: NumPy arrays (held on the CPU), or Q a CUDA array on
    /// `device` (complex ones in Fortran order) with R a NumPy array (Q held in device
    /// memory). R's dtype is the state's; Q's must match.
    #[new]
    #[pyo3(signature = (q, r, device=None))]
    fn py_new(q: &Bound<'_, PyAny>, r: &Bound<'_, PyAny>, device: Option<usize>) -> PyResult<Self> {
        let any = match (dtype_of(r)?, device) {
            ("float32", None) => Any::CpuF32(host_state(q, r)?),
            ("float64", None) => Any::CpuF64(host_state(q, r)?),
            ("complex64", None) => Any::CpuC32(host_state(q, r)?),
            ("complex128", None) => Any::CpuC64(host_state(q, r)?),
            ("float32", Some(d)) => Any::GpuF32(device_state(q, r, d)?),
            ("float64", Some(d)) => Any::GpuF64(device_state(q, r, d)?),
            ("complex64", Some(d)) => Any::GpuC32(device_state(q, r, d)?),
            (_, Some(d)) => Any::GpuC64(device_state(q, r, d)?),
            (_, None) => Any::CpuC64(host_state(q, r)?),
        };
        Ok(Self::new(any, device))
    }

    /// The QR factorisation of the NumPy array `a` (m×n): economic when `economic` and
    /// m > n, else full; on the CPU (faer), or on `device` (cuSOLVER) with Q kept there.
    #[staticmethod]
    #[pyo3(signature = (a, economic, device=None))]
    fn factorize(
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        economic: bool,
        device: Option<usize>,
    ) -> PyResult<Self> {
        /// The factorisation on the CPU or on a GPU.
        enum Made<T: Elem> {
            Cpu(ExplicitQr<T>),
            Gpu(GpuExplicitQr<T>),
        }
        fn go<T: Elem>(
            py: Python<'_>,
            a: &Bound<'_, PyAny>,
            economic: bool,
            device: Option<usize>,
        ) -> PyResult<Made<T>> {
            let (m, n, ad) = read::<T>(a, "A")?;
            match device {
                None => py
                    .detach(|| ExplicitQr::factorize(&ad, (m, n), economic))
                    .map(Made::Cpu)
                    .map_err(to_py),
                Some(d) => {
                    let gpu = gpu_py(d)?;
                    py.detach(|| GpuExplicitQr::factorize(&gpu, &ad, (m, n), economic))
                        .map(Made::Gpu)
                        .map_err(to_py)
                }
            }
        }
        macro_rules! pick {
            ($T:ty, $cpu:ident, $gpu:ident) => {
                match go::<$T>(py, a, economic, device)? {
                    Made::Cpu(s) => Any::$cpu(s),
                    Made::Gpu(s) => Any::$gpu(s),
                }
            };
        }
        let any = match dtype_of(a)? {
            "float32" => pick!(f32, CpuF32, GpuF32),
            "float64" => pick!(f64, CpuF64, GpuF64),
            "complex64" => pick!(c32, CpuC32, GpuC32),
            _ => pick!(c64, CpuC64, GpuC64),
        };
        Ok(Self::new(any, device))
    }

    /// Inserts the p×n rows `u` (a NumPy array of the state's dtype) before row `k`.
    fn insert_rows(&self, py: Python<'_>, k: usize, u: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        with_any!(&mut *st, s, T => {
            let (p, _, rows) = read::<T>(u, "u")?;
            py.detach(|| Updates::insert_rows(s, k, &rows, p)).map_err(to_py)
        })
    }

    /// Inserts the m×p columns `u` before column `k`; an economic Q refuses a column
    /// whose reciprocal condition estimate is below `rcond` (SciPy's `LinAlgError`).
    #[pyo3(signature = (k, u, rcond=None))]
    fn insert_cols(
        &self,
        py: Python<'_>,
        k: usize,
        u: &Bound<'_, PyAny>,
        rcond: Option<f64>,
    ) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let out = with_any!(&mut *st, s, T => {
            let (_, p, cols) = read::<T>(u, "u")?;
            py.detach(|| Updates::insert_cols(s, k, &cols, p, rcond))
        });
        out.map_err(|e| match e {
            cuqr::Error::RankDeficient { r_jj, .. } => span_error(r_jj),
            e => to_py(e),
        })
    }

    /// Deletes rows k..k+p.
    fn delete_rows(&self, py: Python<'_>, k: usize, p: usize) -> PyResult<()> {
        self.update(
            py,
            |any| with_any!(any, s, T => Updates::<T>::delete_rows(s, k, p)),
        )
    }

    /// Deletes columns k..k+p.
    fn delete_cols(&self, py: Python<'_>, k: usize, p: usize) -> PyResult<()> {
        self.update(
            py,
            |any| with_any!(any, s, T => Updates::<T>::delete_cols(s, k, p)),
        )
    }

    /// A ← A + U·Vᴴ, U (m×k) and V (n×k) NumPy arrays of the state's dtype.
    fn rank_k(&self, py: Python<'_>, u: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        with_any!(&mut *st, s, T => {
            let (_, p, ud) = read::<T>(u, "u")?;
            let (_, pv, vd) = read::<T>(v, "v")?;
            if pv != p {
                return Err(PyValueError::new_err(format!(
                    "u has {p} columns and v {pv}: they must match"
                )));
            }
            py.detach(|| Updates::rank_k(s, &ud, &vd, p)).map_err(to_py)
        })
    }

    /// Q: a NumPy array (CPU state) or a cuqr device array (Fortran order) on the state's
    /// GPU. A copy: later updates do not change it.
    fn q<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut st = self.inner.lock(py)?;
        macro_rules! host {
            ($s:ident) => {{
                let (m, t) = $s.q_shape();
                Ok(write(py, m, t, $s.q().to_vec()))
            }};
        }
        macro_rules! dev {
            ($s:ident, $T:ty) => {{
                let gpu = gpu_py(self.device.unwrap_or(0))?;
                let q = py
                    .detach(|| {
                        let q = $s.q_device()?;
                        gpu.synchronize_stream()?;
                        Ok(q)
                    })
                    .map_err(to_py)?;
                Ok(
                    Bound::new(py, DeviceArray::parts(gpu, q, <$T as Field>::IS_COMPLEX))?
                        .into_any(),
                )
            }};
        }
        match &mut *st {
            Any::CpuF32(s) => host!(s),
            Any::CpuF64(s) => host!(s),
            Any::CpuC32(s) => host!(s),
            Any::CpuC64(s) => host!(s),
            Any::GpuF32(s) => dev!(s, f32),
            Any::GpuF64(s) => dev!(s, f64),
            Any::GpuC32(s) => dev!(s, c32),
            Any::GpuC64(s) => dev!(s, c64),
        }
    }

    /// R, a NumPy array (held on the host by both kinds of state).
    fn r<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let st = self.inner.lock(py)?;
        let any: &Any = &st;
        Ok(with_any!(any, s, T => {
            let (t, n) = Shapes::r_shape(s);
            write::<T>(py, t, n, s.r())
        }))
    }

    /// (Q's shape, R's shape).
    fn shapes(&self, py: Python<'_>) -> PyResult<((usize, usize), (usize, usize))> {
        let st = self.inner.lock(py)?;
        let any: &Any = &st;
        Ok(with_any!(any, s, T => (Shapes::q_shape(s), Shapes::r_shape(s))))
    }

    /// The element type: "float32", "float64", "complex64" or "complex128".
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<&'static str> {
        let st = self.inner.lock(py)?;
        let any: &Any = &st;
        Ok(with_any!(any, _s, T => <T as Elem>::DTYPE))
    }

    /// The CUDA device that holds Q, or `None` for a CPU state.
    #[getter]
    fn device(&self) -> Option<usize> {
        self.device
    }
}
