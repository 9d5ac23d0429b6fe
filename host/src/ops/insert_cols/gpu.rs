//! The GPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Inserts the m×p block `u` as columns k0..k0+p on the device
/// (docs/algorithms.md#column-insertion;
/// docs/design.md): R' = [R(:, 0:k0) | QᵀU | R(:, k0:n)] in a new buffer (two device
/// copies and one cuBLAS GEMM), blocked Householder on R'(n:m, k0:k0+p) applied to copies
/// of d and Q (`gpu::householder::blocked_qr`), then the strip unless k0 = n: Givens
/// rotations (`params.givens`: two-phase, or the seed wavefront) or, where p is a large
/// fraction of n − k0 (`params.column_strip`, `householder_strip_pays`), one blocked
/// Householder QR of the (n + p − k0)² block at rows and columns k0..n+p; the rank
/// check, and the swap.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
) -> Result<()> {
    let plan = plan(st.dims, k0, u, st.params.block_size)?;
    run_gpu_planned(st, plan, UData::Host(u))
}

/// [`run_gpu`] with U already on the device (`GpuQr::insert_cols_device`): the same
/// update without U's upload. The non-finite check runs on the device
/// (`Gpu::first_non_finite`: one launch and a download of p `u32`s).
///
/// # Errors
/// As [`run_gpu`].
pub fn run_gpu_device<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    u: &crate::gpu::runtime::DevMatView<'_, T>,
) -> Result<()> {
    let plan = plan_shape(st.dims, k0, (u.nrows(), u.ncols()), st.params.block_size)?;
    if let Some((row, col)) = st.guarded(|| st.gpu.first_non_finite(u))? {
        return Err(Error::NonFinite {
            op: OP,
            what: "u",
            row,
            col,
        });
    }
    run_gpu_planned(st, plan, UData::Device(u))
}

/// Where the new columns come from.
#[derive(Clone, Copy)]
pub(super) enum UData<'a, 'v, T> {
    /// On the host: uploaded inside the update.
    Host(MatRef<'a, T>),
    /// On the device already.
    Device(&'a crate::gpu::runtime::DevMatView<'v, T>),
}

impl<'a, 'v, T: crate::gpu::runtime::GpuScalar> UData<'a, 'v, T> {
    /// U in device memory when it comes from the host (the caller keeps it alive).
    fn upload(
        self,
        gpu: &crate::gpu::runtime::Gpu,
    ) -> Result<Option<crate::gpu::runtime::DevMat<T>>> {
        match self {
            UData::Host(u) => Ok(Some(crate::gpu::runtime::DevMat::from_host_async(gpu, u)?)),
            UData::Device(_) => Ok(None),
        }
    }

    /// The device view of U: the upload from [`UData::upload`], or the caller's view.
    fn view<'s>(
        self,
        uploaded: &'s Option<crate::gpu::runtime::DevMat<T>>,
    ) -> crate::gpu::runtime::DevMatView<'s, T>
    where
        'a: 's,
        'v: 's,
    {
        match (uploaded, self) {
            (Some(x), _) => x.view(),
            (None, UData::Device(v)) => v.reborrow(),
            (None, UData::Host(_)) => unreachable!("uploaded by UData::upload"),
        }
    }
}

/// Whether column insertion's strip (p new columns at k0, R of n columns, m rows) is
/// cheaper as one blocked Householder QR of the L×L block, L = n + p − k0, than as
/// Givens rotations on the GPU (`ColumnStrip::Auto`). A time model in milliseconds
/// from the H100 measurements in docs/performance.md: the rotations, p·(n − k0) of them on Q's m
/// rows and R's rows
/// (6 flops an element pair), run at about 1.5 TFLOP/s where windows apply them; the
/// Householder QR of an L×L block takes about 5 µs a column (its panel chain) plus
/// 7.2·10⁻¹¹·L³ ms, and its reflectors reach Q (4·m·L² flops) at about 30 TFLOP/s.
/// The first guard keeps every point where p is a small fraction of n − k0 (the
/// windowed rotations run far faster than the model there, e.g. AC-stage) on Givens.
pub(crate) fn householder_strip_pays(m: usize, n: usize, k0: usize, p: usize) -> bool {
    let h = n.saturating_sub(k0);
    if 4 * p < h || h == 0 {
        return false;
    }
    let (m, h, p) = (m as f64, h as f64, p as f64);
    let l = h + p;
    let givens_ms = 6.0 * p * h * (m + l) / 1.5e9;
    let householder_ms = 5e-3 * l + 7.2e-11 * l * l * l + 4.0 * m * l * l / 3.0e10;
    householder_ms < givens_ms
}

