//! The Python extension `cuqr._cuqr` behind the `cuqr` package (python/cuqr): the
//! factorisation state, DLPack exchange with CuPy and PyTorch, and the errors as Python
//! exceptions. The package's Python layer gives it SciPy's signatures.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

mod batch;
mod batch_gpu;
mod batch_r_gpu;
mod batch_state;
mod convert;
mod distributed;
mod dlpack;
mod error;
mod explicit;
mod explicit_state;
mod rolling;
mod small;
mod state;
mod turns;

use pyo3::prelude::*;

#[pymodule]
fn _cuqr(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("AUTO_GPU_MIN_MN", cuqr::AUTO_GPU_MIN_MN)?;
    m.add_class::<state::State>()?;
    m.add_class::<batch_state::BatchState>()?;
    m.add_class::<convert::DeviceArray>()?;
    m.add_class::<explicit_state::ExplicitState>()?;
    m.add_class::<small::SmallState>()?;
    m.add_class::<batch_gpu::GpuBatchQR>()?;
    m.add_class::<batch_r_gpu::GpuBatchR>()?;
    m.add_class::<distributed::DistState>()?;
    m.add_class::<distributed::PyRankComm>()?;
    m.add_function(wrap_pyfunction!(distributed::nccl_id, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::rendezvous_id, m)?)?;
    m.add_function(wrap_pyfunction!(distributed::launch_env, m)?)?;
    m.add_function(wrap_pyfunction!(state::cuda_available, m)?)?;
    m.add_function(wrap_pyfunction!(state::cuda_unavailable_reason, m)?)?;
    m.add_function(wrap_pyfunction!(state::array_device, m)?)?;
    m.add_function(wrap_pyfunction!(state::set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(state::threads, m)?)?;
    m.add_function(wrap_pyfunction!(batch::batch, m)?)?;
    m.add_function(wrap_pyfunction!(explicit::explicit_update, m)?)?;
    m.add_function(wrap_pyfunction!(explicit::explicit_update_device, m)?)?;
    m.add_function(wrap_pyfunction!(rolling::rolling, m)?)?;
    m.add_function(wrap_pyfunction!(rolling::recursive, m)?)?;
    m.add_function(wrap_pyfunction!(rolling::rolling_device, m)?)?;
    Ok(())
}
