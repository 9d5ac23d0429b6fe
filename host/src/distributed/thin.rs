//! The thin kind's updates of the distributed state (docs/scaling.md#the-thin-kind): each
//! update is small replicated work on every rank (n×n, or (n+p)×(n+p)) from products summed
//! by all-reduce, then one GEMM over each rank's rows of Q₁.
//!
//! * Rows in and out (row insertion and deletion, the window step): the leaving rows'
//!   WᵀW and Wᵀe_o (W their rows of Q₁) are summed over the ranks, and the thin window step's
//!   one Cholesky factor G of M = λ(I − WᵀW) + VᵀV (V = A_n·R⁻¹,
//!   docs/algorithms.md#thin-window-step) gives R′ = G·R, d′ and Q₁′ = [√λ·Q₁(kept); V]·G⁻¹.
//!   Where that form declines, the rows leave by the same formulas with V = 0 and the new rows
//!   enter by one Householder QR of [R′; A_n]; where the rows left pin a pivot below λ/2,
//!   one more Cholesky pass over the new Q₁ (its Gram matrix summed over the ranks) restores
//!   its orthogonality.
//! * Column insertion: C = Q₁ᵀU and Z = U − Q₁C by Gram–Schmidt twice (local products, an
//!   all-reduce each), Z = Q_z·G_z by Cholesky QR twice, then the strip rotations of the
//!   single-GPU thin kind on R′ = [R(:, 0:k0) C R(:, k0:n); 0 G_z 0] and an identity S, and
//!   Q₁′ = Q₁·S(0:n, :) + Q_z·S(n:, :).
//! * Rank-one: c = Q₁ᵀu and z = u − Q₁c likewise, γ = ‖z‖, q̂ = z/γ, the rotations of
//!   [R; 0] + [c; γ]vᵀ on an identity S, then Q₁′ = Q₁·S(0:n, 0:n) + q̂·S(n, 0:n).
//!
//! The small work runs on every rank from the same (summed) inputs, so every rank takes the
//! same branch; R and d are then broadcast from rank 0 so that every copy is the same bit for
//! bit. Nothing of the state changes before every rank has passed every check.
#![forbid(unsafe_code)]

use super::{DistQr, DistScalar, Net};
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::gpu::algo::{givens_two_phase as tp, thin};
use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{DevVec, Gpu};

/// The new rows of a thin rows step: the receiving rank, the local row they take there
/// (counted after the leaving rows are gone), the rows and their right-hand sides.
pub(crate) struct Entering<'a, T> {
    pub(crate) rank: usize,
    pub(crate) at: usize,
    pub(crate) rows: MatRef<'a, T>,
    pub(crate) rhs: MatRef<'a, T>,
}

/// What one rank computes for a rows step before anything is swapped in.
struct RowsSmall<T> {
    r: DevMat<T>,
    d: DevMat<T>,
    /// The n×n matrix the kept rows of Q₁ are multiplied by (√λ included).
    k: DevMat<T>,
    /// The entering rows of Q₁ (p×n).
    new_q: DevMat<T>,
    /// Whether the new Q₁ takes one more Cholesky pass.
    refine: bool,
}

/// A new state for one rank: R, d, its rows of Q₁ and b.
type Fresh<T> = (DevMat<T>, DevMat<T>, DevMat<T>, DevMat<T>);

/// Two lists of matrices, one of each per local rank (small ones, and the rank's rows of tall ones).
type SmallAndRows<T> = (Vec<DevMat<T>>, Vec<DevMat<T>>);

/// `x` upper triangular n×n: its inverse (TRSM on the identity), scaled by `alpha`.
fn inverse<T: DistScalar>(g: &Gpu, x: &DevMat<T>, alpha: T) -> Result<DevMat<T>> {
    let mut inv = thin::identity::<T>(g, x.nrows())?;
    g.trsm(
        Side::Right,
        Uplo::Upper,
        Op::N,
        Diag::NonUnit,
        alpha,
        &x.view(),
        &mut inv.view_mut(),
    )?;
    Ok(inv)
}

