//! Launcher of `small_panel_qr` (gpu-kernels/src/small_panel.rs): a Householder
//! panel whose rows fit one block's shared memory, factored by one block with three
//! block barriers a column instead of the cooperative `fused_panel_qr`'s grid barrier.
//! Same outputs as `fused_panel_qr` (R in place, V, τ, T), so `blocked_qr` takes it for
//! any panel that fits: column deletion's band panels, column insertion's new columns,
//! the last panels of a factorisation.

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaStream, DevicePtrMut, LaunchConfig};

use crate::base::error::{Error, Result};
use crate::gpu::launch::fused_panel::RawMat;
use crate::gpu::launch::launch_kernel;
use crate::gpu::runtime::matrix::{DevMat, DevMatViewMut, DevVec};
use crate::gpu::runtime::{driver_err, Gpu, GpuScalar};

/// Widest panel `small_panel_qr` takes (gpu-kernels `small_panel::MAX_JB`).
pub const SMALL_PANEL_MAX_JB: usize = 64;
/// Most rows `small_panel_qr` takes (one block's threads over the rows).
pub const SMALL_PANEL_MAX_ROWS: usize = 1024;
/// Most rows for which `blocked_qr` prefers `small_panel_qr` to the cooperative panel:
/// one warp makes each reflector, so a column step grows with the rows. H100
/// (docs/performance.md): column deletion's band panels of 164, 264 and 364 rows (f64)
/// were faster than with the earlier all-threads kernel, f32 panels of 764 rows slower
/// than the cooperative panel (ACC delete_cols p = 700 below refactorising).
pub const SMALL_PANEL_FAST_ROWS: usize = 384;
/// Shared scratch of the kernel besides the panel and T, in elements
/// (`small_panel::SCRATCH`: τ).
const SCRATCH: usize = SMALL_PANEL_MAX_JB;
/// Fewest threads a block of the kernel needs (`small_panel::MIN_THREADS`).
const MIN_THREADS: u32 = 256;
/// Most threads a block of the kernel is launched with.
const MAX_THREADS: u32 = 1024;

/// What `small_panel_qr` keeps on [`Gpu`]: the device's opt-in shared memory per block,
/// the threads a block gets (the kernel's register limit), and the dynamic shared memory
/// the kernel's attribute has been raised to, per precision.
#[derive(Debug)]
pub(crate) struct SmallPanelCache {
    smem_optin: usize,
    threads: [u32; 2],
    allowed: [usize; 2],
}

/// Dynamic shared memory (bytes) of a rows×jb panel of `elem`-byte elements.
fn small_panel_bytes(rows: usize, jb: usize, elem: usize) -> usize {
    (rows * jb + jb * jb + SCRATCH) * elem
}

/// Whether a rows×jb panel of `elem`-byte elements fits `small_panel_qr` with
/// `smem_optin` bytes of shared memory a block (see [`Gpu::small_panel_fits`]).
fn fits(rows: usize, jb: usize, elem: usize, smem_optin: usize) -> bool {
    (1..=SMALL_PANEL_MAX_JB).contains(&jb)
        && jb <= rows
        && rows <= SMALL_PANEL_MAX_ROWS
        && small_panel_bytes(rows, jb, elem) <= smem_optin
}

