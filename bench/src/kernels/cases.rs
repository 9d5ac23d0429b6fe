//! The kernel micro-benchmark cases, each kernel and size defined once: `cuqr bench
//! kernels` times them into one table against the ceilings, the criterion bench
//! `benches/kernels.rs` times the same cases with criterion. A [`Meter`] does the
//! timing and the reporting; the cases say what runs, on which data, in which order,
//! with what work (bytes moved or flops).
//!
//! Memory-bound kernels count every element read or written once (`panel_col_norms`
//! reads R's upper triangle only); compute-bound ones count flops.

use std::cell::RefCell;

use cuqr::internals::gpu::givens_two_phase as tp;
use cuqr::internals::gpu::givens_wavefront as wf;
use cuqr::internals::gpu::two_phase_launch::{ApplyTarget, GenPath, RotList};
use cuqr::internals::gpu::{DevMat, DevVec, GpuScalar};
use cuqr::Gpu;
use cuqr_cli::rng::random_signed_matrix_serial;

pub use super::meter::Meter;
use crate::common::{copy_into, dup, gemm_square, random_dev};

/// The sizes of the cases: the default run's, or the quick one's.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// The m×n matrix of the copies, transposes, norms and reductions (and the
    /// reflectors' length m).
    pub matrix: (usize, usize),
    /// The k of the k×k GEMM ceiling.
    pub gemm_k: usize,
    /// Columns of the double sum's m×cc block.
    pub sum_cols: usize,
    /// Two-phase Givens: Q's rows, the strip's h and p.
    pub two_phase: (usize, usize, usize),
    /// The column-insertion strip stage: m, n, p.
    pub strip: (usize, usize, usize),
}

impl Sizes {
    /// The default sizes (matrices 16384×4096), or the quick ones (4096×1024).
    pub fn new(quick: bool) -> Self {
        if quick {
            Sizes {
                matrix: (4096, 1024),
                gemm_k: 4096,
                // 64 columns in the quick run
                sum_cols: 64,
                two_phase: (2000, 1000, 50),
                strip: (2000, 500, 20),
            }
        } else {
            Sizes {
                matrix: (16384, 4096),
                gemm_k: 8192,
                // 1024 columns: 128 MiB a matrix in f64, well past the 50 MiB L2, a size
                // that fills the GPU
                sum_cols: 1024,
                two_phase: (8000, 3000, 200),
                strip: (4000, 1000, 50),
            }
        }
    }
}

/// A case's work: bytes moved (memory-bound) or flops (compute-bound).
#[derive(Clone, Copy, Debug)]
pub enum Work {
    Bytes(f64),
    Flops(f64),
}

/// How a case's time is read.
#[derive(Clone, Copy, Debug)]
pub enum Role {
    /// A ceiling the kernels are set against (copy bandwidth, GEMM rate).
    Ceiling,
    /// A kernel.
    Kernel,
    /// A compute-bound kernel whose time is also read as this many bytes moved.
    KernelAndTraffic(f64),
}

/// One timed case.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: &'static str,
    pub shape: String,
    pub work: Work,
    pub role: Role,
}

impl Case {
    fn new(name: &'static str, shape: String, work: Work) -> Self {
        Case {
            name,
            shape,
            work,
            role: Role::Kernel,
        }
    }
}

/// [`Meter::measure`] without a setup.
fn measure_plain<M: Meter>(
    meter: &mut M,
    case: Case,
    mut run: impl FnMut() -> cuqr::Result<()>,
) -> cuqr::Result<()> {
    meter.measure(case, || Ok(()), |_| run())
}

fn devvec<T: GpuScalar>(gpu: &Gpu, n: usize, seed: u64) -> cuqr::Result<DevVec<T>> {
    DevVec::from_slice(
        gpu,
        &random_signed_matrix_serial::<T>(n, 1, seed).into_vec(),
    )
}

