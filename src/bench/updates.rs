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
//! ([`cuqr::gpu::timing`]); data are random ±[0.1, 1) (never zero).

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use cuqr::gpu::timing::{time_with_setup, Timing};
use cuqr::gpu::{DevMat, DevVec, Diag, GpuQr, GpuScalar, Op, Side, Uplo};
use cuqr::{CpuQr, FactorParams, Givens, Gpu, Mat, QPolicy, QrUpdate, RowRemoval, Scalar};

use super::{plot, BenchOpts};
use crate::cli::CliResult;
use crate::rng::Rng;

/// `cuqr bench updates --help`.
pub const HELP: &str = "\
cuqr bench updates: QR updates (cuqr GPU) vs cuSOLVER refactorisation and the
serial CPU update, on the seeds' grids (spec §3.9), device-resident protocol

Usage: cuqr bench updates [--quick] [--precision f64|f32|both] [--groups G,G,...]
                          [--reps R] [--csv FILE] [--no-cpu] [--cpu-budget S]
                          [--profile] [--stages] [--svg DIR]

  --quick        a small grid (m = 1200, n = 500) that runs in well under a
                 minute; without a GPU it runs the CPU columns only and says so
  --precision    f64, f32 or both (default both)
  --groups       subset of AC-k3, RC-k, RC-m, AR-p, AR-m, RR-seq, RR-n, RR-m, R1
                 (default: all; ignored with --quick)
  --reps         timed GPU repetitions, at least 5 (default 5, after 1 warm-up)
  --csv FILE     also write every row as CSV
  --no-cpu       skip the serial CPU update column
  --cpu-budget   seconds of CPU repetitions per point (default 3; at least one run)
  --profile      also time the two-phase Givens stage of each insert_cols (k0 < n)
                 and delete_rows point alone (generate, apply in step order with the
                 default pipe kernel, apply in list order), and the ceilings
                 measured in the same run (device copy bandwidth, cuBLAS GEMM rate)
  --stages       also time each point's stages (uploads, copies, Givens generate
                 and apply, Householder panels and trailing updates, rank check,
                 the solve) by events on the main stream, median of --reps runs
  --svg DIR      also write one SVG plot per (group, precision), DIR/<group>_<prec>.svg:
                 speed-up over (a) and over the CPU update (c) against the parameter
                 that varies in the group (k0, p, m or n), the bar dashed; without a
                 GPU, the ratio (d) faer / (c) CPU update instead (log y axis)

Columns: update = update + TRSM solve (median ms); launches = kernel/library
launches and copies issued by the update alone; (a) = geqrf + ormqr + trsm
(+ orgqr when Q is kept), (b) = geqrf + ormqr + trsm; a/upd and b/upd are
speed-ups (> 1: the update wins); seed = the seeds' CULA/TUS (or seq/TUT)
ratio at the same point (spec §3.3-§3.6); wavefront = the same update (+ solve)
with the seeds' Wavefront strategy (Givens::Wavefront, and for delete_rows the
seeds' composite [Q; R^T; d^T] layout, RowRemoval::Composite) where the update
has a Givens stage (delete_rows, insert_cols with k0 < n, rank_one; default
columns are the two-phase strategy), a/wf its speed-up over (a); cpu = serial
CPU update + solve
(median over the runs that fit the budget); (d) faer = faer's sequential QR of
the updated matrix + least-squares solve, solution only (no Q), at the points
with a cpu column, same budget rule; bar = issue 7's required speed-up
over (a) at this point and whether it holds.
";

/// The five updates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    InsertCols,
    DeleteCols,
    InsertRows,
    DeleteRows,
    RankOne,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::InsertCols => "insert_cols",
            Kind::DeleteCols => "delete_cols",
            Kind::InsertRows => "insert_rows",
            Kind::DeleteRows => "delete_rows",
            Kind::RankOne => "rank_one",
        }
    }

    /// The seeds' protocol (spec §3.1 TUS): Q is omitted for row addition and
    /// column removal.
    fn policy(self) -> QPolicy {
        match self {
            Kind::DeleteCols | Kind::InsertRows => QPolicy::None,
            _ => QPolicy::Full,
        }
    }

    /// (m′, n′) after the update.
    fn new_dims(self, m: usize, n: usize, p: usize) -> (usize, usize) {
        match self {
            Kind::InsertCols => (m, n + p),
            Kind::DeleteCols => (m, n - p),
            Kind::InsertRows => (m + p, n),
            Kind::DeleteRows => (m - p, n),
            Kind::RankOne => (m, n),
        }
    }
}

