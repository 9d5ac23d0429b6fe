//! The GPU path: validation, the choice of path by the state's kind and the swap; the
//! algorithm is `gpu/algo/rank_one.rs`.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::gpu::algo::rank_one::{self as algo, RankOneUpdated};

/// Replaces A by A + u vᵀ on the device (docs/algorithms.md#rank-one-update; docs/design.md):
/// the full kind by [`algo::full`] (w = Qᵀu, stages A and B on copies of R, Q and d), the
/// thin kind by [`algo::thin_small_side`] (or [`algo::thin_projected`] where u lies mostly
/// in range(Q₁)), the R-only kind with kept data by [`algo::r_only`]; the rank check, and
/// the swap. R keeps exact zeros below its diagonal.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    u: &[T],
    v: &[T],
) -> Result<()> {
    plan(st.dims, u, v)?;
    let out = match st.dims.policy {
        QPolicy::Thin => {
            let out = st.guarded(|| algo::thin_small_side(&st.gpu, st.factors(), u, v))?;
            match out {
                Some(out) => out,
                None => {
                    let unorm = crate::cpu::householder::nrm2(u).to_f64();
                    st.guarded(|| algo::thin_projected(&st.gpu, st.factors(), unorm, u, v))?
                }
            }
        }
        QPolicy::None => return run_gpu_reduced(st, u, v),
        QPolicy::Full => {
            if st.q.is_none() {
                return Err(crate::ops::needs_q_or_data(OP));
            }
            let givens = st.params.givens;
            st.guarded(|| algo::full(&st.gpu, st.factors(), givens, u, v))?
        }
    };
    let RankOneUpdated { r, d, q } = out;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    Ok(())
}

/// The R-only kind: [`algo::r_only`] under the guard, then (past the rank test, where only
/// a device fault can fail and poisons the state) [`algo::r_only_finish`] on the kept data.
///
/// # Errors
/// As [`run_gpu`]; [`Error::NeedsData`] without kept data. On error the state is
/// unchanged.
fn run_gpu_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    u: &[T],
    v: &[T],
) -> Result<()> {
    let kept = st
        .kept_data()
        .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
    let unorm = crate::cpu::householder::nrm2(u).to_f64();
    let out = st.guarded(|| algo::r_only(&st.gpu, st.factors(), kept, unorm, u, v))?;
    let gpu = st.gpu.clone();
    let a = st.a.as_mut().expect("checked above");
    let b = st.b.as_ref().expect("checked above");
    let rho = algo::r_only_finish(&gpu, (a, b), &out);
    let rho = crate::state::gpu::poison_on_partial_write(&st.poisoned, rho)?;
    st.r = out.r;
    st.d = out.d;
    st.rho = rho;
    Ok(())
}
