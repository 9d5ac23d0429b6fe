//! SciPy-style updates of explicit factors (Q, R) for the cases cuqr's states do not take:
//! complex elements and wide (M < N) factorisations, on the CPU
//! ([`cuqr::explicit::ExplicitQr`], [`explicit_update`]) or with Q on the GPU
//! ([`cuqr::explicit::GpuExplicitQr`], [`explicit_update_device`]). The package's
//! `qr_insert`, `qr_delete` and `qr_update` call them after SciPy's argument checks.

use cuqr::explicit::{c32, c64, ExplicitQr, Field, GpuExplicitQr, QrField};
use cuqr::GpuField;
use numpy::ndarray::{Array2, ShapeBuilder};
use numpy::{Element, IntoPyArray, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::{check_layout_as, gpu_py, DeviceArray, Wrap};
use crate::dlpack;
use crate::error::{linalg_error, to_py};

/// Element types of the explicit updates, with NumPy's dtype names.
pub(crate) trait Elem: Field<Real: Wrap> + GpuField + QrField + Element {
    const DTYPE: &'static str;
}
impl Elem for f32 {
    const DTYPE: &'static str = "float32";
}
impl Elem for f64 {
    const DTYPE: &'static str = "float64";
}
impl Elem for c32 {
    const DTYPE: &'static str = "complex64";
}
impl Elem for c64 {
    const DTYPE: &'static str = "complex128";
}

/// A 2-D NumPy array of `T` as (rows, cols, column-major entries); any strides are read, a
/// layout that cannot be read as `T`s is refused.
pub(crate) fn read<T: Elem>(
    obj: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<(usize, usize, Vec<T>)> {
    let a = obj.cast::<PyArray2<T>>().map_err(|_| {
        PyValueError::new_err(format!(
            "{what}: expected a 2-D NumPy array of {} in native byte order",
            T::DTYPE
        ))
    })?;
    check_layout_as(
        std::mem::size_of::<T>(),
        T::DTYPE,
        a.shape(),
        a.strides(),
        a.is_aligned(),
        what,
    )?;
    let a = a.readonly();
    let v = a.as_array();
    let (m, n) = v.dim();
    if let (true, Ok(s)) = (v.t().is_standard_layout(), a.as_slice()) {
        // Fortran order: memory order is column-major
        return Ok((m, n, s.to_vec()));
    }
    let mut data = Vec::with_capacity(m * n);
    for col in v.columns() {
        data.extend(col.iter().copied());
    }
    Ok((m, n, data))
}

/// A column-major block as a Fortran-ordered NumPy array.
pub(crate) fn write<'py, T: Elem>(
    py: Python<'py>,
    rows: usize,
    cols: usize,
    data: Vec<T>,
) -> Bound<'py, PyAny> {
    Array2::from_shape_vec((rows, cols).f(), data)
        .expect("the factors' shapes match their lengths")
        .into_pyarray(py)
        .into_any()
}

/// The update `op` of the factorisation (Q, R): `"insert_rows"` (`a` the p×N rows,
/// inserted before row `k`), `"insert_cols"` (`a` the M×p columns, before column `k`,
/// refused below `rcond` for an economic Q), `"delete_rows"` / `"delete_cols"` (`p` of them
/// from `k`), `"update"` (A + a·bᴴ, `a` M×p and `b` N×p). Returns the new (Q, R) as
/// Fortran-ordered arrays. Q, R, `a` and `b` must share one dtype of float32, float64,
/// complex64 and complex128.
#[pyfunction]
#[pyo3(signature = (op, q, r, a=None, b=None, k=0, p=0, rcond=None))]
#[allow(clippy::too_many_arguments)]
pub fn explicit_update<'py>(
    py: Python<'py>,
    op: &str,
    q: &Bound<'py, PyAny>,
    r: &Bound<'py, PyAny>,
    a: Option<&Bound<'py, PyAny>>,
    b: Option<&Bound<'py, PyAny>>,
    k: usize,
    p: usize,
    rcond: Option<f64>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let call = Call {
        op,
        a,
        b,
        k,
        p,
        rcond,
    };
    if q.cast::<PyArray2<f64>>().is_ok() {
        call.run::<f64>(py, q, r)
    } else if q.cast::<PyArray2<f32>>().is_ok() {
        call.run::<f32>(py, q, r)
    } else if q.cast::<PyArray2<c64>>().is_ok() {
        call.run::<c64>(py, q, r)
    } else if q.cast::<PyArray2<c32>>().is_ok() {
        call.run::<c32>(py, q, r)
    } else {
        Err(PyValueError::new_err(
            "Q: expected a 2-D NumPy array of float32, float64, complex64 or complex128",
        ))
    }
}

