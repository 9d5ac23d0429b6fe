//! The sweep over the points of one precision: each state factorised once, every
//! point timed on the GPU, its CPU columns handed to the worker threads, and each row
//! passed on once its CPU columns are in.

use std::cell::RefCell;
use std::io::Write;
use std::sync::Arc;

use cuqr::gpu::{GpuQr, GpuScalar, PinnedHostSlice};
use cuqr::{CpuQr, FactorParams, Gpu, QPolicy};

use super::case::{case_seed, make_case, random};
use super::cpu::{fill_cpu, CpuJob, CpuPool, CpuTimed};
use super::grid::Point;
use super::profile::{point_head, profile_givens, stage_split};
use super::run::{bench_gpu, staging_need, GpuBase, Row};
use super::tables::fmt_opt;
use crate::cli::CliResult;

/// Everything a sweep needs besides the points.
pub(super) struct Ctx<'a> {
    pub(super) gpu: Option<&'a Arc<Gpu>>,
    pub(super) reps: usize,
    pub(super) cpu: bool,
    pub(super) cpu_budget: f64,
    /// CPU points of one state timed at once (one serial update a thread).
    pub(super) cpu_threads: usize,
    /// Time the TUS/TUT protocols where the seeds give their ratios.
    pub(super) transfers: bool,
    /// Time the seeds' Wavefront strategy at every point with a Givens stage.
    pub(super) wavefront: bool,
    pub(super) profile: bool,
    pub(super) stages: bool,
}

/// Runs the points of one precision, grouped by (m, n, policy) so each state
/// is factorised once; calls `out` per finished row (a state's rows once its CPU
/// columns are in).
pub(super) fn sweep<T: GpuScalar>(
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