pub(super) fn run_gpu_planned<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    Plan { m, n, p, k0, nb }: Plan,
    u: UData<'_, '_, T>,
) -> Result<()> {
    use crate::base::params::{ColumnStrip, Givens};
    use crate::gpu::algo::{givens_two_phase as tp, givens_wavefront as wf, householder};
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::runtime::matrix::DevMat;
    if st.dims.policy == QPolicy::Thin {
        return run_gpu_thin(st, Plan { m, n, p, k0, nb }, u);
    }
    if st.dims.policy == QPolicy::None {
        return run_gpu_reduced(st, Plan { m, n, p, k0, nb }, u);
    }
    let q_old =
        st.q.as_ref()
            .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
    let (r, q, d) = st.guarded(|| {
        let gpu = &*st.gpu;
        let uploaded = u.upload(gpu)?;
        let ud = u.view(&uploaded);
        let mut r = DevMat::zeros(gpu, m, n + p)?;
        gpu.stage_mark("upload, alloc");
        if k0 > 0 {
            let src = st.r.block(0, 0, m, k0);
            gpu.two_phase_copy(&src, &mut r.block_mut(0, 0, m, k0), 0..0, false)?;
        }
        if k0 < n {
            let src = st.r.block(0, k0, m, n - k0);
            gpu.two_phase_copy(&src, &mut r.block_mut(0, k0 + p, m, n - k0), 0..0, false)?;
        }
        gpu.stage_mark("copy R");
        // For k0 < n, QᵀU goes into a matrix of its own, so that the Householder stage on
        // its rows n..m has no trailing columns: R's later columns are exact zeros in
        // those rows (H·0 = 0), and the three GEMMs over them were pure cost.
        // At k0 = n the new columns are R's last, so they are worked on in place.
        let mut own = if k0 < n {
            Some(DevMat::zeros(gpu, m, p)?)
        } else {
            None
        };
        {
            let mut dst = match own.as_mut() {
                Some(x) => x.view_mut(),
                None => r.block_mut(0, k0, m, p),
            };
            gpu.gemm(Op::T, Op::N, T::ONE, &q_old.view(), &ud, T::ZERO, &mut dst)?;
        }
        gpu.stage_mark("Q^T U");
        let mut q = q_old.dup(gpu)?;
        let mut d = st.d.dup(gpu)?;
        gpu.stage_mark("copy Q, d");
        if m > n {
            let (a, cols) = match own.as_mut() {
                Some(x) => (x, 0..p),
                None => (&mut r, k0..k0 + p),
            };
            householder::blocked_qr(gpu, a, n..m, cols, Some(&mut d), Some(&mut q), nb)?;
            gpu.stage_mark("householder rows n..m");
        }
        if let Some(x) = own.as_ref() {
            gpu.panel_copy(&x.view(), &mut r.block_mut(0, k0, m, p))?;
        }
        if k0 < n {
            let householder_strip = match st.params.column_strip {
                ColumnStrip::Givens => false,
                ColumnStrip::Householder => true,
                _ => householder_strip_pays(m, n, k0, p),
            };
            if householder_strip {
                // rows n+p..m are exact zeros in columns k0.. by now: the strip is the
                // (n + p − k0)² block at rows and columns k0..n+p
                let nb2 = crate::base::params::default_block_size(n + p - k0);
                householder::blocked_qr(
                    gpu,
                    &mut r,
                    k0..n + p,
                    k0..n + p,
                    Some(&mut d),
                    Some(&mut q),
                    nb2,
                )?;
                gpu.stage_mark("householder strip");
            } else {
                match st.params.givens {
                    Givens::Wavefront => {
                        wf::insert_cols_strip_wavefront(gpu, &mut r, &mut q, &mut d, k0, p, n)?
                    }
                    Givens::TwoPhase => {
                        tp::insert_cols_strip_two_phase(gpu, &mut r, &mut q, &mut d, k0, p, n)?
                    }
                }
            }
        }
        crate::gpu::algo::rank::check_rank(gpu, &r, n + p, st.rank_tol)?;
        Ok((r, q, d))
    })?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    st.dims.n = n + p;
    Ok(())
}

