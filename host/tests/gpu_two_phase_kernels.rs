//! The two-phase Givens kernels alone on the GPU (docs/algorithms.md#two-phase-design): the
//! generates (strip, block, chains, rank-one) against serial CPU replays of the same schedules,
//! every apply path bit for bit against the list-order apply and a CPU replay on poisoned,
//! NaN-padded targets, and the windowed apply. Without a device every test prints "skipped";
//! with `CUQR_REQUIRE_GPU=1` a missing device fails.

mod common;

use cuqr::internals::cpu::givens::{givens, rot, rot_pair};
use cuqr::internals::gpu::two_phase_launch::{
    ApplyPath, ApplyTarget, GenPath, RotList, GEN_R1_MAX_N,
};
use cuqr::internals::gpu::{DevMat, DevVec};
use cuqr::GpuScalar;
use cuqr::{Gpu, Mat, Scalar};
use rand::Rng;

fn max_rel<T: Scalar>(a: &[T], b: &[T]) -> f64 {
    common::max_abs_diff(a, b) / common::max_abs(b).max(1.0)
}

fn rand_list<T: Scalar>(
    g: &mut rand::rngs::StdRng,
    count: usize,
    span: usize,
) -> Vec<(T, T, usize)> {
    // Chains going down and up, repeats and jumps, as the schedules produce.
    let mut out = Vec::with_capacity(count);
    let mut a = span / 2;
    let mut dir: i64 = -1;
    for _ in 0..count {
        let th: f64 = g.random_range(0.1..6.2);
        out.push((T::from_f64(th.cos()), T::from_f64(th.sin()), a));
        match g.random_range(0..10) {
            0 => a = g.random_range(0..span - 1),
            1 => dir = -dir,
            2 => {}
            _ => {
                let na = a as i64 + dir;
                if na < 0 || na > span as i64 - 2 {
                    dir = -dir;
                } else {
                    a = na as usize;
                }
            }
        }
    }
    out
}

fn apply_kernel<T: GpuScalar>(gpu: &Gpu, seed: u64) {
    let (span, nq, nr, nd, count) = (61, 37, 29, 2, 700);
    let mut g = common::rng(seed);
    let list = rand_list::<T>(&mut g, count, span);
    let q0 = common::signed_mat::<T>(&mut g, nq, span);
    let r0 = Mat::from_fn(span, nr, |i, j| {
        if i <= j {
            T::from_f64(common::nonzero(&mut g))
        } else {
            T::ZERO
        }
    });
    let d0 = common::signed_mat::<T>(&mut g, span, nd);
    let (mut qd, mut rd, mut dd) = (
        DevMat::from_host(gpu, q0.as_ref()).unwrap(),
        DevMat::from_host(gpu, r0.as_ref()).unwrap(),
        DevMat::from_host(gpu, d0.as_ref()).unwrap(),
    );
    let mut rl = RotList::<T>::with_capacity(gpu, count).unwrap();
    rl.upload(gpu, &list).unwrap();
    let (mut qv, mut rv, mut dv) = (qd.view_mut(), rd.view_mut(), dd.view_mut());
    gpu.two_phase_apply(&rl, &mut ApplyTarget::q_r_d(&mut qv, &mut rv, &mut dv))
        .unwrap();
    // CPU replay with cpu::givens::rot / rot_pair: the same fused formula, so equal.
    let (mut q, mut r, mut d) = (q0.clone(), r0.clone(), d0.clone());
    let rows = |x: &mut Mat<T>, c: T, s: T, a: usize| {
        for j in 0..x.ncols() {
            let (mut u, mut l) = (x[(a, j)], x[(a + 1, j)]);
            rot_pair(c, s, &mut u, &mut l);
            x[(a, j)] = u;
            x[(a + 1, j)] = l;
        }
    };
    for &(c, s, a) in &list {
        let mut x: Vec<T> = q.col(a).to_vec();
        let mut y: Vec<T> = q.col(a + 1).to_vec();
        rot(c, s, &mut x, &mut y);
        for i in 0..nq {
            q[(i, a)] = x[i];
            q[(i, a + 1)] = y[i];
        }
        rows(&mut r, c, s, a);
        rows(&mut d, c, s, a);
    }
    assert!(
        qd.to_host(gpu).unwrap() == q,
        "Q side differs from cpu::givens::rot"
    );
    assert!(
        rd.to_host(gpu).unwrap() == r,
        "R side (banded) differs from rot_pair"
    );
    assert!(
        dd.to_host(gpu).unwrap() == d,
        "d side differs from rot_pair"
    );
}

#[test]
fn small_kernel_apply_matches_cpu_rot() {
    let Some(gpu) = common::gpu() else { return };
    apply_kernel::<f64>(&gpu, 1);
    apply_kernel::<f32>(&gpu, 2);
}

fn gen_strip_kernel<T: GpuScalar>(gpu: &Gpu, seed: u64, h: usize, p: usize) {
    gen_strip_kernel_path::<T>(gpu, seed, h, p, None, 1.0);
}

/// The strip generate through `path` (None: the default) on a driver scaled by `scale`
/// (a power of two) against the serial CPU replay.
fn gen_strip_kernel_path<T: GpuScalar>(
    gpu: &Gpu,
    seed: u64,
    h: usize,
    p: usize,
    path: Option<GenPath>,
    scale: f64,
) {
    let mut g = common::rng(seed);
    // Column j nonzero in rows ≤ h + j, as after stage 1 of docs/algorithms.md#column-insertion.
    let x0 = Mat::from_fn(h + p, p, |i, j| {
        if i <= h + j {
            T::from_f64(common::nonzero(&mut g) * scale)
        } else {
            T::ZERO
        }
    });
    let mut xd = DevMat::from_host(gpu, x0.as_ref()).unwrap();
    let mut rl = RotList::<T>::with_capacity(gpu, p * h).unwrap();
    match path {
        None => gpu.two_phase_gen_strip(&mut xd.view_mut(), h, &mut rl),
        Some(path) => gpu.two_phase_gen_strip_path(&mut xd.view_mut(), h, &mut rl, path),
    }
    .unwrap();
    let got = rl.to_host(gpu).unwrap();
    // CPU replay: the sequential order of insert_cols::run_cpu step 3.
    let mut x = x0.clone();
    let mut want = Vec::new();
    for j in 0..p {
        for r in (j + 1..=h + j).rev() {
            let (c, s, rho) = givens(x[(r - 1, j)], x[(r, j)]);
            x[(r - 1, j)] = rho;
            x[(r, j)] = T::ZERO;
            for jj in j + 1..p {
                let (mut u, mut l) = (x[(r - 1, jj)], x[(r, jj)]);
                rot_pair(c, s, &mut u, &mut l);
                x[(r - 1, jj)] = u;
                x[(r, jj)] = l;
            }
            want.push((c, s, r - 1));
        }
    }
    check_list(&got, &want, h + p);
    let xg = xd.to_host(gpu).unwrap();
    let tol = 10.0 * (h + p) as f64 * T::UNIT_ROUNDOFF;
    for j in 0..p {
        assert!(max_rel(xg.col(j), x.col(j)) <= tol, "driver column {j}");
        for i in j + 1..h + p {
            assert_eq!(xg[(i, j)], T::ZERO, "({i}, {j}) not exactly zero");
        }
    }
}

fn check_list<T: Scalar>(got: &[(T, T, usize)], want: &[(T, T, usize)], size: usize) {
    assert_eq!(got.len(), want.len());
    let tol = 10.0 * size as f64 * T::UNIT_ROUNDOFF;
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.2, w.2, "plane of rotation {k}");
        let e = (g.0.to_f64() - w.0.to_f64())
            .abs()
            .max((g.1.to_f64() - w.1.to_f64()).abs());
        assert!(e <= tol, "rotation {k}: {g:?} vs {w:?}");
    }
}

