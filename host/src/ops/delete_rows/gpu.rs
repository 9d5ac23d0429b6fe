//! The GPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Whether deleting p of m rows (n columns, Q kept, elements of `elem` bytes) is
/// cheaper on the GPU by refactorising A′ = Q(kept, 0:n)·R than by the rotations
/// (`RowRemoval::Auto`'s choice): only where p ≥ m/16, and where a time model in
/// milliseconds from the H100 measurements in docs/performance.md
/// says so. f64: the rotations 2.3·10⁻⁹·p·m·(m + n) ms (the ACC row deletions at
/// p = 100–500, windowed); the factorisation with its m′×m′ Q 6.15·10⁻³·n ms (panel
/// chain) plus (2m′n² + 4m′²n) flops at 30.7 TFLOP/s (fitted to cuqr's 2048×1024 and
/// 4096×2048 factorisations with Q), plus the 2m′n² of A′'s GEMM. f32: rotations
/// 1.08× (the f32/f64 ratio of the ACC rotations at p = 300, where the choice is close;
/// at p = 500–900 they were 1.35–1.48× slower, so the factor errs towards rotating) and
/// refactorisation 0.88× (ACC p = 500) those.
pub(crate) fn refactorising_pays(m: usize, n: usize, p: usize, elem: usize) -> bool {
    if 16 * p < m || p >= m {
        return false;
    }
    let (mp, m, n, p) = ((m - p) as f64, m as f64, n as f64, p as f64);
    let (rot, refac) = if elem == 4 { (1.08, 0.88) } else { (1.0, 1.0) };
    let rotations_ms = rot * 2.3e-9 * p * m * (m + n);
    let flops = 2.0 * mp * n * n + 4.0 * mp * mp * n + 2.0 * mp * n * n;
    let refactorise_ms = refac * (6.15e-3 * n + flops / 3.07e10);
    refactorise_ms < rotations_ms
}