/// C = AᵀB (zeros where A has no rows).
fn tn<T: DistScalar>(g: &Gpu, a: &DevMatView<'_, T>, b: &DevMatView<'_, T>) -> Result<DevMat<T>> {
    let mut c = DevMat::<T>::zeros(g, a.ncols(), b.ncols())?;
    if a.nrows() > 0 {
        g.gemm(Op::T, Op::N, T::ONE, a, b, T::ZERO, &mut c.view_mut())?;
    }
    Ok(c)
}

/// C ← C + alpha·A·B (nothing where A has no rows).
fn nn_acc<T: DistScalar>(
    g: &Gpu,
    alpha: T,
    a: &DevMatView<'_, T>,
    b: &DevMatView<'_, T>,
    c: &mut DevMat<T>,
) -> Result<()> {
    if a.nrows() > 0 && a.ncols() > 0 {
        g.gemm(Op::N, Op::N, alpha, a, b, T::ONE, &mut c.view_mut())?;
    }
    Ok(())
}

/// A·B into a new matrix (A with any number of rows).
fn nn<T: DistScalar>(g: &Gpu, a: &DevMatView<'_, T>, b: &DevMatView<'_, T>) -> Result<DevMat<T>> {
    let mut c = DevMat::<T>::zeros(g, a.nrows(), b.ncols())?;
    nn_acc(g, T::ONE, a, b, &mut c)?;
    Ok(c)
}

/// The rows of `src` without the local ranges `cut` (sorted, disjoint), multiplied by `k`
/// where given (otherwise scaled by `scale`), with `new` inserted at row `at` of the result:
/// a new buffer.
fn moved_rows<T: DistScalar>(
    g: &Gpu,
    src: &DevMat<T>,
    cut: &[(usize, usize)],
    k: Option<&DevMat<T>>,
    scale: T,
    new: Option<(usize, &DevMatView<'_, T>)>,
) -> Result<DevMat<T>> {
    let (m, w_in) = (src.nrows(), src.ncols());
    let w_out = k.map_or(w_in, |k| k.ncols());
    // kept runs (source start, length), then split at the insertion point
    let mut runs = Vec::new();
    let mut at_src = 0;
    for &(s, c) in cut {
        if s > at_src {
            runs.push((at_src, s - at_src));
        }
        at_src = s + c;
    }
    if m > at_src {
        runs.push((at_src, m - at_src));
    }
    let kept: usize = runs.iter().map(|r| r.1).sum();
    let (at, p) = new.map_or((kept, 0), |(at, v)| (at, v.nrows()));
    let mut out = DevMat::<T>::zeros(g, kept + p, w_out)?;
    let mut j = 0;
    let mut pieces = Vec::new();
    for (s, len) in runs {
        if j < at && at < j + len {
            let first = at - j;
            pieces.push((s, first, j));
            pieces.push((s + first, len - first, at + p));
        } else {
            pieces.push((s, len, if j < at { j } else { j + p }));
        }
        j += len;
    }
    for (s, len, dst) in pieces {
        let from = src.block(s, 0, len, w_in);
        match k {
            Some(k) => g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &from,
                &k.view(),
                T::ZERO,
                &mut out.block_mut(dst, 0, len, w_out),
            )?,
            None => g.panel_copy(&from, &mut out.block_mut(dst, 0, len, w_out))?,
        }
    }
    if k.is_none() && scale != T::ONE && kept > 0 {
        // the new rows are not written yet: scaling the whole buffer is safe
        g.scal(scale, &mut out.buf_mut().slice_mut(..))?;
    }
    if let Some((at, v)) = new {
        if p > 0 {
            g.panel_copy(v, &mut out.block_mut(at, 0, p, w_out))?;
        }
    }
    Ok(out)
}

