//! Column insertion on the device (docs/algorithms.md#column-insertion,
//! docs/algorithms.md#thin-column-insertion, docs/algorithms.md#updates-without-q): the full
//! kind's QᵀU, Householder on rows n..m and the strip; the thin kind's Gram/Cholesky path and
//! its fallback with Q_z formed explicitly; the R-only kind's corrected semi-normal equations.
//! Each reads the state's [`Factors`] and returns the new factors in new buffers; the
//! operation (`ops/insert_cols/`) swaps them in.

use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::params::{ColumnStrip, Givens};
use crate::base::refusal::{dependence_tol, ThinFailure};
use crate::gpu::algo::factors::{Factors, NewFactors};
use crate::gpu::algo::rank::check_rank;
use crate::gpu::algo::reduced::{self, cholesky_lower, solve_lower};
use crate::gpu::algo::{givens_two_phase as tp, givens_wavefront as wf, householder, thin};
use crate::gpu::ffi::blas::{Op, Side};
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Where and how the new columns enter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ColInsertParams {
    /// The first new column's index.
    pub(crate) k0: usize,
    /// The number of new columns.
    pub(crate) p: usize,
    /// Block size of the Householder stage on rows n..m.
    pub(crate) nb: usize,
    /// The strip's method (`ColumnStrip::Auto`: [`householder_strip_pays`]).
    pub(crate) column_strip: ColumnStrip,
    /// The Givens schedule of the strip.
    pub(crate) givens: Givens,
}

/// The factors after the insertion: R′ ((n+p) columns), d′, and Q′ (m×m, or Q₁′ m×(n+p)).
pub(crate) type ColsInserted<T> = NewFactors<T, DevMat<T>>;

/// The R-only kind's factors after the insertion, with the kept A widened and the
/// residual norms.
pub(crate) struct ColsInsertedReduced<T> {
    /// R′.
    pub(crate) r: DevMat<T>,
    /// d′.
    pub(crate) d: DevMat<T>,
    /// The kept A with the new columns.
    pub(crate) a: DevMat<T>,
    /// Residual norms from the kept data.
    pub(crate) rho: Vec<T>,
}

/// Where the new columns come from.
#[derive(Clone, Copy)]
pub(crate) enum UData<'a, 'v, T> {
    /// On the host: uploaded inside the update.
    Host(MatRef<'a, T>),
    /// On the device already.
    Device(&'a DevMatView<'v, T>),
}

impl<'a, 'v, T: GpuScalar> UData<'a, 'v, T> {
    /// U in device memory when it comes from the host (the caller keeps it alive).
    pub(crate) fn upload(self, gpu: &Gpu) -> Result<Option<DevMat<T>>> {
        match self {
            UData::Host(u) => Ok(Some(DevMat::from_host_async(gpu, u)?)),
            UData::Device(_) => Ok(None),
        }
    }

    /// The device view of U: the upload from [`UData::upload`], or the caller's view.
    pub(crate) fn view<'s>(self, uploaded: &'s Option<DevMat<T>>) -> DevMatView<'s, T>
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

/// The full kind (docs/algorithms.md#column-insertion): R′ = [R(:, 0:k0) | QᵀU | R(:, k0:n)]
/// in a new buffer (two device copies and one cuBLAS GEMM), blocked Householder on
/// R′(n:m, k0:k0+p) applied to copies of d and Q, then the strip unless k0 = n: Givens
/// rotations (`params.givens`) or, where [`householder_strip_pays`] (or
/// `params.column_strip` says so), one blocked Householder QR of the (n + p − k0)² block at
/// rows and columns k0..n+p; the rank check.
///
/// # Errors
/// [`Error::RankDeficient`], [`Error::OutOfMemory`], device errors.
pub(crate) fn full<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    params: ColInsertParams,
    u: UData<'_, '_, T>,
) -> Result<ColsInserted<T>> {
    let ColInsertParams { k0, p, nb, .. } = params;
    let (m, n) = (f.dims.m, f.dims.n);
    let q_old = f.q.expect("the full kind holds Q");
    let uploaded = u.upload(gpu)?;
    let ud = u.view(&uploaded);
    let mut r = DevMat::zeros(gpu, m, n + p)?;
    gpu.stage_mark("upload, alloc");
    if k0 > 0 {
        let src = f.r.block(0, 0, m, k0);
        gpu.two_phase_copy(&src, &mut r.block_mut(0, 0, m, k0), 0..0, false)?;
    }
    if k0 < n {
        let src = f.r.block(0, k0, m, n - k0);
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
    let mut d = f.d.dup(gpu)?;
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
        strip(gpu, &mut r, &mut q, &mut d, params, (m, n))?;
    }
    check_rank(gpu, &r, n + p, f.rank_tol)?;
    Ok(NewFactors { r, d, q })
}

