//! Two-phase Givens updates on the GPU (docs/algorithms.md#two-phase-design,
//! docs/algorithms.md#column-insertion, docs/algorithms.md#row-deletion,
//! docs/algorithms.md#rank-one-update): insert_cols, delete_rows and rank_one under
//! `Givens::TwoPhase` / `RowRemoval::TwoPhase` against the CPU backend and a faer model (R up
//! to row signs, x, residuals, QᵀQ = I and QR = Ã within 10·m·u, ‖L‖ = 0 exactly; see
//! host/tests/common/model.rs for every tolerance). The kernels alone: tests/gpu_two_phase_kernels.rs.
//! Without a device every test prints "skipped"; with `CUQR_REQUIRE_GPU=1` a missing device
//! fails.

mod common;

use std::sync::Arc;

use cuqr::GpuScalar;
use cuqr::{CpuQr, FactorParams, Givens, Gpu, Mat, QPolicy, QrUpdate, RowRemoval, UpdateParams};

fn two_phase_params() -> UpdateParams {
    UpdateParams {
        givens: Givens::TwoPhase,
        row_removal: RowRemoval::TwoPhase,
        ..UpdateParams::default()
    }
}

/// CPU and GPU states of the same random problem (m×n, 2 right-hand sides).
fn states<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    seed: u64,
    m: usize,
    n: usize,
) -> (CpuQr<T>, cuqr::GpuQr<T>, common::Model) {
    let mut g = common::rng(seed);
    let a = common::signed_mat::<T>(&mut g, m, n);
    let b = common::signed_mat::<T>(&mut g, m, 2);
    let fp = FactorParams::default();
    let cpu = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, fp).unwrap();
    let mut gq = cuqr::GpuQr::factorize(gpu, a.as_ref(), b.as_ref(), QPolicy::Full, fp).unwrap();
    gq.set_params(two_phase_params());
    (cpu, gq, common::Model::new(&a, &b))
}

/// The GPU state against the faer model (all docs/algorithms.md#accuracy-measures checks) and its R
/// against the CPU backend's R up to row signs.
fn compare<T: GpuScalar>(what: &str, cpu: &CpuQr<T>, gq: &cuqr::GpuQr<T>, model: &common::Model) {
    common::check_state(gq, model).unwrap_or_else(|e| panic!("{what}: GPU state: {e}"));
    common::check_r_matches(&gq.r().unwrap(), &cpu.r().unwrap(), &model.a)
        .unwrap_or_else(|e| panic!("{what}: GPU R vs CPU R: {e}"));
    // The CPU backend against the same model: both within the docs/algorithms.md#accuracy-measures
    // bounds of the same
    // reference, so x and the residuals of the two backends agree to twice those bounds.
    common::check_state(cpu, model).unwrap_or_else(|e| panic!("{what}: CPU state: {e}"));
}

fn insert_cols_case<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    seed: u64,
    m: usize,
    n: usize,
    p: usize,
    k0: usize,
) {
    let (mut cpu, mut gq, mut model) = states::<T>(gpu, seed, m, n);
    let u = common::signed_mat::<T>(&mut common::rng(seed + 1000), m, p);
    cpu.insert_cols(k0, u.as_ref()).unwrap();
    gq.insert_cols(k0, u.as_ref()).unwrap();
    model.insert_cols(k0, &u);
    compare(
        &format!("insert_cols m={m} n={n} p={p} k0={k0}"),
        &cpu,
        &gq,
        &model,
    );
}

fn delete_rows_case<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    seed: u64,
    m: usize,
    n: usize,
    p: usize,
    k0: usize,
) {
    let (mut cpu, mut gq, mut model) = states::<T>(gpu, seed, m, n);
    cpu.delete_rows(k0, p).unwrap();
    gq.delete_rows(k0, p).unwrap();
    model.delete_rows(k0, p);
    compare(
        &format!("delete_rows m={m} n={n} p={p} k0={k0}"),
        &cpu,
        &gq,
        &model,
    );
}

