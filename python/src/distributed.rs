//! `_DistState`: one rank's part of a row-distributed factorisation (`cuqr::distributed`),
//! behind the Python `cuqr.distributed.QR` class, which finds the rank and hands NCCL's id
//! round. Each process holds one rank on one GPU; every rank makes the same calls with the
//! same arguments but for the factorisation's rows, which are its own.

use std::sync::Arc;

use cuqr::distributed::{DistQr, ForeignNccl, NcclId, RankComm};
use cuqr::{DevMat, FactorParams, Gpu, Mat, QPolicy, UpdateParams};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use crate::convert::{gpu_py, to_numpy, Arg, Real};
use crate::error::to_py;
use crate::state::policy_of;

enum Inner {
    F32(DistQr<f32>),
    F64(DistQr<f64>),
}

/// Runs `$body` with `$s` the state (`&mut DistQr<$T>`) of either precision.
macro_rules! with_dist {
    ($inner:expr, $s:ident, $T:ident => $body:expr) => {
        match $inner {
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

/// A value taken into a call that runs with the interpreter lock released.
struct Unlocked<T>(T);

// SAFETY: `Python::detach` runs its closure on the calling thread, so the value (a state
// holding `Rc`s, which are never handed to another thread) stays on the thread that owns it;
// `Send` is only what `detach`'s bound asks of it. The class is `unsendable`, so Python code
// on another thread cannot reach the state while the lock is released.
unsafe impl<T> Send for Unlocked<T> {}

impl<T> Unlocked<T> {
    fn into_inner(self) -> T {
        self.0
    }
}

/// Runs `f` on the state with the interpreter lock released (collectives wait for the other
/// ranks; other Python threads of this process run meanwhile).
fn unlocked<S, R>(py: Python<'_>, s: &mut S, f: impl FnOnce(&mut S) -> R) -> R {
    let cell = Unlocked((s, f));
    let out = py.detach(move || {
        // the whole cell moves in (a destructuring pattern would capture its fields)
        let (s, f) = cell.into_inner();
        Unlocked(f(s))
    });
    out.into_inner()
}

/// One rank of a row-distributed factorisation (see `cuqr.distributed.QR`).
#[pyclass(module = "cuqr._cuqr", name = "_DistState", unsendable)]
pub struct DistState {
    inner: Inner,
    gpu: Arc<Gpu>,
    rank: usize,
}

/// A matrix argument on the host (device arrays copied down): the updates' arguments are
/// the same on every rank and small against the rows each rank holds.
fn host_arg<T: Real>(obj: &Bound<'_, PyAny>, gpu: &Arc<Gpu>, what: &str) -> PyResult<Mat<T>> {
    Arg::<T>::read(obj, Some(gpu), what)?.into_host(Some(gpu))
}

/// Rows (a vector is one row of `n`) and their right-hand sides (zeros when none).
fn rows_rhs<T: Real>(
    rows: &Bound<'_, PyAny>,
    rhs: Option<&Bound<'_, PyAny>>,
    gpu: &Arc<Gpu>,
    (n, q): (usize, usize),
) -> PyResult<(Mat<T>, Mat<T>)> {
    let rows = host_arg::<T>(rows, gpu, "rows")?;
    let rows = if rows.ncols() == 1 && n != 1 {
        rows.transpose()
    } else {
        rows
    };
    let rhs = match rhs {
        Some(e) => host_arg::<T>(e, gpu, "rhs")?,
        None => Mat::zeros(rows.nrows(), q),
    };
    let rhs = if rhs.ncols() == 1 && rhs.nrows() != rows.nrows() {
        rhs.transpose()
    } else {
        rhs
    };
    Ok((rows, rhs))
}

/// One rank's factorisation from its rows (host or on this rank's device). Reading the rows
/// is voted on first: a rank whose arrays cannot be read stops every rank.
fn factorize_t<T: Real + cuqr::distributed::DistScalar>(
    py: Python<'_>,
    comm: &mut RankComm,
    a: &Bound<'_, PyAny>,
    b: &Bound<'_, PyAny>,
    policy: QPolicy,
    params: FactorParams,
) -> PyResult<DistQr<T>> {
    let gpu = comm.gpu().clone();
    let read = Arg::<T>::read(a, Some(&gpu), "A_local")
        .and_then(|a| Ok((a, Arg::<T>::read(b, Some(&gpu), "b_local")?)));
    let refused = read.is_err();
    if let Some(r) = unlocked(py, comm, |c| c.first_refusal(refused)).map_err(to_py)? {
        return Err(read.err().unwrap_or_else(|| {
            PyValueError::new_err(format!(
                "rank {r} refused its rows (its own error says why)"
            ))
        }));
    }
    let (a, b) = read?;
    let c = comm.clone();
    let mut slot = Some(c);
    match (a, b) {
        (Arg::Host(a), Arg::Host(b)) => unlocked(py, &mut slot, |c| {
            DistQr::factorize_rank(
                c.take().expect("once"),
                a.as_ref(),
                b.as_ref(),
                policy,
                params,
            )
        }),
        (a, b) => unlocked(py, &mut slot, |c| {
            let dev = |x: Arg<T>| match x {
                Arg::Device(d) => Ok(d),
                Arg::Host(h) => DevMat::from_host(&gpu, h.as_ref()),
            };
            // an upload that fails (memory) is voted on like unreadable rows
            let block = dev(a).and_then(|a| Ok((a, dev(b)?)));
            let c = c.take().expect("once");
            if let Some(r) = c.first_refusal(block.is_err())? {
                block?;
                return Err(cuqr::Error::InvalidParam {
                    op: "DistQr::factorize_rank",
                    what: "rows",
                    why: format!("rank {r} could not upload its rows"),
                });
            }
            DistQr::factorize_rank_dev_timed(c, block?, policy, params).map(|(s, _)| s)
        }),
    }
    .map_err(to_py)
}

/// This process's membership of a group of processes, one GPU each (made once, shared by
/// the states factorised in it).
#[pyclass(module = "cuqr._cuqr", name = "_RankComm", unsendable)]
pub struct PyRankComm {
    comm: RankComm,
}

#[pymethods]
impl PyRankComm {
    /// Joins the group as `rank` of `world` on GPU `device` with NCCL's id (256
    /// hexadecimal digits, the same on every rank); blocks until every rank has joined.
    #[new]
    fn new(
        py: Python<'_>,
        id_hex: &str,
        rank: usize,
        world: usize,
        device: usize,
    ) -> PyResult<Self> {
        let id = NcclId::from_hex(id_hex).map_err(to_py)?;
        let mut gpu = gpu_py(device)?;
        let comm = unlocked(py, &mut gpu, |g| RankComm::new(g, rank, world, id)).map_err(to_py)?;
        Ok(Self { comm })
    }

    /// Joins the group of a communicator that another library made and owns (`comm`, the
    /// address of its `ncclComm_t`, e.g. PyTorch's `ProcessGroupNCCL._comm_ptr()`) on GPU
    /// `device`. The caller keeps it alive and its owner's stream idle while cuqr uses it.
    #[staticmethod]
    fn from_nccl(py: Python<'_>, comm: usize, device: usize) -> PyResult<Self> {
        let mut gpu = gpu_py(device)?;
        // SAFETY: the Python layer passes the live communicator of a process group that it
        // keeps referenced for as long as this object lives, after synchronising the owner's
        // stream (`cuqr.distributed._comm_of_group`); the address is its `ncclComm_t`.
        let foreign = unsafe { ForeignNccl::new(comm as *mut core::ffi::c_void) };
        let comm = unlocked(py, &mut gpu, |g| RankComm::from_nccl(g, foreign)).map_err(to_py)?;
        Ok(Self { comm })
    }

    /// The lowest rank whose `refused` is true (the same on every rank), or None.
    fn first_refusal(&mut self, py: Python<'_>, refused: bool) -> PyResult<Option<usize>> {
        unlocked(py, &mut self.comm, |c| c.first_refusal(refused)).map_err(to_py)
    }

    /// (rank, world, device).
    fn place(&self) -> (usize, usize, usize) {
        (
            self.comm.rank(),
            self.comm.world(),
            self.comm.gpu().device_ordinal(),
        )
    }
}

#[pymethods]
impl DistState {
    /// Factorises this rank's rows in the group `comm`.
    #[staticmethod]
    #[pyo3(signature = (comm, a, b, policy, keep_data, dtype))]
    fn factorize(
        py: Python<'_>,
        comm: &mut PyRankComm,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        policy: &str,
        keep_data: bool,
        dtype: &str,
    ) -> PyResult<Self> {
        let policy = policy_of(policy)?;
        let params = FactorParams {
            keep_data,
            ..FactorParams::default()
        };
        let c = &mut comm.comm;
        let inner = match dtype {
            "float32" => Inner::F32(factorize_t::<f32>(py, c, a, b, policy, params)?),
            "float64" => Inner::F64(factorize_t::<f64>(py, c, a, b, policy, params)?),
            d => {
                return Err(PyValueError::new_err(format!(
                    "dtype {d}: float32 or float64"
                )))
            }
        };
        Ok(Self {
            inner,
            gpu: c.gpu().clone(),
            rank: c.rank(),
        })
    }

    /// Inserts rows U (p×n or a vector) with right-hand sides E before global row k.
    #[pyo3(signature = (k, u, e=None))]
    fn insert_rows(
        &mut self,
        py: Python<'_>,
        k: usize,
        u: &Bound<'_, PyAny>,
        e: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let gpu = self.gpu.clone();
        with_dist!(&mut self.inner, s, T => {
            let (u, e) = rows_rhs::<T>(u, e, &gpu, (s.ncols(), s.dims().q))?;
            unlocked(py, s, |s| s.insert_rows(k, u.as_ref(), e.as_ref())).map_err(to_py)
        })
    }

    /// Deletes global rows k..k+p.
    fn delete_rows(&mut self, py: Python<'_>, k: usize, p: usize) -> PyResult<()> {
        with_dist!(&mut self.inner, s, T => unlocked(py, s, |s| s.delete_rows(k, p)).map_err(to_py))
    }

    /// The window step: rows (with rhs) in, the `drop` oldest out, optionally with a
    /// forgetting factor (kept for later steps; restored where the step is refused).
    #[pyo3(signature = (rows, rhs=None, drop=0, forget=None))]
    fn slide(
        &mut self,
        py: Python<'_>,
        rows: &Bound<'_, PyAny>,
        rhs: Option<&Bound<'_, PyAny>>,
        drop: usize,
        forget: Option<f64>,
    ) -> PyResult<()> {
        let gpu = self.gpu.clone();
        with_dist!(&mut self.inner, s, T => {
            let (r, e) = rows_rhs::<T>(rows, rhs, &gpu, (s.ncols(), s.dims().q))?;
            let before = s.params();
            if let Some(l) = forget {
                s.set_params(UpdateParams { forget: l, ..before });
            }
            let out = unlocked(py, s, |s| s.slide(r.as_ref(), e.as_ref(), drop));
            if out.is_err() {
                s.set_params(before);
            }
            out.map_err(to_py)
        })
    }

    /// Inserts columns U (m×p, the whole problem's rows, or a vector) before column k.
    fn insert_cols(&mut self, py: Python<'_>, k: usize, u: &Bound<'_, PyAny>) -> PyResult<()> {
        let gpu = self.gpu.clone();
        with_dist!(&mut self.inner, s, T => {
            let u = host_arg::<T>(u, &gpu, "u")?;
            unlocked(py, s, |s| s.insert_cols(k, u.as_ref())).map_err(to_py)
        })
    }

    /// A ← A + u vᵀ (u of the whole problem's m rows).
    fn rank_one(
        &mut self,
        py: Python<'_>,
        u: &Bound<'_, PyAny>,
        v: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let gpu = self.gpu.clone();
        with_dist!(&mut self.inner, s, T => {
            let u = host_arg::<T>(u, &gpu, "u")?;
            let v = host_arg::<T>(v, &gpu, "v")?;
            if u.ncols() != 1 || v.ncols() != 1 {
                return Err(PyValueError::new_err("rank_one takes two vectors"));
            }
            unlocked(py, s, |s| s.rank_one(u.col(0), v.col(0))).map_err(to_py)
        })
    }

    /// x (n×q, the same on every rank) and the residual norms.
    fn solve<'py>(&mut self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, Vec<f64>)> {
        with_dist!(&mut self.inner, s, T => {
            let sol = unlocked(py, s, |s| s.solve()).map_err(to_py)?;
            Ok((to_numpy(py, sol.x)?.into_any(), sol.residual_norms))
        })
    }

    /// R (n×n, the same on every rank).
    fn r<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        with_dist!(&mut self.inner, s, T => {
            let r = unlocked(py, s, |s| s.r()).map_err(to_py)?;
            Ok(to_numpy(py, r)?.into_any())
        })
    }

    /// d = Q₁ᵀb (n×q).
    fn d<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        with_dist!(&mut self.inner, s, T => {
            let d = unlocked(py, s, |s| s.d()).map_err(to_py)?;
            Ok(to_numpy(py, d)?.into_any())
        })
    }

    /// This rank's rows of Q₁ (thin kind).
    fn local_q<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        with_dist!(&mut self.inner, s, T => {
            if s.dims().policy != QPolicy::Thin {
                return Err(PyValueError::new_err("local_q needs q='thin'"));
            }
            let q = unlocked(py, s, |s| s.local_q()).map_err(to_py)?;
            Ok(to_numpy(py, q)?.into_any())
        })
    }

    /// (m, n, q): global rows, columns, right-hand sides.
    fn shape(&mut self) -> PyResult<(usize, usize, usize)> {
        with_dist!(&mut self.inner, s, T => Ok((s.nrows(), s.ncols(), s.dims().q)))
    }

    /// Rows held by each rank.
    fn rows_per_rank(&mut self) -> Vec<usize> {
        with_dist!(&mut self.inner, s, T => s.rows_per_rank().to_vec())
    }

    /// This process's rank and the world size.
    fn rank_world(&mut self) -> (usize, usize) {
        with_dist!(&mut self.inner, s, T => (self.rank, s.world()))
    }

    /// "none" or "thin".
    fn policy(&mut self) -> &'static str {
        with_dist!(&mut self.inner, s, T => match s.dims().policy {
            QPolicy::Thin => "thin",
            _ => "none",
        })
    }

    /// "float32" or "float64".
    fn dtype(&self) -> &'static str {
        match self.inner {
            Inner::F32(_) => "float32",
            Inner::F64(_) => "float64",
        }
    }

    /// Waits for this rank's device work.
    fn synchronize(&mut self, py: Python<'_>) -> PyResult<()> {
        with_dist!(&mut self.inner, s, T => unlocked(py, s, |s| s.synchronize()).map_err(to_py))
    }
}

