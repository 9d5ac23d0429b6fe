//! The GPU path: validation, upload and the new state; the algorithm is
//! `gpu/algo/factorize.rs`.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// GPU factorisation (docs/algorithms.md#blocked-householder-qr): validates with the same
/// `plan` as [`run_cpu`], uploads A and b and runs [`crate::gpu::algo::factorize::factorize`]
/// (blocked Householder QR with compact-WY blocks, the rank check on the device, Q or Q₁
/// accumulated backwards where the kind holds it, R and d trimmed to n rows but under the
/// full kind, the R-only kind's residual norms and, with [`FactorParams::keep_data`], its
/// A and b).
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
    r: crate::gpu::runtime::DevMat<T>,
    d: crate::gpu::runtime::DevMat<T>,
    clock: Option<&mut crate::gpu::algo::householder::QrClock>,
) -> Result<crate::state::gpu::GpuQr<T>> {
    use crate::gpu::algo::factorize::{factorize, FactorizeParams};
    let fp = FactorizeParams {
        dims: plan.dims,
        block_size: plan.block_size,
        rank_tol: plan.rank_tol,
        keep_data: params.keep_data,
    };
    let out = factorize(gpu, fp, (r, d), clock)?;
    Ok(crate::state::gpu::GpuQr {
        gpu: gpu.clone(),
        dims: plan.dims,
        r: out.r,
        d: out.d,
        q: out.q,
        b: out.b,
        a: out.a,
        kept_row0: 0,
        rho: out.rho,
        params: UpdateParams {
            block_size: params.block_size,
            ..UpdateParams::default()
        },
        rank_tol: plan.rank_tol,
        drift: Default::default(),
        poisoned: std::sync::atomic::AtomicBool::new(false),
    })
}
