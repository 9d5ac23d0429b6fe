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
    if st.dims.policy == QPolicy::Thin {
        return run_gpu_thin(st, u, v);
    }
    if st.dims.policy == QPolicy::None {
        return run_gpu_reduced(st, u, v);
    }
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
        let mut q = q_old.dup(gpu)?;
        let mut r = st.r.dup(gpu)?;
        let mut d = st.d.dup(gpu)?;
        gpu.stage_mark("copies");
        match st.params.givens {
            Givens::Wavefront => {
                wf::rank_one_rotate_wavefront(gpu, &w, &vd, &mut r, &mut q, &mut d)?
            }
            Givens::TwoPhase => {
                tp::rank_one_rotate_two_phase(gpu, &mut w, &vd, &mut r, &mut q, &mut d)?
            }
        }
        crate::gpu::algo::rank::check_rank(gpu, &r, n, st.rank_tol)?;
        Ok((r, q, d))
    })?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    Ok(())
}

/// Rank-one update of a thin state on the device with the new direction formed explicitly
/// (docs/algorithms.md#thin-rank-one-update), the path for a u mostly inside range(Q₁):
/// w = Q₁ᵀu and z = u − Q₁w by Gram–Schmidt twice, γ = ‖z‖ and q̂ = z/γ (no new direction
/// where γ ≤ 64u·‖u‖: q̂ = 0, γ = 0), then the two-phase stages A and B of the full case on
/// [Q₁ q̂] (m×(n+1)), [R; 0] and [d; q̂ᵀb] with w′ = [w; γ]; q̂'s column and the last row
/// are dropped.
///
/// # Errors
/// As [`run_gpu`]. On error the state is unchanged.
fn run_gpu_thin_projected<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    u: &[T],
    v: &[T],
) -> Result<()> {
    use crate::gpu::algo::{givens_two_phase as tp, thin};
    use crate::gpu::runtime::matrix::DevVec;
    let Dims { m, n, q: nq, .. } = st.dims;
    let unorm = crate::cpu::householder::nrm2(u).to_f64();
    let (r, q, d) = st.guarded(|| {
        let gpu = &*st.gpu;
        let q1 = st.q.as_ref().expect("a thin state holds Q₁");
        let ud = DevVec::from_slice_async(gpu, u)?;
        let vd = DevVec::from_slice_async(gpu, v)?;
        let (c, mut z) = thin::project_out(gpu, &q1.view(), &ud.as_col())?;
        drop(ud);
        let gamma = gpu.nrm2(&z.col(0, 0..m))?;
        let has_dir = gamma > crate::ops::reduced::dependence_tol::<T>() * unorm && gamma > 0.0;
        let (gamma_t, scale) = if has_dir {
            (T::from_f64(gamma), T::from_f64(1.0 / gamma))
        } else {
            (T::ZERO, T::ZERO)
        };
        gpu.scal(scale, &mut z.col_mut(0, 0..m))?;
        gpu.stage_mark("w, q̂");
        // w′ = [w; γ] (n+1, through the host: n + 1 values)
        let mut w_host: Vec<T> = c.to_host(gpu)?.col(0).to_vec();
        w_host.push(gamma_t);
        let mut w = DevVec::from_slice(gpu, &w_host)?;
        let mut r = thin::stacked(gpu, &st.r.view(), None, 1)?;
        let mut d = thin::stacked(gpu, &st.d.view(), None, 1)?;
        thin::tall_tn(
            gpu,
            &z.view(),
            &st.kept_b().view(),
            &mut d.block_mut(n, 0, 1, nq),
        )?;
        let mut q = thin::side_by_side(gpu, &q1.view(), &z.view())?;
        drop(z);
        gpu.stage_mark("[Q1 q̂], [R; 0], [d; q̂ᵀb]");
        tp::rank_one_rotate_two_phase(gpu, &mut w, &vd, &mut r, &mut q, &mut d)?;
        let r = gpu.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
        let d = gpu.two_phase_copy_new(&d.block(0, 0, n, nq), 0..0, false)?;
        q.truncate_cols(n);
        crate::gpu::algo::rank::check_rank(gpu, &r, n, st.rank_tol)?;
        Ok((r, q, d))
    })?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    Ok(())
}

