//! Launcher of the cooperative LU panel `lu_panel_coop` (gpu-kernels/src/lu/coop.rs) and
//! the allocation of its per-factorisation scratch.

use super::*;
#[allow(unused_imports)]
use crate::gpu::ffi::driver::StreamAlloc;

impl Gpu {
    /// Allocates the cooperative panel's scratch for panels up to `max_w` columns
    /// (≤ [`LU_COOP_MAX_W`]) and grids up to one block per SM, zeroes the barrier
    /// counter and raises `lu_panel_coop`'s shared-memory limit to the device's opt-in
    /// maximum. With `cluster` on an sm_90 device, also raises `lu_cluster_panel`'s
    /// limit and finds the largest cluster of [`LU_CLUSTER_SIZES`] that can run.
    pub(super) fn lu_coop_alloc<T: GpuScalar>(
        &self,
        max_w: usize,
        cluster: bool,
    ) -> Result<CoopBufs<T>> {
        assert!((1..=LU_COOP_MAX_W).contains(&max_w));
        let sms = self.sm_count()?;
        let smem_optin = self.smem_optin()?;
        let f = &T::kernel_set(&self.kernels).lu_panel_coop;
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(smem_optin).unwrap_or(i32::MAX),
        )
        .map_err(driver_err("raising lu_panel_coop's shared memory limit"))?;
        let elem = core::mem::size_of::<T>();
        let s = &self.stream;
        let pval = s
            .alloc_zeroed::<T>(2 * sms)
            .map_err(alloc_err("LU panel partials", 2 * sms * elem))?;
        let pidx = s
            .alloc_zeroed::<u32>(2 * sms)
            .map_err(alloc_err("LU panel partial indices", 8 * sms))?;
        let prow = s
            .alloc_zeroed::<T>(2 * (sms + 1) * max_w)
            .map_err(alloc_err(
                "LU panel partial rows",
                2 * (sms + 1) * max_w * elem,
            ))?;
        let counter = s
            .alloc_zeroed::<u32>(1)
            .map_err(alloc_err("LU panel barrier counter", 4))?;
        self.count_launch();
        let max_cluster = if cluster {
            self.lu_cluster_max::<T>(smem_optin)?
        } else {
            None
        };
        Ok(CoopBufs {
            pval,
            pidx,
            prow,
            counter,
            max_blocks: sms,
            smem_optin,
            max_cluster,
        })
    }

    /// `lu_panel_coop` on `stream` (the main stream, or the look-ahead stream for the
    /// look-ahead, ordered against the main stream by events).
    pub(super) fn lu_panel_coop_on<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        let cw = p.coop.as_ref().expect("cooperative scratch present");
        assert!((1..=cw.max_w).contains(&w) && c0 + w <= p.m.min(p.n));
        if let Some(max_cluster) = cw.max_cluster {
            if self.lu_cluster_panel_on::<T>(p, c0, w, stream, max_cluster)? {
                return Ok(());
            }
        }
        let rows = p.m - c0;
        let elem = core::mem::size_of::<T>();
        let f = &T::kernel_set(&self.kernels).lu_panel_coop;
        let mut blocks = rows.div_ceil(cw.rows_per_block).clamp(1, cw.max_blocks);
        let slab = rows.div_ceil(blocks);
        blocks = rows.div_ceil(slab);
        let header = (72 + 2 * w) * elem;
        let smem_bytes = header + slab * w * elem;
        let occupancy = |bytes: usize| -> Result<usize> {
            f.occupancy_max_active_blocks_per_multiprocessor(LU_COOP_BLOCK, bytes, None)
                .map(|n| n as usize)
                .map_err(driver_err("querying lu_panel_coop's occupancy"))
        };
        let in_smem = cw.smem && smem_bytes <= cw.smem_optin && occupancy(smem_bytes)? >= 1;
        let bytes = if in_smem { smem_bytes } else { header };
        // at most one block per SM (blocks ≤ max_blocks = SMs), so one resident block
        // per SM makes the grid co-resident
        if occupancy(bytes)? < 1 {
            return Err(Error::Driver(
                format!(
                    "lu_panel_coop: no block of {LU_COOP_BLOCK} threads with {bytes} bytes of \
                 shared memory fits on an SM"
                )
                .into(),
            ));
        }
        let (ipiv, diag, cbase) = (p.ipiv, p.diag, cw.cbase.get());
        let in_smem_arg = u32::from(in_smem);
        let mut b = self.kernel_args_on(stream, f);
        b.arg(&p.a)
            .arg(&p.lda)
            .arg(&p.m)
            .arg(&c0)
            .arg(&w)
            .arg(&ipiv)
            .arg(&diag)
            .arg(&slab)
            .arg(&in_smem_arg)
            .arg(&cw.pval)
            .arg(&cw.pidx)
            .arg(&cw.prow)
            .arg(&cw.counter)
            .arg(&cbase);
        let cfg = LaunchConfig {
            grid_dim: (u32::try_from(blocks).expect("grid fits u32"), 1, 1),
            block_dim: (LU_COOP_BLOCK, 1, 1),
            shared_mem_bytes: u32::try_from(bytes).expect("shared memory fits u32"),
        };
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("lu_panel_coop"))?;
        // SAFETY: matches lu_panel_coop_{f32,f64}(a: *mut T, lda, m, c0, w, ipiv: *mut u32,
        // diag: *mut T, slab, in_smem: u32, pval: *mut T, pidx: *mut u32, prow: *mut T,
        // counter: *mut u32, cbase: u32) (device pointers are 64-bit). LuPtrs' invariant
        // gives `a` m×n (ld lda ≥ m) and ipiv/diag of min(m, n) entries, and the assert
        // gives c0 + w ≤ min(m, n), so rows c0..m of the panel's columns and entries
        // c0..c0+w are in bounds. blocks·slab ≥ rows and every block's slab starts below
        // m (blocks = ⌈rows/slab⌉). The partials were allocated by lu_coop_alloc for
        // max_blocks ≥ blocks and max_w ≥ w: pval/pidx 2·max_blocks, prow
        // 2·(max_blocks + 1)·max_w entries; the counter holds cbase (zeroed at
        // allocation, every earlier launch of this factorisation on this stream advanced
        // it by w·blocks, tracked below) and nothing else touches it. Cooperative launch
        // of blocks ≤ SMs with an occupancy of ≥ 1 block per SM at this shared memory
        // (checked above; the limit was raised to the opt-in maximum), block 256,
        // (72 + 2w + in_smem·slab·w)·size_of::<T>() bytes as the entry requires; on
        // self.stream, or on the look-ahead stream ordered by events after the work on self.stream
        // that wrote the panel and before any later work on self.stream that touches
        // it, the partials or the counter (lu_lookahead_loop); the guards are held by
        // lu_factor_in_place.
        unsafe { b.launch_cooperative(cfg) }.map_err(launch_err("lu_panel_coop"))?;
        cw.cbase.set(cbase.wrapping_add((w * blocks) as u32));
        Ok(())
    }
}