impl<T: DistScalar> DistQr<T> {
    /// The local parts' rows of Q₁ and b.
    fn thin_of(&self, i: usize) -> (&DevMat<T>, &DevMat<T>) {
        let (q1, b) = self.parts[i].thin.as_ref().expect("a thin state holds Q₁");
        (q1, b)
    }

    /// Every rank's results, or the first error: where any rank failed (in this process or,
    /// in the one-process-per-GPU form, in another) every rank returns an error.
    fn all_or_error<X>(&self, op: &'static str, outs: Vec<Result<X>>) -> Result<Vec<X>> {
        let failed = outs.iter().filter(|o| o.is_err()).count();
        let total = if let Net::Rank(_) = *self.net {
            let g = &self.parts[0].core.gpu;
            self.net.sum_host::<T>(g, &[vec![failed as f64]])?[0]
        } else {
            failed as f64
        };
        let mut ok = Vec::with_capacity(outs.len());
        for o in outs {
            ok.push(o?);
        }
        if total > 0.5 {
            return Err(Error::InvalidParam {
                op,
                what: "ranks",
                why: "another rank refused the update".into(),
            });
        }
        Ok(ok)
    }

    /// Whether any rank (in any process) says yes.
    fn any_rank(&self, flags: &[bool]) -> Result<bool> {
        let local: Vec<Vec<f64>> = flags
            .iter()
            .map(|&f| vec![f64::from(u8::from(f))])
            .collect();
        let g = &self.parts[0].core.gpu;
        Ok(self.net.sum_host::<T>(g, &local)?[0] > 0.5)
    }

    /// The residual norms ‖b − Q₁d‖ summed over the ranks, for every rank's new Q₁, b, d.
    fn thin_rho(&self, fresh: &[Fresh<T>]) -> Result<Vec<T>> {
        let mut local = Vec::new();
        for (p, (_, d, q1, b)) in self.parts.iter().zip(fresh) {
            let g = &*p.core.gpu;
            let nr = if q1.nrows() > 0 {
                thin::residual_norms(g, q1, d, b)?
            } else {
                vec![0.0; self.dims.q]
            };
            local.push(nr.iter().map(|x| x * x).collect::<Vec<f64>>());
        }
        let s = self.net.sum_host::<T>(&self.parts[0].core.gpu, &local)?;
        Ok(s.into_iter()
            .map(|x| T::from_f64(x.max(0.0).sqrt()))
            .collect())
    }

    /// Swaps every rank's new R, d, Q₁ and b in, with the residual norms and n, then makes R
    /// and d rank 0's bit for bit.
    fn thin_commit(&mut self, op: &'static str, fresh: Vec<Fresh<T>>, n: usize) -> Result<()> {
        let rho = self.thin_rho(&fresh)?;
        for (p, (r, d, q1, b)) in self.parts.iter_mut().zip(fresh) {
            p.core.r = r;
            p.core.d = d;
            p.core.rho = rho.clone();
            p.core.dims.n = n;
            p.thin = Some((q1, b));
        }
        self.dims.n = n;
        if self.world > 1 {
            self.share_core(0, op, true)?;
        }
        Ok(())
    }

