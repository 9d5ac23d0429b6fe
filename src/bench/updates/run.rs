//! Timing one point on the GPU: the update (+ solve) from a restored snapshot, the
//! seeds' strategies where asked, the baselines (a) and (b) on the updated matrix,
//! the TUS/TUT transfer protocols, and the accuracy measures of the ACC group.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use cuqr::cpu::Dims;
use cuqr::gpu::timing::time_with_setup;
use cuqr::gpu::{DevMat, DevVec, Diag, GpuQr, GpuScalar, Op, PinnedHostSlice, Side, Uplo};
use cuqr::{CpuQr, Gpu, Mat, QPolicy, QrUpdate, RowRemoval, Scalar};

use super::case::{apply, has_givens_stage, point_params, wavefront_params, Case};
use super::grid::{Extra, Kind, Point};
use super::sweep::Ctx;

/// One measured row.
#[derive(Clone, Debug, Default)]
pub(super) struct Row {
    pub(super) upd_ms: Option<f64>,
    pub(super) launches: Option<u64>,
    pub(super) refac_ms: Option<f64>,
    pub(super) solve_ms: Option<f64>,
    pub(super) cpu_ms: Option<f64>,
    pub(super) cpu_runs: usize,
    /// (d) faer's CPU refactorisation + least-squares solve of the updated matrix.
    pub(super) faer_ms: Option<f64>,
    pub(super) faer_runs: usize,
    /// ‖x_update − x_refactorise‖/‖x_refactorise‖ (GPU only).
    pub(super) ex: Option<f64>,
    /// The update (+ solve) with the seeds' Wavefront strategy, where it applies.
    pub(super) wf_ms: Option<f64>,
    /// Launches of the Wavefront update alone.
    pub(super) wf_launches: Option<u64>,
    /// e_x of the Wavefront update's solution.
    pub(super) wf_ex: Option<f64>,
    /// RR-comp: the seeds' three-stream row removal (Wavefront, separate Q/R/d).
    pub(super) streams_ms: Option<f64>,
    /// TUS (spec §3.1): copy of the state from page-locked host memory + update + solve.
    pub(super) tus_ms: Option<f64>,
    /// (b) under TUS: copy of the updated A and b from page-locked memory + (b).
    pub(super) tus_base_ms: Option<f64>,
    /// TUT: TUS + copy of the new state back to page-locked host memory.
    pub(super) tut_ms: Option<f64>,
    /// ACC: e_Q and e_A (where Q is kept) and ‖L‖_F of the updated state.
    pub(super) acc: Option<Accuracy>,
}

/// The accuracy measures of spec §3.7 of an updated state (Frobenius norms, f64).
#[derive(Clone, Copy, Debug)]
pub(super) struct Accuracy {
    pub(super) e_q: Option<f64>,
    pub(super) e_a: Option<f64>,
    pub(super) l_norm: f64,
}

pub(super) fn copy_into<T: GpuScalar>(
    gpu: &Gpu,
    src: &DevMat<T>,
    dst: &mut DevMat<T>,
) -> cuqr::Result<()> {
    gpu.stream()
        .memcpy_dtod(src.buf(), dst.buf_mut())
        .map_err(|e| cuqr::Error::Driver(format!("device copy: {e}")))
}

/// x := R̃₁⁻¹ d̃(0:n′) for the state, on the device (TRSM), into `x` (n′×1).
pub(super) fn solve_dev<T: GpuScalar>(
    gpu: &Gpu,
    st: &GpuQr<T>,
    x: &mut DevMat<T>,
) -> cuqr::Result<()> {
    let n = st.ncols();
    gpu.stream()
        .memcpy_dtod(&st.d_dev().col(0, 0..n), &mut x.col_mut(0, 0..n))
        .map_err(|e| cuqr::Error::Driver(format!("device copy: {e}")))?;
    gpu.trsm(
        Side::Left,
        Uplo::Upper,
        Op::N,
        Diag::NonUnit,
        T::ONE,
        &st.r_dev().block(0, 0, n, n),
        &mut x.view_mut(),
    )
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
    op: impl Fn(&mut GpuQr<T>) -> cuqr::Result<u64>,
) -> cuqr::Result<(f64, u64, GpuQr<T>)> {
    let keep: RefCell<Option<GpuQr<T>>> = RefCell::new(None);
    let launches = Cell::new(0u64);
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || {
            keep.borrow_mut().take();
            let mut st = base.try_clone()?;
            st.set_params(params);
            Ok(st)
        },
        |mut st| {
            launches.set(op(&mut st)?);
            *keep.borrow_mut() = Some(st);
            Ok(())
        },
    )?;
    let st = keep.into_inner().expect("at least one timed run");
    Ok((t.median_ms(), launches.get(), st))
}