/// Every case of one precision, ceilings first.
///
/// # Errors
/// A device error, or one of the meter.
pub fn run_all<T: GpuScalar, M: Meter>(
    gpu: &Gpu,
    sizes: &Sizes,
    meter: &mut M,
) -> cuqr::Result<()> {
    let (m, n) = sizes.matrix;
    let a = random_dev::<T>(gpu, m, n, 1)?;
    let mut b = DevMat::<T>::zeros(gpu, m, n)?;
    ceilings(gpu, sizes, &a, &mut b, meter)?;
    memory_bound(gpu, sizes, &a, &mut b, meter)?;
    reflector_kernels::<T, M>(gpu, m, meter)?;
    drop((a, b));
    two_phase_kernels::<T, M>(gpu, sizes, meter)?;
    strip_stages::<T, M>(gpu, sizes, meter)
}

/// The ceilings: the copy of `a` into `b`, and a cuBLAS GEMM of random k×k matrices.
fn ceilings<T: GpuScalar, M: Meter>(
    gpu: &Gpu,
    sizes: &Sizes,
    a: &DevMat<T>,
    b: &mut DevMat<T>,
    meter: &mut M,
) -> cuqr::Result<()> {
    let s = std::mem::size_of::<T>() as f64;
    let copied = Work::Bytes(2.0 * (a.ld() * a.ncols()) as f64 * s);
    let shape = format!("{}×{}", a.nrows(), a.ncols());
    let copy = Case {
        role: Role::Ceiling,
        ..Case::new("ceiling: device copy", shape, copied)
    };
    measure_plain(meter, copy, || copy_into(gpu, a, b))?;
    let k = sizes.gemm_k;
    let x = random_dev::<T>(gpu, k, k, 2)?;
    let mut c = DevMat::<T>::zeros(gpu, k, k)?;
    let flops = Work::Flops(2.0 * (k as f64).powi(3));
    let gemm = Case {
        role: Role::Ceiling,
        ..Case::new("ceiling: cuBLAS GEMM", format!("{k}³"), flops)
    };
    measure_plain(meter, gemm, || gemm_square(gpu, &x, &mut c))
}

/// The memory-bound kernels on the m×n matrix `a` (`b` its target): copies and
/// transposes, column norms and the reductions.
fn memory_bound<T: GpuScalar, M: Meter>(
    gpu: &Gpu,
    sizes: &Sizes,
    a: &DevMat<T>,
    b: &mut DevMat<T>,
    meter: &mut M,
) -> cuqr::Result<()> {
    let s = std::mem::size_of::<T>() as f64;
    let (m, n) = (a.nrows(), a.ncols());
    let mn = (m * n) as f64;
    let shape = format!("{m}×{n}");
    let copied = || Work::Bytes(2.0 * mn * s);
    let mut t = DevMat::<T>::zeros(gpu, n, m)?;
    measure_plain(
        meter,
        Case::new("transpose_padded", shape.clone(), copied()),
        || gpu.transpose_padded(&a.view(), &mut t.view_mut()),
    )?;
    drop(t);
    measure_plain(
        meter,
        Case::new("two_phase_copy", shape.clone(), copied()),
        || gpu.two_phase_copy(&a.view(), &mut b.view_mut(), 0..0, false),
    )?;
    measure_plain(
        meter,
        Case::new("panel_copy", shape.clone(), copied()),
        || gpu.panel_copy(&a.view(), &mut b.view_mut()),
    )?;
    let mut out = DevVec::<T>::zeros(gpu, 2 * n)?;
    // Column c's norm reads its rows 0..=c only (R's upper triangle, the rank check).
    let tri: usize = (0..n).map(|c| (c + 1).min(m)).sum();
    let name = "panel_col_norms (upper triangle)";
    let norms = Case::new(name, shape.clone(), Work::Bytes(tri as f64 * s));
    measure_plain(meter, norms, || {
        gpu.panel_col_norms(&a.view(), &mut out.view_mut())
    })?;
    let nrm2 = Case::new("reduce_nrm2 (one block)", shape, Work::Bytes(mn * s));
    measure_plain(meter, nrm2, || {
        gpu.reduce_nrm2(&a.buf().slice(..), &mut out.slice_mut(0..1))
    })?;
    let cc = sizes.sum_cols;
    let len = m * cc;
    let x = devvec::<T>(gpu, len, 3)?;
    let y = devvec::<T>(gpu, len, 4)?;
    let dot_bytes = Work::Bytes(2.0 * len as f64 * s);
    let dot = Case::new("reduce_dot (one block)", format!("{len}"), dot_bytes);
    measure_plain(meter, dot, || {
        gpu.reduce_dot(&x.view(), &y.view(), &mut out.slice_mut(0..1))
    })?;
    let mut cm = DevMat::<T>::zeros(gpu, m, cc)?;
    let sum_bytes = Work::Bytes(4.0 * len as f64 * s);
    let sum = Case::new("reduce_double_sum", format!("{m}×{cc}"), sum_bytes);
    measure_plain(meter, sum, || {
        gpu.reduce_double_sum(&x.slice(0..len), &y.slice(0..len), &mut cm.view_mut())
    })
}