/// Deletes rows k0..k0+p on the device (docs/algorithms.md#row-deletion; docs/design.md): the
/// rotations on copies of Q, R and d (`params.row_removal`: two-phase, or the seed composite /
/// separate-streams designs), then Q̃ = Q(rows ∉ block, p:m), R̃ = R(p:m, :) with exact
/// zeros below the diagonal and d̃ = d(p:m, :) gathered into new buffers, the rank check,
/// and the swap. For large p (`RowRemoval::Refactorise`, or `Auto` where
/// `refactorising_pays`) no rotations: A′ = Q(kept, 0:n)·R and b′ = Q(kept, :)·d, then
/// A′ is factorised again with the state's rank tolerance.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    use crate::base::params::{FactorParams, RowRemoval};
    use crate::gpu::algo::{givens_two_phase as tp, givens_wavefront as wf};
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::runtime::matrix::DevMat;
    use crate::state::gpu::GpuQr;
    let Plan { m, n, p, k0 } = plan(st.dims, k0, p)?;
    if st.dims.policy == QPolicy::Thin {
        return run_gpu_thin(st, Plan { m, n, p, k0 });
    }
    if st.dims.policy == QPolicy::None {
        return run_gpu_reduced(st, Plan { m, n, p, k0 }, None);
    }
    let q_old =
        st.q.as_ref()
            .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
    let (mp, nrhs) = (m - p, st.dims.q);
    let refactorise = match st.params.row_removal {
        RowRemoval::Refactorise => true,
        RowRemoval::Auto => refactorising_pays(m, n, p, core::mem::size_of::<T>()),
        _ => false,
    };
    if refactorise {
        let fresh = st.guarded(|| {
            let gpu = &*st.gpu;
            // A′ = Q(kept, 0:n)·R(0:n, :) (R's rows n.. are zero) and b′ = Q(kept, :)·d
            // (b = Q·d, Q square), by the two row blocks of Q that are kept
            let mut a = DevMat::<T>::zeros(gpu, mp, n)?;
            let mut b = DevMat::<T>::zeros(gpu, mp, nrhs)?;
            for (src, dst, rows) in [(0, 0, k0), (k0 + p, k0, m - k0 - p)] {
                if rows == 0 {
                    continue;
                }
                gpu.gemm(
                    Op::N,
                    Op::N,
                    T::ONE,
                    &q_old.block(src, 0, rows, n),
                    &st.r.block(0, 0, n, n),
                    T::ZERO,
                    &mut a.block_mut(dst, 0, rows, n),
                )?;
                gpu.gemm(
                    Op::N,
                    Op::N,
                    T::ONE,
                    &q_old.block(src, 0, rows, m),
                    &st.d.view(),
                    T::ZERO,
                    &mut b.block_mut(dst, 0, rows, nrhs),
                )?;
            }
            gpu.stage_mark("A' and b'");
            let params = FactorParams {
                block_size: None,
                rank_tol: Some(st.rank_tol),
                keep_data: false,
            };
            let fresh = GpuQr::factorize_dev(&st.gpu, a, b, QPolicy::Full, params)?;
            gpu.stage_mark("refactorise");
            Ok(fresh)
        })?;
        let (r, q, d) = fresh.into_parts();
        st.r = r;
        st.q = q;
        st.d = d;
        st.dims.m = mp;
        return Ok(());
    }
    let (r, q, d) = st.guarded(|| {
        let gpu = &*st.gpu;
        let mut q = q_old.dup(gpu)?;
        let mut r = st.r.dup(gpu)?;
        let mut d = st.d.dup(gpu)?;
        gpu.stage_mark("copies");
        match st.params.row_removal {
            RowRemoval::Composite => {
                wf::delete_rows_rotate_composite(gpu, &mut q, &mut r, &mut d, k0, p)?
            }
            RowRemoval::SeparateStreams => {
                wf::delete_rows_rotate_separate(gpu, &mut q, &mut r, &mut d, k0, p)?
            }
            // (Refactorise returned above)
            RowRemoval::TwoPhase | RowRemoval::Auto | RowRemoval::Refactorise => {
                tp::delete_rows_rotate_two_phase(gpu, &mut q, &mut r, &mut d, k0, p)?
            }
        }
        gpu.stage_mark("rotations");
        let qn = gpu.two_phase_copy_new(&q.block(0, p, m, mp), k0..k0 + p, false)?;
        let rn = gpu.two_phase_copy_new(&r.block(p, 0, mp, n), 0..0, true)?;
        let dn = gpu.two_phase_copy_new(&d.block(p, 0, mp, nrhs), 0..0, false)?;
        gpu.stage_mark("drop rows");
        crate::gpu::algo::rank::check_rank(gpu, &rn, n, st.rank_tol)?;
        Ok((rn, qn, dn))
    })?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    st.dims.m = mp;
    Ok(())
}