#[test]
fn small_kernel_gen_strip_matches_cpu_replay() {
    let Some(gpu) = common::gpu() else { return };
    for &(h, p) in &[(45, 7), (1, 1), (3, 9), (70, 1)] {
        gen_strip_kernel::<f64>(&gpu, 3 + h as u64, h, p);
        gen_strip_kernel::<f32>(&gpu, 4 + h as u64, h, p);
    }
}

fn gen_block_kernel<T: GpuScalar>(gpu: &Gpu, seed: u64, p: usize, m: usize) {
    gen_block_kernel_path::<T>(gpu, seed, p, m, None);
}

/// The block generate through `path` (None: the default) against the CPU replay.
fn gen_block_kernel_path<T: GpuScalar>(
    gpu: &Gpu,
    seed: u64,
    p: usize,
    m: usize,
    path: Option<GenPath>,
) {
    let mut g = common::rng(seed);
    let k0 = 2;
    let full = common::signed_mat::<T>(&mut g, p + 4, m);
    let qd = DevMat::from_host(gpu, full.as_ref()).unwrap();
    let mut z = DevVec::<T>::from_slice(gpu, &vec![T::from_f64(f64::NAN); p * m]).unwrap();
    let mut rl = RotList::<T>::with_capacity(gpu, p * m - p * (p + 1) / 2).unwrap();
    let qz = qd.block(k0, 0, p, m);
    match path {
        None => gpu.two_phase_gen_block(&qz, &mut z, &mut rl),
        Some(path) => gpu.two_phase_gen_block_path(&qz, &mut z, &mut rl, path),
    }
    .unwrap();
    let got = rl.to_host(gpu).unwrap();
    // CPU replay: delete_rows::rotate_out restricted to Z.
    let mut x = Mat::from_fn(p, m, |i, j| full[(k0 + i, j)]);
    let mut want = Vec::new();
    for i in 0..p {
        for j in (i + 1..m).rev() {
            let (c, s, rho) = givens(x[(i, j - 1)], x[(i, j)]);
            for ii in i + 1..p {
                let (mut u, mut l) = (x[(ii, j - 1)], x[(ii, j)]);
                rot_pair(c, s, &mut u, &mut l);
                x[(ii, j - 1)] = u;
                x[(ii, j)] = l;
            }
            x[(i, j - 1)] = rho;
            x[(i, j)] = T::ZERO;
            want.push((c, s, j - 1));
        }
    }
    check_list(&got, &want, m);
    let zg = Mat::from_col_major(p, m, z.to_vec(gpu).unwrap()).unwrap();
    let tol = 10.0 * m as f64 * T::UNIT_ROUNDOFF;
    for i in 0..p {
        for j in 0..m {
            let (a, b) = (zg[(i, j)].to_f64(), x[(i, j)].to_f64());
            if j > i {
                assert_eq!(a, 0.0, "Z({i}, {j}) not exactly zero");
            }
            assert!(
                (a - b).abs() <= tol * (1.0 + b.abs()),
                "Z({i}, {j}): {a} vs {b}"
            );
        }
    }
}

#[test]
fn small_kernel_gen_block_matches_cpu_replay() {
    let Some(gpu) = common::gpu() else { return };
    for &(p, m) in &[(5, 83), (1, 2), (1, 40), (9, 10), (12, 33)] {
        gen_block_kernel::<f64>(&gpu, 5 + m as u64, p, m);
        gen_block_kernel::<f32>(&gpu, 6 + m as u64, p, m);
    }
}

/// The chains of block scans against the serial CPU replay: p from 1 to 40
/// blocks, vectors from 2 to 5000 elements (one warp to eight, chunks of one element
/// to past a batch of eight, ragged ends), p = 1 and h = 1, and drivers scaled by 2^±600 (f64) / 2^±60 (f32), where
/// the suffix norms need their power-of-two scaling. Same tolerances as the wavefront
/// kernels' tests; the block case's Z scratch starts as NaN.
#[test]
fn small_kernel_gen_chains_match_cpu_replay() {
    let Some(gpu) = common::gpu() else { return };
    for &(h, p) in &[
        (45, 7),
        (1, 1),
        (3, 9),
        (70, 1),
        (31, 20),
        (64, 33),
        (200, 40),
        (2500, 5),
    ] {
        assert!(gpu.two_phase_chains_fit::<f64>(p, h + p).unwrap());
        gen_strip_kernel_path::<f64>(&gpu, 71 + h as u64, h, p, Some(GenPath::Chains), 1.0);
        gen_strip_kernel_path::<f32>(&gpu, 72 + h as u64, h, p, Some(GenPath::Chains), 1.0);
    }
    for &(e64, e32) in &[(600, 60), (-600, -60)] {
        let (s64, s32) = (2f64.powi(e64), 2f64.powi(e32));
        gen_strip_kernel_path::<f64>(&gpu, 81, 37, 11, Some(GenPath::Chains), s64);
        gen_strip_kernel_path::<f32>(&gpu, 82, 37, 11, Some(GenPath::Chains), s32);
    }
    for &(p, m) in &[
        (5, 83),
        (1, 2),
        (1, 40),
        (9, 10),
        (12, 33),
        (20, 97),
        (33, 64),
        (40, 300),
        (3, 5000),
    ] {
        assert!(gpu.two_phase_chains_fit::<f32>(p, m).unwrap());
        gen_block_kernel_path::<f64>(&gpu, 91 + m as u64, p, m, Some(GenPath::Chains));
        gen_block_kernel_path::<f32>(&gpu, 92 + m as u64, p, m, Some(GenPath::Chains));
    }
}

/// CPU replay of a list on Q (columns), R and d (rows): `cpu::givens::rot` / `rot_pair`.
fn replay<T: Scalar>(list: &[(T, T, usize)], q: &mut Mat<T>, r: &mut Mat<T>, d: &mut Mat<T>) {
    let rows = |x: &mut Mat<T>, c: T, s: T, a: usize| {
        for j in 0..x.ncols() {
            let (mut u, mut l) = (x[(a, j)], x[(a + 1, j)]);
            rot_pair(c, s, &mut u, &mut l);
            x[(a, j)] = u;
            x[(a + 1, j)] = l;
        }
    };
    for &(c, s, a) in list {
        let mut x: Vec<T> = q.col(a).to_vec();
        let mut y: Vec<T> = q.col(a + 1).to_vec();
        rot(c, s, &mut x, &mut y);
        for i in 0..q.nrows() {
            q[(i, a)] = x[i];
            q[(i, a + 1)] = y[i];
        }
        rows(r, c, s, a);
        rows(d, c, s, a);
    }
}

