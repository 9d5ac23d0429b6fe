//! Measuring one shape: cuqr's factorisation without and with Q, cuSOLVER `geqrf`
//! and `geqrf` + `orgqr`, the accuracy of each state, and the phase split; a run
//! that does not fit in device memory becomes a note.

use std::cell::RefCell;
use std::sync::Arc;

use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::{DevMat, DevVec, GpuQr, GpuScalar, QrPhaseTimes};
use cuqr::{FactorParams, Gpu, Mat, QPolicy};

use super::accuracy::{
    gram_error, kerr_norms, lower_is_zero, orthogonality, ACC_BLOCK, ORTH_BLOCK,
};
use super::Shape;
use crate::common::{copy_into, dup, time_keeping_last};
use cuqr_cli::rng::random_signed_matrix;

/// One measured row (each value absent when not measured; `notes` say why).
#[derive(Clone, Debug, Default)]
pub(super) struct Row {
    pub(super) cuqr_ms: Option<f64>,
    pub(super) cuqr_launches: Option<u64>,
    pub(super) geqrf_ms: Option<f64>,
    pub(super) cuqr_q_ms: Option<f64>,
    pub(super) cuqr_q_launches: Option<u64>,
    pub(super) orgqr_ms: Option<f64>,
    /// ‖QR − A‖_F/‖A‖_F.
    pub(super) res: Option<f64>,
    /// ‖QᵀQ − I‖_F.
    pub(super) orth: Option<f64>,
    /// ‖QᵀQ − I‖_F of cuSOLVER's Q (`geqrf` + `orgqr`), measured the same way.
    pub(super) orth_cusolver: Option<f64>,
    /// ‖RᵀR − AᵀA‖_F/‖A‖²_F of the state without Q (the verdict when Q is not kept).
    pub(super) gram: Option<f64>,
    /// R exactly zero below the diagonal (every measured state).
    pub(super) zeros: Option<bool>,
    /// One profiled factorisation (phase split, no look-ahead) and whether it kept Q.
    pub(super) phases: Option<(QrPhaseTimes, bool)>,
    pub(super) notes: Vec<String>,
}

impl Row {
    /// Accuracy verdict against m·u: `Some(true)` pass, `Some(false)` fail, `None` not
    /// measured.
    pub(super) fn pass(&self, m: usize, u: f64) -> Option<bool> {
        let mu = m as f64 * u;
        let zeros = self.zeros?;
        match (self.res, self.orth, self.gram) {
            (Some(r), Some(o), _) => Some(zeros && r <= mu && o <= mu),
            (_, _, Some(g)) => Some(zeros && g <= 2.0 * mu),
            _ => None,
        }
    }
}

fn is_oom(e: &cuqr::Error) -> bool {
    matches!(e, cuqr::Error::OutOfMemory { .. })
}

const GIB: f64 = (1u64 << 30) as f64;