    /// One rows step of the thin kind: the rows `leave` ((rank, local start, count) pieces)
    /// leave, `new` enters, λ = `forget` scales the rows kept. Counts and segments are the
    /// caller's.
    ///
    /// # Errors
    /// [`Error::DowndateFailed`] where the rows left do not determine R,
    /// [`Error::RankDeficient`], device errors. On error the state is unchanged.
    pub(crate) fn thin_rows_step(
        &mut self,
        op: &'static str,
        leave: &[(usize, usize, usize)],
        new: Option<Entering<'_, T>>,
        forget: f64,
    ) -> Result<()> {
        let (n, q) = (self.dims.n, self.dims.q);
        // 1. the leaving rows' WᵀW, Wᵀe_o and ‖W‖_F², summed over the ranks
        let mut wtw = Vec::new();
        let mut wte = Vec::new();
        let mut fro = Vec::new();
        for (i, part) in self.parts.iter().enumerate() {
            let g = &*part.core.gpu;
            let (q1, b) = self.thin_of(i);
            let mut a = DevMat::<T>::zeros(g, n, n)?;
            let mut e = DevMat::<T>::zeros(g, n, q)?;
            let mut f2 = 0.0;
            for &(_, s, c) in leave.iter().filter(|l| l.0 == part.rank) {
                let w = q1.block(s, 0, c, n);
                nn_acc_t(g, &w, &w, &mut a)?;
                nn_acc_t(g, &w, &b.block(s, 0, c, q), &mut e)?;
                f2 += thin::column_norms(g, &w)?
                    .iter()
                    .map(|x| x * x)
                    .sum::<f64>();
            }
            wtw.push(a);
            wte.push(e);
            fro.push(vec![f2]);
        }
        if !leave.is_empty() {
            self.sum_all(&mut wtw)?;
            self.sum_all(&mut wte)?;
        }
        let fro2 = self.net.sum_host::<T>(&self.parts[0].core.gpu, &fro)?[0];
        // 2. the small side on every rank
        let lam = forget;
        let (none_n, none_q) = (Mat::<T>::zeros(0, n), Mat::<T>::zeros(0, q));
        let (rows, rhs) = match &new {
            Some(e) => (e.rows, e.rhs),
            None => (none_n.as_ref(), none_q.as_ref()),
        };
        let mut uploads = Vec::new();
        let mut outs = Vec::new();
        for (i, part) in self.parts.iter().enumerate() {
            let g = &*part.core.gpu;
            let (an, en) = if rows.nrows() > 0 {
                (DevMat::from_host(g, rows)?, DevMat::from_host(g, rhs)?)
            } else {
                (DevMat::zeros(g, 0, n)?, DevMat::zeros(g, 0, q)?)
            };
            outs.push(rows_small(
                g,
                &part.core,
                (&wtw[i], &wte[i], fro2),
                (&an, &en),
                lam,
            ));
            uploads.push(en);
        }
        let smalls = self.all_or_error(op, outs)?;
        // 3. the new rows of Q₁ and b on every rank
        let refine = self.any_rank(&smalls.iter().map(|s| s.refine).collect::<Vec<_>>())?;
        let scale = T::from_f64(lam.sqrt());
        let mut fresh = Vec::new();
        for (i, (s, en)) in smalls.into_iter().zip(&uploads).enumerate() {
            let part = &self.parts[i];
            let g = &*part.core.gpu;
            let (q1, b) = self.thin_of(i);
            let cut: Vec<(usize, usize)> = leave
                .iter()
                .filter(|l| l.0 == part.rank)
                .map(|l| (l.1, l.2))
                .collect();
            let into = new.as_ref().filter(|e| e.rank == part.rank).map(|e| e.at);
            let nq = s.new_q.view();
            let ev = en.view();
            let q1n = moved_rows(g, q1, &cut, Some(&s.k), T::ONE, into.map(|at| (at, &nq)))?;
            let bn = moved_rows(g, b, &cut, None, scale, into.map(|at| (at, &ev)))?;
            fresh.push((s.r, s.d, q1n, bn));
        }
        // 4. one more Cholesky pass where a pivot of the rows left is small
        if refine {
            fresh = self.reorthogonalise(op, fresh)?;
        }
        let outs = self
            .parts
            .iter()
            .zip(&fresh)
            .map(|(part, f)| {
                crate::gpu::algo::rank::check_rank(&part.core.gpu, &f.0, n, part.core.rank_tol)
            })
            .collect();
        self.all_or_error(op, outs)?;
        self.thin_commit(op, fresh, n)
    }