/// The Householder kernels for reflectors of length m: one vector, the T factor of
/// 64 of them and its τ entries.
fn reflector_kernels<T: GpuScalar, M: Meter>(
    gpu: &Gpu,
    m: usize,
    meter: &mut M,
) -> cuqr::Result<()> {
    let s = std::mem::size_of::<T>() as f64;
    let mut hx = devvec::<T>(gpu, m - 1, 5)?;
    let mut alpha = devvec::<T>(gpu, 1, 6)?;
    let mut tau = DevVec::<T>::zeros(gpu, 1)?;
    let name = "householder_house (one block)";
    let house = Case::new(name, format!("{m}"), Work::Bytes(2.0 * m as f64 * s));
    measure_plain(meter, house, || {
        gpu.householder_house(
            &mut alpha.view_mut(),
            &mut hx.view_mut(),
            &mut tau.view_mut(),
        )
    })?;
    drop((hx, alpha, tau));

    // T-factor build and set_tau (k = 64 reflectors of length m)
    let kk = 64;
    let v = random_dev::<T>(gpu, m, kk, 7)?;
    let taus = devvec::<T>(gpu, kk, 8)?;
    let mut tt = DevMat::<T>::zeros(gpu, kk, kk)?;
    let flops = Work::Flops((m * kk * kk) as f64);
    let build = Case::new("wy_build_t", format!("{m}×{kk}"), flops);
    measure_plain(meter, build, || {
        gpu.wy_build_t(&v.view(), &taus.view(), &mut tt.view_mut())
    })?;
    let bytes = Work::Bytes(2.0 * kk as f64 * s);
    measure_plain(
        meter,
        Case::new("wy_set_tau", format!("{kk}"), bytes),
        || gpu.wy_set_tau(&taus.view(), &mut tt.view_mut()),
    )
}

/// Two-phase Givens: the strip and block generates (default and one-block
/// wavefront paths) and the default apply of the strip's rotations to Q and d.
fn two_phase_kernels<T: GpuScalar, M: Meter>(
    gpu: &Gpu,
    sizes: &Sizes,
    meter: &mut M,
) -> cuqr::Result<()> {
    let (qm, h, p) = sizes.two_phase;
    let mut list = RotList::<T>::with_capacity(gpu, p * h)?;
    let x0 = random_dev::<T>(gpu, h + p, p, 9)?;
    let xs = RefCell::new(DevMat::<T>::zeros(gpu, h + p, p)?);
    // the driver block back to x0 before each generate (untimed)
    let reset = || copy_into(gpu, &x0, &mut xs.borrow_mut());
    // the driver block: O(p²h) rotation applications of 6 flops
    let flops = Work::Flops(6.0 * (p * p * h) as f64 / 2.0);
    let strip = format!("h={h} p={p}");
    let name = "two_phase_gen_strip (default: chains of block scans)";
    meter.measure(Case::new(name, strip.clone(), flops), reset, |_| {
        gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list)
    })?;
    // the one-block wavefront it replaced (driver in global memory at this size)
    let name = "two_phase_gen_strip (one-block wavefront)";
    meter.measure(Case::new(name, strip, flops), reset, |_| {
        gpu.two_phase_gen_strip_path(
            &mut xs.borrow_mut().view_mut(),
            h,
            &mut list,
            GenPath::Pipe { shared: false },
        )
    })?;
    // the apply below takes the default generate's list
    reset()?;
    gpu.two_phase_gen_strip(&mut xs.borrow_mut().view_mut(), h, &mut list)?;
    two_phase_apply(gpu, &list, qm, (h, p), meter)?;
    drop((x0, xs));
    two_phase_blocks::<T, M>(gpu, qm, p / 2, meter)
}

