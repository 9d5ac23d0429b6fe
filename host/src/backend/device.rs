//! One entry type for users: [`Qr`], built on a [`Device`] (the CPU, a GPU by ordinal, or
//! whichever is available), behind which the CPU and GPU states do the work.
#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::backend::QrUpdate;
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorParams, QPolicy, UpdateParams};
use crate::base::solution::{DriftReport, Solution};
use crate::gpu::runtime::{Gpu, GpuScalar};
use crate::state::cpu::CpuQr;
use crate::state::gpu::GpuQr;

/// Size m·n from which [`Qr::factorize`] with [`Device::Auto`] takes a GPU. A GPU update
/// has a fixed cost of about 0.5 ms (its launches, library calls and synchronisations,
/// docs/performance.md), a CPU update of a thin or R-only state costs a few m·n flops
/// (about 2 ns each on one core for these sizes): the CPU wins below about 2.5·10⁵, e.g.
/// 2,000 × 125. Data already on a GPU ([`GpuQr::factorize_dev`], CuPy and torch arrays
/// in Python) stay there whatever the size.
pub const AUTO_GPU_MIN_MN: usize = 250_000;

/// Where a factorisation runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Device {
    /// The CPU backend.
    Cpu,
    /// The CUDA device with this ordinal; an error when it cannot be opened.
    Gpu(usize),
    /// GPU 0 when it opens, else the CPU (the reason is kept: [`Backend::fallback`]).
    /// [`Qr::factorize`] first applies the cost model of [`AUTO_GPU_MIN_MN`]: a small
    /// problem stays on the CPU.
    #[default]
    Auto,
}

/// An opened [`Device`]: the CPU, or a GPU context that several states can share.
#[derive(Clone, Debug)]
pub enum Backend {
    /// The CPU backend; `fallback` says why [`Device::Auto`] did not take a GPU.
    Cpu {
        /// Why the GPU was not used, when [`Device::Auto`] fell back.
        fallback: Option<String>,
    },
    /// A GPU context.
    Gpu(Arc<Gpu>),
}

impl Device {
    /// Opens the device: loads the CUDA libraries and the kernels for a GPU.
    ///
    /// # Errors
    /// For [`Device::Gpu`], whatever [`Gpu::new`] returns ([`crate::Error::NoDevice`] when
    /// there is no usable GPU). [`Device::Cpu`] and [`Device::Auto`] do not fail.
    pub fn open(self) -> Result<Backend> {
        match self {
            Device::Cpu => Ok(Backend::Cpu { fallback: None }),
            Device::Gpu(ordinal) => Ok(Backend::Gpu(Arc::new(Gpu::new(ordinal)?))),
            Device::Auto => Ok(match Gpu::new(0) {
                Ok(g) => Backend::Gpu(Arc::new(g)),
                Err(e) => Backend::Cpu {
                    fallback: Some(e.to_string()),
                },
            }),
        }
    }
}

impl Backend {
    /// `"cpu"` or `"gpu"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Cpu { .. } => "cpu",
            Backend::Gpu(_) => "gpu",
        }
    }

    /// Why [`Device::Auto`] fell back to the CPU, if it did.
    pub fn fallback(&self) -> Option<&str> {
        match self {
            Backend::Cpu { fallback } => fallback.as_deref(),
            Backend::Gpu(_) => None,
        }
    }

    /// The GPU context, for a GPU backend.
    pub fn gpu(&self) -> Option<&Arc<Gpu>> {
        match self {
            Backend::Cpu { .. } => None,
            Backend::Gpu(g) => Some(g),
        }
    }
}

impl core::fmt::Display for Backend {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Backend::Cpu { .. } => f.write_str("cpu"),
            Backend::Gpu(g) => match g.name() {
                Ok(name) => write!(f, "gpu ({name})"),
                Err(_) => f.write_str("gpu"),
            },
        }
    }
}

/// The state behind a [`Qr`] (taken out by [`Qr::into_state`]).
// One per factorisation, moved rarely: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum QrState<T: GpuScalar> {
    /// On the CPU.
    Cpu(CpuQr<T>),
    /// On a GPU.
    Gpu(GpuQr<T>),
}

