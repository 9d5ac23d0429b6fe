//! The GPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// GPU least-squares solve (docs/algorithms.md#least-squares): x = R₁⁻¹d(0:n) by cuBLAS trsm and
/// the residual norms ‖d(n:m, j)‖ by `reduce_nrm2` (a thin state: ‖b − Q₁d‖ from the kept
/// b; an R-only state: its residual norms), downloaded to the host.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`], [`Error::Cublas`].
pub fn solve_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &crate::state::gpu::GpuQr<T>,
) -> Result<Solution<T>> {
    use crate::gpu::runtime::matrix::DevVec;
    let gpu = &st.gpu;
    let Dims { m, n, q, .. } = st.dims;
    let x =
        crate::gpu::algo::reduced::solve_r(gpu, &st.r.block(0, 0, n, n), &st.d.block(0, 0, n, q))?;
    if st.dims.policy == crate::base::params::QPolicy::Thin {
        let q1 = st.q.as_ref().expect("a thin state holds Q₁");
        let residual_norms = crate::gpu::algo::thin::residual_norms(gpu, q1, &st.d, st.kept_b())?;
        return Ok(Solution {
            x: x.to_host(gpu)?,
            residual_norms,
        });
    }
    if st.dims.policy == crate::base::params::QPolicy::None {
        return Ok(Solution {
            x: x.to_host(gpu)?,
            residual_norms: st.rho.iter().map(|v| v.to_f64()).collect(),
        });
    }
    let mut norms = DevVec::<T>::zeros(gpu, q)?;
    for c in 0..q {
        gpu.reduce_nrm2(&st.d.col(c, n..m), &mut norms.slice_mut(c..c + 1))?;
    }
    let residual_norms = norms.to_vec(gpu)?.iter().map(|v| v.to_f64()).collect();
    Ok(Solution {
        x: x.to_host(gpu)?,
        residual_norms,
    })
}
