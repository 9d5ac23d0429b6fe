//! The seed Wavefront Givens stages (`cuqr::internals::gpu::givens_wavefront`, docs/design.md;
//! docs/algorithms.md#givens-rotations, docs/algorithms.md#restoring-the-strip,
//! docs/algorithms.md#row-deletion, docs/algorithms.md#rank-one-update) against serial CPU replays
//! of the same rotations and against the CPU backend, f32 and f64, on random nonzero inputs with
//! ragged sizes (m = 1000, n = 333, p ∈ {1, 17}, k0 at the start, middle and end).
//! Padding rows are NaN-poisoned and must stay untouched; tolerances are 10·m·u
//! (docs/algorithms.md#accuracy-measures);
//! R's strictly lower part must be exactly zero. Without a GPU the GPU tests print
//! "skipped"; the replay checks against the CPU backend always run.

mod common;

use common::{rng, signed_mat, signed_vec};
use cuqr::internals::cpu::givens::{givens, rot_pair, rot_rows};
use cuqr::internals::gpu::givens_wavefront::{
    delete_rows_rotate_composite, delete_rows_rotate_separate, insert_cols_strip_wavefront,
    rank_one_rotate_wavefront,
};
use cuqr::internals::gpu::{DevMat, DevVec, GpuQr, GpuScalar};
use cuqr::{
    CpuQr, FactorParams, Givens, Gpu, Mat, QPolicy, QrUpdate, RowRemoval, Scalar, UpdateParams,
};
use rand::rngs::StdRng;
use std::sync::Arc;

const M: usize = 1000;
const N: usize = 333;
const NRHS: usize = 2;

/// docs/algorithms.md#accuracy-measures tolerance for m rows.
fn tol<T: Scalar>(m: usize) -> f64 {
    10.0 * m as f64 * T::UNIT_ROUNDOFF
}

fn max_abs_mat<T: Scalar>(a: &Mat<T>) -> f64 {
    a.as_slice()
        .iter()
        .map(|x| x.to_f64().abs())
        .fold(0.0, f64::max)
}

/// max |a − b| / max(1, max |b|), elementwise over equal shapes.
fn rel_diff<T: Scalar>(a: &Mat<T>, b: &Mat<T>) -> f64 {
    assert_eq!((a.nrows(), a.ncols()), (b.nrows(), b.ncols()));
    let d = a
        .as_slice()
        .iter()
        .zip(b.as_slice())
        .map(|(x, y)| (x.to_f64() - y.to_f64()).abs())
        .fold(0.0, f64::max);
    d / max_abs_mat(b).max(1.0)
}

fn assert_close<T: Scalar>(what: &str, got: &Mat<T>, want: &Mat<T>, m: usize) {
    let e = rel_diff(got, want);
    assert!(
        e <= tol::<T>(m),
        "{what}: relative difference {e:e} > {:e}",
        tol::<T>(m)
    );
}

/// Strictly lower part of `r` is exactly zero (‖L‖ = 0, docs/algorithms.md#accuracy-measures).
fn assert_upper<T: Scalar>(what: &str, r: &Mat<T>) {
    for j in 0..r.ncols() {
        for i in j + 1..r.nrows() {
            assert!(
                r[(i, j)].to_f64() == 0.0,
                "{what}: R({i}, {j}) = {:e} is not exactly zero",
                r[(i, j)].to_f64()
            );
        }
    }
}

// ------------------------------------------------------------ device helpers

/// Uploads `a` with NaN in the padding rows (nrows..ld of each column).
fn upload_poisoned<T: GpuScalar>(gpu: &Gpu, a: &Mat<T>) -> DevMat<T> {
    let mut d = DevMat::<T>::zeros(gpu, a.nrows(), a.ncols()).unwrap();
    let ld = d.ld();
    let mut raw = vec![T::from_f64(f64::NAN); d.buf().len()];
    for j in 0..a.ncols() {
        raw[j * ld..j * ld + a.nrows()].copy_from_slice(a.col(j));
    }
    d.upload_raw(gpu, &raw).unwrap();
    d
}

