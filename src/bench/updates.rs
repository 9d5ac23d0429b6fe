//! `cuqr bench updates`: the seeds' update experiments (spec §3.3–§3.6, grids of
//! §3.9) on the GPU against in-process baselines on the same data, device-resident
//! protocol (spec §3.1, §3.9 "Protocols"):
//!
//! * **update**: restore the factorised state from a device snapshot (untimed),
//!   then time the update plus the solve R̃₁x = d̃(0:n′) (cuBLAS TRSM) — the
//!   update's inputs U, e, u, v come from host memory as the API takes them;
//! * **(a) refactorise**: cuSOLVER `geqrf` + `ormqr` + `trsm` on the updated
//!   matrix, plus `orgqr` to the explicit m′×m′ Q when the state keeps Q — the
//!   bar of issue 7 is against this;
//! * **(b) solution only**: `geqrf` + `ormqr` + `trsm` (the seeds' CULA `Sgels`
//!   comparison);
//! * **(c) CPU serial update** ([`cuqr::CpuQr`], started from the GPU's own
//!   factorisation copied to the host), only at the points marked for it.
//!
//! GPU timings are CUDA-event medians of ≥ 5 runs after one warm-up
//! ([`cuqr::internals::gpu::timing`]); data are random ±[0.1, 1) (never zero).

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use cuqr::internals::gpu::timing::{time_with_setup, Timing};
use cuqr::internals::gpu::{
    DevMat, DevVec, Diag, GpuQr, GpuScalar, Op, PinnedHostSlice, Side, Uplo,
};
use cuqr::internals::Dims;
use cuqr::{CpuQr, FactorParams, Givens, Gpu, Mat, QPolicy, QrUpdate, RowRemoval, Scalar};

use super::{plot, BenchOpts};
use crate::cli::CliResult;
use crate::rng::Rng;

/// `cuqr bench updates --help`.
pub const HELP: &str = "\
cuqr bench updates: QR updates (cuqr GPU) vs cuSOLVER refactorisation and the
serial CPU update, on the seeds' grids (spec §3.9), device-resident protocol, with
the seeds' TUS and TUT protocols beside it

Usage: cuqr bench updates [--quick] [--precision f64|f32|both] [--groups G,G,...]
                          [--reps R] [--csv FILE] [--no-cpu] [--cpu-budget S]
                          [--cpu-threads N] [--device-only] [--wavefront]
                          [--profile] [--stages] [--svg DIR] [--resume FILE]
                          [--md FILE]

  --quick        a small grid (m = 1200, n = 500) that runs in well under a
                 minute; without a GPU it runs the CPU columns only and says so
  --precision    f64, f32 or both (default both)
  --groups       subset of BS, AC-k3, AC-k6, AC-stage, AC-p, RC-k, RC-m, AR-p, AR-n,
                 AR-m, RR-seq, RR-n, RR-m, RR-comp, ACC, R1 (default: all, every point
                 of spec §3.9's grids; ignored with --quick)
  --reps         timed GPU repetitions, at least 5 (default 5, after 1 warm-up)
  --csv FILE     also write every row as CSV
  --no-cpu       skip the serial CPU update and faer columns
  --cpu-budget   seconds of CPU repetitions per point (default 3; at least one run)
  --cpu-threads  worker threads for the CPU columns, each point serial on one of
                 them (default 1); they run beside the GPU measurements, so the
                 table prints a row once its CPU columns are in
  --device-only  skip the TUS and TUT protocols
  --wavefront    time the seeds' Wavefront strategy at every point with a Givens
                 stage (default: only on --quick and in RR-comp)
  --profile      also time the two-phase Givens stage of each insert_cols (k0 < n)
                 and delete_rows point alone (generate, apply in step order with the
                 default pipe kernel, apply in list order), and the ceilings
                 measured in the same run (device copy bandwidth, cuBLAS GEMM rate)
  --stages       also time each point's stages (uploads, copies, Givens generate
                 and apply, Householder panels and trailing updates, rank check,
                 the solve) by events on the main stream, median of --reps runs;
                 always on in AC-stage (the seeds' stage breakdown, Table A4)
  --resume FILE  skip the points already in FILE, a CSV of an earlier run (same
                 columns); with --csv FILE (the same file) the new rows are added
                 after the old ones, so a run cut short can be continued
  --md FILE      also write the report (this table and the side tables: seed tables,
                 --stages, --profile) to FILE as Markdown, rewritten after every row,
                 so that a run cut short keeps every table measured so far
  --svg DIR      also write one SVG plot per (group, precision), DIR/<group>_<prec>.svg:
                 speed-up over (a) and over the CPU update (c) against the parameter
                 that varies in the group (k0, p, m or n), the bar dashed; without a
                 GPU, the ratio (d) faer / (c) CPU update instead (log y axis)

Columns: update = update + TRSM solve (median ms; column insertion takes U from
the device, insert_cols_device, as the device-resident protocol has no transfers;
row insertion and the rank-one update still upload their new rows or vectors, having
no device entry point yet); launches = kernel/library
launches and copies issued by the update alone; (a) = geqrf + ormqr + trsm
(+ orgqr when Q is kept), (b) = geqrf + ormqr + trsm; a/upd and b/upd are
speed-ups (> 1: the update wins); wavefront = the same update (+ solve) with the
seeds' Wavefront strategy (Givens::Wavefront, and for delete_rows the seeds'
composite [Q; R^T; d^T] layout) where the update has a Givens stage, a/wf its
speed-up over (a); TUS = the seeds' protocol (spec §3.1): copy of Q (when kept),
R and d from page-locked host memory, update, solve; (b) TUS = copy of the updated
A and b from page-locked host memory, then (b) (the seeds' CULA analogue);
seed CULA/TUS = the seeds' ratio at the same point (spec §3.3-§3.6); cpu = serial
CPU update + solve (median over the runs that fit the budget); TUT = TUS plus
the copy of the new state back to page-locked host memory, cpu/TUT its
speed-up over the CPU update, seed seq/TUT the seeds' ratio; (d) faer = faer's
sequential QR of the updated matrix + least-squares solve, solution only (no Q),
at the points with a cpu column; bar = issue 7's required speed-up over (a) at
this point and whether it holds. TUS is timed where the seeds give CULA/TUS, TUT
where they give seq/TUT. RR-comp, ACC and BS also print the tables of their seed
experiments (three row-removal layouts; e_x, e_Q, e_A, ||L||; n_b).
";

use super::updates_grid::{
    bar_reason, cpu_bar_applies, full_grid, quick_grid, required_speedup, Extra, Kind, Point,
    GROUPS,
};

/// A random m×n matrix with entries ±[0.1, 1) (never zero).
fn random<T: Scalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
    let mut rng = Rng::new(seed);
    let data = (0..m * n)
        .map(|_| {
            let mag = 0.1 + 0.9 * rng.uniform();
            T::from_f64(if rng.next_u64() & 1 == 0 { mag } else { -mag })
        })
        .collect();
    Mat::from_col_major(m, n, data).expect("m·n values")
}

/// The inputs of one update and the matrix/right-hand side after it.
struct Case<T: Scalar> {
    u: Mat<T>,
    e: Mat<T>,
    uv: (Vec<T>, Vec<T>),
    a_new: Mat<T>,
    b_new: Mat<T>,
}

fn make_case<T: Scalar>(pt: &Point, a: &Mat<T>, b: &Mat<T>, seed: u64) -> Case<T> {
    let (m, n, k0, p) = (pt.m, pt.n, pt.k0, pt.p);
    let none = || Mat::from_fn(1, 1, |_, _| T::ONE);
    match pt.kind {
        Kind::InsertCols => {
            let u = random::<T>(m, p, seed);
            let a_new = Mat::from_fn(m, n + p, |i, j| {
                if j < k0 {
                    a[(i, j)]
                } else if j < k0 + p {
                    u[(i, j - k0)]
                } else {
                    a[(i, j - p)]
                }
            });
            Case {
                u,
                e: none(),
                uv: (vec![], vec![]),
                a_new,
                b_new: b.clone(),
            }
        }
        Kind::DeleteCols => Case {
            u: none(),
            e: none(),
            uv: (vec![], vec![]),
            a_new: Mat::from_fn(m, n - p, |i, j| a[(i, if j < k0 { j } else { j + p })]),
            b_new: b.clone(),
        },
        Kind::InsertRows => {
            let u = random::<T>(p, n, seed);
            let e = random::<T>(p, 1, seed ^ 0x5555);
            let ins = |i: usize| i >= k0 && i < k0 + p;
            let src = |i: usize| if i < k0 { i } else { i - p };
            let a_new = Mat::from_fn(m + p, n, |i, j| {
                if ins(i) {
                    u[(i - k0, j)]
                } else {
                    a[(src(i), j)]
                }
            });
            let b_new = Mat::from_fn(m + p, 1, |i, _| {
                if ins(i) {
                    e[(i - k0, 0)]
                } else {
                    b[(src(i), 0)]
                }
            });
            Case {
                u,
                e,
                uv: (vec![], vec![]),
                a_new,
                b_new,
            }
        }
        Kind::DeleteRows => {
            let src = |i: usize| if i < k0 { i } else { i + p };
            Case {
                u: none(),
                e: none(),
                uv: (vec![], vec![]),
                a_new: Mat::from_fn(m - p, n, |i, j| a[(src(i), j)]),
                b_new: Mat::from_fn(m - p, 1, |i, _| b[(src(i), 0)]),
            }
        }
        Kind::RankOne => {
            let uu = random::<T>(m, 1, seed).into_vec();
            let vv = random::<T>(n, 1, seed ^ 0x7777).into_vec();
            // a modest rank-one change keeps A + uvᵀ well conditioned
            let s = T::from_f64(0.5);
            let a_new = Mat::from_fn(m, n, |i, j| a[(i, j)] + s * uu[i] * vv[j]);
            let vs = vv.iter().map(|&x| s * x).collect();
            Case {
                u: none(),
                e: none(),
                uv: (uu, vs),
                a_new,
                b_new: b.clone(),
            }
        }
    }
}

