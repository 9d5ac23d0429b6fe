//! GPU kernel micro-benchmarks (criterion): the kernels that `cuqr bench kernels`
//! (src/bench/kernels.rs) times, at its default sizes, in f64 and f32, with the two
//! ceilings it measures in the same run (device-to-device copy and cuBLAS GEMM) so a
//! kernel's rate can be read against them.
//!
//! * Memory-bound kernels (`transpose_padded`, `two_phase_copy`, `panel_copy`,
//!   `panel_col_norms`, `reduce_nrm2`, `reduce_dot`, `reduce_double_sum`,
//!   `householder_house`, `wy_set_tau`, the copy ceiling) report bytes per second from a
//!   minimum-traffic model: every element read or written once (`panel_col_norms`
//!   reads R's upper triangle only).
//! * Compute-bound ones (`wy_build_t`, the two-phase Givens generate of a strip and of
//!   a block, each by the default chains of block scans and by the one-block
//!   wavefront, the blocked `two_phase_apply` to Q and d, a whole column-insertion
//!   strip stage by each Givens strategy, the GEMM ceiling) report flops per second as
//!   elements per second (1 element = 1 flop), with the CLI's flop counts.
//!
//! The method is that of docs/performance.md ("Method"): random device-resident data
//! (entries ±[0.1, 1), never zero) uploaded untimed, and each run bracketed by CUDA
//! events on the main stream after an untimed setup (restoring an input the kernel
//! overwrites) and a device synchronisation; criterion sums those event times
//! (`iter_custom`) in place of the CLI's medians of five.
//!
//! Without a GPU the bench prints `kernels: skipped (no GPU: <reason>)` and exits 0;
//! with `CUQR_REQUIRE_GPU=1` it prints that on stderr and exits 1.
//! `CUQR_KERNELS_QUICK=1` takes the CLI's `--quick` sizes (4096×1024 instead of
//! 16384×4096).

use std::cell::RefCell;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};
use cuqr::internals::gpu::givens_two_phase as tp;
use cuqr::internals::gpu::givens_wavefront as wf;
use cuqr::internals::gpu::timing::EventTimer;
use cuqr::internals::gpu::two_phase_launch::{ApplyTarget, GenPath, RotList, RotSide};
use cuqr::internals::gpu::{DevMat, DevVec, GpuScalar, Op};
use cuqr::{Gpu, Mat};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A host matrix of seeded random entries ±[0.1, 1).
fn random<T: GpuScalar>(m: usize, n: usize, seed: u64) -> Mat<T> {
    let mut rng = StdRng::seed_from_u64(seed);
    Mat::from_fn(m, n, |_, _| {
        let mag = 0.1 + 0.9 * rng.random::<f64>();
        T::from_f64(if rng.random::<bool>() { mag } else { -mag })
    })
}

fn dev<T: GpuScalar>(gpu: &Gpu, m: usize, n: usize, seed: u64) -> DevMat<T> {
    DevMat::from_host(gpu, random::<T>(m, n, seed).as_ref()).expect("device upload")
}

fn devvec<T: GpuScalar>(gpu: &Gpu, n: usize, seed: u64) -> DevVec<T> {
    DevVec::from_slice(gpu, &random::<T>(n, 1, seed).into_vec()).expect("device upload")
}

fn zeros<T: GpuScalar>(gpu: &Gpu, m: usize, n: usize) -> DevMat<T> {
    DevMat::zeros(gpu, m, n).expect("device allocation")
}

fn vzeros<T: GpuScalar>(gpu: &Gpu, n: usize) -> DevVec<T> {
    DevVec::zeros(gpu, n).expect("device allocation")
}

/// Device-to-device copy of `src` into `dst` (same allocation size).
fn copy<T: GpuScalar>(gpu: &Gpu, src: &DevMat<T>, dst: &mut DevMat<T>) -> cuqr::Result<()> {
    gpu.stream()
        .memcpy_dtod(src.buf(), dst.buf_mut())
        .map_err(|e| cuqr::Error::driver("device copy", e))
}

/// Bytes and flops as criterion throughputs.
fn bytes(b: f64) -> Throughput {
    Throughput::BytesDecimal(b as u64)
}

