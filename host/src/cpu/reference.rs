//! Serial CPU references of every GPU kernel in docs/kernels.md, with the same
//! arguments and memory layouts (raw slices + leading dimensions/pitches), so
//! `host/tests/gpu_kernels.rs` can compare element by element: house
//! (docs/algorithms.md#householder-vectors), larft T (docs/algorithms.md#blocked-reflectors,
//! docs/algorithms.md#block-reflector-sign), wavefront (docs/algorithms.md#givens-rotations,
//! docs/algorithms.md#safe-rotation-generation), transpose and doubleSum
//! (docs/algorithms.md#padded-transpose-and-composite-layout,
//! docs/algorithms.md#transpose-tile-padding, docs/algorithms.md#double-sum-arguments).
// Used by the tests and, through `internals`, by the benchmarks.
#![cfg_attr(
    not(any(test, feature = "internals")),
    allow(dead_code, unused_imports)
)]
#![forbid(unsafe_code)]

use super::givens::{givens, rot_pair};
use crate::base::scalar::Scalar;

std::thread_local! {
    /// Whether this thread's CPU updates run on the serial reference algorithms.
    static SERIAL_UPDATES: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// Runs `f` with the CPU backend's updates (every operation of [`crate::CpuQr`] after the
/// factorisation, every state kind) on the serial reference algorithms instead of the
/// blocked ones, on this thread only: the test oracle and the benchmarks' baseline.
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
/// let a = Mat::<f64>::from_fn(8, 3, |i, j| ((i + 2 * j) % 5) as f64 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(8, 1, |i, _| i as f64);
/// let mut qr = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Thin, FactorParams::default()).unwrap();
/// cuqr::cpu::reference::run(|| qr.delete_row(4)).unwrap();
/// assert!(!cuqr::cpu::reference::active());
/// ```
pub fn run<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SERIAL_UPDATES.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(SERIAL_UPDATES.with(|s| s.replace(true)));
    f()
}

/// Whether this thread is inside [`run`].
pub fn active() -> bool {
    SERIAL_UPDATES.with(|s| s.get())
}

/// `reduce_nrm2`: ‖x‖₂ by the scaled two-pass algorithm
/// (docs/algorithms.md#householder-norm-scaling).
pub use super::householder::nrm2;

/// `reduce_dot`: Σ xᵢ·yᵢ, accumulated in order with fused multiply-adds.
///
/// # Panics
/// If the lengths differ.
pub fn dot<T: Scalar>(x: &[T], y: &[T]) -> T {
    assert_eq!(x.len(), y.len());
    x.iter()
        .zip(y)
        .fold(T::ZERO, |acc, (&a, &b)| a.mul_add(b, acc))
}

/// `householder_house` (docs/algorithms.md#householder-vectors): overwrites `*alpha` with β, `x`
/// with the
/// reflector tail and `*tau` with τ, exactly as [`super::householder::house`].
pub fn house<T: Scalar>(alpha: &mut T, x: &mut [T], tau: &mut T) {
    let (beta, t) = super::householder::house(*alpha, x);
    *alpha = beta;
    *tau = t;
}

/// `givens_make_wavefront` (docs/algorithms.md#givens-rotations) on a row-major pitched
/// buffer `a` (element (r, c) at `a[r·pitch + c]`): for i < count, column
/// col0+i, rows (r−1, r) with r = row0 + 2i; writes `c[i]`, `s[i]` with the
/// safe convention of [`givens`] (c = 1, s = 0 at (0, 0)).
///
/// # Panics
/// If an index is out of range (`row0 ≥ 1` is required).
#[allow(clippy::too_many_arguments)]
pub fn givens_make_wavefront<T: Scalar>(
    a: &[T],
    pitch: usize,
    row0: usize,
    col0: usize,
    count: usize,
    c: &mut [T],
    s: &mut [T],
) {
    for i in 0..count {
        let (r, col) = (row0 + 2 * i, col0 + i);
        let (ci, si, _) = givens(a[(r - 1) * pitch + col], a[r * pitch + col]);
        c[i] = ci;
        s[i] = si;
    }
}