/// Applies the point's update to any backend.
fn apply<T: Scalar, Q: QrUpdate<T>>(st: &mut Q, pt: &Point, c: &Case<T>) -> cuqr::Result<()> {
    match pt.kind {
        Kind::InsertCols => st.insert_cols(pt.k0, c.u.as_ref()),
        Kind::DeleteCols => st.delete_cols(pt.k0, pt.p),
        Kind::InsertRows => st.insert_rows(pt.k0, c.u.as_ref(), c.e.as_ref()),
        Kind::DeleteRows => st.delete_rows(pt.k0, pt.p),
        Kind::RankOne => st.rank_one(&c.uv.0, &c.uv.1),
    }
}

/// One measured row.
#[derive(Clone, Debug, Default)]
struct Row {
    upd_ms: Option<f64>,
    launches: Option<u64>,
    refac_ms: Option<f64>,
    solve_ms: Option<f64>,
    cpu_ms: Option<f64>,
    cpu_runs: usize,
    /// (d) faer's CPU refactorisation + least-squares solve of the updated matrix.
    faer_ms: Option<f64>,
    faer_runs: usize,
    /// ‖x_update − x_refactorise‖/‖x_refactorise‖ (GPU only).
    ex: Option<f64>,
    /// The update (+ solve) with the seeds' Wavefront strategy, where it applies.
    wf_ms: Option<f64>,
    /// Launches of the Wavefront update alone.
    wf_launches: Option<u64>,
    /// e_x of the Wavefront update's solution.
    wf_ex: Option<f64>,
    /// RR-comp: the seeds' three-stream row removal (Wavefront, separate Q/R/d).
    streams_ms: Option<f64>,
    /// TUS (spec §3.1): copy of the state from page-locked host memory + update + solve.
    tus_ms: Option<f64>,
    /// (b) under TUS: copy of the updated A and b from page-locked memory + (b).
    tus_base_ms: Option<f64>,
    /// TUT: TUS + copy of the new state back to page-locked host memory.
    tut_ms: Option<f64>,
    /// ACC: e_Q and e_A (where Q is kept) and ‖L‖_F of the updated state.
    acc: Option<Accuracy>,
}

/// The accuracy measures of spec §3.7 of an updated state (Frobenius norms, f64).
#[derive(Clone, Copy, Debug)]
struct Accuracy {
    e_q: Option<f64>,
    e_a: Option<f64>,
    l_norm: f64,
}

/// Whether the point's update has a Givens stage whose GPU strategy
/// [`wavefront_params`] changes (spec §1.5, §1.7, §1.10, §1.11).
fn has_givens_stage(pt: &Point) -> bool {
    match pt.kind {
        Kind::DeleteRows | Kind::RankOne => true,
        Kind::InsertCols => pt.k0 < pt.n,
        Kind::DeleteCols | Kind::InsertRows => false,
    }
}

/// The point's update options: the state's, with the BS group's n_b.
fn point_params(pt: &Point, mut p: cuqr::UpdateParams) -> cuqr::UpdateParams {
    if pt.nb.is_some() {
        p.block_size = pt.nb;
    }
    p
}

/// The seeds' Wavefront strategy (spec §1.5): a generate and an apply launch per
/// wavefront step; for row deletion the given layout (spec §1.10, §3.6; the seeds'
/// composite [Q; Rᵀ; dᵀ] by default).
fn wavefront_params(pt: &Point, p: cuqr::UpdateParams, layout: RowRemoval) -> cuqr::UpdateParams {
    let mut p = point_params(pt, p);
    p.givens = Givens::Wavefront;
    p.row_removal = layout;
    p
}

fn copy_into<T: GpuScalar>(gpu: &Gpu, src: &DevMat<T>, dst: &mut DevMat<T>) -> cuqr::Result<()> {
    gpu.stream()
        .memcpy_dtod(src.buf(), dst.buf_mut())
        .map_err(|e| cuqr::Error::Driver(format!("device copy: {e}")))
}

/// x := R̃₁⁻¹ d̃(0:n′) for the state, on the device (TRSM), into `x` (n′×1).
fn solve_dev<T: GpuScalar>(gpu: &Gpu, st: &GpuQr<T>, x: &mut DevMat<T>) -> cuqr::Result<()> {
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

fn rel_diff<T: Scalar>(x: &[T], y: &[T]) -> f64 {
    let num: f64 = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a.to_f64() - b.to_f64()).powi(2))
        .sum();
    let den: f64 = y.iter().map(|b| b.to_f64().powi(2)).sum();
    (num / den).sqrt()
}

/// Times the serial CPU update (+ solve) from `base`: at least one run, more
/// while the budget lasts (up to 5). Returns (median ms, runs).
fn time_cpu<T: Scalar>(
    base: &CpuQr<T>,
    pt: &Point,
    c: &Case<T>,
    budget_s: f64,
) -> cuqr::Result<(f64, usize)> {
    let mut samples = Vec::new();
    let t_all = Instant::now();
    while samples.len() < 5 && (samples.is_empty() || t_all.elapsed().as_secs_f64() < budget_s) {
        let mut st = base.clone();
        st.set_params(point_params(pt, st.params()));
        let t = Instant::now();
        apply(&mut st, pt, c)?;
        let sol = st.solve()?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(sol);
    }
    samples.sort_by(f64::total_cmp);
    Ok((samples[samples.len() / 2], samples.len()))
}

/// Times baseline (d): faer's QR of the updated matrix plus its least-squares
/// solve, sequential (faer without rayon), in the working precision; conversion to
/// faer's matrix type is outside the timed region. Same repetition rule as
/// [`time_cpu`]. Returns (median ms, runs).
fn time_faer<T: Scalar>(c: &Case<T>, budget_s: f64) -> (f64, usize) {
    fn run<F: faer::traits::RealField + Copy>(
        a: &faer::Mat<F>,
        b: &faer::Mat<F>,
        budget_s: f64,
    ) -> (f64, usize) {
        use faer::linalg::solvers::SolveLstsq;
        let mut samples = Vec::new();
        let t_all = Instant::now();
        while samples.len() < 5 && (samples.is_empty() || t_all.elapsed().as_secs_f64() < budget_s)
        {
            let t = Instant::now();
            let x = a.qr().solve_lstsq(b);
            samples.push(t.elapsed().as_secs_f64() * 1e3);
            std::hint::black_box(x);
        }
        samples.sort_by(f64::total_cmp);
        (samples[samples.len() / 2], samples.len())
    }
    let (a, b) = (&c.a_new, &c.b_new);
    if T::NAME == "f32" {
        let fa = faer::Mat::<f32>::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64() as f32);
        let fb = faer::Mat::<f32>::from_fn(b.nrows(), b.ncols(), |i, j| b[(i, j)].to_f64() as f32);
        run(&fa, &fb, budget_s)
    } else {
        let fa = faer::Mat::<f64>::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64());
        let fb = faer::Mat::<f64>::from_fn(b.nrows(), b.ncols(), |i, j| b[(i, j)].to_f64());
        run(&fa, &fb, budget_s)
    }
}

/// What the GPU measurement of one point needs besides the point and its case.
struct GpuBase<'a, T: GpuScalar> {
    gpu: &'a Arc<Gpu>,
    /// The factorised state (each timed run restores it from this snapshot).
    state: &'a GpuQr<T>,
    /// The same state on the host: TUS and TUT start from it (`None`: no transfers).
    host: Option<&'a CpuQr<T>>,
    /// Page-locked staging for TUS/TUT, at least [`staging_need`] of every point.
    staging: &'a RefCell<Option<PinnedHostSlice<T>>>,
}