/// Measures one point on the GPU: the update (+ solve), the seeds' strategies where
/// asked, the TUS/TUT protocols where the seeds give their ratios, the baselines (a)
/// and (b), and the ACC accuracy measures. The CPU columns are timed separately.
pub(super) fn bench_gpu<T: GpuScalar>(
    ctx: &Ctx<'_>,
    gb: &GpuBase<'_, T>,
    pt: &Point,
    c: &Case<T>,
) -> cuqr::Result<Row> {
    let (gpu, base, reps) = (gb.gpu, gb.state, ctx.reps);
    let (m2, n2) = pt.kind.new_dims(pt.m, pt.n, pt.p);
    let keep_q = pt.kind.policy() == QPolicy::Full;
    let params = point_params(pt, base.params());
    let mut row = Row::default();

    // The update (+ solve) from a restored snapshot; launches of the update alone. The
    // device-resident protocol (spec §3.9: no transfers) takes U from the device where
    // the update has a device entry point (column insertion: `insert_cols_device`, U
    // uploaded once, untimed); TUS and TUT (below) take it from the host.
    let u_dev = match pt.kind {
        Kind::InsertCols => Some(DevMat::from_host(gpu, c.u.as_ref())?),
        _ => None,
    };
    let upd_solve = |st: &mut GpuQr<T>, x: &mut DevMat<T>| -> cuqr::Result<u64> {
        let l0 = gpu.launch_count();
        match &u_dev {
            Some(u) => st.insert_cols_device(pt.k0, &u.view())?,
            None => apply(st, pt, c)?,
        }
        let launches = gpu.launch_count() - l0;
        solve_dev(gpu, st, x)?;
        Ok(launches)
    };
    let upd_solve_host = |st: &mut GpuQr<T>, x: &mut DevMat<T>| -> cuqr::Result<u64> {
        let l0 = gpu.launch_count();
        apply(st, pt, c)?;
        let launches = gpu.launch_count() - l0;
        solve_dev(gpu, st, x)?;
        Ok(launches)
    };
    let x_upd = RefCell::new(DevMat::<T>::zeros(gpu, n2, 1)?);
    let (ms, launches, st) = time_update(gpu, base, params, reps, |st| {
        upd_solve(st, &mut x_upd.borrow_mut())
    })?;
    row.upd_ms = Some(ms);
    row.launches = Some(launches);
    if matches!(pt.extra, Extra::Acc { .. }) {
        row.acc = Some(accuracy(gpu, &st, &c.a_new)?);
    }
    drop(st);

    // the seeds' strategies (spec §1.5, §3.6)
    let x_wf = RefCell::new(DevMat::<T>::zeros(gpu, n2, 1)?);
    let comp = matches!(pt.extra, Extra::Comp { .. });
    if has_givens_stage(pt) && (ctx.wavefront || comp) {
        let p = wavefront_params(pt, base.params(), RowRemoval::Composite);
        let (ms, launches, _) = time_update(gpu, base, p, reps, |st| {
            upd_solve(st, &mut x_wf.borrow_mut())
        })?;
        row.wf_ms = Some(ms);
        row.wf_launches = Some(launches);
    }
    let x_tmp = RefCell::new(DevMat::<T>::zeros(gpu, n2, 1)?);
    if comp {
        let p = wavefront_params(pt, base.params(), RowRemoval::SeparateStreams);
        let (ms, _, _) = time_update(gpu, base, p, reps, |st| {
            upd_solve(st, &mut x_tmp.borrow_mut())
        })?;
        row.streams_ms = Some(ms);
    }

    // baselines on the updated matrix
    let a_dev = DevMat::from_host(gpu, c.a_new.as_ref())?;
    let b_dev = DevMat::from_host(gpu, c.b_new.as_ref())?;
    let work = RefCell::new(DevMat::<T>::zeros(gpu, m2, n2)?);
    let dwork = RefCell::new(DevMat::<T>::zeros(gpu, m2, 1)?);
    let tau = RefCell::new(DevVec::<T>::zeros(gpu, n2)?);
    let qbuf = RefCell::new(if keep_q {
        Some(DevMat::<T>::zeros(gpu, m2, m2)?)
    } else {
        None
    });
    let setup = || -> cuqr::Result<()> {
        copy_into(gpu, &a_dev, &mut work.borrow_mut())?;
        copy_into(gpu, &b_dev, &mut dwork.borrow_mut())
    };
    let refac = |with_q: bool| -> cuqr::Result<()> {
        let mut w = work.borrow_mut();
        let mut d = dwork.borrow_mut();
        let mut tv = tau.borrow_mut();
        gpu.geqrf(&mut w.view_mut(), &mut tv.view_mut())?;
        gpu.ormqr(
            Side::Left,
            Op::T,
            &w.view(),
            n2,
            &tv.view(),
            &mut d.view_mut(),
        )?;
        gpu.trsm(
            Side::Left,
            Uplo::Upper,
            Op::N,
            Diag::NonUnit,
            T::ONE,
            &w.block(0, 0, n2, n2),
            &mut d.block_mut(0, 0, n2, 1),
        )?;
        if with_q {
            let mut qb = qbuf.borrow_mut();
            let q = qb.as_mut().expect("Q buffer allocated when Q is kept");
            gpu.panel_copy(&w.view(), &mut q.block_mut(0, 0, m2, n2))?;
            gpu.orgqr(&mut q.view_mut(), n2, &tv.view())?;
        }
        Ok(())
    };
    let tb = time_with_setup(gpu, 1, reps, setup, |()| refac(false))?;
    row.solve_ms = Some(tb.median_ms());
    // accuracy check of the harness itself: both solutions agree
    let x_ref = dwork.borrow().to_host(gpu)?;
    let x_u = x_upd.borrow().to_host(gpu)?;
    row.ex = Some(rel_diff(x_u.as_slice(), &x_ref.as_slice()[..n2]));
    if row.wf_ms.is_some() {
        let x_w = x_wf.borrow().to_host(gpu)?;
        row.wf_ex = Some(rel_diff(x_w.as_slice(), &x_ref.as_slice()[..n2]));
    }
    row.refac_ms = if keep_q {
        Some(time_with_setup(gpu, 1, reps, setup, |()| refac(true))?.median_ms())
    } else {
        row.solve_ms
    };

    // the seeds' protocols (spec §3.1): from page-locked host memory (and back)
    if let Some(host) = gb.host {
        let mut cell = gb.staging.borrow_mut();
        let staging = cell
            .as_mut()
            .filter(|s| s.len() >= staging_need::<T>(pt))
            .ok_or_else(|| cuqr::Error::Driver("TUS/TUT staging not allocated".into()))?;
        let staging = RefCell::new(staging);
        let keep: RefCell<Option<GpuQr<T>>> = RefCell::new(None);
        let transfer = |back: bool| -> cuqr::Result<f64> {
            let t = time_with_setup(
                gpu,
                1,
                reps,
                || {
                    keep.borrow_mut().take();
                    Ok(())
                },
                |()| {
                    let mut s = staging.borrow_mut();
                    let mut st = GpuQr::from_cpu(gpu, host, Some(&mut **s))?;
                    st.set_params(params);
                    upd_solve_host(&mut st, &mut x_tmp.borrow_mut())?;
                    if back {
                        std::hint::black_box(st.to_cpu_pinned(&mut s)?);
                    }
                    *keep.borrow_mut() = Some(st);
                    Ok(())
                },
            )?;
            keep.borrow_mut().take();
            Ok(t.median_ms())
        };
        if pt.seed_cula.is_some() {
            row.tus_ms = Some(transfer(false)?);
            let t = time_with_setup(
                gpu,
                1,
                reps,
                || Ok(()),
                |()| {
                    let mut s = staging.borrow_mut();
                    work.borrow_mut()
                        .upload_pinned(gpu, c.a_new.as_ref(), &mut s)?;
                    dwork
                        .borrow_mut()
                        .upload_pinned(gpu, c.b_new.as_ref(), &mut s)?;
                    refac(false)
                },
            )?;
            row.tus_base_ms = Some(t.median_ms());
        }
        if pt.seed_seq.is_some() {
            row.tut_ms = Some(transfer(true)?);
        }
    }
    Ok(row)
}

/// e_Q = ‖QᵀQ − I‖_F, e_A = ‖QR − A‖_F/‖A‖_F (with Q) and ‖L‖_F (R's strictly
/// lower part) of an updated state against the updated A (spec §3.7), in f64 with
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