/// A QR factorisation A = QR with right-hand sides d = Qᵀb, on the CPU or a GPU, updated
/// in place through [`QrUpdate`].
///
/// # Examples
/// ```
/// use cuqr::{Device, FactorParams, Mat, QPolicy, Qr, QrUpdate};
/// let a = Mat::<f64>::from_fn(7, 3, |i, j| 1.0 / (1.0 + i as f64 + 2.0 * j as f64) + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(7, 1, |i, _| i as f64 - 2.5);
/// // small: the CPU (Device::Auto takes a GPU from m·n = 250,000 on, when one opens)
/// let mut qr = Qr::factorize(Device::Auto, a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default())?;
/// qr.delete_row(2)?;
/// let sol = qr.solve()?;
/// assert_eq!(sol.x.nrows(), 3);
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Debug)]
pub struct Qr<T: GpuScalar> {
    state: QrState<T>,
    fallback: Option<String>,
}

impl<T: GpuScalar> Qr<T> {
    /// Opens `device` and factorises A (m×n, m ≥ n) with right-hand sides b (m×q)
    /// (docs/algorithms.md#blocked-householder-qr). [`Device::Auto`] keeps a problem with
    /// m·n below [`AUTO_GPU_MIN_MN`] on the CPU and says why in [`Qr::fallback`].
    ///
    /// # Errors
    /// Opening a [`Device::Gpu`] fails as [`Device::open`] says; then as
    /// [`CpuQr::factorize`] / [`GpuQr::factorize`].
    pub fn factorize(
        device: Device,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        let mn = a.nrows().saturating_mul(a.ncols());
        let backend = if device == Device::Auto && mn < AUTO_GPU_MIN_MN {
            Backend::Cpu {
                fallback: Some(format!(
                    "auto: m·n = {mn} is below {AUTO_GPU_MIN_MN}, where a CPU update is faster \
                     than a GPU one; ran on the CPU"
                )),
            }
        } else {
            device.open()?
        };
        Self::factorize_on(&backend, a, b, policy, params)
    }

    /// Factorises on an opened backend (one GPU context shared by several states).
    ///
    /// # Errors
    /// As [`CpuQr::factorize`] / [`GpuQr::factorize`].
    pub fn factorize_on(
        backend: &Backend,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        let state = match backend {
            Backend::Cpu { .. } => QrState::Cpu(CpuQr::factorize(a, b, policy, params)?),
            Backend::Gpu(g) => QrState::Gpu(GpuQr::factorize(g, a, b, policy, params)?),
        };
        Ok(Self {
            state,
            fallback: backend.fallback().map(str::to_owned),
        })
    }