/// Elements of page-locked staging that the point's TUS/TUT runs need: the state
/// before and after the update, and the updated A and b of the (b) TUS baseline.
fn staging_need<T: GpuScalar>(pt: &Point) -> usize {
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
fn bench_gpu<T: GpuScalar>(
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

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

/// The "bar" cell: required speed-up and whether it holds.
fn bar_cell(pt: &Point, r: &Row) -> String {
    let need = required_speedup(pt);
    let mut s = match ratio(r.refac_ms, r.upd_ms) {
        Some(x) if x >= need => format!("ok (≥{need:.0}×)"),
        Some(x) => format!("MISS: {x:.2}× < {need:.0}×"),
        None => "–".to_string(),
    };
    if cpu_bar_applies(pt) {
        if let Some(x) = ratio(r.cpu_ms, r.upd_ms) {
            s.push_str(&if x >= 50.0 {
                "; cpu ok (≥50×)".to_string()
            } else {
                format!("; cpu MISS: {x:.1}× < 50×")
            });
        }
    }
    s
}

const TABLE_HEAD: &str = "| group | prec | update | m | n | k0 | p | Q | update ms | launches | (a) refac ms | a/upd | wavefront ms | a/wf | (b) solve-only ms | b/upd | TUS ms | (b) TUS ms | b/TUS | seed CULA/TUS | cpu ms (runs) | cpu/upd | TUT ms | cpu/TUT | seed seq/TUT | (d) faer ms (runs) | d/upd | e_x | bar |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";
const CSV_HEAD: &str = "group,prec,update,m,n,k0,p,nb,q_full,update_ms,launches,refac_ms,refac_over_update,wavefront_ms,wavefront_launches,refac_over_wavefront,e_x_wavefront,streams_ms,solve_only_ms,solve_only_over_update,tus_ms,solve_only_tus_ms,solve_only_tus_over_tus,seed_cula_over_tus,cpu_ms,cpu_runs,cpu_over_update,tut_ms,cpu_over_tut,seed_seq_over_tut,faer_ms,faer_runs,faer_over_update,e_x,e_q,e_a,l_norm,required_speedup";

/// The point's first cells of a table or CSV row: group, precision, update, m, n, k0, p.
fn point_cells(prec: &str, pt: &Point) -> Vec<String> {
    let (name, kind) = (pt.group.to_string(), pt.kind.name().to_string());
    let dims = [pt.m, pt.n, pt.k0, pt.p].map(|v| v.to_string());
    [name, prec.to_string(), kind]
        .into_iter()
        .chain(dims)
        .collect()
}

fn table_row(prec: &str, pt: &Point, r: &Row) -> String {
    let runs = |ms: Option<f64>, n: usize| ms.map_or("–".into(), |c| format!("{c:.1} ({n})"));
    let mut cells = point_cells(prec, pt);
    cells.extend([
        (if pt.keeps_q() { "full" } else { "none" }).to_string(),
        fmt_opt(r.upd_ms, 3),
        r.launches.map_or("–".into(), |l| l.to_string()),
        fmt_opt(r.refac_ms, 3),
        fmt_opt(ratio(r.refac_ms, r.upd_ms), 2),
        fmt_opt(r.wf_ms, 3),
        fmt_opt(ratio(r.refac_ms, r.wf_ms), 2),
        fmt_opt(r.solve_ms, 3),
        fmt_opt(ratio(r.solve_ms, r.upd_ms), 2),
        fmt_opt(r.tus_ms, 3),
        fmt_opt(r.tus_base_ms, 3),
        fmt_opt(ratio(r.tus_base_ms, r.tus_ms), 2),
        fmt_opt(pt.seed_cula, 2),
        runs(r.cpu_ms, r.cpu_runs),
        fmt_opt(ratio(r.cpu_ms, r.upd_ms), 1),
        fmt_opt(r.tut_ms, 3),
        fmt_opt(ratio(r.cpu_ms, r.tut_ms), 1),
        fmt_opt(pt.seed_seq, 1),
        runs(r.faer_ms, r.faer_runs),
        fmt_opt(ratio(r.faer_ms, r.upd_ms), 1),
        r.ex.map_or("–".into(), |e| format!("{e:.1e}")),
        bar_cell(pt, r),
    ]);
    format!("| {} |", cells.join(" | "))
}

fn csv_row(prec: &str, pt: &Point, r: &Row) -> String {
    let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    let mut cells = point_cells(prec, pt);
    cells.extend([
        pt.nb.map_or(String::new(), |v| v.to_string()),
        pt.keeps_q().to_string(),
        o(r.upd_ms),
        r.launches.map_or(String::new(), |l| l.to_string()),
        o(r.refac_ms),
        o(ratio(r.refac_ms, r.upd_ms)),
        o(r.wf_ms),
        r.wf_launches.map_or(String::new(), |l| l.to_string()),
        o(ratio(r.refac_ms, r.wf_ms)),
        o(r.wf_ex),
        o(r.streams_ms),
        o(r.solve_ms),
        o(ratio(r.solve_ms, r.upd_ms)),
        o(r.tus_ms),
        o(r.tus_base_ms),
        o(ratio(r.tus_base_ms, r.tus_ms)),
        o(pt.seed_cula),
        o(r.cpu_ms),
        r.cpu_runs.to_string(),
        o(ratio(r.cpu_ms, r.upd_ms)),
        o(r.tut_ms),
        o(ratio(r.cpu_ms, r.tut_ms)),
        o(pt.seed_seq),
        o(r.faer_ms),
        r.faer_runs.to_string(),
        o(ratio(r.faer_ms, r.upd_ms)),
        o(r.ex),
        o(r.acc.and_then(|a| a.e_q)),
        o(r.acc.and_then(|a| a.e_a)),
        o(r.acc.map(|a| a.l_norm)),
        required_speedup(pt).to_string(),
    ]);
    cells.join(",")
}

/// The tables of the seed experiments that are not speed-up grids, from the rows
/// of the run: RR-comp (spec §3.6 Table D4), ACC (§3.7) and BS (§3.2).
fn seed_tables(rows: &[(&str, Point, Row)]) -> String {
    let mut out = String::new();
    let sel = |g: &str| -> Vec<&(&str, Point, Row)> {
        rows.iter().filter(|(_, p, _)| p.group == g).collect()
    };
    let comp = sel("RR-comp");
    if !comp.is_empty() {
        out.push_str(
            "\nRR-comp (spec §3.6 Table D4, m = 5000, p = 50): row removal with the seeds' \
             composite [Q; Rᵀ; dᵀ] and three-stream layouts (Wavefront Givens) against the \
             two-phase default; update + solve, ms; the seeds' times in s\n\n\
             | prec | n | two-phase ms | composite ms | three streams ms | streams/composite | \
             seed composite s | seed streams s | seed streams/composite | composite/two-phase |\n\
             |---|---|---|---|---|---|---|---|---|---|\n",
        );
        for (prec, p, r) in comp {
            if let Extra::Comp {
                composite_s,
                streams_s,
            } = p.extra
            {
                out.push_str(&format!(
                    "| {prec} | {} | {} | {} | {} | {} | {composite_s:.3} | {streams_s:.3} | {:.2} | {} |\n",
                    p.n,
                    fmt_opt(r.upd_ms, 3),
                    fmt_opt(r.wf_ms, 3),
                    fmt_opt(r.streams_ms, 3),
                    fmt_opt(ratio(r.streams_ms, r.wf_ms), 2),
                    streams_s / composite_s,
                    fmt_opt(ratio(r.wf_ms, r.upd_ms), 1),
                ));
            }
        }
    }
    let acc = sel("ACC");
    if !acc.is_empty() {
        out.push_str(
            "\nACC (spec §3.7, m = 4000, n = 2000, k0 = 0): e_x against cuSOLVER's \
             refactorisation in the same precision, e_Q = ‖QᵀQ − I‖_F, e_A = ‖QR − A‖_F/‖A‖_F \
             (where Q is kept), ‖L‖_F of R below its diagonal; the seeds' GPU figures (f32, \
             2-norms); target = spec §3.7's 10·m·u for e_Q and e_A\n\n\
             | prec | update | p | e_x | seed e_x | e_Q | seed e_Q | e_A | seed e_A | ‖L‖ | 10·m·u | e_Q, e_A ≤ 10·m·u |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        let e = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.1e}"));
        for (prec, p, r) in acc {
            if let Extra::Acc { e_x, e_q, e_a } = p.extra {
                let u = if *prec == "f32" {
                    f32::EPSILON as f64 / 2.0
                } else {
                    f64::EPSILON / 2.0
                };
                let target = 10.0 * p.m as f64 * u;
                let a = r.acc;
                let ok = match a {
                    Some(Accuracy {
                        e_q: Some(q),
                        e_a: Some(ea),
                        ..
                    }) => (if q <= target && ea <= target {
                        "yes"
                    } else {
                        "NO"
                    })
                    .to_string(),
                    _ => "–".to_string(),
                };
                out.push_str(&format!(
                    "| {prec} | {} | {} | {} | {e_x:.0e} | {} | {} | {} | {} | {} | {target:.1e} | {ok} |\n",
                    p.kind.name(),
                    p.p,
                    e(r.ex),
                    e(a.and_then(|a| a.e_q)),
                    e(e_q),
                    e(a.and_then(|a| a.e_a)),
                    e(e_a),
                    e(a.map(|a| a.l_norm)),
                ));
            }
        }
    }
    let bs = sel("BS");
    if !bs.is_empty() {
        out.push_str(
            "\nBS (spec §3.2, m = 4000): the update's Householder block size n_b; update + \
             solve (device-resident) and TUT, ms; the seeds' sequential and GPU TUT times in s\n\n\
             | prec | update | n | k0 | p | n_b | update ms | a/upd | TUT ms | seed TUT s | seed seq s |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for (prec, p, r) in bs {
            if let Extra::Bs { seq_s, tut_s } = p.extra {
                out.push_str(&format!(
                    "| {prec} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {seq_s:.3} |\n",
                    p.kind.name(),
                    p.n,
                    p.k0,
                    p.p,
                    p.nb.map_or("–".into(), |v| v.to_string()),
                    fmt_opt(r.upd_ms, 3),
                    fmt_opt(ratio(r.refac_ms, r.upd_ms), 2),
                    fmt_opt(r.tut_ms, 3),
                    fmt_opt(tut_s, 3),
                ));
            }
        }
    }
    out
}

/// The CSV key of a point: its first eight cells (group, prec, update, m, n, k0, p, nb).
fn csv_key(prec: &str, pt: &Point) -> String {
    let row = csv_row(prec, pt, &Row::default());
    row.split(',').take(8).collect::<Vec<_>>().join(",")
}

/// `--resume FILE`: the file's text and the keys of its rows ([`csv_key`]); a missing or
/// empty file has none. A file with another header is refused.
fn read_resume(path: &str) -> Result<(Option<String>, Vec<String>), String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Vec::new())),
        Err(e) => return Err(e.to_string()),
    };
    if text.trim().is_empty() {
        return Ok((None, Vec::new()));
    }
    let mut lines = text.lines();
    if lines.next() != Some(CSV_HEAD) {
        return Err("not a CSV of this cuqr bench updates (its header differs)".into());
    }
    let keys = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split(',').take(8).collect::<Vec<_>>().join(","))
        .collect();
    let mut text = text;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok((Some(text), keys))
}

/// Everything a sweep needs besides the points.
struct Ctx<'a> {
    gpu: Option<&'a Arc<Gpu>>,
    reps: usize,
    cpu: bool,
    cpu_budget: f64,
    /// CPU points of one state timed at once (one serial update a thread).
    cpu_threads: usize,
    /// Time the TUS/TUT protocols where the seeds give their ratios.
    transfers: bool,
    /// Time the seeds' Wavefront strategy at every point with a Givens stage.
    wavefront: bool,
    profile: bool,
    stages: bool,
}

/// The seed of a point's update inputs.
fn case_seed(seed: u64, p: &Point) -> u64 {
    seed ^ ((p.k0 as u64) << 16) ^ p.p as u64
}

/// What a CPU job gives: ((serial update ms, runs), (faer ms, runs)).
type CpuTimed = cuqr::Result<((f64, usize), (f64, usize))>;

/// One CPU point: its factorised state, the state's A and b, and its row's slot.
struct CpuJob<T: Scalar> {
    base: Arc<CpuQr<T>>,
    a: Arc<Mat<T>>,
    b: Arc<Mat<T>>,
    seed: u64,
    pt: Point,
    slot: usize,
}

/// The CPU columns (c) and (d) of the points that ask for them, on `threads` worker
/// threads that run beside the GPU measurements: each point serial on one thread with
/// its own copy of the state.
struct CpuPool<T: Scalar> {
    tx: Option<std::sync::mpsc::Sender<CpuJob<T>>>,
    workers: Vec<std::thread::JoinHandle<()>>,
    done: Arc<std::sync::Mutex<Vec<(usize, CpuTimed)>>>,
}

