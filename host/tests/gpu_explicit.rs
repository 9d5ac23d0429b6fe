//! `cuqr::explicit::GpuExplicitQr` (Q on the device, rotations by the rotation-chain
//! kernel, Qᴴu by cuBLAS) against `ExplicitQr` on the CPU, in f32, f64, c32 and c64, on
//! tall (full and economic) and wide factorisations: after every update Q and R agree
//! with the CPU's to a multiple of the unit roundoff, Q stays unitary and refusals leave
//! the device state as it was. Skips without a GPU (fails with CUQR_REQUIRE_GPU=1).

mod common;

use std::sync::Arc;

use cuqr::explicit::{c32, c64, ExplicitQr, Field, GpuExplicitQr};
use cuqr::{Error, Gpu, GpuField};
use rand::rngs::StdRng;
use rand::Rng;

trait TestField: GpuField {
    fn random(rng: &mut StdRng) -> Self;
    fn wide(self) -> c64;
    const U: f64;
}
impl TestField for f64 {
    fn random(rng: &mut StdRng) -> Self {
        rng.random_range(-1.0..1.0)
    }
    fn wide(self) -> c64 {
        c64::new(self, 0.0)
    }
    const U: f64 = f64::EPSILON / 2.0;
}
impl TestField for f32 {
    fn random(rng: &mut StdRng) -> Self {
        rng.random_range(-1.0..1.0)
    }
    fn wide(self) -> c64 {
        c64::new(self as f64, 0.0)
    }
    const U: f64 = f32::EPSILON as f64 / 2.0;
}
impl TestField for c64 {
    fn random(rng: &mut StdRng) -> Self {
        c64::new(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))
    }
    fn wide(self) -> c64 {
        self
    }
    const U: f64 = f64::EPSILON / 2.0;
}
impl TestField for c32 {
    fn random(rng: &mut StdRng) -> Self {
        c32::new(rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))
    }
    fn wide(self) -> c64 {
        c64::new(self.re as f64, self.im as f64)
    }
    const U: f64 = f32::EPSILON as f64 / 2.0;
}

fn random<T: TestField>(rng: &mut StdRng, len: usize) -> Vec<T> {
    (0..len).map(|_| T::random(rng)).collect()
}

fn max_diff<T: TestField>(a: &[T], b: &[T]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x.wide() - y.wide()).norm())
        .fold(0.0, f64::max)
}

/// max |QᴴQ − I| of the column-major m×t `q`.
fn unitarity<T: TestField>(q: &[T], m: usize, t: usize) -> f64 {
    let mut worst = 0.0f64;
    for a in 0..t {
        for b in 0..t {
            let mut s = c64::new(if a == b { -1.0 } else { 0.0 }, 0.0);
            for i in 0..m {
                s += q[i + a * m].wide().conj() * q[i + b * m].wide();
            }
            worst = worst.max(s.norm());
        }
    }
    worst
}

/// The GPU state agrees with the CPU one: shapes, Q and R within `tol`, Q unitary.
fn agree<T: TestField>(what: &str, gpu: &mut GpuExplicitQr<T>, cpu: &ExplicitQr<T>, tol: f64) {
    assert_eq!(gpu.q_shape(), cpu.q_shape(), "{what}: Q's shape");
    assert_eq!(gpu.r_shape(), cpu.r_shape(), "{what}: R's shape");
    let q = gpu.q().expect("download Q");
    let dq = max_diff(&q, cpu.q());
    let dr = max_diff(&gpu.r(), &cpu.r());
    let (m, t) = gpu.q_shape();
    let orth = unitarity(&q, m, t);
    assert!(
        dq <= tol && dr <= tol && orth <= tol,
        "{what} ({}): |Q − Q_cpu| {dq:.2e}, |R − R_cpu| {dr:.2e}, |QᴴQ − I| {orth:.2e} > {tol:.2e}",
        T::NAME
    );
}

