//! `_State`: one factorisation (CPU or GPU, float32 or float64) behind the Python `QR` class
//! and the SciPy-style functions. Arguments are read (and copied) while the interpreter lock
//! is held; the update itself runs with the lock released.
//!
//! Calls on one state are serialised: each has the state to itself from start to end (reads
//! included). Calls take turns in the order they arrive; one that must wait does so with the
//! interpreter lock released, so the call whose turn it is can take the interpreter lock
//! whenever it needs it. A call made from inside one of the same state's calls (by Python
//! code that reading an argument runs) is refused instead of waiting for itself.

use std::sync::Arc;

use cuqr::{
    DevMat, FactorParams, FactorsParams, Gpu, GpuQr, Mat, QPolicy, Qr, QrUpdate, UpdateParams,
};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::{cuda_device_of, gpu_py, host_mat, to_numpy, Arg, DeviceArray, Real, Wrap};
use crate::error::to_py;
use crate::turns::Serialised;

enum Inner {
    F32(Qr<f32>),
    F64(Qr<f64>),
}

/// Runs `$body` with `$s` the state (`&mut Qr<$T>`) of either precision; `$held` is the
/// locked state ([`Held`]).
macro_rules! with_state {
    ($held:expr, $s:ident, $T:ident => $body:expr) => {
        match inner_mut(&mut $held)? {
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

/// A factorisation A = QR with right-hand sides, on the CPU or a GPU (see the Python
/// `cuqr.QR` class, which wraps it). Calls on one state from several threads are serialised.
#[pyclass(module = "cuqr._cuqr", name = "_State", frozen)]
pub struct State {
    /// The factorisation, its calls served in turn; `None` once handed over
    /// (`take_factors`).
    inner: Serialised<Option<Inner>>,
    has_rhs: bool,
}

fn handed_over() -> PyErr {
    PyRuntimeError::new_err("this factorisation was handed over")
}

fn inner_mut(held: &mut Option<Inner>) -> PyResult<&mut Inner> {
    held.as_mut().ok_or_else(handed_over)
}

fn inner_ref(held: &Option<Inner>) -> PyResult<&Inner> {
    held.as_ref().ok_or_else(handed_over)
}

/// The GPU of a state on a device.
fn gpu_of(held: &Option<Inner>) -> Option<Arc<Gpu>> {
    match held.as_ref()? {
        Inner::F32(s) => s.as_gpu().map(|g| g.gpu().clone()),
        Inner::F64(s) => s.as_gpu().map(|g| g.gpu().clone()),
    }
}

/// A Python index (negative: counted back from `limit`) as a position; the state checks
/// the upper bound.
fn index(k: isize, limit: usize, name: &str) -> PyResult<usize> {
    let pos = if k < 0 {
        limit.checked_sub(k.unsigned_abs())
    } else {
        Some(k.unsigned_abs())
    };
    pos.ok_or_else(|| PyValueError::new_err(format!("'{name}' is out of bounds")))
}

/// (m, n) of a state.
fn dims(s: &Inner) -> (usize, usize) {
    match s {
        Inner::F32(s) => (s.nrows(), s.ncols()),
        Inner::F64(s) => (s.nrows(), s.ncols()),
    }
}

pub(crate) fn policy_of(s: &str) -> PyResult<QPolicy> {
    match s {
        "full" => Ok(QPolicy::Full),
        "thin" | "economic" => Ok(QPolicy::Thin),
        "none" | "r" => Ok(QPolicy::None),
        other => Err(PyValueError::new_err(format!(
            "q must be 'full', 'thin' or None, not {other:?}"
        ))),
    }
}

fn policy_name(p: QPolicy) -> &'static str {
    match p {
        QPolicy::Full => "full",
        QPolicy::Thin => "thin",
        _ => "none",
    }
}

/// Zeros of `rows × cols` on the state's side (host or device) for right-hand sides not
/// given.
fn zeros_like_arg<T: Real>(
    gpu: Option<&Arc<Gpu>>,
    device: bool,
    rows: usize,
    cols: usize,
) -> PyResult<Arg<T>> {
    match (device, gpu) {
        (true, Some(g)) => Ok(Arg::Device(DevMat::zeros(g, rows, cols).map_err(to_py)?)),
        _ => Ok(Arg::Host(Mat::zeros(rows, cols))),
    }
}

/// Rows of A (p×n; a vector is one row) and their right-hand sides (p×k; zeros when none)
/// on the host, for the row updates.
fn rows_with_rhs<T: Real>(
    s: &Qr<T>,
    gpu: Option<&Arc<Gpu>>,
    (rows, rows_name): (&Bound<'_, PyAny>, &str),
    (rhs, rhs_name): (Option<&Bound<'_, PyAny>>, &str),
) -> PyResult<(Mat<T>, Mat<T>)> {
    let rows = Arg::<T>::read(rows, gpu, rows_name)?.into_host(gpu)?;
    let rows = if rows.ncols() == 1 && s.ncols() != 1 {
        rows.transpose()
    } else {
        rows
    };
    let rhs = match rhs {
        Some(e) => Arg::<T>::read(e, gpu, rhs_name)?.into_host(gpu)?,
        None => Mat::zeros(rows.nrows(), s.nrhs()),
    };
    let rhs = if rhs.ncols() == 1 && rhs.nrows() != rows.nrows() {
        rhs.transpose()
    } else {
        rhs
    };
    Ok((rows, rhs))
}

fn arg_shape<T: Real>(a: &Arg<T>) -> (usize, usize) {
    match a {
        Arg::Host(m) => (m.nrows(), m.ncols()),
        Arg::Device(d) => (d.nrows(), d.ncols()),
    }
}

/// A state's matrix out: NumPy (`device` false) or a device exporter.
fn out_host_or_device<'py, T: Wrap>(
    py: Python<'py>,
    qr: &Qr<T>,
    device: bool,
    host: impl FnOnce(&Qr<T>) -> cuqr::Result<Mat<T>> + Send,
    dev: impl FnOnce(&GpuQr<T>) -> Option<&DevMat<T>>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match (device, qr.as_gpu()) {
        (true, Some(g)) => {
            let Some(m) = dev(g) else { return Ok(None) };
            let gpu = g.gpu().clone();
            let copy = py
                .detach(|| {
                    let c = m.try_clone(&gpu)?;
                    gpu.synchronize_stream()?;
                    Ok::<_, cuqr::Error>(c)
                })
                .map_err(to_py)?;
            Ok(Some(
                Bound::new(py, DeviceArray::new(gpu, copy))?.into_any(),
            ))
        }
        _ => {
            let m = py.detach(|| host(qr)).map_err(to_py)?;
            Ok(Some(to_numpy(py, m)?.into_any()))
        }
    }
}

impl State {
    fn wrap<T: Real>(qr: Qr<T>, has_rhs: bool) -> Self
    where
        Qr<T>: IntoInner,
    {
        Self {
            inner: Serialised::new(Some(qr.into_inner_enum()), "factorisation"),
            has_rhs,
        }
    }
}

/// The enum variant of a precision's state.
trait IntoInner {
    fn into_inner_enum(self) -> Inner;
}
impl IntoInner for Qr<f32> {
    fn into_inner_enum(self) -> Inner {
        Inner::F32(self)
    }
}
impl IntoInner for Qr<f64> {
    fn into_inner_enum(self) -> Inner {
        Inner::F64(self)
    }
}

fn factorize_t<T: Real>(
    py: Python<'_>,
    a: &Bound<'_, PyAny>,
    b: Option<&Bound<'_, PyAny>>,
    policy: QPolicy,
    keep_data: bool,
    device: Option<usize>,
) -> PyResult<Qr<T>> {
    let params = FactorParams {
        keep_data,
        ..FactorParams::default()
    };
    match device {
        None => {
            let a = host_mat::<T>(a, "A")?;
            let b = match b {
                Some(b) => host_mat::<T>(b, "b")?,
                None => Mat::zeros(a.nrows(), 1),
            };
            let st = py
                .detach(|| cuqr::CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params))
                .map_err(to_py)?;
            Ok(st.into())
        }
        Some(ord) => {
            let gpu = gpu_py(ord)?;
            let a = Arg::<T>::read(a, Some(&gpu), "A")?;
            let (m, _) = arg_shape(&a);
            let b = match b {
                Some(b) => Arg::<T>::read(b, Some(&gpu), "b")?,
                None => zeros_like_arg::<T>(Some(&gpu), true, m, 1)?,
            };
            let to_dev = |x: Arg<T>| match x {
                Arg::Device(d) => Ok(d),
                Arg::Host(h) => DevMat::from_host(&gpu, h.as_ref()),
            };
            let st = py
                .detach(|| GpuQr::factorize_dev(&gpu, to_dev(a)?, to_dev(b)?, policy, params))
                .map_err(to_py)?;
            Ok(st.into())
        }
    }
}

fn from_factors_t<T: Real>(
    py: Python<'_>,
    policy: QPolicy,
    m: usize,
    q: Option<&Bound<'_, PyAny>>,
    r: &Bound<'_, PyAny>,
    device: Option<usize>,
    params: FactorsParams,
) -> PyResult<Qr<T>> {
    match device {
        None => {
            let q = q.map(|q| host_mat::<T>(q, "Q")).transpose()?;
            let r = host_mat::<T>(r, "R")?;
            let st = py
                .detach(|| {
                    cuqr::CpuQr::from_factors(
                        policy,
                        m,
                        q.as_ref().map(|q| q.as_ref()),
                        r.as_ref(),
                        params,
                    )
                })
                .map_err(to_py)?;
            Ok(st.into())
        }
        Some(ord) => {
            let gpu = gpu_py(ord)?;
            let dev = |x: &Bound<'_, PyAny>, what| -> PyResult<DevMat<T>> {
                match Arg::<T>::read(x, Some(&gpu), what)? {
                    Arg::Device(d) => Ok(d),
                    Arg::Host(h) => DevMat::from_host(&gpu, h.as_ref()).map_err(to_py),
                }
            };
            let q = q.map(|q| dev(q, "Q")).transpose()?;
            let r = dev(r, "R")?;
            let st = py
                .detach(|| GpuQr::from_factors(&gpu, policy, m, q, r, params))
                .map_err(to_py)?;
            Ok(st.into())
        }
    }
}

/// Dispatches on the dtype name.
macro_rules! by_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            "float32" => {
                type $T = f32;
                Ok($body)
            }
            "float64" => {
                type $T = f64;
                Ok($body)
            }
            other => Err(PyValueError::new_err(format!(
                "cuqr supports float32 and float64, not {other}"
            ))),
        }
    };
}