/// A point of a grid.
#[derive(Clone, Copy, Debug)]
struct Point {
    group: &'static str,
    kind: Kind,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    /// Run the serial CPU update here.
    cpu: bool,
    /// The seeds' CULA/TUS speed-up at this point (spec §3.3–§3.6), if given.
    seed_cula: Option<f64>,
    /// The seeds' seq/TUT speed-up at this point, if given.
    seed_seq: Option<f64>,
}

#[allow(clippy::too_many_arguments)]
fn pt(
    group: &'static str,
    kind: Kind,
    m: usize,
    n: usize,
    k0: usize,
    p: usize,
    cpu: bool,
    seed_cula: Option<(f64, f64)>,
    seed_seq: Option<(f64, f64)>,
) -> Point {
    Point {
        group,
        kind,
        m,
        n,
        k0,
        p,
        cpu,
        seed_cula: seed_cula.map(|(c, t)| c / t),
        seed_seq: seed_seq.map(|(s, t)| s / t),
    }
}

/// The quick grid: every update at m = 1200, n = 500.
fn quick_grid() -> Vec<Point> {
    use Kind::*;
    let (m, n) = (1200, 500);
    vec![
        pt("AC", InsertCols, m, n, 0, 20, true, None, None),
        pt("AC", InsertCols, m, n, 250, 20, true, None, None),
        pt("AC", InsertCols, m, n, 500, 20, true, None, None),
        pt("RC", DeleteCols, m, n, 0, 20, true, None, None),
        pt("RC", DeleteCols, m, n, 480, 20, true, None, None),
        pt("AR", InsertRows, m, n, 0, 20, true, None, None),
        pt("AR", InsertRows, m, n, 0, 100, true, None, None),
        pt("RR", DeleteRows, m, n, 0, 20, true, None, None),
        pt("R1", RankOne, m, n, 0, 1, true, None, None),
    ]
}

/// The full grid: the seeds' points of spec §3.9 that this harness covers, with
/// the seeds' figures from spec §3.3–§3.6.
fn full_grid() -> Vec<Point> {
    use Kind::*;
    let mut g = Vec::new();
    // AC-k3, m = 8000 (Table A2: CULA 1.000 s)
    for (k0, tus) in [
        (0, 3.867),
        (1000, 2.636),
        (2000, 1.499),
        (2500, 1.021),
        (3000, 0.613),
    ] {
        g.push(pt(
            "AC-k3",
            InsertCols,
            8000,
            3000,
            k0,
            200,
            false,
            Some((1.000, tus)),
            None,
        ));
    }
    // AC-k3, m = 4000 against the CPU (Table A1 seq/TUT; A2 CULA 0.380 s)
    for (k0, seq, tut, tus) in [(2500, 16.647, 0.439, 0.404), (3000, 5.846, 0.172, 0.155)] {
        g.push(pt(
            "AC-k3",
            InsertCols,
            4000,
            3000,
            k0,
            200,
            true,
            Some((0.380, tus)),
            Some((seq, tut)),
        ));
    }
    // RC-k, m = 6000, n = 3000 (Tables B1–B3)
    for (p, cula, pts) in [
        (100, 0.662, [(0, 0.601), (1500, 0.312), (2900, 0.050)]),
        (500, 0.565, [(0, 0.609), (1500, 0.239), (2500, 0.042)]),
    ] {
        for (k0, tus) in pts {
            g.push(pt(
                "RC-k",
                DeleteCols,
                6000,
                3000,
                k0,
                p,
                false,
                Some((cula, tus)),
                None,
            ));
        }
    }
    // RC-m (Table B4)
    g.push(pt(
        "RC-m",
        DeleteCols,
        12000,
        3000,
        0,
        500,
        false,
        Some((1.193, 0.620)),
        None,
    ));
    // AR-p, m = 8000 (Tables C1–C3)
    g.push(pt(
        "AR-p",
        InsertRows,
        8000,
        1000,
        0,
        100,
        true,
        Some((0.316, 0.194)),
        Some((0.375, 0.203)),
    ));
    for (p, cula, tus) in [
        (100, 0.958, 0.609),
        (500, 1.025, 0.698),
        (1500, 1.136, 0.968),
    ] {
        g.push(pt(
            "AR-p",
            InsertRows,
            8000,
            3000,
            0,
            p,
            false,
            Some((cula, tus)),
            None,
        ));
    }
    // AR-m (Table C5)
    g.push(pt(
        "AR-m",
        InsertRows,
        14000,
        3000,
        0,
        500,
        false,
        Some((2.002, 1.040)),
        None,
    ));
    // RR-seq (Table D1, n = 1000)
    for (p, seq, tut) in [(20, 1.954, 0.218), (100, 9.483, 0.414)] {
        g.push(pt(
            "RR-seq",
            DeleteRows,
            2000,
            1000,
            0,
            p,
            true,
            None,
            Some((seq, tut)),
        ));
    }
    // RR-m, n = 6000 (Table D3)
    for (p, cula, tus) in [(20, 1.745, 1.736), (100, 1.713, 5.181)] {
        g.push(pt(
            "RR-m",
            DeleteRows,
            8000,
            6000,
            0,
            p,
            false,
            Some((cula, tus)),
            None,
        ));
    }
    // RR-n, m = 12000 (Table D2)
    g.push(pt(
        "RR-n",
        DeleteRows,
        12000,
        10000,
        0,
        20,
        false,
        Some((5.680, 3.592)),
        None,
    ));
    // rank-one (no seed figure: the seeds have no rank-one experiment)
    g.push(pt("R1", RankOne, 8000, 3000, 0, 1, false, None, None));
    g.push(pt("R1", RankOne, 2000, 1000, 0, 1, true, None, None));
    g
}

