//! The only raw CUDA driver, cuBLAS and cuSOLVER calls of the library. `driver` sits below
//! the runtime (allocation, copies, probes); `blas` and `cusolver` above it, as methods on
//! [`Gpu`](crate::gpu::runtime::Gpu) that take device views.

pub mod blas;
pub mod blas_device;
pub mod cusolver;
pub mod driver;
pub mod field;
pub mod foreign;
#[cfg(any(test, feature = "internals"))]
pub mod irs;
pub mod nccl;

/// Calls the f32 or the f64 cuBLAS or cuSOLVER routine as `T::DTYPE` says, with `$E`
/// standing for the element type in the argument list (pointer casts, host scalars as
/// `&(x as $E)`). Expands to an unsafe call: use it inside an `unsafe` block whose
/// `// SAFETY:` comment covers both routines.
macro_rules! by_dtype {
    ($T:ty, $f32:path, $f64:path, |$E:ident| ($($arg:expr),* $(,)?)) => {
        match <$T as $crate::gpu::runtime::GpuScalar>::DTYPE {
            $crate::gpu::runtime::Dtype::F32 => {
                type $E = f32;
                $f32($($arg),*)
            }
            $crate::gpu::runtime::Dtype::F64 => {
                type $E = f64;
                $f64($($arg),*)
            }
        }
    };
}
pub(crate) use by_dtype;

/// Calls the S, D, C or Z routine of a cuBLAS or cuSOLVER family as the
/// [`GpuField`](crate::gpu::runtime::GpuField) `T` says, with `$E` standing for the
/// element type in the argument list, one of the four types given (pointer casts only:
/// each library type has the layout of the matching cuqr element). Expands to an unsafe
/// call: use it inside an `unsafe` block whose `// SAFETY:` comment covers the routines.
macro_rules! by_field {
    ($T:ty, [$s:path, $d:path, $c:path, $z:path], [$es:ty, $ed:ty, $ec:ty, $ez:ty],
     |$E:ident| ($($arg:expr),* $(,)?)) => {
        match <$T as $crate::base::field::Field>::NAME {
            "f32" => {
                type $E = $es;
                $s($($arg),*)
            }
            "f64" => {
                type $E = $ed;
                $d($($arg),*)
            }
            "c32" => {
                type $E = $ec;
                $c($($arg),*)
            }
            _ => {
                type $E = $ez;
                $z($($arg),*)
            }
        }
    };
}
pub(crate) use by_field;
