//! Launcher of `transpose_padded` (gpu-kernels `transpose.rs`;
//! docs/algorithms.md#padded-transpose-and-composite-layout) on [`Gpu::stream`]: the
//! launch itself is `Gpu::transpose_padded_on`'s.
// Some of these serve only cuqr's benchmarks and kernel tests, which reach them through the
// `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use crate::base::error::Result;
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut};
use crate::gpu::runtime::{Gpu, GpuScalar};

impl Gpu {
    /// `transpose_padded` (docs/algorithms.md#padded-transpose-and-composite-layout,
    /// docs/algorithms.md#transpose-tile-padding): dst(j, i) := src(i, j) for all i <
    /// src.nrows(), j < src.ncols(); dst must be src.ncols() × src.nrows().
    ///
    /// # Errors
    /// [`Error::Driver`](crate::Error::Driver) if the launch fails.
    ///
    /// # Panics
    /// If the shapes do not match or ⌈src.ncols()/32⌉ > 65535 (a cuqr bug).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn transpose_padded<T: GpuScalar>(
        &self,
        src: &DevMatView<'_, T>,
        dst: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        self.transpose_padded_on(&self.stream, src, dst)
    }
}