/// Rank-one update of a thin state on the device (docs/algorithms.md#thin-q-updates-on-the-gpu):
/// w = Q₁ᵀu (one pass over Q₁), γ² = ‖u‖² − ‖w‖²; where γ² ≥ ‖u‖²/2 (u is far enough from
/// range(Q₁) for the difference to be accurate, the Kahan–Parlett criterion) the stages A and
/// B of the full case run on [R; 0], [d; (uᵀb − wᵀd)/γ] and an identity, whose product G
/// gives Q₁′ = [Q₁ q̂]·G(:, 0:n) = Q₁·(G(0:n, 0:n) − w·g/γ) + u·g/γ with g = G(n, 0:n): one
/// GEMM over Q₁ and a rank-one term. Otherwise q̂ is formed explicitly
/// (`run_gpu_thin_projected`).
///
/// # Errors
/// As [`run_gpu`]. On error the state is unchanged.
fn run_gpu_thin<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    u: &[T],
    v: &[T],
) -> Result<()> {
    use crate::gpu::algo::{givens_two_phase as tp, thin};
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::runtime::matrix::{DevMat, DevVec};
    let Dims { m, n, q: nq, .. } = st.dims;
    let unorm2: f64 = u.iter().map(|x| x.to_f64() * x.to_f64()).sum();
    let out = st.guarded(|| {
        let g = &*st.gpu;
        let q1 = st.q.as_ref().expect("a thin state holds Q₁");
        let ud = DevVec::from_slice_async(g, u)?;
        let vd = DevVec::from_slice_async(g, v)?;
        g.stage_mark("upload u, v");
        // w = Q₁ᵀu and uᵀb
        let mut wd = DevMat::<T>::zeros(g, n, 1)?;
        thin::tall_tn(g, &q1.view(), &ud.as_col(), &mut wd.view_mut())?;
        let mut utb = DevMat::<T>::zeros(g, 1, nq)?;
        thin::tall_tn(g, &ud.as_col(), &st.kept_b().view(), &mut utb.view_mut())?;
        g.stage_mark("Q1ᵀu, uᵀb");
        let w = thin::to_host_f64(g, &wd.view())?;
        let wn2: f64 = (0..n).map(|i| w[(i, 0)] * w[(i, 0)]).sum();
        let gamma2 = unorm2 - wn2;
        if gamma2.is_nan() || gamma2 < 0.5 * unorm2 || unorm2 == 0.0 {
            return Ok(None);
        }
        let gamma = gamma2.sqrt();
        // f = q̂ᵀb = (uᵀb − wᵀd)/γ
        let dh = thin::to_host_f64(g, &st.d.view())?;
        let utb = thin::to_host_f64(g, &utb.view())?;
        let f = Mat::from_fn(1, nq, |_, k| {
            let wd: f64 = (0..n).map(|i| w[(i, 0)] * dh[(i, k)]).sum();
            (utb[(0, k)] - wd) / gamma
        });
        let mut wext: Vec<T> = (0..n).map(|i| T::from_f64(w[(i, 0)])).collect();
        wext.push(T::from_f64(gamma));
        let mut wv = DevVec::from_slice(g, &wext)?;
        let fd = thin::from_host_f64::<T>(g, &f)?;
        let mut r = thin::stacked(g, &st.r.view(), None, 1)?;
        let mut d = thin::stacked(g, &st.d.view(), Some(&fd.view()), 1)?;
        let mut gm = thin::identity::<T>(g, n + 1)?;
        tp::rank_one_rotate_two_phase(g, &mut wv, &vd, &mut r, &mut gm, &mut d)?;
        let r = g.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
        let d = g.two_phase_copy_new(&d.block(0, 0, n, nq), 0..0, false)?;
        crate::gpu::algo::rank::check_rank(g, &r, n, st.rank_tol)?;
        // h = g/γ (1×n), M = G(0:n, 0:n) − w·h
        let mut h = g.two_phase_copy_new(&gm.block(n, 0, 1, n), 0..0, false)?;
        g.scal(T::from_f64(1.0 / gamma), &mut h.buf_mut().slice_mut(..))?;
        let mut mm = g.two_phase_copy_new(&gm.block(0, 0, n, n), 0..0, false)?;
        g.gemm(
            Op::N,
            Op::N,
            -T::ONE,
            &wd.view(),
            &h.view(),
            T::ONE,
            &mut mm.view_mut(),
        )?;
        g.stage_mark("small side: rotations, M");
        // Q₁′ = u·h + Q₁·M
        let mut qn = DevMat::<T>::for_overwrite(g, m, n)?;
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &ud.as_col(),
            &h.view(),
            T::ZERO,
            &mut qn.view_mut(),
        )?;
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &q1.view(),
            &mm.view(),
            T::ONE,
            &mut qn.view_mut(),
        )?;
        g.stage_mark("Q1' = u·h + Q1·M");
        Ok(Some((r, qn, d)))
    })?;
    match out {
        Some((r, q, d)) => {
            st.r = r;
            st.q = Some(q);
            st.d = d;
            Ok(())
        }
        None => run_gpu_thin_projected(st, u, v),
    }
}

