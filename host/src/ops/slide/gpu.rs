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
    if (dims.policy == QPolicy::None && st.a.is_some()) || dims.policy == QPolicy::Thin {
        let plan = plan(dims, rows, rhs, drop, st.params)?;
        if plan.drop_first(dims.n) {
            if dims.policy == QPolicy::Thin {
                if run_gpu_thin(st, plan, rows, rhs)? {
                    return Ok(());
                }
            } else {
                return run_gpu_reduced(st, plan, rows, rhs);
            }
        }
    }
    super::run(st, rows, rhs, drop)
}

/// The thin window step in one pass over Q₁ (docs/algorithms.md#thin-window-step): the small
/// side of the row deletion gives R′, d′ and M_d with Q₁′ = Q₁(rows k..m)·M_d; after the
/// scaling by √λ, one Householder QR [R′; A_n] = Q_s·R″ (`geqrf`, with Q_s ((n + p)×n) formed
/// by `orgqr`) gives R″, d″ = Q_sᵀ[d′; e_n](0:n) and Q₁″ = [Q₁(k.., :)·(M_d·Q_s(0:n, :));
/// Q_s(n:n+p, :)]: one GEMM over Q₁ instead of one for each half. Returns `false` (nothing
/// changed) where the deletion needs the explicit completion (a leaving row of leverage above
/// ½): the composed step runs then.
///
/// # Errors
/// As [`super::run`]. On error the state is unchanged.
fn run_gpu_thin<T: GpuScalar>(
    st: &mut GpuQr<T>,
    plan: Plan,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
) -> Result<bool> {
    use crate::ops::delete_rows::{
        thin_small_side, Plan as DeletePlan, ThinDeleted, ThinSmallSide,
    };
    let Dims { n, q, .. } = st.dims;
    let Plan { m, p, drop, forget } = plan;
    let g = &*st.gpu.clone();
    // 1. the rows that leave: R′, d′, M_d (nothing of height m touched)
    let ThinDeleted {
        r: mut r1,
        d: mut d1,
        m: md,
    } = if drop > 0 {
        let dp = DeletePlan {
            m,
            n,
            p: drop,
            k0: 0,
        };
        match thin_small_side(st, dp)? {
            ThinSmallSide::Ready(x) => x,
            ThinSmallSide::Refused(e) => return Err(e),
            ThinSmallSide::Completed => return Ok(false),
        }
    } else {
        ThinDeleted {
            r: st.r.dup(g)?,
            d: st.d.dup(g)?,
            m: thin::identity::<T>(g, n)?,
        }
    };
    // 2. forgetting
    if forget < 1.0 {
        let s = T::from_f64(forget.sqrt());
        g.scal(s, &mut r1.buf_mut().slice_mut(..))?;
        g.scal(s, &mut d1.buf_mut().slice_mut(..))?;
    }
    // 3. the new rows: [R′; A_n] = Q_s·R″, d″ = Q_sᵀ[d′; e_n]
    let (an, en) = (
        DevMat::from_host_async(g, rows)?,
        DevMat::from_host_async(g, rhs)?,
    );
    let (r2, d2, mmat, qs) = if p > 0 {
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
        let r2 = g.two_phase_copy_new(&stack.block(0, 0, n, n), 0..0, true)?;
        let d2 = g.two_phase_copy_new(&dstack.block(0, 0, n, q), 0..0, false)?;
        let mut qs = stack;
        g.orgqr(&mut qs.view_mut(), n, &tau.view())?;
        let mut mmat = DevMat::<T>::for_overwrite(g, n, n)?;
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &md.view(),
            &qs.block(0, 0, n, n),
            T::ZERO,
            &mut mmat.view_mut(),
        )?;
        (r2, d2, mmat, Some(qs))
    } else {
        (r1, d1, md, None)
    };
    crate::gpu::algo::givens_two_phase::check_rank(g, &r2, n, st.rank_tol)?;
    g.stage_mark("window: small side");
    // 4. Q₁″ and the kept b
    let m_new = m - drop + p;
    let q1 = st.q.as_ref().expect("a thin state holds Q₁");
    let mut qn = DevMat::<T>::for_overwrite(g, m_new, n)?;
    if m > drop {
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &q1.block(drop, 0, m - drop, n),
            &mmat.view(),
            T::ZERO,
            &mut qn.block_mut(0, 0, m - drop, n),
        )?;
    }
    let b = st.kept_b();
    let mut bn = DevMat::<T>::for_overwrite(g, m_new, q)?;
    if m > drop {
        g.panel_copy(
            &b.block(drop, 0, m - drop, q),
            &mut bn.block_mut(0, 0, m - drop, q),
        )?;
        if forget < 1.0 {
            g.scal(T::from_f64(forget.sqrt()), &mut bn.buf_mut().slice_mut(..))?;
        }
    }
    if let Some(qs) = qs {
        g.panel_copy(&qs.block(n, 0, p, n), &mut qn.block_mut(m - drop, 0, p, n))?;
        g.panel_copy(&en.view(), &mut bn.block_mut(m - drop, 0, p, q))?;
    }
    g.stage_mark("window: Q1'' = Q1·M");
    st.r = r2;
    st.d = d2;
    st.q = Some(qn);
    st.b = Some(bn);
    st.dims.m = m_new;
    Ok(true)
}

