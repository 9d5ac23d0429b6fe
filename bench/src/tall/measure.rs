//! Measuring one shape of `cuqr bench tall` on the device: the random A and b,
//! cuSOLVER's refactorisation of each case's updated A′, cuqr's update from a
//! restored state of each kind, and the copy bandwidth the thin rows are compared
//! with. A value that cannot be measured is kept with the reason, and the run goes on.

use std::cell::RefCell;
use std::io::Write;
use std::sync::Arc;

use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::{DevMat, DevVec, GpuQr, GpuScalar};
use cuqr::{FactorParams, Gpu, Mat};

use super::cases::{cases, Case, Kind, Op};
use super::row::{Cell, Row};
use super::update::Update;
use crate::common::{copy_into, copy_rate, cusolver_ls, dup, time_keeping_last};
use cuqr_cli::rng::random_signed_matrix;

const GIB: f64 = (1u64 << 30) as f64;

/// Device memory left free for workspaces and the allocator when checking a fit.
const SLACK: f64 = 256.0 * (1u64 << 20) as f64;

/// Fails with a message unless `need` bytes fit in the free device memory.
pub(crate) fn check_free(gpu: &Gpu, what: &str, need: f64) -> Result<(), String> {
    let (free, _) = gpu.mem_info().map_err(|e| e.to_string())?;
    if need + SLACK > free as f64 {
        return Err(format!(
            "{what} needs ~{:.1} GiB, {:.1} GiB free",
            need / GIB,
            free as f64 / GIB
        ));
    }
    Ok(())
}

/// Device-to-device copy bandwidth in GB/s (each byte read and written once: 2 bytes
/// moved a byte copied), the median of `reps` copies of a 1 GiB buffer of `T`.
pub(super) fn copy_bandwidth<T: GpuScalar>(gpu: &Gpu, reps: usize) -> Cell {
    let rows = 1usize << 20;
    let cols = (1usize << 30) / (rows * std::mem::size_of::<T>());
    check_free(gpu, "the copy buffers (2 × 1 GiB)", 2.0 * GIB)?;
    let measure = || -> cuqr::Result<f64> {
        let a = DevMat::<T>::zeros(gpu, rows, cols)?;
        let mut b = DevMat::<T>::zeros(gpu, rows, cols)?;
        Ok(copy_rate(gpu, &a, &mut b, reps)?.1)
    };
    measure().map_err(|e| e.to_string())
}

/// cuSOLVER's refactorisation of one case's A′: the least-squares solve alone
/// (`geqrf` + `ormqr` + `trsm`, the R-only kind's baseline) and with Q₁ formed as
/// well (`orgqr`, the thin kind's).
#[derive(Clone, Debug)]
struct Baseline {
    solve: Cell,
    with_q1: Cell,
}

/// Times cuSOLVER on a fresh copy of A′ and b′ per run (the copies untimed):
/// `geqrf` + `ormqr` (Qᵀb) + `trsm` (x = R⁻¹(Qᵀb)(0..n)), and when `with_q1` then
/// the m′×n Q₁: the `geqrf` output copied into an m′×n buffer and `orgqr` with k = n.
pub(crate) fn time_cusolver<T: GpuScalar>(
    gpu: &Gpu,
    a2: &DevMat<T>,
    b2: &DevMat<T>,
    with_q1: bool,
    reps: usize,
) -> cuqr::Result<f64> {
    let (m, n) = (a2.nrows(), a2.ncols());
    let work = RefCell::new(DevMat::<T>::zeros(gpu, m, n)?);
    let d = RefCell::new(DevMat::<T>::zeros(gpu, m, 1)?);
    let tau = RefCell::new(DevVec::<T>::zeros(gpu, n)?);
    let q1 = RefCell::new(if with_q1 {
        Some(DevMat::<T>::zeros(gpu, m, n)?)
    } else {
        None
    });
    let restore = || -> cuqr::Result<()> {
        copy_into(gpu, a2, &mut work.borrow_mut())?;
        copy_into(gpu, b2, &mut d.borrow_mut())
    };
    let run = |()| -> cuqr::Result<()> {
        let mut w = work.borrow_mut();
        let mut tv = tau.borrow_mut();
        cusolver_ls(gpu, &mut w, &mut tv, &mut d.borrow_mut())?;
        if let Some(q) = q1.borrow_mut().as_mut() {
            gpu.panel_copy(&w.view(), &mut q.view_mut())?;
            gpu.orgqr(&mut q.view_mut(), n, &tv.view())?;
        }
        Ok(())
    };
    Ok(time_with_setup(gpu, 1, reps, restore, run)?.median_ms())
}