impl Gpu {
    fn small_panel_cache(
        &self,
    ) -> Result<std::sync::Arc<std::sync::Mutex<Option<SmallPanelCache>>>> {
        let small_panel_slot = self.caches.get::<Option<SmallPanelCache>>();
        let mut g = small_panel_slot.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            let ks = &self.kernels;
            let most = |f: &cudarc::driver::CudaFunction| -> Result<u32> {
                let n = f
                    .max_threads_per_block()
                    .map_err(driver_err("querying small_panel_qr's block limit"))?;
                Ok((u32::try_from(n).unwrap_or(0) / 32 * 32).clamp(32, MAX_THREADS))
            };
            *g = Some(SmallPanelCache {
                smem_optin: self.smem_optin()?,
                threads: [most(&ks.f32.small_panel_qr)?, most(&ks.f64.small_panel_qr)?],
                allowed: [48 * 1024; 2],
            });
        }
        drop(g);
        Ok(small_panel_slot)
    }

    /// Whether `small_panel_qr` takes a rows×jb panel of `T` on this device (jb ≤
    /// [`SMALL_PANEL_MAX_JB`], rows ≤ [`SMALL_PANEL_MAX_ROWS`], the panel, T and scratch
    /// in one block's shared memory, at least 256 threads a block within the kernel's
    /// register limit). False if the device limits cannot be read.
    pub(crate) fn small_panel_fits<T: GpuScalar>(&self, rows: usize, jb: usize) -> bool {
        self.small_panel_cache()
            .ok()
            .and_then(|slot| {
                let g = slot.lock().unwrap_or_else(|e| e.into_inner());
                g.as_ref().map(|c| {
                    let entry = usize::from(size_of::<T>() == 8);
                    c.threads[entry] >= MIN_THREADS && fits(rows, jb, size_of::<T>(), c.smem_optin)
                })
            })
            .unwrap_or(false)
    }

    /// [`Gpu::small_panel_qr_on`] for a panel of `a` on the main stream.
    ///
    /// # Errors
    /// As [`Gpu::small_panel_qr_on`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn small_panel_qr<T: GpuScalar>(
        &self,
        a: &mut DevMat<T>,
        r0: usize,
        j0: usize,
        rows: usize,
        jb: usize,
        band: Option<usize>,
        v: &mut DevMatViewMut<'_, T>,
        tau: &mut DevVec<T>,
        t: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        self.with_raw_on_main(a, |raw| {
            self.small_panel_qr_on(raw, r0, j0, rows, jb, band, v, tau, t, &self.stream)
        })
    }

    /// Factors the rows×jb panel A(r0.., j0..) of the matrix at `a` in one block on
    /// `stream` (gpu-kernels `small_panel::qr`): R in place (exact zeros below the
    /// diagonal), V (unit diagonal, zeros above; zeros below row j + band in column j),
    /// τ and T (`larft` forward). A `band` limits reflector j to rows j..=j+band.
    /// The caller orders `stream` against other work on the panel's columns (as for
    /// [`Gpu::fused_panel_qr_on`]); V, τ and T are taken through cudarc on `stream`.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if the panel does not fit ([`Gpu::small_panel_fits`]);
    /// [`Error::Driver`].
    ///
    /// # Panics
    /// If the panel or outputs do not fit their matrices (a cuqr bug).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn small_panel_qr_on<T: GpuScalar>(
        &self,
        a: &RawMat,
        r0: usize,
        j0: usize,
        rows: usize,
        jb: usize,
        band: Option<usize>,
        v: &mut DevMatViewMut<'_, T>,
        tau: &mut DevVec<T>,
        t: &mut DevMatViewMut<'_, T>,
        stream: &CudaStream,
    ) -> Result<()> {
        assert!(r0 + rows <= a.nrows && j0 + jb <= a.ncols);
        assert!(v.nrows() >= rows && v.ncols() >= jb);
        assert!(tau.len() >= jb && t.nrows() >= jb && t.ncols() >= jb);
        let elem = size_of::<T>();
        let entry = usize::from(elem == 8);
        let f = &T::kernel_set(&self.kernels).small_panel_qr;
        let bytes = small_panel_bytes(rows, jb, elem);
        let threads = {
            let slot = self.small_panel_cache()?;
            let mut g = slot.lock().unwrap_or_else(|e| e.into_inner());
            let c = g.as_mut().expect("made by small_panel_cache");
            if !fits(rows, jb, elem, c.smem_optin) || c.threads[entry] < MIN_THREADS {
                return Err(Error::InvalidParam {
                    op: "small_panel_qr",
                    what: "panel",
                    why: format!("a {rows}×{jb} panel does not fit one block's shared memory"),
                });
            }
            if bytes > c.allowed[entry] {
                f.set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    i32::try_from(c.smem_optin).expect("shared memory fits i32"),
                )
                .map_err(driver_err("raising small_panel_qr's shared memory limit"))?;
                c.allowed[entry] = c.smem_optin;
            }
            c.threads[entry]
        };
        let band = band.unwrap_or(rows).min(rows);
        let (lda, ldv, ldt) = (a.ld, v.ld(), t.ld());
        let pa = a.ptr + ((r0 + j0 * lda) * elem) as u64;
        let (pv, _gv) = v.buf_mut().device_ptr_mut(stream);
        let (pt, _gt) = t.buf_mut().device_ptr_mut(stream);
        let mut tau_v = tau.view_mut();
        let (ptau, _gtau) = tau_v.device_ptr_mut(stream);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (threads, 1, 1),
            shared_mem_bytes: u32::try_from(bytes).expect("shared memory fits u32"),
        };
        // SAFETY: matches small_panel_qr_{f32,f64}(a: *mut T, lda, rows, jb, band, v: *mut T,
        // ldv, tau: *mut T, t: *mut T, ldt) (device pointers are 64-bit). The asserts keep
        // the panel inside `a` (RawMat's contract: a live matrix, the caller ordering
        // `stream` against other work on these columns), V (rows×jb), τ (jb) and T
        // (jb×jb) inside their buffers, whose guards live across the call; they are
        // distinct allocations. small_panel_fits checked 1 ≤ jb ≤ min(rows, 64), rows ≤
        // 1024 (so rows·jb < 2³²) and the dynamic shared memory (rows·jb + jb² + SCRATCH
        // elements) against the opt-in limit the attribute was raised to; one block of a
        // multiple of 32 threads, at least 256 (checked above), at most 1024 and within the
        // kernel's register limit.
        unsafe {
            launch_kernel!(self, on stream, f, cfg, "small_panel_qr"; &pa, &lda, &rows, &jb,
                &band, &pv, &ldv, &ptau, &pt, &ldt)
        }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! `small_panel_qr` against a CPU panel made with `cpu::householder::house` and
    //! `apply_left_split` (reflector j on rows j..=j+band) and T by `larft`'s recurrence,
    //! on poisoned outputs: R, V, τ, T within 50·rows·u, R's exact zeros below the
    //! diagonal and V's exact unit diagonal and zeros above it and below the band.
    use super::*;
    use crate::cpu::householder::{apply_left_split, house};
    use crate::gpu::runtime::DevMat;
    use crate::{Mat, Scalar};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// R, V, τ, T of `a` on the CPU (band as the kernel: rows beyond j+band untouched).
    fn cpu_panel<T: Scalar>(a: &Mat<T>, band: usize) -> [Mat<T>; 4] {
        let (m, jb) = (a.nrows(), a.ncols());
        let mut r = a.clone();
        let mut tau = vec![T::ZERO; jb];
        for k in 0..jb {
            let kend = m.min(k + band + 1);
            let mut x: Vec<T> = (k + 1..kend).map(|i| r[(i, k)]).collect();
            let (beta, tk) = house(r[(k, k)], &mut x);
            r[(k, k)] = beta;
            for (o, i) in (k + 1..kend).enumerate() {
                r[(i, k)] = x[o];
            }
            tau[k] = tk;
            for c in k + 1..jb {
                let mut head = r[(k, c)];
                let mut tail: Vec<T> = (k + 1..kend).map(|i| r[(i, c)]).collect();
                apply_left_split(&x, tk, &mut head, &mut tail);
                r[(k, c)] = head;
                for (o, i) in (k + 1..kend).enumerate() {
                    r[(i, c)] = tail[o];
                }
            }
        }
        let v = Mat::from_fn(m, jb, |i, j| {
            if i < j || i > j + band {
                T::ZERO
            } else if i == j {
                T::ONE
            } else {
                r[(i, j)]
            }
        });
        let rr = Mat::from_fn(m, jb, |i, j| if i <= j { r[(i, j)] } else { T::ZERO });
        let mut t = Mat::<T>::zeros(jb, jb);
        for k in 0..jb {
            t[(k, k)] = tau[k];
            let y: Vec<T> = (0..k)
                .map(|j| (0..m).fold(T::ZERO, |acc, i| v[(i, j)].mul_add(v[(i, k)], acc)))
                .collect();
            for i in 0..k {
                let s = (i..k).fold(T::ZERO, |acc, j| t[(i, j)].mul_add(y[j], acc));
                t[(i, k)] = -tau[k] * s;
            }
        }
        [rr, v, Mat::from_fn(jb, 1, |i, _| tau[i]), t]
    }

    /// The same through `small_panel_qr`, on a copy of `a` placed at (3, 2) of a
    /// NaN-padded matrix, with NaN-filled V, τ, T.
    fn gpu_panel<T: GpuScalar>(g: &Gpu, a: &Mat<T>, band: Option<usize>) -> [Mat<T>; 4] {
        let (m, jb) = (a.nrows(), a.ncols());
        let nan = T::from_f64(f64::NAN);
        let big = Mat::from_fn(m + 5, jb + 4, |i, j| {
            if (3..3 + m).contains(&i) && (2..2 + jb).contains(&j) {
                a[(i - 3, j - 2)]
            } else {
                nan
            }
        });
        let mut da = DevMat::from_host(g, big.as_ref()).unwrap();
        let mut dv = DevMat::<T>::zeros(g, m, jb).unwrap();
        dv.fill(g, nan).unwrap();
        let mut dt = DevMat::<T>::zeros(g, jb, jb).unwrap();
        dt.fill(g, nan).unwrap();
        let mut dtau = DevVec::<T>::zeros(g, jb).unwrap();
        dtau.fill(g, nan).unwrap();
        {
            let (nr, nc, ld) = (da.nrows(), da.ncols(), da.ld());
            let (ptr, _guard) = da.buf_mut().device_ptr_mut(&g.stream);
            // SAFETY: da's own buffer and shape; used on the main stream only, before
            // the guard and `da` go.
            let raw = unsafe { RawMat::new(ptr, nr, nc, ld) };
            g.small_panel_qr_on(
                &raw,
                3,
                2,
                m,
                jb,
                band,
                &mut dv.view_mut(),
                &mut dtau,
                &mut dt.view_mut(),
                &g.stream,
            )
            .unwrap();
        }
        let got = da.to_host(g).unwrap();
        for i in 0..m + 5 {
            for j in 0..jb + 4 {
                if !((3..3 + m).contains(&i) && (2..2 + jb).contains(&j)) {
                    assert!(got[(i, j)].to_f64().is_nan(), "padding ({i}, {j}) written");
                }
            }
        }
        let tau = dtau.to_vec(g).unwrap();
        [
            Mat::from_fn(m, jb, |i, j| got[(i + 3, j + 2)]),
            dv.to_host(g).unwrap(),
            Mat::from_fn(jb, 1, |i, _| tau[i]),
            dt.to_host(g).unwrap(),
        ]
    }

    fn case<T: GpuScalar>(g: &Gpu, seed: u64, m: usize, jb: usize, band: Option<usize>, e: i32) {
        let mut rng = StdRng::seed_from_u64(seed);
        let bw = band.unwrap_or(m);
        let sc = 2f64.powi(e);
        let a = Mat::<T>::from_fn(m, jb, |i, j| {
            if i > j + bw {
                T::ZERO
            } else {
                let x: f64 = rng.random_range(0.1..1.0);
                T::from_f64(if rng.random_bool(0.5) { x } else { -x } * sc)
            }
        });
        let want = cpu_panel(&a, bw);
        let got = gpu_panel(g, &a, band);
        let what = format!("{m}x{jb} band {band:?} 2^{e} {}", T::NAME);
        let tol = 50.0 * m as f64 * T::UNIT_ROUNDOFF;
        for (k, name) in ["R", "V", "tau", "T"].iter().enumerate() {
            let (x, y) = (&got[k], &want[k]);
            // R scales with the input; V, τ, T do not.
            let s = if k == 0 { sc } else { 1.0 };
            for j in 0..x.ncols() {
                for i in 0..x.nrows() {
                    let (p, q) = (x[(i, j)].to_f64(), y[(i, j)].to_f64());
                    assert!(
                        (p - q).abs() <= tol * (q.abs().max(s)),
                        "{what} {name}({i},{j}): gpu {p:e} vs cpu {q:e}"
                    );
                }
            }
        }
        for j in 0..jb {
            for i in 0..m {
                if i > j {
                    assert_eq!(got[0][(i, j)], T::ZERO, "{what}: R({i},{j}) not 0");
                }
                if i < j || i > j + bw {
                    assert_eq!(got[1][(i, j)], T::ZERO, "{what}: V({i},{j}) not 0");
                }
                if i == j {
                    assert_eq!(got[1][(i, j)], T::ONE, "{what}: V({i},{i}) not 1");
                }
            }
            for i in j + 1..jb {
                assert_eq!(got[3][(i, j)], T::ZERO, "{what}: T({i},{j}) not 0");
            }
        }
    }

    #[test]
    fn small_panels_match_the_cpu_panel() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        // band panels of column deletion, the new columns of column insertion, square,
        // single-column, full-width, the largest rows, and warp-boundary heights
        for &(m, jb, band) in &[
            (84, 32, Some(20)),
            (52, 32, Some(20)),
            (164, 64, Some(100)),
            (700, 20, None),
            (37, 37, None),
            (1, 1, None),
            (33, 1, None),
            (300, 64, None),
            (1024, 16, None),
            (97, 31, Some(0)),
        ] {
            case::<f64>(&g, m as u64, m, jb, band, 0);
            case::<f32>(&g, m as u64 + 1, m, jb, band, 0);
        }
        // scales: squares overflow or underflow without the power-of-two scaling;
        // 2^−1060 makes ‖(α, σ)‖ subnormal (the LAPACK xLARFG scaling)
        for &e in &[600, -600, 1000, -1000, -1060] {
            case::<f64>(&g, 7, 90, 24, Some(30), e);
        }
        for &e in &[70, -70, 120, -120, -140] {
            case::<f32>(&g, 8, 90, 24, Some(30), e);
        }
        // a panel that does not fit is refused, with nothing launched
        assert!(!g.small_panel_fits::<f64>(SMALL_PANEL_MAX_ROWS + 1, 8));
        assert!(!g.small_panel_fits::<f64>(1000, 64));
        assert!(!g.small_panel_fits::<f64>(10, SMALL_PANEL_MAX_JB + 1));
    }
}
