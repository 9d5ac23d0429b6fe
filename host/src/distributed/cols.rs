//! Column insertion and rank-one changes of the distributed state (docs/scaling.md#updates):
//! AᵀU as local products and one all-reduce, then the R-only algorithms (the corrected
//! semi-normal equations, docs/algorithms.md#updates-without-q) on the replicated R.
#![forbid(unsafe_code)]

use super::{DistQr, DistScalar};
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::params::QPolicy;
use crate::gpu::algo::{givens_two_phase as tp, householder, reduced, thin};
use crate::gpu::ffi::blas::{Diag, Op, Side, Uplo};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{DevVec, Gpu};

/// What the semi-normal equations give on one rank: C = Q̃ᵀU (n×p, replicated), the rank's
/// rows of Z = U − Q̃C, ZᵀZ and Zᵀ(b − Ax) (summed), and the rank's U rows.
struct Projected<T> {
    c: DevMat<T>,
    z: DevMat<T>,
    ztz: DevMat<T>,
    ztr: DevMat<T>,
    u: DevMat<T>,
}

/// y ← R⁻ᵀy (`trans` = T) or R⁻¹y (`trans` = N), in place.
fn tri<T: DistScalar>(g: &Gpu, r: &DevMat<T>, trans: Op, y: &mut DevMat<T>) -> Result<()> {
    g.trsm(
        Side::Left,
        Uplo::Upper,
        trans,
        Diag::NonUnit,
        T::ONE,
        &r.view(),
        &mut y.view_mut(),
    )
}

/// C = AᵀB on one rank (n×p; zeros for a rank without rows).
fn local_tn<T: DistScalar>(g: &Gpu, a: &DevMat<T>, b: &DevMat<T>) -> Result<DevMat<T>> {
    let mut c = DevMat::<T>::zeros(g, a.ncols(), b.ncols())?;
    if a.nrows() > 0 {
        g.gemm(
            Op::T,
            Op::N,
            T::ONE,
            &a.view(),
            &b.view(),
            T::ZERO,
            &mut c.view_mut(),
        )?;
    }
    Ok(c)
}

/// B ← B − A·X on one rank.
fn sub_ax<T: DistScalar>(g: &Gpu, a: &DevMat<T>, x: &DevMat<T>, b: &mut DevMat<T>) -> Result<()> {
    if a.nrows() > 0 {
        g.gemm(
            Op::N,
            Op::N,
            -T::ONE,
            &a.view(),
            &x.view(),
            T::ONE,
            &mut b.view_mut(),
        )?;
    }
    Ok(())
}

impl<T: DistScalar> DistQr<T> {
    /// Sums one small matrix per local rank over all ranks, in place.
    pub(super) fn sum_all(&self, mats: &mut [DevMat<T>]) -> Result<()> {
        let gpus = self.gpus();
        let gr: Vec<&Gpu> = gpus.iter().map(|g| &**g).collect();
        let mut bufs: Vec<_> = mats.iter_mut().map(|m| m.buf_mut()).collect();
        self.net.all_reduce(&gr, &mut bufs)
    }

    /// Each local rank's rows of the m×p host matrix `u`, in its local order.
    pub(super) fn local_rows_of(&self, u: MatRef<'_, T>) -> Vec<Mat<T>> {
        self.parts
            .iter()
            .map(|p| {
                let idx: Vec<usize> = self.rank_rows(p.rank).into_iter().flatten().collect();
                Mat::from_fn(idx.len(), u.ncols(), |i, j| u.get(idx[i], j))
            })
            .collect()
    }

