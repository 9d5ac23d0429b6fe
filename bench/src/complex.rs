//! `cuqr bench complex`: explicit-factor updates in complex f64 on the GPU
//! (`cuqr::explicit::GpuExplicitQr<c64>`) against refactorising with cuSOLVER `zgeqrf` +
//! `zungqr`, beside the real f64 updates of the general GPU state (`cuqr::Qr`, thin and
//! full Q) against `dgeqrf` + `dorgqr`, in one process (docs/performance.md#complex-updates).

use std::sync::Arc;
use std::time::Instant;

use cuqr::explicit::{c64, Field, GpuExplicitQr};
use cuqr::internals::gpu::DevMat;
use cuqr::{Backend, FactorParams, Gpu, GpuField, Mat, QPolicy, Qr, QrUpdate};
use cuqr_cli::cli::CliResult;
use faer::Mat as FMat;

use super::common::print_run_header;
use super::stats::median;
use super::BenchOpts;

const CMD: &str = "bench complex";

/// `cuqr bench complex --help`.
pub const HELP: &str = "\
cuqr bench complex: complex f64 updates on the GPU vs refactorising, beside real f64

Usage: cuqr bench complex [--shapes MxN,...] [--reps R] [--no-check]

  --shapes    problem sizes (default 6000x600)
  --reps      timed repetitions of each update, median reported (default 7)
  --no-check  skip the accuracy check of the complex factors at the end

For the economic (thin Q) and full kinds: one column inserted at n/2 and deleted again,
one row inserted at m/2 and deleted again, one rank-one update. Complex: the
explicit-factor GPU state (c64) against cuSOLVER zgeqrf + zungqr of the same shape (Q m×n
or m×m) on device-resident A. Real: the general GPU state (Qr, thin or full Q) against
dgeqrf + dorgqr, and the explicit-factor state in f64 on the same data. Milliseconds,
each update waited for; ratio = refactorising / update.
";

/// Runs `cuqr bench complex`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(CMD, args, &["no-check"], &["shapes", "reps"])?;
    let shapes = match o.get("shapes") {
        Some(s) => parse_shapes(s)?,
        None => vec![(6000, 600)],
    };
    let reps = o.usize("reps")?.unwrap_or(7).max(1);
    let check = !o.flag("no-check");
    let gpu = Arc::new(Gpu::new(0).map_err(|e| format!("{CMD}: {e}"))?);
    print_run_header(&gpu, CMD, args)?;
    println!("| m×n | kind | update | c64 explicit ms | zgeqrf+zungqr ms | c64 × | f64 Qr ms | dgeqrf+dorgqr ms | f64 Qr × | f64 explicit ms | f64 explicit × |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &(m, n) in &shapes {
        for economic in [true, false] {
            table(&gpu, m, n, economic, reps, check)?;
        }
    }
    Ok(())
}

const UPDATES: [&str; 5] = [
    "insert column",
    "delete column",
    "insert row",
    "delete row",
    "rank-one",
];

/// One kind's rows.
fn table(
    gpu: &Arc<Gpu>,
    m: usize,
    n: usize,
    economic: bool,
    reps: usize,
    check: bool,
) -> CliResult<()> {
    let kind = if economic { "thin" } else { "full" };
    let a_c: Vec<c64> = (0..m * n)
        .map(|e| c64::new(noise(e, 1), noise(e, 2)))
        .collect();
    let a_r: Vec<f64> = (0..m * n).map(|e| noise(e, 3)).collect();
    let zref = refactor::<c64>(gpu, &a_c, (m, n), economic, reps)?;
    let dref = refactor::<f64>(gpu, &a_r, (m, n), economic, reps)?;
    let (mut zt, a_final) = explicit_times::<c64>(gpu, &a_c, (m, n), economic, reps)?;
    let (dt, _) = explicit_times::<f64>(gpu, &a_r, (m, n), economic, reps)?;
    let qt = qr_times(gpu, &a_r, (m, n), economic, reps)?;
    for (i, what) in UPDATES.iter().enumerate() {
        println!(
            "| {m}×{n} | {kind} | {what} | {:.3} | {zref:.2} | {:.1}× | {:.3} | {dref:.2} | {:.1}× | {:.3} | {:.1}× |",
            zt.0[i],
            zref / zt.0[i],
            qt[i],
            dref / qt[i],
            dt.0[i],
            dref / dt.0[i],
        );
    }
    if check {
        let (orth, resid) = accuracy(&mut zt.1, &a_final)?;
        println!(
            "\n{m}×{n} {kind} c64 after the timed updates: ‖QᴴQ − I‖_max {orth:.2e} (over {} columns), ‖A − QR‖_F/‖A‖_F {resid:.2e}; 10·m·u = {:.2e}\n",
            zt.1.q_shape().1.min(n + 1),
            10.0 * m as f64 * f64::EPSILON / 2.0
        );
    }
    Ok(())
}

