//! `--stages` and `--profile`: each point's update split into its stages, the
//! two-phase Givens stage timed alone, and the ceilings measured in the same run.

use std::cell::RefCell;
use std::sync::Arc;

use cuqr::internals::gpu::timing::{time_with_setup, Timing};
use cuqr::internals::gpu::{DevMat, DevVec, GpuQr, GpuScalar};
use cuqr::{Gpu, QrUpdate};

use super::case::{point_params, Case};
use super::grid::{Kind, Point};
use super::run::{solve_dev, TimedUpdate};
use crate::common::{copy_into, copy_rate, fmt_opt, gemm_rate, random_dev, time_ms};

/// The first cells of a `--stages` or `--profile` row: "| group | type | update | m | n |
/// k0 | p |".
pub(super) fn point_head<T>(p: &Point) -> String {
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
pub(super) fn stage_split<T: GpuScalar>(
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
    let upd = TimedUpdate::new(gpu, pt, c)?;
    for _ in 0..reps {
        let mut st = base.try_clone()?;
        // The point's options (the BS group's n_b), as the timed runs take them.
        st.set_params(point_params(pt, st.params()));
        gpu.synchronize()?;
        gpu.stage_marks_begin()?;
        let r = upd.update(&mut st).and_then(|()| {
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

/// A row of the `--stages` table: the point, the sum of its stages and each stage.
pub(super) fn stage_row<T>(p: &Point, stages: &[(&'static str, f64)]) -> String {
    let cells: Vec<String> = stages
        .iter()
        .map(|(name, ms)| format!("{name} {ms:.3}"))
        .collect();
    let sum: f64 = stages.iter().map(|x| x.1).sum();
    format!("{} {sum:.3} | {} |", point_head::<T>(p), cells.join("; "))
}

/// Ceilings measured in the same run (the method: docs/performance.md): device
/// to device copy bandwidth (GB/s, read + write) and the cuBLAS GEMM rate (GFLOP/s).
pub(super) fn ceilings<T: GpuScalar>(gpu: &Arc<Gpu>, reps: usize) -> cuqr::Result<(f64, f64)> {
    let n = 1usize << 14; // 16384² elements: 1 GiB in f32, 2 GiB in f64
    let a = random_dev::<T>(gpu, n, n / 8, 1)?;
    let mut b = DevMat::<T>::zeros(gpu, n, n / 8)?;
    let (_, bw) = copy_rate(gpu, &a, &mut b, reps)?;
    drop((a, b));
    let (_, gflops) = gemm_rate::<T>(gpu, 8192, reps)?;
    Ok((bw, gflops))
}

/// The two-phase Givens stage of one point timed alone ([`profile_givens`]).
pub(super) struct GivensProfile {
    /// Generating the rotations, ms.
    gen_ms: f64,
    /// Applying them in wavefront-step order (the default pipe kernel), ms.
    apply_ms: f64,
    /// Applying them in list order, ms.
    list_ms: f64,
    /// Applying them by windows of rotations and GEMM, ms.
    windowed_ms: f64,
    rotations: usize,
    /// Vectors each rotation touches (columns of Q, R and d).
    vectors: usize,
    /// Bytes of the targets (Q block, R, d).
    bytes: usize,
}

impl GivensProfile {
    /// A row of the `--profile` table; `update_ms` is the whole update's time.
    pub(super) fn row<T>(&self, p: &Point, update_ms: Option<f64>) -> String {
        let (ts, tl, tw) = (self.apply_ms, self.list_ms, self.windowed_ms);
        let flops = 6.0 * self.rotations as f64 * self.vectors as f64;
        format!(
            "{} {:.3} | {:.3} | {:.3} | {:.2} | {:.1} | {:.0} | {:.3} | {:.2} | {} |",
            point_head::<T>(p),
            self.gen_ms,
            ts,
            tl,
            tl / ts,
            2.0 * self.bytes as f64 / (ts * 1e6),
            flops / (ts * 1e6),
            tw,
            ts / tw,
            fmt_opt(update_ms, 3),
        )
    }
}

/// The two-phase Givens stage of one point timed alone: the generate, and the apply
/// in step order, in list order and by windows ([`GivensProfile`]). Targets: a copy of the state's Q (block), random R-like and d blocks of
/// the stage's shapes (the work does not depend on the values).
pub(super) fn profile_givens<T: GpuScalar>(
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
    let gen_ms = if pt.kind == Kind::InsertCols {
        let h = pt.n - pt.k0;
        let x0 = random_dev::<T>(gpu, h + pt.p, pt.p, 5)?;
        let x = RefCell::new(DevMat::<T>::zeros(gpu, h + pt.p, pt.p)?);
        time_with_setup(
            gpu,
            1,
            reps,
            || copy_into(gpu, &x0, &mut x.borrow_mut()),
            |()| gpu.two_phase_gen_strip(&mut x.borrow_mut().view_mut(), h, &mut list.borrow_mut()),
        )?
        .median_ms()
    } else {
        let mut z = DevVec::<T>::zeros(gpu, pt.p * m)?;
        time_ms(gpu, reps, || {
            gpu.two_phase_gen_block(&q0.block(pt.k0, 0, pt.p, m), &mut z, &mut list.borrow_mut())
        })?
    };
    let mut q = DevMat::<T>::zeros(gpu, m, m)?;
    copy_into(gpu, q0, &mut q)?;
    let col0 = if pt.kind == Kind::InsertCols {
        pt.k0
    } else {
        0
    };
    let r = random_dev::<T>(gpu, span, nr, 6)?;
    let d = random_dev::<T>(gpu, span, 1, 7)?;
    let (q, r, d) = (RefCell::new(q), RefCell::new(r), RefCell::new(d));
    // the pipe apply (`window` None) or windows of rotations and GEMM
    // (docs/algorithms.md#givens-rotations)
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
    let apply_ms = time_ms(gpu, reps, || apply(&list.borrow(), None))?;
    let window = cuqr::internals::gpu::two_phase_launch::apply_window_width(pt.p);
    let windowed_ms = time_ms(gpu, reps, || apply(&list.borrow(), Some(window)))?;
    list.get_mut().forget_schedule();
    let list_ms = time_ms(gpu, reps, || apply(&list.borrow(), None))?;
    Ok(Some(GivensProfile {
        gen_ms,
        apply_ms,
        list_ms,
        windowed_ms,
        rotations: count,
        vectors: m + nr + 1,
        bytes: (m * span + span * nr + span) * std::mem::size_of::<T>(),
    }))
}
