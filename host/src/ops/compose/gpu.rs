//! [`Composite`] for the GPU state: the same hooks as the CPU's, on device buffers.
#![forbid(unsafe_code)]

use std::sync::atomic::Ordering;

use super::cpu::DRIFT_SAMPLE;
use super::{probe, sampled_columns, Composite};
use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::mat::MatRef;
use crate::base::params::{FactorParams, QPolicy, UpdateParams};
use crate::base::solution::DriftReport;
use crate::gpu::ffi::blas::Op;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{DevVec, Gpu, GpuScalar};
use crate::state::gpu::GpuQr;

/// Multiplies every element of `x` by `s` (padding rows are zeros and stay so).
fn scale_mat<T: GpuScalar>(g: &Gpu, x: &mut DevMat<T>, s: T) -> Result<()> {
    g.scal(s, &mut x.buf_mut().slice_mut(..))
}

impl<T: GpuScalar> GpuQr<T> {
    /// A (m×n) and b (m×q) in new device buffers: Q·R and Q·d (full), Q₁·R and the kept
    /// b (thin), or copies of the kept data (R-only). `op` names the update for the error.
    fn data_dev(&self, op: &'static str) -> Result<(DevMat<T>, DevMat<T>)> {
        let g = &*self.gpu;
        let Dims { m, n, q, .. } = self.dims;
        match (&self.q, &self.a, &self.b) {
            (Some(qm), _, b) => {
                let mut a = DevMat::<T>::for_overwrite(g, m, n)?;
                g.gemm(
                    Op::N,
                    Op::N,
                    T::ONE,
                    &qm.block(0, 0, m, n),
                    &self.r.block(0, 0, n, n),
                    T::ZERO,
                    &mut a.view_mut(),
                )?;
                let b = match b {
                    Some(b) => b.dup(g)?,
                    None => {
                        let mut b = DevMat::<T>::for_overwrite(g, m, q)?;
                        g.gemm(
                            Op::N,
                            Op::N,
                            T::ONE,
                            &qm.view(),
                            &self.d.view(),
                            T::ZERO,
                            &mut b.view_mut(),
                        )?;
                        b
                    }
                };
                Ok((a, b))
            }
            (None, Some(_), Some(_)) => {
                let (a, b) = self.kept_views().expect("kept");
                let mut a2 = DevMat::<T>::for_overwrite(g, m, n)?;
                let mut b2 = DevMat::<T>::for_overwrite(g, m, q)?;
                g.panel_copy(&a, &mut a2.view_mut())?;
                g.panel_copy(&b, &mut b2.view_mut())?;
                Ok((a2, b2))
            }
            _ => Err(crate::ops::needs_q_or_data(op)),
        }
    }
}