/// Downloads `d`, checking that its padding rows still hold NaN.
fn download_checked<T: GpuScalar>(gpu: &Gpu, what: &str, d: &DevMat<T>) -> Mat<T> {
    let raw = d.download_raw(gpu).unwrap();
    let ld = d.ld();
    for j in 0..d.ncols() {
        for (i, x) in raw[j * ld + d.nrows()..(j + 1) * ld].iter().enumerate() {
            assert!(
                x.to_f64().is_nan(),
                "{what}: padding ({}, {j}) was written",
                d.nrows() + i
            );
        }
    }
    Mat::from_fn(d.nrows(), d.ncols(), |i, j| raw[i + j * ld])
}

// ------------------------------------------------------------ CPU replays

/// Rotates columns (i, k) of `a` (Q := Q·Gᵀ).
fn rot_cols<T: Scalar>(a: &mut Mat<T>, i: usize, k: usize, c: T, s: T) {
    let (x, y) = a.two_cols_mut(i, k);
    for (a, b) in x.iter_mut().zip(y.iter_mut()) {
        rot_pair(c, s, a, b);
    }
}

/// docs/algorithms.md#restoring-the-strip, sequential (as `update::insert_cols::run_cpu`).
fn replay_strip<T: Scalar>(
    r: &mut Mat<T>,
    q: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    p: usize,
    n_old: usize,
) {
    let (m, n) = (r.nrows(), r.ncols());
    if k0 == n_old {
        return;
    }
    for j in 0..p {
        let c = k0 + j;
        for row in (c + 1..=(n_old + j).min(m - 1)).rev() {
            let (cs, sn, rho) = givens(r[(row - 1, c)], r[(row, c)]);
            r[(row - 1, c)] = rho;
            r[(row, c)] = T::ZERO;
            rot_rows(r, row - 1, row, cs, sn, c + 1..n);
            rot_cols(q, row - 1, row, cs, sn);
            let nrhs = d.ncols();
            rot_rows(d, row - 1, row, cs, sn, 0..nrhs);
        }
    }
}

/// docs/algorithms.md#row-deletion rotations, sequential: Z = Q(k0..k0+p, :) zeroed right of its
/// diagonal, rotations applied to all of R's rows and d.
fn replay_delete_rows<T: Scalar>(
    q: &mut Mat<T>,
    r: &mut Mat<T>,
    d: &mut Mat<T>,
    k0: usize,
    p: usize,
) {
    let (m, n, nrhs) = (q.nrows(), r.ncols(), d.ncols());
    for i in 0..p {
        let zi = k0 + i;
        for j in (i + 1..m).rev() {
            let (c, s, rho) = givens(q[(zi, j - 1)], q[(zi, j)]);
            rot_cols(q, j - 1, j, c, s);
            q[(zi, j - 1)] = rho;
            q[(zi, j)] = T::ZERO;
            rot_rows(r, j - 1, j, c, s, 0..n);
            rot_rows(d, j - 1, j, c, s, 0..nrhs);
        }
    }
}

/// docs/algorithms.md#rank-one-update, sequential: stage A on w, R(0,:) += w₀vᵀ, stage B; rotations
/// over whole rows of R; strictly lower part of R cleared at the end.
fn replay_rank_one<T: Scalar>(w: &[T], v: &[T], r: &mut Mat<T>, q: &mut Mat<T>, d: &mut Mat<T>) {
    let (m, n, nrhs) = (q.nrows(), r.ncols(), d.ncols());
    let mut w = w.to_vec();
    for i in (0..m - 1).rev() {
        let (c, s, rho) = givens(w[i], w[i + 1]);
        w[i] = rho;
        w[i + 1] = T::ZERO;
        rot_rows(r, i, i + 1, c, s, 0..n);
        rot_cols(q, i, i + 1, c, s);
        rot_rows(d, i, i + 1, c, s, 0..nrhs);
    }
    for (j, &vj) in v.iter().enumerate() {
        r[(0, j)] = w[0].mul_add(vj, r[(0, j)]);
    }
    for i in 0..n.min(m - 1) {
        let (c, s, rho) = givens(r[(i, i)], r[(i + 1, i)]);
        rot_rows(r, i, i + 1, c, s, 0..n);
        r[(i, i)] = rho;
        r[(i + 1, i)] = T::ZERO;
        rot_cols(q, i, i + 1, c, s);
        rot_rows(d, i, i + 1, c, s, 0..nrhs);
    }
    for j in 0..n {
        for i in j + 1..m {
            r[(i, j)] = T::ZERO;
        }
    }
}

