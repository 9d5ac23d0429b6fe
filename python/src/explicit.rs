//! SciPy-style updates of explicit factors (Q, R) for the cases cuqr's states do not take:
//! complex elements and wide (M < N) factorisations, on the CPU
//! ([`cuqr::explicit::ExplicitQr`]). The package's `qr_insert`, `qr_delete` and
//! `qr_update` call [`explicit_update`] after SciPy's argument checks.

use cuqr::explicit::{c32, c64, ExplicitQr, Field};
use numpy::ndarray::{Array2, ShapeBuilder};
use numpy::{Element, IntoPyArray, PyArray2, PyArrayMethods, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::check_layout_as;
use crate::error::{linalg_error, to_py};

/// Element types of the explicit updates, with NumPy's dtype names.
trait Elem: Field + Element {
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
fn read<T: Elem>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(usize, usize, Vec<T>)> {
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
    let data = (0..n)
        .flat_map(|j| (0..m).map(move |i| (i, j)))
        .map(|ij| v[ij])
        .collect();
    Ok((m, n, data))
}

/// A column-major block as a Fortran-ordered NumPy array.
fn write<'py, T: Elem>(
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

/// One call's arguments besides Q and R.
struct Call<'a, 'py> {
    op: &'a str,
    a: Option<&'a Bound<'py, PyAny>>,
    b: Option<&'a Bound<'py, PyAny>>,
    k: usize,
    p: usize,
    rcond: Option<f64>,
}

impl<'py> Call<'_, 'py> {
    fn run<T: Elem>(
        &self,
        py: Python<'py>,
        q: &Bound<'py, PyAny>,
        r: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let (qm, qn, qd) = read::<T>(q, "Q")?;
        let (rm, rn, rd) = read::<T>(r, "R")?;
        let mut qr = ExplicitQr::new(&qd, (qm, qn), &rd, (rm, rn)).map_err(to_py)?;
        let block = |x: Option<&Bound<'py, PyAny>>, what: &str| match x {
            Some(x) => read::<T>(x, what),
            None => Err(PyValueError::new_err(format!(
                "{}: '{what}' is missing",
                self.op
            ))),
        };
        let done = match self.op {
            "insert_rows" => {
                let (p, _, u) = block(self.a, "u")?;
                qr.insert_rows(self.k, &u, p)
            }
            "insert_cols" => {
                let (_, p, u) = block(self.a, "u")?;
                qr.insert_cols(self.k, &u, p, self.rcond)
                    .map_err(|e| match e {
                        cuqr::Error::RankDeficient { r_jj, .. } => span_error(r_jj),
                        e => to_py(e),
                    })?;
                Ok(())
            }
            "delete_rows" => qr.delete_rows(self.k, self.p),
            "delete_cols" => qr.delete_cols(self.k, self.p),
            "update" => {
                let (_, p, u) = block(self.a, "u")?;
                let (_, _, v) = block(self.b, "v")?;
                qr.rank_k(&u, &v, p)
            }
            other => return Err(PyValueError::new_err(format!("unknown update '{other}'"))),
        };
        done.map_err(to_py)?;
        let ((m, t), (_, n)) = (qr.q_shape(), qr.r_shape());
        let (q1, r1) = qr.into_parts();
        Ok((write(py, m, t, q1), write(py, t, n, r1)))
    }
}

/// SciPy's `LinAlgError` for an inserted column in the span of an economic Q.
fn span_error(rc: f64) -> PyErr {
    linalg_error(format!(
        "One of the columns of u lies in the span of Q. Found reciprocal condition number \
         of {rc} for Q augmented with u/||u||."
    ))
}