fn rank_one_case<T: GpuScalar>(gpu: &Arc<Gpu>, seed: u64, m: usize, n: usize) {
    let (mut cpu, mut gq, mut model) = states::<T>(gpu, seed, m, n);
    let mut g = common::rng(seed + 2000);
    let (u, v) = (
        common::signed_vec::<T>(&mut g, m),
        common::signed_vec::<T>(&mut g, n),
    );
    cpu.rank_one(&u, &v).unwrap();
    gq.rank_one(&u, &v).unwrap();
    model.rank_one(&u, &v);
    compare(&format!("rank_one m={m} n={n}"), &cpu, &gq, &model);
}

fn small_updates<T: GpuScalar>(gpu: &Arc<Gpu>) {
    // (m, n, p, k0): k0 at 0, middle and n; p = 1 and p > 1; m = n + p.
    for &(m, n, p, k0) in &[
        (97, 40, 3, 0),
        (97, 40, 1, 17),
        (97, 40, 5, 40),
        (97, 40, 1, 39),
        (5, 2, 2, 1),
        (3, 1, 2, 0),
        (45, 30, 15, 7),
    ] {
        insert_cols_case::<T>(gpu, 11 + m as u64 + k0 as u64, m, n, p, k0);
    }
    // (m, n, p, k0): k0 at 0, middle and m − p; m − p = n.
    for &(m, n, p, k0) in &[
        (97, 40, 5, 0),
        (97, 40, 1, 50),
        (97, 40, 9, 88),
        (6, 3, 3, 1),
        (4, 3, 1, 3),
        (70, 61, 9, 30),
    ] {
        delete_rows_case::<T>(gpu, 23 + m as u64 + k0 as u64, m, n, p, k0);
    }
    // A2 (m > n + 1), A1 (m = n + 1, m = n), tiny.
    for &(m, n) in &[(97, 40), (41, 40), (40, 40), (2, 1), (1, 1), (3, 1)] {
        rank_one_case::<T>(gpu, 37 + m as u64, m, n);
    }
}

fn big_updates<T: GpuScalar>(gpu: &Arc<Gpu>) {
    for &(p, k0) in &[(1, 0), (7, 166), (40, 333)] {
        insert_cols_case::<T>(gpu, 101 + k0 as u64, 1000, 333, p, k0);
    }
    for &(p, k0) in &[(1, 0), (9, 500), (30, 970)] {
        delete_rows_case::<T>(gpu, 201 + k0 as u64, 1000, 333, p, k0);
    }
    rank_one_case::<T>(gpu, 301, 1000, 333);
    // the pipelined stage B with several columns a thread (n > 256), A1 (m = n + 1)
    rank_one_case::<T>(gpu, 302, 700, 600);
    rank_one_case::<T>(gpu, 303, 530, 529);
    // row deletion whose Z (p×m) is just inside / just outside the shared-memory path
    // at f64 on an H100/H200 (227 KiB: p = 20, m ≤ 1448), and a wide Z
    delete_rows_case::<T>(gpu, 304, 1448, 400, 20, 700);
    delete_rows_case::<T>(gpu, 305, 1449, 400, 20, 0);
    // column insertion with a strip of p > 32 columns, k0 inside
    insert_cols_case::<T>(gpu, 306, 900, 500, 45, 123);
    // the windowed apply (≥ 20 chains over at least two windows): a strip of 70 columns
    // over h = 550 rows, and blocks of 100 and 300 rows out of 1000 (and above: the
    // blocks of 20 and 30 rows out of 1000–1449)
    use cuqr::internals::gpu::givens_two_phase::takes_windowed_apply;
    assert!(takes_windowed_apply(70, 600 - 50) && takes_windowed_apply(100, 999));
    assert!(takes_windowed_apply(300, 999) && takes_windowed_apply(20, 1447));
    assert!(takes_windowed_apply(30, 999) && !takes_windowed_apply(45, 500 - 123));
    insert_cols_case::<T>(gpu, 307, 1000, 600, 70, 50);
    delete_rows_case::<T>(gpu, 308, 1000, 333, 100, 200);
    delete_rows_case::<T>(gpu, 309, 1000, 333, 300, 0);
}