/// Q̃, R̃, d̃ of row deletion from the rotated Q, GᵀR, Gᵀd (docs/algorithms.md#row-deletion).
fn extract_deleted<T: Scalar>(
    q: &Mat<T>,
    r: &Mat<T>,
    d: &Mat<T>,
    k0: usize,
    p: usize,
) -> (Mat<T>, Mat<T>, Mat<T>) {
    let mp = q.nrows() - p;
    let qt = Mat::from_fn(mp, mp, |i, j| q[(if i < k0 { i } else { i + p }, j + p)]);
    let rt = Mat::from_fn(mp, r.ncols(), |i, j| r[(i + p, j)]);
    let dt = Mat::from_fn(mp, d.ncols(), |i, j| d[(i + p, j)]);
    (qt, rt, dt)
}

/// A factorised random m×n problem with Q (CPU backend).
fn state<T: Scalar>(g: &mut StdRng, m: usize, n: usize) -> (Mat<T>, CpuQr<T>) {
    let a = signed_mat::<T>(g, m, n);
    let b = signed_mat::<T>(g, m, NRHS);
    let st = common::StateKind::Full.cpu(&a, &b);
    (a, st)
}

/// R, d row signs: compare `got` with `want` after flipping each row i of got where the
/// diagonal signs of the two R factors differ (the factors are unique up to them).
fn row_signs<T: Scalar>(r_got: &Mat<T>, r_want: &Mat<T>) -> Vec<f64> {
    (0..r_got.nrows())
        .map(|i| {
            if i < r_got.ncols() && r_got[(i, i)].to_f64() * r_want[(i, i)].to_f64() < 0.0 {
                -1.0
            } else {
                1.0
            }
        })
        .collect()
}

fn flip<T: Scalar>(a: &Mat<T>, signs: &[f64], rows: usize) -> Mat<T> {
    Mat::from_fn(rows, a.ncols(), |i, j| {
        T::from_f64(a[(i, j)].to_f64() * signs[i])
    })
}

// ------------------------------------------------------------ CPU-only checks of the replays

/// The row-deletion replay gives the CPU backend's Q̃, R̃, d̃, with R̃ exactly upper
/// trapezoidal (the structural-zero argument the GPU functions rely on).
#[test]
fn replay_delete_rows_matches_cpu_backend() {
    let mut g = rng(7001);
    for (m, n, p, k0) in [
        (61usize, 23usize, 1usize, 0usize),
        (61, 23, 7, 30),
        (61, 23, 7, 54),
    ] {
        let (_, st) = state::<f64>(&mut g, m, n);
        let (mut q, mut r, mut d) = (
            st.q_ref().unwrap().clone(),
            st.r_ref().clone(),
            st.d_ref().clone(),
        );
        replay_delete_rows(&mut q, &mut r, &mut d, k0, p);
        let (qt, rt, dt) = extract_deleted(&q, &r, &d, k0, p);
        assert_upper("replay R̃", &rt);
        let mut cpu = st.clone();
        cpu.delete_rows(k0, p).unwrap();
        assert_close("R̃", &rt, &cpu.r().unwrap(), m);
        assert_close("d̃", &dt, &cpu.d().unwrap(), m);
        assert_close("Q̃", &qt, &cpu.q().unwrap().unwrap(), m);
    }
}