impl<T: Scalar + 'static> CpuPool<T> {
    fn new(threads: usize, budget_s: f64) -> Self {
        let (tx, rx) = std::sync::mpsc::channel::<CpuJob<T>>();
        let rx = Arc::new(std::sync::Mutex::new(rx));
        let done = Arc::new(std::sync::Mutex::new(Vec::new()));
        let workers = (0..threads.max(1))
            .map(|_| {
                let (rx, done) = (rx.clone(), done.clone());
                std::thread::spawn(move || loop {
                    let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok(j) = job else { break };
                    let case = make_case(&j.pt, &j.a, &j.b, case_seed(j.seed, &j.pt));
                    let r = time_cpu(&j.base, &j.pt, &case, budget_s)
                        .map(|c| (c, time_faer(&case, budget_s)));
                    drop(case);
                    done.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((j.slot, r));
                })
            })
            .collect();
        CpuPool {
            tx: Some(tx),
            workers,
            done,
        }
    }

    fn submit(&self, job: CpuJob<T>) {
        self.tx
            .as_ref()
            .expect("the pool takes jobs until finish")
            .send(job)
            .expect("the workers live until finish");
    }

    /// The jobs finished so far (each once).
    fn take_done(&self) -> Vec<(usize, CpuTimed)> {
        std::mem::take(&mut *self.done.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits for every job; returns the ones not yet taken.
    fn finish(mut self) -> Vec<(usize, CpuTimed)> {
        drop(self.tx.take());
        for w in self.workers.drain(..) {
            w.join().expect("a CPU worker panicked");
        }
        self.take_done()
    }
}

/// Fills a row's CPU columns from a finished job.
fn fill_cpu(row: &mut Row, timed: CpuTimed) -> cuqr::Result<()> {
    let ((cpu_ms, cpu_runs), (faer_ms, faer_runs)) = timed?;
    row.cpu_ms = Some(cpu_ms);
    row.cpu_runs = cpu_runs;
    row.faer_ms = Some(faer_ms);
    row.faer_runs = faer_runs;
    Ok(())
}

/// Runs the points of one precision, grouped by (m, n, policy) so each state
/// is factorised once; calls `out` per finished row (a state's rows once its CPU
/// columns are in).
fn sweep<T: GpuScalar>(
    ctx: &Ctx<'_>,
    points: &[Point],
    done: &mut usize,
    total: usize,
    out: &mut dyn FnMut(&Point, &Row),
    prof: &RefCell<Vec<String>>,
    stages: &RefCell<Vec<String>>,
) -> CliResult<()> {
    let mut keys: Vec<(usize, usize, QPolicy)> = Vec::new();
    for p in points {
        let k = (p.m, p.n, p.kind.policy());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let transfers = |p: &Point| p.seed_cula.is_some() || p.seed_seq.is_some();
    // page-locked staging for TUS/TUT, allocated once for the largest point
    let staging: RefCell<Option<PinnedHostSlice<T>>> = RefCell::new(match ctx.gpu {
        Some(g) if ctx.transfers => points
            .iter()
            .filter(|p| transfers(p))
            .map(staging_need::<T>)
            .max()
            .map(|len| g.alloc_pinned::<T>(len))
            .transpose()?,
        _ => None,
    });
    // rows by slot; a row is printed once its CPU job (if any) is in
    let mut slots: Vec<(Point, Row, bool)> = Vec::new();
    let mut printed = 0usize;
    let pool = ctx
        .cpu
        .then(|| CpuPool::<T>::new(ctx.cpu_threads, ctx.cpu_budget));
    let mut flush = |slots: &mut Vec<(Point, Row, bool)>,
                     printed: &mut usize,
                     finished: Vec<(usize, CpuTimed)>|
     -> cuqr::Result<()> {
        for (slot, timed) in finished {
            fill_cpu(&mut slots[slot].1, timed)?;
            slots[slot].2 = false;
        }
        while *printed < slots.len() && !slots[*printed].2 {
            let (p, r, _) = &slots[*printed];
            out(p, r);
            *printed += 1;
        }
        Ok(())
    };
    for (m, n, policy) in keys {
        let pts: Vec<Point> = points
            .iter()
            .filter(|p| (p.m, p.n, p.kind.policy()) == (m, n, policy))
            .copied()
            .collect();
        let seed = (m as u64) << 32 ^ n as u64;
        let a = Arc::new(random::<T>(m, n, seed));
        let b = Arc::new(random::<T>(m, 1, seed ^ 0xB));
        let needs_cpu = pool.is_some() && pts.iter().any(|p| p.cpu);
        let tus_tut = staging.borrow().is_some() && pts.iter().any(transfers);
        let gpu_base = match ctx.gpu {
            Some(g) => Some(GpuQr::factorize(
                g,
                a.as_ref().as_ref(),
                b.as_ref().as_ref(),
                policy,
                FactorParams::default(),
            )?),
            None => None,
        };
        let host_base = match (&gpu_base, needs_cpu || tus_tut) {
            (_, false) => None,
            (Some(g), true) => Some(Arc::new(g.to_cpu()?)),
            (None, true) => Some(Arc::new(CpuQr::factorize(
                a.as_ref().as_ref(),
                b.as_ref().as_ref(),
                policy,
                FactorParams::default(),
            )?)),
        };
        for p in &pts {
            *done += 1;
            eprint!(
                "\r[{done}/{total}] {} {} m={} n={} k0={} p={}        ",
                p.group,
                p.kind.name(),
                p.m,
                p.n,
                p.k0,
                p.p
            );
            let _ = std::io::stderr().flush();
            let case = make_case(p, &a, &b, case_seed(seed, p));
            let row = match (ctx.gpu, &gpu_base) {
                (Some(g), Some(base)) => {
                    let gb = GpuBase {
                        gpu: g,
                        state: base,
                        host: host_base.as_deref().filter(|_| tus_tut),
                        staging: &staging,
                    };
                    bench_gpu(ctx, &gb, p, &case)?
                }
                _ => Row::default(),
            };
            let want_stages = ctx.stages || p.group == "AC-stage";
            if let (true, Some(g), Some(base)) = (want_stages, ctx.gpu, &gpu_base) {
                let st = stage_split(g, base, p, &case, ctx.reps)?;
                let cells: Vec<String> = st
                    .iter()
                    .map(|(name, ms)| format!("{name} {ms:.3}"))
                    .collect();
                let sum: f64 = st.iter().map(|x| x.1).sum();
                stages.borrow_mut().push(format!(
                    "{} {sum:.3} | {} |",
                    point_head::<T>(p),
                    cells.join("; ")
                ));
            }
            if let (true, Some(g), Some(base)) = (ctx.profile, ctx.gpu, &gpu_base) {
                if let Some((tg, ts, tl, count, vecs, bytes, tw)) =
                    profile_givens(g, base, p, ctx.reps)?
                {
                    let flops = 6.0 * count as f64 * vecs as f64;
                    prof.borrow_mut().push(format!(
                        "{} {:.3} | {:.3} | {:.3} | {:.2} | {:.1} | {:.0} | {:.3} | {:.2} | {} |",
                        point_head::<T>(p),
                        tg,
                        ts,
                        tl,
                        tl / ts,
                        2.0 * bytes as f64 / (ts * 1e6),
                        flops / (ts * 1e6),
                        tw,
                        ts / tw,
                        fmt_opt(row.upd_ms, 3),
                    ));
                }
            }
            drop(case);
            let slot = slots.len();
            let cpu_job = needs_cpu && p.cpu;
            slots.push((*p, row, cpu_job));
            if let (true, Some(pool), Some(base)) = (cpu_job, &pool, &host_base) {
                pool.submit(CpuJob {
                    base: base.clone(),
                    a: a.clone(),
                    b: b.clone(),
                    seed,
                    pt: *p,
                    slot,
                });
            }
        }
        drop(gpu_base);
        let finished = pool.as_ref().map(|p| p.take_done()).unwrap_or_default();
        flush(&mut slots, &mut printed, finished)?;
    }
    if let Some(pool) = pool {
        if printed < slots.len() {
            eprint!(
                "\r[{done}/{total}] waiting for the CPU columns ({} rows)        ",
                slots.len() - printed
            );
            let _ = std::io::stderr().flush();
        }
        flush(&mut slots, &mut printed, pool.finish())?;
    }
    debug_assert_eq!(printed, slots.len());
    Ok(())
}

/// The first cells of a `--stages` or `--profile` row: "| group | type | update | m | n |
/// k0 | p |".
fn point_head<T>(p: &Point) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} | {} |",
        p.group,
        std::any::type_name::<T>(),
        p.kind.name(),
        p.m,
        p.n,
        p.k0,
        p.p
    )
}

/// The stages of one point's update + solve ([`Gpu::stage_marks_begin`]): `reps` runs
/// from the snapshot, each stage's milliseconds summed over its marks within a run, the
/// median over runs, stages in the order they first ran.
fn stage_split<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    base: &GpuQr<T>,
    pt: &Point,
    c: &Case<T>,
    reps: usize,
) -> cuqr::Result<Vec<(&'static str, f64)>> {
    let (_, n2) = pt.kind.new_dims(pt.m, pt.n, pt.p);
    let mut x = DevMat::<T>::zeros(gpu, n2, 1)?;
    let mut names: Vec<&'static str> = Vec::new();
    let mut runs: Vec<Vec<f64>> = Vec::new();
    // U from the device, as the device-resident timing takes it (`bench_gpu`)
    let u_dev = match pt.kind {
        Kind::InsertCols => Some(DevMat::from_host(gpu, c.u.as_ref())?),
        _ => None,
    };
    for _ in 0..reps {
        let mut st = base.try_clone()?;
        // The point's options (the BS group's n_b), as the timed runs take them.
        st.set_params(point_params(pt, st.params()));
        gpu.synchronize()?;
        gpu.stage_marks_begin()?;
        let updated = match &u_dev {
            Some(u) => st.insert_cols_device(pt.k0, &u.view()),
            None => apply(&mut st, pt, c),
        };
        let r = updated.and_then(|()| {
            gpu.stage_mark("update rest");
            solve_dev(gpu, &st, &mut x)
        });
        gpu.stage_mark("solve");
        let marks = gpu.stage_marks_end()?;
        r?;
        let mut sums = vec![0.0; names.len()];
        for (name, ms) in marks {
            match names.iter().position(|&x| x == name) {
                Some(i) => sums[i] += ms,
                None => {
                    names.push(name);
                    sums.push(ms);
                }
            }
        }
        runs.push(sums);
    }
    Ok(names
        .iter()
        .enumerate()
        .map(|(i, &name)| {
            let v: Vec<f64> = runs
                .iter()
                .map(|r| r.get(i).copied().unwrap_or(0.0))
                .collect();
            (name, Timing { samples_ms: v }.median_ms())
        })
        .collect())
}

