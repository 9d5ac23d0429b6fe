//! Timing one point on the GPU: the update (+ solve) from a restored snapshot, the
//! seeds' strategies where asked, the baselines (a) and (b) on the updated matrix,
//! the TUS/TUT transfer protocols, and the accuracy measures of the ACC group.

use std::cell::RefCell;
use std::sync::Arc;

use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::{DevMat, DevVec, GpuQr, GpuScalar, Op, PinnedHostSlice};
use cuqr::internals::Dims;
use cuqr::{CpuQr, Gpu, Mat, QPolicy, QrUpdate, RowRemoval, Scalar};

use super::case::{apply, has_givens_stage, point_params, wavefront_params, Case};
use super::grid::{Extra, Kind, Point};
use super::types::{Accuracy, Ctx, Row};
use crate::common::{copy_into, cusolver_ls, solve_upper, time_keeping_last, time_ms};

/// x := R̃₁⁻¹ d̃(0:n′) for the state, on the device (TRSM), into `x` (n′×1).
pub(super) fn solve_dev<T: GpuScalar>(
    gpu: &Gpu,
    st: &GpuQr<T>,
    x: &mut DevMat<T>,
) -> cuqr::Result<()> {
    let n = st.ncols();
    gpu.stream()
        .memcpy_dtod(&st.d_dev().col(0, 0..n), &mut x.col_mut(0, 0..n))
        .map_err(|e| cuqr::Error::driver("device copy", e))?;
    solve_upper(gpu, &st.r_dev().block(0, 0, n, n), &mut x.view_mut())
}

pub(super) fn rel_diff<T: Scalar>(x: &[T], y: &[T]) -> f64 {
    let num: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a.to_f64() - b.to_f64()).powi(2))
        .sum();
    let den: f64 = y.iter().map(|b| b.to_f64().powi(2)).sum();
    (num / den).sqrt()
}

/// What the GPU measurement of one point needs besides the point and its case.
pub(super) struct GpuBase<'a, T: GpuScalar> {
    pub(super) gpu: &'a Arc<Gpu>,
    /// The factorised state (each timed run restores it from this snapshot).
    pub(super) state: &'a GpuQr<T>,
    /// The same state on the host: TUS and TUT start from it (`None`: no transfers).
    pub(super) host: Option<&'a CpuQr<T>>,
    /// Page-locked staging for TUS/TUT, at least [`staging_need`] of every point.
    pub(super) staging: &'a RefCell<Option<PinnedHostSlice<T>>>,
}

/// Elements of page-locked staging that the point's TUS/TUT runs need: the state
/// before and after the update, and the updated A and b of the (b) TUS baseline.
pub(super) fn staging_need<T: GpuScalar>(pt: &Point) -> usize {
    let (m2, n2) = pt.kind.new_dims(pt.m, pt.n, pt.p);
    let policy = pt.kind.policy();
    let dims = |m, n| Dims { m, n, q: 1, policy };
    GpuQr::<T>::staging_len(dims(pt.m, pt.n)).max(GpuQr::<T>::staging_len(dims(m2, n2)))
}

/// Times `op` on a fresh copy of the point's state with `params` (`reps` CUDA-event
/// runs after one warm-up, the restore untimed); `op` returns the launches it counts.
/// Returns (median ms, those launches, the updated state of the last run).
fn time_update<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    base: &GpuQr<T>,
    params: cuqr::UpdateParams,
    reps: usize,
    mut op: impl FnMut(&mut GpuQr<T>) -> cuqr::Result<u64>,
) -> cuqr::Result<(f64, u64, GpuQr<T>)> {
    let (ms, (st, launches)) = time_keeping_last(
        gpu,
        reps,
        || {
            let mut st = base.try_clone()?;
            st.set_params(params);
            Ok(st)
        },
        |mut st| {
            let launches = op(&mut st)?;
            Ok((st, launches))
        },
    )?;
    Ok((ms, launches, st))
}

/// The point's update as the timed runs take it. The device-resident protocol (no
/// transfers) takes U from the device where the update has a device entry point
/// (column insertion: `insert_cols_device`, U uploaded once, untimed); TUS and TUT
/// take the update's inputs from host memory.
pub(super) struct TimedUpdate<'a, T: GpuScalar> {
    gpu: &'a Arc<Gpu>,
    pt: &'a Point,
    c: &'a Case<T>,
    u_dev: Option<DevMat<T>>,
}