/// The full kind's strip at rows and columns k0..n+p: one blocked Householder QR or the
/// Givens rotations (see [`full`]).
fn strip<T: GpuScalar>(
    gpu: &Gpu,
    r: &mut DevMat<T>,
    q: &mut DevMat<T>,
    d: &mut DevMat<T>,
    params: ColInsertParams,
    (m, n): (usize, usize),
) -> Result<()> {
    let ColInsertParams { k0, p, .. } = params;
    let householder_strip = match params.column_strip {
        ColumnStrip::Givens => false,
        ColumnStrip::Householder => true,
        _ => householder_strip_pays(m, n, k0, p),
    };
    if householder_strip {
        // rows n+p..m are exact zeros in columns k0.. by now: the strip is the
        // (n + p − k0)² block at rows and columns k0..n+p
        let nb2 = crate::base::params::default_block_size(n + p - k0);
        householder::blocked_qr(gpu, r, k0..n + p, k0..n + p, Some(d), Some(q), nb2)?;
        gpu.stage_mark("householder strip");
    } else {
        match params.givens {
            Givens::Wavefront => wf::insert_cols_strip_wavefront(gpu, r, q, d, k0, p, n)?,
            Givens::TwoPhase => tp::insert_cols_strip_two_phase(gpu, r, q, d, k0, p, n)?,
        }
    }
    Ok(())
}

/// The thin kind with Q_z formed explicitly (docs/algorithms.md#thin-column-insertion), the
/// path for new columns mostly inside range(Q₁): C = Q₁ᵀU and Z = U − Q₁C by Gram–Schmidt
/// twice (four GEMMs), the thin QR Z = Q_z·G (a new column whose ‖G_jj‖ ≤ 64u·‖u_j‖ is
/// dependent: `Ok(Err(..))`), f = Q_zᵀb from the kept b, then
/// R′ = [R(:, 0:k0) C R(:, k0:n); 0 G 0] ((n+p)×(n+p)), d′ = [d; f] and Q′ = [Q₁ Q_z], and
/// the two-phase strip rotations of the full case on them. Q₁ grows to m×(n+p); nothing is
/// m×m.
///
/// # Errors
/// [`Error::RankDeficient`], [`Error::OutOfMemory`], device errors.
pub(crate) fn thin_projected<T: GpuScalar>(
    gpu: &Gpu,
    f: Factors<'_, T>,
    (k0, p): (usize, usize),
    u: UData<'_, '_, T>,
) -> Result<std::result::Result<ColsInserted<T>, ThinFailure>> {
    let (n, nq) = (f.dims.n, f.dims.q);
    let tol = dependence_tol::<T>();
    let q1 = f.q1();
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
            return Ok(Err(ThinFailure::DependentColumn {
                column: j,
                relative_norm: rel,
            }));
        }
    }
    let np = n + p;
    let mut r = widened_r(gpu, f.r, &c, &g, k0)?;
    let mut d = thin::stacked(gpu, &f.d.view(), None, p)?;
    thin::tall_tn(
        gpu,
        &qz.view(),
        &f.kept_b().view(),
        &mut d.block_mut(n, 0, p, nq),
    )?;
    let mut q = thin::side_by_side(gpu, &q1.view(), &qz.view())?;
    drop(qz);
    gpu.stage_mark("R', d', [Q1 Qz]");
    tp::insert_cols_strip_two_phase(gpu, &mut r, &mut q, &mut d, k0, p, n)?;
    check_rank(gpu, &r, np, f.rank_tol)?;
    Ok(Ok(NewFactors { r, d, q }))
}

