//! [`Composite`] for the CPU state: the hooks pick the state's parts; the arithmetic is
//! in `cpu/compose.rs`.
#![forbid(unsafe_code)]

use super::{probe, sampled_columns, Composite};
use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorParams, QPolicy, UpdateParams};
use crate::base::scalar::Scalar;
use crate::base::solution::DriftReport;
use crate::cpu::compose;
use crate::state::cpu::CpuQr;

/// Columns a drift check samples from Q.
pub(crate) const DRIFT_SAMPLE: usize = 4;

impl<T: Scalar> CpuQr<T> {
    /// A (m×n) and b (m×q) on the host: Q·R and Q·d (full), Q₁·R and the kept b (thin), or
    /// the kept data (R-only). `op` names the composed update for the error.
    fn data_of(&self, op: &'static str) -> Result<(Mat<T>, Mat<T>)> {
        match (&self.q, &self.data) {
            (Some(q), data) => Ok(compose::data_from_q(
                q,
                &self.r,
                &self.d,
                data.as_ref().map(|k| &k.b),
            )),
            (None, Some(crate::state::cpu::KeptData { a: Some(a), b })) => {
                Ok((a.clone(), b.clone()))
            }
            _ => Err(crate::ops::needs_q_or_data(op)),
        }
    }
}

impl<T: Scalar> Composite<T> for CpuQr<T> {
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
        self.data.as_ref().is_some_and(|k| k.a.is_some())
    }
    fn snapshot(&self) -> Result<Self> {
        Ok(self.clone())
    }
    fn scale(&mut self, s: T) -> Result<()> {
        let scale = |x: &mut Mat<T>| x.as_mut_slice().iter_mut().for_each(|v| *v *= s);
        scale(&mut self.r);
        scale(&mut self.d);
        self.rho.iter_mut().for_each(|v| *v *= s);
        if let Some(k) = self.data.as_mut() {
            scale(&mut k.b);
            if let Some(a) = k.a.as_mut() {
                scale(a);
            }
        }
        Ok(())
    }
    fn column_of_a(&self, j: usize) -> Result<Vec<T>> {
        match (&self.q, &self.data) {
            (Some(q), _) => Ok(compose::column_from_q(q, &self.r, j)),
            (None, Some(crate::state::cpu::KeptData { a: Some(a), .. })) => Ok(a.col(j).to_vec()),
            _ => Err(crate::ops::needs_q_or_data("shift_col")),
        }
    }
    fn refactor_plus(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()> {
        let (mut a, b) = self.data_of("rank_k")?;
        compose::add_product(&mut a, u, v);
        let params = FactorParams {
            block_size: self.params.block_size,
            rank_tol: Some(self.rank_tol),
            keep_data: self.keeps_a(),
        };
        let mut next =
            crate::ops::factorize::run_cpu(a.as_ref(), b.as_ref(), self.dims.policy, params)?;
        next.params = self.params;
        next.drift = self.drift;
        *self = next;
        Ok(())
    }
    forward_primitive_updates!(run_cpu);
    fn drift_mut(&mut self) -> &mut DriftReport {
        &mut self.drift
    }
    fn measure_drift(&self, sample: usize) -> Result<Option<f64>> {
        if let Some(q) = &self.q {
            let cols = sampled_columns(q.ncols(), DRIFT_SAMPLE, sample);
            return Ok(Some(compose::q_drift(q, &cols)));
        }
        let Some(a) = self.data.as_ref().and_then(|k| k.a.as_ref()) else {
            return Ok(None);
        };
        let z = probe(self.dims.n, sample);
        Ok(Some(compose::gram_drift(a, &self.r, &z)))
    }

    fn refresh(&mut self) -> Result<bool> {
        let Dims { m, n, policy, .. } = self.dims;
        let Some(q) = self.q.as_ref() else {
            if !self.keeps_a() {
                return Ok(false);
            }
            let (u, v) = (Mat::<T>::zeros(m, 0), Mat::<T>::zeros(n, 0));
            self.refactor_plus(u.as_ref(), v.as_ref())?;
            return Ok(true);
        };
        // Q = Q′·R₂ with Q′ orthonormal: A = Q′·(R₂R), and d′ = Q′ᵀb
        let rhs = match (&self.data, policy) {
            (Some(k), QPolicy::Thin) => k.b.clone(),
            _ => self.d.clone(),
        };
        let params = FactorParams {
            rank_tol: Some(0.0),
            ..FactorParams::default()
        };
        let fresh = crate::ops::factorize::run_cpu(q.as_ref(), rhs.as_ref(), policy, params)?;
        let (r, d) =
            compose::reorthogonalized(policy, &self.r, &self.d, &fresh.r, &fresh.d, q.ncols());
        self.r = r;
        self.d = d;
        self.q = fresh.q;
        Ok(true)
    }
}
