//! The factorisation states the operations work on: [`cpu::CpuQr`] on the host and
//! [`gpu::GpuQr`] on a device (with its poison guard).
#![forbid(unsafe_code)]

pub mod cpu;
pub mod gpu;
