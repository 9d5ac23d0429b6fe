//! One step and the refold of a small R-only state by one warp (`small_window_step_*`,
//! `small_window_refold_*`, gpu-kernels/src/small_window.rs; docs/algorithms.md#small-states).
//!
//! The state's buffers are passed as raw device addresses taken once when the state is
//! made (see [`SmallBuffers`]): every launch is on [`Gpu::stream`], which orders them, so
//! the per-argument event bookkeeping of cudarc's slice arguments is not needed, and a
//! step costs one `cuLaunchKernel` and nothing else.

use std::marker::PhantomData;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr};

use crate::base::error::Result;
use crate::gpu::launch::{launch_config, launch_kernel};
use crate::gpu::runtime::{alloc_err, driver_err, DevMat, DevVec, Gpu, GpuScalar};

/// Largest n the kernels take.
pub const SMALL_MAX_N: usize = 64;
/// Pitch of [R d; 0 ρ] in device memory (the kernel's `PITCH`): entry (i, j) at
/// i·PITCH + j.
pub(crate) const PITCH: usize = SMALL_MAX_N + 1;
/// Shared-memory elements of a launch (the kernel's `SHARED_ELEMS`).
const SHARED_ELEMS: usize = PITCH * PITCH + 2 * PITCH;

/// Elements of a state in device memory (the kernel's `state_len`): n + 1 rows of
/// [`PITCH`], rounded up to whole 16-byte chunks.
pub(crate) fn state_len<T>(n: usize) -> usize {
    let per = 16 / std::mem::size_of::<T>();
    ((n + 1) * PITCH).div_ceil(per) * per
}

/// Step flag: the oldest kept row leaves after the new one enters.
pub(crate) const FLAG_DROP: u32 = 1;
/// Step flag: write x and ρ² after the step.
pub(crate) const FLAG_SOLVE: u32 = 2;
/// Step flag: the new row is read from device memory.
pub(crate) const FLAG_FROM_DEVICE: u32 = 4;
/// Step flag: no row, only the solution.
pub(crate) const FLAG_SOLVE_ONLY: u32 = 8;

/// `meta` words (the kernel's `META_*`).
pub(crate) const META_HEAD: usize = 0;
pub(crate) const META_REFUSED: usize = 1;
pub(crate) const META_FIRST_REFUSED: usize = 2;
pub(crate) const META_STEP: usize = 3;
pub(crate) const META_SOLVES_REFUSED: usize = 4;
pub(crate) const META_REASON: usize = 5;
pub(crate) const META_LEN: usize = 6;

/// Refusal reasons in `meta[META_REASON]`.
pub(crate) const REASON_NON_FINITE: u32 = 1;
pub(crate) const REASON_DOWNDATE: u32 = 2;

/// The new row passed by value with the launch (the kernel's `small_window::RowArg<T>`):
/// x₀ … x_{n−1}, y, then unused entries.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RowArg<T> {
    /// x₀ … x_{n−1}, y.
    pub v: [T; SMALL_MAX_N + 1],
}

// SAFETY: plain `#[repr(C)]` data of f32 or f64 with the layout of the kernel's
// `small_window::RowArg<T>` (65 elements, the element type's alignment); cudarc copies its
// bytes into the launch's parameter buffer.
unsafe impl<T: GpuScalar> DeviceRepr for RowArg<T> {}

/// A small state's device buffers and their addresses, taken once when they are
/// allocated (every launch is on [`Gpu::stream`], which orders them, so cudarc's
/// per-argument event bookkeeping is not needed): [R d; 0 ρ] ([`state_len`]); the ring of
/// kept rows (m·(n+1): x then y, when kept); the [`META_LEN`] meta words; the latest
/// solution (x and ρ², n + 1 elements).
#[derive(Debug)]
pub(crate) struct SmallDevice<T> {
    n: usize,
    m: usize,
    state: CudaSlice<T>,
    ring: Option<CudaSlice<T>>,
    meta: CudaSlice<u32>,
    solution: CudaSlice<T>,
    addr: Addresses,
}

/// Device addresses of [`SmallDevice`]'s buffers (valid while it lives).
#[derive(Clone, Copy, Debug)]
struct Addresses {
    state: u64,
    ring: u64,
    meta: u64,
    solution: u64,
}