/// A deterministic value in (−1, 1) for entry `e` of stream `s`.
fn noise(e: usize, s: u64) -> f64 {
    let mut x =
        (e as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ s.wrapping_mul(0xD1B5_4A32_D192_ED03);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 29;
    (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// Median ms of cuSOLVER geqrf + orgqr/ungqr of the m×n `a` (Q m×n when `economic`,
/// else m×m) on device-resident data; the copy of A into the work buffer is not timed.
fn refactor<T: GpuField>(
    gpu: &Arc<Gpu>,
    a: &[T],
    (m, n): (usize, usize),
    economic: bool,
    reps: usize,
) -> CliResult<f64> {
    let p = T::PARTS;
    let t = if economic { n } else { m };
    let mut src = DevMat::<T::Real>::zeros(gpu, p * m, n)?;
    gpu.write_block(&cuqr::explicit::to_parts(a), &mut src, (0, 0), (p * m, n))?;
    let mut work = DevMat::<T::Real>::zeros(gpu, p * m, t.max(n))?;
    let mut tau = cuqr::DevVec::<T::Real>::zeros(gpu, p * n.min(m))?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps + 1 {
        gpu.copy_block(&src, (0, 0), &mut work, (0, 0), (p * m, n))?;
        gpu.synchronize()?;
        let t0 = Instant::now();
        gpu.geqrf_field::<T>(&mut work, (m, n), &mut tau.view_mut())?;
        gpu.ungqr_field::<T>(&mut work, (m, t, n.min(m)), &tau.view())?;
        gpu.synchronize()?;
        times.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    times.remove(0);
    Ok(median(times))
}

type ExplicitTimes<T> = ([f64; 5], GpuExplicitQr<T>);

/// Median ms of each update on the explicit-factor GPU state, and the state and the
/// matrix it factors at the end.
fn explicit_times<T: GpuField>(
    gpu: &Arc<Gpu>,
    a: &[T],
    (m, n): (usize, usize),
    economic: bool,
    reps: usize,
) -> CliResult<(ExplicitTimes<T>, Vec<T>)> {
    let mut st = GpuExplicitQr::factorize(gpu, a, (m, n), economic)?;
    let mut a_now = a.to_vec();
    let col: Vec<T> = (0..m).map(|i| value::<T>(i, 11)).collect();
    let row: Vec<T> = (0..n).map(|j| value::<T>(j, 12)).collect();
    let mut out = [0.0; 5];
    let mut samples: [Vec<f64>; 5] = Default::default();
    let time = |gpu: &Gpu, f: &mut dyn FnMut() -> cuqr::Result<()>| -> cuqr::Result<f64> {
        gpu.synchronize()?;
        let t0 = Instant::now();
        f()?;
        gpu.synchronize()?;
        Ok(t0.elapsed().as_secs_f64() * 1e3)
    };
    for rep in 0..reps + 1 {
        let s = [
            time(gpu, &mut || st.insert_cols(n / 2, &col, 1, None))?,
            time(gpu, &mut || st.delete_cols(n / 2, 1))?,
            time(gpu, &mut || st.insert_rows(m / 2, &row, 1))?,
            time(gpu, &mut || st.delete_rows(m / 2, 1))?,
        ];
        let scale = T::from_real(<T::Real as cuqr::Scalar>::from_f64(1e-3 * (rep + 1) as f64));
        let u: Vec<T> = (0..m).map(|i| value::<T>(i + rep, 13) * scale).collect();
        let v: Vec<T> = (0..n).map(|j| value::<T>(j + rep, 14)).collect();
        let r1 = time(gpu, &mut || st.rank_k(&u, &v, 1))?;
        for j in 0..n {
            for i in 0..m {
                a_now[i + j * m] += u[i] * v[j].conj();
            }
        }
        if rep > 0 {
            for (k, x) in s.iter().chain([r1].iter()).enumerate() {
                samples[k].push(*x);
            }
        }
    }
    for (k, v) in samples.into_iter().enumerate() {
        out[k] = median(v);
    }
    Ok(((out, st), a_now))
}

/// A deterministic element for index `i` of stream `s`.
fn value<T: Field>(i: usize, s: u64) -> T {
    let parts: Vec<T::Real> = (0..T::PARTS)
        .map(|p| <T::Real as cuqr::Scalar>::from_f64(noise(i, s * 7 + p as u64)))
        .collect();
    T::from_parts(&parts)
}

/// Median ms of each update on the general GPU state (thin or full Q) in f64.
fn qr_times(
    gpu: &Arc<Gpu>,
    a: &[f64],
    (m, n): (usize, usize),
    economic: bool,
    reps: usize,
) -> CliResult<[f64; 5]> {
    let am = Mat::from_fn(m, n, |i, j| a[i + j * m]);
    let b = Mat::from_fn(m, 1, |i, _| noise(i, 21));
    let policy = if economic {
        QPolicy::Thin
    } else {
        QPolicy::Full
    };
    let backend = Backend::Gpu(Arc::clone(gpu));
    let mut st = Qr::factorize_on(
        &backend,
        am.as_ref(),
        b.as_ref(),
        policy,
        FactorParams::default(),
    )?;
    let col = Mat::from_fn(m, 1, |i, _| noise(i, 22));
    let row = Mat::from_fn(1, n, |_, j| noise(j, 23));
    let rhs = Mat::from_fn(1, 1, |_, _| 0.5);
    let u: Vec<f64> = (0..m).map(|i| 1e-3 * noise(i, 24)).collect();
    let v: Vec<f64> = (0..n).map(|j| noise(j, 25)).collect();
    let mut samples: [Vec<f64>; 5] = Default::default();
    let mut time =
        |k: usize, rep: usize, f: &mut dyn FnMut() -> cuqr::Result<()>| -> cuqr::Result<()> {
            gpu.synchronize()?;
            let t0 = Instant::now();
            f()?;
            gpu.synchronize()?;
            if rep > 0 {
                samples[k].push(t0.elapsed().as_secs_f64() * 1e3);
            }
            Ok(())
        };
    for rep in 0..reps + 1 {
        time(0, rep, &mut || st.insert_cols(n / 2, col.as_ref()))?;
        time(1, rep, &mut || st.delete_cols(n / 2, 1))?;
        time(2, rep, &mut || {
            st.insert_rows(m / 2, row.as_ref(), rhs.as_ref())
        })?;
        time(3, rep, &mut || st.delete_rows(m / 2, 1))?;
        time(4, rep, &mut || st.rank_one(&u, &v))?;
    }
    let mut out = [0.0; 5];
    for (k, v) in samples.into_iter().enumerate() {
        out[k] = median(v);
    }
    Ok(out)
}

/// max |QᴴQ − I| over Q's first n + 1 columns against all of Q's (the full kind's m×m
/// Gram matrix is too large to form on the host) and ‖A − QR‖_F/‖A‖_F.
fn accuracy(st: &mut GpuExplicitQr<c64>, a: &[c64]) -> CliResult<(f64, f64)> {
    let host = st.to_host()?;
    let ((m, t), (_, n)) = (host.q_shape(), host.r_shape());
    let q = FMat::<c64>::from_fn(m, t, |i, j| host.q()[i + j * m]);
    let r_host = host.r();
    let r = FMat::<c64>::from_fn(t, n, |i, j| r_host[i + j * t]);
    let k = t.min(n + 1);
    let gram = q.as_ref().subcols(0, k).adjoint() * q.as_ref();
    let mut orth = 0.0f64;
    for j in 0..t {
        for i in 0..k {
            let want = if i == j { 1.0 } else { 0.0 };
            orth = orth.max((gram[(i, j)] - c64::new(want, 0.0)).norm());
        }
    }
    let qr = q.as_ref() * r.as_ref();
    let am = FMat::<c64>::from_fn(m, n, |i, j| a[i + j * m]);
    let resid = (&qr - &am).norm_l2() / am.norm_l2();
    Ok((orth, resid))
}

/// `--shapes MxN,...` with m ≥ 2 and n ≥ 2.
fn parse_shapes(s: &str) -> CliResult<Vec<(usize, usize)>> {
    s.split(',')
        .map(|t| {
            let (a, b) = t
                .split_once('x')
                .ok_or_else(|| format!("{CMD}: --shapes wants MxN,..., got {t:?}"))?;
            match (a.trim().parse::<usize>(), b.trim().parse::<usize>()) {
                (Ok(m), Ok(n)) if m > n && n >= 2 => Ok((m, n)),
                _ => Err(format!("{CMD}: {t:?} is not MxN with M > N >= 2").into()),
            }
        })
        .collect()
}