/// The default apply of `list` (the strip's p·h rotations) to a random Q (qm×(h+p))
/// and d: 6 flops per rotation on each of Q's rows and d's one column; as traffic, Q
/// and d read and written once.
fn two_phase_apply<T: GpuScalar, M: Meter>(
    gpu: &Gpu,
    list: &RotList<T>,
    qm: usize,
    (h, p): (usize, usize),
    meter: &mut M,
) -> cuqr::Result<()> {
    let s = std::mem::size_of::<T>() as f64;
    let (hp, rotations) = (h + p, p * h);
    let mut q = random_dev::<T>(gpu, qm, hp, 10)?;
    let mut d = random_dev::<T>(gpu, hp, 1, 11)?;
    let flops = Work::Flops(6.0 * rotations as f64 * (qm + 1) as f64);
    let traffic = 2.0 * (qm * hp + hp) as f64 * s;
    let case = Case {
        role: Role::KernelAndTraffic(traffic),
        ..Case::new(
            "two_phase_apply default (strip, Q+d: pipe kernel)",
            format!("Q {qm}×{hp} p·h={rotations}"),
            flops,
        )
    };
    measure_plain(meter, case, || {
        let (mut qv, mut dv) = (q.view_mut(), d.view_mut());
        gpu.two_phase_apply(list, &mut ApplyTarget::q_d(&mut qv, &mut dv))
    })
}

/// The block generate of `bp` columns over `qm` rows, by the default chains of block
/// scans and by the one-block wavefront.
fn two_phase_blocks<T: GpuScalar, M: Meter>(
    gpu: &Gpu,
    qm: usize,
    bp: usize,
    meter: &mut M,
) -> cuqr::Result<()> {
    let z0 = random_dev::<T>(gpu, bp, qm, 12)?;
    let mut z = DevVec::<T>::zeros(gpu, bp * qm)?;
    let mut blist = RotList::<T>::with_capacity(gpu, bp * qm)?;
    let block = format!("p={bp} m={qm}");
    let flops = Work::Flops(6.0 * (bp * bp * qm) as f64 / 2.0);
    let name = "two_phase_gen_block (default: chains of block scans)";
    measure_plain(meter, Case::new(name, block.clone(), flops), || {
        gpu.two_phase_gen_block(&z0.view(), &mut z, &mut blist)
    })?;
    let name = "two_phase_gen_block (one-block wavefront)";
    measure_plain(meter, Case::new(name, block, flops), || {
        gpu.two_phase_gen_block_path(
            &z0.view(),
            &mut z,
            &mut blist,
            GenPath::Pipe { shared: false },
        )
    })
}

/// The whole strip stage of column insertion (k0 = 0), both Givens strategies on the
/// same data, each run on fresh copies of R, Q and d.
fn strip_stages<T: GpuScalar, M: Meter>(
    gpu: &Gpu,
    sizes: &Sizes,
    meter: &mut M,
) -> cuqr::Result<()> {
    let (sm, sn, sp) = sizes.strip;
    let r0 = random_dev::<T>(gpu, sm, sn + sp, 13)?;
    let q0 = random_dev::<T>(gpu, sm, sm, 14)?;
    let d0 = random_dev::<T>(gpu, sm, 1, 15)?;
    for (name, two_phase) in [
        ("strip stage, two-phase", true),
        ("strip stage, wavefront", false),
    ] {
        let flops = Work::Flops(6.0 * (sp * sn) as f64 * (sm + sn + 1) as f64);
        let shape = format!("m={sm} n={sn} p={sp} k0=0");
        meter.measure(
            Case::new(name, shape, flops),
            || Ok((dup(gpu, &r0)?, dup(gpu, &q0)?, dup(gpu, &d0)?)),
            |(r, q, d)| {
                if two_phase {
                    tp::insert_cols_strip_two_phase(gpu, r, q, d, 0, sp, sn)
                } else {
                    wf::insert_cols_strip_wavefront(gpu, r, q, d, 0, sp, sn)
                }
            },
        )?;
    }
    Ok(())
}