/// The baselines a run needs (the thin kind's with Q₁, the R-only kind's without) on
/// the A′ and b′ of `upd`, each a time or why it is missing.
fn measure_baseline<T: GpuScalar>(
    gpu: &Gpu,
    (a, b): (&DevMat<T>, &DevMat<T>),
    (c, upd): (&Case, &Update<T>),
    kinds: &[Kind],
    reps: usize,
) -> Baseline {
    let (m2, n2) = c.new_dims(a.nrows(), a.ncols());
    let elem = std::mem::size_of::<T>() as f64;
    let mat = m2 as f64 * n2 as f64 * elem;
    let skipped = || Err("not asked for".to_string());
    let mut base = Baseline {
        solve: skipped(),
        with_q1: skipped(),
    };
    // A′ and the work copy, and Q₁ for the thin kind
    let needs_q1 = kinds.contains(&Kind::Thin);
    let need = mat * if needs_q1 { 3.2 } else { 2.2 };
    let fail = |e: String| Baseline {
        solve: Err(e.clone()),
        with_q1: Err(e),
    };
    if let Err(e) = check_free(gpu, "cuSOLVER's refactorisation", need) {
        return fail(e);
    }
    let (a2, b2) = match upd.updated(gpu, a, b) {
        Ok(x) => x,
        Err(e) => return fail(format!("building A′: {e}")),
    };
    let timed = |with_q1| time_cusolver(gpu, &a2, &b2, with_q1, reps).map_err(|e| e.to_string());
    if kinds.contains(&Kind::NoQ) {
        base.solve = timed(false);
    }
    if needs_q1 {
        base.with_q1 = timed(true);
    }
    base
}

/// The factorisation each timed update starts from: the thin kind with the default
/// options, the R-only kind keeping A and b (row deletion, column insertion and the
/// rank-one change need them).
fn factorize<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: &DevMat<T>,
    b: &DevMat<T>,
    kind: Kind,
) -> cuqr::Result<GpuQr<T>> {
    let params = FactorParams {
        keep_data: kind == Kind::NoQ,
        ..FactorParams::default()
    };
    GpuQr::factorize_dev(gpu, dup(gpu, a)?, dup(gpu, b)?, kind.policy(), params)
}

/// Median ms of the update alone, each run on a fresh copy of `state`
/// (`try_clone`, untimed).
fn time_update<T: GpuScalar>(
    gpu: &Gpu,
    state: &GpuQr<T>,
    upd: &Update<T>,
    reps: usize,
) -> cuqr::Result<f64> {
    let (ms, _last) = time_keeping_last(
        gpu,
        reps,
        || state.try_clone(),
        |mut st| {
            upd.apply(&mut st)?;
            Ok(st)
        },
    )?;
    Ok(ms)
}

/// The stages of one update on a fresh copy of `state` (`Gpu::stage_marks_begin`), each
/// stage's milliseconds summed over its marks, in the order they first ran.
fn stage_split<T: GpuScalar>(
    gpu: &Gpu,
    state: &GpuQr<T>,
    upd: &Update<T>,
) -> cuqr::Result<Vec<(&'static str, f64)>> {
    let mut st = state.try_clone()?;
    gpu.synchronize()?;
    gpu.stage_marks_begin()?;
    let r = upd.apply(&mut st);
    gpu.stage_mark("rest");
    let marks = gpu.stage_marks_end()?;
    r?;
    let mut out: Vec<(&'static str, f64)> = Vec::new();
    for (name, ms) in marks {
        match out.iter_mut().find(|x| x.0 == name) {
            Some(x) => x.1 += ms,
            None => out.push((name, ms)),
        }
    }
    Ok(out)
}

/// What a shape's run needs besides the shape.
pub(super) struct ShapeRun<'a> {
    pub(super) gpu: &'a Arc<Gpu>,
    pub(super) prec: &'a str,
    pub(super) kinds: &'a [Kind],
    pub(super) ops: &'a [Op],
    pub(super) reps: usize,
    /// Also split each update into its stages (one extra run).
    pub(super) stages: bool,
}