    /// Q₁ ← Q₁·G⁻¹, R ← G·R and d ← Q₁ᵀb with GᵀG = Q₁ᵀQ₁ summed over the ranks (Cholesky
    /// QR's second pass).
    ///
    /// # Errors
    /// [`Error::DowndateFailed`] where the Gram matrix is not positive definite, device
    /// errors.
    fn reorthogonalise(&self, op: &'static str, fresh: Vec<Fresh<T>>) -> Result<Vec<Fresh<T>>> {
        let mut grams = Vec::new();
        for (part, f) in self.parts.iter().zip(&fresh) {
            grams.push(tn(&part.core.gpu, &f.2.view(), &f.2.view())?);
        }
        self.sum_all(&mut grams)?;
        let mut outs = Vec::new();
        for ((part, f), mut s) in self.parts.iter().zip(fresh).zip(grams) {
            let g = &*part.core.gpu;
            outs.push((|| {
                let bad = g.potrf_upper(&mut s.view_mut())?;
                if bad != 0 {
                    return Err(Error::DowndateFailed {
                        op,
                        row: 0,
                        why: format!(
                            "the rows left do not determine R (the new Q₁'s Gram matrix is not positive definite at order {bad})"
                        ),
                    });
                }
                let gm = g.two_phase_copy_new(&s.view(), 0..0, true)?;
                let ginv = inverse(g, &gm, T::ONE)?;
                let q1 = nn(g, &f.2.view(), &ginv.view())?;
                let r = nn(g, &gm.view(), &f.0.view())?;
                let d = tn(g, &q1.view(), &f.3.view())?;
                Ok((r, d, q1, f.3))
            })());
        }
        let out = self.all_or_error(op, outs)?;
        let (mut fresh, mut ds): (Vec<_>, Vec<_>) =
            out.into_iter().map(|(r, d, q1, b)| ((r, q1, b), d)).unzip();
        self.sum_all(&mut ds)?;
        let out = fresh
            .drain(..)
            .zip(ds)
            .map(|((r, q1, b), d)| (r, d, q1, b))
            .collect();
        Ok(out)
    }

    /// Column insertion into the thin kind (module docs).
    ///
    /// # Errors
    /// [`Error::RankDeficient`] (a new column inside the span of the others), device errors.
    /// On error the state is unchanged.
    pub(crate) fn thin_insert_cols(
        &mut self,
        op: &'static str,
        k0: usize,
        u: MatRef<'_, T>,
    ) -> Result<()> {
        let (n, p) = (self.dims.n, u.ncols());
        let base = super::column_norms(u);
        let host = self.local_rows_of(u);
        let mut us = Vec::new();
        for (part, h) in self.parts.iter().zip(&host) {
            us.push(DevMat::from_host(&part.core.gpu, h.as_ref())?);
        }
        let (c, zs) = self.project_thin(us)?;
        // Z = Q_z·G_z by Cholesky QR twice
        let (qz, gz) = self.cholesky_qr(op, zs, &base, k0)?;
        let mut f = Vec::new();
        for (i, (part, z)) in self.parts.iter().zip(&qz).enumerate() {
            let (_, b) = self.thin_of(i);
            f.push(tn(&part.core.gpu, &z.view(), &b.view())?);
        }
        self.sum_all(&mut f)?;
        let np = n + p;
        let mut outs = Vec::new();
        for (i, part) in self.parts.iter().enumerate() {
            let g = &*part.core.gpu;
            let core = &part.core;
            outs.push((|| {
                let mut r = crate::ops::insert_cols::widened_r(g, &core.r, &c[i], &gz[i], k0)?;
                let mut d = thin::stacked(g, &core.d.view(), Some(&f[i].view()), p)?;
                let mut s = thin::identity::<T>(g, np)?;
                tp::insert_cols_strip_two_phase(g, &mut r, &mut s, &mut d, k0, p, n)?;
                crate::gpu::algo::rank::check_rank(g, &r, np, core.rank_tol)?;
                Ok((r, d, s))
            })());
        }
        let small = self.all_or_error(op, outs)?;
        let mut fresh = Vec::new();
        for (i, ((r, d, s), z)) in small.into_iter().zip(qz).enumerate() {
            let g = &*self.parts[i].core.gpu;
            let (q1, b) = self.thin_of(i);
            let mut qn = nn(g, &q1.view(), &s.block(0, 0, n, np))?;
            nn_acc(g, T::ONE, &z.view(), &s.block(n, 0, p, np), &mut qn)?;
            fresh.push((r, d, qn, b.dup(g)?));
        }
        self.thin_commit(op, fresh, np)
    }

