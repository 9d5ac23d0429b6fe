//! Every kernel of docs/kernels.md, in f32 and f64, against its serial CPU
//! reference in `cuqr::internals::cpu::reference`: random nonzero inputs,
//! sizes 1, 31, 33, 1000, 4097 where they apply, outputs poisoned with NaN
//! before the launch, untouched regions (padding, sentinels) checked, and
//! tolerances c·n·u (docs/algorithms.md#accuracy-measures). Without a GPU each test prints
//! "skipped".

mod common;

use common::{max_abs, max_abs_diff, nonzero, signed_mat, signed_vec, u};
use cuqr::internals::cpu::reference;
use cuqr::internals::gpu::{DevMat, DevVec, GpuScalar};
use cuqr::{Gpu, Scalar};
use rand::rngs::StdRng;

fn nan<T: Scalar>() -> T {
    T::from_f64(f64::NAN)
}

fn same_bits<T: Scalar>(a: T, b: T) -> bool {
    a.to_f64().to_bits() == b.to_f64().to_bits()
}

/// A device vector of `n` NaNs (an output poisoned before the launch).
fn nan_vec<T: GpuScalar>(gpu: &Gpu, n: usize) -> DevVec<T> {
    let mut v = DevVec::<T>::zeros(gpu, n).unwrap();
    v.fill(gpu, nan()).unwrap();
    v
}

/// A DevMat whose padding rows (nrows..ld of each column) hold NaN, with
/// element (i, j) = f(i, j); returns the raw host copy as well.
fn dev_mat_nan_padded<T: GpuScalar>(
    gpu: &Gpu,
    nrows: usize,
    ncols: usize,
    mut f: impl FnMut(usize, usize) -> T,
) -> (DevMat<T>, Vec<T>) {
    let mut m = DevMat::<T>::zeros(gpu, nrows, ncols).unwrap();
    let ld = m.ld();
    let mut raw = vec![nan::<T>(); m.buf().len()];
    for j in 0..ncols {
        for i in 0..nrows {
            raw[i + j * ld] = f(i, j);
        }
    }
    m.upload_raw(gpu, &raw).unwrap();
    (m, raw)
}

// ---------------------------------------------------------------- house

fn house_case<T: GpuScalar>(gpu: &Gpu, rng: &mut StdRng, n: usize, zero_tail: bool, scale: f64) {
    let alpha0 = T::from_f64(nonzero(rng) * scale);
    let x0: Vec<T> = if zero_tail {
        vec![T::ZERO; n]
    } else {
        (0..n).map(|_| T::from_f64(nonzero(rng) * scale)).collect()
    };
    let sentinels: Vec<T> = signed_vec(rng, 2);
    let mut host = vec![alpha0];
    host.extend_from_slice(&x0);
    host.extend_from_slice(&sentinels);
    let mut buf = DevVec::from_slice(gpu, &host).unwrap();
    let mut tau = nan_vec::<T>(gpu, 2);
    {
        let mut whole = buf.view_mut();
        let (mut a, mut rest) = whole.split_at_mut(1);
        let mut x = rest.slice_mut(0..n);
        let mut t = tau.slice_mut(0..1);
        gpu.householder_house(&mut a, &mut x, &mut t).unwrap();
    }
    let out = buf.to_vec(gpu).unwrap();
    let tau_out = tau.to_vec(gpu).unwrap();

    let (mut beta_ref, mut v_ref, mut tau_ref) = (alpha0, x0.clone(), nan::<T>());
    reference::house(&mut beta_ref, &mut v_ref, &mut tau_ref);

    let what = format!("{} n={n} zero_tail={zero_tail} scale={scale:e}", T::NAME);
    assert!(
        same_bits(out[n + 1], sentinels[0]) && same_bits(out[n + 2], sentinels[1]),
        "{what}: wrote past x"
    );
    assert!(tau_out[1].to_f64().is_nan(), "{what}: wrote past tau");
    if zero_tail || n == 0 {
        assert!(same_bits(out[0], alpha0), "{what}: beta must equal alpha");
        assert_eq!(tau_out[0].to_f64(), 0.0, "{what}: tau must be 0");
        assert!(
            out[1..n + 1].iter().all(|v| v.to_f64() == 0.0),
            "{what}: tail must be 0"
        );
        return;
    }
    let tol = 10.0 * n as f64 * u::<T>();
    let (beta, beta_r) = (out[0].to_f64(), beta_ref.to_f64());
    assert!(
        (beta - beta_r).abs() <= tol * beta_r.abs(),
        "{what}: beta {beta:e} vs {beta_r:e}"
    );
    let (t, t_r) = (tau_out[0].to_f64(), tau_ref.to_f64());
    assert!((1.0..=2.0).contains(&t_r) || t_r == 0.0);
    assert!((t - t_r).abs() <= tol, "{what}: tau {t:e} vs {t_r:e}");
    let dv = max_abs_diff(&out[1..n + 1], &v_ref);
    assert!(
        dv <= tol * max_abs(&v_ref).max(1.0),
        "{what}: v differs by {dv:e}"
    );
}

