//! The GPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// GPU factorisation (docs/algorithms.md#blocked-householder-qr): validates with the same `plan` as
/// [`run_cpu`], uploads A and b, runs blocked Householder QR with compact-WY blocks on the device
/// (`gpu::householder`), leaves exact zeros below R's diagonal, checks the rank on
/// the device (one download of column norms and the diagonal) and accumulates Q backwards
/// from the identity: the m×m Q under [`QPolicy::Full`], the m×n Q₁ under
/// [`QPolicy::Thin`] (which keeps a copy of b); every kind but the full one trims R and d
/// to n rows, and the R-only kind keeps the residual norms (and A and b with
/// [`FactorParams::keep_data`])
/// (docs/algorithms.md#blocked-householder-qr).
///
/// # Errors
/// As [`run_cpu`], plus [`Error::OutOfMemory`] and device errors
/// ([`Error::Driver`], [`Error::Cublas`]).
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    gpu: &std::sync::Arc<crate::gpu::runtime::Gpu>,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    policy: QPolicy,
    params: FactorParams,
) -> Result<crate::state::gpu::GpuQr<T>> {
    use crate::gpu::runtime::DevMat;
    let plan = plan(a, b, policy, params)?;
    let r = DevMat::from_host(gpu, a)?;
    let d = DevMat::from_host(gpu, b)?;
    run_gpu_dev(gpu, plan, params, r, d, None)
}

/// [`run_gpu`] on A and b already in device memory (taken over as R and d), for a
/// `plan` from [`plan`] or [`plan_shapes`].
///
/// # Errors
/// [`Error::RankDeficient`], [`Error::OutOfMemory`], [`Error::Driver`],
/// [`Error::Cublas`].
pub(crate) fn run_gpu_dev<T: crate::gpu::runtime::GpuScalar>(
    gpu: &std::sync::Arc<crate::gpu::runtime::Gpu>,
    plan: Plan,
    params: FactorParams,
    mut r: crate::gpu::runtime::DevMat<T>,
    mut d: crate::gpu::runtime::DevMat<T>,
    mut clock: Option<&mut crate::gpu::algo::householder::QrClock>,
) -> Result<crate::state::gpu::GpuQr<T>> {
    use crate::gpu::algo::householder::{
        accumulate_q_backward, blocked_qr_impl, merges_trailing, PanelImpl, PHASE_Q, PHASE_RANK,
    };
    use crate::gpu::algo::rank::check_rank_dev;
    use crate::gpu::runtime::timing::PhaseClock;
    use crate::gpu::runtime::DevMat;
    let Dims { m, n, .. } = plan.dims;
    let thin = plan.dims.policy == QPolicy::Thin;
    let keep_q = plan.dims.policy == QPolicy::Full || thin;
    // Allocate everything (Q included) before computing: out of memory fails early.
    let mut q = match plan.dims.policy {
        QPolicy::Full => Some(DevMat::<T>::zeros(gpu, m, m)?),
        QPolicy::Thin => Some(DevMat::<T>::for_overwrite(gpu, m, n)?),
        QPolicy::None => None,
    };
    // the thin state keeps b (its residual norms, and Q_zᵀb in column insertion); an
    // R-only state keeps A and b when asked to
    let keep_data = plan.dims.policy == QPolicy::None && params.keep_data;
    let b = if thin || keep_data {
        Some(d.dup(gpu)?)
    } else {
        None
    };
    let a = if keep_data { Some(r.dup(gpu)?) } else { None };
    let mut blocks = Vec::new();
    blocked_qr_impl(
        gpu,
        &mut r,
        0..m,
        0..n,
        None,
        Some(&mut d),
        None,
        plan.block_size,
        keep_q.then_some(&mut blocks),
        PanelImpl::Auto,
        merges_trailing::<T>(n),
        clock.as_deref_mut(),
    )?;
    PhaseClock::time(clock.as_deref_mut(), gpu, PHASE_RANK, || {
        check_rank_dev(gpu, &r, n, plan.rank_tol)
    })?;
    if let Some(qm) = q.as_mut() {
        PhaseClock::time(clock, gpu, PHASE_Q, || {
            accumulate_q_backward(gpu, &blocks, qm)
        })?;
    }
    drop(blocks);
    let mut rho = Vec::new();
    if plan.dims.policy != QPolicy::Full {
        // R n×n and d n×q: nothing of height m but Q₁ and the kept data; an R-only
        // state keeps the residual norms ‖d(n:m, k)‖
        let nq = d.ncols();
        if plan.dims.policy == QPolicy::None {
            rho = crate::gpu::algo::thin::column_norms(gpu, &d.block(n, 0, m - n, nq))?
                .into_iter()
                .map(T::from_f64)
                .collect();
        }
        r = gpu.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
        d = gpu.two_phase_copy_new(&d.block(0, 0, n, nq), 0..0, false)?;
    }
    Ok(crate::state::gpu::GpuQr {
        gpu: gpu.clone(),
        dims: plan.dims,
        r,
        d,
        q,
        b,
        a,
        kept_row0: 0,
        rho,
        params: UpdateParams {
            block_size: params.block_size,
            ..UpdateParams::default()
        },
        rank_tol: plan.rank_tol,
        drift: Default::default(),
        poisoned: std::sync::atomic::AtomicBool::new(false),
    })
}
