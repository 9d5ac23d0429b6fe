//! [`Composite`] for the GPU state: the same hooks as the CPU's, on device buffers.
#![forbid(unsafe_code)]

use super::cpu::DRIFT_SAMPLE;
use super::{probe, sampled_columns, Composite};
use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::mat::MatRef;
use crate::base::params::{FactorParams, UpdateParams};
use crate::base::solution::DriftReport;
use crate::gpu::algo::compose as algo;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{Gpu, GpuScalar};
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
        match (&self.q, &self.a, &self.b) {
            (Some(_), _, _) => algo::data_from_q(g, self.factors()),
            (None, Some(_), Some(_)) => {
                algo::data_copied(g, self.factors(), self.kept_views().expect("kept"))
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
        let kept = self.a.as_ref().map(|a| (a, self.kept_row0));
        algo::column_of_a(&self.gpu, self.factors(), kept, j)?
            .ok_or_else(|| crate::ops::needs_q_or_data("shift_col"))
    }
    fn refactor_plus(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()> {
        let (mut a, b) = self.data_dev("rank_k")?;
        let g = self.gpu.clone();
        if u.ncols() > 0 {
            algo::add_product(&g, &mut a, u, v)?;
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
    forward_primitive_updates!(run_gpu);
    fn drift_mut(&mut self) -> &mut DriftReport {
        &mut self.drift
    }
    fn measure_drift(&self, sample: usize) -> Result<Option<f64>> {
        let g = &*self.gpu;
        let Dims { m, n, .. } = self.dims;
        if let Some(qm) = &self.q {
            let cols = sampled_columns(qm.ncols(), DRIFT_SAMPLE, sample);
            return Ok(Some(algo::q_drift(g, qm, m, &cols)?));
        }
        let Some((a, _)) = self.kept_views() else {
            return Ok(None);
        };
        let z: Vec<T> = probe(n, sample).iter().map(|&x| T::from_f64(x)).collect();
        Ok(Some(algo::gram_drift(g, self.factors(), &a, &z)?))
    }
    fn refresh(&mut self) -> Result<bool> {
        let g = self.gpu.clone();
        let Dims { m, n, .. } = self.dims;
        if self.q.is_none() {
            if self.a.is_none() {
                return Ok(false);
            }
            let (u, v) = (
                MatRef::<T>::new(&[], m, 0, m.max(1))?,
                MatRef::<T>::new(&[], n, 0, n.max(1))?,
            );
            self.refactor_plus(u, v)?;
            return Ok(true);
        }
        let (r, d, q2) = algo::reorthogonalized(&g, self.factors())?;
        self.r = r;
        self.d = d;
        self.q = Some(q2);
        Ok(true)
    }
}