fn house_all<T: GpuScalar>(gpu: &Gpu) {
    let mut rng = common::rng(11);
    for n in [0usize, 1, 31, 33, 1000, 4097] {
        house_case::<T>(gpu, &mut rng, n, false, 1.0);
    }
    for n in [1usize, 33, 4097] {
        house_case::<T>(gpu, &mut rng, n, true, 1.0);
    }
    // Squares overflow (f32: 1e30² > 3.4e38; f64: 1e200²) or underflow without scaling.
    let (big, small) = if T::NAME == "f32" {
        (1e30, 1e-30)
    } else {
        (1e200, 1e-200)
    };
    house_case::<T>(gpu, &mut rng, 1000, false, big);
    house_case::<T>(gpu, &mut rng, 1000, false, small);
    // Subnormal α and tail (β subnormal): without LAPACK's rescaling 1/(α − β) and the
    // reciprocal of the norm's scale overflow (NaN or ∞ in v).
    let tiny = if T::NAME == "f32" { 1e-40 } else { 1e-310 };
    for n in [1usize, 33, 1000] {
        house_case::<T>(gpu, &mut rng, n, false, tiny);
    }
}

common::gpu_tests!(common::gpu => house_all { householder_house_f32: f32, householder_house_f64: f64 });

// ---------------------------------------------------------------- reductions

fn reductions<T: GpuScalar>(gpu: &Gpu) {
    let mut rng = common::rng(12);
    let (big, _) = if T::NAME == "f32" {
        (1e30, 0.0)
    } else {
        (1e200, 0.0)
    };
    for (n, scale) in [
        (1usize, 1.0),
        (31, 1.0),
        (33, 1.0),
        (1000, 1.0),
        (4097, 1.0),
        (1000, big),
    ] {
        let x: Vec<T> = (0..n)
            .map(|_| T::from_f64(nonzero(&mut rng) * scale))
            .collect();
        let y: Vec<T> = signed_vec(&mut rng, n);
        let (dx, dy) = (
            DevVec::from_slice(gpu, &x).unwrap(),
            DevVec::from_slice(gpu, &y).unwrap(),
        );
        let mut out = DevVec::<T>::zeros(gpu, 2).unwrap();
        let tol = 10.0 * n as f64 * u::<T>();

        // dot (scale 1 only: the scaled x·y could overflow by design of the data).
        if scale == 1.0 {
            out.fill(gpu, nan()).unwrap();
            gpu.reduce_dot(&dx.view(), &dy.view(), &mut out.slice_mut(0..1))
                .unwrap();
            let got = out.to_vec(gpu).unwrap();
            let exact: f64 = x.iter().zip(&y).map(|(a, b)| a.to_f64() * b.to_f64()).sum();
            let mag: f64 = x
                .iter()
                .zip(&y)
                .map(|(a, b)| (a.to_f64() * b.to_f64()).abs())
                .sum();
            let cpu = reference::dot(&x, &y).to_f64();
            assert!((cpu - exact).abs() <= tol * mag);
            assert!(
                (got[0].to_f64() - exact).abs() <= tol * mag,
                "{} dot n={n}: {:e} vs {exact:e}",
                T::NAME,
                got[0].to_f64()
            );
            assert!(got[1].to_f64().is_nan(), "dot wrote past out");
        }

        out.fill(gpu, nan()).unwrap();
        gpu.reduce_nrm2(&dx.view(), &mut out.slice_mut(0..1))
            .unwrap();
        let got = out.to_vec(gpu).unwrap();
        let x64: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
        let want = reference::nrm2(&x64);
        assert!(want.is_finite());
        assert!(
            (got[0].to_f64() - want).abs() <= tol * want,
            "{} nrm2 n={n} scale={scale:e}: {:e} vs {want:e}",
            T::NAME,
            got[0].to_f64()
        );
        assert!((reference::nrm2(&x).to_f64() - want).abs() <= tol * want);
        assert!(got[1].to_f64().is_nan(), "nrm2 wrote past out");
    }
    // n = 0: the norm of nothing is 0, the dot of nothing is 0.
    let e = DevVec::<T>::zeros(gpu, 0).unwrap();
    let mut out = DevVec::<T>::zeros(gpu, 1).unwrap();
    out.fill(gpu, nan()).unwrap();
    gpu.reduce_nrm2(&e.view(), &mut out.view_mut()).unwrap();
    assert_eq!(out.to_vec(gpu).unwrap()[0].to_f64(), 0.0);
    out.fill(gpu, nan()).unwrap();
    gpu.reduce_dot(&e.view(), &e.view(), &mut out.view_mut())
        .unwrap();
    assert_eq!(out.to_vec(gpu).unwrap()[0].to_f64(), 0.0);
}