#[pymethods]
impl State {
    /// Factorises A (m×n) with right-hand sides b (m×k, or none) on the CPU (`device`
    /// None) or CUDA device `device`.
    #[staticmethod]
    #[pyo3(signature = (a, b, policy, keep_data, device, dtype))]
    fn factorize(
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        b: Option<&Bound<'_, PyAny>>,
        policy: &str,
        keep_data: bool,
        device: Option<usize>,
        dtype: &str,
    ) -> PyResult<Self> {
        let policy = policy_of(policy)?;
        let has_rhs = b.is_some();
        by_dtype!(dtype, T => Self::wrap(factorize_t::<T>(py, a, b, policy, keep_data, device)?, has_rhs))
    }

    /// A state from factors computed elsewhere (Q: none for `policy` "none").
    #[staticmethod]
    #[pyo3(signature = (policy, m, q, r, device, dtype, check_finite=true, rank_tol=None))]
    #[allow(clippy::too_many_arguments)]
    fn from_factors(
        py: Python<'_>,
        policy: &str,
        m: usize,
        q: Option<&Bound<'_, PyAny>>,
        r: &Bound<'_, PyAny>,
        device: Option<usize>,
        dtype: &str,
        check_finite: bool,
        rank_tol: Option<f64>,
    ) -> PyResult<Self> {
        let policy = policy_of(policy)?;
        let params = FactorsParams {
            rank_tol,
            check_finite,
        };
        by_dtype!(dtype, T => Self::wrap(from_factors_t::<T>(py, policy, m, q, r, device, params)?, false))
    }

