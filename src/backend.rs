//! Backend choice for the CLI (`--backend auto|cpu|gpu`): every command works on a
//! `Box<dyn QrUpdate<T>>` built by [`factorize`], the one place that knows the
//! concrete backend types.

use std::fmt;
use std::sync::Arc;

use cuqr::{CpuQr, FactorParams, Gpu, MatRef, QPolicy, QrUpdate};
use cuqr::{GpuQr, GpuScalar};

/// What the user asked for with `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The GPU when one is usable, else the CPU.
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
#[derive(Clone, Debug)]
pub enum Backend {
    /// [`CpuQr`].
    Cpu,
    /// [`GpuQr`] on this device.
    Gpu(Arc<Gpu>),
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Cpu => f.write_str("cpu"),
            Backend::Gpu(g) => match g.name() {
                Ok(name) => write!(f, "gpu ({name})"),
                Err(_) => f.write_str("gpu"),
            },
        }
    }
}

impl Backend {
    /// `"cpu"` or `"gpu"`, for machine-readable output.
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Gpu(_) => "gpu",
        }
    }
}

/// Opens GPU 0, or says in one line why it cannot be used.
fn open_gpu() -> Result<Arc<Gpu>, String> {
    Gpu::new(0).map(Arc::new).map_err(|e| e.to_string())
}

/// Resolves `--backend` to a backend, with a note saying why `auto` fell
/// back to the CPU.
///
/// # Errors
/// `gpu` when the GPU backend cannot be used (one line saying why).
pub fn resolve(choice: Choice) -> Result<(Backend, Option<String>), String> {
    match choice {
        Choice::Cpu => Ok((Backend::Cpu, None)),
        Choice::Auto => match open_gpu() {
            Ok(g) => Ok((Backend::Gpu(g), None)),
            Err(why) => Ok((Backend::Cpu, Some(why))),
        },
        Choice::Gpu => open_gpu().map(|g| (Backend::Gpu(g), None)),
    }
}

/// Factorises A (m×n) with right-hand sides b (m×q) on `backend`
/// (docs/algorithms.md#blocked-householder-qr).
///
/// # Errors
/// Whatever the backend's `factorize` returns.
pub fn factorize<T: GpuScalar>(
    backend: &Backend,
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
        Backend::Gpu(g) => Ok(Box::new(GpuQr::factorize(
            g,
            a,
            b,
            policy,
            FactorParams::default(),
        )?)),
    }
}