/// Ceilings measured in the same run (architecture.md "Performance method"): device
/// to device copy bandwidth (GB/s, read + write) and the cuBLAS GEMM rate (GFLOP/s).
fn ceilings<T: GpuScalar>(gpu: &Arc<Gpu>, reps: usize) -> cuqr::Result<(f64, f64)> {
    let n = 1usize << 14; // 16384² elements: 1 GiB in f32, 2 GiB in f64
    let a = DevMat::<T>::from_host(gpu, random::<T>(n, n / 8, 1).as_ref())?;
    let mut b = DevMat::<T>::zeros(gpu, n, n / 8)?;
    let t = time_with_setup(gpu, 1, reps, || Ok(()), |()| copy_into(gpu, &a, &mut b))?;
    let bytes = 2.0 * (a.ld() * a.ncols() * std::mem::size_of::<T>()) as f64;
    let bw = bytes / (t.median_ms() * 1e6);
    drop((a, b));
    let k = 8192;
    let x = DevMat::<T>::from_host(gpu, random::<T>(k, k, 2).as_ref())?;
    let mut c = DevMat::<T>::zeros(gpu, k, k)?;
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || Ok(()),
        |()| {
            gpu.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &x.view(),
                &x.view(),
                T::ZERO,
                &mut c.view_mut(),
            )
        },
    )?;
    Ok((bw, 2.0 * (k as f64).powi(3) / (t.median_ms() * 1e6)))
}

/// (generate ms, step-order apply ms, list-order apply ms, rotations, vectors, bytes).
type GivensProfile = (f64, f64, f64, usize, usize, usize, f64);

/// The two-phase Givens stage of one point timed alone: (generate ms, apply ms in
/// wavefront-step order, apply ms in list order, rotations, vectors, bytes of the
/// targets). Targets: a copy of the state's Q (block), random R-like and d blocks of
/// the stage's shapes (the work does not depend on the values).
fn profile_givens<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    base: &GpuQr<T>,
    pt: &Point,
    reps: usize,
) -> cuqr::Result<Option<GivensProfile>> {
    use cuqr::internals::gpu::two_phase_launch::{ApplyTarget, RotList};
    let Some(q0) = base.q_dev() else {
        return Ok(None);
    };
    let m = pt.m;
    let (span, count, nr) = match pt.kind {
        Kind::InsertCols if pt.k0 < pt.n => {
            let h = pt.n - pt.k0;
            (h + pt.p, pt.p * h, h)
        }
        Kind::DeleteRows => (m, pt.p * m - pt.p * (pt.p + 1) / 2, pt.n),
        _ => return Ok(None),
    };
    let mut list = RefCell::new(RotList::<T>::with_capacity(gpu, count)?);
    let t_gen = if pt.kind == Kind::InsertCols {
        let h = pt.n - pt.k0;
        let x0 = DevMat::from_host(gpu, random::<T>(h + pt.p, pt.p, 5).as_ref())?;
        let x = RefCell::new(DevMat::<T>::zeros(gpu, h + pt.p, pt.p)?);
        time_with_setup(
            gpu,
            1,
            reps,
            || copy_into(gpu, &x0, &mut x.borrow_mut()),
            |()| gpu.two_phase_gen_strip(&mut x.borrow_mut().view_mut(), h, &mut list.borrow_mut()),
        )?
    } else {
        let mut z = DevVec::<T>::zeros(gpu, pt.p * m)?;
        time_with_setup(
            gpu,
            1,
            reps,
            || Ok(()),
            |()| {
                gpu.two_phase_gen_block(
                    &q0.block(pt.k0, 0, pt.p, m),
                    &mut z,
                    &mut list.borrow_mut(),
                )
            },
        )?
    };
    let mut q = DevMat::<T>::zeros(gpu, m, m)?;
    copy_into(gpu, q0, &mut q)?;
    let col0 = if pt.kind == Kind::InsertCols {
        pt.k0
    } else {
        0
    };
    let r = DevMat::from_host(gpu, random::<T>(span, nr, 6).as_ref())?;
    let d = DevMat::from_host(gpu, random::<T>(span, 1, 7).as_ref())?;
    let (q, r, d) = (RefCell::new(q), RefCell::new(r), RefCell::new(d));
    // the pipe apply (`window` None) or windows of rotations and GEMM (docs/design.md)
    let apply = |list: &RotList<T>, window: Option<usize>| -> cuqr::Result<()> {
        let (mut q, mut r, mut d) = (q.borrow_mut(), r.borrow_mut(), d.borrow_mut());
        let mut qv = q.block_mut(0, col0, m, span);
        let mut rv = r.view_mut();
        let mut dv = d.view_mut();
        let mut targets = ApplyTarget::q_r_d(&mut qv, &mut rv, &mut dv);
        match window {
            None => gpu.two_phase_apply(list, &mut targets),
            Some(w) => gpu.two_phase_apply_windowed(list, &mut targets, w),
        }
    };
    let t_sched = time_with_setup(gpu, 1, reps, || Ok(()), |()| apply(&list.borrow(), None))?;
    let window = cuqr::internals::gpu::two_phase_launch::apply_window_width(pt.p);
    let t_win = time_with_setup(
        gpu,
        1,
        reps,
        || Ok(()),
        |()| apply(&list.borrow(), Some(window)),
    )?;
    list.get_mut().forget_schedule();
    let t_list = time_with_setup(gpu, 1, reps, || Ok(()), |()| apply(&list.borrow(), None))?;
    let vectors = m + nr + 1;
    let bytes = (m * span + span * nr + span) * std::mem::size_of::<T>();
    Ok(Some((
        t_gen.median_ms(),
        t_sched.median_ms(),
        t_list.median_ms(),
        count,
        vectors,
        bytes,
        t_win.median_ms(),
    )))
}

/// Runs `cuqr bench updates`.
pub fn run(args: &[String]) -> CliResult<()> {
    run_on(args, None)
}

/// The tables printed after the main one: the seed experiments' tables, the stage split
/// (`--stages`, AC-stage), the ceilings (`--profile`, at the end of a run: `None` while
/// it is going) and the Givens stage alone (`--profile`).
fn side_tables(
    rows: &[(&str, Point, Row)],
    stages: &[String],
    prof: &[String],
    reps: usize,
    ceilings: Option<&[(&str, f64, f64)]>,
) -> String {
    let mut s = seed_tables(rows);
    if !stages.is_empty() {
        s.push_str(&format!(
            "\nStages of each update + solve (ms, median over {reps} runs of each stage's sum; \
             events on the main stream, side-stream work counted where it is joined)\n\n"
        ));
        s.push_str("| group | type | update | m | n | k0 | p | sum ms | stages (ms) |\n");
        s.push_str("|---|---|---|---|---|---|---|---|---|\n");
        for l in stages {
            s.push_str(l);
            s.push('\n');
        }
    }
    if let Some(ceil) = ceilings {
        s.push_str(
            "\nCeilings (same run): device copy GB/s (read + write), cuBLAS GEMM GFLOP/s (8192³)\n\n",
        );
        s.push_str("| prec | copy GB/s | GEMM GFLOP/s |\n|---|---|---|\n");
        for (prec, bw, gf) in ceil {
            s.push_str(&format!("| {prec} | {bw:.0} | {gf:.0} |\n"));
        }
    }
    if !prof.is_empty() {
        s.push_str(
            "\nTwo-phase Givens stage alone (ms): generate, apply in step order (the default pipe kernel \
             for Q and d), apply in list order; GB/s = 2·(bytes of Q block + R + d)/apply time \
             (each element read and written once: the minimum traffic); GFLOP/s = 6·rotations·vectors/apply time; \
             windowed = the same three targets by windows of rotations and GEMM \
             (two_phase_apply_windowed, w = max(2p, 512))\n\n",
        );
        s.push_str("| group | type | update | m | n | k0 | p | gen ms | apply ms | list-order apply ms | list/step | apply GB/s | apply GFLOP/s | windowed apply ms | apply/windowed | whole update ms |\n");
        s.push_str("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for l in prof {
            s.push_str(l);
            s.push('\n');
        }
    }
    s
}