    /// Inserts the columns U (m×p, or a vector) before column k (negative: counted back
    /// from n + 1).
    fn insert_cols(&self, py: Python<'_>, k: isize, u: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let gpu = gpu_of(&st);
        let k = index(k, dims(inner_ref(&st)?).1 + 1, "k")?;
        with_state!(st, s, T => {
            let u = Arg::<T>::read(u, gpu.as_ref(), "u")?;
            py.detach(|| match u {
                Arg::Device(d) => s.as_gpu_mut().expect("device data on a GPU state").insert_cols_device(k, &d.view()),
                Arg::Host(h) => s.insert_cols(k, h.as_ref()),
            }).map_err(to_py)
        })
    }

    /// Deletes columns k..k+p (k negative: counted back from n).
    fn delete_cols(&self, py: Python<'_>, k: isize, p: usize) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let k = index(k, dims(inner_ref(&st)?).1, "k")?;
        with_state!(st, s, T => py.detach(|| s.delete_cols(k, p)).map_err(to_py))
    }

    /// Inserts the rows U (p×n, or a vector) with right-hand sides E (p×k; zeros when
    /// none) before row k (negative: counted back from m + 1).
    #[pyo3(signature = (k, u, e=None))]
    fn insert_rows(
        &self,
        py: Python<'_>,
        k: isize,
        u: &Bound<'_, PyAny>,
        e: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let gpu = gpu_of(&st);
        let k = index(k, dims(inner_ref(&st)?).0 + 1, "k")?;
        with_state!(st, s, T => {
            let (u, e) = rows_with_rhs::<T>(s, gpu.as_ref(), (u, "u"), (e, "e"))?;
            py.detach(|| s.insert_rows(k, u.as_ref(), e.as_ref())).map_err(to_py)
        })
    }