/// The R-only window step with kept data (docs/algorithms.md#r-only-window-step). With the
/// leaving rows A_o (k×n, right-hand sides e_o) and the new rows A_n (p×n, e_n):
/// W = A_o·R⁻¹ and V = A_n·R⁻¹ (TRSM). Where ‖V‖_F ≤ 1 (new rows that do not dominate a
/// direction R resolves poorly), one Cholesky factor G of M = λ(I − WᵀW) + VᵀV gives
/// R′ = G·R and d′ = G⁻ᵀ(λ(d − Wᵀe_o) + Vᵀe_n): one `potrf` and a few GEMMs and TRSMs on n×n
/// data. Otherwise the rows leave by the same downdate with V = 0, and the new rows enter by
/// one Householder QR of [R₁; A_n] (`geqrf`, `ormqr`). A pivot G_jj² ≤ √u refuses the step;
/// the kept A and b then lose the oldest rows and take the new ones (one copy), and R′
/// passes the rank test before anything is swapped in.
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
    let (an, en) = (
        DevMat::from_host_async(g, rows)?,
        DevMat::from_host_async(g, rhs)?,
    );
    let gram = Gram {
        ao: a.block(0, 0, drop, n),
        eo: b.block(0, 0, drop, q),
        an: an.view(),
        en: en.view(),
        forget,
    };
    let (r2, d2, rho2) = match gram.step(g, st, true)? {
        Some(x) => x,
        None => {
            // the new rows dominate: downdate alone, then Householder QR of [R₁; A_n]
            let down = Gram {
                ao: gram.ao.reborrow(),
                eo: gram.eo.reborrow(),
                an: an.block(0, 0, 0, n),
                en: en.block(0, 0, 0, q),
                forget,
            };
            let (r1, d1, mut rho2) = down.step(g, st, false)?.expect("no new rows");
            g.stage_mark("window: downdate");
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
                rho2,
            )
        }
    };
    g.stage_mark("window: R and d");
    crate::gpu::algo::givens_two_phase::check_rank(g, &r2, n, st.rank_tol)?;

    // the kept data: rows drop..m, scaled, then the new rows
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
        let s = T::from_f64(forget.sqrt());
        g.scal(s, &mut a2.buf_mut().slice_mut(..))?;
        g.scal(s, &mut b2.buf_mut().slice_mut(..))?;
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

/// The rows that leave and enter in one window step, and the forgetting factor.
struct Gram<'a, T> {
    ao: crate::gpu::runtime::DevMatView<'a, T>,
    eo: crate::gpu::runtime::DevMatView<'a, T>,
    an: crate::gpu::runtime::DevMatView<'a, T>,
    en: crate::gpu::runtime::DevMatView<'a, T>,
    forget: f64,
}