    /// The corrected semi-normal equations over the ranks for the new columns `u` (m×p).
    fn project(&mut self, u: MatRef<'_, T>) -> Result<Vec<Projected<T>>> {
        let host = self.local_rows_of(u);
        for p in &mut self.parts {
            let g = p.core.gpu.clone();
            p.kept.as_mut().expect("checked").settle(&g)?;
        }
        let mut us = Vec::new();
        let mut y = Vec::new();
        for (p, h) in self.parts.iter().zip(&host) {
            let g = &*p.core.gpu;
            let ud = DevMat::from_host(g, h.as_ref())?;
            y.push(local_tn(g, &p.kept.as_ref().expect("checked").a, &ud)?);
            us.push(ud);
        }
        self.sum_all(&mut y)?;
        // C = R⁻ᵀAᵀU, Z = U − A R⁻¹C, then one refinement step
        let mut cs = Vec::new();
        let mut zs = Vec::new();
        let mut y2 = Vec::new();
        for ((p, ud), mut c) in self.parts.iter().zip(&us).zip(y) {
            let g = &*p.core.gpu;
            let a = &p.kept.as_ref().expect("checked").a;
            tri(g, &p.core.r, Op::T, &mut c)?;
            let mut w = c.dup(g)?;
            tri(g, &p.core.r, Op::N, &mut w)?;
            let mut z = ud.dup(g)?;
            sub_ax(g, a, &w, &mut z)?;
            y2.push(local_tn(g, a, &z)?);
            cs.push(c);
            zs.push(z);
        }
        self.sum_all(&mut y2)?;
        let mut ztz = Vec::new();
        let mut ztr = Vec::new();
        for (((p, c), z), mut dc) in self.parts.iter().zip(&mut cs).zip(&mut zs).zip(y2) {
            let g = &*p.core.gpu;
            let k = p.kept.as_ref().expect("checked");
            tri(g, &p.core.r, Op::T, &mut dc)?;
            g.axpy(T::ONE, &dc.buf().slice(..), &mut c.buf_mut().slice_mut(..))?;
            tri(g, &p.core.r, Op::N, &mut dc)?;
            sub_ax(g, &k.a, &dc, z)?;
            ztz.push(local_tn(g, z, z)?);
            let res = reduced::residual(g, &k.a, &k.b, &p.core.r, &p.core.d)?;
            ztr.push(local_tn(g, z, &res)?);
        }
        self.sum_all(&mut ztz)?;
        self.sum_all(&mut ztr)?;
        Ok(cs
            .into_iter()
            .zip(zs)
            .zip(ztz)
            .zip(ztr)
            .zip(us)
            .map(|((((c, z), ztz), ztr), u)| Projected { c, z, ztz, ztr, u })
            .collect())
    }

    /// The residual norms from every rank's kept rows for R′, d′ (summed squares).
    fn residual_norms_with(
        &self,
        rd: &[(DevMat<T>, DevMat<T>)],
        a2: &[DevMat<T>],
    ) -> Result<Vec<T>> {
        let mut local = Vec::new();
        for ((p, (r, d)), a) in self.parts.iter().zip(rd).zip(a2) {
            let g = &*p.core.gpu;
            let k = p.kept.as_ref().expect("checked");
            let nr = if a.nrows() > 0 {
                reduced::residual_norms(g, a, &k.b, r, d)?
            } else {
                vec![T::ZERO; self.dims.q]
            };
            local.push(nr.iter().map(|x| x.to_f64().powi(2)).collect::<Vec<f64>>());
        }
        let s = self.net.sum_host::<T>(&self.parts[0].core.gpu, &local)?;
        Ok(s.into_iter()
            .map(|x| T::from_f64(x.max(0.0).sqrt()))
            .collect())
    }