common::gpu_tests!(common::shared_gpu => small_updates { small_updates_f64: f64, small_updates_f32: f32 });

common::gpu_tests!(common::shared_gpu => big_updates { big_updates_f64: f64, big_updates_f32: f32 });

/// A failed update (rank deficient: U repeats a column of A) leaves the GPU state as it was.
#[test]
fn small_rank_deficient_insert_leaves_state() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (m, n) = (37, 11);
    let mut g = common::rng(5);
    let a = common::signed_mat::<f64>(&mut g, m, n);
    let b = common::signed_mat::<f64>(&mut g, m, 1);
    let fp = FactorParams::default();
    let mut gq = cuqr::GpuQr::factorize(&gpu, a.as_ref(), b.as_ref(), QPolicy::Full, fp).unwrap();
    gq.set_params(two_phase_params());
    let before = (gq.r().unwrap(), gq.d().unwrap(), gq.q().unwrap().unwrap());
    let u = Mat::from_fn(m, 1, |i, _| a[(i, 4)]);
    let err = gq.insert_cols(2, u.as_ref()).unwrap_err();
    assert!(matches!(err, cuqr::Error::RankDeficient { .. }), "{err}");
    assert!(gq.r().unwrap() == before.0 && gq.d().unwrap() == before.1);
    assert!(gq.q().unwrap().unwrap() == before.2);
}

/// Prints the launch count (kernels, cuBLAS calls and memcpys) of one update of each
/// kind at m = 8000, n = 3000, p = 200 (k0 = 0 for insert_cols). Prints only.
#[test]
fn launch_counts_print() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    let (m, n, p) = (8000, 3000, 200);
    let mut g = common::rng(77);
    let a = common::signed_mat::<f64>(&mut g, m, n);
    let b = common::signed_mat::<f64>(&mut g, m, 1);
    let u = common::signed_mat::<f64>(&mut g, m, p);
    let (uv, vv) = (
        common::signed_vec::<f64>(&mut g, m),
        common::signed_vec::<f64>(&mut g, n),
    );
    let fp = FactorParams::default();
    let fresh = || {
        let mut s =
            cuqr::GpuQr::factorize(&gpu, a.as_ref(), b.as_ref(), QPolicy::Full, fp).unwrap();
        s.set_params(two_phase_params());
        gpu.synchronize().unwrap();
        s
    };
    let mut s = fresh();
    let c0 = gpu.launch_count();
    let t = std::time::Instant::now();
    s.insert_cols(0, u.as_ref()).unwrap();
    gpu.synchronize().unwrap();
    println!(
        "two-phase insert_cols m={m} n={n} p={p} k0=0: {} launches, {:.3} s",
        gpu.launch_count() - c0,
        t.elapsed().as_secs_f64()
    );
    drop(s);
    let mut s = fresh();
    let c0 = gpu.launch_count();
    let t = std::time::Instant::now();
    s.delete_rows(0, p).unwrap();
    gpu.synchronize().unwrap();
    println!(
        "two-phase delete_rows m={m} n={n} p={p} k0=0: {} launches, {:.3} s",
        gpu.launch_count() - c0,
        t.elapsed().as_secs_f64()
    );
    drop(s);
    let mut s = fresh();
    let c0 = gpu.launch_count();
    let t = std::time::Instant::now();
    s.rank_one(&uv, &vv).unwrap();
    gpu.synchronize().unwrap();
    println!(
        "two-phase rank_one m={m} n={n}: {} launches, {:.3} s",
        gpu.launch_count() - c0,
        t.elapsed().as_secs_f64()
    );
}
