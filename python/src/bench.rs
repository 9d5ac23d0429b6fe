//! The Rust side of the overhead benchmark (`scripts/python_overhead.py`): the same update
//! sequence as the script's Python loop, timed inside the extension with the interpreter lock
//! released, on the same data.

use std::time::Instant;

use cuqr::{Mat, Qr, QrUpdate};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::convert::{gpu_py, host_mat};
use crate::error::to_py;

/// Seconds per repetition of one update pair, measured in Rust: `op` is "rows" (insert the
/// row `u` at the end, then delete it), "cols" (insert the column `c` at the end, then delete
/// it) or "rank_one" (A + u₁v₁ᵀ, then A − u₁v₁ᵀ). The state is factorised from A (float64)
/// and b with `policy` on the CPU (`device` None) or a GPU. Returns the best of `rounds`
/// rounds of `reps` repetitions each.
#[pyfunction]
#[pyo3(signature = (op, a, b, vec_m, vec_n, policy, device, reps, rounds))]
#[allow(clippy::too_many_arguments)]
pub fn time_rust_updates(
    py: Python<'_>,
    op: &str,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    vec_m: &Bound<'_, PyAny>,
    vec_n: &Bound<'_, PyAny>,
    policy: &str,
    device: Option<usize>,
    reps: usize,
    rounds: usize,
) -> PyResult<f64> {
    let a = host_mat::<f64>(a, "A")?;
    let b = host_mat::<f64>(b, "b")?;
    let um = host_mat::<f64>(vec_m, "vec_m")?;
    let un = host_mat::<f64>(vec_n, "vec_n")?;
    let policy = match policy {
        "full" => cuqr::QPolicy::Full,
        "thin" => cuqr::QPolicy::Thin,
        _ => cuqr::QPolicy::None,
    };
    let backend = match device {
        None => cuqr::Backend::Cpu { fallback: None },
        Some(o) => cuqr::Backend::Gpu(gpu_py(o)?),
    };
    let mut st = Qr::<f64>::factorize_on(
        &backend,
        a.as_ref(),
        b.as_ref(),
        policy,
        cuqr::FactorParams::default(),
    )
    .map_err(to_py)?;
    let (m, n) = (a.nrows(), a.ncols());
    let row = un.transpose();
    let zero_e = Mat::<f64>::zeros(1, b.ncols());
    let neg: Vec<f64> = um.col(0).iter().map(|x| -x).collect();
    let step = |st: &mut Qr<f64>| -> cuqr::Result<()> {
        match op {
            "rows" => {
                st.insert_rows(m, row.as_ref(), zero_e.as_ref())?;
                st.delete_rows(m, 1)
            }
            "cols" => {
                st.insert_cols(n, um.as_ref())?;
                st.delete_cols(n, 1)
            }
            _ => {
                st.rank_one(um.col(0), un.col(0))?;
                st.rank_one(&neg, un.col(0))
            }
        }
    };
    if !matches!(op, "rows" | "cols" | "rank_one") {
        return Err(PyValueError::new_err(format!("unknown op {op:?}")));
    }
    py.detach(|| {
        step(&mut st)?; // warm-up
        let mut best = f64::INFINITY;
        for _ in 0..rounds.max(1) {
            let t = Instant::now();
            for _ in 0..reps.max(1) {
                step(&mut st)?;
            }
            if let Some(g) = st.as_gpu() {
                g.gpu().synchronize_stream()?;
            }
            best = best.min(t.elapsed().as_secs_f64() / reps.max(1) as f64);
        }
        Ok::<_, cuqr::Error>(best)
    })
    .map_err(to_py)
}