/// Issue 7's required speed-up over refactorisation (a) at a point: 50× for
/// column deletion with k0 ≥ n/2 and for the rank-one update, 10× where the
/// update changes at most a tenth of the matrix, otherwise 1×.
fn required_speedup(pt: &Point) -> f64 {
    match pt.kind {
        Kind::RankOne => 50.0,
        Kind::DeleteCols if 2 * pt.k0 >= pt.n => 50.0,
        Kind::InsertCols | Kind::DeleteCols if 10 * pt.p <= pt.n => 10.0,
        Kind::InsertRows | Kind::DeleteRows if 10 * pt.p <= pt.m => 10.0,
        _ => 1.0,
    }
}

/// Whether issue 7's CPU bar (GPU ≥ 50× the serial update) applies here.
fn cpu_bar_applies(pt: &Point) -> bool {
    matches!(pt.group, "RR-seq" | "AC-k3" | "AR-p")
}

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

/// The seeds' Wavefront strategy (spec §1.5): a generate and an apply launch per
/// wavefront step; for row deletion the seeds' composite layout (spec §1.10, §3.6).
fn wavefront_params<T: GpuScalar>(st: &GpuQr<T>) -> cuqr::UpdateParams {
    let mut p = st.params();
    p.givens = Givens::Wavefront;
    p.row_removal = RowRemoval::Composite;
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

/// Measures one point on the GPU (and the CPU where marked).
#[allow(clippy::too_many_arguments)]
fn bench_gpu<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    base: &GpuQr<T>,
    cpu_base: Option<&CpuQr<T>>,
    pt: &Point,
    c: &Case<T>,
    reps: usize,
    cpu_budget: f64,
) -> cuqr::Result<Row> {
    let (m2, n2) = pt.kind.new_dims(pt.m, pt.n, pt.p);
    let keep_q = pt.kind.policy() == QPolicy::Full;
    let mut row = Row::default();

    // the update (+ solve) from a restored snapshot
    let x_upd = RefCell::new(DevMat::<T>::zeros(gpu, n2, 1)?);
    let keep: RefCell<Option<GpuQr<T>>> = RefCell::new(None);
    let launches = Cell::new(0u64);
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || {
            keep.borrow_mut().take();
            base.try_clone()
        },
        |mut st| {
            let l0 = gpu.launch_count();
            apply(&mut st, pt, c)?;
            launches.set(gpu.launch_count() - l0);
            solve_dev(gpu, &st, &mut x_upd.borrow_mut())?;
            *keep.borrow_mut() = Some(st);
            Ok(())
        },
    )?;
    keep.borrow_mut().take();
    row.upd_ms = Some(t.median_ms());
    row.launches = Some(launches.get());

    // the same with the seeds' Wavefront strategy
    let x_wf = RefCell::new(DevMat::<T>::zeros(gpu, n2, 1)?);
    if has_givens_stage(pt) {
        let t = time_with_setup(
            gpu,
            1,
            reps,
            || {
                keep.borrow_mut().take();
                let mut st = base.try_clone()?;
                st.set_params(wavefront_params(&st));
                Ok(st)
            },
            |mut st| {
                let l0 = gpu.launch_count();
                apply(&mut st, pt, c)?;
                launches.set(gpu.launch_count() - l0);
                solve_dev(gpu, &st, &mut x_wf.borrow_mut())?;
                *keep.borrow_mut() = Some(st);
                Ok(())
            },
        )?;
        keep.borrow_mut().take();
        row.wf_ms = Some(t.median_ms());
        row.wf_launches = Some(launches.get());
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

    if let Some(cb) = cpu_base {
        let (ms, runs) = time_cpu(cb, pt, c, cpu_budget)?;
        row.cpu_ms = Some(ms);
        row.cpu_runs = runs;
        (row.faer_ms, row.faer_runs) = {
            let (ms, runs) = time_faer(c, cpu_budget);
            (Some(ms), runs)
        };
    }
    Ok(row)
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

const TABLE_HEAD: &str = "| group | prec | update | m | n | k0 | p | Q | update ms | launches | (a) refac ms | a/upd | wavefront ms | a/wf | (b) solve-only ms | b/upd | seed CULA/TUS | cpu ms (runs) | cpu/upd | seed seq/TUT | (d) faer ms (runs) | d/upd | e_x | bar |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";
const CSV_HEAD: &str = "group,prec,update,m,n,k0,p,q_full,update_ms,launches,refac_ms,refac_over_update,wavefront_ms,wavefront_launches,refac_over_wavefront,e_x_wavefront,solve_only_ms,solve_only_over_update,seed_cula_over_tus,cpu_ms,cpu_runs,cpu_over_update,seed_seq_over_tut,faer_ms,faer_runs,faer_over_update,e_x,required_speedup";

fn table_row(prec: &str, pt: &Point, r: &Row) -> String {
    format!(
        "| {} | {prec} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        pt.group,
        pt.kind.name(),
        pt.m,
        pt.n,
        pt.k0,
        pt.p,
        if pt.kind.policy() == QPolicy::Full { "full" } else { "none" },
        fmt_opt(r.upd_ms, 3),
        r.launches.map_or("–".into(), |l| l.to_string()),
        fmt_opt(r.refac_ms, 3),
        fmt_opt(ratio(r.refac_ms, r.upd_ms), 2),
        fmt_opt(r.wf_ms, 3),
        fmt_opt(ratio(r.refac_ms, r.wf_ms), 2),
        fmt_opt(r.solve_ms, 3),
        fmt_opt(ratio(r.solve_ms, r.upd_ms), 2),
        fmt_opt(pt.seed_cula, 2),
        r.cpu_ms
            .map_or("–".into(), |c| format!("{c:.1} ({})", r.cpu_runs)),
        fmt_opt(ratio(r.cpu_ms, r.upd_ms), 1),
        fmt_opt(pt.seed_seq, 1),
        r.faer_ms
            .map_or("–".into(), |c| format!("{c:.1} ({})", r.faer_runs)),
        fmt_opt(ratio(r.faer_ms, r.upd_ms), 1),
        r.ex.map_or("–".into(), |e| format!("{e:.1e}")),
        bar_cell(pt, r),
    )
}

fn csv_row(prec: &str, pt: &Point, r: &Row) -> String {
    let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    format!(
        "{},{prec},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        pt.group,
        pt.kind.name(),
        pt.m,
        pt.n,
        pt.k0,
        pt.p,
        pt.kind.policy() == QPolicy::Full,
        o(r.upd_ms),
        r.launches.map_or(String::new(), |l| l.to_string()),
        o(r.refac_ms),
        o(ratio(r.refac_ms, r.upd_ms)),
        o(r.wf_ms),
        r.wf_launches.map_or(String::new(), |l| l.to_string()),
        o(ratio(r.refac_ms, r.wf_ms)),
        o(r.wf_ex),
        o(r.solve_ms),
        o(ratio(r.solve_ms, r.upd_ms)),
        o(pt.seed_cula),
        o(r.cpu_ms),
        r.cpu_runs,
        o(ratio(r.cpu_ms, r.upd_ms)),
        o(pt.seed_seq),
        o(r.faer_ms),
        r.faer_runs,
        o(ratio(r.faer_ms, r.upd_ms)),
        o(r.ex),
        required_speedup(pt),
    )
}

/// Everything a sweep needs besides the points.
struct Ctx<'a> {
    gpu: Option<&'a Arc<Gpu>>,
    reps: usize,
    cpu: bool,
    cpu_budget: f64,
    profile: bool,
    stages: bool,
}

