//! Launchers of the LU row interchanges `lu_laswp` and `lu_laswp_tile`
//! (gpu-kernels/src/lu/laswp.rs).

use super::*;
#[allow(unused_imports)]
use crate::gpu::launch::launch_kernel;

impl Gpu {
    /// `lu_laswp`: interchanges ipiv[steps] on columns `cols` minus `skip`, on the main
    /// stream.
    pub(super) fn lu_laswp_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        cols: core::ops::Range<usize>,
        skip: core::ops::Range<usize>,
        steps: core::ops::Range<usize>,
    ) -> Result<()> {
        self.lu_laswp_on::<T>(p, cols, skip, steps, &self.stream)
    }

    /// [`Gpu::lu_laswp_raw`] on `stream`; the caller orders it after the panel that wrote
    /// ipiv[steps] and against every other launch that touches the same columns.
    pub(super) fn lu_laswp_on<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        cols: core::ops::Range<usize>,
        skip: core::ops::Range<usize>,
        steps: core::ops::Range<usize>,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        assert!(cols.end <= p.n && steps.end <= p.m.min(p.n));
        let all_skipped = !skip.is_empty() && skip.start <= cols.start && skip.end >= cols.end;
        if cols.is_empty() || steps.is_empty() || all_skipped {
            return Ok(());
        }
        if steps.len() <= LU_LASWP_TILE_MAX_K_GATHERS * LU_LASWP_TILE_MAX_K {
            // Panels up to 512 wide: one gather a 128 steps, in order on the stream.
            let mut k = steps.start;
            while k < steps.end {
                let k2 = (k + LU_LASWP_TILE_MAX_K).min(steps.end);
                self.lu_laswp_tile_raw::<T>(p, cols.clone(), skip.clone(), k..k2, stream)?;
                k = k2;
            }
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).lu_laswp;
        let ipiv = p.ipiv;
        let cfg = LaunchConfig {
            grid_dim: (grid_blocks(cols.len(), LU_LASWP_BLOCK), 1, 1),
            block_dim: (LU_LASWP_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches lu_laswp_{f32,f64}(a: *mut T, lda, col0, col1, skip0, skip1,
        // ipiv: *const u32, k1, k2); ipiv[steps] were written by earlier panel launches
        // ordered before this one (this stream, or an event the caller waited for) with
        // values in steps.start..m (a pivot of step j is ≥ j, < m), so every swapped row
        // is < m and every column < n (asserted), inside `a` (LuPtrs' invariant); one
        // thread per column, no launch touching these columns runs concurrently (the
        // caller's ordering).
        unsafe {
            launch_kernel!(self, on stream, f, cfg, "lu_laswp"; &p.a, &p.lda, &cols.start,
                &cols.end, &skip.start, &skip.end, &ipiv, &steps.start, &steps.end)
        }?;
        Ok(())
    }

    /// `lu_laswp_tile`: interchanges ipiv[steps] (at most 128) on columns `cols` minus
    /// `skip`, gathered per 16-column tile.
    pub(super) fn lu_laswp_tile_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        cols: core::ops::Range<usize>,
        skip: core::ops::Range<usize>,
        steps: core::ops::Range<usize>,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let kw = steps.len();
        assert!(
            (1..=LU_LASWP_TILE_MAX_K).contains(&kw) && cols.end <= p.n && steps.end <= p.m.min(p.n)
        );
        let f = &T::kernel_set(&self.kernels).lu_laswp_tile;
        let ipiv = p.ipiv;
        let smem = 6 * kw * 4 + 2 * kw * LU_LASWP_TILE_COLS * core::mem::size_of::<T>();
        let cfg = LaunchConfig {
            grid_dim: (grid_blocks(cols.len(), LU_LASWP_TILE_COLS as u32), 1, 1),
            block_dim: (LU_LASWP_TILE_BLOCK, 1, 1),
            shared_mem_bytes: u32::try_from(smem).expect("shared memory fits u32"),
        };
        // SAFETY: matches lu_laswp_tile_{f32,f64}(a: *mut T, lda, col0, col1, skip0, skip1,
        // ipiv: *const u32, k1, k2); 1 ≤ k2 − k1 ≤ 128 (asserted); ipiv[steps] were
        // written by the panel, ordered before this launch (same stream, or an event the
        // caller waited for), with k ≤ ipiv[k] < m, so every touched row is < m and every
        // column < n (asserted), inside `a` (LuPtrs' invariant); grid ⌈|cols|/16⌉, block
        // 256, 6·kw·4 + 2·kw·16·size_of::<T>() (≤ 36 KiB) bytes of dynamic shared memory
        // as the entry requires; no launch touching these columns runs concurrently (the
        // caller's ordering).
        unsafe {
            launch_kernel!(self, on stream, f, cfg, "lu_laswp_tile"; &p.a, &p.lda,
                &cols.start, &cols.end, &skip.start, &skip.end, &ipiv, &steps.start, &steps.end)
        }?;
        Ok(())
    }

    /// Applies the interchanges `ipiv[0..k)` (from [`Gpu::lu_factor_in_place`]) to the
    /// rows of `b` in order (P·B, LAPACK `laswp`), one thread per column.
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If `ipiv` is shorter than k or k exceeds b's rows (cuqr bugs). Each ipiv entry
    /// must be < b's rows: the caller passes pivots of a factorisation of b's order.
    pub(crate) fn lu_laswp_rows<T: GpuScalar>(
        &self,
        b: &mut DevMatViewMut<'_, T>,
        ipiv: &CudaSlice<u32>,
        k: usize,
    ) -> Result<()> {
        let (rows, q, ld) = (b.nrows(), b.ncols(), b.ld());
        assert!(ipiv.len() >= k && k <= rows);
        if q == 0 || k == 0 {
            return Ok(());
        }
        let (pi, _gi) = ipiv.device_ptr(&self.stream);
        let (pb, _gb) = b.buf_mut().device_ptr_mut(&self.stream);
        let f = &T::kernel_set(&self.kernels).lu_laswp;
        let (zero, none) = (0usize, 0usize);
        let cfg = LaunchConfig {
            grid_dim: (grid_blocks(q, LU_LASWP_BLOCK), 1, 1),
            block_dim: (LU_LASWP_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches lu_laswp_{f32,f64}(a, lda, col0 = 0, col1 = q, skip 0..0, ipiv,
        // k1 = 0, k2 = k); ipiv holds ≥ k entries (asserted), each < rows (documented
        // caller duty: pivots of an LU of order rows), so rows < rows of columns < q are
        // touched, inside the view; guards held across the launch on self.stream.
        unsafe {
            launch_kernel!(self, f, cfg, "lu_laswp"; &pb, &ld, &zero, &q, &none, &none, &pi,
                &zero, &k)
        }?;
        Ok(())
    }
}