/// [`explicit_update`] with Q in device memory: `q` a CUDA array (CuPy, PyTorch or any
/// DLPack producer; complex ones in Fortran order) on device `device`, R, `a` and `b`
/// NumPy arrays of Q's dtype. Q is copied device to device, updated on the GPU
/// ([`GpuExplicitQr`]) and returned as a cuqr device array (Fortran order); R comes back
/// as a NumPy array.
#[pyfunction]
#[pyo3(signature = (op, q, r, device, a=None, b=None, k=0, p=0, rcond=None))]
#[allow(clippy::too_many_arguments)]
pub fn explicit_update_device<'py>(
    py: Python<'py>,
    op: &str,
    q: &Bound<'py, PyAny>,
    r: &Bound<'py, PyAny>,
    device: usize,
    a: Option<&Bound<'py, PyAny>>,
    b: Option<&Bound<'py, PyAny>>,
    k: usize,
    p: usize,
    rcond: Option<f64>,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let call = Call {
        op,
        a,
        b,
        k,
        p,
        rcond,
    };
    if r.cast::<PyArray2<f64>>().is_ok() {
        call.run_device::<f64>(py, q, r, device)
    } else if r.cast::<PyArray2<f32>>().is_ok() {
        call.run_device::<f32>(py, q, r, device)
    } else if r.cast::<PyArray2<c64>>().is_ok() {
        call.run_device::<c64>(py, q, r, device)
    } else if r.cast::<PyArray2<c32>>().is_ok() {
        call.run_device::<c32>(py, q, r, device)
    } else {
        Err(PyValueError::new_err(
            "R: expected a 2-D NumPy array of float32, float64, complex64 or complex128",
        ))
    }
}

/// One call's arguments besides Q and R.
struct Call<'a, 'py> {
    op: &'a str,
    a: Option<&'a Bound<'py, PyAny>>,
    b: Option<&'a Bound<'py, PyAny>>,
    k: usize,
    p: usize,
    rcond: Option<f64>,
}

/// The updates of both explicit states.
pub(crate) trait Updates<T> {
    fn insert_rows(&mut self, k: usize, rows: &[T], p: usize) -> cuqr::Result<()>;
    fn insert_cols(
        &mut self,
        k: usize,
        cols: &[T],
        p: usize,
        rcond: Option<f64>,
    ) -> cuqr::Result<()>;
    fn delete_rows(&mut self, k: usize, p: usize) -> cuqr::Result<()>;
    fn delete_cols(&mut self, k: usize, p: usize) -> cuqr::Result<()>;
    fn rank_k(&mut self, u: &[T], v: &[T], p: usize) -> cuqr::Result<()>;
}

macro_rules! updates_of {
    ($state:ident, $bound:ident) => {
        impl<T: $bound> Updates<T> for $state<T> {
            fn insert_rows(&mut self, k: usize, rows: &[T], p: usize) -> cuqr::Result<()> {
                $state::insert_rows(self, k, rows, p)
            }
            fn insert_cols(
                &mut self,
                k: usize,
                cols: &[T],
                p: usize,
                rcond: Option<f64>,
            ) -> cuqr::Result<()> {
                $state::insert_cols(self, k, cols, p, rcond)
            }
            fn delete_rows(&mut self, k: usize, p: usize) -> cuqr::Result<()> {
                $state::delete_rows(self, k, p)
            }
            fn delete_cols(&mut self, k: usize, p: usize) -> cuqr::Result<()> {
                $state::delete_cols(self, k, p)
            }
            fn rank_k(&mut self, u: &[T], v: &[T], p: usize) -> cuqr::Result<()> {
                $state::rank_k(self, u, v, p)
            }
        }
    };
}
updates_of!(ExplicitQr, Field);
updates_of!(GpuExplicitQr, GpuField);

/// The update's blocks read from their NumPy arrays: (rows, cols, column-major entries).
type Block<T> = Option<(usize, usize, Vec<T>)>;

