//! The GPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Replaces A by A + u vᵀ on the device (docs/algorithms.md#rank-one-update; docs/design.md): w =
/// Qᵀu by cuBLAS GEMV, then stages A and B on copies of R, Q and d (`params.givens`: two-phase,
/// or the seed wavefront), the rank check, and the swap. R keeps exact zeros below its
/// diagonal.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    u: &[T],
    v: &[T],
) -> Result<()> {
    use crate::base::params::Givens;
    use crate::gpu::algo::{givens_two_phase as tp, givens_wavefront as wf};
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::runtime::matrix::DevVec;
    let Plan { m, n, .. } = plan(st.dims, u, v)?;
    let q_old =
        st.q.as_ref()
            .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
    let (r, q, d) = st.guarded(|| {
        let gpu = &*st.gpu;
        let ud = DevVec::from_slice_async(gpu, u)?;
        let vd = DevVec::from_slice_async(gpu, v)?;
        let mut w = DevVec::zeros(gpu, m)?;
        gpu.stage_mark("upload");
        gpu.gemv(
            Op::T,
            T::ONE,
            &q_old.view(),
            &ud.view(),
            T::ZERO,
            &mut w.view_mut(),
        )?;
        gpu.stage_mark("w = Q^T u");
        let mut q = tp::dup(gpu, q_old)?;
        let mut r = tp::dup(gpu, &st.r)?;
        let mut d = tp::dup(gpu, &st.d)?;
        gpu.stage_mark("copies");
        match st.params.givens {
            Givens::Wavefront => {
                wf::rank_one_rotate_wavefront(gpu, &w, &vd, &mut r, &mut q, &mut d)?
            }
            Givens::TwoPhase => {
                tp::rank_one_rotate_two_phase(gpu, &mut w, &vd, &mut r, &mut q, &mut d)?
            }
        }
        tp::check_rank(gpu, &r, n, st.rank_tol)?;
        Ok((r, q, d))
    })?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    Ok(())
}