common::gpu_tests!(common::gpu => reductions { reduce_dot_nrm2_f32: f32, reduce_dot_nrm2_f64: f64 });

// ---------------------------------------------------------------- Givens wavefront

/// One make launch on random pitched data with (0, 0) pairs and (f < 0, 0) pairs.
fn make_case<T: GpuScalar>(gpu: &Gpu, rng: &mut StdRng, count: usize) {
    let (row0, col0) = (3usize, 2usize);
    let prow = row0 + 2 * (count - 1) + 2; // pitched rows
    let pcol = col0 + count + 1; // pitched columns
                                 // Pitched (r, c) = DevMat (c, r). Pairs i ≡ 3 (mod 7) are (0, 0); pairs
                                 // i ≡ 5 (mod 7) have g = 0 and a random f (c = ±1, s = 0).
    let (dm, raw) = dev_mat_nan_padded::<T>(gpu, pcol, prow, |c, r| {
        let i = (r.saturating_sub(row0 - 1)) / 2;
        let in_pair = c >= col0 && c - col0 == i && i < count;
        let zero_pair = in_pair && i % 7 == 3;
        let zero_g = in_pair && i % 7 == 5 && r == row0 + 2 * i;
        if zero_pair || zero_g {
            T::ZERO
        } else {
            T::from_f64(nonzero(rng))
        }
    });
    let pitch = dm.ld();
    let (mut c, mut s) = (nan_vec::<T>(gpu, count + 2), nan_vec::<T>(gpu, count + 2));
    gpu.givens_make_wavefront(
        &dm.view(),
        row0,
        col0,
        count,
        &mut c.slice_mut(0..count),
        &mut s.slice_mut(0..count),
    )
    .unwrap();
    let (cg, sg) = (c.to_vec(gpu).unwrap(), s.to_vec(gpu).unwrap());
    let (mut cr, mut sr) = (vec![nan::<T>(); count], vec![nan::<T>(); count]);
    reference::givens_make_wavefront(&raw, pitch, row0, col0, count, &mut cr, &mut sr);
    let tol = 10.0 * 2.0 * u::<T>();
    for i in 0..count {
        if i % 7 == 3 {
            assert_eq!(
                (cg[i].to_f64(), sg[i].to_f64()),
                (1.0, 0.0),
                "{} (0,0) pair {i}",
                T::NAME
            );
        }
        if i % 7 == 5 {
            assert!(
                sg[i].to_f64() == 0.0 && cg[i].to_f64().abs() == 1.0,
                "{} g = 0 pair {i}",
                T::NAME
            );
        }
        assert!(
            (cg[i].to_f64() - cr[i].to_f64()).abs() <= tol
                && (sg[i].to_f64() - sr[i].to_f64()).abs() <= tol,
            "{} count={count} rotation {i}: ({:e}, {:e}) vs ({:e}, {:e})",
            T::NAME,
            cg[i].to_f64(),
            sg[i].to_f64(),
            cr[i].to_f64(),
            sr[i].to_f64()
        );
    }
    for k in count..count + 2 {
        assert!(
            cg[k].to_f64().is_nan() && sg[k].to_f64().is_nan(),
            "make wrote past count"
        );
    }
    let after = dm.download_raw(gpu).unwrap();
    assert!(
        after.iter().zip(&raw).all(|(a, b)| same_bits(*a, *b)),
        "make must not write a"
    );
}