/// The default apply of a strip or block list (`two_phase_apply_pipe`, ⌈p/8⌉ warps a
/// block, banded R included) against the list-order apply and a CPU replay: all three
/// bit for bit equal (the other paths: `paths_apply_kernel`).
fn sched_apply_kernel<T: GpuScalar>(gpu: &Gpu, seed: u64, strip: bool, s0: usize, s1: usize) {
    let mut g = common::rng(seed);
    let (span, count) = if strip {
        (s0 + s1, s0 * s1)
    } else {
        (s1, s0 * s1 - s0 * (s0 + 1) / 2)
    };
    let mut rl = RotList::<T>::with_capacity(gpu, count).unwrap();
    if strip {
        let (h, p) = (s0, s1);
        let x0 = common::signed_mat::<T>(&mut g, h + p, p);
        let mut xd = DevMat::from_host(gpu, x0.as_ref()).unwrap();
        gpu.two_phase_gen_strip(&mut xd.view_mut(), h, &mut rl)
            .unwrap();
    } else {
        let z0 = common::signed_mat::<T>(&mut g, s0, s1);
        let zd = DevMat::from_host(gpu, z0.as_ref()).unwrap();
        let mut z = DevVec::<T>::zeros(gpu, s0 * s1).unwrap();
        gpu.two_phase_gen_block(&zd.view(), &mut z, &mut rl)
            .unwrap();
    }
    let list = rl.to_host(gpu).unwrap();
    let nr = span - 1;
    let q0 = common::signed_mat::<T>(&mut g, 45, span);
    let r0 = Mat::from_fn(span, nr, |i, j| {
        if i <= j {
            T::from_f64(common::nonzero(&mut g))
        } else {
            T::ZERO
        }
    });
    let d0 = common::signed_mat::<T>(&mut g, span, 2);
    let run = |rl: &RotList<T>| {
        let mut qd = DevMat::from_host(gpu, q0.as_ref()).unwrap();
        let mut rd = DevMat::from_host(gpu, r0.as_ref()).unwrap();
        let mut dd = DevMat::from_host(gpu, d0.as_ref()).unwrap();
        let (mut qv, mut rv, mut dv) = (qd.view_mut(), rd.view_mut(), dd.view_mut());
        gpu.two_phase_apply(rl, &mut ApplyTarget::q_r_d(&mut qv, &mut rv, &mut dv))
            .unwrap();
        (
            qd.to_host(gpu).unwrap(),
            rd.to_host(gpu).unwrap(),
            dd.to_host(gpu).unwrap(),
        )
    };
    let by_steps = run(&rl);
    rl.forget_schedule();
    let in_order = run(&rl);
    let (mut q, mut r, mut d) = (q0.clone(), r0.clone(), d0.clone());
    replay(&list, &mut q, &mut r, &mut d);
    assert!(
        by_steps.0 == q && by_steps.1 == r && by_steps.2 == d,
        "step order vs CPU"
    );
    assert!(
        in_order.0 == q && in_order.1 == r && in_order.2 == d,
        "list order vs CPU"
    );
}

#[test]
fn small_kernel_apply_sched_matches_list_order() {
    let Some(gpu) = common::gpu() else { return };
    for &(strip, s0, s1) in &[
        (true, 45, 7),
        (true, 1, 1),
        (true, 3, 20),
        (false, 5, 83),
        (false, 1, 2),
        (false, 12, 33),
        (false, 17, 18),
        // register-blocked path (16 chains per block): several blocks with a partial
        // last one, chains shorter than the window, exactly one full block
        (true, 37, 35),
        (true, 2, 40),
        (true, 50, 16),
        (false, 33, 101),
        (false, 16, 17),
        (false, 40, 41),
    ] {
        sched_apply_kernel::<f64>(&gpu, 7 + s1 as u64, strip, s0, s1);
        sched_apply_kernel::<f32>(&gpu, 8 + s1 as u64, strip, s0, s1);
    }
}

/// A strip (`strip`, s0 = h, s1 = p) or block (s0 = p, s1 = m) list made by the
/// generate kernel on random data, as a device list and on the host.
fn sched_list<T: GpuScalar>(
    gpu: &Gpu,
    g: &mut rand::rngs::StdRng,
    strip: bool,
    s0: usize,
    s1: usize,
) -> (RotList<T>, Vec<(T, T, usize)>, usize) {
    let (span, count) = if strip {
        (s0 + s1, s0 * s1)
    } else {
        (s1, s0 * s1 - s0 * (s0 + 1) / 2)
    };
    let mut rl = RotList::<T>::with_capacity(gpu, count).unwrap();
    if strip {
        let x0 = common::signed_mat::<T>(g, s0 + s1, s1);
        let mut xd = DevMat::from_host(gpu, x0.as_ref()).unwrap();
        gpu.two_phase_gen_strip(&mut xd.view_mut(), s0, &mut rl)
            .unwrap();
    } else {
        let z0 = common::signed_mat::<T>(g, s0, s1);
        let zd = DevMat::from_host(gpu, z0.as_ref()).unwrap();
        let mut z = DevVec::<T>::zeros(gpu, s0 * s1).unwrap();
        gpu.two_phase_gen_block(&zd.view(), &mut z, &mut rl)
            .unwrap();
    }
    let list = rl.to_host(gpu).unwrap();
    assert_eq!(list.len(), count);
    (rl, list, span)
}

/// Pads `a` into a NaN-filled (rows+5)×(cols+6) matrix at offset (2, 3).
fn poisoned<T: Scalar>(a: &Mat<T>) -> Mat<T> {
    let nan = T::from_f64(f64::NAN);
    Mat::from_fn(a.nrows() + 5, a.ncols() + 6, |i, j| {
        if (2..a.nrows() + 2).contains(&i) && (3..a.ncols() + 3).contains(&j) {
            a[(i - 2, j - 3)]
        } else {
            nan
        }
    })
}

/// The block at (2, 3) of a padded result equals `want` bit for bit and every padding
/// entry is still NaN (no write outside the target).
fn check_padded<T: Scalar>(what: &str, got: &Mat<T>, want: &Mat<T>) {
    for j in 0..got.ncols() {
        for i in 0..got.nrows() {
            let inside = (2..want.nrows() + 2).contains(&i) && (3..want.ncols() + 3).contains(&j);
            let v = got[(i, j)];
            if inside {
                let w = want[(i - 2, j - 3)];
                assert!(
                    v == w || (v.to_f64().is_nan() && w.to_f64().is_nan()),
                    "{what}: ({}, {}) = {v:?}, want {w:?}",
                    i - 2,
                    j - 3
                );
            } else {
                assert!(
                    v.to_f64().is_nan(),
                    "{what}: padding ({i}, {j}) overwritten with {v:?}"
                );
            }
        }
    }
}