/// Every update in turn on a GPU state and on the CPU state made from the same factors.
fn updates_match_the_cpu<T: TestField>(
    gpu: &Arc<Gpu>,
    seed: u64,
    (m, n): (usize, usize),
    economic: bool,
) {
    let mut rng = common::rng(seed);
    let a: Vec<T> = random(&mut rng, m * n);
    let mut g = GpuExplicitQr::factorize(gpu, &a, (m, n), economic).expect("factorize");
    let mut c = g.to_host().expect("to host");
    // the factorisation itself: Q unitary, R upper trapezoidal, QR = A
    let q = g.q().unwrap();
    let (qm, t) = g.q_shape();
    assert!(unitarity(&q, qm, t) <= 40.0 * m as f64 * T::U);
    let r0 = g.r();
    for j in 0..n {
        for i in 0..m {
            let mut s = c64::new(0.0, 0.0);
            for l in 0..t.min(j + 1) {
                s += q[i + l * m].wide() * r0[l + j * t].wide();
            }
            assert!((s - a[i + j * m].wide()).norm() <= 40.0 * m as f64 * T::U * (n as f64).sqrt());
        }
        for l in j + 1..t {
            assert_eq!(r0[l + j * t], T::zero(), "R below the diagonal");
        }
    }
    let tol = |rows: usize| 60.0 * rows as f64 * T::U;
    agree("factorize", &mut g, &c, tol(m));

    let cols: Vec<T> = random(&mut rng, m * 2);
    g.insert_cols(n / 3, &cols, 2, None).unwrap();
    c.insert_cols(n / 3, &cols, 2, None).unwrap();
    agree("insert_cols", &mut g, &c, tol(m));

    g.delete_cols(1, 2).unwrap();
    c.delete_cols(1, 2).unwrap();
    agree("delete_cols", &mut g, &c, tol(m));

    let n2 = c.r_shape().1;
    let rows: Vec<T> = random(&mut rng, 3 * n2);
    g.insert_rows(m / 2, &rows, 3).unwrap();
    c.insert_rows(m / 2, &rows, 3).unwrap();
    agree("insert_rows", &mut g, &c, tol(m + 3));

    g.delete_rows(2, 2).unwrap();
    c.delete_rows(2, 2).unwrap();
    agree("delete_rows", &mut g, &c, tol(m + 3));

    let (m3, n3) = (c.q_shape().0, c.r_shape().1);
    let u: Vec<T> = random(&mut rng, m3 * 2);
    let v: Vec<T> = random(&mut rng, n3 * 2);
    g.rank_k(&u, &v, 2).unwrap();
    c.rank_k(&u, &v, 2).unwrap();
    agree("rank_k", &mut g, &c, tol(m + 3));
}

/// Refused updates leave the device factors exactly as they were.
fn refusals_leave_the_state<T: TestField>(gpu: &Arc<Gpu>) {
    let mut rng = common::rng(77);
    let (m, n) = (41, 9);
    let a: Vec<T> = random(&mut rng, m * n);
    let mut g = GpuExplicitQr::factorize(gpu, &a, (m, n), true).unwrap();
    let (q0, r0) = (g.q().unwrap(), g.r());
    // the second column lies in the span of A: refused after the first went in
    let mut cols: Vec<T> = random(&mut rng, m);
    cols.extend_from_slice(&a[..m]);
    let e = g.insert_cols(2, &cols, 2, None).unwrap_err();
    assert!(matches!(e, Error::RankDeficient { column: 3, .. }), "{e}");
    assert!(matches!(
        g.delete_rows(m - 1, 2).unwrap_err(),
        Error::OutOfRange { .. }
    ));
    assert!(matches!(
        g.rank_k(&vec![T::one(); m + 1], &vec![T::one(); n], 1)
            .unwrap_err(),
        Error::Shape { .. }
    ));
    let mut bad: Vec<T> = random(&mut rng, n);
    bad[3] = T::from_real(<T::Real as cuqr::Scalar>::from_f64(f64::NAN));
    assert!(matches!(
        g.insert_rows(0, &bad, 1).unwrap_err(),
        Error::NonFinite { .. }
    ));
    assert_eq!(g.q_shape(), (m, n));
    assert_eq!(g.q().unwrap(), q0);
    assert_eq!(g.r(), r0);
}

