//! Launcher of the Householder stage `two_phase_house_apply` (gpu-kernels `two_phase/sweep.rs`;
//! docs/algorithms.md#rank-one-update).

#[allow(unused_imports)]
use super::*;

impl Gpu {
    /// `two_phase_house_apply` (docs/algorithms.md#rank-one-update): applies H = I − τ·v·vᵀ with
    /// v = [1; `vt`] to up to two targets: `Cols` targets from the right (X := X·H, one
    /// thread per row), `Rows` targets from the left (X := H·X, one per column).
    ///
    /// # Errors
    /// [`Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// If more than two targets are given, `tau` is empty, or a target's vectors do not
    /// have `vt.len() + 1` elements (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_house_apply<T: GpuScalar>(
        &self,
        vt: &CudaView<'_, T>,
        tau: &CudaView<'_, T>,
        targets: &mut [ApplyTarget<'_, '_, T>],
    ) -> Result<()> {
        assert!(targets.len() <= 2 && !tau.is_empty());
        let len = vt.len() + 1;
        let mut meta = [(0usize, 0usize, 0usize); 2];
        for (slot, t) in meta.iter_mut().zip(targets.iter()) {
            let (rs, cs, nvec, elems) = t.geometry();
            assert_eq!(elems, len, "Householder target length");
            *slot = (rs, cs, nvec);
        }
        let maxv = meta.iter().map(|m| m.2).max().unwrap_or(0);
        if maxv == 0 {
            return Ok(());
        }
        let null: u64 = 0;
        let f = &T::kernel_set(&self.kernels).two_phase_house_apply;
        let mut b = self.kernel_args(f);
        b.arg(vt).arg(&len).arg(tau);
        let mut it = targets.iter_mut();
        for slot in &meta {
            match it.next() {
                Some(t) => b.arg(t.view.buf_mut()),
                None => b.arg(&null),
            };
            b.arg(&slot.0).arg(&slot.1).arg(&slot.2);
        }
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("two_phase_house_apply"))?;
        // SAFETY: matches two_phase_house_apply_{f32,f64}(vt: *const T, len, tau: *const T,
        // x0, rs0, cs0, n0, x1, rs1, cs1, n1): vt holds len−1 and tau ≥ 1; each target's
        // vectors have exactly len elements inside the view (asserted), distinct vectors
        // are distinct rows/columns, targets are distinct &mut views and vt, tau shared
        // borrows (no overlap); absent targets have n = 0; grid (⌈max n/128⌉, 2), block 128.
        unsafe { b.launch(cfg((grid_blocks(maxv, APPLY_BLOCK), 2), (APPLY_BLOCK, 1))) }
            .map_err(launch_err("two_phase_house_apply"))?;
        Ok(())
    }
}