/// Every apply path (`two_phase_apply` in list order, `two_phase_apply_sched`,
/// `two_phase_apply_pipe` with 1, 2, 3, 4 and 8 warps, and the default) on a strip or block
/// list against a CPU replay, bit for bit, with Q (`nq` rows, any count), a banded
/// upper-triangular R and d held as blocks of NaN-padded matrices (poisoned outputs: a
/// write outside a target fails the test).
fn paths_apply_kernel<T: GpuScalar>(
    gpu: &Gpu,
    seed: u64,
    strip: bool,
    s0: usize,
    s1: usize,
    nq: usize,
) {
    let mut g = common::rng(seed);
    let (mut rl, list, span) = sched_list::<T>(gpu, &mut g, strip, s0, s1);
    let nr = span - 1;
    let q0 = common::signed_mat::<T>(&mut g, nq, span);
    let r0 = Mat::from_fn(span, nr, |i, j| {
        if i <= j {
            T::from_f64(common::nonzero(&mut g))
        } else {
            T::ZERO
        }
    });
    let d0 = common::signed_mat::<T>(&mut g, span, 3);
    let (mut q, mut r, mut d) = (q0.clone(), r0.clone(), d0.clone());
    replay(&list, &mut q, &mut r, &mut d);
    let (qp, rp, dp) = (poisoned(&q0), poisoned(&r0), poisoned(&d0));
    let run = |rl: &RotList<T>, path: Option<ApplyPath>| {
        let mut qd = DevMat::from_host(gpu, qp.as_ref()).unwrap();
        let mut rd = DevMat::from_host(gpu, rp.as_ref()).unwrap();
        let mut dd = DevMat::from_host(gpu, dp.as_ref()).unwrap();
        {
            let mut qv = qd.block_mut(2, 3, nq, span);
            let mut rv = rd.block_mut(2, 3, span, nr);
            let mut dv = dd.block_mut(2, 3, span, 3);
            let mut targets = ApplyTarget::q_r_d(&mut qv, &mut rv, &mut dv);
            match path {
                Some(p) => gpu.two_phase_apply_path(rl, &mut targets, p).unwrap(),
                None => gpu.two_phase_apply(rl, &mut targets).unwrap(),
            }
        }
        (
            qd.to_host(gpu).unwrap(),
            rd.to_host(gpu).unwrap(),
            dd.to_host(gpu).unwrap(),
        )
    };
    let mut paths = vec![None, Some(ApplyPath::Step)];
    for warps in [1, 2, 3, 4, 8] {
        paths.push(Some(ApplyPath::Pipe { warps }));
    }
    for path in paths {
        let what = format!("{path:?} strip={strip} s0={s0} s1={s1} nq={nq}");
        let (gq, gr, gd) = run(&rl, path);
        check_padded(&format!("{what} Q"), &gq, &q);
        check_padded(&format!("{what} R"), &gr, &r);
        check_padded(&format!("{what} d"), &gd, &d);
    }
    // out-of-range warps and scheduled paths on a list without schedule: errors, and
    // the targets are left as they were
    let again = run(&rl, None);
    assert!(matches!(
        gpu.two_phase_apply_path(&rl, &mut [], ApplyPath::Pipe { warps: 9 }),
        Err(cuqr::Error::InvalidParam { .. })
    ));
    check_padded("default again", &again.0, &q);
    rl.forget_schedule();
    let (gq, gr, gd) = run(&rl, Some(ApplyPath::List));
    check_padded("list order Q", &gq, &q);
    check_padded("list order R", &gr, &r);
    check_padded("list order d", &gd, &d);
    let mut qd = DevMat::from_host(gpu, q0.as_ref()).unwrap();
    for path in [ApplyPath::Step, ApplyPath::Pipe { warps: 4 }] {
        let err = gpu.two_phase_apply_path(&rl, &mut [ApplyTarget::cols(&mut qd.view_mut())], path);
        assert!(
            matches!(err, Err(cuqr::Error::InvalidParam { .. })),
            "{err:?}"
        );
    }
    assert!(
        qd.to_host(gpu).unwrap() == q0,
        "a refused apply changed the target"
    );
}

#[test]
fn small_kernel_apply_paths_match_cpu_replay() {
    let Some(gpu) = common::gpu() else { return };
    // chain counts around one warp's window (8 chains for the pipe, 16 for the
    // one-warp step-order kernel) and a default pipe block's 64: 1, 2, b−1, b, b+1,
    // 3b+5; vector counts not multiples of 32
    for &(strip, s0, s1, nq) in &[
        (true, 45, 1, 45),
        (true, 45, 2, 33),
        (true, 30, 15, 77),
        (true, 30, 16, 31),
        (true, 30, 17, 45),
        (true, 20, 53, 45),
        (true, 12, 63, 45),
        (true, 12, 64, 65),
        (true, 12, 65, 45),
        (true, 7, 197, 45),
        (true, 1, 70, 45),
        (false, 1, 40, 45),
        (false, 2, 41, 33),
        (false, 15, 50, 77),
        (false, 16, 50, 31),
        (false, 17, 50, 45),
        (false, 53, 90, 45),
        (false, 63, 100, 45),
        (false, 64, 100, 65),
        (false, 65, 100, 45),
        (false, 197, 230, 45),
        (false, 3, 4, 45),
    ] {
        paths_apply_kernel::<f64>(&gpu, 21 + s0 as u64 + s1 as u64, strip, s0, s1, nq);
        paths_apply_kernel::<f32>(&gpu, 22 + s0 as u64 + s1 as u64, strip, s0, s1, nq);
    }
}

// ------------------------------------------------------- generate paths

/// A rotation list on the host: (c, s, plane) in application order.
type List<T> = Vec<(T, T, usize)>;

/// Every generate path of the strip wavefront on one driver, with the driver held as a
/// block of a NaN-padded matrix: the list and driver of each path equal the step
/// kernel's bit for bit (and the step kernel's list matches the CPU replay within
/// `check_list`'s tolerance via [`gen_strip_kernel`]'s sizes), the padding is untouched.
/// A shared path that does not fit is refused with nothing changed.
fn gen_strip_paths<T: GpuScalar>(gpu: &Gpu, seed: u64, h: usize, p: usize) {
    let mut g = common::rng(seed);
    let x0 = Mat::from_fn(h + p, p, |i, j| {
        if i <= h + j {
            T::from_f64(common::nonzero(&mut g))
        } else {
            T::ZERO
        }
    });
    let xp = poisoned(&x0);
    let run = |path: GenPath| -> cuqr::Result<(List<T>, Mat<T>)> {
        let mut xd = DevMat::from_host(gpu, xp.as_ref()).unwrap();
        let mut rl = RotList::<T>::with_capacity(gpu, p * h).unwrap();
        gpu.two_phase_gen_strip_path(&mut xd.block_mut(2, 3, h + p, p), h, &mut rl, path)?;
        Ok((rl.to_host(gpu).unwrap(), xd.to_host(gpu).unwrap()))
    };
    let (want_list, want_x) = run(GenPath::Step).unwrap();
    let limit = gpu.two_phase_smem_optin().unwrap();
    let fits = (4 * p + (h + p) * p) * std::mem::size_of::<T>() <= limit;
    for path in [
        GenPath::Pipe { shared: false },
        GenPath::Pipe { shared: true },
    ] {
        let what = format!("gen_strip {path:?} h={h} p={p}");
        match run(path) {
            Ok((list, x)) => {
                assert!(fits || path == GenPath::Pipe { shared: false }, "{what}");
                assert!(
                    list == want_list,
                    "{what}: list differs from the step kernel"
                );
                check_padded(
                    &what,
                    &x,
                    &Mat::from_fn(h + p, p, |i, j| want_x[(i + 2, j + 3)]),
                );
            }
            Err(e) => {
                assert!(
                    !fits && matches!(e, cuqr::Error::InvalidParam { .. }),
                    "{what}: {e}"
                );
            }
        }
    }
    // a refused launch leaves the driver and the list as they were
    if !fits {
        let mut xd = DevMat::from_host(gpu, xp.as_ref()).unwrap();
        let mut rl = RotList::<T>::with_capacity(gpu, p * h).unwrap();
        let e = gpu.two_phase_gen_strip_path(
            &mut xd.block_mut(2, 3, h + p, p),
            h,
            &mut rl,
            GenPath::Pipe { shared: true },
        );
        assert!(matches!(e, Err(cuqr::Error::InvalidParam { .. })));
        assert!(rl.is_empty(), "a refused launch filled the list");
        check_padded("refused strip", &xd.to_host(gpu).unwrap(), &x0);
    }
    // the default path: the chains of scans when they fit (bit for bit the same as
    // that path, which the replay tests check against the CPU), else the wavefront
    let mut xd = DevMat::from_host(gpu, xp.as_ref()).unwrap();
    let mut rl = RotList::<T>::with_capacity(gpu, p * h).unwrap();
    gpu.two_phase_gen_strip(&mut xd.block_mut(2, 3, h + p, p), h, &mut rl)
        .unwrap();
    let (default_list, default_x) = (rl.to_host(gpu).unwrap(), xd.to_host(gpu).unwrap());
    if gpu.two_phase_chains_fit::<T>(p, h + p).unwrap() {
        let (list, x) = run(GenPath::Chains).unwrap();
        assert!(
            default_list == list,
            "default strip list is not the chains'"
        );
        let same = (0..x.ncols()).all(|j| {
            (0..x.nrows()).all(|i| {
                let (a, b) = (default_x[(i, j)], x[(i, j)]);
                a == b || (a.to_f64().is_nan() && b.to_f64().is_nan())
            })
        });
        assert!(same, "default strip driver is not the chains'");
    } else {
        assert!(
            matches!(run(GenPath::Chains), Err(cuqr::Error::InvalidParam { .. })),
            "chains that do not fit were launched"
        );
        assert!(default_list == want_list, "default strip list");
        check_padded(
            "default strip driver",
            &default_x,
            &Mat::from_fn(h + p, p, |i, j| want_x[(i + 2, j + 3)]),
        );
    }
}