/// [`run`], with `grid` (when given) replacing the quick or full grid (tests).
fn run_on(args: &[String], grid: Option<Vec<Point>>) -> CliResult<()> {
    const CMD: &str = "bench updates";
    let o = BenchOpts::parse(
        CMD,
        args,
        &[
            "quick",
            "no-cpu",
            "profile",
            "stages",
            "device-only",
            "wavefront",
        ],
        &[
            "precision",
            "groups",
            "reps",
            "csv",
            "cpu-budget",
            "cpu-threads",
            "svg",
            "resume",
            "md",
        ],
    )?;
    let precs: &[&str] = match o.get("precision").unwrap_or("both") {
        "both" => &["f64", "f32"],
        "f64" => &["f64"],
        "f32" => &["f32"],
        s => return Err(format!("--precision must be f64, f32 or both, not '{s}'").into()),
    };
    let reps = o.usize("reps")?.unwrap_or(5);
    if reps < 5 {
        return Err("--reps must be at least 5 (medians of >= 5 runs)".into());
    }
    let cpu_budget = match o.get("cpu-budget") {
        None => 3.0,
        Some(v) => match v.parse::<f64>() {
            Ok(x) if x >= 0.0 && x.is_finite() => x,
            _ => return Err(format!("--cpu-budget must be a number of seconds, not '{v}'").into()),
        },
    };
    let cpu_threads = o.usize("cpu-threads")?.unwrap_or(1);
    if cpu_threads == 0 {
        return Err("--cpu-threads must be at least 1".into());
    }
    // the points an earlier run measured (read before --csv may create the file)
    let (resumed, done_keys) = match o.get("resume") {
        None => (None, Vec::new()),
        Some(path) => read_resume(path).map_err(|e| format!("{CMD}: --resume {path}: {e}"))?,
    };
    if let Some(path) = o.get("csv") {
        super::check_csv_path(CMD, path)?;
    }
    if let Some(dir) = o.get("svg") {
        super::check_svg_dir(CMD, dir)?;
    }
    let md_path = o.get("md");
    if let Some(path) = md_path {
        super::check_out_path(CMD, "--md", path)?;
    }
    let quick = o.flag("quick");
    let mut points = match grid {
        Some(g) => g,
        None if quick => quick_grid(),
        None => full_grid(),
    };
    if let (false, Some(gs)) = (quick, o.get("groups")) {
        let want: Vec<&str> = gs.split(',').map(str::trim).collect();
        for w in &want {
            if !GROUPS.contains(w) {
                return Err(format!(
                    "--groups: unknown group '{w}' (groups: {})",
                    GROUPS.join(", ")
                )
                .into());
            }
        }
        points.retain(|p| want.contains(&p.group));
    }
    let gpu = match cuqr::Gpu::new(0) {
        Ok(g) => Some(Arc::new(g)),
        Err(e) if quick => {
            println!(
                "no GPU ({e}): CPU columns only (serial CPU update + solve, faer refactorisation)"
            );
            None
        }
        Err(e) => return Err(format!("{CMD}: needs a GPU without --quick: {e}").into()),
    };
    // the report: printed as it goes, and with --md rewritten to FILE after every row
    let mut report = String::new();
    if let Some(g) = &gpu {
        report.push_str(&format!("device: {}\n", g.describe()?));
    }
    report.push_str(&format!("command: cuqr bench updates {}\n", args.join(" ")));
    report.push_str(&format!(
        "protocol: device-resident; GPU medians of {reps} CUDA-event runs after 1 warm-up; \
         update = restore snapshot (untimed), update + TRSM solve (timed), column insertion's U \
         on the device (uploaded untimed: no transfers); TUS/TUT {}; \
         CPU columns on {cpu_threads} worker thread(s) beside the GPU runs, each point serial\n\n",
        if o.flag("device-only") || gpu.is_none() {
            "off"
        } else {
            "from page-locked host memory where the seeds give them"
        }
    ));
    report.push_str(&format!("{TABLE_HEAD}\n"));
    print!("{report}");
    let mut csv = match (&resumed, o.get("csv") == o.get("resume")) {
        (Some(text), true) => text.clone(),
        _ => format!("{CSV_HEAD}\n"),
    };
    let ctx = Ctx {
        gpu: gpu.as_ref(),
        reps,
        cpu: !o.flag("no-cpu"),
        cpu_budget,
        cpu_threads,
        transfers: !o.flag("device-only"),
        wavefront: quick || o.flag("wavefront"),
        profile: o.flag("profile"),
        stages: o.flag("stages"),
    };
    let prof = RefCell::new(Vec::new());
    let stage_rows = RefCell::new(Vec::new());
    let mut rows: Vec<(&str, Point, Row)> = Vec::new();
    let todo = |prec: &str| -> Vec<Point> {
        points
            .iter()
            .filter(|p| !done_keys.contains(&csv_key(prec, p)))
            .copied()
            .collect()
    };
    let total: usize = precs.iter().map(|prec| todo(prec).len()).sum();
    if !done_keys.is_empty() {
        println!(
            "resume: {} of the points already measured, {total} to go",
            points.len() * precs.len() - total
        );
    }
    let mut done = 0;
    for &prec in precs {
        let csv_path = o.get("csv");
        let mut out = |p: &Point, r: &Row| {
            eprint!("\r");
            let line = table_row(prec, p, r);
            println!("{line}");
            report.push_str(&line);
            report.push('\n');
            csv.push_str(&csv_row(prec, p, r));
            csv.push('\n');
            rows.push((prec, *p, r.clone()));
            // the CSV and the report so far, so that an interrupted sweep keeps them
            if let Some(path) = csv_path {
                let _ = std::fs::write(path, &csv);
            }
            if let Some(path) = md_path {
                let side = side_tables(&rows, &stage_rows.borrow(), &prof.borrow(), reps, None);
                let _ = std::fs::write(path, format!("{report}{side}"));
            }
        };
        let points = todo(prec);
        if prec == "f64" {
            sweep::<f64>(
                &ctx,
                &points,
                &mut done,
                total,
                &mut out,
                &prof,
                &stage_rows,
            )?;
        } else {
            sweep::<f32>(
                &ctx,
                &points,
                &mut done,
                total,
                &mut out,
                &prof,
                &stage_rows,
            )?;
        }
    }
    eprintln!();
    let mut ceil = Vec::new();
    if let (true, Some(g)) = (ctx.profile, &gpu) {
        for &prec in precs {
            let (bw, gf) = if prec == "f64" {
                ceilings::<f64>(g, reps)?
            } else {
                ceilings::<f32>(g, reps)?
            };
            ceil.push((prec, bw, gf));
        }
    }
    let side = side_tables(
        &rows,
        &stage_rows.borrow(),
        &prof.borrow(),
        reps,
        (!ceil.is_empty()).then_some(&ceil[..]),
    );
    print!("{side}");
    if let Some(path) = md_path {
        std::fs::write(path, format!("{report}{side}"))
            .map_err(|e| format!("{CMD}: writing {path}: {e}"))?;
    }
    if let Some(path) = o.get("csv") {
        std::fs::write(path, csv).map_err(|e| format!("{CMD}: writing {path}: {e}"))?;
        println!("\nCSV written to {path}");
    }
    if let Some(dir) = o.get("svg") {
        std::fs::create_dir_all(dir).map_err(|e| format!("{CMD}: creating {dir}: {e}"))?;
        let mut names = Vec::new();
        for (name, chart) in speedup_charts(&rows, gpu.is_some()) {
            let path = std::path::Path::new(dir).join(&name);
            std::fs::write(&path, plot::line_chart(&chart))
                .map_err(|e| format!("{CMD}: writing {}: {e}", path.display()))?;
            names.push(name);
        }
        println!("\nSVG plots written to {dir}: {}", names.join(", "));
    }
    Ok(())
}

