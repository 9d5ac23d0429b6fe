//! The GPU backend: [`GpuQr`] built by factorisation and updated through [`QrUpdate`];
//! every operation runs behind the state's poison guard.
#![forbid(unsafe_code)]

use std::sync::Arc;

use crate::backend::QrUpdate;
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorParams, FactorsParams, QPolicy, UpdateParams};
use crate::base::solution::{DriftReport, Solution};
use crate::gpu::algo::householder::QrPhaseTimes;
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{Gpu, GpuScalar};
use crate::state::gpu::{poison_on_fault, GpuQr};

impl<T: GpuScalar> GpuQr<T> {
    /// Factorises A (m×n, m ≥ n) on `gpu` and transforms the right-hand sides
    /// b (m×q) with blocked Householder QR in compact-WY form
    /// (docs/algorithms.md#blocked-householder-qr);
    /// under [`QPolicy::Full`] Q is accumulated backwards from the identity
    /// (docs/algorithms.md#blocked-householder-qr).
    ///
    /// # Errors
    /// The validation errors of the CPU backend ([`Error::Shape`](crate::Error::Shape),
    /// [`Error::Underdetermined`](crate::Error::Underdetermined), [`Error::NonFinite`](crate::Error::NonFinite), [`Error::InvalidParam`](crate::Error::InvalidParam)),
    /// [`Error::RankDeficient`](crate::Error::RankDeficient), [`Error::OutOfMemory`](crate::Error::OutOfMemory), and device errors
    /// ([`Error::Driver`](crate::Error::Driver), [`Error::Cublas`](crate::Error::Cublas)).
    pub fn factorize(
        gpu: &Arc<Gpu>,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        crate::ops::factorize::run_gpu(gpu, a, b, policy, params)
    }

    /// [`factorize`](Self::factorize) of A (m×n) and b (m×q) already in device
    /// memory, taken over as the state's R and d (benchmarks: no host transfer or
    /// host scan of A; docs/algorithms.md#blocked-householder-qr). Shapes and `params` are
    /// validated as in [`factorize`](Self::factorize); the values are not scanned: a NaN/∞ in A
    /// surfaces as [`Error::RankDeficient`](crate::Error::RankDeficient) at a non-finite diagonal of R, and one
    /// in b only in d.
    ///
    /// # Errors
    /// [`Error::Shape`](crate::Error::Shape), [`Error::Underdetermined`](crate::Error::Underdetermined), [`Error::InvalidParam`](crate::Error::InvalidParam),
    /// [`Error::RankDeficient`](crate::Error::RankDeficient), [`Error::OutOfMemory`](crate::Error::OutOfMemory), [`Error::Driver`](crate::Error::Driver),
    /// [`Error::Cublas`](crate::Error::Cublas).
    pub fn factorize_dev(
        gpu: &Arc<Gpu>,
        a: DevMat<T>,
        b: DevMat<T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        Self::factorize_dev_clocked(gpu, a, b, policy, params, None)
    }

    /// [`factorize_dev`](Self::factorize_dev) with an optional phase clock.
    fn factorize_dev_clocked(
        gpu: &Arc<Gpu>,
        a: DevMat<T>,
        b: DevMat<T>,
        policy: QPolicy,
        params: FactorParams,
        clock: Option<&mut crate::gpu::algo::householder::QrClock>,
    ) -> Result<Self> {
        use crate::ops::factorize::{plan_shapes, run_gpu_dev};
        let plan = plan_shapes::<T>(
            (a.nrows(), a.ncols()),
            (b.nrows(), b.ncols()),
            policy,
            params,
        )?;
        run_gpu_dev(gpu, plan, params, a, b, clock)
    }