/// A full strip sweep (docs/algorithms.md#givens-rotations), one make + one apply launch per step,
/// against the same sweep through the CPU references.
fn sweep_case<T: GpuScalar>(gpu: &Gpu, rng: &mut StdRng, h: usize, p: usize, extra: usize) {
    let (nrows, ncols) = (h + p, p + extra);
    let (mut dm, mut cpu) = dev_mat_nan_padded::<T>(gpu, ncols, nrows, |c, r| {
        let live = c >= p || r <= h + c;
        if live {
            T::from_f64(nonzero(rng))
        } else {
            T::ZERO
        }
    });
    let pitch = dm.ld();
    let norm = cpu
        .iter()
        .filter(|v| !v.to_f64().is_nan())
        .map(|v| v.to_f64() * v.to_f64())
        .sum::<f64>()
        .sqrt();
    let (mut c, mut s) = (nan_vec::<T>(gpu, p), nan_vec::<T>(gpu, p));
    let (mut cc, mut cs) = (vec![T::ZERO; p], vec![T::ZERO; p]);
    for t in 0..h + p - 1 {
        let (row0, col0, count) = reference::strip_step(h, p, t).unwrap();
        gpu.givens_make_wavefront(
            &dm.view(),
            row0,
            col0,
            count,
            &mut c.slice_mut(0..count),
            &mut s.slice_mut(0..count),
        )
        .unwrap();
        gpu.givens_apply_wavefront(
            &mut dm.view_mut(),
            row0,
            count,
            col0..ncols,
            1,
            &c.slice(0..count),
            &s.slice(0..count),
        )
        .unwrap();
        reference::givens_make_wavefront(&cpu, pitch, row0, col0, count, &mut cc, &mut cs);
        reference::givens_apply_wavefront(&mut cpu, pitch, row0, count, col0, 1, ncols, &cc, &cs);
    }
    let got = dm.download_raw(gpu).unwrap();
    let tol = 10.0 * nrows as f64 * u::<T>() * norm;
    let what = format!("{} sweep h={h} p={p} extra={extra}", T::NAME);
    for r in 0..nrows {
        for col in 0..pitch {
            let (g, w) = (got[r * pitch + col], cpu[r * pitch + col]);
            if col >= ncols {
                assert!(g.to_f64().is_nan(), "{what}: padding ({r}, {col}) touched");
                continue;
            }
            assert!(
                (g.to_f64() - w.to_f64()).abs() <= tol,
                "{what}: ({r}, {col}) {:e} vs {:e}",
                g.to_f64(),
                w.to_f64()
            );
            if col < p && r > col && r <= h + col {
                assert!(
                    g.to_f64().abs() <= tol,
                    "{what}: ({r}, {col}) not zeroed: {:e}",
                    g.to_f64()
                );
            }
        }
    }
}

fn wavefront_all<T: GpuScalar>(gpu: &Gpu) {
    let mut rng = common::rng(13);
    for count in [1usize, 31, 33, 1000] {
        make_case::<T>(gpu, &mut rng, count);
    }
    for (h, p, extra) in [
        (1usize, 1usize, 0usize),
        (33, 31, 2),
        (31, 33, 5),
        (1000, 33, 65),
        (2, 1, 4096),
    ] {
        sweep_case::<T>(gpu, &mut rng, h, p, extra);
    }
}

common::gpu_tests!(common::gpu => wavefront_all { givens_wavefront_f32: f32, givens_wavefront_f64: f64 });

// ---------------------------------------------------------------- transpose

fn transpose_all<T: GpuScalar>(gpu: &Gpu) {
    let mut rng = common::rng(14);
    for (rows, cols) in [
        (1usize, 1usize),
        (33, 31),
        (31, 33),
        (1000, 333),
        (4097, 65),
    ] {
        // Source is an offset block (2, 1) of a larger matrix, to exercise views.
        let big = signed_mat::<T>(&mut rng, rows + 3, cols + 2);
        let src = DevMat::from_host(gpu, big.as_ref()).unwrap();
        let mut dst = DevMat::<T>::zeros(gpu, cols, rows).unwrap();
        dst.fill(gpu, nan()).unwrap();
        gpu.transpose_padded(&src.block(2, 1, rows, cols), &mut dst.view_mut())
            .unwrap();
        let got = dst.download_raw(gpu).unwrap();
        let ldd = dst.ld();
        // CPU reference on the same layouts.
        let lds = rows + 3;
        let mut want = vec![nan::<T>(); ldd * rows];
        reference::transpose_padded(&big.as_slice()[2 + lds..], lds, rows, cols, &mut want, ldd);
        for i in 0..rows {
            for j in 0..ldd {
                let (g, w) = (got[j + i * ldd], want[j + i * ldd]);
                assert!(
                    same_bits(g, w),
                    "{} transpose {rows}x{cols}: dst({j}, {i})",
                    T::NAME
                );
                if j < cols {
                    assert!(same_bits(g, big[(2 + i, 1 + j)]));
                } else {
                    assert!(g.to_f64().is_nan(), "padding touched");
                }
            }
        }
    }
}

