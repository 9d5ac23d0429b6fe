//! The rolling least-squares walk (`rolling_walk_*`, gpu-kernels/src/rolling.rs;
//! docs/algorithms.md#rolling-least-squares): one thread per series and time segment.

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use crate::base::error::Result;
use crate::gpu::launch::{grid_blocks, launch_config, launch_kernel};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Threads per block of the walk.
const WALK_BLOCK: u32 = 128;
/// Largest k with an exact (register) instance; up to [`WALK_MAX_K`] the general one.
const WALK_EXACT_K: usize = 8;
/// Largest k the kernels take.
pub(crate) const WALK_MAX_K: usize = 16;

/// The sizes and the plan of one walk (the kernel's scalar arguments).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WalkShape {
    pub nobs: usize,
    pub series: usize,
    pub k: usize,
    pub per_series: bool,
    pub seg_len: usize,
    /// Pitches between time steps (elements) of y, x, params and rss/flags.
    pub ld_y: usize,
    pub ld_x: usize,
    pub ld_p: usize,
    pub ld_r: usize,
    pub window: usize,
    pub min_nobs: usize,
    pub refresh: usize,
    pub expanding: bool,
    pub skip_missing: bool,
    pub forget: f64,
    /// λ^(window/2).
    pub leave_weight: f64,
    /// Negative: the default rank tolerance of each window.
    pub rank_tol: f64,
}

impl WalkShape {
    /// Time segments of one series.
    pub(crate) fn segments(&self) -> usize {
        self.nobs.div_ceil(self.seg_len)
    }
}

/// The walk's outputs, pitched as [`WalkShape`] says: params (series·k a step), rss and
/// flags (series a step), counts (3 per thread: scheduled and forced refactorisations,
/// non-finite observations).
pub(crate) struct WalkOut<'a, T> {
    pub params: CudaViewMut<'a, T>,
    pub rss: CudaViewMut<'a, T>,
    pub flags: &'a mut CudaSlice<u8>,
    pub counts: &'a mut CudaSlice<u32>,
}

impl Gpu {
    /// Launches `rolling_walk_k<k>` (k ≤ 8) or `rolling_walk_general` (k ≤ 16) on
    /// [`Gpu::stream`] over y (series a time step) and x (k or series·k a step), each
    /// time step at its pitch.
    ///
    /// # Errors
    /// [`crate::Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a buffer is shorter than the shape needs, k is 0 or above [`WALK_MAX_K`], or
    /// window, seg_len or refresh is 0 (cuqr bugs: the caller validates).
    pub(crate) fn rolling_walk<T: GpuScalar>(
        &self,
        y: &CudaView<'_, T>,
        x: &CudaView<'_, T>,
        shape: &WalkShape,
        out: WalkOut<'_, T>,
    ) -> Result<()> {
        let s = shape;
        assert!(s.k >= 1 && s.k <= WALK_MAX_K);
        assert!(s.window >= 1 && s.seg_len >= 1 && s.refresh >= 1);
        let x_row = if s.per_series { s.series * s.k } else { s.k };
        assert!(s.ld_y >= s.series && s.ld_x >= x_row);
        assert!(s.ld_p >= s.series * s.k && s.ld_r >= s.series);
        // Elements a pitched buffer of `row` elements a time step spans.
        let span = |ld: usize, row: usize| {
            if s.nobs == 0 {
                0
            } else {
                (s.nobs - 1) * ld + row
            }
        };
        let threads = s.series * s.segments();
        assert!(y.len() >= span(s.ld_y, s.series) && x.len() >= span(s.ld_x, x_row));
        assert!(out.params.len() >= span(s.ld_p, s.series * s.k));
        assert!(
            out.rss.len() >= span(s.ld_r, s.series) && out.flags.len() >= span(s.ld_r, s.series)
        );
        assert!(out.counts.len() >= 3 * threads);
        if threads == 0 {
            return Ok(());
        }
        let set = T::kernel_set(&self.kernels);
        let f = match s.k {
            1 => &set.rolling_walk_k1,
            2 => &set.rolling_walk_k2,
            3 => &set.rolling_walk_k3,
            4 => &set.rolling_walk_k4,
            5 => &set.rolling_walk_k5,
            6 => &set.rolling_walk_k6,
            7 => &set.rolling_walk_k7,
            8 => &set.rolling_walk_k8,
            _ => &set.rolling_walk_general,
        };
        debug_assert!(s.k <= WALK_EXACT_K || WALK_MAX_K == 16);
        let bits =
            u32::from(s.per_series) | u32::from(s.expanding) << 1 | u32::from(s.skip_missing) << 2;
        let config = launch_config((grid_blocks(threads, WALK_BLOCK), 1), (WALK_BLOCK, 1), 0);
        let (mut params, mut rss) = (out.params, out.rss);
        // SAFETY: matches rolling_walk_*_{f32,f64}(y, x, nobs, series, k, seg_len, ld_y,
        // ld_x, ld_p, ld_r, window, min_nobs, refresh, bits, forget, leave_weight,
        // rank_tol, params, rss, flags, counts) of gpu-kernels/src/rolling.rs: every
        // pitch covers its row (series, k or series·k, series·k, series) and every buffer
        // spans (nobs − 1) pitches plus one row, counts 3·series·segments (all
        // asserted); the outputs are
        // distinct mutable buffers that alias neither input; 1 ≤ k ≤ 16 selects an
        // instance whose K covers k (exactly, for k ≤ 8); window, seg_len and refresh are
        // at least 1 (asserted); grid ⌈threads/128⌉ × block 128 as the contract says.
        unsafe {
            launch_kernel!(self, f, config, "rolling_walk"; y, x, &s.nobs, &s.series, &s.k,
                &s.seg_len, &s.ld_y, &s.ld_x, &s.ld_p, &s.ld_r, &s.window, &s.min_nobs, &s.refresh, &bits, &s.forget,
                &s.leave_weight, &s.rank_tol, &mut params, &mut rss, &mut *out.flags,
                &mut *out.counts)
        }?;
        Ok(())
    }
}
