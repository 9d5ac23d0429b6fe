//! `cuqr bench rolling`: rolling least squares over many series
//! (docs/performance.md#rolling-least-squares): the GPU walk on device-resident data
//! (CUDA events, median), the same call from host data (uploads and downloads included,
//! wall clock), and the CPU backend on the same data (wall clock), in one process.

use std::time::Instant;

use cuqr::internals::gpu::timing::time_median;
use cuqr::rolling::{
    rolling_lstsq, rolling_lstsq_device, DeviceRollingData, RollingData, RollingParams,
};
use cuqr::{DevVec, Device, Gpu, GpuScalar};
use cuqr_cli::cli::CliResult;
use cuqr_cli::rng::random_signed_matrix_serial;

use super::common::print_run_header;
use super::stats::upper_median;
use super::BenchOpts;

const CMD: &str = "bench rolling";

/// `cuqr bench rolling --help`.
pub const HELP: &str = "\
cuqr bench rolling: rolling least squares over many series, GPU and CPU

Usage: cuqr bench rolling [--series S] [--nobs T] [--k K] [--window W]
                          [--shared-x] [--precision f64|f32|both] [--reps R]
                          [--no-cpu]

  --series     series S (default 5000)
  --nobs       time steps T (default 2520)
  --k          regressors k, 1..16 (default 5)
  --window     window length W (default 252)
  --shared-x   one design X (T x k) for every series (default: a design per series,
               T x S x k)
  --precision  f64, f32 or both (default f64)
  --reps       timed repetitions, at least 5 (default 7)
  --no-cpu     skip the CPU backend

Random data (y = X beta + noise). Rows: the GPU walk on data already on the device
(CUDA events, median), the same call from host slices (upload, walk, download; wall
clock, median), the CPU backend (wall clock, median of 3), and the ratio of the CPU to
the device-resident GPU time. The traffic floor is the data read once and the results
written once at the device's copy bandwidth.
";

/// Runs `cuqr bench rolling`.
pub fn run(args: &[String]) -> CliResult<()> {
    let values = ["series", "nobs", "k", "window", "precision", "reps"];
    let o = BenchOpts::parse(CMD, args, &["shared-x", "no-cpu"], &values)?;
    let series = o.usize("series")?.unwrap_or(5000);
    let nobs = o.usize("nobs")?.unwrap_or(2520);
    let k = o.usize("k")?.unwrap_or(5);
    let window = o.usize("window")?.unwrap_or(252);
    let reps = o.usize("reps")?.unwrap_or(7);
    if !(1..=16).contains(&k) || series == 0 || nobs == 0 || window == 0 || reps < 5 {
        return Err(
            format!("{CMD}: need 1 <= k <= 16, series, nobs, window >= 1 and reps >= 5").into(),
        );
    }
    let precisions = match o.get("precision") {
        None => &["f64"][..],
        Some(_) => o.precisions()?,
    };
    let gpu = Gpu::new(0).map_err(|e| format!("{CMD}: {e}"))?;
    print_run_header(&gpu, CMD, args)?;
    let case = Case {
        series,
        nobs,
        k,
        window,
        shared: o.flag("shared-x"),
        reps,
        cpu: !o.flag("no-cpu"),
    };
    println!();
    println!("| precision | S | T | k | W | X | GPU walk ms | GPU from host ms | CPU ms | CPU / GPU walk | ns a series-step |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &p in precisions {
        match p {
            "f32" => case.run::<f32>(&gpu, p)?,
            _ => case.run::<f64>(&gpu, p)?,
        }
    }
    Ok(())
}

struct Case {
    series: usize,
    nobs: usize,
    k: usize,
    window: usize,
    shared: bool,
    reps: usize,
    cpu: bool,
}

impl Case {
    fn run<T: GpuScalar>(&self, gpu: &Gpu, prec: &str) -> CliResult<()> {
        let (s, t, k) = (self.series, self.nobs, self.k);
        let x_rows = if self.shared { t } else { t * s };
        let x = random_signed_matrix_serial::<T>(x_rows * k, 1, 11)
            .col(0)
            .to_vec();
        let noise = random_signed_matrix_serial::<T>(t * s, 1, 12)
            .col(0)
            .to_vec();
        let beta = random_signed_matrix_serial::<T>(s * k, 1, 13)
            .col(0)
            .to_vec();
        let mut y = vec![T::ZERO; t * s];
        for ti in 0..t {
            for si in 0..s {
                let row = if self.shared { ti } else { ti * s + si };
                let mut v = T::from_f64(0.1) * noise[ti * s + si];
                for j in 0..k {
                    v += x[row * k + j] * beta[si * k + j];
                }
                y[ti * s + si] = v;
            }
        }
        let params = RollingParams::default();
        let (yd, xd) = (DevVec::from_slice(gpu, &y)?, DevVec::from_slice(gpu, &x)?);
        let ddata = if self.shared {
            DeviceRollingData::shared(&yd, &xd, t, s, k)
        } else {
            DeviceRollingData::per_series(&yd, &xd, t, s, k)
        };
        let walk = time_median(gpu, 1, self.reps, || {
            rolling_lstsq_device(gpu, &ddata, self.window, &params).map(|_| ())
        })?
        .median_ms();
        let data = if self.shared {
            RollingData::shared(&y, &x, t, s, k)
        } else {
            RollingData::per_series(&y, &x, t, s, k)
        };
        let on_gpu = RollingParams {
            device: Device::Gpu(0),
            ..Default::default()
        };
        let host = wall_ms(3, || rolling_lstsq(&data, self.window, &on_gpu).map(|_| ()))?;
        let cpu = if self.cpu {
            let on_cpu = RollingParams {
                device: Device::Cpu,
                ..Default::default()
            };
            Some(wall_ms(3, || {
                rolling_lstsq(&data, self.window, &on_cpu).map(|_| ())
            })?)
        } else {
            None
        };
        let (cpu_txt, ratio) = match cpu {
            Some(c) => (format!("{c:.1}"), format!("{:.0}x", c / walk)),
            None => ("-".into(), "-".into()),
        };
        let per = 1e6 * walk / (s * t) as f64;
        let xs = if self.shared { "shared" } else { "per series" };
        println!(
            "| {prec} | {s} | {t} | {k} | {} | {xs} | {walk:.3} | {host:.1} | {cpu_txt} | {ratio} | {per:.3} |",
            self.window
        );
        Ok(())
    }
}

/// Median wall-clock milliseconds of `reps` runs of `f`, after one untimed run (which
/// opens the GPU's module and caches for the timed ones).
fn wall_ms(reps: usize, mut f: impl FnMut() -> cuqr::Result<()>) -> CliResult<f64> {
    f()?;
    let mut v = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = Instant::now();
        f()?;
        v.push(t0.elapsed().as_secs_f64() * 1e3);
    }
    Ok(upper_median(v))
}