/// The largest h (or m for a block) whose driver of p chains (rows·p elements, with
/// rows = h + p for a strip) still fits the shared-memory path.
fn smem_edge<T: GpuScalar>(gpu: &Gpu, p: usize) -> usize {
    let elems = gpu.two_phase_smem_optin().unwrap() / std::mem::size_of::<T>();
    (elems - 4 * p) / p
}

/// As [`gen_strip_paths`] for the block wavefront (Z = rows k0..k0+p of a NaN-padded
/// matrix; the final compact Z in `z` compared too).
fn gen_block_paths<T: GpuScalar>(gpu: &Gpu, seed: u64, p: usize, m: usize) {
    let mut g = common::rng(seed);
    let full0 = common::signed_mat::<T>(&mut g, p + 4, m);
    let full = poisoned(&full0);
    let count = p * m - p * (p + 1) / 2;
    let qd = DevMat::from_host(gpu, full.as_ref()).unwrap();
    let run = |path: GenPath| -> cuqr::Result<(List<T>, Vec<T>)> {
        let mut z = DevVec::<T>::from_slice(gpu, &vec![T::from_f64(f64::NAN); p * m + 3]).unwrap();
        let mut rl = RotList::<T>::with_capacity(gpu, count).unwrap();
        gpu.two_phase_gen_block_path(&qd.block(4, 3, p, m), &mut z, &mut rl, path)?;
        Ok((rl.to_host(gpu).unwrap(), z.to_vec(gpu).unwrap()))
    };
    let (want_list, want_z) = run(GenPath::Step).unwrap();
    assert!(want_z[p * m..].iter().all(|v| v.to_f64().is_nan()));
    let limit = gpu.two_phase_smem_optin().unwrap();
    let fits = (4 * p + p * m) * std::mem::size_of::<T>() <= limit;
    for path in [
        GenPath::Pipe { shared: false },
        GenPath::Pipe { shared: true },
    ] {
        let what = format!("gen_block {path:?} p={p} m={m}");
        match run(path) {
            Ok((list, z)) => {
                assert!(fits || path == GenPath::Pipe { shared: false }, "{what}");
                assert!(
                    list == want_list,
                    "{what}: list differs from the step kernel"
                );
                let same = z
                    .iter()
                    .zip(&want_z)
                    .all(|(a, b)| a == b || (a.to_f64().is_nan() && b.to_f64().is_nan()));
                assert!(same, "{what}: Z differs from the step kernel");
            }
            Err(e) => {
                assert!(
                    !fits && matches!(e, cuqr::Error::InvalidParam { .. }),
                    "{what}: {e}"
                );
            }
        }
    }
    let mut z = DevVec::<T>::zeros(gpu, p * m).unwrap();
    let mut rl = RotList::<T>::with_capacity(gpu, count).unwrap();
    gpu.two_phase_gen_block(&qd.block(4, 3, p, m), &mut z, &mut rl)
        .unwrap();
    let default_list = rl.to_host(gpu).unwrap();
    if gpu.two_phase_chains_fit::<T>(p, m).unwrap() {
        let (list, z) = run(GenPath::Chains).unwrap();
        assert!(
            default_list == list,
            "default block list is not the chains'"
        );
        assert!(
            z[p * m..].iter().all(|v| v.to_f64().is_nan()),
            "Z scratch overrun"
        );
    } else {
        assert!(
            matches!(run(GenPath::Chains), Err(cuqr::Error::InvalidParam { .. })),
            "chains that do not fit were launched"
        );
        assert!(default_list == want_list, "default block list");
    }
    check_padded("Q after the generates", &qd.to_host(gpu).unwrap(), &full0);
}

/// Stage B of the rank-one update (docs/algorithms.md#rank-one-update) on a random upper Hessenberg
/// R held as a block of a NaN-padded matrix: the pipelined kernel against the step kernel (R and
/// the rotations appended after `k_off` = 3 dummy entries, bit for bit) and the step
/// kernel against a CPU replay (`givens`, `rot_pair`; rotations within `check_list`'s
/// tolerance, R within 10·m·u). n > GEN_R1_MAX_N: the pipe is refused, nothing changed.
fn gen_rank_one_b_paths<T: GpuScalar>(gpu: &Gpu, seed: u64, m: usize, n: usize) {
    let mut g = common::rng(seed);
    let r0 = Mat::from_fn(m, n, |i, j| {
        if i <= j + 1 {
            T::from_f64(common::nonzero(&mut g))
        } else {
            T::ZERO
        }
    });
    let w = vec![T::from_f64(common::nonzero(&mut g))];
    let v = common::signed_vec::<T>(&mut g, n);
    let (wd, vd) = (
        DevVec::from_slice(gpu, &w).unwrap(),
        DevVec::from_slice(gpu, &v).unwrap(),
    );
    let nb = n.min(m.saturating_sub(1));
    let pre: Vec<(T, T, usize)> = (0..3)
        .map(|i| (T::from_f64(0.6), T::from_f64(0.8), i))
        .collect();
    let rp = poisoned(&r0);
    let run = |path: GenPath| -> cuqr::Result<(List<T>, Mat<T>)> {
        let mut rd = DevMat::from_host(gpu, rp.as_ref()).unwrap();
        let mut rl = RotList::<T>::with_capacity(gpu, 3 + nb).unwrap();
        rl.upload(gpu, &pre).unwrap();
        gpu.two_phase_gen_rank_one_b_path(
            &mut rd.block_mut(2, 3, m, n),
            &wd.view(),
            &vd.view(),
            &mut rl,
            path,
        )?;
        Ok((rl.to_host(gpu).unwrap(), rd.to_host(gpu).unwrap()))
    };
    let (want_list, want_r) = run(GenPath::Step).unwrap();
    assert_eq!(want_list.len(), 3 + nb);
    assert!(want_list[..3] == pre[..]);
    // CPU replay of the step kernel's arithmetic
    let mut x = r0.clone();
    for j in 0..n {
        x[(0, j)] = w[0].mul_add(v[j], x[(0, j)]);
    }
    let mut cpu_list = pre.clone();
    for i in 0..nb {
        let (c, s, rho) = givens(x[(i, i)], x[(i + 1, i)]);
        x[(i, i)] = rho;
        x[(i + 1, i)] = T::ZERO;
        for j in i + 1..n {
            let (mut u, mut l) = (x[(i, j)], x[(i + 1, j)]);
            rot_pair(c, s, &mut u, &mut l);
            x[(i, j)] = u;
            x[(i + 1, j)] = l;
        }
        cpu_list.push((c, s, i));
    }
    check_list(&want_list, &cpu_list, m.max(n));
    let inner = Mat::from_fn(m, n, |i, j| want_r[(i + 2, j + 3)]);
    let tol = 10.0 * m.max(n) as f64 * T::UNIT_ROUNDOFF;
    for j in 0..n {
        assert!(
            max_rel(inner.col(j), x.col(j)) <= tol,
            "R column {j} vs CPU"
        );
        for i in j + 1..m.min(nb + 1) {
            assert_eq!(inner[(i, j)], T::ZERO, "R({i}, {j}) not exactly zero");
        }
    }
    check_padded(&format!("stage B step m={m} n={n}"), &want_r, &inner);
    let what = format!("stage B pipe m={m} n={n}");
    match run(GenPath::Pipe { shared: false }) {
        Ok((list, rg)) => {
            assert!(n <= GEN_R1_MAX_N, "{what}: accepted");
            assert!(
                list == want_list,
                "{what}: list differs from the step kernel"
            );
            check_padded(&what, &rg, &inner);
        }
        Err(e) => assert!(
            n > GEN_R1_MAX_N && matches!(e, cuqr::Error::InvalidParam { .. }),
            "{what}: {e}"
        ),
    }
    assert!(matches!(
        run(GenPath::Pipe { shared: true }),
        Err(cuqr::Error::InvalidParam { .. })
    ));
}