/// The A1 rank-one replay gives the CPU backend's R (up to row signs) and d(0:n).
#[test]
fn replay_rank_one_matches_cpu_backend() {
    let mut g = rng(7002);
    for (m, n) in [(61usize, 23usize), (24, 23)] {
        let (_, st) = state::<f64>(&mut g, m, n);
        let u: Vec<f64> = signed_vec(&mut g, m);
        let v: Vec<f64> = signed_vec(&mut g, n);
        let (mut q, mut r, mut d) = (
            st.q_ref().unwrap().clone(),
            st.r_ref().clone(),
            st.d_ref().clone(),
        );
        let w = qt_u(&q, &u);
        replay_rank_one(&w, &v, &mut r, &mut q, &mut d);
        let mut cpu = st.clone();
        cpu.rank_one(&u, &v).unwrap();
        let rc = cpu.r().unwrap();
        let signs = row_signs(&r, &rc);
        assert_close("R", &flip(&r, &signs, m), &rc, m);
        assert_close(
            "d(0:n)",
            &flip(&d, &signs, n),
            &Mat::from_fn(n, NRHS, |i, j| cpu.d().unwrap()[(i, j)]),
            m,
        );
    }
}

/// w = Qᵀu, accumulated in f64.
fn qt_u<T: Scalar>(q: &Mat<T>, u: &[T]) -> Vec<T> {
    (0..q.ncols())
        .map(|i| {
            T::from_f64(
                q.col(i)
                    .iter()
                    .zip(u)
                    .map(|(a, b)| a.to_f64() * b.to_f64())
                    .sum(),
            )
        })
        .collect()
}

/// A·B in f64, column-major.
fn prod64<T: Scalar>(a: &Mat<T>, b: &Mat<T>) -> Vec<f64> {
    let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
    let mut out = vec![0.0f64; m * n];
    for j in 0..n {
        let acc = &mut out[j * m..(j + 1) * m];
        for l in 0..k {
            let blj = b[(l, j)].to_f64();
            if blj != 0.0 {
                for (o, x) in acc.iter_mut().zip(a.col(l)) {
                    *o += x.to_f64() * blj;
                }
            }
        }
    }
    out
}

/// max |x − y| / max(1, max |y|).
fn max_rel(x: &[f64], y: &[f64]) -> f64 {
    assert_eq!(x.len(), y.len());
    let d = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    d / y.iter().map(|b| b.abs()).fold(1.0, f64::max)
}

/// max |QᵀQ − I|, in f64.
fn orth_err<T: Scalar>(q: &Mat<T>) -> f64 {
    let n = q.ncols();
    let cols: Vec<Vec<f64>> = (0..n)
        .map(|j| q.col(j).iter().map(|x| x.to_f64()).collect())
        .collect();
    let mut worst = 0.0f64;
    for i in 0..n {
        for j in i..n {
            let dot: f64 = cols[i].iter().zip(&cols[j]).map(|(a, b)| a * b).sum();
            worst = worst.max((dot - if i == j { 1.0 } else { 0.0 }).abs());
        }
    }
    worst
}

// ------------------------------------------------------------ GPU: insert_cols

/// R' after stage 1 of column insertion (docs/algorithms.md#column-insertion): columns < k0 and old
/// columns upper
/// triangular (old column k0+l nonzero in rows ≤ k0+l), new column j dense in rows ≤ n+j.
fn strip_input<T: Scalar>(g: &mut StdRng, m: usize, n_old: usize, p: usize, k0: usize) -> Mat<T> {
    let vals = signed_mat::<T>(g, m, n_old + p);
    Mat::from_fn(m, n_old + p, |i, j| {
        let last = if j < k0 {
            j
        } else if j < k0 + p {
            n_old + (j - k0)
        } else {
            j - p
        };
        if i <= last {
            vals[(i, j)]
        } else {
            T::ZERO
        }
    })
}