fn flops(f: f64) -> Throughput {
    Throughput::Elements(f as u64)
}

/// One benchmark: each iteration runs `setup` (untimed), synchronises the device, and
/// times `run` between two CUDA events on the main stream; the setup's value is
/// dropped after the end event.
fn bench<S>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    id: BenchmarkId,
    work: Throughput,
    mut setup: impl FnMut() -> cuqr::Result<S>,
    mut run: impl FnMut(&mut S) -> cuqr::Result<()>,
) {
    let timer = EventTimer::new(gpu).expect("timing events");
    g.throughput(work);
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut ms = 0.0;
            for _ in 0..iters {
                let mut s = setup().expect("untimed setup");
                gpu.synchronize().expect("device synchronisation");
                timer.start(gpu).expect("start event");
                run(&mut s).expect("timed kernel");
                ms += timer.stop(gpu).expect("end event");
                drop(s);
            }
            Duration::from_secs_f64(ms * 1e-3)
        })
    });
}

/// [`bench`] without a setup.
fn bench_plain(
    g: &mut BenchmarkGroup<'_, WallTime>,
    gpu: &Gpu,
    id: BenchmarkId,
    work: Throughput,
    mut run: impl FnMut() -> cuqr::Result<()>,
) {
    bench(g, gpu, id, work, || Ok(()), |()| run());
}

