//! Backend choice for the CLI (`--backend auto|cpu|gpu`, architecture.md
//! "API shape"): every command works on a `Box<dyn QrUpdate<T>>` built by
//! [`factorize`], the one place that knows the concrete backend types.

use std::fmt;

use cuqr::{CpuQr, FactorParams, MatRef, QPolicy, QrUpdate, Scalar};

/// What the user asked for with `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The GPU when one is usable and this build has a GPU QR backend, else the CPU.
    Auto,
    /// The serial CPU backend.
    Cpu,
    /// The GPU backend; an error when it cannot be used.
    Gpu,
}

impl Choice {
    /// Parses `auto`, `cpu` or `gpu`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Choice::Auto),
            "cpu" => Ok(Choice::Cpu),
            "gpu" => Ok(Choice::Gpu),
            _ => Err(format!("--backend must be auto, cpu or gpu, not '{s}'")),
        }
    }
}

/// The backend a command runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// [`CpuQr`].
    Cpu,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Cpu => f.write_str("cpu"),
        }
    }
}

/// Why the GPU backend cannot be used in this build. The library has no GPU
/// QR backend yet (`cuqr::gpu` does not exist); when `GpuQr` lands, add a
/// `Backend::Gpu` variant, let this probe `cuqr::gpu::Gpu::new(0)`, and add
/// its arm to [`factorize`].
fn gpu_unavailable() -> String {
    "GPU backend not available in this build: the cuqr library has no GPU QR backend yet"
        .to_string()
}

/// Resolves `--backend` to a backend, with a note saying why `auto` fell
/// back to the CPU.
///
/// # Errors
/// `gpu` when the GPU backend cannot be used (one line saying why).
pub fn resolve(choice: Choice) -> Result<(Backend, Option<String>), String> {
    match choice {
        Choice::Cpu => Ok((Backend::Cpu, None)),
        Choice::Auto => Ok((Backend::Cpu, Some(gpu_unavailable()))),
        Choice::Gpu => Err(gpu_unavailable()),
    }
}

/// Factorises A (m×n) with right-hand sides b (m×q) on `backend` (spec §1.4).
///
/// # Errors
/// Whatever the backend's `factorize` returns.
pub fn factorize<T: Scalar>(
    backend: Backend,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    policy: QPolicy,
) -> cuqr::Result<Box<dyn QrUpdate<T>>> {
    match backend {
        Backend::Cpu => Ok(Box::new(CpuQr::factorize(
            a,
            b,
            policy,
            FactorParams::default(),
        )?)),
    }
}