/// Row deletion from a thin state on the device by completing the deleted rows explicitly
/// (docs/algorithms.md#thin-row-deletion), the path for rows of high leverage: the
/// deleted rows' unit vectors E are completed against Q₁ by Gram–Schmidt twice (Z = E −
/// Q₁Q₁(rows, :)ᵀ, then Z −= Q₁(Q₁ᵀZ)) and the thin QR Z = V·G (a |G_jj| ≤ √u means the
/// rows left do not determine the factorisation: [`Error::DowndateFailed`]); then the
/// two-phase rotations of the full case on [Q₁ V] (m×(n+p)), [R; 0] and [d; Vᵀb], and
/// Q₁′ = [Q₁ V](kept rows, p:n+p), R′ and d′ their rows p.., b′ = b(kept rows).
///
/// # Errors
/// As [`run_gpu`]. On error the state is unchanged.
fn run_gpu_thin_completed<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    Plan { m, n, p, k0 }: Plan,
) -> Result<()> {
    use crate::gpu::algo::{givens_two_phase as tp, thin};
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::runtime::matrix::DevMat;
    use crate::ops::reduced::{completion_tol, thin_error};
    let nq = st.dims.q;
    let tol = completion_tol::<T>();
    let out = st.guarded(|| {
        let gpu = &*st.gpu;
        let q1 = st.q.as_ref().expect("a thin state holds Q₁");
        // Z = E − Q₁·Q₁(k0..k0+p, :)ᵀ, E the deleted rows' unit vectors
        let mut z = DevMat::<T>::zeros(gpu, m, p)?;
        gpu.panel_set_identity(&mut z.block_mut(k0, 0, p, p))?;
        gpu.gemm(
            Op::N,
            Op::T,
            -T::ONE,
            &q1.view(),
            &q1.block(k0, 0, p, n),
            T::ONE,
            &mut z.view_mut(),
        )?;
        // the second pass: Z −= Q₁(Q₁ᵀZ)
        let mut c2 = DevMat::<T>::zeros(gpu, n, p)?;
        thin::tall_tn(gpu, &q1.view(), &z.view(), &mut c2.view_mut())?;
        gpu.gemm(
            Op::N,
            Op::N,
            -T::ONE,
            &q1.view(),
            &c2.view(),
            T::ONE,
            &mut z.view_mut(),
        )?;
        drop(c2);
        gpu.stage_mark("completion: Gram-Schmidt twice");
        let (v, g) = thin::thin_qr(gpu, z)?;
        gpu.stage_mark("completion: thin QR");
        for (j, gjj) in thin::diagonal(gpu, &g)?.into_iter().enumerate() {
            if gjj.is_nan() || gjj <= tol {
                return Ok(Err(thin_error(
                    OP,
                    k0,
                    crate::cpu::thin::ThinFailure::IllDeterminedCompletion { row: j, norm: gjj },
                    tol,
                )));
            }
        }
        let np = n + p;
        let mut r = thin::stacked(gpu, &st.r.view(), None, p)?;
        let mut d = thin::stacked(gpu, &st.d.view(), None, p)?;
        let b = st.kept_b();
        thin::tall_tn(gpu, &v.view(), &b.view(), &mut d.block_mut(n, 0, p, nq))?;
        let mut qa = thin::side_by_side(gpu, &q1.view(), &v.view())?;
        drop(v);
        gpu.stage_mark("[Q1 V], [R; 0], [d; Vᵀb]");
        tp::delete_rows_rotate_two_phase(gpu, &mut qa, &mut r, &mut d, k0, p)?;
        let qn = gpu.two_phase_copy_new(&qa.block(0, p, m, n), k0..k0 + p, false)?;
        drop(qa);
        let rn = gpu.two_phase_copy_new(&r.block(p, 0, n, n), 0..0, true)?;
        let dn = gpu.two_phase_copy_new(&d.block(p, 0, n, nq), 0..0, false)?;
        let bn = gpu.two_phase_copy_new(&b.view(), k0..k0 + p, false)?;
        gpu.stage_mark("drop rows");
        debug_assert_eq!(r.nrows(), np);
        crate::gpu::algo::rank::check_rank(gpu, &rn, n, st.rank_tol)?;
        Ok(Ok((rn, qn, dn, bn)))
    })?;
    let (r, q, d, b) = out?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    st.b = Some(b);
    st.dims.m = m - p;
    Ok(())
}

/// [`run_gpu`] with the deleted rows of A and b given by the caller (`delete_rows_with`):
/// an R-only state without kept data downdates with them; the other kinds delete rows
/// k0..k0+p as [`run_gpu`] does.
///
/// # Errors
/// Those of `plan_given`, then as [`run_gpu`].
pub fn run_gpu_given<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
) -> Result<()> {
    let p = plan_given(st.dims, k0, rows, rhs)?;
    if st.dims.policy == QPolicy::None && st.a.is_none() {
        let plan = plan(st.dims, k0, p)?;
        return run_gpu_reduced(st, plan, Some((rows, rhs)));
    }
    run_gpu(st, k0, p)
}

