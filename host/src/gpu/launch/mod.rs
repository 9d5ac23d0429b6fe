//! Typed kernel launchers: one file per kernel source file of the `cuqr-kernels` crate, each
//! launcher checking its bounds and holding one `unsafe` launch with its `// SAFETY:` reason.

pub mod batch_q;
pub mod batch_r;
pub mod convert;
pub mod fused_panel;
pub mod givens;
pub mod householder;
pub mod lu;
pub mod lu_cluster;
pub mod panel;
pub mod reduce;
pub mod rolling;
pub mod rotation_chain;
pub mod row_insert;
pub mod row_insert_pairs;
pub mod small_panel;
pub mod small_window;
pub mod transpose;
pub mod ts_gemm;
pub mod tsqr;
pub mod two_phase;
pub mod wy;

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

/// Launches kernel `$f` on [`Gpu::stream`] (on `$stream` when written `on $stream`),
/// counting the launch: pushes the arguments `$arg` in order, launches with the
/// [`LaunchConfig`] `$cfg` and maps a failure to [`launch_err`]`($name)`; evaluates to a
/// `Result`. Expands to an unsafe launch (`LaunchArgs::launch`): invoke it inside an
/// `unsafe` block whose `// SAFETY:` comment says why the arguments match the kernel's
/// signature and its accesses stay inside the buffers.
macro_rules! launch_kernel {
    ($gpu:expr, on $stream:expr, $f:expr, $cfg:expr, $name:expr; $($arg:expr),+ $(,)?) => {{
        let mut b = $gpu.kernel_args_on($stream, $f);
        $(::cudarc::driver::PushKernelArg::arg(&mut b, $arg);)+
        $crate::gpu::ffi::driver::fault::launch()
            .and_then(|()| b.launch($cfg))
            .map_err($crate::gpu::launch::launch_err($name))
    }};
    ($gpu:expr, $f:expr, $cfg:expr, $name:expr; $($arg:expr),+ $(,)?) => {{
        let mut b = $gpu.kernel_args($f);
        $(::cudarc::driver::PushKernelArg::arg(&mut b, $arg);)+
        $crate::gpu::ffi::driver::fault::launch()
            .and_then(|()| b.launch($cfg))
            .map_err($crate::gpu::launch::launch_err($name))
    }};
}
pub(crate) use launch_kernel;

/// Maps a failed launch of kernel `name` to [`Error::Driver`] ("launching `name`: …").
pub(crate) fn launch_err(name: &str) -> impl FnOnce(DriverError) -> Error + '_ {
    move |e| Error::driver(format!("launching {name}"), e)
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

/// Threads per block of the single-block reductions (`householder_house`,
/// `reduce_dot`, `reduce_nrm2`, `wy_build_t`).
pub(crate) const REDUCE_BLOCK: u32 = 256;
/// Threads per block of `givens_make_wavefront` (docs/algorithms.md#givens-rotations: 32).
pub(crate) const MAKE_GIVENS_BLOCK: u32 = 32;
/// Threads per block of `givens_apply_wavefront` (docs/algorithms.md#givens-rotations: 128).
pub(crate) const APPLY_GIVENS_BLOCK: u32 = 128;
/// Tile edge of `transpose_padded` and `reduce_double_sum` (32×32 tiles, block 32×8).
pub(crate) const TILE: u32 = 32;
/// Rows of threads per tile block (block is TILE × TILE_ROWS).
pub(crate) const TILE_ROWS: u32 = 8;
/// Threads per block of `wy_set_tau`.
pub(crate) const SET_TAU_BLOCK: u32 = 128;
/// Largest k `wy_build_t` accepts (one block of 256 threads).
pub(crate) const BUILD_T_MAX_K: usize = 256;
/// Largest grid y/z dimension.
pub(crate) const MAX_GRID_YZ: usize = 65_535;

/// Last row/column index touched by the wavefront step with `count` rotations
/// starting at plane (row0−1, row0): row0 + 2(count−1).
pub(crate) fn last_row(row0: usize, count: usize) -> usize {
    row0 + 2 * (count - 1)
}