#[test]
fn small_kernel_gen_paths_match_step() {
    let Some(gpu) = common::gpu() else { return };
    for &(h, p) in &[(45, 7), (1, 1), (3, 9), (70, 1), (20, 40), (1, 33)] {
        gen_strip_paths::<f64>(&gpu, 31 + h as u64, h, p);
        gen_strip_paths::<f32>(&gpu, 32 + h as u64, h, p);
    }
    for &(p, m) in &[(5, 83), (1, 2), (1, 40), (9, 10), (12, 33), (33, 34)] {
        gen_block_paths::<f64>(&gpu, 41 + m as u64, p, m);
        gen_block_paths::<f32>(&gpu, 42 + m as u64, p, m);
    }
    for &(m, n) in &[
        (97, 40),
        (41, 40),
        (40, 40),
        (2, 1),
        (1, 1),
        (3, 1),
        (1, 5),
        (30, 50),
        (37, 257),
        // the last n of the two-column stage B kernel (2·256) and the first past it
        (520, 512),
        (300, 513),
    ] {
        gen_rank_one_b_paths::<f64>(&gpu, 51 + m as u64 + n as u64, m, n);
        gen_rank_one_b_paths::<f32>(&gpu, 52 + m as u64 + n as u64, m, n);
    }
}

/// Large drivers: more chains than threads, several columns a thread, and the driver
/// just inside / just outside the shared-memory path (both precisions).
#[test]
fn big_kernel_gen_paths_match_step() {
    let Some(gpu) = common::gpu() else { return };
    for &(h, p) in &[(600, 37), (20, 530)] {
        gen_strip_paths::<f64>(&gpu, 61 + h as u64, h, p);
        gen_strip_paths::<f32>(&gpu, 62 + h as u64, h, p);
    }
    gen_strip_kernel::<f64>(&gpu, 63, 600, 37);
    for &(p, m) in &[(37, 700), (530, 560)] {
        gen_block_paths::<f64>(&gpu, 64 + m as u64, p, m);
        gen_block_paths::<f32>(&gpu, 65 + m as u64, p, m);
    }
    gen_block_kernel::<f64>(&gpu, 66, 37, 700);
    gen_block_kernel::<f32>(&gpu, 67, 37, 700);
    let p = 20;
    let (e64, e32) = (smem_edge::<f64>(&gpu, p), smem_edge::<f32>(&gpu, p));
    for h in [e64 - p, e64 - p + 1] {
        gen_strip_paths::<f64>(&gpu, 68, h, p);
    }
    for h in [e32 - p, e32 - p + 1] {
        gen_strip_paths::<f32>(&gpu, 69, h, p);
    }
    for m in [e64, e64 + 1] {
        gen_block_paths::<f64>(&gpu, 70, p, m);
    }
    for m in [e32, e32 + 1] {
        gen_block_paths::<f32>(&gpu, 71, p, m);
    }
    gen_rank_one_b_paths::<f64>(&gpu, 72, 700, 600);
    gen_rank_one_b_paths::<f32>(&gpu, 73, 700, 600);
    // two columns a thread on a wide block where its thread limit allows, else twelve
    gen_rank_one_b_paths::<f64>(&gpu, 76, 1700, 1601);
    gen_rank_one_b_paths::<f32>(&gpu, 77, 2100, 2000);
    // twelve columns a thread exactly, and one column more than the pipe takes
    gen_rank_one_b_paths::<f64>(&gpu, 74, GEN_R1_MAX_N + 20, GEN_R1_MAX_N);
    gen_rank_one_b_paths::<f32>(&gpu, 75, 120, GEN_R1_MAX_N + 1);
}

/// The rank-one lists (stage A from `two_phase_gen_rank_one_a` on a random w of length
/// top + 1, stage B appended by `two_phase_gen_rank_one_b` on a random Hessenberg R with
/// n columns) through the sweep apply ([`ApplyPath::Sweep`], the default for these
/// lists) and the list-order apply, against a CPU replay, bit for bit, on NaN-padded
/// targets: stage A alone on a banded upper-triangular R (as in the update), and the
/// whole list on Q (`nq` rows) and d. A sweep with a banded target and an ascending part,
/// and a sweep of a list without one, are refused with nothing changed.
fn sweep_apply_kernel<T: GpuScalar>(gpu: &Gpu, seed: u64, top: usize, n: usize, nq: usize) {
    let mut g = common::rng(seed);
    let m = top + 1;
    let nb = n.min(m - 1);
    let w0 = common::signed_vec::<T>(&mut g, m);
    let mut wd = DevVec::from_slice(gpu, &w0).unwrap();
    let mut rl = RotList::<T>::with_capacity(gpu, top + nb).unwrap();
    gpu.two_phase_gen_rank_one_a(&mut wd.view_mut(), &mut rl)
        .unwrap();
    let stage_a = rl.to_host(gpu).unwrap();
    assert_eq!(stage_a.len(), top);
    // stage A on a banded R (m×n upper triangular), then the rank-one stage B on it
    let r0 = Mat::from_fn(m, n, |i, j| {
        if i <= j {
            T::from_f64(common::nonzero(&mut g))
        } else {
            T::ZERO
        }
    });
    let mut r_cpu = r0.clone();
    let (mut q_dummy, mut d_dummy) = (Mat::<T>::zeros(1, m), Mat::<T>::zeros(m, 1));
    replay(&stage_a, &mut q_dummy, &mut r_cpu, &mut d_dummy);
    let rp = poisoned(&r0);
    let run_r = |rl: &RotList<T>, path: ApplyPath| -> cuqr::Result<Mat<T>> {
        let mut rd = DevMat::from_host(gpu, rp.as_ref()).unwrap();
        gpu.two_phase_apply_path(
            rl,
            &mut [ApplyTarget::rows(&mut rd.block_mut(2, 3, m, n), true)],
            path,
        )?;
        Ok(rd.to_host(gpu).unwrap())
    };
    check_padded(
        "stage A sweep on R",
        &run_r(&rl, ApplyPath::Sweep).unwrap(),
        &r_cpu,
    );
    check_padded(
        "stage A list on R",
        &run_r(&rl, ApplyPath::List).unwrap(),
        &r_cpu,
    );
    let mut rd = DevMat::from_host(gpu, r_cpu.as_ref()).unwrap();
    let v = common::signed_vec::<T>(&mut g, n);
    let vd = DevVec::from_slice(gpu, &v).unwrap();
    gpu.two_phase_gen_rank_one_b(&mut rd.view_mut(), &wd.view(), &vd.view(), &mut rl)
        .unwrap();
    let list = rl.to_host(gpu).unwrap();
    assert_eq!(list.len(), top + nb);
    // the whole list on Q (columns) and d (rows)
    let q0 = common::signed_mat::<T>(&mut g, nq, m);
    let d0 = common::signed_mat::<T>(&mut g, m, 2);
    let (mut q, mut d) = (q0.clone(), d0.clone());
    let mut r_dummy = Mat::<T>::zeros(m, 1);
    replay(&list, &mut q, &mut r_dummy, &mut d);
    let (qp, dp) = (poisoned(&q0), poisoned(&d0));
    let run_qd = |rl: &RotList<T>, path: Option<ApplyPath>, banded_r: bool| {
        let mut qd = DevMat::from_host(gpu, qp.as_ref()).unwrap();
        let mut dd = DevMat::from_host(gpu, dp.as_ref()).unwrap();
        let mut rd = DevMat::from_host(gpu, rp.as_ref()).unwrap();
        let res = {
            let mut qv = qd.block_mut(2, 3, nq, m);
            let mut dv = dd.block_mut(2, 3, m, 2);
            let mut rv = rd.block_mut(2, 3, m, n);
            let mut targets = Vec::from(ApplyTarget::q_d(&mut qv, &mut dv));
            if banded_r {
                targets.push(ApplyTarget::rows(&mut rv, true));
            }
            match path {
                Some(p) => gpu.two_phase_apply_path(rl, &mut targets, p),
                None => gpu.two_phase_apply(rl, &mut targets),
            }
        };
        (
            res,
            qd.to_host(gpu).unwrap(),
            dd.to_host(gpu).unwrap(),
            rd.to_host(gpu).unwrap(),
        )
    };
    for path in [None, Some(ApplyPath::Sweep), Some(ApplyPath::List)] {
        let (res, gq, gd, _) = run_qd(&rl, path, false);
        res.unwrap();
        check_padded(&format!("{path:?} Q top={top} n={n}"), &gq, &q);
        check_padded(&format!("{path:?} d top={top} n={n}"), &gd, &d);
    }
    if nb > 0 {
        let (res, gq, _, gr) = run_qd(&rl, Some(ApplyPath::Sweep), true);
        assert!(
            matches!(res, Err(cuqr::Error::InvalidParam { .. })),
            "{res:?}"
        );
        check_padded("refused sweep Q", &gq, &q0);
        check_padded("refused sweep R", &gr, &r0);
        // the default falls back to list order for a banded target
        let (res, gq, _, _) = run_qd(&rl, None, true);
        res.unwrap();
        check_padded("default with banded R: Q", &gq, &q);
    }
    rl.forget_schedule();
    let (res, gq, _, _) = run_qd(&rl, Some(ApplyPath::Sweep), false);
    assert!(
        matches!(res, Err(cuqr::Error::InvalidParam { .. })),
        "{res:?}"
    );
    check_padded("sweep without a sweep list", &gq, &q0);
}

