//! `cuqr bench qr`: cuqr's full GPU QR factorisation (issue 5 part 3; spec §1.3–§1.4,
//! §4.1) against cuSOLVER `geqrf` and `geqrf` + `orgqr` in the same process, on the
//! same device-resident random matrix (entries ±[0.1, 1), never zero).
//!
//! * **cuqr**: [`GpuQr::factorize_dev`] (the public API on device data) with Q not
//!   kept ([`QPolicy::None`]: R and d = Qᵀb) and with the explicit m×m Q
//!   ([`QPolicy::Full`]); a fresh device copy of A and b per run (untimed), the
//!   previous state freed before it (untimed);
//! * **cuSOLVER**: `geqrf` on a fresh copy (untimed), and `geqrf` then `orgqr` to the
//!   same m×m Q.
//!
//! Timings are CUDA-event medians of ≥ 5 runs after one warm-up
//! ([`cuqr::internals::gpu::timing`]). Flops as LAPACK counts them: 2mn² − 2n³/3 for the
//! factorisation, 4m²n − 4mn² + 4n³/3 for forming the m×m Q from n reflectors
//! (`orgqr` with m = n_Q = m, k = n). Accuracy of cuqr (Kerr et al.'s criteria, seeds
//! spec §4.3, issue 5 bar) on the state with Q: ‖QR − A‖_F/‖A‖_F ≤ m·u and
//! ‖QᵀQ − I‖_F ≤ m·u, norms on the device in f64 (cuBLAS DGEMM products, f32 data
//! widened exactly first; diagonal of the Gram matrix read by one kernel), and R's
//! strictly lower part exactly zero (checked on the host after a
//! download: exactness allows no reduction shortcut). Where the m×m Q does not fit,
//! R alone is checked: ‖RᵀR − AᵀA‖_F/‖A‖²_F ≤ 2m·u (a backward-error consequence of
//! QR = A + ΔA with orthogonal Q) and the exact zeros. cuSOLVER's Q (`geqrf` +
//! `orgqr`) is measured by the same ‖QᵀQ − I‖_F, for comparison.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::sync::Arc;

use cuqr::internals::gpu::timing::time_with_setup;
use cuqr::internals::gpu::{DevMat, DevMatView, DevVec, GpuQr, GpuScalar, Op, QrPhaseTimes};
use cuqr::{FactorParams, Gpu, Mat, QPolicy, Scalar};

use super::BenchOpts;
use crate::cli::CliResult;
use crate::rng::random_signed_matrix;

/// `cuqr bench qr --help`.
pub const HELP: &str = "\
cuqr bench qr: full QR factorisation (cuqr GPU) vs cuSOLVER geqrf and
geqrf + orgqr, same device-resident data, same process (issue 5)

Usage: cuqr bench qr [--quick] [--dtype f64|f32|both] [--reps R] [--csv FILE]
                     [--max-n N] [--shapes MxN,MxN,...] [--nb NB]

  --quick        Kerr grid and squares up to n = 8192 (default up to 16384)
  --dtype        f64, f32 or both (default both; --precision is a synonym)
  --reps         timed repetitions, at least 5 (default 5, after 1 warm-up)
  --csv FILE     also write every row as CSV
  --max-n N      largest n of the Kerr grid (m = 2n) and of the squares
                 (n = 1024, 2048, ... up to N; 32768 only when asked for here)
  --shapes       run these m×n shapes instead of the grids (m ≥ n)
  --nb           cuqr's Householder block size (default: cuqr's choice)

Shapes: Kerr et al.'s grid m = 2n; squares; tall-skinny 1048576×32,
1048576×128, 262144×512, 65536×2048 (shared baselines). A shape or a column
that does not fit in device memory is skipped with a note.

Columns: cuqr = GpuQr::factorize_dev without Q (R and d = Q^T b for one
right-hand side; includes the rank check's one small download, run with
tolerance 0: the default rejects random f32 squares); launches =
kernel/library launches and copies per factorisation; geqrf/cuqr = speed-up
(> 1: cuqr faster); GFLOP/s with 2mn^2 - 2n^3/3 flops; +Q = with the explicit
m×m Q, against geqrf + orgqr (m×m), flops + 4m^2n - 4mn^2 + 4n^3/3; Q phase =
(cuqr+Q) - cuqr, the difference of the medians, and its GFLOP/s with the Q
flops; |QR-A|/|A|, |Q^TQ-I| (Frobenius, on the device, in f64 also for f32
data) and whether R is exactly zero below its diagonal, each against m·u;
accuracy = pass when all hold; cuSOLVER |Q^TQ-I| = the same measure of
geqrf + orgqr's Q. Without the m×m Q: R only, |R^TR - A^TA|/|A|^2 <= 2m·u and the zeros.
A second table splits one more run per shape into Kerr et al.'s phases (their
Table 2): panels, trailing update, d, rank check and forming Q, from CUDA events
around each phase (that run has no look-ahead, so its total exceeds the median).
";

/// A shape of the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Shape {
    family: &'static str,
    m: usize,
    n: usize,
}

/// The tall-skinny shapes of the shared baselines.
const TALL_SKINNY: [(usize, usize); 4] = [
    (1 << 20, 32),
    (1 << 20, 128),
    (1 << 18, 512),
    (1 << 16, 2048),
];

/// The grid: Kerr (m = 2n) and squares for n = 1024, 2048, … ≤ `max_n`, then the
/// tall-skinny shapes with n ≤ `max_n`.
fn grid(max_n: usize) -> Vec<Shape> {
    let ns: Vec<usize> = (10..=15)
        .map(|e| 1usize << e)
        .filter(|&n| n <= max_n)
        .collect();
    let mut g: Vec<Shape> = ns
        .iter()
        .map(|&n| Shape {
            family: "kerr",
            m: 2 * n,
            n,
        })
        .collect();
    g.extend(ns.iter().map(|&n| Shape {
        family: "square",
        m: n,
        n,
    }));
    g.extend(
        TALL_SKINNY
            .iter()
            .filter(|&&(_, n)| n <= max_n)
            .map(|&(m, n)| Shape {
                family: "tall",
                m,
                n,
            }),
    );
    g
}