/// Row deletion from an R-only state on the device, as a block downdate of [R d]
/// (docs/algorithms.md#updates-without-q): with the deleted rows A_r (p×n) and their
/// right-hand sides e (from the kept data, or from the caller), W = A_r·R⁻¹ (TRSM);
/// on the host from p×p and p×q data, L with LLᵀ = I − WWᵀ (a pivot ≤ √u means the rows
/// left do not determine R: [`Error::DowndateFailed`]) and t = L⁻¹(e − Wd); then the
/// rows [W L] (p×(n+p), orthonormal) are rotated out of [R; 0] and [d; t] by the
/// two-phase rotations of the full case, leaving R′ and d′ in rows p... The residual
/// norms come from the kept data when there are any, else ρ′² = ρ² − ‖t‖².
///
/// # Errors
/// As [`run_gpu`]; [`Error::NeedsData`] without kept data or given rows. On error the
/// state is unchanged.
fn run_gpu_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    Plan { m, n, p, k0 }: Plan,
    given: Option<(MatRef<'_, T>, MatRef<'_, T>)>,
) -> Result<()> {
    use crate::gpu::algo::reduced::{downdate_small, residual_norms, DowndateRefusal};
    use crate::gpu::algo::{givens_two_phase as tp, thin};
    use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
    use crate::gpu::runtime::matrix::DevMat;
    let nq = st.dims.q;
    let out = st.guarded(|| {
        let g = &*st.gpu;
        let (mut w, mut ewd) = match (st.a.as_ref(), st.b.as_ref(), given) {
            (Some(a), Some(b), _) => (
                g.two_phase_copy_new(&a.block(k0, 0, p, n), 0..0, false)?,
                g.two_phase_copy_new(&b.block(k0, 0, p, nq), 0..0, false)?,
            ),
            (_, _, Some((rows, rhs))) => (DevMat::from_host(g, rows)?, DevMat::from_host(g, rhs)?),
            _ => return Ok(Err(crate::ops::needs_q_or_data(OP))),
        };
        // W = A_r·R⁻¹, WWᵀ, e − W d
        g.trsm(
            Side::Right,
            Uplo::Upper,
            Op::N,
            Diag::NonUnit,
            T::ONE,
            &st.r.view(),
            &mut w.view_mut(),
        )?;
        let mut gram = DevMat::<T>::zeros(g, p, p)?;
        g.gemm(
            Op::N,
            Op::T,
            T::ONE,
            &w.view(),
            &w.view(),
            T::ZERO,
            &mut gram.view_mut(),
        )?;
        g.gemm(
            Op::N,
            Op::N,
            -T::ONE,
            &w.view(),
            &st.d.view(),
            T::ONE,
            &mut ewd.view_mut(),
        )?;
        let widen = |x: Mat<T>| Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)].to_f64());
        let rho: Vec<f64> = st.rho.iter().map(|x| x.to_f64()).collect();
        let d_norms = thin::column_norms(g, &st.d.view())?;
        let small = downdate_small(
            &widen(gram.to_host(g)?),
            &widen(ewd.to_host(g)?),
            &rho,
            &d_norms,
            n,
            T::UNIT_ROUNDOFF,
        );
        let (l, t, rho_down) = match small {
            Ok(x) => x,
            Err(DowndateRefusal::NotPositiveDefinite { row, alpha2 }) => {
                return Ok(Err(Error::DowndateFailed {
                    op: OP,
                    row: k0 + row,
                    why: format!("the rows left do not determine R (1 − ‖R⁻ᵀa‖² = {alpha2:e})"),
                }))
            }
            Err(DowndateRefusal::Residual { rhs }) => {
                return Ok(Err(Error::DowndateFailed {
                    op: OP,
                    row: k0,
                    why: format!(
                        "right-hand side {rhs} of the rows exceeds the residual they leave"
                    ),
                }))
            }
        };
        let narrow =
            |x: &Mat<f64>| Mat::from_fn(x.nrows(), x.ncols(), |i, j| T::from_f64(x[(i, j)]));
        let np = n + p;
        let mut za = DevMat::<T>::zeros(g, p, np)?;
        g.panel_copy(&w.view(), &mut za.block_mut(0, 0, p, n))?;
        let ld = DevMat::from_host(g, narrow(&l).as_ref())?;
        g.panel_copy(&ld.view(), &mut za.block_mut(0, n, p, p))?;
        let td = DevMat::from_host(g, narrow(&t).as_ref())?;
        let mut ra = thin::stacked(g, &st.r.view(), None, p)?;
        let mut da = thin::stacked(g, &st.d.view(), Some(&td.view()), p)?;
        g.stage_mark("downdate: W, L, t");
        tp::delete_rows_rotate_two_phase(g, &mut za, &mut ra, &mut da, 0, p)?;
        let rn = g.two_phase_copy_new(&ra.block(p, 0, n, n), 0..0, true)?;
        let dn = g.two_phase_copy_new(&da.block(p, 0, n, nq), 0..0, false)?;
        crate::gpu::algo::rank::check_rank(g, &rn, n, st.rank_tol)?;
        let kept = match (st.a.as_ref(), st.b.as_ref()) {
            (Some(a), Some(b)) => Some((
                g.two_phase_copy_new(&a.view(), k0..k0 + p, false)?,
                g.two_phase_copy_new(&b.view(), k0..k0 + p, false)?,
            )),
            _ => None,
        };
        let rho = match &kept {
            // the kept data give the residual norms without the downdate's cancellation
            Some((a, b)) => residual_norms(g, a, b, &rn, &dn)?,
            None => rho_down.into_iter().map(T::from_f64).collect(),
        };
        Ok(Ok((rn, dn, rho, kept)))
    })?;
    let (r, d, rho, kept) = out?;
    if let Some((a, b)) = kept {
        st.a = Some(a);
        st.b = Some(b);
    }
    st.r = r;
    st.d = d;
    st.rho = rho;
    st.dims.m = m - p;
    Ok(())
}