fn insert_cols_case<T: GpuScalar>(gpu: &Gpu, g: &mut StdRng, p: usize, k0: usize) {
    let (m, n_old) = (M, N);
    let r0 = strip_input::<T>(g, m, n_old, p, k0);
    let (_, st) = state::<T>(g, m, n_old);
    let q0 = st.q_ref().unwrap().clone();
    let d0 = signed_mat::<T>(g, m, NRHS);
    let (mut rd, mut qd, mut dd) = (
        upload_poisoned(gpu, &r0),
        upload_poisoned(gpu, &q0),
        upload_poisoned(gpu, &d0),
    );
    let before = gpu.launch_count();
    insert_cols_strip_wavefront(gpu, &mut rd, &mut qd, &mut dd, k0, p, n_old).unwrap();
    // Seed launch model (docs/algorithms.md#wavefront-schedule): 1 make + 3 applies per step, h+p−1
    // steps, plus 4 transposes and p column clears; nothing when appending.
    let steps = n_old - k0 + p - 1;
    let want = if k0 == n_old { 0 } else { 4 * steps + p + 4 };
    assert_eq!(
        gpu.launch_count() - before,
        want as u64,
        "launches p={p} k0={k0}"
    );
    let what = format!("insert_cols p={p} k0={k0}");
    let (r, q, d) = (
        download_checked(gpu, &what, &rd),
        download_checked(gpu, &what, &qd),
        download_checked(gpu, &what, &dd),
    );
    let (mut rw, mut qw, mut dw) = (r0.clone(), q0.clone(), d0.clone());
    replay_strip(&mut rw, &mut qw, &mut dw, k0, p, n_old);
    assert_upper(&what, &r);
    assert_close(&format!("{what}: R"), &r, &rw, m);
    assert_close(&format!("{what}: Q"), &q, &qw, m);
    assert_close(&format!("{what}: d"), &d, &dw, m);
    // The rotations are orthogonal: Q̃R̃ = Q R'.
    let e = max_rel(&prod64(&q, &r), &prod64(&q0, &r0));
    assert!(e <= tol::<T>(m), "{what}: ‖Q̃R̃ − QR'‖ {e:e}");
    if k0 == n_old {
        assert!(rel_diff(&r, &r0) == 0.0 && rel_diff(&q, &q0) == 0.0 && rel_diff(&d, &d0) == 0.0);
    }
}

fn insert_cols_all<T: GpuScalar>() {
    let Some(gpu) = common::gpu() else { return };
    let mut g = rng(7100 + T::UNIT_ROUNDOFF.log2().abs() as u64);
    for p in [1usize, 17] {
        for k0 in [0usize, N / 2, N - 1, N] {
            insert_cols_case::<T>(&gpu, &mut g, p, k0);
        }
    }
}

#[test]
fn insert_cols_strip_wavefront_f64() {
    insert_cols_all::<f64>();
}

#[test]
fn insert_cols_strip_wavefront_f32() {
    insert_cols_all::<f32>();
}

// ------------------------------------------------------------ GPU: delete_rows