common::gpu_tests!(common::gpu => transpose_all { transpose_padded_f32: f32, transpose_padded_f64: f64 });

// ---------------------------------------------------------------- double_sum

fn double_sum_all<T: GpuScalar>(gpu: &Gpu) {
    let mut rng = common::rng(15);
    for (r, c) in [(1usize, 1usize), (33, 31), (1000, 333), (4097, 65)] {
        let (rr, cc, r0, c0) = (r + 3, c + 4, 1usize, 2usize);
        let (mut cm, raw) =
            dev_mat_nan_padded::<T>(gpu, rr, cc, |_, _| T::from_f64(nonzero(&mut rng)));
        let ld = cm.ld();
        let a: Vec<T> = signed_vec(&mut rng, r * c);
        let b: Vec<T> = signed_vec(&mut rng, r * c);
        let (da, db) = (
            DevVec::from_slice(gpu, &a).unwrap(),
            DevVec::from_slice(gpu, &b).unwrap(),
        );
        gpu.reduce_double_sum(&da.view(), &db.view(), &mut cm.block_mut(r0, c0, r, c))
            .unwrap();
        let got = cm.download_raw(gpu).unwrap();
        let mut want = raw.clone();
        reference::double_sum(&a, &b, r, c, &mut want[r0 + c0 * ld..], ld);
        for j in 0..cc {
            for i in 0..ld {
                let k = i + j * ld;
                let inside = i >= r0 && i < r0 + r && j >= c0 && j < c0 + c;
                if inside {
                    let (ai, bi) = (a[(i - r0) + (j - c0) * r], b[(i - r0) + (j - c0) * r]);
                    let mag = raw[k].to_f64().abs() + ai.to_f64().abs() + bi.to_f64().abs();
                    assert!(
                        (got[k].to_f64() - want[k].to_f64()).abs() <= 4.0 * u::<T>() * mag,
                        "{} double_sum {r}x{c}: ({i}, {j})",
                        T::NAME
                    );
                } else {
                    assert!(
                        same_bits(got[k], raw[k]),
                        "{} double_sum {r}x{c}: ({i}, {j}) touched",
                        T::NAME
                    );
                }
            }
        }
    }
}

common::gpu_tests!(common::gpu => double_sum_all { reduce_double_sum_f32: f32, reduce_double_sum_f64: f64 });

// ---------------------------------------------------------------- set_tau, build_t

fn set_tau_all<T: GpuScalar>(gpu: &Gpu) {
    let mut rng = common::rng(16);
    for k in [1usize, 31, 33, 1000] {
        let tau: Vec<T> = signed_vec(&mut rng, k + 1);
        let dtau = DevVec::from_slice(gpu, &tau).unwrap();
        let mut t = DevMat::<T>::zeros(gpu, k, k).unwrap();
        t.fill(gpu, nan()).unwrap();
        gpu.wy_set_tau(&dtau.slice(0..k), &mut t.view_mut())
            .unwrap();
        let got = t.download_raw(gpu).unwrap();
        let ld = t.ld();
        let mut want = vec![nan::<T>(); ld * k];
        reference::set_tau(&tau, &mut want, k, ld);
        for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                same_bits(*g, *w),
                "{} set_tau k={k}: element {idx}",
                T::NAME
            );
        }
    }
}

common::gpu_tests!(common::gpu => set_tau_all { wy_set_tau_f32: f32, wy_set_tau_f64: f64 });

