//! The sweep over the points of one precision: each state factorised once, every
//! point timed on the GPU, its CPU columns handed to the worker threads, and each row
//! passed on once its CPU columns are in.

use std::cell::RefCell;
use std::io::Write;
use std::sync::Arc;

use cuqr::internals::gpu::{GpuQr, GpuScalar, PinnedHostSlice};
use cuqr::{CpuQr, FactorParams, Gpu, Mat, QPolicy, QrUpdate};

use super::case::{case_seed, make_case, random};
use super::cpu::{fill_cpu, CpuJob, CpuPool, CpuTimed};
use super::grid::Point;
use super::profile::{profile_givens, stage_row, stage_split};
use super::run::{bench_gpu, staging_need, GpuBase};
use super::types::{Ctx, Row};
use cuqr_cli::cli::CliResult;

/// The side tables' rows that the sweeps add: `--stages` and `--profile`.
#[derive(Default)]
pub(super) struct SideRows {
    pub(super) stages: RefCell<Vec<String>>,
    pub(super) prof: RefCell<Vec<String>>,
}

/// The progress line on stderr: points done of the run's total.
pub(super) struct Progress {
    pub(super) done: usize,
    pub(super) total: usize,
}

impl Progress {
    /// Counts and shows the point about to be measured.
    fn point(&mut self, p: &Point) {
        self.done += 1;
        eprint!(
            "\r[{}/{}] {} {} m={} n={} k0={} p={}        ",
            self.done,
            self.total,
            p.group,
            p.kind.name(),
            p.m,
            p.n,
            p.k0,
            p.p
        );
        let _ = std::io::stderr().flush();
    }

    /// Shows that `rows` rows wait for their CPU columns.
    fn waiting(&self, rows: usize) {
        eprint!(
            "\r[{}/{}] waiting for the CPU columns ({rows} rows)        ",
            self.done, self.total
        );
        let _ = std::io::stderr().flush();
    }
}

/// The rows of a sweep in point order; a row is passed on once its CPU columns (where
/// it waits for them) are in.
#[derive(Default)]
struct RowQueue {
    /// (point, row, still waiting for its CPU columns).
    slots: Vec<(Point, Row, bool)>,
    /// Rows passed on so far.
    passed: usize,
}

impl RowQueue {
    /// Adds a row; returns its slot.
    fn push(&mut self, p: Point, row: Row, waits: bool) -> usize {
        self.slots.push((p, row, waits));
        self.slots.len() - 1
    }

    /// Fills in the finished CPU columns, then passes on every row in order up to the
    /// first that still waits.
    fn flush(
        &mut self,
        finished: Vec<(usize, CpuTimed)>,
        out: &mut dyn FnMut(&Point, &Row),
    ) -> cuqr::Result<()> {
        for (slot, timed) in finished {
            fill_cpu(&mut self.slots[slot].1, timed)?;
            self.slots[slot].2 = false;
        }
        while self.passed < self.slots.len() && !self.slots[self.passed].2 {
            let (p, r, _) = &self.slots[self.passed];
            out(p, r);
            self.passed += 1;
        }
        Ok(())
    }

    /// Rows not passed on yet.
    fn waiting(&self) -> usize {
        self.slots.len() - self.passed
    }
}

/// One factorised state: its A, b and seed, the GPU factorisation (with a GPU) and its
/// host copy (where the CPU columns or TUS/TUT need it).
struct State<T: GpuScalar> {
    seed: u64,
    a: Arc<Mat<T>>,
    b: Arc<Mat<T>>,
    gpu: Option<GpuQr<T>>,
    host: Option<Arc<CpuQr<T>>>,
}

impl<T: GpuScalar> State<T> {
    /// Random A (m×n) and b, factorised on the GPU when there is one (its row insertions
    /// by `row_insertion`); the host copy when `needs_host` (the GPU's factorisation copied
    /// back, else a CPU one).
    fn new(
        gpu: Option<&Arc<Gpu>>,
        (m, n, policy): (usize, usize, QPolicy),
        needs_host: bool,
        row_insertion: cuqr::RowInsertion,
    ) -> cuqr::Result<Self> {
        let seed = (m as u64) << 32 ^ n as u64;
        let a = Arc::new(random::<T>(m, n, seed));
        let b = Arc::new(random::<T>(m, 1, seed ^ 0xB));
        let (am, bm) = (a.as_ref().as_ref(), b.as_ref().as_ref());
        let params = FactorParams::default();
        let gpu_st = match gpu {
            Some(g) => {
                let mut st = GpuQr::factorize(g, am, bm, policy, params)?;
                st.set_params(cuqr::UpdateParams {
                    row_insertion,
                    ..st.params()
                });
                Some(st)
            }
            None => None,
        };
        let host = match (&gpu_st, needs_host) {
            (_, false) => None,
            (Some(g), true) => Some(Arc::new(g.to_cpu()?)),
            (None, true) => Some(Arc::new(CpuQr::factorize(am, bm, policy, params)?)),
        };
        Ok(State {
            seed,
            a,
            b,
            gpu: gpu_st,
            host,
        })
    }
}