/// Where a step's new row comes from.
#[derive(Clone, Copy, Debug)]
pub enum RowSource<'a, T> {
    /// The row x (n) and y by value.
    Host(RowArg<T>),
    /// x at `x + i·inc` (elements) and y at `y`: device addresses valid for the borrow.
    Device {
        /// Address of x₀.
        x: u64,
        /// Elements between x_i and x_{i+1}.
        inc: usize,
        /// Address of y.
        y: u64,
        /// The memory the addresses point into.
        borrow: PhantomData<&'a T>,
    },
}

impl<'a, T: GpuScalar> RowSource<'a, T> {
    /// The row x (length n ≤ [`SMALL_MAX_N`]) and y by value (n is checked by the state).
    pub(crate) fn host(x: &[T], y: T) -> Self {
        let mut v = [T::ZERO; SMALL_MAX_N + 1];
        let n = x.len().min(SMALL_MAX_N);
        v[..n].copy_from_slice(&x[..n]);
        v[n] = y;
        RowSource::Host(RowArg { v })
    }

    /// Column `t` of `x` (n × T: time along the columns) and element `t` of `y`, read
    /// on the device.
    ///
    /// # Errors
    /// [`crate::Error::Shape`] when t is outside x or y.
    pub(crate) fn column(gpu: &Gpu, x: &'a DevMat<T>, y: &'a DevVec<T>, t: usize) -> Result<Self> {
        if t >= x.ncols() {
            return Err(crate::Error::shape(
                "slide_column",
                "time step (x)",
                t,
                x.ncols(),
            ));
        }
        if t >= y.len() {
            return Err(crate::Error::shape(
                "slide_column",
                "time step (y)",
                t,
                y.len(),
            ));
        }
        let size = std::mem::size_of::<T>() as u64;
        let xa = x.buf().device_ptr(&gpu.stream).0 + (t * x.ld()) as u64 * size;
        let ya = y.view().device_ptr(&gpu.stream).0 + t as u64 * size;
        Ok(RowSource::Device {
            x: xa,
            inc: 1,
            y: ya,
            borrow: PhantomData,
        })
    }

    /// A row in memory another library owns: x_i at `x + i·inc·size_of::<T>()` and y at
    /// `y` (device addresses).
    ///
    /// # Safety
    /// The addresses must be device memory of the GPU the state lives on, readable in
    /// its primary context for n elements at stride `inc` (x) and one element (y), and
    /// unchanged until [`Gpu::stream`] has passed the step (the caller orders the owner's
    /// work before the stream, and its later writes after).
    pub unsafe fn foreign(x: u64, inc: usize, y: u64) -> Self {
        RowSource::Device {
            x,
            inc,
            y,
            borrow: PhantomData,
        }
    }
}

/// Where a step's solution goes.
#[derive(Debug)]
pub(crate) enum SolveTo<'a, T> {
    /// Nowhere (no solve).
    Skip,
    /// The state's own solution buffer.
    Own,
    /// Column t of an (n+1) × T matrix: x in rows 0..n, ρ² in row n.
    Column(&'a mut DevMat<T>, usize),
}

/// The options of one step.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StepArgs<T> {
    /// Drop the oldest kept row after adding the new one (a window).
    pub drop_oldest: bool,
    /// No row at all: only the solution of the state as it is.
    pub solve_only: bool,
    /// R, d and ρ are multiplied by this before the row enters (√λ; 1 in a window).
    pub scale: T,
    /// The rank test's tolerance of the solve.
    pub rank_tol: T,
}