/// A fresh NCCL unique id as 256 hexadecimal digits (rank 0 makes it).
#[pyfunction]
pub fn nccl_id() -> PyResult<String> {
    NcclId::new().map(|i| i.to_hex()).map_err(to_py)
}

/// NCCL's id handed from rank 0 to the others over TCP at `addr` (`host:port`; `None`: from
/// `CUQR_RENDEZVOUS` or `MASTER_ADDR`/`MASTER_PORT`).
#[pyfunction]
#[pyo3(signature = (rank, world, addr=None, timeout=300.0))]
pub fn rendezvous_id(
    py: Python<'_>,
    rank: usize,
    world: usize,
    addr: Option<String>,
    timeout: f64,
) -> PyResult<String> {
    if !(timeout.is_finite() && timeout > 0.0) {
        return Err(PyValueError::new_err("timeout must be positive seconds"));
    }
    let rv = match addr {
        Some(a) => {
            cuqr::distributed::Rendezvous::new(a, std::time::Duration::from_secs_f64(timeout))
        }
        None => cuqr::distributed::Rendezvous::from_env().map_err(to_py)?,
    };
    py.detach(|| rv.share_id(rank, world))
        .map(|i| i.to_hex())
        .map_err(|e| match e {
            cuqr::Error::InvalidParam { why, .. } => {
                PyRuntimeError::new_err(format!("rendezvous: {why}"))
            }
            e => to_py(e),
        })
}

/// The launcher's (rank, world, local rank), or `None` where no launcher's variables are set.
#[pyfunction]
pub fn launch_env() -> PyResult<Option<(usize, usize, usize)>> {
    Ok(cuqr::distributed::Launch::from_env()
        .map_err(to_py)?
        .map(|l| (l.rank, l.world, l.local_rank)))
}
