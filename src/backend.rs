//! Backend choice for the CLI (`--backend auto|cpu|gpu`) through the library's
//! [`cuqr::Device`]: every command works on a `Box<dyn QrUpdate<T>>` built by
//! [`factorize`] ([`cuqr::Qr`] on the chosen backend).

use cuqr::{Device, FactorParams, GpuScalar, MatRef, QPolicy, Qr, QrUpdate};

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

/// The backend a command runs on: the library's [`cuqr::Backend`] (the CPU, or a GPU
/// context shared by every factorisation of the command).
pub use cuqr::Backend;

/// Resolves `--backend` to a backend through [`cuqr::Device`], with a note saying why
/// `auto` fell back to the CPU.
///
/// # Errors
/// `gpu` when the GPU backend cannot be used (one line saying why).
pub fn resolve(choice: Choice) -> Result<(Backend, Option<String>), String> {
    let device = match choice {
        Choice::Cpu => Device::Cpu,
        Choice::Auto => Device::Auto,
        Choice::Gpu => Device::Gpu(0),
    };
    let backend = device.open().map_err(|e| e.to_string())?;
    let note = backend.fallback().map(str::to_owned);
    Ok((backend, note))
}

/// [`factorize`] with the given factorisation options (e.g. `keep_data`).
///
/// # Errors
/// Whatever the backend's `factorize` returns.
pub fn factorize_with<T: GpuScalar>(
    backend: &Backend,
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    policy: QPolicy,
    params: FactorParams,
) -> cuqr::Result<Box<dyn QrUpdate<T>>> {
    Ok(Box::new(Qr::factorize_on(backend, a, b, policy, params)?))
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
    Ok(Box::new(Qr::factorize_on(
        backend,
        a,
        b,
        policy,
        FactorParams::default(),
    )?))
}
