//! The GPU window step. States with Q compose the primitive updates; an R-only state with
//! kept data takes the Gram-free block path of docs/algorithms.md#r-only-window-step.
#![forbid(unsafe_code)]

use super::{plan, Plan, OP};
use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::params::QPolicy;
use crate::gpu::algo::thin;
use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{DevVec, Gpu, GpuScalar};
use crate::state::gpu::GpuQr;

/// One window step on the device (docs/algorithms.md#sliding-window).
///
/// # Errors
/// As [`super::run`].
pub(crate) fn run_gpu<T: GpuScalar>(
    st: &mut GpuQr<T>,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
    drop: usize,
) -> Result<()> {
    let dims = st.dims;
    if dims.policy == QPolicy::None && st.a.is_some() {
        let plan = plan(dims, rows, rhs, drop, st.params)?;
        if plan.drop_first(dims.n) {
            return run_gpu_reduced(st, plan, rows, rhs);
        }
    }
    super::run(st, rows, rhs, drop)
}

/// The R-only window step with kept data (docs/algorithms.md#r-only-window-step).
///
/// 1. The oldest rows A_o (drop×n, with right-hand sides e_o) leave by a block downdate in
///    level-3 form: W = A_o·R⁻¹ (TRSM), G upper with GᵀG = I − WᵀW (cuSOLVER `potrf`; a
///    pivot G_jj² ≤ √u refuses the step), R₁ = G·R, d₁ = G⁻ᵀ(d − Wᵀe_o), and
///    ρ₁² = ρ² + ‖d‖² − ‖e_o‖² − ‖d₁‖².
/// 2. R₁, d₁, ρ₁ and the kept data are scaled by √λ.
/// 3. The new rows enter by one Householder QR of [R₁; A_n] and its reflectors on [d₁; e_n]
///    (cuSOLVER `geqrf`, `ormqr`); ρ₂² = ρ₁² + ‖rows n.. of the transformed [d₁; e_n]‖².
/// 4. The kept A and b lose the oldest rows and take the new ones (one copy), and R₂
///    passes the rank test before anything is swapped in.
///
/// # Errors
/// [`Error::DowndateFailed`] (the rows left do not determine R, or a right-hand side of
/// the leaving rows exceeds the residual), [`Error::RankDeficient`], device errors. On
/// error the state is unchanged.
fn run_gpu_reduced<T: GpuScalar>(
    st: &mut GpuQr<T>,
    plan: Plan,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
) -> Result<()> {
    let Dims { n, q, .. } = st.dims;
    let Plan { m, p, drop, forget } = plan;
    let g = &*st.gpu.clone();
    let (a, b) = st.kept_data().expect("checked by the caller");

    // 1. downdate
    let mut r1 = st.r.dup(g)?;
    let mut d1 = st.d.dup(g)?;
    let mut rho2: Vec<f64> = st.rho.iter().map(|x| x.to_f64().powi(2)).collect();
    if drop > 0 {
        (r1, d1, rho2) = downdate(g, st, &a.block(0, 0, drop, n), &b.block(0, 0, drop, q))?;
    }
    g.stage_mark("window: downdate");

    // 2. forgetting
    let s = T::from_f64(forget.sqrt());
    let scale = |x: &mut DevMat<T>| g.scal(s, &mut x.buf_mut().slice_mut(..));
    if forget < 1.0 {
        scale(&mut r1)?;
        scale(&mut d1)?;
        rho2.iter_mut().for_each(|x| *x *= forget);
    }

    // 3. the new rows: QR of [R₁; A_n], its reflectors on [d₁; e_n]
    let (an, en) = (
        DevMat::from_host_async(g, rows)?,
        DevMat::from_host_async(g, rhs)?,
    );
    let (r2, d2) = if p > 0 {
        let mut stack = thin::stacked(g, &r1.view(), Some(&an.view()), p)?;
        let mut dstack = thin::stacked(g, &d1.view(), Some(&en.view()), p)?;
        let mut tau = DevVec::<T>::zeros(g, n)?;
        g.geqrf(&mut stack.view_mut(), &mut tau.view_mut())?;
        g.ormqr(
            Side::Left,
            Op::T,
            &stack.view(),
            n,
            &tau.view(),
            &mut dstack.view_mut(),
        )?;
        let extra = thin::column_norms(g, &dstack.block(n, 0, p, q))?;
        rho2.iter_mut().zip(extra).for_each(|(x, e)| *x += e * e);
        (
            g.two_phase_copy_new(&stack.block(0, 0, n, n), 0..0, true)?,
            g.two_phase_copy_new(&dstack.block(0, 0, n, q), 0..0, false)?,
        )
    } else {
        (r1, d1)
    };
    g.stage_mark("window: new rows");
    crate::gpu::algo::givens_two_phase::check_rank(g, &r2, n, st.rank_tol)?;

    // 4. the kept data: rows drop..m, scaled, then the new rows
    let m_new = m - drop + p;
    let mut a2 = DevMat::<T>::for_overwrite(g, m_new, n)?;
    let mut b2 = DevMat::<T>::for_overwrite(g, m_new, q)?;
    for (src, dst, width) in [(a, &mut a2, n), (b, &mut b2, q)] {
        if m > drop {
            g.panel_copy(
                &src.block(drop, 0, m - drop, width),
                &mut dst.block_mut(0, 0, m - drop, width),
            )?;
        }
    }
    if forget < 1.0 {
        scale(&mut a2)?;
        scale(&mut b2)?;
    }
    if p > 0 {
        g.panel_copy(&an.view(), &mut a2.block_mut(m - drop, 0, p, n))?;
        g.panel_copy(&en.view(), &mut b2.block_mut(m - drop, 0, p, q))?;
    }
    g.stage_mark("window: kept data");
    st.r = r2;
    st.d = d2;
    st.rho = rho2
        .into_iter()
        .map(|x| T::from_f64(x.max(0.0).sqrt()))
        .collect();
    st.a = Some(a2);
    st.b = Some(b2);
    st.dims.m = m_new;
    Ok(())
}

