//! Factorisation on the device (docs/algorithms.md#blocked-householder-qr): blocked
//! Householder QR with compact-WY blocks, the rank check, Q accumulated backwards, and the
//! trimming of the kinds that hold no m×m Q. The operation (`ops/factorize/`) validates and
//! builds the state from the buffers returned here.

use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::params::QPolicy;
use crate::gpu::algo::householder::{
    accumulate_q_backward, blocked_qr_with, merges_trailing, BlockedQrParams, QrClock, QrOutputs,
    PHASE_Q, PHASE_RANK,
};
use crate::gpu::algo::rank::check_rank_dev;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::timing::PhaseClock;
use crate::gpu::runtime::{Gpu, GpuScalar};

/// What a factorisation needs besides A and b.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FactorizeParams {
    /// Dimensions and Q policy of the result.
    pub(crate) dims: Dims,
    /// Householder block size n_b.
    pub(crate) block_size: usize,
    /// Relative rank tolerance.
    pub(crate) rank_tol: f64,
    /// Whether an R-only state keeps A and b.
    pub(crate) keep_data: bool,
}

/// The factors of a new state.
pub(crate) struct Factorized<T> {
    /// R (m×n under the full kind, n×n otherwise).
    pub(crate) r: DevMat<T>,
    /// d = Qᵀb (m×q under the full kind, n×q otherwise).
    pub(crate) d: DevMat<T>,
    /// Q (m×m) or Q₁ (m×n), where the kind holds it.
    pub(crate) q: Option<DevMat<T>>,
    /// The kept b (thin kind, or R-only with kept data).
    pub(crate) b: Option<DevMat<T>>,
    /// The kept A (R-only with kept data).
    pub(crate) a: Option<DevMat<T>>,
    /// The residual norms of an R-only state (empty otherwise).
    pub(crate) rho: Vec<T>,
}

/// Factorises A (taken over as R) and b (taken over as d) on the device: blocked Householder
/// QR with compact-WY blocks (`gpu::householder`), exact zeros below R's diagonal, the rank
/// check on the device (one download of column norms and the diagonal), Q accumulated
/// backwards from the identity: the m×m Q under [`QPolicy::Full`], the m×n Q₁ under
/// [`QPolicy::Thin`] (which keeps a copy of b); every kind but the full one trims R and d
/// to n rows, and the R-only kind keeps the residual norms (and A and b with `keep_data`).
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], device errors.
pub(crate) fn factorize<T: GpuScalar>(
    gpu: &Gpu,
    params: FactorizeParams,
    (mut r, mut d): (DevMat<T>, DevMat<T>),
    mut clock: Option<&mut QrClock>,
) -> Result<Factorized<T>> {
    let dims = params.dims;
    let Dims { m, n, .. } = dims;
    let thin = dims.policy == QPolicy::Thin;
    let keep_q = dims.policy == QPolicy::Full || thin;
    // Allocate everything (Q included) before computing: out of memory fails early.
    let mut q = match dims.policy {
        QPolicy::Full => Some(DevMat::<T>::zeros(gpu, m, m)?),
        QPolicy::Thin => Some(DevMat::<T>::for_overwrite(gpu, m, n)?),
        QPolicy::None => None,
    };
    // the thin state keeps b (its residual norms, and Q_zᵀb in column insertion); an
    // R-only state keeps A and b when asked to
    let keep_data = dims.policy == QPolicy::None && params.keep_data;
    let b = if thin || keep_data {
        Some(d.dup(gpu)?)
    } else {
        None
    };
    let a = if keep_data { Some(r.dup(gpu)?) } else { None };
    let mut blocks = Vec::new();
    let qr_params = BlockedQrParams {
        merge_trailing: merges_trailing::<T>(n),
        ..BlockedQrParams::new(0..m, 0..n, params.block_size)
    };
    let out = QrOutputs {
        d: Some(&mut d),
        q: None,
        keep: keep_q.then_some(&mut blocks),
        clock: clock.as_deref_mut(),
    };
    blocked_qr_with(gpu, &mut r, out, &qr_params)?;
    PhaseClock::time(clock.as_deref_mut(), gpu, PHASE_RANK, || {
        check_rank_dev(gpu, &r, n, params.rank_tol)
    })?;
    if let Some(qm) = q.as_mut() {
        PhaseClock::time(clock, gpu, PHASE_Q, || {
            accumulate_q_backward(gpu, &blocks, qm)
        })?;
    }
    drop(blocks);
    let mut rho = Vec::new();
    if dims.policy != QPolicy::Full {
        // R n×n and d n×q: nothing of height m but Q₁ and the kept data; an R-only
        // state keeps the residual norms ‖d(n:m, k)‖
        let nq = d.ncols();
        if dims.policy == QPolicy::None {
            rho = crate::gpu::algo::thin::column_norms(gpu, &d.block(n, 0, m - n, nq))?
                .into_iter()
                .map(T::from_f64)
                .collect();
        }
        r = gpu.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
        d = gpu.two_phase_copy_new(&d.block(0, 0, n, nq), 0..0, false)?;
    }
    Ok(Factorized { r, d, q, b, a, rho })
}