    /// Deletes rows k..k+p (needs Q or the kept data; k negative: counted back from m).
    fn delete_rows(&self, py: Python<'_>, k: isize, p: usize) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let k = index(k, dims(inner_ref(&st)?).0, "k")?;
        with_state!(st, s, T => py.detach(|| s.delete_rows(k, p)).map_err(to_py))
    }

    /// Deletes rows k..k+p given their contents (an R-only state without kept data; k
    /// negative: counted back from m).
    #[pyo3(signature = (k, rows, rhs=None))]
    fn delete_rows_with(
        &self,
        py: Python<'_>,
        k: isize,
        rows: &Bound<'_, PyAny>,
        rhs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let gpu = gpu_of(&st);
        let k = index(k, dims(inner_ref(&st)?).0, "k")?;
        with_state!(st, s, T => {
            let (rows, rhs) = rows_with_rhs::<T>(s, gpu.as_ref(), (rows, "rows"), (rhs, "rhs"))?;
            py.detach(|| s.delete_rows_with(k, rows.as_ref(), rhs.as_ref())).map_err(to_py)
        })
    }

    /// A ← A + u vᵀ.
    fn rank_one(&self, py: Python<'_>, u: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let gpu = gpu_of(&st);
        with_state!(st, s, T => {
            let u = Arg::<T>::read(u, gpu.as_ref(), "u")?;
            let v = Arg::<T>::read(v, gpu.as_ref(), "v")?;
            if arg_shape(&u).1 != 1 || arg_shape(&v).1 != 1 {
                return Err(PyValueError::new_err("rank_one takes two vectors; use rank_k for blocks"));
            }
            match (u, gpu.as_ref()) {
                // u on the device (m values): the update reads it there, v follows it
                (Arg::Device(ud), Some(g)) => {
                    let vd = match v {
                        Arg::Device(d) => d,
                        Arg::Host(h) => DevMat::from_host(g, h.as_ref()).map_err(to_py)?,
                    };
                    py.detach(|| {
                        s.as_gpu_mut()
                            .expect("device data on a GPU state")
                            .rank_one_device(&ud.view(), &vd.view())
                    })
                    .map_err(to_py)
                }
                (u, _) => {
                    let u = u.into_host(gpu.as_ref())?;
                    let v = v.into_host(gpu.as_ref())?;
                    py.detach(|| s.rank_one(u.col(0), v.col(0))).map_err(to_py)
                }
            }
        })
    }

    /// A ← A + U Vᵀ (U m×k, V n×k).
    fn rank_k(&self, py: Python<'_>, u: &Bound<'_, PyAny>, v: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let gpu = gpu_of(&st);
        with_state!(st, s, T => {
            let u = Arg::<T>::read(u, gpu.as_ref(), "U")?.into_host(gpu.as_ref())?;
            let v = Arg::<T>::read(v, gpu.as_ref(), "V")?.into_host(gpu.as_ref())?;
            py.detach(|| s.rank_k(u.as_ref(), v.as_ref())).map_err(to_py)
        })
    }