fn kernels<T: GpuScalar>(c: &mut Criterion, gpu: &Gpu, prec: &str, quick: bool) {
    let mut g = c.benchmark_group(format!("kernels/{prec}"));
    // Kernels of tens of milliseconds sit beside ones of microseconds: the same
    // iteration count in every sample, and fewer samples than criterion's 100.
    g.sampling_mode(SamplingMode::Flat).sample_size(20);
    let g = &mut g;
    let s = std::mem::size_of::<T>() as f64;
    let (m, n) = if quick { (4096, 1024) } else { (16384, 4096) };
    let mn = (m * n) as f64;
    let shape = format!("{m}x{n}");
    let id = |name: &str, param: &str| BenchmarkId::new(name, param);

    // ceilings
    let a = dev::<T>(gpu, m, n, 1);
    let mut b = zeros::<T>(gpu, m, n);
    let copied = 2.0 * (a.ld() * n) as f64 * s;
    bench_plain(g, gpu, id("ceiling_copy", &shape), bytes(copied), || {
        copy(gpu, &a, &mut b)
    });
    {
        let k = if quick { 4096 } else { 8192 };
        let gm = dev::<T>(gpu, k, k, 2);
        let mut gc = zeros::<T>(gpu, k, k);
        let fl = 2.0 * (k as f64).powi(3);
        bench_plain(
            g,
            gpu,
            id("ceiling_gemm", &format!("{k}^3")),
            flops(fl),
            || {
                gpu.gemm(
                    Op::N,
                    Op::N,
                    T::ONE,
                    &gm.view(),
                    &gm.view(),
                    T::ZERO,
                    &mut gc.view_mut(),
                )
            },
        );
    }

    // memory-bound kernels
    {
        let mut t = zeros::<T>(gpu, n, m);
        bench_plain(
            g,
            gpu,
            id("transpose_padded", &shape),
            bytes(2.0 * mn * s),
            || gpu.transpose_padded(&a.view(), &mut t.view_mut()),
        );
    }
    bench_plain(
        g,
        gpu,
        id("two_phase_copy", &shape),
        bytes(2.0 * mn * s),
        || gpu.two_phase_copy(&a.view(), &mut b.view_mut(), 0..0, false),
    );
    bench_plain(
        g,
        gpu,
        id("panel_copy", &shape),
        bytes(2.0 * mn * s),
        || gpu.panel_copy(&a.view(), &mut b.view_mut()),
    );
    let mut out = vzeros::<T>(gpu, 2 * n);
    // Column c's norm reads its rows 0..=c only (R's upper triangle, the rank check).
    let tri: usize = (0..n).map(|c| (c + 1).min(m)).sum();
    bench_plain(
        g,
        gpu,
        id("panel_col_norms_upper", &shape),
        bytes(tri as f64 * s),
        || gpu.panel_col_norms(&a.view(), &mut out.view_mut()),
    );
    bench_plain(
        g,
        gpu,
        id("reduce_nrm2_one_block", &shape),
        bytes(mn * s),
        || gpu.reduce_nrm2(&a.buf().slice(..), &mut out.slice_mut(0..1)),
    );
    {
        // The double sum's m×cc block: 64 columns at the quick sizes; 1024 (128 MiB a
        // matrix in f64, past the H100's 50 MiB L2) at the default ones.
        let cc = if quick { 64 } else { 1024 };
        let len = m * cc;
        let x = devvec::<T>(gpu, len, 3);
        let y = devvec::<T>(gpu, len, 4);
        bench_plain(
            g,
            gpu,
            id("reduce_dot_one_block", &len.to_string()),
            bytes(2.0 * len as f64 * s),
            || gpu.reduce_dot(&x.view(), &y.view(), &mut out.slice_mut(0..1)),
        );
        let mut cm = zeros::<T>(gpu, m, cc);
        bench_plain(
            g,
            gpu,
            id("reduce_double_sum", &format!("{m}x{cc}")),
            bytes(4.0 * len as f64 * s),
            || gpu.reduce_double_sum(&x.slice(0..len), &y.slice(0..len), &mut cm.view_mut()),
        );
    }
    {
        let mut hx = devvec::<T>(gpu, m - 1, 5);
        let mut alpha = devvec::<T>(gpu, 1, 6);
        let mut tau = vzeros::<T>(gpu, 1);
        bench_plain(
            g,
            gpu,
            id("householder_house_one_block", &m.to_string()),
            bytes(2.0 * m as f64 * s),
            || {
                gpu.householder_house(
                    &mut alpha.view_mut(),
                    &mut hx.view_mut(),
                    &mut tau.view_mut(),
                )
            },
        );
    }

    // T-factor build and set_tau (kk = 64 reflectors of length m)
    {
        let kk = 64;
        let v = dev::<T>(gpu, m, kk, 7);
        let taus = devvec::<T>(gpu, kk, 8);
        let mut tt = zeros::<T>(gpu, kk, kk);
        bench_plain(
            g,
            gpu,
            id("wy_build_t", &format!("{m}x{kk}")),
            flops((m * kk * kk) as f64),
            || gpu.wy_build_t(&v.view(), &taus.view(), &mut tt.view_mut()),
        );
        bench_plain(
            g,
            gpu,
            id("wy_set_tau", &kk.to_string()),
            bytes(2.0 * kk as f64 * s),
            || gpu.wy_set_tau(&taus.view(), &mut tt.view_mut()),
        );
    }
    drop((a, b, out));

    // two-phase Givens: generate (strip, block) and the blocked apply
    let (qm, h, p) = if quick {
        (2000, 1000, 50)
    } else {
        (8000, 3000, 200)
    };
    {
        let mut list = RotList::<T>::with_capacity(gpu, p * h).expect("rotation list");
        let x0 = dev::<T>(gpu, h + p, p, 9);
        let xs = RefCell::new(zeros::<T>(gpu, h + p, p));
        // the driver block back to x0 before each generate (untimed)
        let reset = || copy(gpu, &x0, &mut xs.borrow_mut());
        // the driver block: O(p²h) rotation applications of 6 flops
        let gen_fl = 6.0 * (p * p * h) as f64 / 2.0;
        let hp = format!("h={h},p={p}");
        bench(
            g,
            gpu,
            id("two_phase_gen_strip_chains", &hp),
            flops(gen_fl),
            reset,
            |()| gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list),
        );
        // the one-block wavefront the chains replaced (driver in global memory here)
        bench(
            g,
            gpu,
            id("two_phase_gen_strip_wavefront", &hp),
            flops(gen_fl),
            reset,
            |()| {
                gpu.two_phase_gen_strip_path(
                    &mut xs.borrow_mut().view_mut(),
                    h,
                    &mut list,
                    GenPath::Pipe { shared: false },
                )
            },
        );
        // the apply takes the default generate's list
        reset().expect("device copy");
        gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list)
            .expect("generate");
        let mut q = dev::<T>(gpu, qm, h + p, 10);
        let mut d = dev::<T>(gpu, h + p, 1, 11);
        // 6 flops per rotation on each of Q's qm rows and d's one column; as traffic,
        // Q and d read and written once.
        let fl = 6.0 * (p * h) as f64 * (qm + 1) as f64;
        bench_plain(
            g,
            gpu,
            id(
                "two_phase_apply_q_d",
                &format!("q={qm}x{},ph={}", h + p, p * h),
            ),
            flops(fl),
            || {
                let (mut qv, mut dv) = (q.view_mut(), d.view_mut());
                gpu.two_phase_apply(
                    &list,
                    &mut [
                        ApplyTarget {
                            view: &mut qv,
                            side: RotSide::Cols,
                            banded: false,
                        },
                        ApplyTarget {
                            view: &mut dv,
                            side: RotSide::Rows,
                            banded: false,
                        },
                    ],
                )
            },
        );
    }
    {
        let bp = p / 2;
        let z0 = dev::<T>(gpu, bp, qm, 12);
        let mut z = vzeros::<T>(gpu, bp * qm);
        let mut blist = RotList::<T>::with_capacity(gpu, bp * qm).expect("rotation list");
        let fl = 6.0 * (bp * bp * qm) as f64 / 2.0;
        let pm = format!("p={bp},m={qm}");
        bench_plain(
            g,
            gpu,
            id("two_phase_gen_block_chains", &pm),
            flops(fl),
            || gpu.two_phase_gen_block(&z0.view(), &mut z, &mut blist),
        );
        bench_plain(
            g,
            gpu,
            id("two_phase_gen_block_wavefront", &pm),
            flops(fl),
            || {
                gpu.two_phase_gen_block_path(
                    &z0.view(),
                    &mut z,
                    &mut blist,
                    GenPath::Pipe { shared: false },
                )
            },
        );
    }

    // whole column-insertion strip stage, both strategies, same data (k0 = 0)
    let (sm, sn, sp) = if quick {
        (2000, 500, 20)
    } else {
        (4000, 1000, 50)
    };
    let r0 = dev::<T>(gpu, sm, sn + sp, 13);
    let q0 = dev::<T>(gpu, sm, sm, 14);
    let d0 = dev::<T>(gpu, sm, 1, 15);
    let fresh = || -> cuqr::Result<(DevMat<T>, DevMat<T>, DevMat<T>)> {
        let cp = |a: &DevMat<T>| -> cuqr::Result<DevMat<T>> {
            let mut b = DevMat::<T>::zeros(gpu, a.nrows(), a.ncols())?;
            copy(gpu, a, &mut b)?;
            Ok(b)
        };
        Ok((cp(&r0)?, cp(&q0)?, cp(&d0)?))
    };
    let fl = 6.0 * (sp * sn) as f64 * (sm + sn + 1) as f64;
    let mnp = format!("m={sm},n={sn},p={sp}");
    bench(
        g,
        gpu,
        id("strip_stage_two_phase", &mnp),
        flops(fl),
        fresh,
        |(r, q, d)| tp::insert_cols_strip_two_phase(gpu, r, q, d, 0, sp, sn),
    );
    bench(
        g,
        gpu,
        id("strip_stage_wavefront", &mnp),
        flops(fl),
        fresh,
        |(r, q, d)| wf::insert_cols_strip_wavefront(gpu, r, q, d, 0, sp, sn),
    );
}

fn main() {
    let gpu = match Gpu::new(0) {
        Ok(gpu) => gpu,
        Err(e) => {
            let msg = format!("kernels: skipped (no GPU: {e})");
            if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") {
                eprintln!("{msg}");
                std::process::exit(1);
            }
            println!("{msg}");
            return;
        }
    };
    let quick = std::env::var("CUQR_KERNELS_QUICK").as_deref() == Ok("1");
    let mut c = Criterion::default().configure_from_args();
    kernels::<f64>(&mut c, &gpu, "f64", quick);
    kernels::<f32>(&mut c, &gpu, "f32", quick);
    c.final_summary();
}
