//! Typed kernel launchers: one file per kernel source file of the `cuqr-kernels` crate, each
//! launcher checking its bounds and holding one `unsafe` launch with its `// SAFETY:` reason.

pub mod basic;
pub mod convert;
pub mod fused_panel;
pub mod givens;
pub mod lu;
pub mod panel;
pub mod row_insert;
pub mod small_panel;
pub mod ts_gemm;
pub mod tsqr;
pub mod two_phase;

use cudarc::driver::{CudaFunction, CudaStream, DriverError, LaunchArgs, LaunchConfig};

use crate::base::error::Error;
use crate::gpu::runtime::Gpu;

/// Blocks of `per` threads covering `n` items: ⌈n/per⌉.
///
/// # Panics
/// If the count does not fit a grid dimension (u32; a cuqr bug).
pub(crate) fn grid_blocks(n: usize, per: u32) -> u32 {
    u32::try_from(n.div_ceil(per as usize)).expect("grid dimension fits u32")
}

/// A 2-D launch shape (z = 1) with `smem` bytes of dynamic shared memory.
///
/// # Panics
/// If `smem` does not fit u32 (a cuqr bug).
pub(crate) fn launch_config(grid: (u32, u32), block: (u32, u32), smem: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid.0, grid.1, 1),
        block_dim: (block.0, block.1, 1),
        shared_mem_bytes: u32::try_from(smem).expect("shared memory fits u32"),
    }
}

/// Maps a failed launch of kernel `name` to [`Error::Driver`] ("launching `name`: …").
pub(crate) fn launch_err(name: &str) -> impl FnOnce(DriverError) -> Error + '_ {
    move |e| Error::Driver(format!("launching {name}: {e}"))
}

impl Gpu {
    /// Counts one kernel launch and starts its argument list for `f` on [`Gpu::stream`].
    pub(crate) fn kernel_args<'a>(&'a self, f: &'a CudaFunction) -> LaunchArgs<'a> {
        self.kernel_args_on(&self.stream, f)
    }

    /// Counts one kernel launch and starts its argument list for `f` on `stream`.
    pub(crate) fn kernel_args_on<'a>(
        &self,
        stream: &'a CudaStream,
        f: &'a CudaFunction,
    ) -> LaunchArgs<'a> {
        self.count_launch();
        stream.launch_builder(f)
    }
}