/// `givens_apply_wavefront` (docs/algorithms.md#givens-rotations with
/// docs/algorithms.md#complete-rotation-application and docs/algorithms.md#live-column-range):
/// rotation i acts on pitched rows (r−1, r), r = row0 + 2i, over columns
/// [col_begin + i·col_step, col_end): upper ← c·upper + s·lower,
/// lower ← −s·upper + c·lower.
///
/// # Panics
/// If an index is out of range.
#[allow(clippy::too_many_arguments)]
pub fn givens_apply_wavefront<T: Scalar>(
    a: &mut [T],
    pitch: usize,
    row0: usize,
    count: usize,
    col_begin: usize,
    col_step: usize,
    col_end: usize,
    c: &[T],
    s: &[T],
) {
    for i in 0..count {
        let r = row0 + 2 * i;
        let (up, lo) = a.split_at_mut(r * pitch);
        let up = &mut up[(r - 1) * pitch..];
        for x in col_begin + i * col_step..col_end {
            rot_pair(c[i], s[i], &mut up[x], &mut lo[x]);
        }
    }
}

pub use crate::base::wavefront::strip_step;

/// `transpose_padded` (docs/algorithms.md#padded-transpose-and-composite-layout,
/// docs/algorithms.md#transpose-tile-padding): dst(j, i) = src(i, j) for
/// i < rows, j < cols; src column-major rows×cols with ld `lds`, dst
/// column-major cols×rows with ld `ldd`. Nothing else of `dst` is written.
pub fn transpose_padded<T: Scalar>(
    src: &[T],
    lds: usize,
    rows: usize,
    cols: usize,
    dst: &mut [T],
    ldd: usize,
) {
    for j in 0..cols {
        for i in 0..rows {
            dst[j + i * ldd] = src[i + j * lds];
        }
    }
}

/// `reduce_double_sum` (docs/algorithms.md#padded-transpose-and-composite-layout,
/// docs/algorithms.md#double-sum-arguments): cm[i + j·ldc] += a[i + j·r]
/// + b[i + j·r] for i < r, j < c, computed as (a + b) then added.
pub fn double_sum<T: Scalar>(a: &[T], b: &[T], r: usize, c: usize, cm: &mut [T], ldc: usize) {
    for j in 0..c {
        for i in 0..r {
            cm[i + j * ldc] += a[i + j * r] + b[i + j * r];
        }
    }
}

/// `wy_set_tau` (docs/algorithms.md#blocked-reflectors): `t[i + i·ldt] = tau[i]` for i < k.
pub fn set_tau<T: Scalar>(tau: &[T], t: &mut [T], k: usize, ldt: usize) {
    for i in 0..k {
        t[i + i * ldt] = tau[i];
    }
}