/// Parses `--shapes MxN,MxN` (m ≥ n ≥ 1).
fn parse_shapes(s: &str) -> CliResult<Vec<Shape>> {
    s.split(',')
        .map(|t| {
            let t = t.trim();
            let bad = || format!("--shapes: '{t}' is not MxN with m >= n >= 1");
            let (a, b) = t.split_once(['x', 'X']).ok_or_else(bad)?;
            let (m, n) = (a.trim().parse::<usize>(), b.trim().parse::<usize>());
            match (m, n) {
                (Ok(m), Ok(n)) if n >= 1 && m >= n => {
                    super::check_shape_fits("shapes", m, n)?;
                    Ok(Shape {
                        family: "custom",
                        m,
                        n,
                    })
                }
                _ => Err(bad().into()),
            }
        })
        .collect()
}

/// Flops of the factorisation (LAPACK `geqrf` count).
fn qr_flops(m: usize, n: usize) -> f64 {
    let (m, n) = (m as f64, n as f64);
    2.0 * m * n * n - 2.0 * n * n * n / 3.0
}

/// Flops of forming the m×m Q from n reflectors (LAPACK `orgqr` count, k = n).
fn q_flops(m: usize, n: usize) -> f64 {
    let (m, n) = (m as f64, n as f64);
    4.0 * m * m * n - 4.0 * m * n * n + 4.0 * n * n * n / 3.0
}

fn copy_into<T: GpuScalar>(gpu: &Gpu, src: &DevMat<T>, dst: &mut DevMat<T>) -> cuqr::Result<()> {
    gpu.stream()
        .memcpy_dtod(src.buf(), dst.buf_mut())
        .map_err(|e| cuqr::Error::Driver(format!("device copy: {e}")))
}

fn dup<T: GpuScalar>(gpu: &Gpu, a: &DevMat<T>) -> cuqr::Result<DevMat<T>> {
    let mut b = DevMat::zeros(gpu, a.nrows(), a.ncols())?;
    copy_into(gpu, a, &mut b)?;
    Ok(b)
}

/// Columns per block of the accuracy products (bounds their scratch memory).
const ACC_BLOCK: usize = 1024;
/// Output columns per pass of the widened (f32 → f64) orthogonality check: every pass
/// widens all of Q once, so wider passes convert less.
const ORTH_BLOCK: usize = 4096;

/// ‖C‖²_F of an m×w block on the device: the diagonal of the Gram matrix CᵀC
/// (cuBLAS GEMM), read by one `panel_col_norms` launch (2w values downloaded).
fn fro_sq<T: GpuScalar>(gpu: &Gpu, c: &DevMatView<'_, T>) -> cuqr::Result<f64> {
    let w = c.ncols();
    if w == 0 || c.nrows() == 0 {
        return Ok(0.0);
    }
    let mut g = DevMat::<T>::zeros(gpu, w, w)?;
    gpu.gemm(Op::T, Op::N, T::ONE, c, c, T::ZERO, &mut g.view_mut())?;
    let mut out = DevVec::<T>::zeros(gpu, 2 * w)?;
    gpu.panel_col_norms(&g.view(), &mut out.view_mut())?;
    let h = out.to_vec(gpu)?;
    Ok(h[w..].iter().map(|x| x.to_f64()).sum())
}

/// ‖QR − A‖_F/‖A‖_F and ‖QᵀQ − I‖_F for an m×m Q and m×n R, by blocks of columns on
/// the device, always in f64: f32 data is widened block by block (exactly) before
/// the DGEMMs, so the check's own rounding (f32 dot products over m rows, ≈ u a
/// product, m² of them) does not masquerade as the factorisation's error.
fn kerr_norms<T: GpuScalar>(
    gpu: &Gpu,
    q: &DevMat<T>,
    r: &DevMat<T>,
    a: &DevMat<T>,
    a_fro: f64,
) -> cuqr::Result<(f64, f64)> {
    if core::mem::size_of::<T>() == 4 {
        return Ok((
            residual_widened(gpu, q, r, a, a_fro)?,
            orthogonality(gpu, q)?,
        ));
    }
    let (m, n) = (a.nrows(), a.ncols());
    let w = ACC_BLOCK.min(n.max(1));
    let mut c = DevMat::<T>::zeros(gpu, m, w)?;
    let mut res = 0.0;
    for c0 in (0..n).step_by(w) {
        let wb = w.min(n - c0);
        let mut cv = c.block_mut(0, 0, m, wb);
        gpu.panel_copy(&a.block(0, c0, m, wb), &mut cv)?;
        gpu.gemm(
            Op::N,
            Op::N,
            T::ONE,
            &q.view(),
            &r.block(0, c0, m, wb),
            -T::ONE,
            &mut cv,
        )?;
        res += fro_sq(gpu, &c.block(0, 0, m, wb))?;
    }
    drop(c);
    Ok((res.sqrt() / a_fro, orthogonality(gpu, q)?))
}

/// dst(0..r, 0..c) := src (r×c), widened to f64 through the f32 staging `st`: exact
/// for f32 data (`convert_to_f32` then `convert_from_f32`). Not for f64 data.
fn widen<T: GpuScalar>(
    gpu: &Gpu,
    src: &DevMatView<'_, T>,
    st: &mut DevMat<f32>,
    dst: &mut DevMat<f64>,
) -> cuqr::Result<()> {
    debug_assert_eq!(core::mem::size_of::<T>(), 4);
    let (r, c) = (src.nrows(), src.ncols());
    gpu.convert_to_f32(src, T::ONE, &mut st.block_mut(0, 0, r, c))?;
    gpu.convert_from_f32::<f64>(&st.block(0, 0, r, c), 1.0, &mut dst.block_mut(0, 0, r, c))
}