/// Rank-one update of an R-only state with kept data on the device
/// (docs/algorithms.md#updates-without-q): c = R⁻ᵀAᵀu and z = u − A·R⁻¹c by the corrected
/// semi-normal equations, γ = ‖z‖ (no new direction where γ ≤ 64u·‖u‖), f = zᵀ(b − Ax)/γ,
/// then stages A and B on [R; 0] and [d; f] with w′ = [c; γ] (a one-row scratch stands in
/// for Q); A += u vᵀ and the residual norms come from the kept data.
///
/// # Errors
/// As [`run_gpu`]; [`Error::NeedsData`] without kept data. On error the state is
/// unchanged.
fn run_gpu_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    u: &[T],
    v: &[T],
) -> Result<()> {
    use crate::gpu::algo::{givens_two_phase as tp, reduced, thin};
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::runtime::matrix::{DevMat, DevVec};
    let Dims { m, n, q: nq, .. } = st.dims;
    let (a, b) = st
        .kept_data()
        .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
    let unorm = crate::cpu::householder::nrm2(u).to_f64();
    let (r, d, ud, vd) = st.guarded(|| {
        let g = &*st.gpu;
        let ud = DevVec::from_slice_async(g, u)?;
        let vd = DevVec::from_slice_async(g, v)?;
        g.stage_mark("upload u, v");
        let (c, mut z) = reduced::csne_project(g, a, &st.r, &ud.as_col())?;
        g.stage_mark("semi-normal equations");
        let gamma = g.nrm2(&z.col(0, 0..m))?;
        let has_dir = gamma > crate::ops::reduced::dependence_tol::<T>() * unorm && gamma > 0.0;
        let (gamma_t, scale) = if has_dir {
            (T::from_f64(gamma), T::from_f64(1.0 / gamma))
        } else {
            (T::ZERO, T::ZERO)
        };
        g.scal(scale, &mut z.col_mut(0, 0..m))?;
        let res = reduced::residual(g, a, b, &st.r, &st.d)?;
        let mut r = thin::stacked(g, &st.r.view(), None, 1)?;
        let mut d = thin::stacked(g, &st.d.view(), None, 1)?;
        thin::tall_tn(g, &z.view(), &res.view(), &mut d.block_mut(n, 0, 1, nq))?;
        drop(res);
        let mut w_host: Vec<T> = c.to_host(g)?.col(0).to_vec();
        w_host.push(gamma_t);
        let mut w = DevVec::from_slice(g, &w_host)?;
        // the rotations' Q side: one scratch row (an R-only state has no Q)
        let mut scratch = DevMat::<T>::zeros(g, 1, n + 1)?;
        tp::rank_one_rotate_two_phase(g, &mut w, &vd, &mut r, &mut scratch, &mut d)?;
        let r = g.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
        let d = g.two_phase_copy_new(&d.block(0, 0, n, nq), 0..0, false)?;
        crate::gpu::algo::rank::check_rank(g, &r, n, st.rank_tol)?;
        Ok((r, d, ud, vd))
    })?;
    // Past the rank test nothing can refuse the update: A += u vᵀ in place (only a device
    // fault can fail it, and that poisons the state), then the residual norms from it.
    let gpu = st.gpu.clone();
    let g = &*gpu;
    let out = g
        .gemm(
            Op::N,
            Op::T,
            T::ONE,
            &ud.as_col(),
            &vd.as_col(),
            T::ONE,
            &mut st.a.as_mut().expect("checked above").view_mut(),
        )
        .and_then(|()| {
            let (a, b) = st
                .kept_data()
                .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
            reduced::residual_norms(g, a, b, &r, &d)
        });
    let rho = crate::state::gpu::poison_on_fault(&st.poisoned, out)?;
    st.r = r;
    st.d = d;
    st.rho = rho;
    Ok(())
}