fn delete_rows_case<T: GpuScalar>(gpu: &Gpu, g: &mut StdRng, composite: bool, p: usize, k0: usize) {
    let (m, n) = (M, N);
    let (_, st) = state::<T>(g, m, n);
    let (q0, r0, d0) = (
        st.q_ref().unwrap().clone(),
        st.r_ref().clone(),
        st.d_ref().clone(),
    );
    let (mut qd, mut rd, mut dd) = (
        upload_poisoned(gpu, &q0),
        upload_poisoned(gpu, &r0),
        upload_poisoned(gpu, &d0),
    );
    let before = gpu.launch_count();
    if composite {
        delete_rows_rotate_composite(gpu, &mut qd, &mut rd, &mut dd, k0, p).unwrap();
    } else {
        delete_rows_rotate_separate(gpu, &mut qd, &mut rd, &mut dd, k0, p).unwrap();
    }
    // Seed launch model (docs/algorithms.md#wavefront-schedule): m+p−2 steps; composite: make + 1
    // apply per step and
    // 3 + 3 pack/unpack copies; separate: make + 3 applies per step and 4 transposes.
    let steps = m + p - 2;
    let want = if composite {
        2 * steps + 6
    } else {
        4 * steps + 4
    };
    assert_eq!(
        gpu.launch_count() - before,
        want as u64,
        "launches p={p} k0={k0}"
    );
    let what = format!("delete_rows composite={composite} p={p} k0={k0}");
    let (q, r, d) = (
        download_checked(gpu, &what, &qd),
        download_checked(gpu, &what, &rd),
        download_checked(gpu, &what, &dd),
    );
    let (mut qw, mut rw, mut dw) = (q0, r0, d0);
    replay_delete_rows(&mut qw, &mut rw, &mut dw, k0, p);
    assert_close(&format!("{what}: Q"), &q, &qw, m);
    assert_close(&format!("{what}: R"), &r, &rw, m);
    assert_close(&format!("{what}: d"), &d, &dw, m);
    // Z·G = [I 0] and Q(rows ∉ Z, 0:p) = 0, up to rounding.
    let mut e_delta = 0.0f64;
    for i in 0..m {
        for j in 0..p {
            let want = if i >= k0 && i - k0 == j { 1.0 } else { 0.0 };
            e_delta = e_delta.max((q[(i, j)].to_f64() - want).abs());
        }
    }
    assert!(e_delta <= tol::<T>(m), "{what}: Δ − I {e_delta:e}");
    // Against the CPU backend: R̃ exactly upper trapezoidal, R̃, d̃, Q̃ as the CPU's.
    let (qt, rt, dt) = extract_deleted(&q, &r, &d, k0, p);
    assert_upper(&what, &rt);
    let mut cpu = st.clone();
    cpu.delete_rows(k0, p).unwrap();
    assert_close(&format!("{what}: R̃ vs CPU"), &rt, &cpu.r().unwrap(), m);
    assert_close(&format!("{what}: d̃ vs CPU"), &dt, &cpu.d().unwrap(), m);
    assert_close(
        &format!("{what}: Q̃ vs CPU"),
        &qt,
        &cpu.q().unwrap().unwrap(),
        m,
    );
}

fn delete_rows_all<T: GpuScalar>(composite: bool) {
    let Some(gpu) = common::gpu() else { return };
    let mut g = rng(7200 + composite as u64 + T::UNIT_ROUNDOFF.log2().abs() as u64);
    for p in [1usize, 17] {
        for k0 in [0usize, M / 2 - 3, M - p] {
            delete_rows_case::<T>(&gpu, &mut g, composite, p, k0);
        }
    }
}

#[test]
fn delete_rows_rotate_composite_f64() {
    delete_rows_all::<f64>(true);
}

#[test]
fn delete_rows_rotate_composite_f32() {
    delete_rows_all::<f32>(true);
}

#[test]
fn delete_rows_rotate_separate_f64() {
    delete_rows_all::<f64>(false);
}

#[test]
fn delete_rows_rotate_separate_f32() {
    delete_rows_all::<f32>(false);
}

// ------------------------------------------------------------ GPU: rank_one