macro_rules! field_tests {
    ($($name:ident: $t:ty),*) => {$(
        #[test]
        fn $name() {
            let Some(gpu) = common::shared_gpu() else { return };
            updates_match_the_cpu::<$t>(&gpu, 1, (67, 23), true);
            updates_match_the_cpu::<$t>(&gpu, 2, (67, 23), false);
            updates_match_the_cpu::<$t>(&gpu, 3, (13, 29), false);
            updates_match_the_cpu::<$t>(&gpu, 4, (300, 37), true);
            refusals_leave_the_state::<$t>(&gpu);
        }
    )*};
}

field_tests!(f64_updates: f64, c64_updates: c64, f32_updates: f32, c32_updates: c32);

/// Long chains (Q with thousands of columns: the kernel's unrolled groups and many
/// segments) on a full complex Q.
#[test]
fn long_chains_on_a_full_complex_q() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    updates_match_the_cpu::<c64>(&gpu, 5, (1037, 61), false);
}

/// Q handed over in device memory (interleaved parts, as a CUDA array of complex elements
/// is laid out) and handed back the same way: the round trip through `into_device` and
/// `from_device` keeps the factors, a row update on it agrees with the CPU, and wrong
/// shapes or a non-finite Q are refused.
fn device_round_trip<T: TestField>(gpu: &Arc<Gpu>) {
    let mut rng = common::rng(91);
    let (m, n) = (53, 17);
    let a: Vec<T> = random(&mut rng, m * n);
    let mut g = GpuExplicitQr::factorize(gpu, &a, (m, n), true).unwrap();
    // scatter Q's rows so that handing it over must put them back in order
    let rows: Vec<T> = random(&mut rng, 2 * n);
    g.insert_rows(5, &rows, 2).unwrap();
    g.delete_rows(30, 1).unwrap();
    let mut c = g.to_host().unwrap();
    let (q_shape, r_shape) = (g.q_shape(), g.r_shape());
    let (qd, r) = g.into_device().unwrap();
    assert_eq!((qd.nrows(), qd.ncols()), (T::PARTS * q_shape.0, q_shape.1));
    let parts = qd.to_host(gpu).unwrap();
    let q: Vec<T> = cuqr::explicit::from_parts(parts.as_slice());
    assert_eq!(q, c.q(), "Q in device memory, rows in order");
    assert_eq!(r, c.r());

    let wrong = cuqr::DevMat::<T::Real>::zeros(gpu, T::PARTS * q_shape.0 + 1, q_shape.1).unwrap();
    assert!(matches!(
        GpuExplicitQr::<T>::from_device(gpu, wrong, q_shape, &r, r_shape).unwrap_err(),
        Error::Shape { .. }
    ));
    let mut bad = parts.as_slice().to_vec();
    bad[T::PARTS * 7 + T::PARTS * q_shape.0 * 3] = <T::Real as cuqr::Scalar>::from_f64(f64::NAN);
    let bad = cuqr::Mat::from_col_major(parts.nrows(), parts.ncols(), bad).unwrap();
    let bad = cuqr::DevMat::from_host(gpu, bad.as_ref()).unwrap();
    let e = GpuExplicitQr::<T>::from_device(gpu, bad, q_shape, &r, r_shape).unwrap_err();
    assert!(matches!(e, Error::NonFinite { row: 7, col: 3, .. }), "{e}");

    let mut g = GpuExplicitQr::from_device(gpu, qd_of(gpu, &parts), q_shape, &r, r_shape).unwrap();
    let u: Vec<T> = random(&mut rng, q_shape.0);
    let v: Vec<T> = random(&mut rng, r_shape.1);
    g.rank_k(&u, &v, 1).unwrap();
    c.rank_k(&u, &v, 1).unwrap();
    agree(
        "from_device + rank_k",
        &mut g,
        &c,
        60.0 * (m + 2) as f64 * T::U,
    );
}

/// A device copy of the host parts `parts`.
fn qd_of<R: cuqr::GpuScalar>(gpu: &Arc<Gpu>, parts: &cuqr::Mat<R>) -> cuqr::DevMat<R> {
    cuqr::DevMat::from_host(gpu, parts.as_ref()).unwrap()
}

#[test]
fn factors_handed_over_in_device_memory() {
    let Some(gpu) = common::shared_gpu() else {
        return;
    };
    device_round_trip::<f64>(&gpu);
    device_round_trip::<c64>(&gpu);
    device_round_trip::<c32>(&gpu);
}