    /// Rank-one change A + u vᵀ of the thin kind (module docs).
    ///
    /// # Errors
    /// [`Error::RankDeficient`], device errors. On error the state is unchanged.
    pub(crate) fn thin_rank_one(&mut self, op: &'static str, u: &[T], v: &[T]) -> Result<()> {
        let (n, q) = (self.dims.n, self.dims.q);
        let unorm = u.iter().map(|x| x.to_f64().powi(2)).sum::<f64>().sqrt();
        let host = self.local_rows_of(Mat::from_col(u).as_ref());
        let mut us = Vec::new();
        for (part, h) in self.parts.iter().zip(&host) {
            us.push(DevMat::from_host(&part.core.gpu, h.as_ref())?);
        }
        let (c, mut zs) = self.project_thin(us)?;
        let mut sq = Vec::new();
        for (part, z) in self.parts.iter().zip(&zs) {
            let nz = thin::column_norms(&part.core.gpu, &z.view())?;
            sq.push(vec![nz[0] * nz[0]]);
        }
        let gamma = self.net.sum_host::<T>(&self.parts[0].core.gpu, &sq)?[0]
            .max(0.0)
            .sqrt();
        let has_dir = gamma > crate::base::refusal::dependence_tol::<T>() * unorm && gamma > 0.0;
        let (gamma_t, scale) = if has_dir {
            (T::from_f64(gamma), T::from_f64(1.0 / gamma))
        } else {
            (T::ZERO, T::ZERO)
        };
        let mut f = Vec::new();
        for (i, (part, z)) in self.parts.iter().zip(&mut zs).enumerate() {
            let g = &*part.core.gpu;
            if z.nrows() > 0 {
                g.scal(scale, &mut z.buf_mut().slice_mut(..))?;
            }
            let (_, b) = self.thin_of(i);
            f.push(tn(g, &z.view(), &b.view())?);
        }
        self.sum_all(&mut f)?;
        let mut outs = Vec::new();
        for (i, part) in self.parts.iter().enumerate() {
            let g = &*part.core.gpu;
            let core = &part.core;
            outs.push((|| {
                let mut w_host: Vec<T> = c[i].to_host(g)?.col(0).to_vec();
                w_host.push(gamma_t);
                let mut w = DevVec::from_slice(g, &w_host)?;
                let vd = DevVec::from_slice(g, v)?;
                let mut r = thin::stacked(g, &core.r.view(), None, 1)?;
                let mut d = thin::stacked(g, &core.d.view(), Some(&f[i].view()), 1)?;
                let mut s = thin::identity::<T>(g, n + 1)?;
                tp::rank_one_rotate_two_phase(g, &mut w, &vd, &mut r, &mut s, &mut d)?;
                let r = g.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
                let d = g.two_phase_copy_new(&d.block(0, 0, n, q), 0..0, false)?;
                crate::gpu::algo::rank::check_rank(g, &r, n, core.rank_tol)?;
                Ok((r, d, s))
            })());
        }
        let small = self.all_or_error(op, outs)?;
        let mut fresh = Vec::new();
        for (i, ((r, d, s), z)) in small.into_iter().zip(zs).enumerate() {
            let g = &*self.parts[i].core.gpu;
            let (q1, b) = self.thin_of(i);
            let mut qn = nn(g, &q1.view(), &s.block(0, 0, n, n))?;
            nn_acc(g, T::ONE, &z.view(), &s.block(n, 0, 1, n), &mut qn)?;
            fresh.push((r, d, qn, b.dup(g)?));
        }
        self.thin_commit(op, fresh, n)
    }