#[test]
fn small_kernel_apply_sweep_matches_list_order() {
    let Some(gpu) = common::gpu() else { return };
    // (top, n, rows of Q): batch edges (8), A1-like (top = n) and A2-like (top > n)
    // shapes, wide stage B (n > top), one rotation
    for &(top, n, nq) in &[
        (1, 1, 5),
        (7, 7, 33),
        (8, 8, 31),
        (9, 8, 45),
        (40, 40, 97),
        (17, 40, 3),
        (100, 33, 130),
        (300, 299, 70),
    ] {
        sweep_apply_kernel::<f64>(&gpu, 81 + top as u64, top, n, nq);
        sweep_apply_kernel::<f32>(&gpu, 82 + top as u64, top, n, nq);
    }
}

/// Stage A of the rank-one update (`two_phase_gen_rank_one_a`, a scan of scaled suffix
/// norms) on w of length top + 1 scaled by 2^`e`, with the last `zeros` entries zero
/// (then w(top − zeros) is negated, so the first live g is negative): every rotation
/// within 10·len·u of the serial chain's (`cpu::givens::givens` on (w(i), ρ_{i+1})),
/// w(0) = ‖w‖ and w(1..) exact zeros afterwards, and the list applied to w on the CPU
/// leaves ρ e₀ up to 10·len·u·‖w‖.
fn gen_rank_one_a_kernel<T: GpuScalar>(gpu: &Gpu, seed: u64, top: usize, e: i32, zeros: usize) {
    let mut g = common::rng(seed);
    let len = top + 1;
    let sc = 2f64.powi(e);
    let mut w0: Vec<T> = (0..len)
        .map(|i| {
            if i + zeros >= len && i > 0 {
                T::ZERO
            } else {
                T::from_f64(common::nonzero(&mut g) * sc)
            }
        })
        .collect();
    if zeros > 0 && zeros < len {
        let k = len - 1 - zeros;
        w0[k] = T::from_f64(-w0[k].to_f64().abs());
    }
    let mut wd = DevVec::from_slice(gpu, &w0).unwrap();
    let mut rl = RotList::<T>::with_capacity(gpu, top).unwrap();
    gpu.two_phase_gen_rank_one_a(&mut wd.view_mut(), &mut rl)
        .unwrap();
    let got = rl.to_host(gpu).unwrap();
    // the serial chain
    let mut wc = w0.clone();
    let mut want = Vec::with_capacity(top);
    for i in (0..top).rev() {
        let (c, s, rho) = givens(wc[i], wc[i + 1]);
        wc[i] = rho;
        wc[i + 1] = T::ZERO;
        want.push((c, s, i));
    }
    check_list(&got, &want, len);
    let norm = w0
        .iter()
        .map(|x| (x.to_f64() / sc).powi(2))
        .sum::<f64>()
        .sqrt()
        * sc;
    let tol = 10.0 * len as f64 * common::u::<T>();
    let wg = wd.to_vec(gpu).unwrap();
    assert!(
        (wg[0].to_f64() - norm).abs() <= tol * norm,
        "w(0) = {:?}, ‖w‖ = {norm:e}",
        wg[0]
    );
    assert!(
        wg[1..].iter().all(|&x| x == T::ZERO),
        "w(1..) not exact zeros"
    );
    // the list zeroes w: apply it in f64 to the original w
    let mut x: Vec<f64> = w0.iter().map(|v| v.to_f64() / sc).collect();
    for &(c, s, a) in &got {
        let (c, s) = (c.to_f64(), s.to_f64());
        let (u, l) = (x[a], x[a + 1]);
        x[a] = c * u + s * l;
        x[a + 1] = -s * u + c * l;
    }
    let nn = norm / sc;
    assert!((x[0] - nn).abs() <= tol * nn, "G·w(0) = {} vs {nn}", x[0]);
    for (i, v) in x.iter().enumerate().skip(1) {
        assert!(
            v.abs() <= tol * nn,
            "G·w({i}) = {v:e} not below {:e}",
            tol * nn
        );
    }
}

#[test]
fn small_kernel_gen_rank_one_a_matches_the_serial_chain() {
    let Some(gpu) = common::gpu() else { return };
    // one chunk a thread and several (block of 512), a single rotation, suffix zeros
    for &(top, zeros) in &[(1, 0), (2, 1), (700, 0), (513, 3), (5000, 40), (37, 37)] {
        gen_rank_one_a_kernel::<f64>(&gpu, 80 + top as u64, top, 0, zeros);
        gen_rank_one_a_kernel::<f32>(&gpu, 81 + top as u64, top, 0, zeros);
    }
    // scales where squares overflow or underflow without the power-of-two scaling
    for &e in &[600, -600, 1000, -1000] {
        gen_rank_one_a_kernel::<f64>(&gpu, 90, 900, e, 5);
    }
    for &e in &[70, -70, 120, -120] {
        gen_rank_one_a_kernel::<f32>(&gpu, 91, 900, e, 5);
    }
}