/// R₁ and d₁ (new buffers) and the new squared residual norms after the rows `ao`
/// (with right-hand sides `eo`) leave, by the level-3 block downdate of [`run_gpu_reduced`].
///
/// # Errors
/// [`Error::DowndateFailed`], device errors.
fn downdate<T: GpuScalar>(
    g: &Gpu,
    st: &GpuQr<T>,
    ao: &crate::gpu::runtime::DevMatView<'_, T>,
    eo: &crate::gpu::runtime::DevMatView<'_, T>,
) -> Result<(DevMat<T>, DevMat<T>, Vec<f64>)> {
    let Dims { n, q, .. } = st.dims;
    let k = ao.nrows();
    let u = T::UNIT_ROUNDOFF;
    // W = A_o·R⁻¹
    let mut w = DevMat::<T>::for_overwrite(g, k, n)?;
    g.panel_copy(ao, &mut w.view_mut())?;
    g.trsm(
        Side::Right,
        Uplo::Upper,
        Op::N,
        Diag::NonUnit,
        T::ONE,
        &st.r.view(),
        &mut w.view_mut(),
    )?;
    // C = I − WᵀW, G = chol(C) (upper)
    let mut c = thin::identity::<T>(g, n)?;
    g.gemm(
        Op::T,
        Op::N,
        -T::ONE,
        &w.view(),
        &w.view(),
        T::ONE,
        &mut c.view_mut(),
    )?;
    let w_fro2 = g.nrm2(&w.buf().slice(..))?.powi(2);
    let bad = g.potrf_upper(&mut c.view_mut())?;
    if bad != 0 {
        return Err(Error::DowndateFailed {
            op: OP,
            row: 0,
            why: format!(
                "the rows left do not determine R (I − WᵀW is not positive definite at order {bad})"
            ),
        });
    }
    let gm = g.two_phase_copy_new(&c.view(), 0..0, true)?;
    drop(c);
    // a pivot G_jj² ≤ √u: the rows left determine R too poorly (the test of the one-row
    // downdate, docs/algorithms.md#updates-without-q), through the rank test's
    // |G_jj| ≤ tol·‖G‖_F with ‖G‖_F² = n − ‖W‖_F²
    let g_fro = (n as f64 - w_fro2).max(f64::MIN_POSITIVE).sqrt();
    if let Err(Error::RankDeficient { column, r_jj, .. }) =
        crate::gpu::algo::householder::check_rank_dev(g, &gm, n, u.sqrt().sqrt() / g_fro)
    {
        return Err(Error::DowndateFailed {
            op: OP,
            row: 0,
            why: format!(
                "the rows left do not determine R (pivot {:e} of I − WᵀW at column {column})",
                r_jj * r_jj
            ),
        });
    }
    // h = d − Wᵀe_o, d₁ = G⁻ᵀh, R₁ = G·R
    let mut h = st.d.dup(g)?;
    g.gemm(
        Op::T,
        Op::N,
        -T::ONE,
        &w.view(),
        eo,
        T::ONE,
        &mut h.view_mut(),
    )?;
    g.trsm(
        Side::Left,
        Uplo::Upper,
        Op::T,
        Diag::NonUnit,
        T::ONE,
        &gm.view(),
        &mut h.view_mut(),
    )?;
    let mut r1 = DevMat::<T>::zeros(g, n, n)?;
    g.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &gm.view(),
        &st.r.view(),
        T::ZERO,
        &mut r1.view_mut(),
    )?;
    // ρ₁² = ρ² + ‖d‖² − ‖e_o‖² − ‖d₁‖², refused below −slack
    let (dn, en, d1n) = (
        thin::column_norms(g, &st.d.view())?,
        thin::column_norms(g, eo)?,
        thin::column_norms(g, &h.view())?,
    );
    let mut rho2 = Vec::with_capacity(q);
    for j in 0..q {
        let r0 = st.rho[j].to_f64();
        let x = r0 * r0 + dn[j] * dn[j] - en[j] * en[j] - d1n[j] * d1n[j];
        let slack = 100.0 * (n + k) as f64 * u * (dn[j] * dn[j] + r0 * r0 + en[j] * en[j]);
        if x < -slack {
            return Err(Error::DowndateFailed {
                op: OP,
                row: 0,
                why: format!("right-hand side {j} of the rows exceeds the residual they leave"),
            });
        }
        rho2.push(x.max(0.0));
    }
    Ok((r1, h, rho2))
}