/// ‖QR − A‖_F/‖A‖_F for f32 Q, R, A, in f64: for each block of A's columns, A's
/// block minus Σ_k Q(:, k-block)·R(k-block, block) over the k < n that R's upper
/// triangle reaches (R's rows ≥ n and below the diagonal are exact zeros).
fn residual_widened<T: GpuScalar>(
    gpu: &Gpu,
    q: &DevMat<T>,
    r: &DevMat<T>,
    a: &DevMat<T>,
    a_fro: f64,
) -> cuqr::Result<f64> {
    let (m, n) = (a.nrows(), a.ncols());
    let w = ACC_BLOCK.min(n.max(1));
    let mut st = DevMat::<f32>::zeros(gpu, m, w)?;
    let mut c = DevMat::<f64>::zeros(gpu, m, w)?;
    let mut qk = DevMat::<f64>::zeros(gpu, m, w)?;
    let mut rk = DevMat::<f64>::zeros(gpu, w, w)?;
    let mut res = 0.0;
    for c0 in (0..n).step_by(w) {
        let wb = w.min(n - c0);
        widen(gpu, &a.block(0, c0, m, wb), &mut st, &mut c)?;
        for k0 in (0..c0 + wb).step_by(w) {
            let kb = w.min(c0 + wb - k0);
            widen(gpu, &q.block(0, k0, m, kb), &mut st, &mut qk)?;
            widen(gpu, &r.block(k0, c0, kb, wb), &mut st, &mut rk)?;
            gpu.gemm(
                Op::N,
                Op::N,
                -1.0,
                &qk.block(0, 0, m, kb),
                &rk.block(0, 0, kb, wb),
                1.0,
                &mut c.block_mut(0, 0, m, wb),
            )?;
        }
        res += fro_sq(gpu, &c.block(0, 0, m, wb))?;
    }
    Ok(res.sqrt() / a_fro)
}

/// ‖QᵀQ − I‖_F of an m×m Q, in f64 (f32 data widened by blocks of rows: each block of
/// output columns E := Σ_k Q(k-rows, :)ᵀ·Q(k-rows, block) − I).
fn orthogonality<T: GpuScalar>(gpu: &Gpu, q: &DevMat<T>) -> cuqr::Result<f64> {
    let m = q.nrows();
    let mut orth = 0.0;
    if core::mem::size_of::<T>() == 8 {
        let w = ACC_BLOCK.min(m);
        let mut e = DevMat::<T>::zeros(gpu, m, w)?;
        for c0 in (0..m).step_by(w) {
            let wb = w.min(m - c0);
            // E := I(:, c0..c0+wb), then E := QᵀQ(:, c0..c0+wb) − E
            e.fill(gpu, T::ZERO)?;
            gpu.panel_set_identity(&mut e.block_mut(c0, 0, wb, wb))?;
            let mut ev = e.block_mut(0, 0, m, wb);
            gpu.gemm(
                Op::T,
                Op::N,
                T::ONE,
                &q.view(),
                &q.block(0, c0, m, wb),
                -T::ONE,
                &mut ev,
            )?;
            orth += fro_sq(gpu, &e.block(0, 0, m, wb))?;
        }
        return Ok(orth.sqrt());
    }
    let w = ORTH_BLOCK.min(m);
    let kb_max = ACC_BLOCK.min(m);
    let mut e = DevMat::<f64>::zeros(gpu, m, w)?;
    let mut st = DevMat::<f32>::zeros(gpu, kb_max, m)?;
    let mut qk = DevMat::<f64>::zeros(gpu, kb_max, m)?;
    for c0 in (0..m).step_by(w) {
        let wb = w.min(m - c0);
        e.fill(gpu, 0.0)?;
        gpu.panel_set_identity(&mut e.block_mut(c0, 0, wb, wb))?;
        for (i, k0) in (0..m).step_by(kb_max).enumerate() {
            let kb = kb_max.min(m - k0);
            widen(gpu, &q.block(k0, 0, kb, m), &mut st, &mut qk)?;
            gpu.gemm(
                Op::T,
                Op::N,
                1.0,
                &qk.block(0, 0, kb, m),
                &qk.block(0, c0, kb, wb),
                if i == 0 { -1.0 } else { 1.0 },
                &mut e.block_mut(0, 0, m, wb),
            )?;
        }
        orth += fro_sq(gpu, &e.block(0, 0, m, wb))?;
    }
    Ok(orth.sqrt())
}

/// ‖RᵀR − AᵀA‖_F/‖A‖²_F on the device (R: m×n, its lower part included).
fn gram_error<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMat<T>,
    a: &DevMat<T>,
    a_fro: f64,
) -> cuqr::Result<f64> {
    let n = a.ncols();
    let mut g = DevMat::<T>::zeros(gpu, n, n)?;
    gpu.gemm(
        Op::T,
        Op::N,
        T::ONE,
        &a.view(),
        &a.view(),
        T::ZERO,
        &mut g.view_mut(),
    )?;
    gpu.gemm(
        Op::T,
        Op::N,
        T::ONE,
        &r.view(),
        &r.view(),
        -T::ONE,
        &mut g.view_mut(),
    )?;
    let mut s = 0.0;
    let w = ACC_BLOCK.min(n);
    for c0 in (0..n).step_by(w) {
        let wb = w.min(n - c0);
        s += fro_sq(gpu, &g.block(0, c0, n, wb))?;
    }
    Ok(s.sqrt() / (a_fro * a_fro))
}