fn build_t_case<T: GpuScalar>(gpu: &Gpu, rng: &mut StdRng, rows: usize, k: usize) {
    assert!(k <= rows);
    // V from genuine reflectors: unit diagonal, zeros above, house tails below.
    let mut vh = vec![T::ZERO; rows * k];
    let mut tau = vec![T::ZERO; k];
    for j in 0..k {
        vh[j + j * rows] = T::ONE;
        let mut alpha = T::from_f64(nonzero(rng));
        let mut tail: Vec<T> = signed_vec(rng, rows - j - 1);
        reference::house(&mut alpha, &mut tail, &mut tau[j]);
        vh[j + 1 + j * rows..(j + 1) * rows].copy_from_slice(&tail);
    }
    let (v, _) = dev_mat_nan_padded::<T>(gpu, rows, k, |i, j| vh[i + j * rows]);
    let dtau = DevVec::from_slice(gpu, &tau).unwrap();
    let mut t = DevMat::<T>::zeros(gpu, k, k).unwrap();
    t.fill(gpu, nan()).unwrap();
    gpu.wy_build_t(&v.view(), &dtau.view(), &mut t.view_mut())
        .unwrap();
    let got = t.download_raw(gpu).unwrap();
    let ld = t.ld();
    let mut want = vec![nan::<T>(); ld * k];
    reference::build_t(&vh, rows, rows, k, &tau, &mut want, ld);
    let scale = max_abs(
        &want
            .iter()
            .copied()
            .filter(|x| !x.to_f64().is_nan())
            .collect::<Vec<_>>(),
    );
    let tol = 10.0 * (rows + k) as f64 * u::<T>() * scale.max(1.0);
    let what = format!("{} build_t rows={rows} k={k}", T::NAME);
    for j in 0..k {
        for i in 0..ld {
            let (g, w) = (got[i + j * ld].to_f64(), want[i + j * ld].to_f64());
            if i >= k {
                assert!(g.is_nan(), "{what}: padding ({i}, {j}) touched");
            } else if i > j {
                assert_eq!(g, 0.0, "{what}: T({i}, {j}) must be 0");
            } else {
                assert!((g - w).abs() <= tol, "{what}: T({i}, {j}) {g:e} vs {w:e}");
            }
        }
    }
}

fn build_t_all<T: GpuScalar>(gpu: &Gpu) {
    let mut rng = common::rng(17);
    for (rows, k) in [
        (1usize, 1usize),
        (33, 31),
        (1000, 33),
        (4097, 65),
        (300, 256),
    ] {
        build_t_case::<T>(gpu, &mut rng, rows, k);
    }
}

common::gpu_tests!(common::gpu => build_t_all { wy_build_t_f32: f32, wy_build_t_f64: f64 });

// ---------------------------------------------------------------- device bring-up

/// The device opens with every kernel resolved, and reports itself.
#[test]
fn gpu_opens_and_describes_itself() {
    let Some(gpu) = common::gpu() else { return };
    let d = gpu.describe().unwrap();
    assert!(!d.is_empty());
    let (maj, _) = gpu.compute_capability().unwrap();
    assert!(maj >= 8, "PTX targets sm_80: {d}");
    gpu.synchronize().unwrap();
}

/// Pinned and pageable transfers round-trip a padded matrix exactly, also through a
/// staging buffer longer than the matrix.
#[test]
fn devmat_round_trips() {
    let Some(gpu) = common::gpu() else { return };
    let mut rng = common::rng(18);
    for (m, n) in [(1usize, 1usize), (33, 31), (1000, 333)] {
        let a = signed_mat::<f64>(&mut rng, m, n);
        let mut d = DevMat::from_host(&gpu, a.as_ref()).unwrap();
        assert_eq!(d.to_host(&gpu).unwrap(), a);
        let mut staging = gpu.alloc_pinned::<f64>(d.ld() * n).unwrap();
        let b = signed_mat::<f64>(&mut rng, m, n);
        d.upload_pinned(&gpu, b.as_ref(), &mut staging).unwrap();
        assert_eq!(d.download_pinned(&gpu, &mut staging).unwrap(), b);
        // A staging buffer longer than the matrix (a reused, larger one): only the
        // matrix's elements move.
        let mut long = gpu.alloc_pinned::<f64>(d.ld() * n + 777).unwrap();
        let c = signed_mat::<f64>(&mut rng, m, n);
        d.upload_pinned(&gpu, c.as_ref(), &mut long).unwrap();
        assert_eq!(d.to_host(&gpu).unwrap(), c);
        assert_eq!(d.download_pinned(&gpu, &mut long).unwrap(), c);
    }
}

// ---------------------------------------------------------------- reflector chains

/// One run of the row-insertion chain on copies of (R, d, U, e) with `tune`: R, d, the
/// v tails and e afterwards, as host vectors.
fn chain_run<T: GpuScalar>(
    gpu: &Gpu,
    inputs: &[&cuqr::Mat<T>; 4],
    tune: cuqr::internals::chains::ChainTuning,
) -> [Vec<T>; 4] {
    let mut m: Vec<DevMat<T>> = inputs
        .iter()
        .map(|a| DevMat::from_host(gpu, a.as_ref()).unwrap())
        .collect();
    let (rd, rest) = m.split_at_mut(2);
    let (r, d) = rd.split_at_mut(1);
    let (u, e) = rest.split_at_mut(1);
    let shape = cuqr::internals::chains::reflector_chain(
        gpu, &mut r[0], &mut d[0], &mut u[0], &mut e[0], tune,
    )
    .unwrap();
    assert!(shape.is_some(), "one launch at these sizes");
    let mut out = m.iter().map(|x| x.to_host(gpu).unwrap().into_vec());
    [(); 4].map(|()| out.next().unwrap())
}