/// Whether the seeds give a TUS or TUT ratio at the point (its transfers are timed).
fn has_transfers(p: &Point) -> bool {
    p.seed_cula.is_some() || p.seed_seq.is_some()
}

/// Runs the points of one precision, grouped by (m, n, policy) so each state
/// is factorised once; calls `out` per finished row (a state's rows once its CPU
/// columns are in).
pub(super) fn sweep<T: GpuScalar>(
    ctx: &Ctx<'_>,
    points: &[Point],
    progress: &mut Progress,
    out: &mut dyn FnMut(&Point, &Row),
    side: &SideRows,
) -> CliResult<()> {
    let mut keys: Vec<(usize, usize, QPolicy)> = Vec::new();
    for p in points {
        let k = (p.m, p.n, p.kind.policy());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    // page-locked staging for TUS/TUT, allocated once for the largest point
    let staging: RefCell<Option<PinnedHostSlice<T>>> = RefCell::new(match ctx.gpu {
        Some(g) if ctx.transfers => points
            .iter()
            .filter(|p| has_transfers(p))
            .map(staging_need::<T>)
            .max()
            .map(|len| g.alloc_pinned::<T>(len))
            .transpose()?,
        _ => None,
    });
    let mut queue = RowQueue::default();
    let pool = ctx
        .cpu
        .then(|| CpuPool::<T>::new(ctx.cpu_threads, ctx.cpu_budget));
    for key in keys {
        let pts: Vec<Point> = points
            .iter()
            .filter(|p| (p.m, p.n, p.kind.policy()) == key)
            .copied()
            .collect();
        let needs_cpu = pool.is_some() && pts.iter().any(|p| p.cpu);
        let tus_tut = staging.borrow().is_some() && pts.iter().any(has_transfers);
        let st = State::<T>::new(ctx.gpu, key, needs_cpu || tus_tut, ctx.row_insertion)?;
        for p in &pts {
            progress.point(p);
            let host = st.host.as_deref().filter(|_| tus_tut);
            let row = measure_point(ctx, &st, p, host, &staging, side)?;
            let cpu_job = needs_cpu && p.cpu;
            let slot = queue.push(*p, row, cpu_job);
            if let (true, Some(pool), Some(base)) = (cpu_job, &pool, &st.host) {
                pool.submit(CpuJob {
                    base: base.clone(),
                    a: st.a.clone(),
                    b: st.b.clone(),
                    seed: st.seed,
                    pt: *p,
                    slot,
                });
            }
        }
        drop(st);
        let finished = pool.as_ref().map(|p| p.take_done()).unwrap_or_default();
        queue.flush(finished, out)?;
    }
    if let Some(pool) = pool {
        if queue.waiting() > 0 {
            progress.waiting(queue.waiting());
        }
        queue.flush(pool.finish(), out)?;
    }
    debug_assert_eq!(queue.waiting(), 0);
    Ok(())
}

/// The GPU columns of one point of the state `st` (an empty row without a GPU), and
/// its `--stages` and `--profile` rows; `host` is the state on the host where the
/// point's TUS/TUT runs start from it.
fn measure_point<T: GpuScalar>(
    ctx: &Ctx<'_>,
    st: &State<T>,
    p: &Point,
    host: Option<&CpuQr<T>>,
    staging: &RefCell<Option<PinnedHostSlice<T>>>,
    side: &SideRows,
) -> cuqr::Result<Row> {
    let (Some(g), Some(base)) = (ctx.gpu, &st.gpu) else {
        return Ok(Row::default());
    };
    let case = make_case(p, &st.a, &st.b, case_seed(st.seed, p));
    let gb = GpuBase {
        gpu: g,
        state: base,
        host,
        staging,
    };
    let row = bench_gpu(ctx, &gb, p, &case)?;
    if ctx.stages || p.group == "AC-stage" {
        let stages = stage_split(g, base, p, &case, ctx.reps)?;
        side.stages.borrow_mut().push(stage_row::<T>(p, &stages));
    }
    if ctx.profile {
        if let Some(prof) = profile_givens(g, base, p, ctx.reps)? {
            side.prof.borrow_mut().push(prof.row::<T>(p, row.upd_ms));
        }
    }
    Ok(row)
}