impl<T: GpuScalar> Composite<T> for GpuQr<T> {
    fn dims(&self) -> Dims {
        self.dims
    }
    fn update_params(&self) -> UpdateParams {
        self.params
    }
    fn holds_q(&self) -> bool {
        self.q.is_some()
    }
    fn keeps_a(&self) -> bool {
        self.a.is_some()
    }
    fn snapshot(&self) -> Result<Self> {
        self.try_clone()
    }
    fn scale(&mut self, s: T) -> Result<()> {
        let g = self.gpu.clone();
        scale_mat(&g, &mut self.r, s)?;
        scale_mat(&g, &mut self.d, s)?;
        if let Some(b) = self.b.as_mut() {
            scale_mat(&g, b, s)?;
        }
        if let Some(a) = self.a.as_mut() {
            scale_mat(&g, a, s)?;
        }
        self.rho.iter_mut().for_each(|v| *v *= s);
        Ok(())
    }
    fn column_of_a(&self, j: usize) -> Result<Vec<T>> {
        let g = &*self.gpu;
        let m = self.dims.m;
        let mut col = DevMat::<T>::zeros(g, m, 1)?;
        match (&self.q, &self.a) {
            (Some(qm), _) => {
                let k = (j + 1).min(m);
                g.gemm(
                    Op::N,
                    Op::N,
                    T::ONE,
                    &qm.block(0, 0, m, k),
                    &self.r.block(0, j, k, 1),
                    T::ZERO,
                    &mut col.view_mut(),
                )?;
            }
            (None, Some(a)) => {
                g.panel_copy(&a.block(self.kept_row0, j, m, 1), &mut col.view_mut())?
            }
            _ => return Err(crate::ops::needs_q_or_data("shift_col")),
        }
        Ok(col.to_host(g)?.col(0).to_vec())
    }
    fn refactor_plus(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()> {
        let (mut a, b) = self.data_dev("rank_k")?;
        let g = self.gpu.clone();
        if u.ncols() > 0 {
            let ud = DevMat::from_host(&g, u)?;
            let vd = DevMat::from_host(&g, v)?;
            g.gemm(
                Op::N,
                Op::T,
                T::ONE,
                &ud.view(),
                &vd.view(),
                T::ONE,
                &mut a.view_mut(),
            )?;
        }
        let params = FactorParams {
            block_size: self.params.block_size,
            rank_tol: Some(self.rank_tol),
            keep_data: self.a.is_some(),
        };
        let mut next = GpuQr::factorize_dev(&g, a, b, self.dims.policy, params)?;
        next.params = self.params;
        next.drift = self.drift;
        *self = next;
        Ok(())
    }
    fn insert_rows_raw(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
        crate::ops::insert_rows::run_gpu(self, k0, u, e)
    }
    fn delete_rows_raw(&mut self, k0: usize, p: usize) -> Result<()> {
        crate::ops::delete_rows::run_gpu(self, k0, p)
    }
    fn insert_cols_raw(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        crate::ops::insert_cols::run_gpu(self, k0, u)
    }
    fn delete_cols_raw(&mut self, k0: usize, p: usize) -> Result<()> {
        crate::ops::delete_cols::run_gpu(self, k0, p)
    }
    fn rank_one_raw(&mut self, u: &[T], v: &[T]) -> Result<()> {
        crate::ops::rank_one::run_gpu(self, u, v)
    }
    fn drift_mut(&mut self) -> &mut DriftReport {
        &mut self.drift
    }
    fn measure_drift(&self, sample: usize) -> Result<Option<f64>> {
        let g = &*self.gpu;
        let Dims { m, n, .. } = self.dims;
        if let Some(qm) = &self.q {
            let k = qm.ncols();
            let cols = sampled_columns(k, DRIFT_SAMPLE, sample);
            let mut y = DevVec::<T>::zeros(g, k)?;
            let mut sum = 0.0f64;
            for &c in &cols {
                g.gemv(
                    Op::T,
                    T::ONE,
                    &qm.view(),
                    &qm.col(c, 0..m),
                    T::ZERO,
                    &mut y.view_mut(),
                )?;
                for (j, x) in y.to_vec(g)?.into_iter().enumerate() {
                    let e = x.to_f64() - f64::from(u8::from(j == c));
                    sum += e * e;
                }
            }
            return Ok(Some((sum * k as f64 / cols.len() as f64).sqrt()));
        }
        let Some((a, _)) = self.kept_views() else {
            return Ok(None);
        };
        // ‖Aᵀ(Az) − Rᵀ(Rz)‖/(‖R‖_F²‖z‖): a sample of ‖AᵀA − RᵀR‖/‖A‖² (two GEMVs over A)
        let z64 = probe(n, sample);
        let z: Vec<T> = z64.iter().map(|&x| T::from_f64(x)).collect();
        let zd = DevVec::from_slice(g, &z)?;
        let mut az = DevVec::<T>::zeros(g, m)?;
        let mut s = DevVec::<T>::zeros(g, n)?;
        let mut rz = DevVec::<T>::zeros(g, n)?;
        let rr = self.r.block(0, 0, n, n);
        g.gemv(Op::N, T::ONE, &a, &zd.view(), T::ZERO, &mut az.view_mut())?;
        g.gemv(Op::T, T::ONE, &a, &az.view(), T::ZERO, &mut s.view_mut())?;
        g.gemv(Op::N, T::ONE, &rr, &zd.view(), T::ZERO, &mut rz.view_mut())?;
        g.gemv(Op::T, -T::ONE, &rr, &rz.view(), T::ONE, &mut s.view_mut())?;
        let diff = g.nrm2(&s.view())?;
        let r2: f64 = crate::gpu::algo::thin::column_norms(g, &rr)?
            .iter()
            .map(|x| x * x)
            .sum();
        let zn = z.iter().map(|x| x.to_f64().powi(2)).sum::<f64>().sqrt();
        Ok(Some(if r2 > 0.0 { diff / (r2 * zn) } else { 0.0 }))
    }
    fn refresh(&mut self) -> Result<bool> {
        let g = self.gpu.clone();
        let Dims { m, n, q, policy } = self.dims;
        let Some(qm) = self.q.as_ref() else {
            if self.a.is_none() {
                return Ok(false);
            }
            let (u, v) = (
                MatRef::<T>::new(&[], m, 0, m.max(1))?,
                MatRef::<T>::new(&[], n, 0, n.max(1))?,
            );
            self.refactor_plus(u, v)?;
            return Ok(true);
        };
        // Q = Q′·R₂ with Q′ orthonormal: A = Q′·(R₂R), d′ = Q′ᵀb (thin: the kept b) or R₂d
        let k = qm.ncols();
        let (q2, r2) = crate::gpu::algo::thin::thin_qr(&g, qm.dup(&g)?)?;
        let rows = self.r.nrows();
        let mut r = DevMat::<T>::zeros(&g, rows, n)?;
        g.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &r2.view(),
            &self.r.block(0, 0, k, n),
            T::ZERO,
            &mut r.block_mut(0, 0, k, n),
        )?;
        let mut d = DevMat::<T>::zeros(&g, self.d.nrows(), q)?;
        match (policy, self.b.as_ref()) {
            (QPolicy::Thin, Some(b)) => {
                crate::gpu::algo::thin::tall_tn(&g, &q2.view(), &b.view(), &mut d.view_mut())?
            }
            _ => g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &r2.view(),
                &self.d.block(0, 0, k, q),
                T::ZERO,
                &mut d.block_mut(0, 0, k, q),
            )?,
        }
        self.r = r;
        self.d = d;
        self.q = Some(q2);
        Ok(true)
    }
    fn mark_inconsistent(&self) {
        self.poisoned.store(true, Ordering::Relaxed);
    }
}
