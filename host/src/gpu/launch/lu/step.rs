//! Launchers of the column-step LU kernels `lu_pivot`, `lu_update` and `lu_panel_fused`
//! (gpu-kernels/src/lu/step.rs).

use super::*;
#[allow(unused_imports)]
use crate::gpu::launch::launch_kernel;

impl Gpu {
    /// `lu_pivot` for column step j of the base panel c0..cend.
    pub(super) fn lu_pivot_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        j: usize,
        c0: usize,
        cend: usize,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        assert!(c0 <= j && j < cend && cend <= p.n && j < p.m);
        let f = &T::kernel_set(&self.kernels).lu_pivot;
        let ipiv = p.ipiv;
        let diag = p.diag;
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (LU_PIVOT_BLOCK, 1, 1),
            shared_mem_bytes: LU_PIVOT_SMEM,
        };
        // SAFETY: matches lu_pivot_{f32,f64}(a: *mut T, lda, m, j, c0, cend, ipiv: *mut
        // u32, diag: *mut T) (device pointers are 64-bit); LuPtrs' invariant gives `a`
        // m×n with ld lda and ipiv/diag of min(m, n) > j elements, and the asserts give
        // c0 ≤ j < cend ≤ n, j < m; grid 1, block 1024 (a multiple of 32), 388 bytes of
        // dynamic shared memory as the entry's # Safety requires; ordered on `stream`
        // with the rest of the panel (the caller's lane).
        unsafe {
            launch_kernel!(self, on stream, f, cfg, "lu_pivot"; &p.a, &p.lda, &p.m, &j, &c0,
                &cend, &ipiv, &diag)
        }?;
        Ok(())
    }

    /// `lu_panel_fused`: the base panel c0..c0+w in one single-block launch.
    pub(super) fn lu_panel_fused_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        assert!((1..=LU_FUSED_MAX_W).contains(&w) && c0 + w <= p.n && c0 < p.m);
        let f = &T::kernel_set(&self.kernels).lu_panel_fused;
        let (ipiv, diag) = (p.ipiv, p.diag);
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (LU_PIVOT_BLOCK, 1, 1),
            shared_mem_bytes: LU_FUSED_SMEM,
        };
        // SAFETY: matches lu_panel_fused_{f32,f64}(a: *mut T, lda, m, c0, w, ipiv: *mut
        // u32, diag: *mut T); LuPtrs' invariant gives `a` m×n (ld lda) and ipiv/diag of
        // min(m, n) entries, and the assert gives 1 ≤ w ≤ 64, c0 + w ≤ n, c0 < m, so rows
        // c0..m of columns c0..c0+w and entries c0..c0+w (≤ min(m, n), as the panel
        // lies within the first min(m, n) columns) are in bounds; grid 1, block 1024,
        // 900 bytes of dynamic shared memory as the entry requires; on `stream`, the
        // caller's lane, in order with the rest of the panel.
        unsafe {
            launch_kernel!(self, on stream, f, cfg, "lu_panel_fused"; &p.a, &p.lda, &p.m, &c0,
                &w, &ipiv, &diag)
        }?;
        Ok(())
    }

    /// `lu_update` for column step j (panel columns end before `cend`).
    pub(super) fn lu_update_raw<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        j: usize,
        cend: usize,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        assert!(j < cend && cend <= p.n && j < p.m);
        let rows = p.m - j - 1;
        if rows == 0 {
            return Ok(());
        }
        let f = &T::kernel_set(&self.kernels).lu_update;
        let cfg = LaunchConfig {
            grid_dim: (grid_blocks(rows, LU_UPDATE_BLOCK), 1, 1),
            block_dim: (LU_UPDATE_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: matches lu_update_{f32,f64}(a: *mut T, lda, m, j, cend); `a` is m×n
        // with ld lda (LuPtrs' invariant) and j < cend ≤ n, j < m (asserted), so rows
        // j..m of columns j..cend are in bounds; grid ⌈(m−j−1)/256⌉ × 256 covers the rows
        // j+1..m and the kernel returns for the rest; ordered on `stream` (the caller's
        // lane) after the pivot step it follows.
        unsafe {
            launch_kernel!(self, on stream, f, cfg, "lu_update"; &p.a, &p.lda, &p.m, &j,
                &cend)
        }?;
        Ok(())
    }
}