/// Column insertion into a thin state on the device with Q_z formed explicitly
/// (docs/algorithms.md#thin-column-insertion), the path for new columns mostly inside
/// range(Q₁): C = Q₁ᵀU and Z = U − Q₁C by Gram–Schmidt twice (four GEMMs), the thin QR Z = Q_z·G
/// (a new column whose ‖G_jj‖ ≤ 64u·‖u_j‖ is dependent: [`Error::RankDeficient`]),
/// f = Q_zᵀb from the kept b, then R′ = [R(:, 0:k0) C R(:, k0:n); 0 G 0] ((n+p)×(n+p)),
/// d′ = [d; f] and Q′ = [Q₁ Q_z], and the two-phase strip rotations of the full case on
/// them. Q₁ grows to m×(n+p); nothing is m×m.
///
/// # Errors
/// As [`run_gpu`]. On error the state is unchanged.
fn run_gpu_thin_projected<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    Plan { m, n, p, k0, .. }: Plan,
    u: UData<'_, '_, T>,
) -> Result<()> {
    use crate::gpu::algo::{givens_two_phase as tp, thin};
    use crate::ops::reduced::{dependence_tol, thin_error};
    let nq = st.dims.q;
    let tol = dependence_tol::<T>();
    let out = st.guarded(|| {
        let gpu = &*st.gpu;
        let q1 = st.q.as_ref().expect("a thin state holds Q₁");
        let uploaded = u.upload(gpu)?;
        let ud = u.view(&uploaded);
        let base = thin::column_norms(gpu, &ud)?;
        let (c, z) = thin::project_out(gpu, &q1.view(), &ud)?;
        drop(uploaded);
        gpu.stage_mark("Gram-Schmidt twice");
        let (qz, g) = thin::thin_qr(gpu, z)?;
        gpu.stage_mark("thin QR of the residual");
        let diag = thin::diagonal(gpu, &g)?;
        for (j, (gjj, uj)) in diag.iter().zip(&base).enumerate() {
            let rel = gjj / uj.max(f64::MIN_POSITIVE);
            if rel.is_nan() || rel <= tol {
                return Ok(Err(thin_error(
                    OP,
                    k0,
                    crate::cpu::thin::ThinFailure::DependentColumn {
                        column: j,
                        relative_norm: rel,
                    },
                    tol,
                )));
            }
        }
        let np = n + p;
        let mut r = widened_r(gpu, &st.r, &c, &g, k0)?;
        let mut d = thin::stacked(gpu, &st.d.view(), None, p)?;
        thin::tall_tn(
            gpu,
            &qz.view(),
            &st.kept_b().view(),
            &mut d.block_mut(n, 0, p, nq),
        )?;
        let mut q = thin::side_by_side(gpu, &q1.view(), &qz.view())?;
        drop(qz);
        gpu.stage_mark("R', d', [Q1 Qz]");
        tp::insert_cols_strip_two_phase(gpu, &mut r, &mut q, &mut d, k0, p, n)?;
        crate::gpu::algo::rank::check_rank(gpu, &r, np, st.rank_tol)?;
        Ok(Ok((r, q, d)))
    })?;
    let (r, q, d) = out?;
    debug_assert_eq!(q.nrows(), m);
    st.r = r;
    st.q = Some(q);
    st.d = d;
    st.dims.n = n + p;
    Ok(())
}

