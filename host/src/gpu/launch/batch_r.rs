//! One step of batched R-only states (`batch_r_step_*`, gpu-kernels/src/batch_r.rs;
//! docs/algorithms.md#batched-states): one problem a thread.

use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use crate::base::error::Result;
use crate::gpu::launch::{grid_blocks, launch_config, launch_kernel};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// Threads per block of the step.
const STEP_BLOCK: u32 = 128;
/// Largest n the kernels take.
pub(crate) const STEP_MAX_N: usize = 16;

/// The sizes and options of one step (the kernel's scalar arguments).
#[derive(Clone, Copy, Debug)]
pub(crate) struct StepShape {
    pub batch: usize,
    pub n: usize,
    pub p_in: usize,
    pub p_out: usize,
    /// Start from an empty state instead of the input state.
    pub clear: bool,
    /// Solve after the step.
    pub solve: bool,
    pub scale: f64,
    /// Negative: the default rank tolerance for `m_rows` rows.
    pub rank_tol: f64,
    pub m_rows: usize,
}

/// The states a step reads: R (batch·n·n), d (batch·n), ρ (batch).
pub(crate) struct StepState<'a, T> {
    pub r: CudaView<'a, T>,
    pub d: CudaView<'a, T>,
    pub rho: CudaView<'a, T>,
}

/// The states a step writes, as [`StepState`].
pub(crate) struct StepStateMut<'a, T> {
    pub r: CudaViewMut<'a, T>,
    pub d: CudaViewMut<'a, T>,
    pub rho: CudaViewMut<'a, T>,
}

/// The rows in and out: rows (batch·p·n) and right-hand sides (batch·p), each at least one
/// element.
pub(crate) struct StepRows<'a, T> {
    pub rows_in: CudaView<'a, T>,
    pub rhs_in: CudaView<'a, T>,
    pub rows_out: CudaView<'a, T>,
    pub rhs_out: CudaView<'a, T>,
}

/// What the step writes besides the states: x (batch·n) and rss (batch) when solving, and
/// each problem's status.
pub(crate) struct StepResults<'a, T> {
    pub x: CudaViewMut<'a, T>,
    pub rss: CudaViewMut<'a, T>,
    pub status: &'a mut CudaSlice<u32>,
}

impl Gpu {
    /// Launches `batch_r_step_k<n>` (n ≤ 8) or `batch_r_step_general` (n ≤ 16) on
    /// [`Gpu::stream`].
    ///
    /// # Errors
    /// [`crate::Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a buffer is shorter than the shape needs or n is 0 or above [`STEP_MAX_N`]
    /// (cuqr bugs: the caller validates).
    pub(crate) fn batch_r_step<T: GpuScalar>(
        &self,
        shape: &StepShape,
        input: StepState<'_, T>,
        output: StepStateMut<'_, T>,
        rows: StepRows<'_, T>,
        results: StepResults<'_, T>,
    ) -> Result<()> {
        let s = shape;
        let (b, n) = (s.batch, s.n);
        assert!((1..=STEP_MAX_N).contains(&n));
        assert!(input.r.len() >= b * n * n && input.d.len() >= b * n && input.rho.len() >= b);
        assert!(output.r.len() >= b * n * n && output.d.len() >= b * n && output.rho.len() >= b);
        assert!(rows.rows_in.len() >= (b * s.p_in * n).max(1));
        assert!(rows.rhs_in.len() >= (b * s.p_in).max(1));
        assert!(rows.rows_out.len() >= (b * s.p_out * n).max(1));
        assert!(rows.rhs_out.len() >= (b * s.p_out).max(1));
        assert!(results.status.len() >= b);
        assert!(!s.solve || (results.x.len() >= b * n && results.rss.len() >= b));
        if b == 0 {
            return Ok(());
        }
        let set = T::kernel_set(&self.kernels);
        let f = match n {
            1 => &set.batch_r_step_k1,
            2 => &set.batch_r_step_k2,
            3 => &set.batch_r_step_k3,
            4 => &set.batch_r_step_k4,
            5 => &set.batch_r_step_k5,
            6 => &set.batch_r_step_k6,
            7 => &set.batch_r_step_k7,
            8 => &set.batch_r_step_k8,
            _ => &set.batch_r_step_general,
        };
        let bits = u32::from(s.clear) | u32::from(s.solve) << 1;
        let config = launch_config((grid_blocks(b, STEP_BLOCK), 1), (STEP_BLOCK, 1), 0);
        let (StepState { r, d, rho }, mut o) = (input, output);
        let mut res = results;
        // SAFETY: matches batch_r_step_*_{f32,f64}(r_in, d_in, rho_in, r_out, d_out,
        // rho_out, rows_in, rhs_in, rows_out, rhs_out, batch, n, p_in, p_out, bits, scale,
        // rank_tol, m_rows, x, rss, status) of gpu-kernels/src/batch_r.rs: the state
        // buffers hold batch·n·n, batch·n and batch elements, the row blocks batch·p·n and
        // batch·p (at least one element), status batch, and x and rss batch·n and batch
        // when solving (all asserted); the outputs are distinct mutable views aliasing
        // no input; 1 ≤ n ≤ 16 selects an instance whose K covers n (exactly, for n ≤ 8);
        // grid ⌈batch/128⌉ × block 128 as the contract says.
        unsafe {
            launch_kernel!(self, f, config, "batch_r_step"; &r, &d, &rho, &mut o.r, &mut o.d,
                &mut o.rho, &rows.rows_in, &rows.rhs_in, &rows.rows_out, &rows.rhs_out, &b,
                &n, &s.p_in, &s.p_out, &bits, &s.scale, &s.rank_tol, &s.m_rows, &mut res.x,
                &mut res.rss, &mut *res.status)
        }?;
        Ok(())
    }
}

