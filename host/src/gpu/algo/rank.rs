//! The rank check of R on the device (docs/algorithms.md#rank-test), with its kept scratch:
//! the one home of the check every GPU operation runs before it swaps a new R in.

use cudarc::driver::{CudaSlice, PinnedHostSlice};

use crate::base::error::Result;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{Gpu, GpuScalar};

/// The rank check of the CPU backend (`check_rank_of`) on a device R, as the updates run
/// it: the first j < n with |R_jj| ≤ rank_tol·‖R‖_F (or non-finite) is
/// [`crate::Error::RankDeficient`] (docs/algorithms.md#rank-test). Synchronises, then marks the
/// stage "rank check". ‖R‖_F comes from the multi-block column norms of [`check_rank_dev`]
/// (R is m×n, so its n columns are all of R): the former single-block `reduce_nrm2` over the
/// whole allocation ran at ≈ 3 ns per element — 70–350 ms of each update at the seeds'
/// sizes (docs/performance.md).
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn check_rank<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMat<T>,
    n: usize,
    rank_tol: f64,
) -> Result<()> {
    assert!(n <= r.ncols());
    let out = check_rank_dev(gpu, r, n.min(r.nrows()), rank_tol);
    gpu.stage_mark("rank check");
    out
}

/// Rank check of an upper-trapezoidal R on the device (docs/algorithms.md#rank-test): the first
/// column with |R_jj| ≤ rank_tol·‖R‖_F (or non-finite) is [`crate::Error::RankDeficient`],
/// as `cpu::check_rank_of`. One launch (`panel_col_norms`: the n column norms and the
/// diagonal) and one download into page-locked memory, then one stream wait; the device and
/// host buffers are the [`RankScratch`] kept on [`Gpu`], so a check allocates nothing
/// once the device has checked an R at least this wide (no allocation, no
/// memset, no pageable staging in an update's timed path).
///
/// # Errors
/// [`crate::Error::RankDeficient`], [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
pub(crate) fn check_rank_dev<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMat<T>,
    n: usize,
    rank_tol: f64,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let rank_scratch_slot = gpu.caches.get::<Option<RankScratch>>();
    let mut guard = rank_scratch_slot.lock().unwrap_or_else(|e| e.into_inner());
    let need = (2 * n * core::mem::size_of::<T>()).div_ceil(8);
    if guard.as_ref().is_none_or(|s| s.len() < need) {
        *guard = None;
        *guard = Some(RankScratch::new(gpu, need.next_power_of_two().max(1024))?);
    }
    let scratch = guard.as_mut().expect("made above");
    let h = scratch.norms_and_diag::<T>(gpu, r, n)?;
    let norms: Vec<f64> = h[..n].iter().map(|x| x.to_f64()).collect();
    let scale = norms.iter().fold(0.0f64, |s, x| s.max(x.abs()));
    let fro = if scale == 0.0 || !scale.is_finite() {
        scale
    } else {
        scale
            * norms
                .iter()
                .map(|x| (x / scale) * (x / scale))
                .sum::<f64>()
                .sqrt()
    };
    let tol = rank_tol * fro;
    crate::base::dims::check_diagonal(h[n..2 * n].iter().map(|x| x.to_f64()), tol)
}

/// The buffers of [`check_rank_dev`], kept on [`Gpu`] (`Gpu::rank_scratch`): the
/// kernel's output on the device and its page-locked host copy, both `len` f64s (as
/// many f32s fit twice over), grown (never shrunk) when a wider R is checked.
struct RankScratch {
    dev: CudaSlice<f64>,
    host: PinnedHostSlice<f64>,
}

impl RankScratch {
    /// Allocates `len` f64s on the device and as many page-locked on the host.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        // Unset device memory; `norms_and_diag` reads back only the 2n entries its
        // launch has just written.
        let dev = crate::gpu::ffi::driver::alloc_uninit::<f64>(&gpu.stream, len).map_err(
            crate::gpu::runtime::alloc_err("the rank-check scratch", len * 8),
        )?;
        let host = gpu.alloc_pinned::<f64>(len)?;
        Ok(Self { dev, host })
    }

    /// f64s held (device and host alike).
    fn len(&self) -> usize {
        self.dev.len()
    }

    /// The n column norms of R(:, 0:n) (upper triangle) followed by its n diagonal
    /// entries, as `panel_col_norms` writes them, read back to the host (waits).
    ///
    /// # Errors
    /// [`crate::Error::Driver`] (including an earlier asynchronous fault).
    fn norms_and_diag<T: GpuScalar>(&mut self, gpu: &Gpu, r: &DevMat<T>, n: usize) -> Result<&[T]> {
        let bytes = 2 * n * core::mem::size_of::<T>();
        assert!(bytes <= self.len() * 8, "rank scratch too small");
        {
            let mut out = crate::gpu::ffi::driver::view_words_as_mut::<T>(&mut self.dev, 2 * n);
            gpu.panel_col_norms(&r.block(0, 0, r.nrows(), n), &mut out)?;
        }
        // Only the f64 slots holding the 2n outputs come back (cudarc's memcpy_dtoh would
        // copy the whole host buffer, however wide an earlier check made it).
        let slots = bytes.div_ceil(8);
        gpu.count_launch();
        gpu.ctx
            .bind_to_thread()
            .map_err(crate::gpu::runtime::driver_err("rank check download"))?;
        crate::gpu::ffi::driver::download_words::<T>(
            &gpu.stream,
            &self.dev,
            &mut self.host,
            slots,
            2 * n,
        )
    }
}