/// Column insertion into a thin state on the device (docs/algorithms.md#thin-q-updates-on-the-gpu):
/// C = Q₁ᵀU and UᵀU (one pass over Q₁), the Gram matrix of Z = U − Q₁C as UᵀU − CᵀC and
/// its Cholesky factor G on the host; where every pivot keeps at least half of its column's
/// ‖u_j‖² (the new columns are far enough from range(Q₁) and from each other for the
/// difference to be accurate, the Kahan–Parlett criterion), f = G⁻ᵀ(Uᵀb − Cᵀd), the strip
/// rotations of the full case run on R′, [d; f] and an identity, whose product S gives
/// Q′(:, k0:) = Q₁·X + U·Y with Y = G⁻¹S(n:, k0:) and X = S(0:n, k0:) − C·Y (two GEMMs),
/// Q′(:, 0:k0) = Q₁(:, 0:k0). Otherwise Q_z is formed explicitly (`run_gpu_thin_projected`).
///
/// # Errors
/// As [`run_gpu`]. On error the state is unchanged.
fn run_gpu_thin<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    plan: Plan,
    u: UData<'_, '_, T>,
) -> Result<()> {
    use crate::gpu::algo::reduced::cholesky_lower;
    use crate::gpu::algo::{givens_two_phase as tp, thin};
    use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
    use crate::gpu::runtime::matrix::DevMat;
    let Plan { m, n, p, k0, .. } = plan;
    let nq = st.dims.q;
    let out = st.guarded(|| {
        let g = &*st.gpu;
        let q1 = st.q.as_ref().expect("a thin state holds Q₁");
        let uploaded = u.upload(g)?;
        let ud = u.view(&uploaded);
        let mut c = DevMat::<T>::zeros(g, n, p)?;
        thin::tall_tn(g, &q1.view(), &ud, &mut c.view_mut())?;
        let mut utu = DevMat::<T>::zeros(g, p, p)?;
        thin::tall_tn(g, &ud, &ud, &mut utu.view_mut())?;
        let mut utb = DevMat::<T>::zeros(g, p, nq)?;
        thin::tall_tn(g, &ud, &st.kept_b().view(), &mut utb.view_mut())?;
        g.stage_mark("Q1ᵀU, UᵀU, Uᵀb");
        // ZᵀZ = UᵀU − CᵀC and Uᵀb − Cᵀd on the device (p×p and p×q)
        let mut zgram = g.two_phase_copy_new(&utu.view(), 0..0, false)?;
        g.gemm(
            Op::T,
            Op::N,
            -T::ONE,
            &c.view(),
            &c.view(),
            T::ONE,
            &mut zgram.view_mut(),
        )?;
        g.gemm(
            Op::T,
            Op::N,
            -T::ONE,
            &c.view(),
            &st.d.view(),
            T::ONE,
            &mut utb.view_mut(),
        )?;
        let (utu, zgram, rhs) = (
            thin::to_host_f64(g, &utu.view())?,
            thin::to_host_f64(g, &zgram.view())?,
            thin::to_host_f64(g, &utb.view())?,
        );
        let Ok((l, _)) = cholesky_lower(&zgram, |j| 0.5 * utu[(j, j)]) else {
            return Ok(None);
        };
        // G = Lᵀ (upper); f = G⁻ᵀ(Uᵀb − Cᵀd) = L⁻¹(Uᵀb − Cᵀd)
        let f = crate::gpu::algo::reduced::solve_lower(&l, &rhs);
        g.stage_mark("Gram and its Cholesky factor (host)");
        let gz = thin::from_host_f64::<T>(g, &l.transpose())?;
        let fd = thin::from_host_f64::<T>(g, &f)?;
        let np = n + p;
        let mut r = widened_r(g, &st.r, &c, &gz, k0)?;
        let mut d = thin::stacked(g, &st.d.view(), Some(&fd.view()), p)?;
        g.stage_mark("R', d'");
        let mut sm = thin::identity::<T>(g, np)?;
        tp::insert_cols_strip_two_phase(g, &mut r, &mut sm, &mut d, k0, p, n)?;
        crate::gpu::algo::rank::check_rank(g, &r, np, st.rank_tol)?;
        // Y = G⁻¹S(n:, k0:), X = S(0:n, k0:) − C·Y
        let w = np - k0;
        let mut y = g.two_phase_copy_new(&sm.block(n, k0, p, w), 0..0, false)?;
        g.trsm(
            Side::Left,
            Uplo::Upper,
            Op::N,
            Diag::NonUnit,
            T::ONE,
            &gz.view(),
            &mut y.view_mut(),
        )?;
        let mut x = g.two_phase_copy_new(&sm.block(0, k0, n, w), 0..0, false)?;
        g.gemm(
            Op::N,
            Op::N,
            -T::ONE,
            &c.view(),
            &y.view(),
            T::ONE,
            &mut x.view_mut(),
        )?;
        g.stage_mark("small side: Gram, strip, X, Y");
        let mut qn = DevMat::<T>::for_overwrite(g, m, np)?;
        if k0 > 0 {
            g.panel_copy(&q1.block(0, 0, m, k0), &mut qn.block_mut(0, 0, m, k0))?;
        }
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &ud,
            &y.view(),
            T::ZERO,
            &mut qn.block_mut(0, k0, m, w),
        )?;
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &q1.view(),
            &x.view(),
            T::ONE,
            &mut qn.block_mut(0, k0, m, w),
        )?;
        g.stage_mark("Q' = [Q1(:, 0:k0) | Q1·X + U·Y]");
        Ok(Some((r, qn, d)))
    })?;
    match out {
        Some((r, q, d)) => {
            st.r = r;
            st.q = Some(q);
            st.d = d;
            st.dims.n = n + p;
            Ok(())
        }
        None => run_gpu_thin_projected(st, plan, u),
    }
}