/// Threads per block of the kept-rows gather.
const GATHER_BLOCK: u32 = 128;

/// The shape of one kept-rows gather (`batch_r_gather`): the old and the new block,
/// where the extra block's entries sit, the scale of the old entries and the rank-k term's
/// width.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GatherShape {
    pub batch: usize,
    pub m_old: usize,
    pub n_old: usize,
    pub m_out: usize,
    pub n_out: usize,
    /// Elements between problems, rows and columns of the extra block.
    pub extra_strides: [usize; 3],
    pub scale: f64,
    pub kk: usize,
}

/// The buffers of a gather: the old block, the maps (m_out + n_out entries), the extra
/// block, the rank-k factors (u, v) and a mask (each at least one element).
pub(crate) struct GatherInputs<'a, T> {
    pub old: CudaView<'a, T>,
    pub maps: CudaView<'a, i32>,
    pub extra: CudaView<'a, T>,
    pub u: CudaView<'a, T>,
    pub v: CudaView<'a, T>,
    /// Problem k is written only where `mask[k]` ≠ 0, when `masked`.
    pub mask: CudaView<'a, u32>,
    pub masked: bool,
}

impl Gpu {
    /// Launches `batch_r_gather` on [`Gpu::stream`] (see gpu-kernels/src/batch_r.rs
    /// `gather`).
    ///
    /// # Errors
    /// [`crate::Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a buffer is shorter than the shape needs or a map points outside its block
    /// (cuqr bugs: the caller builds the maps).
    pub(crate) fn batch_r_gather<T: GpuScalar>(
        &self,
        shape: &GatherShape,
        (maps_host, input): (&[i32], GatherInputs<'_, T>),
        out: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        let s = shape;
        let b = s.batch;
        assert_eq!(maps_host.len(), s.m_out + s.n_out);
        assert!(input.maps.len() >= maps_host.len());
        let [e_ld, e_row, e_col] = s.extra_strides;
        for (idx, &mv) in maps_host.iter().enumerate() {
            let limit = if idx < s.m_out { s.m_old } else { s.n_old };
            assert!(mv < 0 || (mv as usize) < limit);
        }
        // the largest row and column of the extra block any output entry reads
        let decode = |mv: i32| {
            if mv < 0 {
                (-1 - mv) as usize
            } else {
                mv as usize
            }
        };
        let (rmap, cmap) = maps_host.split_at(s.m_out);
        let (new_row, new_col) = (rmap.iter().any(|&v| v < 0), cmap.iter().any(|&v| v < 0));
        let reach = |map: &[i32], other_new: bool| {
            map.iter()
                .filter(|&&v| v < 0 || other_new)
                .map(|&v| decode(v))
                .max()
        };
        if let (Some(r), Some(c)) = (reach(rmap, new_col), reach(cmap, new_row)) {
            if b > 0 && (new_row || new_col) {
                assert!(input.extra.len() > (b - 1) * e_ld + r * e_row + c * e_col);
            }
        }
        assert!(input.old.len() >= (b * s.m_old * s.n_old).max(1));
        assert!(out.len() >= b * s.m_out * s.n_out);
        assert!(
            s.kk == 0
                || (input.u.len() >= b * s.m_out * s.kk && input.v.len() >= b * s.n_out * s.kk)
        );
        assert!(!input.u.is_empty() && !input.v.is_empty());
        assert!(input.mask.len() >= if input.masked { b } else { 1 });
        let rows = b * s.m_out;
        if rows == 0 || s.n_out == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).batch_r_gather;
        let config = launch_config((grid_blocks(rows, GATHER_BLOCK), 1), (GATHER_BLOCK, 1), 0);
        let masked = u32::from(input.masked);
        // SAFETY: matches batch_r_gather_{f32,f64}(old, m_old, n_old, out, m_out, n_out,
        // batch, maps, extra, extra_ld, extra_row, extra_col, scale, u, v, kk, mask,
        // masked) of gpu-kernels/src/batch_r.rs: `maps` holds the m_out + n_out entries,
        // each checked above to point inside the old block (below m_old, n_old) or inside
        // `extra` for every problem; `old`, `out`, `u`, `v` and the mask hold what the
        // shape needs (asserted); `out` is a distinct mutable view aliasing no input; grid
        // ⌈B·m_out/128⌉ × block 128 as the contract says.
        unsafe {
            launch_kernel!(self, f, config, "batch_r_gather"; &input.old, &s.m_old,
                &s.n_old, &mut *out, &s.m_out, &s.n_out, &b, &input.maps, &input.extra,
                &e_ld, &e_row, &e_col, &s.scale, &input.u, &input.v, &s.kk, &input.mask, &masked)
        }?;
        Ok(())
    }
}