/// The thin kind (docs/algorithms.md#thin-q-updates-on-the-gpu): C = Q₁ᵀU and UᵀU (one pass
/// over Q₁), the Gram matrix of Z = U − Q₁C as UᵀU − CᵀC and its Cholesky factor G on the
/// host; where every pivot keeps at least half of its column's ‖u_j‖² (the new columns are
/// far enough from range(Q₁) and from each other for the difference to be accurate, the
/// Kahan–Parlett criterion), f = G⁻ᵀ(Uᵀb − Cᵀd), the strip rotations of the full case run
/// on R′, [d; f] and an identity, whose product S gives Q′(:, k0:) = Q₁·X + U·Y with
/// Y = G⁻¹S(n:, k0:) and X = S(0:n, k0:) − C·Y (two GEMMs), Q′(:, 0:k0) = Q₁(:, 0:k0).
/// `None` where a pivot fails: the caller takes [`thin_projected`].
///
/// # Errors
/// [`Error::RankDeficient`], [`Error::OutOfMemory`], device errors.
pub(crate) fn thin_gram<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    (k0, p): (usize, usize),
    u: UData<'_, '_, T>,
) -> Result<Option<ColsInserted<T>>> {
    let (m, n, nq) = (f.dims.m, f.dims.n, f.dims.q);
    let q1 = f.q1();
    let uploaded = u.upload(g)?;
    let ud = u.view(&uploaded);
    let mut c = DevMat::<T>::zeros(g, n, p)?;
    thin::tall_tn(g, &q1.view(), &ud, &mut c.view_mut())?;
    let mut utu = DevMat::<T>::zeros(g, p, p)?;
    thin::tall_tn(g, &ud, &ud, &mut utu.view_mut())?;
    let mut utb = DevMat::<T>::zeros(g, p, nq)?;
    thin::tall_tn(g, &ud, &f.kept_b().view(), &mut utb.view_mut())?;
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
        &f.d.view(),
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
    let fh = solve_lower(&l, &rhs);
    g.stage_mark("Gram and its Cholesky factor (host)");
    let gz = thin::from_host_f64::<T>(g, &l.transpose())?;
    let fd = thin::from_host_f64::<T>(g, &fh)?;
    let np = n + p;
    let mut r = widened_r(g, f.r, &c, &gz, k0)?;
    let mut d = thin::stacked(g, &f.d.view(), Some(&fd.view()), p)?;
    g.stage_mark("R', d'");
    let mut sm = thin::identity::<T>(g, np)?;
    tp::insert_cols_strip_two_phase(g, &mut r, &mut sm, &mut d, k0, p, n)?;
    check_rank(g, &r, np, f.rank_tol)?;
    let q = thin_q(g, q1, &ud, (&sm, &gz, &c), (m, n, k0, p))?;
    Ok(Some(NewFactors { r, d, q }))
}

/// The thin kind's new Q₁ from the strip's product S: Y = G⁻¹S(n:, k0:),
/// X = S(0:n, k0:) − C·Y and Q′ = [Q₁(:, 0:k0) | Q₁·X + U·Y].
fn thin_q<T: GpuScalar>(
    g: &Gpu,
    q1: &DevMat<T>,
    ud: &DevMatView<'_, T>,
    (sm, gz, c): (&DevMat<T>, &DevMat<T>, &DevMat<T>),
    (m, n, k0, p): (usize, usize, usize, usize),
) -> Result<DevMat<T>> {
    let np = n + p;
    // Y = G⁻¹S(n:, k0:), X = S(0:n, k0:) − C·Y
    let w = np - k0;
    let mut y = g.two_phase_copy_new(&sm.block(n, k0, p, w), 0..0, false)?;
    reduced::upper_solve(g, Side::Left, Op::N, &gz.view(), &mut y.view_mut())?;
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
        ud,
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
    Ok(qn)
}