impl<'py> Call<'_, 'py> {
    fn run<T: Elem>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        r: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let (qm, qn, qd) = read::<T>(q, "Q")?;
        let (rm, rn, rd) = read::<T>(r, "R")?;
        let (a, b) = self.blocks::<T>()?;
        let spec = self.spec();
        let qr = py
            .detach(|| {
                let mut qr = ExplicitQr::new(&qd, (qm, qn), &rd, (rm, rn))?;
                spec.apply(&mut qr, &a, &b)?;
                Ok(qr)
            })
            .map_err(|e| self.error(e))?;
        let ((m, t), (_, n)) = (qr.q_shape(), qr.r_shape());
        let (q1, r1) = qr.into_parts();
        Ok((write(py, m, t, q1), write(py, t, n, r1)))
    }

    /// [`Call::run`] with Q a CUDA array on device `device` (complex ones in Fortran
    /// order), updated there; Q comes back as a cuqr device array, R as a NumPy array.
    fn run_device<T: Elem>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        r: &Bound<'py, PyAny>,
        device: usize,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let (rm, rn, rd) = read::<T>(r, "R")?;
        let (a, b) = self.blocks::<T>()?;
        let gpu = gpu_py(device)?;
        let imported = dlpack::import(q, gpu.stream_handle())?;
        let desc = imported.desc.clone();
        if desc.device.1 as usize != device {
            return Err(PyValueError::new_err(format!(
                "Q is on CUDA device {}, expected device {device}",
                desc.device.1
            )));
        }
        if desc.complex != T::IS_COMPLEX {
            return Err(PyValueError::new_err(format!(
                "Q and R must have the same dtype ({} expected)",
                T::DTYPE
            )));
        }
        let parts = imported.to_dev_parts::<<T as Field>::Real>(&gpu)?;
        drop(imported);
        let spec = self.spec();
        let (q1, r1, t, n) = py
            .detach(|| {
                let mut qr = GpuExplicitQr::from_device(&gpu, parts, desc.shape, &rd, (rm, rn))?;
                spec.apply(&mut qr, &a, &b)?;
                let ((_, t), (_, n)) = (qr.q_shape(), qr.r_shape());
                let (q1, r1) = qr.into_device()?;
                gpu.synchronize_stream()?;
                Ok((q1, r1, t, n))
            })
            .map_err(|e| self.error(e))?;
        let q1 = Bound::new(py, DeviceArray::parts(gpu, q1, T::IS_COMPLEX))?.into_any();
        Ok((q1, write(py, t, n, r1)))
    }

    /// The blocks `a` and `b` as the call's operation reads them (those it takes must be
    /// there).
    fn blocks<T: Elem>(&self) -> PyResult<(Block<T>, Block<T>)> {
        let need = |x: Option<&Bound<'py, PyAny>>, what: &str| match x {
            Some(x) => read::<T>(x, what).map(Some),
            None => Err(PyValueError::new_err(format!(
                "{}: '{what}' is missing",
                self.op
            ))),
        };
        Ok(match self.op {
            "insert_rows" | "insert_cols" => (need(self.a, "u")?, None),
            "update" => (need(self.a, "u")?, need(self.b, "v")?),
            "delete_rows" | "delete_cols" => (None, None),
            other => return Err(PyValueError::new_err(format!("unknown update '{other}'"))),
        })
    }

    /// The call's operation and scalars, without the Python objects.
    fn spec(&self) -> Spec<'_> {
        Spec {
            op: self.op,
            k: self.k,
            p: self.p,
            rcond: self.rcond,
        }
    }

    /// The Python exception for an error of the call: SciPy's `LinAlgError` for a column
    /// in the span of an economic Q.
    fn error(&self, e: cuqr::Error) -> PyErr {
        match e {
            cuqr::Error::RankDeficient { r_jj, .. } if self.op == "insert_cols" => span_error(r_jj),
            e => to_py(e),
        }
    }
}

/// An operation with its scalars ([`Call`] without its Python objects).
#[derive(Clone, Copy)]
struct Spec<'a> {
    op: &'a str,
    k: usize,
    p: usize,
    rcond: Option<f64>,
}

impl Spec<'_> {
    /// The update applied to `qr` with the blocks of [`Call::blocks`] (the operation
    /// checked there). Runs without the interpreter lock.
    fn apply<T: Elem>(
        self,
        qr: &mut impl Updates<T>,
        a: &Block<T>,
        b: &Block<T>,
    ) -> cuqr::Result<()> {
        fn block<T>(x: &Block<T>) -> (usize, usize, &[T]) {
            let (r, c, d) = x.as_ref().expect("read by Call::blocks");
            (*r, *c, d)
        }
        match self.op {
            "insert_rows" => {
                let (p, _, u) = block(a);
                qr.insert_rows(self.k, u, p)
            }
            "insert_cols" => {
                let (_, p, u) = block(a);
                qr.insert_cols(self.k, u, p, self.rcond)
            }
            "delete_rows" => qr.delete_rows(self.k, self.p),
            "delete_cols" => qr.delete_cols(self.k, self.p),
            _ => {
                let (_, p, u) = block(a);
                let (_, _, v) = block(b);
                qr.rank_k(u, v, p)
            }
        }
    }
}

/// SciPy's `LinAlgError` for an inserted column in the span of an economic Q.
pub(crate) fn span_error(rc: f64) -> PyErr {
    linalg_error(format!(
        "One of the columns of u lies in the span of Q. Found reciprocal condition number \
         of {rc} for Q augmented with u/||u||."
    ))
}