/// `wy_build_t`: LAPACK `larft` forward, columnwise (docs/algorithms.md#blocked-reflectors,
/// docs/algorithms.md#block-reflector-sign,
/// τ ≥ 0): V is rows×k as stored (the caller stores the unit diagonal and the
/// zeros above it); T(j, j) = τ_j, T(0:j, j) = −τ_j·T(0:j, 0:j)·(V(:, 0:j)ᵀV(:, j)),
/// T(i, j) = 0 for i > j; then H₀H₁⋯H_{k−1} = I − V T Vᵀ.
#[allow(clippy::too_many_arguments)]
pub fn build_t<T: Scalar>(
    v: &[T],
    ldv: usize,
    rows: usize,
    k: usize,
    tau: &[T],
    t: &mut [T],
    ldt: usize,
) {
    let mut w = vec![T::ZERO; k];
    for j in 0..k {
        let vj = &v[j * ldv..j * ldv + rows];
        for (l, wl) in w.iter_mut().enumerate().take(j) {
            *wl = dot(&v[l * ldv..l * ldv + rows], vj);
        }
        // T(0:j, j) = −τ_j · T(0:j, 0:j) · w(0:j), T upper triangular.
        for i in 0..j {
            let mut acc = T::ZERO;
            for (l, &wl) in w.iter().enumerate().take(j).skip(i) {
                acc = t[i + l * ldt].mul_add(wl, acc);
            }
            t[i + j * ldt] = -tau[j] * acc;
        }
        t[j + j * ldt] = tau[j];
        for i in j + 1..k {
            t[i + j * ldt] = T::ZERO;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::mat::Mat;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn rnd(rng: &mut StdRng) -> f64 {
        // Never zero: magnitude in [0.1, 1), random sign.
        let m = rng.random_range(0.1..1.0);
        if rng.random_bool(0.5) {
            m
        } else {
            -m
        }
    }

    #[test]
    fn dot_and_nrm2_match_f64_sums() {
        let mut rng = StdRng::seed_from_u64(1);
        for n in [1usize, 31, 33, 1000] {
            let x: Vec<f64> = (0..n).map(|_| rnd(&mut rng)).collect();
            let y: Vec<f64> = (0..n).map(|_| rnd(&mut rng)).collect();
            let exact: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
            let mag: f64 = x.iter().zip(&y).map(|(a, b)| (a * b).abs()).sum();
            assert!((dot(&x, &y) - exact).abs() <= 2.0 * n as f64 * f64::EPSILON * mag);
            let n2 = x.iter().map(|a| a * a).sum::<f64>().sqrt();
            assert!((nrm2(&x) - n2).abs() <= 2.0 * n as f64 * f64::EPSILON * n2);
        }
        assert_eq!(nrm2::<f32>(&[]), 0.0);
    }

    #[test]
    fn house_wrapper_matches_and_handles_zero_tail() {
        let mut rng = StdRng::seed_from_u64(2);
        let x0: Vec<f64> = (0..33).map(|_| rnd(&mut rng)).collect();
        let (mut a, mut x, mut tau) = (0.7f64, x0.clone(), f64::NAN);
        house(&mut a, &mut x, &mut tau);
        let mut y = x0;
        let (beta, t) = super::super::householder::house(0.7, &mut y);
        assert_eq!((a, tau), (beta, t));
        assert_eq!(x, y);
        let (mut a, mut z, mut tau) = (-1.5f32, vec![0.0f32; 5], f32::NAN);
        house(&mut a, &mut z, &mut tau);
        assert_eq!((a, tau), (-1.5, 0.0));
        assert!(z.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn transpose_and_double_sum_touch_only_their_block() {
        let mut rng = StdRng::seed_from_u64(3);
        let (rows, cols, lds, ldd) = (33usize, 31usize, 40usize, 36usize);
        let src: Vec<f64> = (0..lds * cols).map(|_| rnd(&mut rng)).collect();
        let mut dst = vec![f64::NAN; ldd * rows];
        transpose_padded(&src, lds, rows, cols, &mut dst, ldd);
        for i in 0..rows {
            for j in 0..ldd {
                let d = dst[j + i * ldd];
                if j < cols {
                    assert_eq!(d, src[i + j * lds]);
                } else {
                    assert!(d.is_nan());
                }
            }
        }
        let (r, c, ldc) = (5usize, 3usize, 8usize);
        let a: Vec<f64> = (0..r * c).map(|_| rnd(&mut rng)).collect();
        let b: Vec<f64> = (0..r * c).map(|_| rnd(&mut rng)).collect();
        let cm0: Vec<f64> = (0..ldc * c).map(|_| rnd(&mut rng)).collect();
        let mut cm = cm0.clone();
        double_sum(&a, &b, r, c, &mut cm, ldc);
        for j in 0..c {
            for i in 0..ldc {
                let want = if i < r {
                    cm0[i + j * ldc] + (a[i + j * r] + b[i + j * r])
                } else {
                    cm0[i + j * ldc]
                };
                assert_eq!(cm[i + j * ldc], want);
            }
        }
    }

    /// I − V T Vᵀ must equal H₀H₁⋯H_{k−1} formed explicitly
    /// (docs/algorithms.md#blocked-reflectors).
    #[test]
    fn build_t_reproduces_the_reflector_product() {
        let mut rng = StdRng::seed_from_u64(4);
        for &(rows, k) in &[(1usize, 1usize), (33, 31), (40, 7), (65, 33)] {
            let ldv = rows + 3;
            let mut v = vec![0.0f64; ldv * k];
            for j in 0..k {
                for i in 0..rows {
                    v[i + j * ldv] = match i.cmp(&j) {
                        core::cmp::Ordering::Less => 0.0,
                        core::cmp::Ordering::Equal => 1.0,
                        core::cmp::Ordering::Greater => rnd(&mut rng),
                    };
                }
            }
            let tau: Vec<f64> = (0..k)
                .map(|_| rng.random_range(1.0..2.0) / (1.0 + rows as f64 / 4.0))
                .collect();
            let ldt = k + 2;
            let mut t = vec![f64::NAN; ldt * k];
            set_tau(&tau, &mut t, k, ldt);
            build_t(&v, ldv, rows, k, &tau, &mut t, ldt);
            // Explicit product.
            let mut h = Mat::<f64>::identity(rows);
            for j in 0..k {
                let hj = Mat::from_fn(rows, rows, |a, b| {
                    (a == b) as u8 as f64 - tau[j] * v[a + j * ldv] * v[b + j * ldv]
                });
                h = h.matmul(&hj);
            }
            let vm = Mat::from_fn(rows, k, |a, b| v[a + b * ldv]);
            let tm = Mat::from_fn(k, k, |a, b| t[a + b * ldt]);
            let vtvt = vm.matmul(&tm).matmul(&vm.transpose());
            let mut err = 0.0f64;
            for a in 0..rows {
                for b in 0..rows {
                    let w = (a == b) as u8 as f64 - vtvt[(a, b)];
                    err = err.max((w - h[(a, b)]).abs());
                }
            }
            assert!(
                err <= 10.0 * rows as f64 * f64::EPSILON / 2.0 * h.norm_fro().max(1.0),
                "{rows}x{k}: {err:e}"
            );
            for j in 0..k {
                assert_eq!(t[j + j * ldt], tau[j]);
                for i in j + 1..k {
                    assert_eq!(t[i + j * ldt], 0.0);
                }
            }
            // Rows k..ldt of T (padding) stay untouched.
            for j in 0..k {
                for i in k..ldt {
                    assert!(t[i + j * ldt].is_nan());
                }
            }
        }
    }

    /// Sweeping a strip with the wavefront schedule gives bit-for-bit the
    /// sequential Givens result (docs/algorithms.md#givens-rotations: the schedule does not change
    /// any rotation) and zeroes the strip.
    #[test]
    fn wavefront_strip_sweep_matches_sequential_givens() {
        let mut rng = StdRng::seed_from_u64(5);
        for &(h, p, extra) in &[
            (1usize, 1usize, 0usize),
            (5, 3, 4),
            (33, 31, 7),
            (31, 33, 2),
        ] {
            let (nrows, ncols) = (h + p, p + extra);
            let pitch = ncols + 3;
            // Column j is nonzero in rows j..=h+j (a diagonal strip below R's diagonal);
            // the other columns are dense.
            let mut a0 = vec![f64::NAN; nrows * pitch];
            for r in 0..nrows {
                for c in 0..ncols {
                    let live = c >= p || r <= h + c;
                    a0[r * pitch + c] = if live { rnd(&mut rng) } else { 0.0 };
                }
            }
            // Sequential: column by column, bottom-up.
            let mut seq = a0.clone();
            for j in 0..p {
                for r in (j + 1..=h + j).rev() {
                    let (c, s, _) = givens(seq[(r - 1) * pitch + j], seq[r * pitch + j]);
                    let (up, lo) = seq.split_at_mut(r * pitch);
                    let up = &mut up[(r - 1) * pitch..];
                    for x in j..ncols {
                        rot_pair(c, s, &mut up[x], &mut lo[x]);
                    }
                }
            }
            // Wavefront: one make + one apply per step.
            let mut wav = a0.clone();
            let (mut cs, mut ss) = (vec![0.0f64; p], vec![0.0f64; p]);
            let mut steps = 0;
            for t in 0..h + p - 1 {
                let Some((row0, col0, count)) = strip_step(h, p, t) else {
                    continue;
                };
                steps += 1;
                givens_make_wavefront(&wav, pitch, row0, col0, count, &mut cs, &mut ss);
                givens_apply_wavefront(&mut wav, pitch, row0, count, col0, 1, ncols, &cs, &ss);
            }
            assert_eq!(steps, h + p - 1);
            for (i, (x, y)) in wav.iter().zip(&seq).enumerate() {
                assert!(
                    x.to_bits() == y.to_bits(),
                    "h={h} p={p}: element {i}: {x} vs {y}"
                );
            }
            let norm = a0
                .iter()
                .filter(|v| !v.is_nan())
                .map(|v| v * v)
                .sum::<f64>()
                .sqrt();
            for j in 0..p {
                for r in j + 1..=h + j {
                    assert!(
                        wav[r * pitch + j].abs() <= 10.0 * nrows as f64 * f64::EPSILON / 2.0 * norm
                    );
                }
            }
            // Padding columns of the pitched buffer are never touched.
            for r in 0..nrows {
                for c in ncols..pitch {
                    assert!(wav[r * pitch + c].is_nan());
                }
            }
        }
    }

    #[test]
    fn strip_step_covers_every_rotation_once() {
        for &(h, p) in &[(1usize, 1usize), (4, 2), (2, 4), (33, 31)] {
            let mut seen = vec![0u32; (h + p) * p];
            for t in 0..h + p + 3 {
                if let Some((row0, col0, count)) = strip_step(h, p, t) {
                    for i in 0..count {
                        let (j, r) = (col0 + i, row0 + 2 * i);
                        assert!(r > j && r <= h + j, "t={t} j={j} r={r}");
                        seen[r * p + j] += 1;
                    }
                }
            }
            for j in 0..p {
                for r in 0..h + p {
                    assert_eq!(seen[r * p + j], (r > j && r <= h + j) as u32);
                }
            }
        }
        assert_eq!(strip_step(0, 3, 0), None);
    }
}