    /// [`factorize_dev`](Self::factorize_dev) with its time split into phases
    /// ([`QrPhaseTimes`]: panels, trailing update, right-hand sides, rank check,
    /// forming Q; Kerr et al.'s Table 2), measured with CUDA events on the
    /// main stream. The factorisation runs without look-ahead (its panels would
    /// overlap the trailing update), so its total is an upper bound on
    /// [`factorize_dev`](Self::factorize_dev)'s time; the result is the same up to
    /// rounding.
    ///
    /// # Errors
    /// As [`factorize_dev`](Self::factorize_dev).
    ///
    /// # Example
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::{DevMat, GpuQr};
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
    ///
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let a = Mat::<f64>::from_fn(4000, 2000, |i, j| ((i * 7 + j * 3) % 11) as f64 - 5.0 + (i == j) as u8 as f64 * 50.0);
    /// let b = Mat::<f64>::from_fn(4000, 1, |i, _| i as f64);
    /// let (qr, t) = GpuQr::factorize_dev_phases(
    ///     &gpu,
    ///     DevMat::from_host(&gpu, a.as_ref())?,
    ///     DevMat::from_host(&gpu, b.as_ref())?,
    ///     QPolicy::Full,
    ///     FactorParams::default())?;
    /// println!("panels {:.2} ms, trailing {:.2} ms, Q {:.2} ms", t.panel_ms, t.trailing_ms, t.q_ms);
    /// # drop(qr);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn factorize_dev_phases(
        gpu: &Arc<Gpu>,
        a: DevMat<T>,
        b: DevMat<T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<(Self, QrPhaseTimes)> {
        use crate::gpu::algo::householder::{
            QrClock, PHASE_PANEL, PHASE_Q, PHASE_RANK, PHASE_RHS, PHASE_TRAILING,
        };
        use crate::gpu::runtime::timing::EventTimer;
        let whole = EventTimer::new(gpu)?;
        let mut clock = QrClock::new();
        whole.start(gpu)?;
        let qr = Self::factorize_dev_clocked(gpu, a, b, policy, params, Some(&mut clock))?;
        let total_ms = whole.stop(gpu)?;
        let t = clock.totals_ms()?;
        let f = clock.flops();
        Ok((
            qr,
            QrPhaseTimes {
                panel_ms: t[PHASE_PANEL],
                trailing_ms: t[PHASE_TRAILING],
                rhs_ms: t[PHASE_RHS],
                rank_ms: t[PHASE_RANK],
                q_ms: t[PHASE_Q],
                total_ms,
                panel_flops: f[PHASE_PANEL],
                trailing_flops: f[PHASE_TRAILING],
            },
        ))
    }

    /// [`QrUpdate::slide`] with the new rows (p×n) and their right-hand sides (p×q) already
    /// in device memory, as views of this state's [`Gpu`]: the same window step
    /// (docs/algorithms.md#sliding-window) without their upload, for streams whose rows are
    /// made or received on the GPU. The non-finite check runs on the device.
    ///
    /// # Errors
    /// As [`QrUpdate::slide`]. On error the state is unchanged (a device fault poisons it).
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::{DevMat, FactorParams, Gpu, GpuQr, Mat, QPolicy, QrUpdate};
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let a = Mat::<f64>::from_fn(5000, 20, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
    /// let b = Mat::<f64>::from_fn(5000, 1, |i, _| (i % 17) as f64);
    /// let keep = FactorParams { keep_data: true, ..FactorParams::default() };
    /// let mut st = GpuQr::factorize(&gpu, a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
    /// let rows = DevMat::from_host(&gpu, Mat::<f64>::from_fn(100, 20, |i, j| (i + j) as f64).as_ref())?;
    /// let rhs = DevMat::from_host(&gpu, Mat::<f64>::from_fn(100, 1, |i, _| i as f64).as_ref())?;
    /// st.slide_device(&rows.view(), &rhs.view(), 100)?; // 100 rows in, the 100 oldest out
    /// assert_eq!(st.nrows(), 5000);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn slide_device(
        &mut self,
        rows: &DevMatView<'_, T>,
        rhs: &DevMatView<'_, T>,
        drop: usize,
    ) -> Result<()> {
        self.check_live()?;
        let out = crate::ops::slide::run_gpu_device(self, rows, rhs, drop);
        self.finish(out)
    }