    /// C = Q₁ᵀU and every rank's rows of Z = U − Q₁C by Gram–Schmidt twice (each product
    /// summed over the ranks).
    fn project_thin(&self, us: Vec<DevMat<T>>) -> Result<SmallAndRows<T>> {
        let mut c: Vec<DevMat<T>> = Vec::new();
        let mut zs = us;
        for pass in 0..2 {
            let mut ci = Vec::new();
            for (i, (part, z)) in self.parts.iter().zip(&zs).enumerate() {
                ci.push(tn(&part.core.gpu, &self.thin_of(i).0.view(), &z.view())?);
            }
            self.sum_all(&mut ci)?;
            for (i, ((part, z), cp)) in self.parts.iter().zip(&mut zs).zip(&ci).enumerate() {
                let g = &*part.core.gpu;
                nn_acc(g, -T::ONE, &self.thin_of(i).0.view(), &cp.view(), z)?;
                if pass > 0 {
                    g.axpy(
                        T::ONE,
                        &cp.buf().slice(..),
                        &mut c[i].buf_mut().slice_mut(..),
                    )?;
                }
            }
            if pass == 0 {
                c = ci;
            }
        }
        Ok((c, zs))
    }

    /// Z = Q_z·G (p columns spread over the ranks) by Cholesky QR twice: GᵀG = ZᵀZ summed over
    /// the ranks, Q_z = Z·G⁻¹, and once more on Q_z. A column j whose first pivot |G_jj| is at
    /// most the dependence tolerance times `base[j]` (‖u_j‖) is refused as column `col0 + j`.
    ///
    /// # Errors
    /// [`Error::RankDeficient`], device errors.
    fn cholesky_qr(
        &self,
        op: &'static str,
        zs: Vec<DevMat<T>>,
        base: &[f64],
        col0: usize,
    ) -> Result<SmallAndRows<T>> {
        let tol = crate::base::refusal::dependence_tol::<T>();
        let mut qs = zs;
        let mut total: Vec<Option<DevMat<T>>> = self.parts.iter().map(|_| None).collect();
        for pass in 0..2 {
            let mut grams = Vec::new();
            for (part, z) in self.parts.iter().zip(&qs) {
                grams.push(tn(&part.core.gpu, &z.view(), &z.view())?);
            }
            self.sum_all(&mut grams)?;
            let mut outs = Vec::new();
            for (part, mut s) in self.parts.iter().zip(grams) {
                let g = &*part.core.gpu;
                outs.push((|| {
                    let bad = g.potrf_upper(&mut s.view_mut())?;
                    let gm = g.two_phase_copy_new(&s.view(), 0..0, true)?;
                    let diag = thin::diagonal(g, &gm)?;
                    for (j, gjj) in diag.iter().enumerate() {
                        let rel = if pass == 0 {
                            gjj / base[j].max(f64::MIN_POSITIVE)
                        } else {
                            *gjj
                        };
                        if (bad != 0 && j + 1 >= bad) || rel.is_nan() || rel <= tol {
                            return Err(Error::RankDeficient {
                                column: col0 + j,
                                r_jj: if bad != 0 && j + 1 >= bad { 0.0 } else { rel },
                                tol,
                            });
                        }
                    }
                    Ok(gm)
                })());
            }
            let gms = self.all_or_error(op, outs)?;
            let mut next = Vec::new();
            for (i, ((part, z), gm)) in self.parts.iter().zip(&qs).zip(gms).enumerate() {
                let g = &*part.core.gpu;
                let ginv = inverse(g, &gm, T::ONE)?;
                next.push(nn(g, &z.view(), &ginv.view())?);
                total[i] = Some(match total[i].take() {
                    None => gm,
                    Some(prev) => nn(g, &gm.view(), &prev.view())?,
                });
            }
            qs = next;
        }
        Ok((
            qs,
            total.into_iter().map(|t| t.expect("two passes")).collect(),
        ))
    }
}