/// Runs `f` unless `need` bytes exceed the free device memory; an out-of-memory
/// or rank-deficiency error becomes a note too. Other errors propagate.
fn if_fits<R>(
    gpu: &Gpu,
    what: &str,
    need: f64,
    notes: &mut Vec<String>,
    f: impl FnOnce() -> cuqr::Result<R>,
) -> cuqr::Result<Option<R>> {
    let (free, _) = gpu.mem_info()?;
    if need > free as f64 {
        notes.push(format!(
            "{what} skipped: needs ~{:.1} GiB, {:.1} GiB free",
            need / GIB,
            free as f64 / GIB
        ));
        return Ok(None);
    }
    match f() {
        Ok(r) => Ok(Some(r)),
        Err(e) if is_oom(&e) => {
            notes.push(format!("{what} skipped: out of device memory ({e})"));
            Ok(None)
        }
        Err(e @ cuqr::Error::RankDeficient { .. }) => {
            notes.push(format!("{what} refused the matrix: {e}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Times cuqr's factorisation under `policy`; returns (median ms, launches, the last
/// state).
fn time_cuqr<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: &DevMat<T>,
    b: &DevMat<T>,
    policy: QPolicy,
    params: FactorParams,
    reps: usize,
) -> cuqr::Result<(f64, u64, GpuQr<T>)> {
    let (ms, (st, launches)) = time_keeping_last(
        gpu,
        reps,
        || Ok((dup(gpu, a)?, dup(gpu, b)?)),
        |(a2, b2)| {
            let l0 = gpu.launch_count();
            let st = GpuQr::factorize_dev(gpu, a2, b2, policy, params)?;
            Ok((st, gpu.launch_count() - l0))
        },
    )?;
    Ok((ms, launches, st))
}

/// Times cuSOLVER `geqrf`, and `geqrf` + `orgqr` to the m×m Q when `with_q`.
fn time_cusolver<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: &DevMat<T>,
    with_q: bool,
    reps: usize,
) -> cuqr::Result<(f64, Option<DevMat<T>>)> {
    let (m, n) = (a.nrows(), a.ncols());
    let work = RefCell::new(DevMat::<T>::zeros(gpu, m, n)?);
    let tau = RefCell::new(DevVec::<T>::zeros(gpu, n)?);
    let qbuf = RefCell::new(if with_q {
        Some(DevMat::<T>::zeros(gpu, m, m)?)
    } else {
        None
    });
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || copy_into(gpu, a, &mut work.borrow_mut()),
        |()| {
            let mut w = work.borrow_mut();
            let mut tv = tau.borrow_mut();
            gpu.geqrf(&mut w.view_mut(), &mut tv.view_mut())?;
            if let Some(q) = qbuf.borrow_mut().as_mut() {
                gpu.panel_copy(&w.view(), &mut q.block_mut(0, 0, m, n))?;
                gpu.orgqr(&mut q.view_mut(), n, &tv.view())?;
            }
            Ok(())
        },
    )?;
    Ok((t.median_ms(), qbuf.into_inner()))
}

/// Measures one shape in precision `T`.
pub(super) fn bench_shape<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    sh: Shape,
    reps: usize,
    params: FactorParams,
) -> cuqr::Result<Row> {
    let (m, n) = (sh.m, sh.n);
    let s = std::mem::size_of::<T>() as f64;
    let (mn, mm) = (m as f64 * n as f64 * s, m as f64 * m as f64 * s);
    let slack = 256.0 * (1u64 << 20) as f64;
    let mut row = Row::default();
    let mut notes = Vec::new();
    // A, b on the device, and a host copy's ‖A‖_F
    let data = if_fits(gpu, "shape", 3.0 * mn + slack, &mut notes, || {
        let a_host: Mat<T> = random_signed_matrix(m, n, 0x5EED ^ ((m as u64) << 24) ^ n as u64);
        let a_fro = a_host.as_ref().norm_fro();
        let a = DevMat::from_host(gpu, a_host.as_ref())?;
        drop(a_host);
        let b = DevMat::from_host(
            gpu,
            random_signed_matrix::<T>(m, 1, 0xB0B ^ m as u64).as_ref(),
        )?;
        Ok((a, b, a_fro))
    })?;
    let Some((a, b, a_fro)) = data else {
        row.notes = notes;
        return Ok(row);
    };

    // without Q; R checked (exact zeros, Gram error) and the state freed at once
    let mut zeros = true;
    let mut zero_checked = false;
    if let Some((ms, l, st)) = if_fits(gpu, "cuqr", 2.0 * mn + slack, &mut notes, || {
        time_cuqr(gpu, &a, &b, QPolicy::None, params, reps)
    })? {
        row.cuqr_ms = Some(ms);
        row.cuqr_launches = Some(l);
        zeros &= lower_is_zero(gpu, st.r_dev())?;
        zero_checked = true;
        let need = 2.0 * n as f64 * n as f64 * s + slack;
        row.gram = if_fits(gpu, "R-only accuracy", need, &mut notes, || {
            gram_error(gpu, st.r_dev(), &a, a_fro)
        })?;
    }
    row.geqrf_ms = if_fits(gpu, "geqrf", 1.2 * mn + slack, &mut notes, || {
        time_cusolver(gpu, &a, false, reps).map(|(ms, _)| ms)
    })?;

    // with Q
    let need_q = mm + 2.2 * mn + slack;
    // scratch of the accuracy products (f32 data widened to f64: see kerr_norms)
    let acc_need = if s == 4.0 {
        m as f64 * (ORTH_BLOCK * 8 + ACC_BLOCK * 28) as f64 + slack
    } else {
        2.0 * m as f64 * ACC_BLOCK as f64 * s + slack
    };
    if let Some((ms, l, st)) = if_fits(gpu, "cuqr with Q (m×m)", need_q, &mut notes, || {
        time_cuqr(gpu, &a, &b, QPolicy::Full, params, reps)
    })? {
        row.cuqr_q_ms = Some(ms);
        row.cuqr_q_launches = Some(l);
        zeros &= lower_is_zero(gpu, st.r_dev())?;
        zero_checked = true;
        let q = st.q_dev().expect("Q kept under QPolicy::Full");
        if let Some((res, orth)) = if_fits(gpu, "accuracy", acc_need, &mut notes, || {
            kerr_norms(gpu, q, st.r_dev(), &a, a_fro)
        })? {
            row.res = Some(res);
            row.orth = Some(orth);
        }
    }
    if let Some((ms, q)) = if_fits(
        gpu,
        "geqrf + orgqr (m×m)",
        mm + 1.2 * mn + slack,
        &mut notes,
        || time_cusolver(gpu, &a, true, reps),
    )? {
        row.orgqr_ms = Some(ms);
        // cuSOLVER's Q by the same measure, for comparison with cuqr's
        if let Some(q) = q {
            row.orth_cusolver = if_fits(gpu, "cuSOLVER Q accuracy", acc_need, &mut notes, || {
                orthogonality(gpu, &q)
            })?;
        }
    }
    if zero_checked {
        row.zeros = Some(zeros);
    }
    // the phase split: one profiled run, with Q where cuqr with Q ran, else without
    let with_q = row.cuqr_q_ms.is_some();
    if with_q || row.cuqr_ms.is_some() {
        let (policy, need) = if with_q {
            (QPolicy::Full, need_q)
        } else {
            (QPolicy::None, 2.0 * mn + slack)
        };
        row.phases = if_fits(gpu, "phase split", need, &mut notes, || {
            let (a2, b2) = (dup(gpu, &a)?, dup(gpu, &b)?);
            GpuQr::factorize_dev_phases(gpu, a2, b2, policy, params).map(|(_, t)| (t, with_q))
        })?;
    }
    row.notes = notes;
    Ok(row)
}