impl<T: GpuScalar> Gram<'_, T> {
    /// R′ and d′ (new buffers) and the new squared residual norms from the Cholesky factor
    /// G of M = λ(I − WᵀW) + VᵀV (see [`run_gpu_reduced`]); `None` when `guard` is set and
    /// ‖V‖_F > 1.
    ///
    /// # Errors
    /// [`Error::DowndateFailed`], device errors.
    #[allow(clippy::type_complexity)]
    fn step(
        &self,
        g: &Gpu,
        st: &GpuQr<T>,
        guard: bool,
    ) -> Result<Option<(DevMat<T>, DevMat<T>, Vec<f64>)>> {
        let Dims { n, q, .. } = st.dims;
        let (k, p, lam) = (self.ao.nrows(), self.an.nrows(), self.forget);
        let u = T::UNIT_ROUNDOFF;
        let solve = |x: &crate::gpu::runtime::DevMatView<'_, T>| -> Result<DevMat<T>> {
            let mut w = DevMat::<T>::for_overwrite(g, x.nrows(), n)?;
            if x.nrows() > 0 {
                g.panel_copy(x, &mut w.view_mut())?;
                g.trsm(
                    Side::Right,
                    Uplo::Upper,
                    Op::N,
                    Diag::NonUnit,
                    T::ONE,
                    &st.r.view(),
                    &mut w.view_mut(),
                )?;
            }
            Ok(w)
        };
        let v = solve(&self.an)?;
        let v_fro2 = if p > 0 {
            g.nrm2(&v.buf().slice(..))?.powi(2)
        } else {
            0.0
        };
        if guard && v_fro2 > 1.0 {
            return Ok(None);
        }
        let w = solve(&self.ao)?;
        let w_fro2 = if k > 0 {
            g.nrm2(&w.buf().slice(..))?.powi(2)
        } else {
            0.0
        };
        // M = λ(I − WᵀW) + VᵀV
        let mut c = thin::identity::<T>(g, n)?;
        let lt = T::from_f64(lam);
        if lam < 1.0 {
            g.scal(lt, &mut c.buf_mut().slice_mut(..))?;
        }
        if k > 0 {
            g.gemm(
                Op::T,
                Op::N,
                -lt,
                &w.view(),
                &w.view(),
                T::ONE,
                &mut c.view_mut(),
            )?;
        }
        if p > 0 {
            g.gemm(
                Op::T,
                Op::N,
                T::ONE,
                &v.view(),
                &v.view(),
                T::ONE,
                &mut c.view_mut(),
            )?;
        }
        let bad = g.potrf_upper(&mut c.view_mut())?;
        if bad != 0 {
            return Err(Error::DowndateFailed {
                op: OP,
                row: 0,
                why: format!(
                    "the rows left do not determine R (the window's Gram factor is not positive definite at order {bad})"
                ),
            });
        }
        let gm = g.two_phase_copy_new(&c.view(), 0..0, true)?;
        drop(c);
        // a pivot G_jj² ≤ √u·λ: the rows left determine R too poorly (the test of the
        // one-row downdate, docs/algorithms.md#updates-without-q), through the rank test's
        // |G_jj| ≤ tol·‖G‖_F with ‖G‖_F² = trace M = λ(n − ‖W‖_F²) + ‖V‖_F²
        let g_fro = (lam * (n as f64 - w_fro2) + v_fro2)
            .max(f64::MIN_POSITIVE)
            .sqrt();
        if let Err(Error::RankDeficient { column, r_jj, .. }) =
            crate::gpu::algo::householder::check_rank_dev(
                g,
                &gm,
                n,
                (u.sqrt() * lam).sqrt() / g_fro,
            )
        {
            return Err(Error::DowndateFailed {
                op: OP,
                row: 0,
                why: format!(
                    "the rows left do not determine R (pivot {:e} of the window's Gram factor at column {column})",
                    r_jj * r_jj
                ),
            });
        }
        // h = λ(d − Wᵀe_o) + Vᵀe_n, d′ = G⁻ᵀh, R′ = G·R
        let mut h = st.d.dup(g)?;
        if k > 0 {
            g.gemm(
                Op::T,
                Op::N,
                -T::ONE,
                &w.view(),
                &self.eo,
                T::ONE,
                &mut h.view_mut(),
            )?;
        }
        if lam < 1.0 {
            g.scal(lt, &mut h.buf_mut().slice_mut(..))?;
        }
        if p > 0 {
            g.gemm(
                Op::T,
                Op::N,
                T::ONE,
                &v.view(),
                &self.en,
                T::ONE,
                &mut h.view_mut(),
            )?;
        }
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
        // ρ′² = λ(ρ² + ‖d‖² − ‖e_o‖²) + ‖e_n‖² − ‖d′‖², refused below −slack
        let (dn, eon, enn, d1n) = (
            thin::column_norms(g, &st.d.view())?,
            thin::column_norms(g, &self.eo)?,
            thin::column_norms(g, &self.en)?,
            thin::column_norms(g, &h.view())?,
        );
        let mut rho2 = Vec::with_capacity(q);
        for j in 0..q {
            let r0 = st.rho[j].to_f64();
            let old = r0 * r0 + dn[j] * dn[j];
            let x = lam * (old - eon[j] * eon[j]) + enn[j] * enn[j] - d1n[j] * d1n[j];
            let slack = 100.0 * (n + k + p) as f64 * u * (old + eon[j] * eon[j] + enn[j] * enn[j]);
            if x < -slack {
                return Err(Error::DowndateFailed {
                    op: OP,
                    row: 0,
                    why: format!("right-hand side {j} of the rows exceeds the residual they leave"),
                });
            }
            rho2.push(x.max(0.0));
        }
        Ok(Some((r1, h, rho2)))
    }
}