    /// Inserts the m×p block `u` as columns k0..k0+p (as [`crate::QrUpdate::insert_cols`]):
    /// AᵀU by local products and an all-reduce, the new columns' residual Z = U − Q̃C on each
    /// rank, its triangular factor from the all-reduced ZᵀZ, then R′ = [R(:, 0:k0) C
    /// R(:, k0:n); 0 G 0] re-triangularised by a Householder strip on every rank. Needs the
    /// kept data.
    ///
    /// # Errors
    /// As [`crate::QrUpdate::insert_cols`]; [`Error::NeedsData`] for an R-only state without kept
    /// data. On error the state is unchanged. The thin kind: docs/scaling.md#the-thin-kind.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::distributed::DistQr;
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let a = Mat::<f64>::from_fn(600, 20, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
    /// let b = Mat::<f64>::from_fn(600, 1, |i, _| i as f64);
    /// let keep = FactorParams { keep_data: true, ..FactorParams::default() };
    /// let mut qr = DistQr::factorize(&[gpu.clone(), gpu], a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
    /// let u = Mat::<f64>::from_fn(600, 2, |i, j| ((i * 3 + j * 5) % 11) as f64);
    /// qr.insert_cols(4, u.as_ref())?;
    /// assert_eq!(qr.ncols(), 22);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn insert_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        const OP: &str = "DistQr::insert_cols";
        self.need_kept(OP, true)?;
        let plan = crate::ops::insert_cols::plan(self.dims, k0, u, self.params.block_size)?;
        if self.dims.policy == QPolicy::Thin {
            return self.thin_insert_cols(OP, k0, u);
        }
        let (n, p) = (self.dims.n, u.ncols());
        let base = super::column_norms(u);
        let tol = crate::base::refusal::dependence_tol::<T>();
        let _ = plan;
        let proj = self.project(u)?;
        let mut rd = Vec::new();
        let mut a2 = Vec::new();
        for (part, pr) in self.parts.iter().zip(&proj) {
            let g = &*part.core.gpu;
            let mut gz = pr.ztz.dup(g)?;
            let bad = g.potrf_upper(&mut gz.view_mut())?;
            let diag = thin::diagonal(g, &gz)?;
            for j in 0..p {
                let rel = if bad != 0 && j + 1 >= bad {
                    0.0
                } else {
                    diag[j].abs() / base[j].max(f64::MIN_POSITIVE)
                };
                if rel.is_nan() || rel <= tol {
                    return Err(Error::RankDeficient {
                        column: k0 + j,
                        r_jj: rel,
                        tol,
                    });
                }
            }
            let gz = g.two_phase_copy_new(&gz.view(), 0..0, true)?;
            let mut f = pr.ztr.dup(g)?;
            tri(g, &gz, Op::T, &mut f)?;
            let np = n + p;
            let mut r = crate::ops::insert_cols::widened_r(g, &part.core.r, &pr.c, &gz, k0)?;
            let mut d = thin::stacked(g, &part.core.d.view(), Some(&f.view()), p)?;
            if k0 < n {
                let nb = crate::base::params::default_block_size(np - k0);
                householder::blocked_qr(g, &mut r, k0..np, k0..np, Some(&mut d), None, nb)?;
            }
            crate::gpu::algo::rank::check_rank(g, &r, np, part.core.rank_tol)?;
            let k = part.kept.as_ref().expect("checked");
            a2.push(reduced::with_cols_inserted(g, &k.a, k0, &pr.u.view())?);
            rd.push((r, d));
            let _ = &pr.z;
        }
        let rho = self.residual_norms_with(&rd, &a2)?;
        for ((part, (r, d)), a) in self.parts.iter_mut().zip(rd).zip(a2) {
            part.core.r = r;
            part.core.d = d;
            part.core.rho = rho.clone();
            part.core.dims.n = n + p;
            let k = part.kept.as_mut().expect("checked");
            k.a = a;
        }
        self.dims.n = n + p;
        Ok(())
    }