/// C ← C + AᵀB.
fn nn_acc_t<T: DistScalar>(
    g: &Gpu,
    a: &DevMatView<'_, T>,
    b: &DevMatView<'_, T>,
    c: &mut DevMat<T>,
) -> Result<()> {
    if a.nrows() > 0 {
        g.gemm(Op::T, Op::N, T::ONE, a, b, T::ONE, &mut c.view_mut())?;
    }
    Ok(())
}

/// The small side of a thin rows step on one rank (module docs).
fn rows_small<T: DistScalar>(
    g: &Gpu,
    core: &crate::state::gpu::GpuQr<T>,
    products: (&DevMat<T>, &DevMat<T>, f64),
    (an, en): (&DevMat<T>, &DevMat<T>),
    lam: f64,
) -> Result<RowsSmall<T>> {
    use crate::ops::slide::{gram_from_products, stacked_qr};
    let (n, q) = (core.dims.n, core.dims.q);
    let p = an.nrows();
    let sl = T::from_f64(lam.sqrt());
    if let Some(f) = gram_from_products(g, core, products, (&an.view(), &en.view()), lam, true)? {
        let ginv = inverse(g, &f.g, T::ONE)?;
        let new_q = nn(g, &f.v.view(), &ginv.view())?;
        let mut k = ginv;
        if lam < 1.0 {
            g.scal(sl, &mut k.buf_mut().slice_mut(..))?;
        }
        return Ok(RowsSmall {
            r: f.r,
            d: f.d,
            k,
            new_q,
            refine: false,
        });
    }
    // the rows leave alone (refused where they pin R), then the new ones by Householder
    let none_n = DevMat::<T>::zeros(g, 0, n)?;
    let none_q = DevMat::<T>::zeros(g, 0, q)?;
    let down = gram_from_products(
        g,
        core,
        products,
        (&none_n.view(), &none_q.view()),
        lam,
        false,
    )?
    .expect("without new rows nothing declines");
    // a pivot G_jj² below λ/2 (against ‖G‖_F² = λ(n − ‖W‖_F²)): one more pass over Q₁
    let g_fro = (lam * (n as f64 - products.2))
        .max(f64::MIN_POSITIVE)
        .sqrt();
    let refine =
        match crate::gpu::algo::rank::check_rank_dev(g, &down.g, n, (lam / 2.0).sqrt() / g_fro) {
            Ok(()) => false,
            Err(Error::RankDeficient { .. }) => true,
            Err(e) => return Err(e),
        };
    let kd = inverse(g, &down.g, sl)?;
    if p == 0 {
        return Ok(RowsSmall {
            r: down.r,
            d: down.d,
            k: kd,
            new_q: DevMat::zeros(g, 0, n)?,
            refine,
        });
    }
    let (stack, tau, dstack) = stacked_qr(g, (&down.r, &down.d), (&an.view(), &en.view()))?;
    let r = g.two_phase_copy_new(&stack.block(0, 0, n, n), 0..0, true)?;
    let d = g.two_phase_copy_new(&dstack.block(0, 0, n, q), 0..0, false)?;
    let mut qs = stack;
    g.orgqr(&mut qs.view_mut(), n, &tau.view())?;
    let k = nn(g, &kd.view(), &qs.block(0, 0, n, n))?;
    let new_q = g.two_phase_copy_new(&qs.block(n, 0, p, n), 0..0, false)?;
    Ok(RowsSmall {
        r,
        d,
        k,
        new_q,
        refine,
    })
}
