//! `--stages` and `--profile`: each point's update split into its stages, the
//! two-phase Givens stage timed alone, and the ceilings measured in the same run.

use std::cell::RefCell;
use std::sync::Arc;

use cuqr::gpu::timing::{time_with_setup, Timing};
use cuqr::gpu::{DevMat, DevVec, GpuQr, GpuScalar, Op};
use cuqr::{Gpu, QrUpdate};

use super::case::{apply, point_params, random, Case};
use super::grid::{Kind, Point};
use super::run::{copy_into, solve_dev};

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
pub(super) fn ceilings<T: GpuScalar>(gpu: &Arc<Gpu>, reps: usize) -> cuqr::Result<(f64, f64)> {
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
pub(super) fn profile_givens<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    base: &GpuQr<T>,
    pt: &Point,
    reps: usize,
) -> cuqr::Result<Option<GivensProfile>> {
    use cuqr::gpu::kernels_two_phase::{ApplyTarget, RotList};
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
    let window = cuqr::gpu::kernels_two_phase::apply_window_width(pt.p);
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