/// The reflector chain with other columns a block: the same arithmetic in the same order for every column, so the
/// results are bitwise those of the planned launch; and R is the factor of [R₀; U]
/// (‖RᵀR − R₀ᵀR₀ − UᵀU‖ ≤ 10·(n + p)·u·‖[R₀; U]‖², the bound of
/// docs/algorithms.md#accuracy-measures).
fn tuned_chain_case<T: GpuScalar>(gpu: &Gpu, rng: &mut StdRng, n: usize, p: usize) {
    use cuqr::internals::chains::ChainTuning;
    let mut r0 = signed_mat::<T>(rng, n, n);
    for j in 0..n {
        for i in j + 1..n {
            r0[(i, j)] = T::ZERO;
        }
    }
    let d0 = signed_mat::<T>(rng, n, 1);
    let u0 = signed_mat::<T>(rng, p, n);
    let e0 = signed_mat::<T>(rng, p, 1);
    let inputs = [&r0, &d0, &u0, &e0];
    let planned = chain_run(gpu, &inputs, ChainTuning::default());
    for tune in [ChainTuning { cpb: Some(5) }, ChainTuning { cpb: Some(3) }] {
        let got = chain_run(gpu, &inputs, tune);
        for (k, (a, b)) in planned.iter().zip(&got).enumerate() {
            assert!(
                a.iter().zip(b).all(|(x, y)| same_bits(*x, *y)),
                "{} n={n} p={p} {tune:?}: output {k} differs from the planned launch",
                T::NAME
            );
        }
    }
    let r: Vec<f64> = planned[0].iter().map(|x| x.to_f64()).collect();
    let mut worst = 0.0f64;
    let mut scale = 0.0f64;
    for i in 0..n {
        for j in 0..n {
            let mut want = 0.0;
            let mut got = 0.0;
            for k in 0..n {
                want += r0[(k, i)].to_f64() * r0[(k, j)].to_f64();
                got += r[k + i * n] * r[k + j * n];
            }
            for k in 0..p {
                want += u0[(k, i)].to_f64() * u0[(k, j)].to_f64();
            }
            worst = worst.max((got - want).abs());
        }
        scale += (0..n).map(|k| r0[(k, i)].to_f64().powi(2)).sum::<f64>()
            + (0..p).map(|k| u0[(k, i)].to_f64().powi(2)).sum::<f64>();
    }
    let tol = 10.0 * (n + p) as f64 * u::<T>() * scale;
    assert!(
        worst <= tol,
        "{} n={n} p={p}: RᵀR off by {worst:e} > {tol:e}",
        T::NAME
    );
}

#[test]
fn reflector_chain_tunings_agree() {
    let Some(gpu) = common::gpu() else { return };
    let mut rng = common::rng(31);
    for (n, p) in [(97, 13), (301, 40)] {
        tuned_chain_case::<f64>(&gpu, &mut rng, n, p);
        tuned_chain_case::<f32>(&gpu, &mut rng, n, p);
    }
}

// ------------------------------------------------------- pairs of stacked triangles

/// The CPU Householder QR of [A; B] (A n×(n+q), B n×(n+q), both upper triangular in their
/// first n columns) in the kernel's order: reflector j from [A(j, j); B(0..=j, j)], applied
/// to the later columns. Returns the new A ([R d]) and the transformed B.
fn pair_reference<T: Scalar>(a: &cuqr::Mat<T>, b: &cuqr::Mat<T>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let nc = a.ncols();
    let mut x = vec![0.0f64; 2 * n * nc]; // column-major 2n × nc: A rows then B rows
    for c in 0..nc {
        for i in 0..n {
            let (ai, bi) = if c < n && i > c {
                (0.0, 0.0)
            } else {
                (a[(i, c)].to_f64(), b[(i, c)].to_f64())
            };
            x[i + c * 2 * n] = ai;
            x[n + i + c * 2 * n] = bi;
        }
    }
    for j in 0..n {
        let col = j * 2 * n;
        let mut alpha = x[col + j];
        let mut tail: Vec<f64> = (0..=j).map(|i| x[col + n + i]).collect();
        let mut tau = 0.0;
        reference::house(&mut alpha, &mut tail, &mut tau);
        x[col + j] = alpha;
        for (i, t) in tail.iter().enumerate() {
            x[col + n + i] = *t;
        }
        for c in j + 1..nc {
            let cc = c * 2 * n;
            let w = x[cc + j] + (0..=j).map(|i| tail[i] * x[cc + n + i]).sum::<f64>();
            x[cc + j] -= tau * w;
            for i in 0..=j {
                x[cc + n + i] -= tau * w * tail[i];
            }
        }
    }
    let mut top = vec![0.0; n * nc];
    let mut bottom = vec![0.0; n * nc];
    for c in 0..nc {
        for i in 0..n {
            top[i + c * n] = x[i + c * 2 * n];
            bottom[i + c * n] = x[n + i + c * 2 * n];
        }
    }
    (top, bottom)
}