fn rank_one_case<T: GpuScalar>(gpu: &Gpu, g: &mut StdRng, m: usize, n: usize) {
    let (a, st) = state::<T>(g, m, n);
    let u: Vec<T> = signed_vec(g, m);
    let v: Vec<T> = signed_vec(g, n);
    let (q0, r0, d0) = (
        st.q_ref().unwrap().clone(),
        st.r_ref().clone(),
        st.d_ref().clone(),
    );
    let w = qt_u(&q0, &u);
    let (mut qd, mut rd, mut dd) = (
        upload_poisoned(gpu, &q0),
        upload_poisoned(gpu, &r0),
        upload_poisoned(gpu, &d0),
    );
    let (wd, vd) = (
        DevVec::from_slice(gpu, &w).unwrap(),
        DevVec::from_slice(gpu, &v).unwrap(),
    );
    let before = gpu.launch_count();
    rank_one_rotate_wavefront(gpu, &wd, &vd, &mut rd, &mut qd, &mut dd).unwrap();
    // A make + apply pair per rotation (m−1 in stage A, min(n, m−1) in stage B), 4 packs,
    // w₀ copy + gemv, 3 unpacks and one clear per column with a strictly lower part.
    let want = 2 * (m - 1) + 3 * n.min(m - 1) + 9;
    assert_eq!(
        gpu.launch_count() - before,
        want as u64,
        "launches m={m} n={n}"
    );
    let what = format!("rank_one m={m} n={n}");
    let (q, r, d) = (
        download_checked(gpu, &what, &qd),
        download_checked(gpu, &what, &rd),
        download_checked(gpu, &what, &dd),
    );
    assert_eq!(wd.to_vec(gpu).unwrap(), w, "{what}: w was modified");
    let (mut qw, mut rw, mut dw) = (q0, r0, d0);
    replay_rank_one(&w, &v, &mut rw, &mut qw, &mut dw);
    assert_upper(&what, &r);
    assert_close(&format!("{what}: R"), &r, &rw, m);
    assert_close(&format!("{what}: Q"), &q, &qw, m);
    assert_close(&format!("{what}: d"), &d, &dw, m);
    // Properties: Q̃ᵀQ̃ = I, Q̃R̃ = A + uvᵀ.
    let e_q = orth_err(&q);
    assert!(e_q <= tol::<T>(m), "{what}: e_Q {e_q:e}");
    let a_new: Vec<f64> = (0..m * n)
        .map(|k| {
            let (i, j) = (k % m, k / m);
            a[(i, j)].to_f64() + u[i].to_f64() * v[j].to_f64()
        })
        .collect();
    let e_a = max_rel(&prod64(&q, &r), &a_new);
    assert!(e_a <= tol::<T>(m), "{what}: e_A {e_a:e}");
    // Against the CPU backend (variant A2): R up to row signs, d(0:n) with the same signs.
    let mut cpu = st.clone();
    cpu.rank_one(&u, &v).unwrap();
    let rc = cpu.r().unwrap();
    let signs = row_signs(&r, &rc);
    assert_close(&format!("{what}: R vs CPU"), &flip(&r, &signs, m), &rc, m);
    let dc = cpu.d().unwrap();
    let dc_top = Mat::from_fn(n, NRHS, |i, j| dc[(i, j)]);
    assert_close(
        &format!("{what}: d(0:n) vs CPU"),
        &flip(&d, &signs, n),
        &dc_top,
        m,
    );
}

fn rank_one_all<T: GpuScalar>() {
    let Some(gpu) = common::gpu() else { return };
    let mut g = rng(7300 + T::UNIT_ROUNDOFF.log2().abs() as u64);
    for (m, n) in [(M, N), (347usize, 346usize)] {
        rank_one_case::<T>(&gpu, &mut g, m, n);
    }
}

#[test]
fn rank_one_rotate_wavefront_f64() {
    rank_one_all::<f64>();
}

#[test]
fn rank_one_rotate_wavefront_f32() {
    rank_one_all::<f32>();
}

// ------------------------------------------------------------ through GpuQr

/// R, d(0:n) of `gs` against `cs` up to row signs; Q̃ of `gs` orthogonal and Q̃R̃ = A.
fn compare_states<T: GpuScalar>(what: &str, gs: &GpuQr<T>, cs: &CpuQr<T>, a: &Mat<f64>) {
    let m = a.nrows();
    let (rg, rc) = (gs.r().unwrap(), cs.r().unwrap());
    let signs = row_signs(&rg, &rc);
    assert_upper(what, &rg);
    assert_close(&format!("{what}: R vs CPU"), &flip(&rg, &signs, m), &rc, m);
    let n = rg.ncols();
    let (dg, dc) = (gs.d().unwrap(), cs.d().unwrap());
    let dc_top = Mat::from_fn(n, dc.ncols(), |i, j| dc[(i, j)]);
    assert_close(
        &format!("{what}: d(0:n) vs CPU"),
        &flip(&dg, &signs, n),
        &dc_top,
        m,
    );
    let q = gs.q().unwrap().unwrap();
    let e_q = orth_err(&q);
    assert!(e_q <= tol::<T>(m), "{what}: e_Q {e_q:e}");
    let e_a = max_rel(&prod64(&q, &rg), a.as_slice());
    assert!(e_a <= tol::<T>(m), "{what}: e_A {e_a:e}");
}

