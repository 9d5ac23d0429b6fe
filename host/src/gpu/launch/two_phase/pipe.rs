//! Launch shape of the pipelined strip/block generate kernels `two_phase_gen_{strip,block}_pipe`
//! (gpu-kernels `two_phase/pipe.rs`; docs/algorithms.md#two-phase-design).

#[allow(unused_imports)]
use super::*;

impl Gpu {
    /// Checks `path` for a strip/block generate and returns its launch configuration
    /// (raising the kernel's shared-memory limit when above 48 KiB).
    pub(super) fn gen_pipe_cfg<T: GpuScalar>(
        &self,
        f: &cudarc::driver::CudaFunction,
        op: &'static str,
        chains: usize,
        driver: usize,
        shared: bool,
    ) -> Result<LaunchConfig> {
        let optin = self.two_phase_smem_optin()?;
        let bytes = gen_pipe_bytes(chains, driver, shared, size_of::<T>());
        if chains > GEN_PIPE_MAX_CHAINS || bytes > optin {
            return Err(Error::InvalidParam {
                op,
                what: "path",
                why: format!(
                    "the pipelined generate needs {bytes} bytes of shared memory for {chains} \
                     chains (device limit {optin}, at most {GEN_PIPE_MAX_CHAINS} chains)"
                ),
            });
        }
        raise_smem_limit(
            f,
            bytes,
            bytes,
            "raising a generate kernel's shared memory limit",
        )?;
        // GEN_BLOCK threads unless the registers the driver's compiler gave the kernel
        // allow fewer (the kernel takes any multiple of 32). Fewer threads (about
        // chains²/4: 128 for 20 chains) were measured slower on the H100: delete_rows'
        // generate 1.00 → 1.14 ms, the strip's 0.41 → 0.46 ms at m = 1200, n = 500, p = 20.
        let most = f
            .max_threads_per_block()
            .map_err(crate::gpu::runtime::driver_err(
                "querying a generate kernel's block limit",
            ))?;
        let threads = GEN_BLOCK
            .min(u32::try_from(most).unwrap_or(0) / 32 * 32)
            .max(32);
        let mut c = cfg((1, 1), (threads, 1));
        c.shared_mem_bytes = u32::try_from(bytes).expect("shared memory fits u32");
        Ok(c)
    }
}