    /// Replaces columns k..k+p by U (m×p; k negative: counted back from n).
    fn replace_cols(&self, py: Python<'_>, k: isize, u: &Bound<'_, PyAny>) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let gpu = gpu_of(&st);
        let k = index(k, dims(inner_ref(&st)?).1, "k")?;
        with_state!(st, s, T => {
            let u = Arg::<T>::read(u, gpu.as_ref(), "U")?.into_host(gpu.as_ref())?;
            py.detach(|| s.replace_cols(k, u.as_ref())).map_err(to_py)
        })
    }

    /// Moves column `source` to position `target` (negative: counted back from n).
    fn shift_col(&self, py: Python<'_>, source: isize, target: isize) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let n = dims(inner_ref(&st)?).1;
        let (source, target) = (index(source, n, "source")?, index(target, n, "target")?);
        with_state!(st, s, T => py.detach(|| s.shift_col(source, target)).map_err(to_py))
    }

    /// One window step: the rows (p×n) with right-hand sides rhs (p×k; zeros when none)
    /// enter at the bottom, the `drop` oldest rows leave; `forget` (λ) sets the forgetting
    /// factor from now on.
    #[pyo3(signature = (rows, rhs=None, drop=0, forget=None))]
    fn slide(
        &self,
        py: Python<'_>,
        rows: &Bound<'_, PyAny>,
        rhs: Option<&Bound<'_, PyAny>>,
        drop: usize,
        forget: Option<f64>,
    ) -> PyResult<()> {
        let mut st = self.inner.lock(py)?;
        let gpu = gpu_of(&st);
        with_state!(st, s, T => {
            // A refused step leaves the state as it was, its forgetting factor included.
            let before = s.params();
            let out = (|| -> PyResult<()> {
                if let Some(l) = forget {
                    let p = UpdateParams { forget: l, ..s.params() };
                    s.set_params(p);
                }
                let rows = Arg::<T>::read(rows, gpu.as_ref(), "rows")?;
                let rows = match rows {
                    Arg::Host(h) if h.ncols() == 1 && s.ncols() != 1 => Arg::Host(h.transpose()),
                    other => other,
                };
                let (p, _) = arg_shape(&rows);
                let device = matches!(rows, Arg::Device(_));
                let rhs = match rhs {
                    Some(e) => Arg::<T>::read(e, gpu.as_ref(), "rhs")?,
                    None => zeros_like_arg::<T>(gpu.as_ref(), device, p, s.nrhs())?,
                };
                py.detach(|| match (rows, rhs) {
                    (Arg::Device(r), Arg::Device(e)) => s
                        .as_gpu_mut()
                        .expect("device data on a GPU state")
                        .slide_device(&r.view(), &e.view(), drop),
                    (r, e) => {
                        let host = |a: Arg<T>| match a {
                            Arg::Host(h) => Ok(h),
                            Arg::Device(d) => d.to_host(gpu.as_ref().expect("device data on a GPU state")),
                        };
                        let (r, e) = (host(r)?, host(e)?);
                        s.slide(r.as_ref(), e.as_ref(), drop)
                    }
                }).map_err(to_py)
            })();
            if out.is_err() {
                s.set_params(before);
            }
            out
        })
    }

    /// The least-squares solution x (n×k) and the residual norms ‖b − A x‖ per column.
    #[pyo3(signature = (device=false))]
    fn solve<'py>(&self, py: Python<'py>, device: bool) -> PyResult<(Bound<'py, PyAny>, Vec<f64>)> {
        if !self.has_rhs {
            return Err(PyValueError::new_err(
                "this factorisation has no right-hand side: pass b when building it",
            ));
        }
        let mut st = self.inner.lock(py)?;
        let gpu = gpu_of(&st);
        with_state!(st, s, T => {
            let sol = py.detach(|| s.solve()).map_err(to_py)?;
            let x = match (device, gpu) {
                (true, Some(g)) => {
                    let d = py.detach(|| {
                        let d = DevMat::from_host(&g, sol.x.as_ref())?;
                        g.synchronize_stream()?;
                        Ok::<_, cuqr::Error>(d)
                    }).map_err(to_py)?;
                    Bound::new(py, DeviceArray::new(g, d))?.into_any()
                }
                _ => to_numpy(py, sol.x)?.into_any(),
            };
            Ok((x, sol.residual_norms))
        })
    }

    /// R (m×n for the full kind, n×n otherwise).
    #[pyo3(signature = (device=false))]
    fn r<'py>(&self, py: Python<'py>, device: bool) -> PyResult<Bound<'py, PyAny>> {
        let st = self.inner.lock(py)?;
        let out = match inner_ref(&st)? {
            Inner::F32(s) => out_host_or_device(py, s, device, |q| q.r(), |g| Some(g.r_dev()))?,
            Inner::F64(s) => out_host_or_device(py, s, device, |q| q.r(), |g| Some(g.r_dev()))?,
        };
        Ok(out.expect("R always exists"))
    }

    /// Q (m×m), Q₁ (m×n) or None.
    #[pyo3(signature = (device=false))]
    fn q<'py>(&self, py: Python<'py>, device: bool) -> PyResult<Option<Bound<'py, PyAny>>> {
        fn host<T: Real>(q: &Qr<T>) -> cuqr::Result<Mat<T>> {
            q.q().map(|x| x.unwrap_or_else(|| Mat::zeros(0, 0)))
        }
        let st = self.inner.lock(py)?;
        let has_q = match inner_ref(&st)? {
            Inner::F32(s) => s.q_policy() != QPolicy::None,
            Inner::F64(s) => s.q_policy() != QPolicy::None,
        };
        if !has_q {
            return Ok(None);
        }
        match inner_ref(&st)? {
            Inner::F32(s) => out_host_or_device(py, s, device, host, |g| g.q_dev()),
            Inner::F64(s) => out_host_or_device(py, s, device, host, |g| g.q_dev()),
        }
    }

    /// d = Qᵀb (m×k for the full kind, n×k otherwise).
    #[pyo3(signature = (device=false))]
    fn d<'py>(&self, py: Python<'py>, device: bool) -> PyResult<Bound<'py, PyAny>> {
        let st = self.inner.lock(py)?;
        let out = match inner_ref(&st)? {
            Inner::F32(s) => out_host_or_device(py, s, device, |q| q.d(), |g| Some(g.d_dev()))?,
            Inner::F64(s) => out_host_or_device(py, s, device, |q| q.d(), |g| Some(g.d_dev()))?,
        };
        Ok(out.expect("d always exists"))
    }

    /// (Q or None, R), handing the state's buffers over without a copy; the state is
    /// unusable afterwards.
    #[pyo3(signature = (device=false))]
    fn take_factors<'py>(
        &self,
        py: Python<'py>,
        device: bool,
    ) -> PyResult<(Option<Bound<'py, PyAny>>, Bound<'py, PyAny>)> {
        fn out<'py, T: Wrap>(
            py: Python<'py>,
            qr: Qr<T>,
            device: bool,
        ) -> PyResult<(Option<Bound<'py, PyAny>>, Bound<'py, PyAny>)> {
            match qr.into_state() {
                cuqr::QrState::Cpu(cpu) => {
                    let (q, r) = cpu.into_factors();
                    let q = q
                        .map(|q| to_numpy(py, q).map(|a| a.into_any()))
                        .transpose()?;
                    Ok((q, to_numpy(py, r)?.into_any()))
                }
                cuqr::QrState::Gpu(g) => {
                    let gpu = g.gpu().clone();
                    let (q, r) = g.into_factors();
                    if device {
                        gpu.synchronize_stream().map_err(to_py)?;
                        let wrap = |m: DevMat<T>| {
                            Bound::new(py, DeviceArray::new(gpu.clone(), m)).map(|b| b.into_any())
                        };
                        Ok((q.map(wrap).transpose()?, wrap(r)?))
                    } else {
                        let host = |m: DevMat<T>| {
                            let h = py.detach(|| m.to_host(&gpu)).map_err(to_py)?;
                            to_numpy(py, h).map(|a| a.into_any())
                        };
                        Ok((q.map(host).transpose()?, host(r)?))
                    }
                }
            }
        }
        // the state leaves the mutex: later calls find it handed over
        let taken = self.inner.lock(py)?.take();
        match taken {
            Some(Inner::F32(s)) => out(py, s, device),
            Some(Inner::F64(s)) => out(py, s, device),
            None => Err(handed_over()),
        }
    }

    /// Waits for the work cuqr queued on the device (nothing on the CPU).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let st = self.inner.lock(py)?;
        inner_ref(&st)?;
        match gpu_of(&st) {
            Some(g) => py.detach(|| g.synchronize_stream()).map_err(to_py),
            None => Ok(()),
        }
    }

    /// (m, n, k): rows, columns, right-hand sides.
    #[getter]
    fn shape(&self, py: Python<'_>) -> PyResult<(usize, usize, usize)> {
        let st = self.inner.lock(py)?;
        Ok(match inner_ref(&st)? {
            Inner::F32(s) => (s.nrows(), s.ncols(), s.nrhs()),
            Inner::F64(s) => (s.nrows(), s.ncols(), s.nrhs()),
        })
    }

    /// "full", "thin" or "none".
    #[getter]
    fn policy(&self, py: Python<'_>) -> PyResult<&'static str> {
        let st = self.inner.lock(py)?;
        Ok(match inner_ref(&st)? {
            Inner::F32(s) => policy_name(s.q_policy()),
            Inner::F64(s) => policy_name(s.q_policy()),
        })
    }

    /// "cpu" or "cuda:N".
    #[getter]
    fn device(&self, py: Python<'_>) -> PyResult<String> {
        let st = self.inner.lock(py)?;
        inner_ref(&st)?;
        Ok(match gpu_of(&st) {
            Some(g) => format!("cuda:{}", g.device_ordinal()),
            None => "cpu".into(),
        })
    }

    /// "float32" or "float64".
    #[getter]
    fn dtype(&self, py: Python<'_>) -> PyResult<&'static str> {
        let st = self.inner.lock(py)?;
        Ok(match inner_ref(&st)? {
            Inner::F32(_) => "float32",
            Inner::F64(_) => "float64",
        })
    }

    /// Whether the state was built with right-hand sides.
    #[getter]
    fn has_rhs(&self) -> bool {
        self.has_rhs
    }

    /// The forgetting factor λ of `slide`.
    #[getter]
    fn forget(&self, py: Python<'_>) -> PyResult<f64> {
        let st = self.inner.lock(py)?;
        Ok(match inner_ref(&st)? {
            Inner::F32(s) => s.params().forget,
            Inner::F64(s) => s.params().forget,
        })
    }

    /// Accuracy against the matrix the state stands for (A m×n and b m×k on the host).
    fn diagnostics<'py>(
        &self,
        py: Python<'py>,
        a: &Bound<'py, PyAny>,
        b: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut st = self.inner.lock(py)?;
        let dg = with_state!(st, s, T => {
            let a = host_mat::<T>(a, "A")?;
            let b = host_mat::<T>(b, "b")?;
            let s: &Qr<T> = s;
            py.detach(|| cuqr::diagnostics(s, a.as_ref(), b.as_ref())).map_err(to_py)?
        });
        let d = PyDict::new(py);
        d.set_item("e_q", dg.e_q)?;
        d.set_item("e_a", dg.e_a)?;
        d.set_item("l_norm", dg.l_norm)?;
        d.set_item("e_x", dg.e_x)?;
        d.set_item("e_gram", dg.e_gram)?;
        d.set_item("residual", dg.residual)?;
        d.set_item("drift", drift_dict(py, &dg.drift)?)?;
        Ok(d)
    }

    /// The drift record (docs: drift control): the last estimate and the counts.
    fn drift<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut st = self.inner.lock(py)?;
        let r = with_state!(st, s, T => s.drift());
        drift_dict(py, &r)
    }

    /// Measures the drift now (and refreshes past the threshold).
    fn check_drift<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let mut st = self.inner.lock(py)?;
        let r = with_state!(st, s, T => py.detach(|| s.check_drift()).map_err(to_py)?);
        drift_dict(py, &r)
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

/// Whether CUDA device `ordinal` opens (the first call loads the CUDA libraries).
#[pyfunction]
#[pyo3(signature = (ordinal=0))]
pub fn cuda_available(ordinal: usize) -> bool {
    crate::convert::gpu(ordinal).is_ok()
}

/// Why CUDA device `ordinal` does not open, or None when it does.
#[pyfunction]
#[pyo3(signature = (ordinal=0))]
pub fn cuda_unavailable_reason(ordinal: usize) -> Option<String> {
    crate::convert::gpu(ordinal).err()
}

/// The CUDA device of an array (None for a host array).
#[pyfunction]
pub fn array_device(obj: &Bound<'_, PyAny>) -> PyResult<Option<usize>> {
    cuda_device_of(obj)
}

/// Sets the number of CPU threads of the CPU backend (0: all cores).
#[pyfunction]
pub fn set_threads(n: usize) {
    cuqr::cpu::set_threads(n);
}

/// The number of CPU threads the CPU backend uses.
#[pyfunction]
pub fn threads() -> usize {
    cuqr::cpu::threads()
}