impl<T: GpuScalar> SmallDevice<T> {
    /// Zeroed buffers for n columns and, with `kept` = Some(m), a ring of m rows.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    ///
    /// # Panics
    /// If n is 0 or above [`SMALL_MAX_N`] or m is 0 (cuqr bugs: the caller validates).
    pub(crate) fn new(gpu: &Gpu, n: usize, kept: Option<usize>) -> Result<Self> {
        assert!((1..=SMALL_MAX_N).contains(&n) && kept != Some(0));
        let alloc = |len: usize, what: &'static str| {
            gpu.stream
                .alloc_zeros::<T>(len)
                .map_err(alloc_err(what, len * std::mem::size_of::<T>()))
        };
        let state = alloc(state_len::<T>(n), "small state")?;
        let ring = match kept {
            Some(m) => Some(alloc(m * (n + 1), "small state's kept rows")?),
            None => None,
        };
        let solution = alloc(n + 1, "small state's solution")?;
        let mut words = [0u32; META_LEN];
        words[META_FIRST_REFUSED] = u32::MAX;
        let meta = gpu
            .stream
            .clone_htod(&words[..])
            .map_err(alloc_err("small state's meta", 4 * META_LEN))?;
        let addr = |s: &CudaSlice<T>| s.device_ptr(&gpu.stream).0;
        let addr = Addresses {
            state: addr(&state),
            ring: ring.as_ref().map_or(0, addr),
            meta: meta.device_ptr(&gpu.stream).0,
            solution: addr(&solution),
        };
        Ok(Self {
            n,
            m: kept.unwrap_or(0),
            state,
            ring,
            meta,
            solution,
            addr,
        })
    }

    /// Overwrites the kept rows (m·(n+1) elements: x then y a row) and sets the oldest
    /// to the first; waits for the copy.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// Without a ring or with the wrong length (cuqr bugs).
    pub(crate) fn write_ring(&mut self, gpu: &Gpu, rows: &[T]) -> Result<()> {
        let ring = self.ring.as_mut().expect("a state with kept rows");
        assert_eq!(rows.len(), self.m * (self.n + 1));
        gpu.stream
            .memcpy_htod(rows, ring)
            .map_err(driver_err("small state's kept rows upload"))?;
        let mut words = self.read_meta(gpu)?;
        words[META_HEAD] = 0;
        gpu.stream
            .memcpy_htod(&words[..], &mut self.meta)
            .map_err(driver_err("small state's meta upload"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("small state's upload"))
    }

    /// Overwrites [R d; 0 ρ] ([`state_len`] elements, as [`SmallDevice::read_state`]
    /// returns them); waits for the copy.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    ///
    /// # Panics
    /// With the wrong length (a cuqr bug).
    pub(crate) fn write_state(&mut self, gpu: &Gpu, state: &[T]) -> Result<()> {
        assert_eq!(state.len(), state_len::<T>(self.n));
        gpu.stream
            .memcpy_htod(state, &mut self.state)
            .map_err(driver_err("small state upload"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("small state upload"))
    }

    /// The meta words (waits for the queued work).
    ///
    /// # Errors
    /// [`crate::Error::Driver`] (including a fault of queued work).
    pub(crate) fn read_meta(&self, gpu: &Gpu) -> Result<[u32; META_LEN]> {
        let v = gpu
            .stream
            .clone_dtoh(&self.meta)
            .map_err(driver_err("small state's meta download"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("small state's meta download"))?;
        let mut out = [0u32; META_LEN];
        out.copy_from_slice(&v[..META_LEN]);
        Ok(out)
    }

    /// [R d; 0 ρ] at pitch [`PITCH`] ([`state_len`] elements; waits for the queued work).
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub(crate) fn read_state(&self, gpu: &Gpu) -> Result<Vec<T>> {
        self.download(gpu, &self.state, "small state download")
    }

    /// The latest solution x (n) and ρ² (waits for the queued work).
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub(crate) fn read_solution(&self, gpu: &Gpu) -> Result<Vec<T>> {
        self.download(gpu, &self.solution, "small state's solution download")
    }

    /// The kept rows (waits for the queued work), or none.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub(crate) fn read_ring(&self, gpu: &Gpu) -> Result<Option<Vec<T>>> {
        match &self.ring {
            Some(r) => self
                .download(gpu, r, "small state's kept rows download")
                .map(Some),
            None => Ok(None),
        }
    }

    fn download(&self, gpu: &Gpu, s: &CudaSlice<T>, what: &'static str) -> Result<Vec<T>> {
        let v = gpu.stream.clone_dtoh(s).map_err(driver_err(what))?;
        gpu.stream.synchronize().map_err(driver_err(what))?;
        Ok(v)
    }

    /// Queues one step (`small_window_step`, grid 1, block 32) on [`Gpu::stream`]; does
    /// not wait.
    ///
    /// # Errors
    /// [`crate::Error::Driver`] if the launch fails; [`crate::Error::Shape`] for a
    /// solution column outside the matrix or a matrix of other than n + 1 rows.
    ///
    /// # Panics
    /// For a window step without kept rows (a cuqr bug).
    pub(crate) fn step(
        &mut self,
        gpu: &Gpu,
        row: &RowSource<'_, T>,
        args: &StepArgs<T>,
        to: SolveTo<'_, T>,
    ) -> Result<()> {
        let n = self.n;
        assert!(!args.drop_oldest || self.ring.is_some());
        let (arg, src_x, inc_x, src_y, mut flags) = match *row {
            RowSource::Host(v) => (v, 0u64, 0usize, 0u64, 0u32),
            RowSource::Device { x, inc, y, .. } => (
                RowArg {
                    v: [T::ZERO; SMALL_MAX_N + 1],
                },
                x,
                inc,
                y,
                FLAG_FROM_DEVICE,
            ),
        };
        if args.drop_oldest {
            flags |= FLAG_DROP;
        }
        if args.solve_only {
            flags |= FLAG_SOLVE_ONLY;
        }
        let size = std::mem::size_of::<T>() as u64;
        let (x_out, rss_out) = match to {
            SolveTo::Skip => (0, 0),
            SolveTo::Own => (self.addr.solution, self.addr.solution + n as u64 * size),
            SolveTo::Column(mat, t) => {
                if mat.nrows() != n + 1 {
                    return Err(crate::Error::shape(
                        "small state solve",
                        "rows",
                        mat.nrows(),
                        n + 1,
                    ));
                }
                if t >= mat.ncols() {
                    return Err(crate::Error::shape(
                        "small state solve",
                        "column",
                        t,
                        mat.ncols(),
                    ));
                }
                let offset = (t * mat.ld()) as u64 * size;
                let (ptr, _record) = mat.buf_mut().device_ptr_mut(&gpu.stream);
                let base = ptr + offset;
                (base, base + n as u64 * size)
            }
        };
        if x_out != 0 {
            flags |= FLAG_SOLVE;
        }
        let set = T::kernel_set(&gpu.kernels);
        let config = launch_config((1, 1), (32, 1), SHARED_ELEMS * std::mem::size_of::<T>());
        let (a, m) = (self.addr, self.m);
        let (scale, tol) = (args.scale, args.rank_tol);
        // SAFETY: matches small_window_step_{f32,f64}(state, ring, meta, row, src_x, inc_x,
        // src_y, x_out, rss_out, n, m, flags, scale, rank_tol) of
        // gpu-kernels/src/small_window.rs, pointers as u64 device addresses: the state's
        // own buffers (state_len(n), m·(n+1), META_LEN, allocated for this n and m in `new`
        // and alive while `self` is, the ring present with DROP, asserted); a device row
        // borrowed for the call or promised by `RowSource::foreign`'s caller; x_out and
        // rss_out the state's solution buffer (n + 1) or column t of a borrowed (n+1)-row
        // matrix (checked), null without SOLVE; no output overlaps an input. 1 ≤ n ≤ 64
        // (asserted in `new`); grid 1 × block 32 with SHARED_ELEMS elements of dynamic
        // shared memory as the kernel requires. Every launch is on Gpu::stream, which
        // orders it after the buffers' uploads and before their reads.
        unsafe {
            launch_kernel!(gpu, &set.small_window_step, config, "small_window_step";
                &a.state, &a.ring, &a.meta, &arg, &src_x, &inc_x, &src_y, &x_out,
                &rss_out, &n, &m, &flags, &scale, &tol)
        }?;
        Ok(())
    }

    /// Queues `small_window_refold` on [`Gpu::stream`]: R, d and ρ afresh from the kept rows.
    ///
    /// # Errors
    /// [`crate::Error::Driver`] if the launch fails.
    ///
    /// # Panics
    /// Without kept rows (a cuqr bug).
    pub(crate) fn refold(&mut self, gpu: &Gpu) -> Result<()> {
        assert!(self.ring.is_some());
        let set = T::kernel_set(&gpu.kernels);
        let config = launch_config((1, 1), (32, 1), SHARED_ELEMS * std::mem::size_of::<T>());
        let (a, n, m) = (self.addr, self.n, self.m);
        // SAFETY: matches small_window_refold_{f32,f64}(state, ring, meta, n, m) of
        // gpu-kernels/src/small_window.rs, pointers as u64 device addresses of the state's
        // own live buffers of state_len(n), m·(n+1) and META_LEN elements (allocated in
        // `new`); the kept rows are finite (every row written to the ring was checked
        // before: `write_ring`'s callers and the step's non-finite refusal); grid 1 ×
        // block 32 with SHARED_ELEMS elements of dynamic shared memory.
        unsafe {
            launch_kernel!(gpu, &set.small_window_refold, config, "small_window_refold";
                &a.state, &a.ring, &a.meta, &n, &m)
        }?;
        Ok(())
    }
}