/// `row_insert_pairs` on `count` pairs against the serial reference: R and d within
/// 10·n·u of the pair's scale (a backward-stable QR of 2n rows, docs/algorithms.md#accuracy-measures),
/// the residual norms likewise; the strict lower triangles of both inputs poisoned with NaN
/// (neither read nor, in the packs, written), and the packs' padding sentinels untouched.
fn pairs_case<T: GpuScalar>(gpu: &Gpu, rng: &mut StdRng, n: usize, q: usize, count: usize) {
    let mut hosts = Vec::new();
    let (mut packs, mut partners) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let mut a = signed_mat::<T>(rng, n, n + q);
        let mut b = signed_mat::<T>(rng, n, n + q);
        let (a0, b0) = (a.clone(), b.clone());
        for j in 0..n {
            for i in j + 1..n {
                a[(i, j)] = nan();
                b[(i, j)] = nan();
            }
        }
        packs.push(dev_mat_nan_padded(gpu, n, n + q, |i, j| a[(i, j)]).0);
        partners.push(dev_mat_nan_padded(gpu, n, n + q, |i, j| b[(i, j)]).0);
        hosts.push((a0, b0));
    }
    let norms = cuqr::internals::chains::pair_qrs(gpu, &mut packs, &mut partners).unwrap();
    assert_eq!(norms.len(), count);
    for (k, ((a0, b0), pack)) in hosts.iter().zip(&packs).enumerate() {
        let (want, bottom) = pair_reference(a0, b0, n);
        let got = pack.to_host(gpu).unwrap();
        let raw = pack.download_raw(gpu).unwrap();
        let scale = (0..n + q)
            .map(|c| {
                (0..n)
                    .map(|i| a0[(i, c)].to_f64().abs() + b0[(i, c)].to_f64().abs())
                    .fold(0.0, f64::max)
            })
            .fold(1.0, f64::max);
        let tol = 10.0 * (2 * n) as f64 * u::<T>() * scale * (n as f64).sqrt();
        for c in 0..n + q {
            for i in 0..n {
                let g = got[(i, c)].to_f64();
                if c < n && i > c {
                    assert!(
                        g.is_nan(),
                        "{} n={n} q={q} pair {k}: lower ({i}, {c}) written",
                        T::NAME
                    );
                    continue;
                }
                let w = want[i + c * n];
                assert!(
                    (g - w).abs() <= tol,
                    "{} n={n} q={q} pair {k}: ({i}, {c}) = {g:e}, reference {w:e} (tol {tol:e})",
                    T::NAME
                );
            }
        }
        for c in 0..n + q {
            for i in n..pack.ld() {
                assert!(
                    raw[i + c * pack.ld()].to_f64().is_nan(),
                    "{} pair {k}: padding written",
                    T::NAME
                );
            }
        }
        for c in 0..q {
            let w = (0..n)
                .map(|i| bottom[i + (n + c) * n].powi(2))
                .sum::<f64>()
                .sqrt();
            let g = norms[k][c];
            assert!(
                (g - w).abs() <= tol,
                "{} n={n} q={q} pair {k}: residual norm {c} = {g:e}, reference {w:e}",
                T::NAME
            );
        }
    }
}

#[test]
fn stacked_triangle_pairs_match_the_serial_qr() {
    let Some(gpu) = common::gpu() else { return };
    let mut rng = common::rng(47);
    for (n, q, count) in [
        (1usize, 1usize, 2usize),
        (31, 2, 3),
        (33, 0, 2),
        (97, 1, 5),
        (300, 2, 3),
        (129, 3, 2),
        (512, 1, 2),
    ] {
        pairs_case::<f64>(&gpu, &mut rng, n, q, count);
        pairs_case::<f32>(&gpu, &mut rng, n, q, count);
    }
}