impl<'a, T: GpuScalar> TimedUpdate<'a, T> {
    pub(super) fn new(gpu: &'a Arc<Gpu>, pt: &'a Point, c: &'a Case<T>) -> cuqr::Result<Self> {
        let u_dev = match pt.kind {
            Kind::InsertCols => Some(DevMat::from_host(gpu, c.u.as_ref())?),
            _ => None,
        };
        Ok(TimedUpdate { gpu, pt, c, u_dev })
    }

    /// The update alone, U from the device where it can be.
    pub(super) fn update(&self, st: &mut GpuQr<T>) -> cuqr::Result<()> {
        match &self.u_dev {
            Some(u) => st.insert_cols_device(self.pt.k0, &u.view()),
            None => apply(st, self.pt, self.c),
        }
    }

    /// The update (U from the device where it can be), then the solve into `x`;
    /// returns the launches of the update alone.
    fn device(&self, st: &mut GpuQr<T>, x: &mut DevMat<T>) -> cuqr::Result<u64> {
        let l0 = self.gpu.launch_count();
        self.update(st)?;
        let launches = self.gpu.launch_count() - l0;
        solve_dev(self.gpu, st, x)?;
        Ok(launches)
    }

    /// The update with its inputs from host memory, then the solve into `x`; returns
    /// the launches of the update alone.
    fn host(&self, st: &mut GpuQr<T>, x: &mut DevMat<T>) -> cuqr::Result<u64> {
        let l0 = self.gpu.launch_count();
        apply(st, self.pt, self.c)?;
        let launches = self.gpu.launch_count() - l0;
        solve_dev(self.gpu, st, x)?;
        Ok(launches)
    }
}

/// Baselines (a) and (b) on the updated matrix: cuSOLVER's least squares on a fresh
/// copy of the updated A and b (the copy untimed), and for (a) also the explicit
/// m′×m′ Q (`orgqr`) when the state keeps Q.
struct Refactorise<T: GpuScalar> {
    a: DevMat<T>,
    b: DevMat<T>,
    work: RefCell<DevMat<T>>,
    d: RefCell<DevMat<T>>,
    tau: RefCell<DevVec<T>>,
    q: RefCell<Option<DevMat<T>>>,
}

impl<T: GpuScalar> Refactorise<T> {
    fn new(gpu: &Gpu, c: &Case<T>, keep_q: bool) -> cuqr::Result<Self> {
        let (m2, n2) = (c.a_new.nrows(), c.a_new.ncols());
        Ok(Refactorise {
            a: DevMat::from_host(gpu, c.a_new.as_ref())?,
            b: DevMat::from_host(gpu, c.b_new.as_ref())?,
            work: RefCell::new(DevMat::<T>::zeros(gpu, m2, n2)?),
            d: RefCell::new(DevMat::<T>::zeros(gpu, m2, 1)?),
            tau: RefCell::new(DevVec::<T>::zeros(gpu, n2)?),
            q: RefCell::new(if keep_q {
                Some(DevMat::<T>::zeros(gpu, m2, m2)?)
            } else {
                None
            }),
        })
    }

    /// The untimed set-up: the updated A and b copied into the work buffers.
    fn restore(&self, gpu: &Gpu) -> cuqr::Result<()> {
        copy_into(gpu, &self.a, &mut self.work.borrow_mut())?;
        copy_into(gpu, &self.b, &mut self.d.borrow_mut())
    }

    /// The updated A and b copied into the work buffers from page-locked host memory
    /// (the (b) TUS baseline's transfer).
    fn upload_pinned(
        &self,
        gpu: &Gpu,
        c: &Case<T>,
        staging: &mut PinnedHostSlice<T>,
    ) -> cuqr::Result<()> {
        let mut w = self.work.borrow_mut();
        w.upload_pinned(gpu, c.a_new.as_ref(), staging)?;
        self.d
            .borrow_mut()
            .upload_pinned(gpu, c.b_new.as_ref(), staging)
    }