/// The plots of `--svg` (issue 7: speed-up against k0, p, m and n): one chart per
/// (group, precision), file name `<group>_<prec>.svg`. x is the field of
/// (k0, p, m, n) that takes the most values in the group (the group name's hint
/// — `-k`, `-p`, `-m`, `-n` — breaks ties and picks it for a single point);
/// other varying fields give one series per value, unless they vary with x alone.
/// With a GPU: y = (a)/update and (c)/update, dashed lines at the bar (issue 7's
/// required speed-up over (a), and 50× over (c) where it applies). Without one:
/// y = (d) faer / (c) serial CPU update, dashed line at 1×.
fn speedup_charts(rows: &[(&str, Point, Row)], gpu: bool) -> Vec<(String, plot::Chart)> {
    type Field = (&'static str, fn(&Point) -> usize);
    const FIELDS: [Field; 5] = [
        ("k0", |p| p.k0),
        ("p", |p| p.p),
        ("m", |p| p.m),
        ("n", |p| p.n),
        ("n_b", |p| p.nb.unwrap_or(0)),
    ];
    type Measure = (&'static str, fn(&Row) -> Option<f64>);
    let measures: &[Measure] = if gpu {
        &[
            ("over (a) refactorise", |r| ratio(r.refac_ms, r.upd_ms)),
            ("over (c) CPU update", |r| ratio(r.cpu_ms, r.upd_ms)),
        ]
    } else {
        &[("(d) faer / (c) CPU update", |r| ratio(r.faer_ms, r.cpu_ms))]
    };
    // one chart per (group, precision, update): BS and ACC hold several updates
    let mut keys: Vec<(&str, &str, Kind)> = Vec::new();
    for (prec, p, _) in rows {
        if !keys.contains(&(p.group, *prec, p.kind)) {
            keys.push((p.group, *prec, p.kind));
        }
    }
    let mut charts = Vec::new();
    for &(group, prec, kind) in &keys {
        let sel: Vec<&(&str, Point, Row)> = rows
            .iter()
            .filter(|(pr, p, _)| p.group == group && *pr == prec && p.kind == kind)
            .collect();
        let several_kinds = keys.iter().any(|k| k.0 == group && k.2 != kind);
        let distinct = |f: fn(&Point) -> usize| {
            let mut v: Vec<usize> = sel.iter().map(|(_, p, _)| f(p)).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let hint = match group.split_once('-').map(|(_, s)| s) {
            Some(s) if s.starts_with('k') => 0,
            Some("p") => 1,
            Some("m") => 2,
            Some("n") => 3,
            _ => 1,
        };
        let counts: Vec<usize> = FIELDS.iter().map(|(_, f)| distinct(*f).len()).collect();
        let xi = (0..FIELDS.len())
            .max_by_key(|&i| (counts[i], i == hint, FIELDS.len() - i))
            .expect("five fields");
        let (xname, xf) = FIELDS[xi];
        let others: Vec<usize> = (0..FIELDS.len())
            .filter(|&i| i != xi && counts[i] > 1)
            .collect();
        let key_of =
            |p: &Point| -> Vec<usize> { others.iter().map(|&i| (FIELDS[i].1)(p)).collect() };
        // the other fields vary with x alone: one series
        let follows_x = distinct(xf).iter().all(|&x| {
            let mut ks: Vec<Vec<usize>> = sel
                .iter()
                .filter(|(_, p, _)| xf(p) == x)
                .map(|(_, p, _)| key_of(p))
                .collect();
            ks.dedup();
            ks.len() == 1
        });
        let mut series_keys: Vec<Vec<usize>> = Vec::new();
        for (_, p, _) in &sel {
            let k = if follows_x { vec![] } else { key_of(p) };
            if !series_keys.contains(&k) {
                series_keys.push(k);
            }
        }
        let mut series = Vec::new();
        for (mlabel, mf) in measures {
            for k in &series_keys {
                let mut pts: Vec<(f64, Option<f64>)> = sel
                    .iter()
                    .filter(|(_, p, _)| follows_x || key_of(p) == *k)
                    .map(|(_, p, r)| (xf(p) as f64, mf(r)))
                    .collect();
                if pts.iter().all(|(_, y)| y.is_none()) {
                    continue;
                }
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let what: Vec<String> = others
                    .iter()
                    .zip(k)
                    .map(|(&i, v)| format!("{} = {v}", FIELDS[i].0))
                    .collect();
                let label = if what.is_empty() {
                    mlabel.to_string()
                } else {
                    format!("{mlabel}, {}", what.join(", "))
                };
                series.push(plot::Series { label, points: pts });
            }
        }
        let mut hlines: Vec<plot::HLine> = Vec::new();
        let mut add_line = |y: f64, label: String| match hlines.iter_mut().find(|h| h.y == y) {
            Some(h) if h.label.split("; ").any(|l| l == label) => {}
            Some(h) => {
                h.label.push_str("; ");
                h.label.push_str(&label);
            }
            None => hlines.push(plot::HLine { y, label }),
        };
        if gpu {
            for (_, p, _) in &sel {
                let need = required_speedup(p);
                let why = bar_reason(p);
                add_line(need, format!("bar {need}× over (a), {why}"));
            }
            if sel
                .iter()
                .any(|(_, p, r)| cpu_bar_applies(p) && ratio(r.cpu_ms, r.upd_ms).is_some())
            {
                add_line(50.0, "bar 50× over (c)".to_string());
            }
        } else {
            add_line(1.0, "1× (equal times)".to_string());
        }
        let fixed: Vec<String> = (0..FIELDS.len())
            .filter(|&i| counts[i] == 1)
            .map(|i| format!("{} = {}", FIELDS[i].0, (FIELDS[i].1)(&sel[0].1)))
            .collect();
        let mut x_label = xname.to_string();
        if follows_x && !others.is_empty() {
            let names: Vec<&str> = others.iter().map(|&i| FIELDS[i].0).collect();
            x_label.push_str(&format!(" ({} vary with {xname})", names.join(", ")));
        }
        if !fixed.is_empty() {
            x_label.push_str(&format!("   [{}]", fixed.join(", ")));
        }
        let kind = kind.name();
        let title = if gpu {
            format!("{group} {prec} {kind}: speed-up of the update (+ solve)")
        } else {
            format!("{group} {prec} {kind}: CPU only (no GPU), (d) faer / (c) CPU update")
        };
        let file = if several_kinds {
            format!("{group}_{kind}_{prec}.svg")
        } else {
            format!("{group}_{prec}.svg")
        };
        charts.push((
            file,
            plot::Chart {
                title,
                x_label,
                y_label: "speed-up (×)".to_string(),
                log_y: true,
                series,
                hlines,
            },
        ));
    }
    charts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The strategy columns: present exactly where a Givens stage exists, and the
    /// table and CSV rows have as many cells as their headers.
    #[test]
    fn wavefront_columns_line_up() {
        let givens: Vec<(Kind, usize)> = quick_grid()
            .iter()
            .filter(|p| has_givens_stage(p))
            .map(|p| (p.kind, p.k0))
            .collect();
        assert_eq!(
            givens,
            [
                (Kind::InsertCols, 0),
                (Kind::InsertCols, 250),
                (Kind::DeleteRows, 0),
                (Kind::RankOne, 0)
            ]
        );
        let pt = quick_grid()[0];
        let r = Row {
            upd_ms: Some(1.0),
            refac_ms: Some(8.0),
            wf_ms: Some(2.0),
            wf_launches: Some(17),
            wf_ex: Some(1e-15),
            ..Row::default()
        };
        let cells = |line: &str| line.trim_matches('|').split(" | ").count();
        let head = TABLE_HEAD.lines().next().unwrap();
        let row = table_row("f64", &pt, &r);
        assert_eq!(cells(&row), cells(head));
        let col = head
            .trim_matches('|')
            .split(" | ")
            .position(|c| c.trim() == "a/wf");
        let cell = row
            .trim_matches('|')
            .split(" | ")
            .nth(col.unwrap())
            .unwrap();
        assert_eq!(cell.trim(), "4.00");
        let csv = csv_row("f64", &pt, &r);
        assert_eq!(csv.split(',').count(), CSV_HEAD.split(',').count());
        let i = CSV_HEAD
            .split(',')
            .position(|c| c == "refac_over_wavefront");
        assert_eq!(csv.split(',').nth(i.unwrap()), Some("4"));
    }

    #[test]
    fn cases_build_the_updated_matrix() {
        let a = random::<f64>(30, 10, 1);
        let b = random::<f64>(30, 1, 2);
        let ic = Point::new("x", Kind::InsertCols, 30, 10, 4, 3);
        let c = make_case(&ic, &a, &b, 3);
        assert_eq!((c.a_new.nrows(), c.a_new.ncols()), (30, 13));
        assert_eq!(c.a_new[(5, 3)], a[(5, 3)]);
        assert_eq!(c.a_new[(5, 4)], c.u[(5, 0)]);
        assert_eq!(c.a_new[(5, 7)], a[(5, 4)]);
        let dr = Point::new("x", Kind::DeleteRows, 30, 10, 2, 5);
        let c = make_case(&dr, &a, &b, 3);
        assert_eq!(c.a_new[(1, 0)], a[(1, 0)]);
        assert_eq!(c.a_new[(2, 0)], a[(7, 0)]);
        assert_eq!(c.b_new[(2, 0)], b[(7, 0)]);
        let ir = Point::new("x", Kind::InsertRows, 30, 10, 0, 4);
        let c = make_case(&ir, &a, &b, 3);
        assert_eq!(c.a_new[(3, 2)], c.u[(3, 2)]);
        assert_eq!(c.a_new[(4, 2)], a[(0, 2)]);
        assert_eq!(c.b_new[(0, 0)], c.e[(0, 0)]);
        let dc = Point::new("x", Kind::DeleteCols, 30, 10, 8, 2);
        let c = make_case(&dc, &a, &b, 3);
        assert_eq!(c.a_new.ncols(), 8);
        assert_eq!(c.a_new[(0, 7)], a[(0, 7)]);
        assert!(a.as_slice().iter().all(|v| v.abs() >= 0.1));
    }

    /// `--md FILE` holds the whole report: the header, one table row a point and
    /// precision, and the side tables; a path that cannot be written fails before the run.
    #[test]
    fn md_report_holds_the_tables() {
        use Kind::*;
        let grid = vec![
            Point::new("AR", InsertRows, 130, 50, 0, 3).cpu(),
            Point::new("RC", DeleteCols, 130, 50, 10, 4).cpu(),
        ];
        let path = std::env::temp_dir().join(format!("cuqr-report-{}.md", std::process::id()));
        let f = path.to_str().unwrap().to_string();
        let args = |md: &str| -> Vec<String> {
            [
                "--quick",
                "--precision",
                "both",
                "--cpu-budget",
                "0",
                "--md",
                md,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect()
        };
        let _ = std::fs::remove_file(&path);
        run_on(&args(&f), Some(grid.clone())).unwrap();
        let md = std::fs::read_to_string(&path).unwrap();
        assert!(md.contains("command: cuqr bench updates --quick"), "{md}");
        assert!(md.contains(TABLE_HEAD), "{md}");
        let rows = md
            .lines()
            .filter(|l| l.starts_with("| AR |") || l.starts_with("| RC |"))
            .count();
        assert_eq!(rows, 4, "{md}");
        let _ = std::fs::remove_file(&path);
        let bad = std::env::temp_dir().join("cuqr-no-such-dir/x/report.md");
        let e = run_on(&args(bad.to_str().unwrap()), Some(grid)).unwrap_err();
        assert!(e.to_string().contains("--md"), "{e}");
    }

    /// `--resume`: a run cut short is continued. The points already in the CSV are
    /// skipped, the old rows are kept as they were, and the missing rows are added.
    /// A file with another header is refused.
    #[test]
    fn resume_skips_the_measured_points() {
        use Kind::*;
        let grid = || {
            vec![
                Point::new("AR", InsertRows, 130, 50, 0, 3).cpu(),
                Point::new("RC", DeleteCols, 130, 50, 10, 4).cpu(),
                Point::new("R1", RankOne, 97, 41, 0, 1).cpu(),
            ]
        };
        let path = std::env::temp_dir().join(format!("cuqr-resume-{}.csv", std::process::id()));
        let f = path.to_str().unwrap().to_string();
        let args = |extra: &[&str]| -> Vec<String> {
            [
                "--quick",
                "--precision",
                "both",
                "--cpu-budget",
                "0",
                "--csv",
                &f,
            ]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
        };
        let _ = std::fs::remove_file(&path);
        run_on(&args(&[]), Some(grid())).unwrap();
        let full = std::fs::read_to_string(&path).unwrap();
        assert_eq!(full.lines().count(), 1 + 6);
        // cut the run short: the header and the first four rows remain
        let cut: String = full.lines().take(5).map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, &cut).unwrap();
        run_on(&args(&["--resume", &f]), Some(grid())).unwrap();
        let again = std::fs::read_to_string(&path).unwrap();
        assert!(again.starts_with(&cut), "the old rows are kept");
        assert_eq!(again.lines().count(), 1 + 6);
        let key = |l: &str| l.split(',').take(8).collect::<Vec<_>>().join(",");
        let mut keys: Vec<String> = again.lines().skip(1).map(key).collect();
        let mut want: Vec<String> = full.lines().skip(1).map(key).collect();
        keys.sort();
        want.sort();
        assert_eq!(keys, want, "each point once");
        // nothing left to do: the file stays as it is
        run_on(&args(&["--resume", &f]), Some(grid())).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), again);
        // another header is refused before anything runs
        std::fs::write(&path, "group,prec\nx,f64\n").unwrap();
        let e = run_on(&args(&["--resume", &f]), Some(grid())).unwrap_err();
        assert!(e.to_string().contains("header differs"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }

    /// The CPU pool on several threads fills exactly the CPU points' columns, and a
    /// failing CPU update is reported, not swallowed.
    #[test]
    fn cpu_pool_fills_the_cpu_points() {
        use Kind::*;
        let (m, n) = (90, 30);
        let pts = [
            Point::new("t", InsertRows, m, n, 0, 4).cpu(),
            Point::new("t", DeleteCols, m, n, 3, 2),
            Point::new("t", DeleteCols, m, n, 10, 5).cpu(),
            Point::new("t", InsertRows, m, n, 7, 3).cpu(),
            Point::new("t", DeleteCols, m, n, 29, 5).cpu(),
        ];
        let a = Arc::new(random::<f64>(m, n, 1));
        let b = Arc::new(random::<f64>(m, 1, 2));
        let base = Arc::new(
            CpuQr::factorize(
                a.as_ref().as_ref(),
                b.as_ref().as_ref(),
                QPolicy::None,
                FactorParams::default(),
            )
            .unwrap(),
        );
        for threads in [1, 3, 8] {
            let pool = CpuPool::<f64>::new(threads, 0.0);
            for (slot, p) in pts.iter().enumerate().filter(|(_, p)| p.cpu) {
                pool.submit(CpuJob {
                    base: base.clone(),
                    a: a.clone(),
                    b: b.clone(),
                    seed: 5,
                    pt: *p,
                    slot,
                });
            }
            let mut got = pool.finish();
            got.sort_by_key(|x| x.0);
            let slots: Vec<usize> = got.iter().map(|x| x.0).collect();
            assert_eq!(slots, [0, 2, 3, 4], "{threads} threads");
            for (slot, timed) in got {
                let mut r = Row::default();
                let res = fill_cpu(&mut r, timed);
                if slot == 4 {
                    // k0 + p > n: the update's validation error comes back
                    assert!(res.is_err());
                    assert!(r.cpu_ms.is_none());
                } else {
                    res.unwrap();
                    assert!(r.cpu_ms.is_some_and(|t| t.is_finite() && t >= 0.0));
                    assert!(r.faer_ms.is_some() && r.cpu_runs >= 1 && r.faer_runs >= 1);
                }
            }
        }
    }

    /// The seed-experiment tables: one row per point of RR-comp, ACC and BS, each
    /// with as many cells as its header, the e_Q/e_A target judged.
    #[test]
    fn seed_tables_line_up() {
        let rows: Vec<(&str, Point, Row)> = full_grid()
            .into_iter()
            .filter(|p| matches!(p.group, "RR-comp" | "ACC" | "BS"))
            .map(|p| {
                let r = Row {
                    upd_ms: Some(1.0),
                    refac_ms: Some(3.0),
                    wf_ms: Some(2.0),
                    streams_ms: Some(2.5),
                    tut_ms: Some(4.0),
                    ex: Some(1e-15),
                    acc: Some(Accuracy {
                        e_q: p.keeps_q().then_some(1e-14),
                        e_a: p.keeps_q().then_some(1e-15),
                        l_norm: 0.0,
                    }),
                    ..Row::default()
                };
                ("f64", p, r)
            })
            .collect();
        let text = seed_tables(&rows);
        let cells = |line: &str| line.trim_matches('|').split(" | ").count();
        let mut head = 0;
        let mut body = 0;
        for line in text.lines().filter(|l| l.starts_with('|')) {
            if line.starts_with("| prec") {
                head = cells(line);
            } else if !line.starts_with("|---") {
                assert_eq!(cells(line), head, "{line}");
                body += 1;
            }
        }
        assert_eq!(body, 4 + 20 + 18);
        // 10·m·u = 10·4000·2⁻⁵³ ≈ 4.4e-12: the given e_Q, e_A pass
        assert_eq!(text.matches("| yes |").count(), 10);
        assert!(text.contains("| 2.0 |"), "composite/two-phase");
    }

    /// `--svg` charts from GPU-style rows of the full grid: x is the field that
    /// varies, one series per value of the other varying field, the bars dashed.
    #[test]
    fn speedup_charts_pick_the_varying_field() {
        let mut rng = Rng::new(0x51a7);
        let rows: Vec<(&str, Point, Row)> = full_grid()
            .into_iter()
            .map(|p| {
                let upd = 0.5 + rng.uniform();
                let r = Row {
                    upd_ms: Some(upd),
                    refac_ms: Some(upd * (0.2 + 50.0 * rng.uniform())),
                    cpu_ms: p.cpu.then(|| upd * (1.0 + 100.0 * rng.uniform())),
                    ..Row::default()
                };
                ("f64", p, r)
            })
            .collect();
        let charts = speedup_charts(&rows, true);
        // one chart per group, per update in BS and ACC (which hold several)
        let mut want: Vec<String> = Vec::new();
        for (_, p, _) in &rows {
            let name = match p.group {
                "BS" | "ACC" => format!("{}_{}_f64.svg", p.group, p.kind.name()),
                g => format!("{g}_f64.svg"),
            };
            if !want.contains(&name) {
                want.push(name);
            }
        }
        let names: Vec<String> = charts.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(names, want);
        let get = |n: &str| &charts.iter().find(|(f, _)| f == n).unwrap().1;
        // AC-k3: k0 on x, one series per m, each with the CPU ratio too
        let ac = get("AC-k3_f64.svg");
        assert!(ac.x_label.starts_with("k0"), "{}", ac.x_label);
        let labels: Vec<&str> = ac.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "over (a) refactorise, m = 4000",
                "over (a) refactorise, m = 8000",
                "over (a) refactorise, m = 12000",
                "over (c) CPU update, m = 4000",
                "over (c) CPU update, m = 8000",
                "over (c) CPU update, m = 12000"
            ]
        );
        assert_eq!(ac.series[0].points.len(), 7);
        assert!(ac.hlines.iter().any(|h| h.y == 10.0));
        assert!(ac
            .hlines
            .iter()
            .any(|h| h.y == 50.0 && h.label.contains("(c)")));
        // BS: n_b on x; ACC: p on x
        assert!(get("BS_insert_rows_f64.svg").x_label.starts_with("n_b"));
        assert_eq!(get("BS_insert_rows_f64.svg").series[0].points.len(), 6);
        assert!(get("ACC_delete_rows_f64.svg").x_label.starts_with("p"));
        // RC-k: k0 on x, one series per p, bars 10× and 50× (k0 ≥ n/2)
        let rc = get("RC-k_f64.svg");
        assert!(rc.x_label.starts_with("k0"));
        assert_eq!(rc.series.len(), 3);
        assert!(rc
            .hlines
            .iter()
            .any(|h| h.y == 50.0 && h.label.ends_with("k0 ≥ n/2")));
        assert!(rc.hlines.iter().any(|h| h.y == 1.0));
        // AR-p: p on x, series per n; R1: m and n vary together, one series
        assert!(get("AR-p_f64.svg").x_label.starts_with("p "));
        let r1 = get("R1_f64.svg");
        assert!(r1.x_label.contains("vary with"), "{}", r1.x_label);
        assert_eq!(r1.series[0].points.len(), 2);
        // every measured ratio is plotted
        let total: usize = charts
            .iter()
            .flat_map(|(_, c)| c.series.iter())
            .flat_map(|s| s.points.iter())
            .filter(|(_, y)| y.is_some())
            .count();
        let cpu = rows.iter().filter(|(_, p, _)| p.cpu).count();
        assert_eq!(total, rows.len() + cpu);
        for (_, c) in &charts {
            plot::check_xml(&plot::line_chart(c)).unwrap();
        }
    }

    /// End to end: the quick path (CPU-only without a GPU) on a reduced grid with
    /// `--svg` writes one parseable SVG per (group, precision).
    #[test]
    fn svg_option_writes_valid_plots() {
        use Kind::*;
        let grid = vec![
            Point::new("AC-k", InsertCols, 130, 50, 0, 5).cpu(),
            Point::new("AC-k", InsertCols, 130, 50, 25, 5).cpu(),
            Point::new("AC-k", InsertCols, 130, 50, 50, 5).cpu(),
            Point::new("AR-p", InsertRows, 130, 50, 0, 3).cpu(),
            Point::new("AR-p", InsertRows, 130, 50, 0, 7).cpu(),
            Point::new("AR-p", InsertRows, 130, 37, 0, 7).cpu(),
            Point::new("R1", RankOne, 97, 41, 0, 1).cpu(),
        ];
        let dir = std::env::temp_dir().join(format!("cuqr-svg-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let args: Vec<String> = [
            "--quick",
            "--precision",
            "both",
            "--cpu-budget",
            "0",
            "--svg",
            dir.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        run_on(&args, Some(grid)).unwrap();
        for g in ["AC-k", "AR-p", "R1"] {
            for prec in ["f64", "f32"] {
                let svg = std::fs::read_to_string(dir.join(format!("{g}_{prec}.svg"))).unwrap();
                let names = plot::check_xml(&svg).unwrap();
                let want = match g {
                    "AC-k" => 3,
                    "AR-p" => 3,
                    _ => 1,
                };
                let circles = names.iter().filter(|n| *n == "circle").count();
                assert!(circles >= want, "{g} {prec}: {circles} points");
                assert!(svg.contains("stroke-dasharray"));
            }
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 6);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The CPU column of the quick grid against an independent refactorisation:
    /// the update's solution matches the fresh factorisation's (spec §3.7:
    /// 10·m·u·κ-scaled; random ±[0.1,1) data is well conditioned).
    #[test]
    fn cpu_update_solution_matches_refactorisation() {
        for q in quick_grid() {
            let (m, n, pp) = (130, 50, q.p.min(10));
            let lim = if q.kind == Kind::DeleteCols {
                n - pp
            } else {
                n
            };
            let p = Point {
                m,
                n,
                k0: (q.k0 * n / q.n).min(lim),
                p: pp,
                ..q
            };
            let a = random::<f64>(p.m, p.n, 11);
            let b = random::<f64>(p.m, 1, 12);
            let c = make_case(&p, &a, &b, 13);
            let mut st = CpuQr::factorize(
                a.as_ref(),
                b.as_ref(),
                p.kind.policy(),
                FactorParams::default(),
            )
            .unwrap();
            apply(&mut st, &p, &c).unwrap();
            let x = st.solve().unwrap().x;
            let fresh = CpuQr::factorize(
                c.a_new.as_ref(),
                c.b_new.as_ref(),
                QPolicy::None,
                FactorParams::default(),
            )
            .unwrap()
            .solve()
            .unwrap()
            .x;
            let e = rel_diff(x.as_slice(), fresh.as_slice());
            assert!(
                e <= 10.0 * p.m as f64 * <f64 as Scalar>::UNIT_ROUNDOFF,
                "{:?}: e_x = {e}",
                p.kind
            );
        }
    }
}