/// The R-only kind with kept data `(a, b)` (docs/algorithms.md#updates-without-q):
/// C = R⁻ᵀAᵀU and Z = U − A·R⁻¹C by the corrected semi-normal equations (one refinement
/// step), a new column with ‖z_j‖ ≤ 64u·‖u_j‖ is dependent ([`Error::RankDeficient`] in
/// `Ok(Err(..))`), G the triangular factor of Z, f = G⁻ᵀZᵀ(b − Ax), then
/// R′ = [R(:, 0:k0) C R(:, k0:n); 0 G 0] and d′ = [d; f] re-triangularised by one blocked
/// Householder QR of the strip (no Q to rotate); the kept A takes the columns and the
/// residual norms come from the kept data.
///
/// # Errors
/// [`Error::RankDeficient`], [`Error::OutOfMemory`], device errors.
pub(crate) fn r_only<T: GpuScalar>(
    g: &Gpu,
    f: Factors<'_, T>,
    (a, b): (&DevMat<T>, &DevMat<T>),
    (k0, p): (usize, usize),
    u: UData<'_, '_, T>,
) -> Result<std::result::Result<ColsInsertedReduced<T>, Error>> {
    let (n, nq) = (f.dims.n, f.dims.q);
    let tol = dependence_tol::<T>();
    let uploaded = u.upload(g)?;
    let ud = u.view(&uploaded);
    let base = thin::column_norms(g, &ud)?;
    let (c, z) = reduced::csne_project(g, a, f.r, &ud)?;
    g.stage_mark("semi-normal equations");
    // f = G⁻ᵀ Zᵀ (b − A x)
    let res = reduced::residual(g, a, b, f.r, f.d)?;
    let mut fz = DevMat::<T>::zeros(g, p, nq)?;
    thin::tall_tn(g, &z.view(), &res.view(), &mut fz.view_mut())?;
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
    reduced::upper_solve(g, Side::Left, Op::T, &gz.view(), &mut fz.view_mut())?;
    let np = n + p;
    let mut r = widened_r(g, f.r, &c, &gz, k0)?;
    let mut d = thin::stacked(g, &f.d.view(), Some(&fz.view()), p)?;
    g.stage_mark("semi-normal equations, R', d'");
    if k0 < n {
        let nb = crate::base::params::default_block_size(np - k0);
        householder::blocked_qr(g, &mut r, k0..np, k0..np, Some(&mut d), None, nb)?;
        g.stage_mark("householder strip");
    }
    check_rank(g, &r, np, f.rank_tol)?;
    let a2 = reduced::with_cols_inserted(g, a, k0, &ud)?;
    let rho = reduced::residual_norms(g, &a2, b, &r, &d)?;
    Ok(Ok(ColsInsertedReduced { r, d, a: a2, rho }))
}

/// R′ = [R(:, 0:k0) C R(:, k0:n); 0 G 0] ((n+p)×(n+p)) for the n×n R, the new columns'
/// projection C (n×p) and the triangular factor G (p×p) of their residual.
///
/// # Errors
/// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn widened_r<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMat<T>,
    c: &DevMat<T>,
    g: &DevMat<T>,
    k0: usize,
) -> Result<DevMat<T>> {
    let (n, p) = (r.ncols(), c.ncols());
    let np = n + p;
    let mut out = DevMat::<T>::zeros(gpu, np, np)?;
    reduced::copy_cols_around(gpu, r, n, &mut out, (k0, p))?;
    gpu.panel_copy(&c.view(), &mut out.block_mut(0, k0, n, p))?;
    gpu.panel_copy(&g.view(), &mut out.block_mut(n, k0, p, p))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::householder_strip_pays;

    #[test]
    fn householder_strip_only_where_p_is_large() {
        // the seeds' grid points: ACC (4000×2000, k0 = 0) switches from
        // p = 500 on; AC-p (strip of 20 rows), AC-k3, AC-k6 and AC-stage (p = 200)
        // keep their Givens strips
        assert!(!householder_strip_pays(4000, 2000, 0, 100));
        assert!(!householder_strip_pays(4000, 2000, 0, 300));
        for p in [500, 700, 900] {
            assert!(householder_strip_pays(4000, 2000, 0, p), "ACC p = {p}");
        }
        for p in [100, 700, 1500] {
            assert!(!householder_strip_pays(8000, 3000, 2980, p), "AC-p p = {p}");
        }
        for k0 in (0..3000).step_by(500) {
            assert!(
                !householder_strip_pays(4000, 3000, k0, 200),
                "AC-k3 k0 = {k0}"
            );
        }
        for k0 in (0..6000).step_by(500) {
            assert!(
                !householder_strip_pays(8000, 6000, k0, 200),
                "AC-k6 k0 = {k0}"
            );
        }
        assert!(!householder_strip_pays(16000, 6000, 500, 200));
        // nothing to triangularise at k0 = n
        assert!(!householder_strip_pays(4000, 2000, 2000, 900));
    }
}