    /// The timed part: the least-squares solve, and Q when `with_q`.
    fn run(&self, gpu: &Gpu, with_q: bool) -> cuqr::Result<()> {
        let mut w = self.work.borrow_mut();
        let mut tv = self.tau.borrow_mut();
        cusolver_ls(gpu, &mut w, &mut tv, &mut self.d.borrow_mut())?;
        if with_q {
            let (m2, n2) = (w.nrows(), w.ncols());
            let mut qb = self.q.borrow_mut();
            let q = qb.as_mut().expect("Q buffer allocated when Q is kept");
            gpu.panel_copy(&w.view(), &mut q.block_mut(0, 0, m2, n2))?;
            gpu.orgqr(&mut q.view_mut(), n2, &tv.view())?;
        }
        Ok(())
    }
}

/// Measures one point on the GPU: the update (+ solve), the seeds' strategies where
/// asked, the baselines (a) and (b), the TUS/TUT protocols where the seeds give their
/// ratios, and the ACC accuracy measures. The CPU columns are timed separately.
pub(super) fn bench_gpu<T: GpuScalar>(
    ctx: &Ctx<'_>,
    gb: &GpuBase<'_, T>,
    pt: &Point,
    c: &Case<T>,
) -> cuqr::Result<Row> {
    let (gpu, reps) = (gb.gpu, ctx.reps);
    let n2 = c.a_new.ncols();
    let keep_q = pt.kind.policy() == QPolicy::Full;
    let mut row = Row::default();
    let upd = TimedUpdate::new(gpu, pt, c)?;
    let (x_upd, x_wf) = time_updates(ctx, gb, &upd, &mut row)?;

    let refac = Refactorise::new(gpu, c, keep_q)?;
    let restore = || refac.restore(gpu);
    let tb = time_with_setup(gpu, 1, reps, restore, |()| refac.run(gpu, false))?;
    row.solve_ms = Some(tb.median_ms());
    // accuracy check of the harness itself: both solutions agree
    let x_ref = refac.d.borrow().to_host(gpu)?;
    let x_u = x_upd.to_host(gpu)?;
    row.ex = Some(rel_diff(x_u.as_slice(), &x_ref.as_slice()[..n2]));
    if row.wf_ms.is_some() {
        let x_w = x_wf.to_host(gpu)?;
        row.wf_ex = Some(rel_diff(x_w.as_slice(), &x_ref.as_slice()[..n2]));
    }
    row.refac_ms = if keep_q {
        Some(time_with_setup(gpu, 1, reps, restore, |()| refac.run(gpu, true))?.median_ms())
    } else {
        row.solve_ms
    };

    if let Some(host) = gb.host {
        time_transfers(gb, &upd, &refac, host, reps, &mut row)?;
    }
    Ok(row)
}

/// The update (+ solve) from a restored snapshot, and the seeds' Wavefront strategy
/// (and for RR-comp their three-stream layout) where asked: fills the row's update,
/// wavefront and streams columns, and ACC's accuracy of the updated state. Returns the
/// solutions of the update and of the Wavefront run (zero where it did not run).
fn time_updates<T: GpuScalar>(
    ctx: &Ctx<'_>,
    gb: &GpuBase<'_, T>,
    upd: &TimedUpdate<'_, T>,
    row: &mut Row,
) -> cuqr::Result<(DevMat<T>, DevMat<T>)> {
    let (gpu, base, pt, reps) = (gb.gpu, gb.state, upd.pt, ctx.reps);
    let n2 = upd.c.a_new.ncols();
    let params = point_params(pt, base.params());
    let mut x_upd = DevMat::<T>::zeros(gpu, n2, 1)?;
    let (ms, launches, st) = time_update(gpu, base, params, reps, |st| upd.device(st, &mut x_upd))?;
    row.upd_ms = Some(ms);
    row.launches = Some(launches);
    if matches!(pt.extra, Extra::Acc { .. }) {
        row.acc = Some(accuracy(gpu, &st, &upd.c.a_new)?);
    }
    drop(st);

    let mut x_wf = DevMat::<T>::zeros(gpu, n2, 1)?;
    let comp = matches!(pt.extra, Extra::Comp { .. });
    if has_givens_stage(pt) && (ctx.wavefront || comp) {
        let p = wavefront_params(pt, base.params(), RowRemoval::Composite);
        let (ms, launches, _) = time_update(gpu, base, p, reps, |st| upd.device(st, &mut x_wf))?;
        row.wf_ms = Some(ms);
        row.wf_launches = Some(launches);
    }
    if comp {
        let mut x = DevMat::<T>::zeros(gpu, n2, 1)?;
        let p = wavefront_params(pt, base.params(), RowRemoval::SeparateStreams);
        let (ms, _, _) = time_update(gpu, base, p, reps, |st| upd.device(st, &mut x))?;
        row.streams_ms = Some(ms);
    }
    Ok((x_upd, x_wf))
}