    /// Replaces A by A + u vᵀ (as [`crate::QrUpdate::rank_one`]): Aᵀu by local products and
    /// an all-reduce, the semi-normal equations' c = Q̃ᵀu and γ = ‖u − Q̃c‖, then the
    /// rank-one rotations of [R; 0] on every rank and A += u vᵀ on each rank's rows. Needs
    /// the kept data.
    ///
    /// # Errors
    /// As [`crate::QrUpdate::rank_one`]; [`Error::NeedsData`] for an R-only state without kept
    /// data. On error the state is unchanged. The thin kind: docs/scaling.md#the-thin-kind.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::distributed::DistQr;
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let a = Mat::<f64>::from_fn(600, 20, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
    /// let b = Mat::<f64>::from_fn(600, 1, |i, _| i as f64);
    /// let keep = FactorParams { keep_data: true, ..FactorParams::default() };
    /// let mut qr = DistQr::factorize(&[gpu.clone(), gpu], a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
    /// let u: Vec<f64> = (0..600).map(|i| (i % 5) as f64).collect();
    /// let v: Vec<f64> = (0..20).map(|j| j as f64 / 20.0).collect();
    /// qr.rank_one(&u, &v)?;
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn rank_one(&mut self, u: &[T], v: &[T]) -> Result<()> {
        const OP: &str = "DistQr::rank_one";
        self.need_kept(OP, true)?;
        crate::ops::rank_one::plan(self.dims, u, v)?;
        if self.dims.policy == QPolicy::Thin {
            return self.thin_rank_one(OP, u, v);
        }
        let (n, q) = (self.dims.n, self.dims.q);
        let unorm = u.iter().map(|x| x.to_f64().powi(2)).sum::<f64>().sqrt();
        let um = Mat::from_col(u);
        let proj = self.project(um.as_ref())?;
        let mut rd = Vec::new();
        let mut a2 = Vec::new();
        for (part, pr) in self.parts.iter().zip(&proj) {
            let g = &*part.core.gpu;
            let gamma = pr.ztz.to_host(g)?[(0, 0)].to_f64().max(0.0).sqrt();
            let has_dir =
                gamma > crate::base::refusal::dependence_tol::<T>() * unorm && gamma > 0.0;
            let (gamma_t, scale) = if has_dir {
                (T::from_f64(gamma), T::from_f64(1.0 / gamma))
            } else {
                (T::ZERO, T::ZERO)
            };
            let mut r = thin::stacked(g, &part.core.r.view(), None, 1)?;
            let mut d = thin::stacked(g, &part.core.d.view(), None, 1)?;
            let f = pr.ztr.to_host(g)?;
            let frow = Mat::from_fn(1, q, |_, k| {
                T::from_f64(f[(0, k)].to_f64() * scale.to_f64())
            });
            d.block_mut(n, 0, 1, q);
            let fd = DevMat::from_host(g, frow.as_ref())?;
            g.panel_copy(&fd.view(), &mut d.block_mut(n, 0, 1, q))?;
            let mut w_host: Vec<T> = pr.c.to_host(g)?.col(0).to_vec();
            w_host.push(gamma_t);
            let mut w = DevVec::from_slice(g, &w_host)?;
            let vd = DevVec::from_slice(g, v)?;
            let mut scratch = DevMat::<T>::zeros(g, 1, n + 1)?;
            tp::rank_one_rotate_two_phase(g, &mut w, &vd, &mut r, &mut scratch, &mut d)?;
            let r = g.two_phase_copy_new(&r.block(0, 0, n, n), 0..0, true)?;
            let d = g.two_phase_copy_new(&d.block(0, 0, n, q), 0..0, false)?;
            crate::gpu::algo::rank::check_rank(g, &r, n, part.core.rank_tol)?;
            // A + u vᵀ on the rank's rows (a new buffer: nothing changes before all pass)
            let k = part.kept.as_ref().expect("checked");
            let mut a = k.a.dup(g)?;
            if a.nrows() > 0 {
                g.gemm(
                    Op::N,
                    Op::T,
                    T::ONE,
                    &pr.u.view(),
                    &vd.as_col(),
                    T::ONE,
                    &mut a.view_mut(),
                )?;
            }
            a2.push(a);
            rd.push((r, d));
        }
        let rho = self.residual_norms_with(&rd, &a2)?;
        for ((part, (r, d)), a) in self.parts.iter_mut().zip(rd).zip(a2) {
            part.core.r = r;
            part.core.d = d;
            part.core.rho = rho.clone();
            part.kept.as_mut().expect("checked").a = a;
        }
        Ok(())
    }
}