    /// `"cpu"` or `"gpu"`.
    pub fn backend_kind(&self) -> &'static str {
        match self.state {
            QrState::Cpu(_) => "cpu",
            QrState::Gpu(_) => "gpu",
        }
    }

    /// Why [`Device::Auto`] fell back to the CPU, if it did.
    pub fn fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// The CPU state, when this factorisation lives on the CPU.
    pub fn as_cpu(&self) -> Option<&CpuQr<T>> {
        match &self.state {
            QrState::Cpu(s) => Some(s),
            QrState::Gpu(_) => None,
        }
    }

    /// The GPU state, when this factorisation lives on a GPU.
    pub fn as_gpu(&self) -> Option<&GpuQr<T>> {
        match &self.state {
            QrState::Cpu(_) => None,
            QrState::Gpu(s) => Some(s),
        }
    }

    /// The CPU state, mutably, when this factorisation lives on the CPU.
    pub fn as_cpu_mut(&mut self) -> Option<&mut CpuQr<T>> {
        match &mut self.state {
            QrState::Cpu(s) => Some(s),
            QrState::Gpu(_) => None,
        }
    }

    /// The GPU state, mutably (its device-resident updates), when this factorisation lives
    /// on a GPU.
    pub fn as_gpu_mut(&mut self) -> Option<&mut GpuQr<T>> {
        match &mut self.state {
            QrState::Cpu(_) => None,
            QrState::Gpu(s) => Some(s),
        }
    }

    /// The CPU or GPU state, consumed.
    pub fn into_state(self) -> QrState<T> {
        self.state
    }

    fn inner(&self) -> &dyn QrUpdate<T> {
        match &self.state {
            QrState::Cpu(s) => s,
            QrState::Gpu(s) => s,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn QrUpdate<T> {
        match &mut self.state {
            QrState::Cpu(s) => s,
            QrState::Gpu(s) => s,
        }
    }
}

impl<T: GpuScalar> From<CpuQr<T>> for Qr<T> {
    fn from(s: CpuQr<T>) -> Self {
        Self {
            state: QrState::Cpu(s),
            fallback: None,
        }
    }
}

impl<T: GpuScalar> From<GpuQr<T>> for Qr<T> {
    fn from(s: GpuQr<T>) -> Self {
        Self {
            state: QrState::Gpu(s),
            fallback: None,
        }
    }
}

impl<T: GpuScalar> QrUpdate<T> for Qr<T> {
    fn nrows(&self) -> usize {
        self.inner().nrows()
    }
    fn ncols(&self) -> usize {
        self.inner().ncols()
    }
    fn nrhs(&self) -> usize {
        self.inner().nrhs()
    }
    fn q_policy(&self) -> QPolicy {
        self.inner().q_policy()
    }
    fn params(&self) -> UpdateParams {
        self.inner().params()
    }
    fn set_params(&mut self, params: UpdateParams) {
        self.inner_mut().set_params(params)
    }
    fn insert_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        self.inner_mut().insert_cols(k0, u)
    }
    fn delete_cols(&mut self, k0: usize, p: usize) -> Result<()> {
        self.inner_mut().delete_cols(k0, p)
    }
    fn insert_rows(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
        self.inner_mut().insert_rows(k0, u, e)
    }
    fn delete_rows(&mut self, k0: usize, p: usize) -> Result<()> {
        self.inner_mut().delete_rows(k0, p)
    }
    fn delete_rows_with(
        &mut self,
        k0: usize,
        rows: MatRef<'_, T>,
        rhs: MatRef<'_, T>,
    ) -> Result<()> {
        self.inner_mut().delete_rows_with(k0, rows, rhs)
    }
    fn rank_one(&mut self, u: &[T], v: &[T]) -> Result<()> {
        self.inner_mut().rank_one(u, v)
    }
    fn slide(&mut self, rows: MatRef<'_, T>, rhs: MatRef<'_, T>, drop: usize) -> Result<()> {
        self.inner_mut().slide(rows, rhs, drop)
    }
    fn rank_k(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()> {
        self.inner_mut().rank_k(u, v)
    }
    fn replace_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        self.inner_mut().replace_cols(k0, u)
    }
    fn shift_col(&mut self, from: usize, to: usize) -> Result<()> {
        self.inner_mut().shift_col(from, to)
    }
    fn drift(&self) -> DriftReport {
        self.inner().drift()
    }
    fn check_drift(&mut self) -> Result<DriftReport> {
        self.inner_mut().check_drift()
    }
    fn solve(&self) -> Result<Solution<T>> {
        self.inner().solve()
    }
    fn r(&self) -> Result<Mat<T>> {
        self.inner().r()
    }
    fn q(&self) -> Result<Option<Mat<T>>> {
        self.inner().q()
    }
    fn d(&self) -> Result<Mat<T>> {
        self.inner().d()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_and_auto_open_and_agree() {
        let a = Mat::<f64>::from_fn(9, 4, |i, j| {
            ((i * 7 + j * 3) % 11) as f64 + 0.5 * (i == j) as u8 as f64
        });
        let b = Mat::<f64>::from_fn(9, 2, |i, j| (i as f64) - 3.0 * j as f64 + 0.25);
        let p = FactorParams::default();
        let cpu = Qr::factorize(Device::Cpu, a.as_ref(), b.as_ref(), QPolicy::Full, p).unwrap();
        assert_eq!(cpu.backend_kind(), "cpu");
        assert!(cpu.fallback().is_none());
        let auto = Qr::factorize(Device::Auto, a.as_ref(), b.as_ref(), QPolicy::Full, p).unwrap();
        // 9 × 4 is far below the cost model's threshold: the CPU, and the reason.
        assert_eq!(auto.backend_kind(), "cpu");
        let why = auto.fallback().expect("Auto on the CPU says why");
        assert!(why.contains("auto") && why.contains("36"), "{why}");
        let (x0, x1) = (cpu.solve().unwrap().x, auto.solve().unwrap().x);
        for j in 0..2 {
            for i in 0..4 {
                let (u, v) = (x0[(i, j)], x1[(i, j)]);
                assert!(
                    (u - v).abs() <= 1e-10 * (1.0 + u.abs()),
                    "x({i},{j}): {u} vs {v}"
                );
            }
        }
    }
}