/// The seeds' protocols from page-locked host memory, where the seeds give their
/// ratios: TUS (the state copied in, the update with its inputs from the host, the
/// solve), (b) under TUS (the updated A and b copied in, then (b)) and TUT (TUS and
/// the new state copied back).
fn time_transfers<T: GpuScalar>(
    gb: &GpuBase<'_, T>,
    upd: &TimedUpdate<'_, T>,
    refac: &Refactorise<T>,
    host: &CpuQr<T>,
    reps: usize,
    row: &mut Row,
) -> cuqr::Result<()> {
    let (gpu, pt) = (gb.gpu, upd.pt);
    let params = point_params(pt, gb.state.params());
    let mut cell = gb.staging.borrow_mut();
    let staging = cell
        .as_mut()
        .filter(|s| s.len() >= staging_need::<T>(pt))
        .ok_or_else(|| cuqr::Error::Driver("TUS/TUT staging not allocated".into()))?;
    let mut x = DevMat::<T>::zeros(gpu, upd.c.a_new.ncols(), 1)?;
    let mut transfer = |staging: &mut PinnedHostSlice<T>, back: bool| -> cuqr::Result<f64> {
        let (ms, st) = time_keeping_last(
            gpu,
            reps,
            || Ok(()),
            |()| {
                let mut st = GpuQr::from_cpu(gpu, host, Some(&mut *staging))?;
                st.set_params(params);
                upd.host(&mut st, &mut x)?;
                if back {
                    std::hint::black_box(st.to_cpu_pinned(staging)?);
                }
                Ok(st)
            },
        )?;
        drop(st);
        Ok(ms)
    };
    if pt.seed_cula.is_some() {
        row.tus_ms = Some(transfer(staging, false)?);
        row.tus_base_ms = Some(time_ms(gpu, reps, || {
            refac.upload_pinned(gpu, upd.c, staging)?;
            refac.run(gpu, false)
        })?);
    }
    if pt.seed_seq.is_some() {
        row.tut_ms = Some(transfer(staging, true)?);
    }
    Ok(())
}

/// e_Q = ‖QᵀQ − I‖_F, e_A = ‖QR − A‖_F/‖A‖_F (with Q) and ‖L‖_F (R's strictly
/// lower part) of an updated state against the updated A, in f64 with
/// cuBLAS DGEMM (an f32 state is widened first).
fn accuracy<T: GpuScalar>(gpu: &Arc<Gpu>, st: &GpuQr<T>, a: &Mat<T>) -> cuqr::Result<Accuracy> {
    let r = st.r()?;
    let (m, n) = (r.nrows(), r.ncols());
    let mut l2 = 0.0;
    for j in 0..n {
        for i in j + 1..m {
            l2 += r[(i, j)].to_f64().powi(2);
        }
    }
    let wide = |x: &Mat<T>| Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)].to_f64());
    let fro = |x: &Mat<f64>| x.as_slice().iter().map(|v| v * v).sum::<f64>().sqrt();
    let (e_q, e_a) = match st.q()? {
        Some(q) => {
            let q64 = DevMat::<f64>::from_host(gpu, wide(&q).as_ref())?;
            let eye = Mat::from_fn(m, m, |i, j| if i == j { 1.0 } else { 0.0 });
            let mut c = DevMat::<f64>::from_host(gpu, eye.as_ref())?;
            gpu.gemm(
                Op::T,
                Op::N,
                1.0,
                &q64.view(),
                &q64.view(),
                -1.0,
                &mut c.view_mut(),
            )?;
            let e_q = fro(&c.to_host(gpu)?);
            drop(c);
            let a64 = wide(a);
            let r64 = DevMat::<f64>::from_host(gpu, wide(&r).as_ref())?;
            let mut c = DevMat::<f64>::from_host(gpu, a64.as_ref())?;
            gpu.gemm(
                Op::N,
                Op::N,
                1.0,
                &q64.view(),
                &r64.view(),
                -1.0,
                &mut c.view_mut(),
            )?;
            (Some(e_q), Some(fro(&c.to_host(gpu)?) / fro(&a64)))
        }
        None => (None, None),
    };
    Ok(Accuracy {
        e_q,
        e_a,
        l_norm: l2.sqrt(),
    })
}