/// Runs the points of one precision, grouped by (m, n, policy) so each state
/// is factorised once; calls `out` per finished row.
fn sweep<T: GpuScalar>(
    ctx: &Ctx<'_>,
    points: &[Point],
    done: &mut usize,
    total: usize,
    out: &mut dyn FnMut(&Point, &Row),
    prof: &mut Vec<String>,
    stages: &mut Vec<String>,
) -> CliResult<()> {
    let mut keys: Vec<(usize, usize, QPolicy)> = Vec::new();
    for p in points {
        let k = (p.m, p.n, p.kind.policy());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (m, n, policy) in keys {
        let seed = (m as u64) << 32 ^ n as u64;
        let a = random::<T>(m, n, seed);
        let b = random::<T>(m, 1, seed ^ 0xB);
        let needs_cpu = ctx.cpu
            && points
                .iter()
                .any(|p| p.cpu && (p.m, p.n, p.kind.policy()) == (m, n, policy));
        let gpu_base = match ctx.gpu {
            Some(g) => Some(GpuQr::factorize(
                g,
                a.as_ref(),
                b.as_ref(),
                policy,
                FactorParams::default(),
            )?),
            None => None,
        };
        let cpu_base = match (&gpu_base, needs_cpu) {
            (_, false) => None,
            (Some(g), true) => Some(g.to_cpu()?),
            (None, true) => Some(CpuQr::factorize(
                a.as_ref(),
                b.as_ref(),
                policy,
                FactorParams::default(),
            )?),
        };
        for p in points
            .iter()
            .filter(|p| (p.m, p.n, p.kind.policy()) == (m, n, policy))
        {
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
            let case = make_case(p, &a, &b, seed ^ (p.k0 as u64) << 16 ^ p.p as u64);
            let cb = if p.cpu { cpu_base.as_ref() } else { None };
            let row = match (ctx.gpu, &gpu_base) {
                (Some(g), Some(base)) => {
                    bench_gpu(g, base, cb, p, &case, ctx.reps, ctx.cpu_budget)?
                }
                _ => {
                    let mut r = Row::default();
                    if let Some(cb) = cb {
                        let (ms, runs) = time_cpu(cb, p, &case, ctx.cpu_budget)?;
                        r.cpu_ms = Some(ms);
                        r.cpu_runs = runs;
                        let (ms, runs) = time_faer(&case, ctx.cpu_budget);
                        r.faer_ms = Some(ms);
                        r.faer_runs = runs;
                    }
                    r
                }
            };
            out(p, &row);
            if let (true, Some(g), Some(base)) = (ctx.stages, ctx.gpu, &gpu_base) {
                let st = stage_split(g, base, p, &case, ctx.reps)?;
                let cells: Vec<String> = st
                    .iter()
                    .map(|(name, ms)| format!("{name} {ms:.3}"))
                    .collect();
                let sum: f64 = st.iter().map(|x| x.1).sum();
                stages.push(format!(
                    "{} {sum:.3} | {} |",
                    point_head::<T>(p),
                    cells.join("; ")
                ));
            }
            if let (true, Some(g), Some(base)) = (ctx.profile, ctx.gpu, &gpu_base) {
                if let Some((tg, ts, tl, count, vecs, bytes)) =
                    profile_givens(g, base, p, ctx.reps)?
                {
                    let flops = 6.0 * count as f64 * vecs as f64;
                    prof.push(format!(
                        "{} {:.3} | {:.3} | {:.3} | {:.2} | {:.1} | {:.0} | {} |",
                        point_head::<T>(p),
                        tg,
                        ts,
                        tl,
                        tl / ts,
                        2.0 * bytes as f64 / (ts * 1e6),
                        flops / (ts * 1e6),
                        fmt_opt(row.upd_ms, 3),
                    ));
                }
            }
        }
    }
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
    for _ in 0..reps {
        let mut st = base.try_clone()?;
        gpu.synchronize()?;
        gpu.stage_marks_begin()?;
        let r = apply(&mut st, pt, c).and_then(|()| {
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
type GivensProfile = (f64, f64, f64, usize, usize, usize);

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
    use cuqr::gpu::kernels_two_phase::{ApplyTarget, RotList, RotSide};
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
    let mut r = DevMat::from_host(gpu, random::<T>(span, nr, 6).as_ref())?;
    let mut d = DevMat::from_host(gpu, random::<T>(span, 1, 7).as_ref())?;
    let mut apply = |list: &RotList<T>| -> cuqr::Result<()> {
        let mut qv = q.block_mut(0, col0, m, span);
        let mut rv = r.view_mut();
        let mut dv = d.view_mut();
        gpu.two_phase_apply(
            list,
            &mut [
                ApplyTarget {
                    view: &mut qv,
                    side: RotSide::Cols,
                    banded: false,
                },
                ApplyTarget {
                    view: &mut rv,
                    side: RotSide::Rows,
                    banded: true,
                },
                ApplyTarget {
                    view: &mut dv,
                    side: RotSide::Rows,
                    banded: false,
                },
            ],
        )
    };
    let t_sched = time_with_setup(gpu, 1, reps, || Ok(()), |()| apply(&list.borrow()))?;
    list.get_mut().forget_schedule();
    let t_list = time_with_setup(gpu, 1, reps, || Ok(()), |()| apply(&list.borrow()))?;
    let vectors = m + nr + 1;
    let bytes = (m * span + span * nr + span) * std::mem::size_of::<T>();
    Ok(Some((
        t_gen.median_ms(),
        t_sched.median_ms(),
        t_list.median_ms(),
        count,
        vectors,
        bytes,
    )))
}

/// Runs `cuqr bench updates`.
pub fn run(args: &[String]) -> CliResult<()> {
    run_on(args, None)
}

/// [`run`], with `grid` (when given) replacing the quick or full grid (tests).
fn run_on(args: &[String], grid: Option<Vec<Point>>) -> CliResult<()> {
    const CMD: &str = "bench updates";
    let o = BenchOpts::parse(
        CMD,
        args,
        &["quick", "no-cpu", "profile", "stages"],
        &["precision", "groups", "reps", "csv", "cpu-budget", "svg"],
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
    if let Some(path) = o.get("csv") {
        super::check_csv_path(CMD, path)?;
    }
    if let Some(dir) = o.get("svg") {
        super::check_svg_dir(CMD, dir)?;
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
            if !full_grid().iter().any(|p| p.group == *w) {
                return Err(format!("--groups: unknown group '{w}'").into());
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
    if let Some(g) = &gpu {
        println!("device: {}", g.describe()?);
    }
    println!("command: cuqr bench updates {}", args.join(" "));
    println!(
        "protocol: device-resident; GPU medians of {reps} CUDA-event runs after 1 warm-up; \
         update = restore snapshot (untimed), update + TRSM solve (timed)"
    );
    println!();
    println!("{TABLE_HEAD}");
    let mut csv = String::from(CSV_HEAD);
    csv.push('\n');
    let ctx = Ctx {
        gpu: gpu.as_ref(),
        reps,
        cpu: !o.flag("no-cpu"),
        cpu_budget,
        profile: o.flag("profile"),
        stages: o.flag("stages"),
    };
    let mut prof = Vec::new();
    let mut stage_rows = Vec::new();
    let mut rows: Vec<(&str, Point, Row)> = Vec::new();
    let total = points.len() * precs.len();
    let mut done = 0;
    for &prec in precs {
        let mut out = |p: &Point, r: &Row| {
            eprint!("\r");
            println!("{}", table_row(prec, p, r));
            csv.push_str(&csv_row(prec, p, r));
            csv.push('\n');
            rows.push((prec, *p, r.clone()));
        };
        if prec == "f64" {
            sweep::<f64>(
                &ctx,
                &points,
                &mut done,
                total,
                &mut out,
                &mut prof,
                &mut stage_rows,
            )?;
        } else {
            sweep::<f32>(
                &ctx,
                &points,
                &mut done,
                total,
                &mut out,
                &mut prof,
                &mut stage_rows,
            )?;
        }
    }
    eprintln!();
    if ctx.stages && gpu.is_some() {
        println!(
            "\nStages of each update + solve (ms, median over {reps} runs of each stage's sum; \
             events on the main stream, side-stream work counted where it is joined)\n"
        );
        println!("| group | type | update | m | n | k0 | p | sum ms | stages (ms) |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for l in &stage_rows {
            println!("{l}");
        }
    }
    if let (true, Some(g)) = (ctx.profile, &gpu) {
        println!(
            "\nCeilings (same run): device copy GB/s (read + write), cuBLAS GEMM GFLOP/s (8192³)\n"
        );
        println!("| prec | copy GB/s | GEMM GFLOP/s |\n|---|---|---|");
        for &prec in precs {
            let (bw, gf) = if prec == "f64" {
                ceilings::<f64>(g, reps)?
            } else {
                ceilings::<f32>(g, reps)?
            };
            println!("| {prec} | {bw:.0} | {gf:.0} |");
        }
        println!(
            "\nTwo-phase Givens stage alone (ms): generate, apply in step order (the default pipe kernel \
             for Q and d), apply in list order; GB/s = 2·(bytes of Q block + R + d)/apply time \
             (each element read and written once: the minimum traffic); GFLOP/s = 6·rotations·vectors/apply time\n"
        );
        println!("| group | type | update | m | n | k0 | p | gen ms | apply ms | list-order apply ms | list/step | apply GB/s | apply GFLOP/s | whole update ms |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for l in &prof {
            println!("{l}");
        }
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
    const FIELDS: [Field; 4] = [
        ("k0", |p| p.k0),
        ("p", |p| p.p),
        ("m", |p| p.m),
        ("n", |p| p.n),
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
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for (prec, p, _) in rows {
        if !keys.contains(&(p.group, *prec)) {
            keys.push((p.group, *prec));
        }
    }
    let mut charts = Vec::new();
    for (group, prec) in keys {
        let sel: Vec<&(&str, Point, Row)> = rows
            .iter()
            .filter(|(pr, p, _)| p.group == group && *pr == prec)
            .collect();
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
        let xi = (0..4)
            .max_by_key(|&i| (counts[i], i == hint, 4 - i))
            .expect("four fields");
        let (xname, xf) = FIELDS[xi];
        let others: Vec<usize> = (0..4).filter(|&i| i != xi && counts[i] > 1).collect();
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
                // the cases of required_speedup, in its order
                let why = match p.kind {
                    Kind::RankOne => "rank-one",
                    Kind::DeleteCols if 2 * p.k0 >= p.n => "k0 ≥ n/2",
                    Kind::InsertCols | Kind::DeleteCols if 10 * p.p <= p.n => "p ≤ n/10",
                    Kind::InsertRows | Kind::DeleteRows if 10 * p.p <= p.m => "p ≤ m/10",
                    _ => "elsewhere",
                };
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
        let fixed: Vec<String> = (0..4)
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
        let kind = sel[0].1.kind.name();
        let title = if gpu {
            format!("{group} {prec} {kind}: speed-up of the update (+ solve)")
        } else {
            format!("{group} {prec} {kind}: CPU only (no GPU), (d) faer / (c) CPU update")
        };
        charts.push((
            format!("{group}_{prec}.svg"),
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

    #[test]
    fn bar_thresholds_follow_issue_7() {
        let g = full_grid();
        let find = |grp: &str, k0: usize, p: usize| {
            *g.iter()
                .find(|x| x.group == grp && x.k0 == k0 && x.p == p)
                .unwrap()
        };
        assert_eq!(required_speedup(&find("RC-k", 1500, 100)), 50.0);
        assert_eq!(required_speedup(&find("RC-k", 0, 100)), 10.0);
        assert_eq!(required_speedup(&find("RC-k", 0, 500)), 1.0);
        assert_eq!(required_speedup(&find("AC-k3", 0, 200)), 10.0);
        assert_eq!(required_speedup(&find("AR-p", 0, 1500)), 1.0);
        assert_eq!(required_speedup(&find("RR-m", 0, 20)), 10.0);
        assert_eq!(required_speedup(&find("R1", 0, 1)), 50.0);
    }

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
        let ic = pt("x", Kind::InsertCols, 30, 10, 4, 3, false, None, None);
        let c = make_case(&ic, &a, &b, 3);
        assert_eq!((c.a_new.nrows(), c.a_new.ncols()), (30, 13));
        assert_eq!(c.a_new[(5, 3)], a[(5, 3)]);
        assert_eq!(c.a_new[(5, 4)], c.u[(5, 0)]);
        assert_eq!(c.a_new[(5, 7)], a[(5, 4)]);
        let dr = pt("x", Kind::DeleteRows, 30, 10, 2, 5, false, None, None);
        let c = make_case(&dr, &a, &b, 3);
        assert_eq!(c.a_new[(1, 0)], a[(1, 0)]);
        assert_eq!(c.a_new[(2, 0)], a[(7, 0)]);
        assert_eq!(c.b_new[(2, 0)], b[(7, 0)]);
        let ir = pt("x", Kind::InsertRows, 30, 10, 0, 4, false, None, None);
        let c = make_case(&ir, &a, &b, 3);
        assert_eq!(c.a_new[(3, 2)], c.u[(3, 2)]);
        assert_eq!(c.a_new[(4, 2)], a[(0, 2)]);
        assert_eq!(c.b_new[(0, 0)], c.e[(0, 0)]);
        let dc = pt("x", Kind::DeleteCols, 30, 10, 8, 2, false, None, None);
        let c = make_case(&dc, &a, &b, 3);
        assert_eq!(c.a_new.ncols(), 8);
        assert_eq!(c.a_new[(0, 7)], a[(0, 7)]);
        assert!(a.as_slice().iter().all(|v| v.abs() >= 0.1));
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
        let groups: Vec<&str> = rows.iter().map(|(_, p, _)| p.group).collect();
        let mut want: Vec<String> = groups.iter().map(|g| format!("{g}_f64.svg")).collect();
        want.dedup();
        let names: Vec<String> = charts.iter().map(|(n, _)| n.clone()).collect();
        assert_eq!(names, want);
        let get = |n: &str| &charts.iter().find(|(f, _)| f == n).unwrap().1;
        // AC-k3: k0 varies at m = 8000 (5 points) and m = 4000 (2, with CPU)
        let ac = get("AC-k3_f64.svg");
        assert!(ac.x_label.starts_with("k0"), "{}", ac.x_label);
        let labels: Vec<&str> = ac.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "over (a) refactorise, m = 8000",
                "over (a) refactorise, m = 4000",
                "over (c) CPU update, m = 4000"
            ]
        );
        assert_eq!(ac.series[0].points.len(), 5);
        assert!(ac.hlines.iter().any(|h| h.y == 10.0));
        assert!(ac
            .hlines
            .iter()
            .any(|h| h.y == 50.0 && h.label.contains("(c)")));
        // RC-k: k0 on x, one series per p, bars 10× and 50× (k0 ≥ n/2)
        let rc = get("RC-k_f64.svg");
        assert!(rc.x_label.starts_with("k0"));
        assert_eq!(rc.series.len(), 2);
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
            pt("AC-k", InsertCols, 130, 50, 0, 5, true, None, None),
            pt("AC-k", InsertCols, 130, 50, 25, 5, true, None, None),
            pt("AC-k", InsertCols, 130, 50, 50, 5, true, None, None),
            pt("AR-p", InsertRows, 130, 50, 0, 3, true, None, None),
            pt("AR-p", InsertRows, 130, 50, 0, 7, true, None, None),
            pt("AR-p", InsertRows, 130, 37, 0, 7, true, None, None),
            pt("R1", RankOne, 97, 41, 0, 1, true, None, None),
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