/// Whether R (m×n) is exactly zero strictly below its diagonal: downloaded by blocks
/// of columns (rows c0+1.. of each block) and checked on the host.
fn lower_is_zero<T: GpuScalar>(gpu: &Gpu, r: &DevMat<T>) -> cuqr::Result<bool> {
    let (m, n) = (r.nrows(), r.ncols());
    let w = 256.min(n.max(1));
    for c0 in (0..n).step_by(w) {
        let wb = w.min(n - c0);
        let rows = m.saturating_sub(c0 + 1);
        if rows == 0 {
            break;
        }
        let mut t = DevMat::<T>::zeros(gpu, rows, wb)?;
        gpu.panel_copy(&r.block(c0 + 1, c0, rows, wb), &mut t.view_mut())?;
        let h = t.to_host(gpu)?;
        for j in 0..wb {
            // local row i is global row c0+1+i; below the diagonal when c0+1+i > c0+j
            for i in j..rows {
                if h[(i, j)] != T::ZERO {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// One measured row (each value absent when not measured; `notes` say why).
#[derive(Clone, Debug, Default)]
struct Row {
    cuqr_ms: Option<f64>,
    cuqr_launches: Option<u64>,
    geqrf_ms: Option<f64>,
    cuqr_q_ms: Option<f64>,
    cuqr_q_launches: Option<u64>,
    orgqr_ms: Option<f64>,
    /// ‖QR − A‖_F/‖A‖_F.
    res: Option<f64>,
    /// ‖QᵀQ − I‖_F.
    orth: Option<f64>,
    /// ‖QᵀQ − I‖_F of cuSOLVER's Q (`geqrf` + `orgqr`), measured the same way.
    orth_cusolver: Option<f64>,
    /// ‖RᵀR − AᵀA‖_F/‖A‖²_F of the state without Q (the verdict when Q is not kept).
    gram: Option<f64>,
    /// R exactly zero below the diagonal (every measured state).
    zeros: Option<bool>,
    /// One profiled factorisation (phase split, no look-ahead) and whether it kept Q.
    phases: Option<(QrPhaseTimes, bool)>,
    notes: Vec<String>,
}

impl Row {
    /// Accuracy verdict against m·u: `Some(true)` pass, `Some(false)` fail, `None` not
    /// measured.
    fn pass(&self, m: usize, u: f64) -> Option<bool> {
        let mu = m as f64 * u;
        let zeros = self.zeros?;
        match (self.res, self.orth, self.gram) {
            (Some(r), Some(o), _) => Some(zeros && r <= mu && o <= mu),
            (_, _, Some(g)) => Some(zeros && g <= 2.0 * mu),
            _ => None,
        }
    }
}

fn is_oom(e: &cuqr::Error) -> bool {
    matches!(e, cuqr::Error::OutOfMemory { .. })
}

const GIB: f64 = (1u64 << 30) as f64;

/// Runs `f` unless `need` bytes exceed the free device memory; an out-of-memory
/// or rank-deficiency error becomes a note too. Other errors propagate.
fn if_fits<R>(
    gpu: &Gpu,
    what: &str,
    need: f64,
    notes: &mut Vec<String>,
    f: impl FnOnce() -> cuqr::Result<R>,
) -> cuqr::Result<Option<R>> {
    let (free, _) = gpu.mem_info()?;
    if need > free as f64 {
        notes.push(format!(
            "{what} skipped: needs ~{:.1} GiB, {:.1} GiB free",
            need / GIB,
            free as f64 / GIB
        ));
        return Ok(None);
    }
    match f() {
        Ok(r) => Ok(Some(r)),
        Err(e) if is_oom(&e) => {
            notes.push(format!("{what} skipped: out of device memory ({e})"));
            Ok(None)
        }
        Err(e @ cuqr::Error::RankDeficient { .. }) => {
            notes.push(format!("{what} refused the matrix: {e}"));
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Times cuqr's factorisation under `policy`; returns (median ms, launches, the last
/// state).
fn time_cuqr<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: &DevMat<T>,
    b: &DevMat<T>,
    policy: QPolicy,
    params: FactorParams,
    reps: usize,
) -> cuqr::Result<(f64, u64, GpuQr<T>)> {
    let keep: RefCell<Option<GpuQr<T>>> = RefCell::new(None);
    let launches = Cell::new(0u64);
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || {
            keep.borrow_mut().take();
            Ok((dup(gpu, a)?, dup(gpu, b)?))
        },
        |(a2, b2)| {
            let l0 = gpu.launch_count();
            let st = GpuQr::factorize_dev(gpu, a2, b2, policy, params)?;
            launches.set(gpu.launch_count() - l0);
            *keep.borrow_mut() = Some(st);
            Ok(())
        },
    )?;
    let st = keep.into_inner().expect("factorised");
    Ok((t.median_ms(), launches.get(), st))
}

/// Times cuSOLVER `geqrf`, and `geqrf` + `orgqr` to the m×m Q when `with_q`.
fn time_cusolver<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    a: &DevMat<T>,
    with_q: bool,
    reps: usize,
) -> cuqr::Result<(f64, Option<DevMat<T>>)> {
    let (m, n) = (a.nrows(), a.ncols());
    let work = RefCell::new(DevMat::<T>::zeros(gpu, m, n)?);
    let tau = RefCell::new(DevVec::<T>::zeros(gpu, n)?);
    let qbuf = RefCell::new(if with_q {
        Some(DevMat::<T>::zeros(gpu, m, m)?)
    } else {
        None
    });
    let t = time_with_setup(
        gpu,
        1,
        reps,
        || copy_into(gpu, a, &mut work.borrow_mut()),
        |()| {
            let mut w = work.borrow_mut();
            let mut tv = tau.borrow_mut();
            gpu.geqrf(&mut w.view_mut(), &mut tv.view_mut())?;
            if let Some(q) = qbuf.borrow_mut().as_mut() {
                gpu.panel_copy(&w.view(), &mut q.block_mut(0, 0, m, n))?;
                gpu.orgqr(&mut q.view_mut(), n, &tv.view())?;
            }
            Ok(())
        },
    )?;
    Ok((t.median_ms(), qbuf.into_inner()))
}

/// Measures one shape in precision `T`.
fn bench_shape<T: GpuScalar>(
    gpu: &Arc<Gpu>,
    sh: Shape,
    reps: usize,
    params: FactorParams,
) -> cuqr::Result<Row> {
    let (m, n) = (sh.m, sh.n);
    let s = std::mem::size_of::<T>() as f64;
    let (mn, mm) = (m as f64 * n as f64 * s, m as f64 * m as f64 * s);
    let slack = 256.0 * (1u64 << 20) as f64;
    let mut row = Row::default();
    let mut notes = Vec::new();
    // A, b on the device, and a host copy's ‖A‖_F
    let data = if_fits(gpu, "shape", 3.0 * mn + slack, &mut notes, || {
        let a_host: Mat<T> = random_signed_matrix(m, n, 0x5EED ^ ((m as u64) << 24) ^ n as u64);
        let a_fro = a_host.as_ref().norm_fro();
        let a = DevMat::from_host(gpu, a_host.as_ref())?;
        drop(a_host);
        let b = DevMat::from_host(
            gpu,
            random_signed_matrix::<T>(m, 1, 0xB0B ^ m as u64).as_ref(),
        )?;
        Ok((a, b, a_fro))
    })?;
    let Some((a, b, a_fro)) = data else {
        row.notes = notes;
        return Ok(row);
    };

    // without Q; R checked (exact zeros, Gram error) and the state freed at once
    let mut zeros = true;
    let mut zero_checked = false;
    if let Some((ms, l, st)) = if_fits(gpu, "cuqr", 2.0 * mn + slack, &mut notes, || {
        time_cuqr(gpu, &a, &b, QPolicy::None, params, reps)
    })? {
        row.cuqr_ms = Some(ms);
        row.cuqr_launches = Some(l);
        zeros &= lower_is_zero(gpu, st.r_dev())?;
        zero_checked = true;
        let need = 2.0 * n as f64 * n as f64 * s + slack;
        row.gram = if_fits(gpu, "R-only accuracy", need, &mut notes, || {
            gram_error(gpu, st.r_dev(), &a, a_fro)
        })?;
    }
    row.geqrf_ms = if_fits(gpu, "geqrf", 1.2 * mn + slack, &mut notes, || {
        time_cusolver(gpu, &a, false, reps).map(|(ms, _)| ms)
    })?;

    // with Q
    let need_q = mm + 2.2 * mn + slack;
    // scratch of the accuracy products (f32 data widened to f64: see kerr_norms)
    let acc_need = if s == 4.0 {
        m as f64 * (ORTH_BLOCK * 8 + ACC_BLOCK * 28) as f64 + slack
    } else {
        2.0 * m as f64 * ACC_BLOCK as f64 * s + slack
    };
    if let Some((ms, l, st)) = if_fits(gpu, "cuqr with Q (m×m)", need_q, &mut notes, || {
        time_cuqr(gpu, &a, &b, QPolicy::Full, params, reps)
    })? {
        row.cuqr_q_ms = Some(ms);
        row.cuqr_q_launches = Some(l);
        zeros &= lower_is_zero(gpu, st.r_dev())?;
        zero_checked = true;
        let q = st.q_dev().expect("Q kept under QPolicy::Full");
        if let Some((res, orth)) = if_fits(gpu, "accuracy", acc_need, &mut notes, || {
            kerr_norms(gpu, q, st.r_dev(), &a, a_fro)
        })? {
            row.res = Some(res);
            row.orth = Some(orth);
        }
    }
    if let Some((ms, q)) = if_fits(
        gpu,
        "geqrf + orgqr (m×m)",
        mm + 1.2 * mn + slack,
        &mut notes,
        || time_cusolver(gpu, &a, true, reps),
    )? {
        row.orgqr_ms = Some(ms);
        // cuSOLVER's Q by the same measure, for comparison with cuqr's
        if let Some(q) = q {
            row.orth_cusolver = if_fits(gpu, "cuSOLVER Q accuracy", acc_need, &mut notes, || {
                orthogonality(gpu, &q)
            })?;
        }
    }
    if zero_checked {
        row.zeros = Some(zeros);
    }
    // the phase split: one profiled run, with Q where cuqr with Q ran, else without
    let with_q = row.cuqr_q_ms.is_some();
    if with_q || row.cuqr_ms.is_some() {
        let (policy, need) = if with_q {
            (QPolicy::Full, need_q)
        } else {
            (QPolicy::None, 2.0 * mn + slack)
        };
        row.phases = if_fits(gpu, "phase split", need, &mut notes, || {
            let (a2, b2) = (dup(gpu, &a)?, dup(gpu, &b)?);
            GpuQr::factorize_dev_phases(gpu, a2, b2, policy, params).map(|(_, t)| (t, with_q))
        })?;
    }
    row.notes = notes;
    Ok(row)
}

fn fmt_opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

fn gflops(flops: f64, ms: Option<f64>) -> Option<f64> {
    ms.filter(|&t| t > 0.0).map(|t| flops / (t * 1e6))
}

/// The Q phase: (cuqr with Q) − (cuqr without Q), when positive.
fn q_phase(r: &Row) -> Option<f64> {
    Some(r.cuqr_q_ms? - r.cuqr_ms?).filter(|&d| d > 0.0)
}

fn accuracy_cell(r: &Row, m: usize, u: f64) -> String {
    let mu = m as f64 * u;
    let verdict = |p: bool| if p { "pass" } else { "FAIL" };
    match (r.pass(m, u), r.res.is_some() && r.orth.is_some(), r.gram) {
        (None, _, _) => "–".to_string(),
        (Some(p), true, _) => format!("{} (vs m·u = {mu:.1e})", verdict(p)),
        (Some(p), false, g) => format!(
            "{} (no Q: ‖RᵀR−AᵀA‖/‖A‖² = {} vs 2m·u = {:.1e})",
            verdict(p),
            g.map_or("–".to_string(), |g| format!("{g:.1e}")),
            2.0 * mu
        ),
    }
}

const TABLE_HEAD: &str = "| prec | shape | m | n | cuqr ms | launches | geqrf ms | geqrf/cuqr | cuqr GFLOP/s | geqrf GFLOP/s | cuqr+Q ms | launches +Q | geqrf+orgqr ms | (geqrf+orgqr)/(cuqr+Q) | cuqr+Q GFLOP/s | Q phase ms | Q phase GFLOP/s | ‖QR−A‖/‖A‖ | ‖QᵀQ−I‖ | cuSOLVER ‖QᵀQ−I‖ | R zero below diag | accuracy |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";
const CSV_HEAD: &str = "prec,shape,m,n,cuqr_ms,cuqr_launches,geqrf_ms,geqrf_over_cuqr,cuqr_gflops,geqrf_gflops,cuqr_q_ms,cuqr_q_launches,geqrf_orgqr_ms,geqrf_orgqr_over_cuqr_q,cuqr_q_gflops,q_phase_ms,q_phase_gflops,qr_residual,orthogonality,orthogonality_cusolver,gram_error,r_lower_zero,m_u,accuracy_pass,split_with_q,split_total_ms,split_panel_ms,split_panel_flops,split_trailing_ms,split_trailing_flops,split_rhs_ms,split_rank_ms,split_q_ms";

fn table_row(prec: &str, sh: &Shape, r: &Row, u: f64) -> String {
    let (f, fq) = (qr_flops(sh.m, sh.n), q_flops(sh.m, sh.n));
    let l = |x: Option<u64>| x.map_or("–".to_string(), |v| v.to_string());
    format!(
        "| {prec} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        sh.family,
        sh.m,
        sh.n,
        fmt_opt(r.cuqr_ms, 3),
        l(r.cuqr_launches),
        fmt_opt(r.geqrf_ms, 3),
        fmt_opt(ratio(r.geqrf_ms, r.cuqr_ms), 2),
        fmt_opt(gflops(f, r.cuqr_ms), 0),
        fmt_opt(gflops(f, r.geqrf_ms), 0),
        fmt_opt(r.cuqr_q_ms, 3),
        l(r.cuqr_q_launches),
        fmt_opt(r.orgqr_ms, 3),
        fmt_opt(ratio(r.orgqr_ms, r.cuqr_q_ms), 2),
        fmt_opt(gflops(f + fq, r.cuqr_q_ms), 0),
        fmt_opt(q_phase(r), 3),
        fmt_opt(gflops(fq, q_phase(r)), 0),
        r.res.map_or("–".into(), |x| format!("{x:.1e}")),
        r.orth.map_or("–".into(), |x| format!("{x:.1e}")),
        r.orth_cusolver.map_or("–".into(), |x| format!("{x:.1e}")),
        r.zeros.map_or("–", |z| if z { "yes" } else { "NO" }),
        accuracy_cell(r, sh.m, u),
    )
}

const PHASE_HEAD: &str = "| prec | shape | m | n | Q | total ms | panel ms | panel % | panel GFLOP/s | trailing ms | trailing % | trailing GFLOP/s | d ms | rank check ms | Q ms | Q % | Q GFLOP/s | other ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

/// A row of the phase-split table (Kerr et al.'s Table 2), when the shape has one.
fn phase_row(prec: &str, sh: &Shape, r: &Row) -> Option<String> {
    let (t, with_q) = r.phases?;
    let pct = |x: f64| format!("{:.0}", 100.0 * x / t.total_ms);
    let q_ms = with_q.then_some(t.q_ms);
    let other = t.total_ms - (t.panel_ms + t.trailing_ms + t.rhs_ms + t.rank_ms + t.q_ms);
    Some(format!(
        "| {prec} | {} | {} | {} | {} | {:.3} | {:.3} | {} | {} | {:.3} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {:.3} |",
        sh.family,
        sh.m,
        sh.n,
        if with_q { "m×m" } else { "none" },
        t.total_ms,
        t.panel_ms,
        pct(t.panel_ms),
        fmt_opt(gflops(t.panel_flops, Some(t.panel_ms)), 0),
        t.trailing_ms,
        pct(t.trailing_ms),
        fmt_opt(gflops(t.trailing_flops, Some(t.trailing_ms)), 0),
        t.rhs_ms,
        t.rank_ms,
        fmt_opt(q_ms, 3),
        q_ms.map_or("–".to_string(), pct),
        fmt_opt(gflops(q_flops(sh.m, sh.n), q_ms), 0),
        other,
    ))
}

fn csv_row(prec: &str, sh: &Shape, r: &Row, u: f64) -> String {
    let (f, fq) = (qr_flops(sh.m, sh.n), q_flops(sh.m, sh.n));
    let o = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v}"));
    let l = |x: Option<u64>| x.map_or(String::new(), |v| v.to_string());
    let split = match r.phases {
        Some((t, with_q)) => format!(
            "{with_q},{},{},{},{},{},{},{},{}",
            t.total_ms,
            t.panel_ms,
            t.panel_flops,
            t.trailing_ms,
            t.trailing_flops,
            t.rhs_ms,
            t.rank_ms,
            if with_q {
                t.q_ms.to_string()
            } else {
                String::new()
            }
        ),
        None => ",,,,,,,,".to_string(),
    };
    format!(
        "{prec},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{split}",
        sh.family,
        sh.m,
        sh.n,
        o(r.cuqr_ms),
        l(r.cuqr_launches),
        o(r.geqrf_ms),
        o(ratio(r.geqrf_ms, r.cuqr_ms)),
        o(gflops(f, r.cuqr_ms)),
        o(gflops(f, r.geqrf_ms)),
        o(r.cuqr_q_ms),
        l(r.cuqr_q_launches),
        o(r.orgqr_ms),
        o(ratio(r.orgqr_ms, r.cuqr_q_ms)),
        o(gflops(f + fq, r.cuqr_q_ms)),
        o(q_phase(r)),
        o(gflops(fq, q_phase(r))),
        o(r.res),
        o(r.orth),
        o(r.orth_cusolver),
        o(r.gram),
        r.zeros.map_or(String::new(), |z| z.to_string()),
        sh.m as f64 * u,
        r.pass(sh.m, u).map_or(String::new(), |p| p.to_string()),
    )
}

/// Validated options of `cuqr bench qr`.
#[derive(Debug)]
struct Opts {
    precs: Vec<&'static str>,
    reps: usize,
    shapes: Vec<Shape>,
    csv: Option<String>,
    params: FactorParams,
}

fn parse(args: &[String]) -> CliResult<Opts> {
    const CMD: &str = "bench qr";
    let o = BenchOpts::parse(
        CMD,
        args,
        &["quick"],
        &["dtype", "precision", "reps", "csv", "max-n", "shapes", "nb"],
    )?;
    let dtype = match (o.get("dtype"), o.get("precision")) {
        (Some(_), Some(_)) => return Err("--dtype and --precision are synonyms: give one".into()),
        (Some(d), None) | (None, Some(d)) => d,
        (None, None) => "both",
    };
    let precs = match dtype {
        "both" => vec!["f64", "f32"],
        "f64" => vec!["f64"],
        "f32" => vec!["f32"],
        s => return Err(format!("--dtype must be f64, f32 or both, not '{s}'").into()),
    };
    let reps = o.usize("reps")?.unwrap_or(5);
    if reps < 5 {
        return Err("--reps must be at least 5 (medians of >= 5 runs)".into());
    }
    let max_n = o.usize("max-n")?;
    let shapes = match o.get("shapes") {
        Some(s) => {
            if max_n.is_some() || o.flag("quick") {
                return Err("--shapes replaces the grid: not with --quick or --max-n".into());
            }
            parse_shapes(s)?
        }
        None => {
            let max = max_n.unwrap_or(if o.flag("quick") { 8192 } else { 16384 });
            let g = grid(max);
            if g.is_empty() {
                return Err(format!("--max-n {max}: no shape of the grid has n <= {max}").into());
            }
            g
        }
    };
    // The rank check runs with the default tolerance (max(m, n)·u/√min(m, n) relative
    // to ‖A‖_F); a refusal becomes a note under the table.
    let params = FactorParams {
        block_size: o.usize("nb")?,
        rank_tol: None,
        keep_data: false,
    };
    if let Some(path) = o.get("csv") {
        super::check_csv_path("bench qr", path)?;
    }
    Ok(Opts {
        precs,
        reps,
        shapes,
        csv: o.get("csv").map(str::to_string),
        params,
    })
}

/// Runs `cuqr bench qr`.
pub fn run(args: &[String]) -> CliResult<()> {
    const CMD: &str = "bench qr";
    let o = parse(args)?;
    let gpu = match Gpu::new(0) {
        Ok(g) => Arc::new(g),
        Err(e) => {
            println!("no GPU ({e}): cuqr bench qr measures GPU factorisations only; nothing run");
            return Ok(());
        }
    };
    println!("device: {}", gpu.describe()?);
    println!("command: cuqr bench qr {}", args.join(" "));
    println!(
        "protocol: device-resident A (±[0.1, 1)); medians of {} CUDA-event runs after 1 warm-up; \
         fresh device copy of A per run (untimed)",
        o.reps
    );
    println!();
    println!("{TABLE_HEAD}");
    let mut csv = String::from(CSV_HEAD);
    csv.push('\n');
    let mut notes = Vec::new();
    let mut phase_rows = Vec::new();
    let total = o.precs.len() * o.shapes.len();
    let mut done = 0;
    for &prec in &o.precs {
        for sh in &o.shapes {
            done += 1;
            eprint!(
                "\r[{done}/{total}] {prec} {} {}×{}        ",
                sh.family, sh.m, sh.n
            );
            let _ = std::io::stderr().flush();
            let (row, u) = if prec == "f64" {
                (
                    bench_shape::<f64>(&gpu, *sh, o.reps, o.params)?,
                    f64::UNIT_ROUNDOFF,
                )
            } else {
                (
                    bench_shape::<f32>(&gpu, *sh, o.reps, o.params)?,
                    f32::UNIT_ROUNDOFF,
                )
            };
            eprint!("\r");
            println!("{}", table_row(prec, sh, &row, u));
            phase_rows.extend(phase_row(prec, sh, &row));
            csv.push_str(&csv_row(prec, sh, &row, u));
            csv.push('\n');
            for note in &row.notes {
                notes.push(format!("{prec} {}×{}: {note}", sh.m, sh.n));
            }
        }
    }
    eprintln!();
    if !phase_rows.is_empty() {
        println!(
            "\nPhase split (Kerr et al.'s Table 2): one more run per shape with CUDA events \
             around each phase and no look-ahead (so its total exceeds the median above); \
             panel = Householder vectors, their application inside the panel and T; \
             trailing = A -= V(T^T(V^T A)); d = the right-hand side's update; Q = forming \
             the m×m Q backwards; other = allocations and gaps. GFLOP/s: panel \
             sum 2l·jb^2 - 2jb^3/3, trailing sum 4l·jb·c over the panels taken, Q the \
             orgqr count.\n"
        );
        println!("{PHASE_HEAD}");
        for r in &phase_rows {
            println!("{r}");
        }
    }
    if !notes.is_empty() {
        println!("\nNotes:");
        for n in &notes {
            println!("- {n}");
        }
    }
    if let Some(path) = &o.csv {
        std::fs::write(path, csv).map_err(|e| format!("{CMD}: writing {path}: {e}"))?;
        println!("\nCSV written to {path}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn grids_follow_the_brief() {
        let quick = parse(&strs(&["--quick"])).unwrap();
        let ns = |o: &Opts, fam: &str| -> Vec<(usize, usize)> {
            o.shapes
                .iter()
                .filter(|s| s.family == fam)
                .map(|s| (s.m, s.n))
                .collect()
        };
        assert_eq!(
            ns(&quick, "kerr"),
            [(2048, 1024), (4096, 2048), (8192, 4096), (16384, 8192)]
        );
        assert_eq!(ns(&quick, "square").last(), Some(&(8192, 8192)));
        assert_eq!(ns(&quick, "tall").len(), 4);
        let full = parse(&[]).unwrap();
        assert_eq!(ns(&full, "kerr").last(), Some(&(32768, 16384)));
        assert_eq!(ns(&full, "square").last(), Some(&(16384, 16384)));
        assert_eq!(full.precs, ["f64", "f32"]);
        let big = parse(&strs(&["--max-n", "32768", "--dtype", "f32"])).unwrap();
        assert_eq!(ns(&big, "square").last(), Some(&(32768, 32768)));
        assert_eq!(big.precs, ["f32"]);
        let small = parse(&strs(&["--max-n", "512"])).unwrap();
        assert_eq!(
            ns(&small, "tall"),
            [(1 << 20, 32), (1 << 20, 128), (1 << 18, 512)]
        );
        assert!(ns(&small, "kerr").is_empty());
    }

    #[test]
    fn bad_options_are_errors() {
        for bad in [
            &["--dtype", "f16"][..],
            &["--reps", "3"],
            &["--reps", "x"],
            &["--max-n", "0"],
            &["--max-n", "16"],
            &["--shapes", "10x20"],
            &["--shapes", "10"],
            &["--shapes", "0x0"],
            &["--shapes", "18446744073709551615x1"],
            &["--shapes", "4294967296x4294967296"],
            &["--shapes", "64x32", "--quick"],
            &["--dtype", "f32", "--precision", "f64"],
            &["--nb", "0"],
            &["--bogus"],
        ] {
            assert!(parse(&strs(bad)).is_err(), "{bad:?}");
        }
        let o = parse(&strs(&["--shapes", "64x32, 100X100", "--nb", "16"])).unwrap();
        assert_eq!(
            o.shapes.iter().map(|s| (s.m, s.n)).collect::<Vec<_>>(),
            [(64, 32), (100, 100)]
        );
        assert_eq!(o.params.block_size, Some(16));
        assert_eq!(o.params.rank_tol, None);
    }

    #[test]
    fn flop_counts_match_lapack() {
        // square n: geqrf 4n³/3, orgqr (n×n, k = n) 4n³/3
        let n = 300usize;
        let c = (n as f64).powi(3);
        assert!((qr_flops(n, n) - 4.0 * c / 3.0).abs() < 1e-6 * c);
        assert!((q_flops(n, n) - 4.0 * c / 3.0).abs() < 1e-6 * c);
        // m ≫ n: 2mn² and 4m²n lead
        let (m, n) = (1 << 20, 32);
        assert!((qr_flops(m, n) / (2.0 * m as f64 * (n * n) as f64) - 1.0).abs() < 1e-3);
        assert!((q_flops(m, n) / (4.0 * (m as f64).powi(2) * n as f64) - 1.0).abs() < 1e-3);
    }

    #[test]
    fn rows_match_headers() {
        let sh = Shape {
            family: "kerr",
            m: 2048,
            n: 1024,
        };
        let r = Row {
            cuqr_ms: Some(2.0),
            cuqr_launches: Some(40),
            geqrf_ms: Some(3.0),
            cuqr_q_ms: Some(5.0),
            orgqr_ms: Some(6.0),
            res: Some(1e-15),
            orth: Some(1e-15),
            orth_cusolver: Some(2e-15),
            zeros: Some(true),
            ..Row::default()
        };
        let u = f64::UNIT_ROUNDOFF;
        let cells = |line: &str| line.trim_matches('|').split(" | ").count();
        let row = table_row("f64", &sh, &r, u);
        assert_eq!(cells(&row), cells(TABLE_HEAD.lines().next().unwrap()));
        assert!(
            row.contains("| 1.50 |") && row.contains("| 3.000 |"),
            "{row}"
        );
        let csv = csv_row("f64", &sh, &r, u);
        assert_eq!(csv.split(',').count(), CSV_HEAD.split(',').count());
        // the accuracy verdict, then nine empty phase-split cells
        assert!(csv.ends_with(",true,,,,,,,,,"), "{csv}");
        // the Q phase is the difference of the medians, absent when not positive
        assert_eq!(q_phase(&r), Some(3.0));
        let neg = Row {
            cuqr_q_ms: Some(1.0),
            ..r.clone()
        };
        assert_eq!(q_phase(&neg), None);
        // the phase split: a row only with a profiled run, as many cells as the head
        assert_eq!(phase_row("f64", &sh, &r), None);
        let t = QrPhaseTimes {
            panel_ms: 1.0,
            trailing_ms: 2.0,
            rhs_ms: 0.1,
            rank_ms: 0.2,
            q_ms: 3.0,
            total_ms: 8.0,
            panel_flops: 1e9,
            trailing_flops: 4e10,
        };
        let with = Row {
            phases: Some((t, true)),
            ..Row::default()
        };
        let line = phase_row("f64", &sh, &with).unwrap();
        assert_eq!(cells(&line), cells(PHASE_HEAD.lines().next().unwrap()));
        // panel 1e9 flops in 1 ms = 1000 GFLOP/s, 12.5 % of the total; other = 1.7 ms
        assert!(
            line.contains("| 1000 |") && line.contains("| 1.700 |"),
            "{line}"
        );
        let csv = csv_row("f64", &sh, &with, u);
        assert_eq!(csv.split(',').count(), CSV_HEAD.split(',').count());
        assert!(
            csv.ends_with(",true,8,1,1000000000,2,40000000000,0.1,0.2,3"),
            "{csv}"
        );
    }

    #[test]
    fn verdict_needs_every_criterion() {
        let u = f64::UNIT_ROUNDOFF;
        let m = 1000;
        let ok = Row {
            res: Some(1e-15),
            orth: Some(1e-15),
            zeros: Some(true),
            ..Row::default()
        };
        assert_eq!(ok.pass(m, u), Some(true));
        let bad_zero = Row {
            zeros: Some(false),
            ..ok.clone()
        };
        assert_eq!(bad_zero.pass(m, u), Some(false));
        let bad_orth = Row {
            orth: Some(1.0),
            ..ok.clone()
        };
        assert_eq!(bad_orth.pass(m, u), Some(false));
        let gram = Row {
            gram: Some(1e-14),
            zeros: Some(true),
            ..Row::default()
        };
        assert_eq!(gram.pass(m, u), Some(true));
        assert_eq!(Row::default().pass(m, u), None);
        assert!(accuracy_cell(&gram, m, u).starts_with("pass (no Q"));
    }
}