/// Row deletion from a thin state on the device (docs/algorithms.md#thin-q-updates-on-the-gpu):
/// the completion of the deleted rows comes from the small side. With W = Q₁(rows, :) (p×n),
/// L with LLᵀ = I − WWᵀ (a pivot ≤ √u refuses the rows: [`Error::DowndateFailed`]) gives
/// the deleted rows [W L] of [Q₁ V], where V = −Q₁WᵀL⁻ᵀ off those rows, and Vᵀb =
/// L⁻¹(e − Wd). The rotations of the full case are generated from [W L] and applied to [R; 0],
/// [d; L⁻¹(e − Wd)] and an identity, giving their product G; then Q₁′ = Q₁(kept rows)·M with
/// M = G(0:n, p:) − WᵀL⁻ᵀ·G(n:, p:), one GEMM over Q₁. Where a pivot is below ½ (a deleted row
/// of leverage above ½, where this completion loses accuracy) the explicit completion runs
/// instead.
///
/// # Errors
/// As [`run_gpu`]. On error the state is unchanged.
fn run_gpu_thin<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    plan: Plan,
) -> Result<()> {
    use crate::gpu::algo::delete_rows::{thin_small_side, ThinSmallSide};
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::runtime::matrix::DevMat;
    let Plan { m, n, p, k0 } = plan;
    let out = st.guarded(|| {
        let tol = crate::ops::reduced::completion_tol::<T>();
        let small = match thin_small_side(&st.gpu, st.factors(), (k0, p), tol)? {
            ThinSmallSide::Ready(x) => x,
            ThinSmallSide::Refused { row, norm } => {
                return Ok(Err(thin_refusal::<T>(k0, row, norm)))
            }
            ThinSmallSide::Completed => return Ok(Ok(None)),
        };
        let g = &*st.gpu;
        let q1 = st.q.as_ref().expect("a thin state holds Q₁");
        let mut qn = DevMat::<T>::for_overwrite(g, m - p, n)?;
        for (src, dst, rows) in [(0, 0, k0), (k0 + p, k0, m - k0 - p)] {
            if rows > 0 {
                g.gemm(
                    Op::N,
                    Op::N,
                    T::ONE,
                    &q1.block(src, 0, rows, n),
                    &small.m.view(),
                    T::ZERO,
                    &mut qn.block_mut(dst, 0, rows, n),
                )?;
            }
        }
        let bn = g.two_phase_copy_new(&st.kept_b().view(), k0..k0 + p, false)?;
        g.stage_mark("Q1' = Q1(kept)·M");
        Ok(Ok(Some((small.r, qn, small.d, bn))))
    })?;
    match out? {
        Some((r, q, d, b)) => {
            st.r = r;
            st.q = Some(q);
            st.d = d;
            st.b = Some(b);
            st.dims.m = m - p;
            Ok(())
        }
        None => run_gpu_thin_completed(st, plan),
    }
}

/// The error of a thin row deletion whose completion from the small side is refused: the
/// pivot `row` of the deleted rows (from k0) has norm `norm`.
pub(crate) fn thin_refusal<T: crate::gpu::runtime::GpuScalar>(
    k0: usize,
    row: usize,
    norm: f64,
) -> Error {
    crate::ops::reduced::thin_error(
        OP,
        k0,
        crate::cpu::thin::ThinFailure::IllDeterminedCompletion { row, norm },
        crate::ops::reduced::completion_tol::<T>(),
    )
}