fn progress(r: &ShapeRun<'_>, m: usize, n: usize, what: &str) {
    eprint!("\r{} {m}×{n}: {what}                    ", r.prec);
    let _ = std::io::stderr().flush();
}

/// Measures the m×n shape: random A and b uploaded once, the cuSOLVER baselines of
/// every case, then per state kind one factorisation and every case's update timed
/// from a fresh copy of it. Each row goes to `out` when measured. Returns `Err` with a
/// message when the shape does not fit in device memory (nothing measured).
pub(super) fn bench_shape<T: GpuScalar>(
    r: &ShapeRun<'_>,
    m: usize,
    n: usize,
    out: &mut dyn FnMut(Row),
) -> Result<(), String> {
    let gpu = r.gpu;
    let elem = std::mem::size_of::<T>() as f64;
    // A and b, a copy of each for the factorisation, and room for one state
    check_free(gpu, "the shape", 4.0 * m as f64 * n as f64 * elem)?;
    progress(r, m, n, "random data");
    let seed = 0x7A11 ^ ((m as u64) << 24) ^ n as u64;
    let upload = |rows, cols, seed| -> Result<DevMat<T>, String> {
        let host: Mat<T> = random_signed_matrix(rows, cols, seed);
        DevMat::from_host(gpu, host.as_ref()).map_err(|e| format!("uploading the data: {e}"))
    };
    let a = upload(m, n, seed)?;
    let b = upload(m, 1, seed ^ 0xB)?;
    let case_list = cases(m, n, r.ops);
    let updates: Vec<Result<Update<T>, String>> = case_list
        .iter()
        .enumerate()
        .map(|(i, c)| {
            c.check(m, n)?;
            Update::new(gpu, c, m, n, seed ^ ((i as u64 + 1) << 40))
                .map_err(|e| format!("inputs: {e}"))
        })
        .collect();
    let baselines: Vec<Baseline> = case_list
        .iter()
        .zip(&updates)
        .map(|(c, upd)| {
            progress(r, m, n, &format!("cuSOLVER, {} p = {}", c.op.name(), c.p));
            match upd {
                Ok(u) => measure_baseline(gpu, (&a, &b), (c, u), r.kinds, r.reps),
                Err(e) => Baseline {
                    solve: Err(e.clone()),
                    with_q1: Err(e.clone()),
                },
            }
        })
        .collect();
    for &kind in r.kinds {
        progress(r, m, n, &format!("factorising ({})", kind.name()));
        let state = factorize(gpu, &a, &b, kind).map_err(|e| format!("no state ({e})"));
        for ((c, upd), base) in case_list.iter().zip(&updates).zip(&baselines) {
            progress(
                r,
                m,
                n,
                &format!("{} {} p = {}", kind.name(), c.op.name(), c.p),
            );
            let cuqr_ms = match (&state, upd) {
                (Err(e), _) | (_, Err(e)) => Err(e.clone()),
                (Ok(st), Ok(u)) => time_update(gpu, st, u, r.reps).map_err(|e| e.to_string()),
            };
            let base = match kind {
                Kind::Thin => &base.with_q1,
                Kind::NoQ => &base.solve,
            };
            let stages = match (&state, upd, r.stages) {
                (Ok(st), Ok(u), true) => stage_split(gpu, st, u).unwrap_or_default(),
                _ => Vec::new(),
            };
            eprint!("\r");
            out(Row {
                m,
                n,
                kind,
                case: *c,
                cuqr_ms,
                cusolver_ms: base.clone(),
                stages,
            });
        }
    }
    Ok(())
}