/// Column insertion into an R-only state with kept data on the device
/// (docs/algorithms.md#updates-without-q): C = R⁻ᵀAᵀU and Z = U − A·R⁻¹C by the corrected
/// semi-normal equations (one refinement step), a new column with ‖z_j‖ ≤ 64u·‖u_j‖ is
/// dependent ([`Error::RankDeficient`]), G the triangular factor of Z, f = G⁻ᵀZᵀ(b − Ax),
/// then R′ = [R(:, 0:k0) C R(:, k0:n); 0 G 0] and d′ = [d; f] re-triangularised by one
/// blocked Householder QR of the strip (no Q to rotate); the kept A takes the columns and
/// the residual norms come from the kept data.
///
/// # Errors
/// As [`run_gpu`]; [`Error::NeedsData`] without kept data. On error the state is
/// unchanged.
fn run_gpu_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    Plan { n, p, k0, .. }: Plan,
    u: UData<'_, '_, T>,
) -> Result<()> {
    use crate::gpu::algo::{householder, reduced, thin};
    use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
    use crate::gpu::runtime::matrix::DevMat;
    use crate::ops::reduced::dependence_tol;
    let nq = st.dims.q;
    let (a, b) = st
        .kept_data()
        .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
    let tol = dependence_tol::<T>();
    let out = st.guarded(|| {
        let g = &*st.gpu;
        let uploaded = u.upload(g)?;
        let ud = u.view(&uploaded);
        let base = thin::column_norms(g, &ud)?;
        let (c, z) = reduced::csne_project(g, a, &st.r, &ud)?;
        g.stage_mark("semi-normal equations");
        // f = G⁻ᵀ Zᵀ (b − A x)
        let res = reduced::residual(g, a, b, &st.r, &st.d)?;
        let mut f = DevMat::<T>::zeros(g, p, nq)?;
        thin::tall_tn(g, &z.view(), &res.view(), &mut f.view_mut())?;
        drop(res);
        g.stage_mark("residual, Zᵀr");
        let (gz, znorms) = reduced::r_factor(g, z)?;
        for (j, (zj, uj)) in znorms.iter().zip(&base).enumerate() {
            let rel = zj / uj.max(f64::MIN_POSITIVE);
            if rel.is_nan() || rel <= tol {
                return Ok(Err(Error::RankDeficient {
                    column: k0 + j,
                    r_jj: rel,
                    tol,
                }));
            }
        }
        g.trsm(
            Side::Left,
            Uplo::Upper,
            Op::T,
            Diag::NonUnit,
            T::ONE,
            &gz.view(),
            &mut f.view_mut(),
        )?;
        let np = n + p;
        let mut r = widened_r(g, &st.r, &c, &gz, k0)?;
        let mut d = thin::stacked(g, &st.d.view(), Some(&f.view()), p)?;
        g.stage_mark("semi-normal equations, R', d'");
        if k0 < n {
            let nb = crate::base::params::default_block_size(np - k0);
            householder::blocked_qr(g, &mut r, k0..np, k0..np, Some(&mut d), None, nb)?;
            g.stage_mark("householder strip");
        }
        crate::gpu::algo::rank::check_rank(g, &r, np, st.rank_tol)?;
        let a2 = reduced::with_cols_inserted(g, a, k0, &ud)?;
        let rho = reduced::residual_norms(g, &a2, b, &r, &d)?;
        Ok(Ok((r, d, a2, rho)))
    })?;
    let (r, d, a2, rho) = out?;
    st.r = r;
    st.d = d;
    st.a = Some(a2);
    st.rho = rho;
    st.dims.n = n + p;
    Ok(())
}

/// R′ = [R(:, 0:k0) C R(:, k0:n); 0 G 0] ((n+p)×(n+p)) for the n×n R, the new columns'
/// projection C (n×p) and the triangular factor G (p×p) of their residual.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn widened_r<T: crate::gpu::runtime::GpuScalar>(
    gpu: &crate::gpu::runtime::Gpu,
    r: &crate::gpu::runtime::DevMat<T>,
    c: &crate::gpu::runtime::DevMat<T>,
    g: &crate::gpu::runtime::DevMat<T>,
    k0: usize,
) -> Result<crate::gpu::runtime::DevMat<T>> {
    let (n, p) = (r.ncols(), c.ncols());
    let np = n + p;
    let mut out = crate::gpu::runtime::DevMat::<T>::zeros(gpu, np, np)?;
    if k0 > 0 {
        gpu.panel_copy(&r.block(0, 0, n, k0), &mut out.block_mut(0, 0, n, k0))?;
    }
    if k0 < n {
        gpu.panel_copy(
            &r.block(0, k0, n, n - k0),
            &mut out.block_mut(0, k0 + p, n, n - k0),
        )?;
    }
    gpu.panel_copy(&c.view(), &mut out.block_mut(0, k0, n, p))?;
    gpu.panel_copy(&g.view(), &mut out.block_mut(n, k0, p, p))?;
    Ok(out)
}