/// The shape of one refold (`batch_r_refold_*`): B problems of n columns folded from m rows
/// each by teams of 2^`team_log2` threads, with the solve's rank test when `solve`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RefoldShape {
    pub batch: usize,
    pub n: usize,
    pub m: usize,
    pub team_log2: u32,
    pub solve: bool,
}

impl RefoldShape {
    /// The team for B problems of m rows and n columns on `sms` multiprocessors: the largest
    /// power of two up to 32 that leaves each thread at least n rows (the pairwise rounds
    /// fold n rows each) and keeps all B·team threads in one wave of [`REFOLD_WARPS_PER_SM`]
    /// resident warps a multiprocessor (the kernel's registers allow no more): a second
    /// wave would cost more than the shorter chains save.
    pub(crate) fn team_for((batch, m, n): (usize, usize, usize), sms: usize) -> u32 {
        let wave = sms.max(1) * REFOLD_WARPS_PER_SM * 32;
        let mut l = 0u32;
        while l < 5 && m >> (l + 1) >= n.max(1) && batch << (l + 1) <= wave {
            l += 1;
        }
        l
    }
}

/// Resident warps a multiprocessor of the refold kernels (about 250 registers a thread,
/// blocks of 128 threads: two blocks of the 64 Ki registers).
const REFOLD_WARPS_PER_SM: usize = 8;

impl Gpu {
    /// Launches `batch_r_refold_k<n>` (n ≤ 8) or `batch_r_refold_general` (n ≤ 16) on
    /// [`Gpu::stream`].
    ///
    /// # Errors
    /// [`crate::Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If a buffer is shorter than the shape needs, n is 0 or above [`STEP_MAX_N`], or the
    /// team is above 32 (cuqr bugs: the caller validates).
    pub(crate) fn batch_r_refold<T: GpuScalar>(
        &self,
        shape: &RefoldShape,
        (rows, rhs): (CudaView<'_, T>, CudaView<'_, T>),
        output: StepStateMut<'_, T>,
        results: StepResults<'_, T>,
    ) -> Result<()> {
        let s = shape;
        let (b, n, m) = (s.batch, s.n, s.m);
        assert!((1..=STEP_MAX_N).contains(&n) && s.team_log2 <= 5);
        assert!(rows.len() >= (b * m * n).max(1) && rhs.len() >= (b * m).max(1));
        assert!(output.r.len() >= b * n * n && output.d.len() >= b * n && output.rho.len() >= b);
        assert!(results.status.len() >= b);
        assert!(!s.solve || (results.x.len() >= b * n && results.rss.len() >= b));
        if b == 0 {
            return Ok(());
        }
        let set = T::kernel_set(&self.kernels);
        let f = match n {
            1 => &set.batch_r_refold_k1,
            2 => &set.batch_r_refold_k2,
            3 => &set.batch_r_refold_k3,
            4 => &set.batch_r_refold_k4,
            5 => &set.batch_r_refold_k5,
            6 => &set.batch_r_refold_k6,
            7 => &set.batch_r_refold_k7,
            8 => &set.batch_r_refold_k8,
            _ => &set.batch_r_refold_general,
        };
        let bits = u32::from(s.solve) << 1;
        let threads = b << s.team_log2;
        let config = launch_config((grid_blocks(threads, STEP_BLOCK), 1), (STEP_BLOCK, 1), 0);
        let rank_tol = -1.0f64;
        let mut o = output;
        let mut res = results;
        // SAFETY: matches batch_r_refold_*_{f32,f64}(rows, rhs, batch, n, m, team_log2, bits,
        // rank_tol, r_out, d_out, rho_out, x, rss, status) of gpu-kernels/src/batch_r.rs:
        // `rows` and `rhs` hold batch·m·n and batch·m elements, the outputs batch·n·n,
        // batch·n and batch, status batch, x and rss batch·n and batch when solving (all
        // asserted); the outputs are distinct mutable views aliasing no input; 1 ≤ n ≤ 16
        // selects an instance whose K covers n (exactly, for n ≤ 8); the team (≤ 32, a power
        // of two) divides the block of 128, so every team lies in one warp; grid
        // ⌈batch·team/128⌉ × block 128 as the contract says.
        unsafe {
            launch_kernel!(self, f, config, "batch_r_refold"; &rows, &rhs, &b, &n, &m,
                &s.team_log2, &bits, &rank_tol, &mut o.r, &mut o.d, &mut o.rho, &mut res.x,
                &mut res.rss, &mut *res.status)
        }?;
        Ok(())
    }
}