    /// [`QrUpdate::insert_cols`] with the new columns U (m×p) already on the device, as
    /// a view of this state's [`Gpu`]: the same update (docs/algorithms.md#column-insertion)
    /// without U's upload,
    /// for pipelines whose data is made on the GPU, and the device-resident protocol of
    /// the benchmarks (no transfers). The non-finite check on U runs on the
    /// device (one launch and a download of p flags).
    ///
    /// # Errors
    /// As [`QrUpdate::insert_cols`]: [`Error::EmptyBlock`](crate::Error::EmptyBlock), [`Error::Shape`](crate::Error::Shape),
    /// [`Error::OutOfRange`](crate::Error::OutOfRange), [`Error::Underdetermined`](crate::Error::Underdetermined), [`Error::NeedsQ`](crate::Error::NeedsQ),
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::NonFinite`](crate::Error::NonFinite) (with U's first non-finite entry),
    /// [`Error::RankDeficient`](crate::Error::RankDeficient), [`Error::OutOfMemory`](crate::Error::OutOfMemory), device errors. On error the state
    /// is unchanged (a device fault also poisons it).
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::{DevMat, GpuQr};
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy, QrUpdate};
    /// let a = Mat::<f64>::from_fn(300, 40, |i, j| ((i * 7 + j * 13) % 29) as f64 + (i == j) as u8 as f64);
    /// let b = Mat::<f64>::from_fn(300, 1, |i, _| i as f64);
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let mut st = GpuQr::factorize(&gpu, a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default())?;
    /// let u = Mat::<f64>::from_fn(300, 3, |i, j| ((i * 5 + j * 11) % 17) as f64 - 8.5);
    /// let ud = DevMat::from_host(&gpu, u.as_ref())?;
    /// st.insert_cols_device(10, &ud.view())?;
    /// assert_eq!(st.ncols(), 43);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn insert_cols_device(&mut self, k0: usize, u: &DevMatView<'_, T>) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::insert_cols::run_gpu_device(self, k0, u);
        self.finish(out)
    }

    /// [`QrUpdate::rank_one`] with u (m×1) and v (n×1) already on the device, as views of
    /// this state's [`Gpu`]: A + u vᵀ (docs/algorithms.md#rank-one-update) without their
    /// upload, for every kind (the R-only kind with kept data). The non-finite checks run
    /// on the device; u and v are copied device to device, so the views may be dropped
    /// or reused as soon as the call returns.
    ///
    /// # Errors
    /// As [`QrUpdate::rank_one`]: [`Error::Shape`](crate::Error::Shape) (u not m×1 or v
    /// not n×1), [`Error::NonFinite`](crate::Error::NonFinite), [`Error::NeedsQ`](crate::Error::NeedsQ),
    /// [`Error::RankDeficient`](crate::Error::RankDeficient), [`Error::OutOfMemory`](crate::Error::OutOfMemory), device
    /// errors. On error the state is unchanged (a device fault also poisons it).
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::{DevMat, FactorParams, Gpu, GpuQr, Mat, QPolicy, QrUpdate};
    /// let a = Mat::<f64>::from_fn(300, 40, |i, j| ((i * 7 + j * 13) % 29) as f64 + (i == j) as u8 as f64);
    /// let b = Mat::<f64>::from_fn(300, 1, |i, _| i as f64);
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let mut st = GpuQr::factorize(&gpu, a.as_ref(), b.as_ref(), QPolicy::Thin, FactorParams::default())?;
    /// let u = DevMat::from_host(&gpu, Mat::<f64>::from_fn(300, 1, |i, _| (i % 11) as f64 - 5.5).as_ref())?;
    /// let v = DevMat::from_host(&gpu, Mat::<f64>::from_fn(40, 1, |j, _| 0.1 * j as f64).as_ref())?;
    /// st.rank_one_device(&u.view(), &v.view())?;
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn rank_one_device(&mut self, u: &DevMatView<'_, T>, v: &DevMatView<'_, T>) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::rank_one::run_gpu_device(self, u, v);
        self.finish(out)
    }
}

impl<T: GpuScalar> GpuQr<T> {
    /// [`CpuQr::from_factors`](crate::CpuQr::from_factors) with the factors already in
    /// device memory, taken over without a copy (docs/algorithms.md#states-from-factors). R's
    /// strictly lower part is zeroed on the device; with `params.check_finite` Q and R are
    /// scanned there.
    ///
    /// # Errors
    /// As [`CpuQr::from_factors`](crate::CpuQr::from_factors), and [`Error::OutOfMemory`](crate::Error::OutOfMemory),
    /// [`Error::Driver`](crate::Error::Driver).
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::{DevMat, FactorsParams, Gpu, GpuQr, Mat, QPolicy, QrUpdate};
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let (q, r) = (Mat::<f64>::identity(5), Mat::<f64>::from_fn(5, 2, |i, j| (i <= j) as u8 as f64 + j as f64));
    /// let mut st = GpuQr::from_factors(&gpu, QPolicy::Full, 5,
    ///     Some(DevMat::from_host(&gpu, q.as_ref())?), DevMat::from_host(&gpu, r.as_ref())?,
    ///     FactorsParams::default())?;
    /// st.delete_row(0)?;
    /// let (q1, r1) = st.into_factors();
    /// assert_eq!(r1.nrows(), 4);
    /// # drop(q1);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn from_factors(
        gpu: &Arc<Gpu>,
        policy: QPolicy,
        m: usize,
        q: Option<DevMat<T>>,
        r: DevMat<T>,
        params: FactorsParams,
    ) -> Result<Self> {
        crate::ops::from_factors::run_gpu(gpu, policy, m, q, r, params)
    }

    /// The state's Q (none for an R-only state) and R in device memory, consumed without a
    /// copy (work queued on [`Gpu::stream`] may still be writing them).
    pub fn into_factors(self) -> (Option<DevMat<T>>, DevMat<T>) {
        (self.q, self.r)
    }
}

impl<T: GpuScalar> GpuQr<T> {
    /// Moves kept data that a window step left inside taller buffers back to exact ones
    /// before an operation that rebuilds them (a device fault poisons the state).
    fn settle(&mut self) -> Result<()> {
        let out = self.settle_kept();
        poison_on_fault(&self.poisoned, out)
    }

    /// Ends an update: a device fault poisons the state; after a success, the drift
    /// bookkeeping (docs/algorithms.md#drift-control), whose own failure leaves the state as
    /// the update left it (a device fault there poisons it too).
    fn finish(&mut self, out: Result<()>) -> Result<()> {
        poison_on_fault(&self.poisoned, out)?;
        let check = crate::ops::drift::after_update(self);
        let _ = poison_on_fault(&self.poisoned, check);
        Ok(())
    }
}

impl<T: GpuScalar> QrUpdate<T> for GpuQr<T> {
    fn nrows(&self) -> usize {
        self.dims.m
    }
    fn ncols(&self) -> usize {
        self.dims.n
    }
    fn nrhs(&self) -> usize {
        self.dims.q
    }
    fn q_policy(&self) -> QPolicy {
        self.dims.policy
    }
    fn params(&self) -> UpdateParams {
        self.params
    }
    fn set_params(&mut self, params: UpdateParams) {
        self.params = params;
    }
    fn insert_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::insert_cols::run_gpu(self, k0, u);
        self.finish(out)
    }
    fn delete_cols(&mut self, k0: usize, p: usize) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::delete_cols::run_gpu(self, k0, p);
        self.finish(out)
    }
    fn insert_rows(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::insert_rows::run_gpu(self, k0, u, e);
        self.finish(out)
    }
    fn delete_rows(&mut self, k0: usize, p: usize) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::delete_rows::run_gpu(self, k0, p);
        self.finish(out)
    }
    fn delete_rows_with(
        &mut self,
        k0: usize,
        rows: MatRef<'_, T>,
        rhs: MatRef<'_, T>,
    ) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::delete_rows::run_gpu_given(self, k0, rows, rhs);
        self.finish(out)
    }
    fn rank_one(&mut self, u: &[T], v: &[T]) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::rank_one::run_gpu(self, u, v);
        self.finish(out)
    }
    fn slide(&mut self, rows: MatRef<'_, T>, rhs: MatRef<'_, T>, drop: usize) -> Result<()> {
        self.check_live()?;
        let out = crate::ops::slide::run_gpu(self, rows, rhs, drop);
        self.finish(out)
    }
    fn rank_k(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::rank_k::run(self, u, v);
        self.finish(out)
    }
    fn replace_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::replace_cols::run(self, k0, u);
        self.finish(out)
    }
    fn shift_col(&mut self, from: usize, to: usize) -> Result<()> {
        self.check_live()?;
        self.settle()?;
        let out = crate::ops::shift_col::run(self, from, to);
        self.finish(out)
    }
    fn drift(&self) -> DriftReport {
        self.drift
    }
    fn check_drift(&mut self) -> Result<DriftReport> {
        self.check_live()?;
        let out = crate::ops::drift::check(self);
        poison_on_fault(&self.poisoned, out)
    }
    fn solve(&self) -> Result<Solution<T>> {
        self.guarded(|| crate::ops::solve::solve_gpu(self))
    }
    fn r(&self) -> Result<Mat<T>> {
        self.guarded(|| {
            let r = self.r.to_host(&self.gpu)?;
            if self.dims.policy == QPolicy::Full {
                return Ok(r);
            }
            let n = self.dims.n;
            Ok(Mat::from_fn(n, n, |i, j| r[(i, j)]))
        })
    }
    fn q(&self) -> Result<Option<Mat<T>>> {
        self.guarded(|| self.q.as_ref().map(|q| q.to_host(&self.gpu)).transpose())
    }
    fn d(&self) -> Result<Mat<T>> {
        self.guarded(|| {
            let d = self.d.to_host(&self.gpu)?;
            if self.dims.policy == QPolicy::Full {
                return Ok(d);
            }
            let (n, q) = (self.dims.n, self.dims.q);
            Ok(Mat::from_fn(n, q, |i, k| d[(i, k)]))
        })
    }
}