/// The chains generate gives the same rotations and driver bit for bit whatever the
/// number of blocks: one a chain, or fewer blocks taking several chains in turn (caps
/// of 1, 3 and 7 blocks on 9 to 40 chains; 900 and 700 chains, past the blocks an H100
/// holds at once, uncapped and on 100 blocks).
fn chains_grid_case<T: GpuScalar>(gpu: &Gpu, seed: u64) {
    let mut g = common::rng(seed);
    type Out<T> = (List<T>, Vec<T>);
    let caps = |chains: usize| {
        if chains > 100 {
            vec![100]
        } else {
            vec![1, 3, 7]
        }
    };
    for &(h, p) in &[(45, 40), (30, 900), (3, 9)] {
        let x0 = common::signed_mat::<T>(&mut g, h + p, p);
        let run = |cap: Option<usize>| -> Out<T> {
            gpu.two_phase_chains_block_cap(cap);
            let mut xd = DevMat::from_host(gpu, x0.as_ref()).unwrap();
            let mut rl = RotList::<T>::with_capacity(gpu, p * h).unwrap();
            gpu.two_phase_gen_strip_path(&mut xd.view_mut(), h, &mut rl, GenPath::Chains)
                .unwrap();
            (
                rl.to_host(gpu).unwrap(),
                xd.to_host(gpu).unwrap().into_vec(),
            )
        };
        let want = run(None);
        for cap in caps(p) {
            let got = run(Some(cap));
            assert!(got.0 == want.0, "strip h={h} p={p}: list with {cap} blocks");
            assert!(
                got.1 == want.1,
                "strip h={h} p={p}: driver with {cap} blocks"
            );
        }
    }
    for &(p, m) in &[(40, 300), (700, 900)] {
        let qz = DevMat::from_host(gpu, common::signed_mat::<T>(&mut g, p, m).as_ref()).unwrap();
        let count = p * m - p * (p + 1) / 2;
        let run = |cap: Option<usize>| -> Out<T> {
            gpu.two_phase_chains_block_cap(cap);
            let mut z = DevVec::<T>::zeros(gpu, p * m).unwrap();
            let mut rl = RotList::<T>::with_capacity(gpu, count).unwrap();
            gpu.two_phase_gen_block_path(&qz.view(), &mut z, &mut rl, GenPath::Chains)
                .unwrap();
            (rl.to_host(gpu).unwrap(), z.to_vec(gpu).unwrap())
        };
        let want = run(None);
        for cap in caps(p) {
            let got = run(Some(cap));
            assert!(got.0 == want.0, "block p={p} m={m}: list with {cap} blocks");
            assert!(got.1 == want.1, "block p={p} m={m}: Z with {cap} blocks");
        }
    }
    gpu.two_phase_chains_block_cap(None);
}

#[test]
fn gen_chains_any_grid_is_bit_identical() {
    let Some(gpu) = common::gpu() else { return };
    chains_grid_case::<f64>(&gpu, 1301);
    chains_grid_case::<f32>(&gpu, 1302);
}

/// `two_phase_apply_windowed` (windows of rotations applied by GEMM, docs/design.md)
/// against `two_phase_apply` on the same strip and block lists (made by the chains
/// generate), on a Cols target X (a random rows×span block of a NaN-padded matrix) and a
/// banded Rows target R (upper triangular span×37, NaN-padded): within 10·(span + p)·u
/// relative to the target's max|·|, R's exact zeros kept exactly, the padding untouched.
/// Windows from barely wider than p to wider than the span.
fn windowed_case<T: GpuScalar>(gpu: &Gpu, seed: u64) {
    let mut g = common::rng(seed);
    let rows = 301;
    let mut lists = Vec::new();
    for &(h, p) in &[(200, 40), (37, 11), (90, 130)] {
        let mut xd =
            DevMat::from_host(gpu, common::signed_mat::<T>(&mut g, h + p, p).as_ref()).unwrap();
        let mut rl = RotList::<T>::with_capacity(gpu, p * h).unwrap();
        gpu.two_phase_gen_strip(&mut xd.view_mut(), h, &mut rl)
            .unwrap();
        lists.push((rl, h + p, p));
    }
    for &(p, m) in &[(20, 500), (70, 333), (3, 40)] {
        let qz = DevMat::from_host(gpu, common::signed_mat::<T>(&mut g, p, m).as_ref()).unwrap();
        let count = p * m - p * (p + 1) / 2;
        let mut z = DevVec::<T>::zeros(gpu, p * m).unwrap();
        let mut rl = RotList::<T>::with_capacity(gpu, count).unwrap();
        gpu.two_phase_gen_block(&qz.view(), &mut z, &mut rl)
            .unwrap();
        lists.push((rl, m, p));
    }
    let nan = T::from_f64(f64::NAN);
    for (rl, span, p) in &lists {
        let (span, p) = (*span, *p);
        let x0 = common::signed_mat::<T>(&mut g, rows, span);
        let xp = Mat::from_fn(rows + 3, span + 2, |i, j| {
            if i < rows && j < span {
                x0[(i, j)]
            } else {
                nan
            }
        });
        let r0 = common::signed_mat::<T>(&mut g, span, 37);
        let rp = Mat::from_fn(span + 2, 39, |i, j| {
            if i < span && j < 37 {
                if i <= j {
                    r0[(i, j)]
                } else {
                    T::ZERO
                }
            } else {
                nan
            }
        });
        let run = |w: Option<usize>| -> cuqr::Result<(Mat<T>, Mat<T>)> {
            let mut xd = DevMat::from_host(gpu, xp.as_ref()).unwrap();
            let mut rd = DevMat::from_host(gpu, rp.as_ref()).unwrap();
            let mut xv = xd.block_mut(0, 0, rows, span);
            let mut rv = rd.block_mut(0, 0, span, 37);
            let mut targets = [ApplyTarget::cols(&mut xv), ApplyTarget::rows(&mut rv, true)];
            match w {
                None => gpu.two_phase_apply(rl, &mut targets)?,
                Some(w) => gpu.two_phase_apply_windowed(rl, &mut targets, w)?,
            }
            Ok((xd.to_host(gpu).unwrap(), rd.to_host(gpu).unwrap()))
        };
        let (xw, rw) = run(None).unwrap();
        for w in [p + 1, 2 * p + 5, span + p + 10] {
            let (xg, rg) = run(Some(w)).unwrap();
            for (got, want, (nr, nc), what) in
                [(&xg, &xw, (rows, span), "X"), (&rg, &rw, (span, 37), "R")]
            {
                let scale = common::max_abs(want.as_slice()).max(1.0);
                let tol = 10.0 * (span + p) as f64 * T::UNIT_ROUNDOFF * scale;
                for j in 0..got.ncols() {
                    for i in 0..got.nrows() {
                        let (a, b) = (got[(i, j)].to_f64(), want[(i, j)].to_f64());
                        let at = format!("{what} span {span} p {p} w {w} ({i}, {j})");
                        if i < nr && j < nc {
                            assert!((a - b).abs() <= tol, "{at}: {a} vs {b}");
                            if b == 0.0 {
                                assert_eq!(a, 0.0, "{at}: not exactly 0");
                            }
                        } else {
                            assert!(a.is_nan(), "{at}: padding written");
                        }
                    }
                }
            }
        }
        // a window no wider than the chains is refused
        assert!(matches!(
            run(Some(p)),
            Err(cuqr::Error::InvalidParam { .. })
        ));
    }
}

#[test]
fn windowed_apply_matches_the_apply() {
    let Some(gpu) = common::gpu() else { return };
    windowed_case::<f64>(&gpu, 1401);
    windowed_case::<f32>(&gpu, 1402);
}
