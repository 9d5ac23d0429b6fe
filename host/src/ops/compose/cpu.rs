//! [`Composite`] for the CPU state.
#![forbid(unsafe_code)]

use super::{probe, sampled_columns, Composite};
use crate::base::dims::Dims;
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorParams, QPolicy, UpdateParams};
use crate::base::scalar::Scalar;
use crate::base::solution::DriftReport;
use crate::state::cpu::CpuQr;

/// Columns a drift check samples from Q.
pub(crate) const DRIFT_SAMPLE: usize = 4;

impl<T: Scalar> CpuQr<T> {
    /// A (m×n) and b (m×q) on the host: Q·R and Q·d (full), Q₁·R and the kept b (thin), or
    /// the kept data (R-only). `op` names the composed update for the error.
    fn data_of(&self, op: &'static str) -> Result<(Mat<T>, Mat<T>)> {
        let Dims { m, n, .. } = self.dims;
        match (&self.q, &self.data) {
            (Some(q), data) => {
                let q1 = Mat::from_fn(m, n, |i, j| q[(i, j)]);
                let r1 = Mat::from_fn(n, n, |i, j| self.r[(i, j)]);
                let a = q1.matmul(&r1);
                let b = match data {
                    Some(k) => k.b.clone(),
                    None => q.matmul(&self.d),
                };
                Ok((a, b))
            }
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
        let m = self.dims.m;
        match (&self.q, &self.data) {
            (Some(q), _) => Ok((0..m)
                .map(|i| {
                    (0..=j.min(m - 1)).fold(T::ZERO, |s, k| q[(i, k)].mul_add(self.r[(k, j)], s))
                })
                .collect()),
            (None, Some(crate::state::cpu::KeptData { a: Some(a), .. })) => Ok(a.col(j).to_vec()),
            _ => Err(crate::ops::needs_q_or_data("shift_col")),
        }
    }
    fn refactor_plus(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()> {
        let (mut a, b) = self.data_of("rank_k")?;
        let (m, n, k) = (a.nrows(), a.ncols(), u.ncols());
        for j in 0..n {
            for i in 0..m {
                a[(i, j)] = (0..k).fold(a[(i, j)], |s, c| u.get(i, c).mul_add(v.get(j, c), s));
            }
        }
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
    fn insert_rows_raw(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
        crate::ops::insert_rows::run_cpu(self, k0, u, e)
    }
    fn delete_rows_raw(&mut self, k0: usize, p: usize) -> Result<()> {
        crate::ops::delete_rows::run_cpu(self, k0, p)
    }
    fn insert_cols_raw(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        crate::ops::insert_cols::run_cpu(self, k0, u)
    }
    fn delete_cols_raw(&mut self, k0: usize, p: usize) -> Result<()> {
        crate::ops::delete_cols::run_cpu(self, k0, p)
    }
    fn rank_one_raw(&mut self, u: &[T], v: &[T]) -> Result<()> {
        crate::ops::rank_one::run_cpu(self, u, v)
    }
    fn drift_mut(&mut self) -> &mut DriftReport {
        &mut self.drift
    }
    fn measure_drift(&self, sample: usize) -> Result<Option<f64>> {
        let Dims { m, n, .. } = self.dims;
        if let Some(q) = &self.q {
            // a sample of QᵀQ − I: the rows S of it, s×k with k = Q's columns
            let k = q.ncols();
            let cols = sampled_columns(k, DRIFT_SAMPLE, sample);
            let mut sum = 0.0f64;
            for &c in &cols {
                let qc = q.col(c);
                for j in 0..k {
                    let dot: f64 = (0..m).map(|i| qc[i].to_f64() * q[(i, j)].to_f64()).sum();
                    let e = dot - f64::from(u8::from(j == c));
                    sum += e * e;
                }
            }
            return Ok(Some((sum * k as f64 / cols.len() as f64).sqrt()));
        }
        let Some(a) = self.data.as_ref().and_then(|k| k.a.as_ref()) else {
            return Ok(None);
        };
        // ‖Aᵀ(Az) − Rᵀ(Rz)‖/(‖R‖_F²‖z‖): a sample of ‖AᵀA − RᵀR‖/‖A‖², in f64
        let z = probe(n, sample);
        let az: Vec<f64> = (0..m)
            .map(|i| (0..n).map(|j| a[(i, j)].to_f64() * z[j]).sum())
            .collect();
        let rz: Vec<f64> = (0..n)
            .map(|i| (i..n).map(|j| self.r[(i, j)].to_f64() * z[j]).sum())
            .collect();
        let diff2: f64 = (0..n)
            .map(|j| {
                let ata: f64 = (0..m).map(|i| a[(i, j)].to_f64() * az[i]).sum();
                let rtr: f64 = (0..=j).map(|i| self.r[(i, j)].to_f64() * rz[i]).sum();
                (ata - rtr).powi(2)
            })
            .sum();
        let zn = z.iter().map(|x| x * x).sum::<f64>().sqrt();
        let r2 = self.r.norm_fro().powi(2);
        Ok(Some(if r2 > 0.0 {
            diff2.sqrt() / (r2 * zn)
        } else {
            0.0
        }))
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
        let k = q.ncols();
        let r2 = match policy {
            QPolicy::Full => fresh.r.clone(),
            _ => Mat::from_fn(k, k, |i, j| fresh.r[(i, j)]),
        };
        let mut r = r2.matmul(&self.r);
        // R₂R is upper triangular in exact arithmetic; keep its zeros exact
        for j in 0..n {
            for i in j + 1..r.nrows() {
                r[(i, j)] = T::ZERO;
            }
        }
        self.d = match policy {
            QPolicy::Full => r2.matmul(&self.d),
            _ => fresh.d.clone(),
        };
        self.r = r;
        self.q = fresh.q;
        Ok(true)
    }
}