fn to64<T: Scalar>(a: &Mat<T>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64())
}

/// An update sequence through `GpuQr` with `Givens::Wavefront` and the given row-removal
/// strategy, against the same sequence on `CpuQr` (docs/design.md dispatch).
fn through_gpuqr<T: GpuScalar>(removal: RowRemoval) {
    let Some(gpu) = common::gpu() else { return };
    let gpu = Arc::new(gpu);
    let mut g = rng(7400 + removal as u64 + T::UNIT_ROUNDOFF.log2().abs() as u64);
    let (m, n) = (517usize, 173usize);
    let a0 = signed_mat::<T>(&mut g, m, n);
    let b = signed_mat::<T>(&mut g, m, NRHS);
    let fp = FactorParams::default();
    let mut gs = GpuQr::<T>::factorize(&gpu, a0.as_ref(), b.as_ref(), QPolicy::Full, fp).unwrap();
    let mut cs = CpuQr::<T>::factorize(a0.as_ref(), b.as_ref(), QPolicy::Full, fp).unwrap();
    let params = UpdateParams {
        givens: Givens::Wavefront,
        row_removal: removal,
        ..UpdateParams::default()
    };
    gs.set_params(params);
    cs.set_params(params);
    let mut a = to64(&a0);

    // insert 17 columns at 50
    let u = signed_mat::<T>(&mut g, m, 17);
    gs.insert_cols(50, u.as_ref()).unwrap();
    cs.insert_cols(50, u.as_ref()).unwrap();
    let nn = a.ncols() + 17;
    a = Mat::from_fn(m, nn, |i, j| match j {
        j if j < 50 => a[(i, j)],
        j if j < 67 => u[(i, j - 50)].to_f64(),
        j => a[(i, j - 17)],
    });
    compare_states("insert_cols k0=50 p=17", &gs, &cs, &a);

    // rank-one
    let uu: Vec<T> = signed_vec(&mut g, m);
    let vv: Vec<T> = signed_vec(&mut g, nn);
    gs.rank_one(&uu, &vv).unwrap();
    cs.rank_one(&uu, &vv).unwrap();
    a = Mat::from_fn(m, nn, |i, j| a[(i, j)] + uu[i].to_f64() * vv[j].to_f64());
    compare_states("rank_one", &gs, &cs, &a);

    // delete 17 rows at 201, then 1 row at 0
    for (k0, p) in [(201usize, 17usize), (0, 1)] {
        gs.delete_rows(k0, p).unwrap();
        cs.delete_rows(k0, p).unwrap();
        let rows = a.nrows() - p;
        a = Mat::from_fn(rows, nn, |i, j| a[(if i < k0 { i } else { i + p }, j)]);
        compare_states(&format!("delete_rows k0={k0} p={p}"), &gs, &cs, &a);
    }

    // insert one column in the middle
    let rows = a.nrows();
    let u1 = signed_mat::<T>(&mut g, rows, 1);
    gs.insert_cols(99, u1.as_ref()).unwrap();
    cs.insert_cols(99, u1.as_ref()).unwrap();
    a = Mat::from_fn(rows, nn + 1, |i, j| match j {
        j if j < 99 => a[(i, j)],
        99 => u1[(i, 0)].to_f64(),
        j => a[(i, j - 1)],
    });
    compare_states("insert_cols k0=99 p=1", &gs, &cs, &a);
}

#[test]
fn gpuqr_wavefront_composite_f64() {
    through_gpuqr::<f64>(RowRemoval::Composite);
}

#[test]
fn gpuqr_wavefront_composite_f32() {
    through_gpuqr::<f32>(RowRemoval::Composite);
}

#[test]
fn gpuqr_wavefront_separate_streams_f64() {
    through_gpuqr::<f64>(RowRemoval::SeparateStreams);
}

#[test]
fn gpuqr_wavefront_separate_streams_f32() {
    through_gpuqr::<f32>(RowRemoval::SeparateStreams);
}
