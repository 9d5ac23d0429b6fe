//! cuqr's errors as Python exceptions: bad arguments are `ValueError`, numerical failures
//! (a dependent column, a downdate that would lose definiteness) NumPy's `LinAlgError` (as
//! SciPy raises), an exhausted device `MemoryError`, device and driver faults
//! `RuntimeError`. The message is the library's, in the Python arguments' words where it
//! names a Rust parameter.

use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyType;

/// NumPy's `numpy.linalg.LinAlgError` with `msg`.
pub fn linalg_error(msg: String) -> PyErr {
    Python::attach(|py| {
        match py
            .import("numpy.linalg")
            .and_then(|m| m.getattr("LinAlgError"))
            .and_then(|t| t.cast_into::<PyType>().map_err(PyErr::from))
        {
            Ok(ty) => PyErr::from_type(ty, msg),
            Err(e) => e,
        }
    })
}

/// The Python exception for a cuqr error.
pub fn to_py(e: cuqr::Error) -> PyErr {
    use cuqr::Error as E;
    let msg = e.to_string();
    match e {
        E::RankDeficient { .. }
        | E::DowndateFailed { .. }
        | E::Singular { .. }
        | E::NotConverged { .. } => linalg_error(msg),
        E::OutOfMemory { .. } => PyMemoryError::new_err(msg),
        E::NoDevice(_)
        | E::MissingKernel(_)
        | E::Driver(_)
        | E::Cublas(_)
        | E::Cusolver(_)
        | E::Poisoned => PyRuntimeError::new_err(msg),
        E::NeedsQ { op, policy } => match q_name(policy) {
            Some(q) => {
                PyValueError::new_err(format!("{op} needs Q; the state was built with q=\"{q}\""))
            }
            None => PyValueError::new_err(msg),
        },
        E::NeedsData { op, what } => {
            PyValueError::new_err(format!("{op} needs {}", in_python_words(what)))
        }
        _ => PyValueError::new_err(msg),
    }
}

/// The `q=` argument that builds a state of `policy`.
fn q_name(policy: cuqr::QPolicy) -> Option<&'static str> {
    match policy {
        cuqr::QPolicy::Full => Some("full"),
        cuqr::QPolicy::Thin => Some("thin"),
        cuqr::QPolicy::None => Some("none"),
        _ => None,
    }
}

/// The library's description of missing data with its Rust parameters named by the
/// Python arguments that give them: `keep_data=True` to `QR(...)`, and the `rows=`
/// (and `rhs=`) of `delete_rows`.
fn in_python_words(what: &str) -> String {
    what.replace("FactorParams::keep_data", "keep_data=True")
        .replace("GpuRBatch::factorize_keep_data", "keep_data=True")
        .replace("(delete_rows_with)", "(rows= and rhs= of delete_rows)")
}
