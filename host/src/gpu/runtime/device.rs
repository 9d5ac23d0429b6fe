//! [`Gpu`]: one CUDA device with its context, three streams, a cuBLAS handle,
//! a cuSOLVER dense handle and the embedded PTX module, loaded once with every
//! kernel resolved up front.
//! A missing driver library or device is [`Error::NoDevice`], never a panic.
// Some of these serve only cuqr's benchmarks and kernel tests (the published algorithms'
// reference kernels, stage profiling), which reach them through the `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::cusolver::DnHandle;
use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};

use crate::base::error::{Error, Result};
use crate::gpu::runtime::module::Kernels;
use crate::gpu::runtime::{alloc_err, driver_err, GpuScalar};

/// A CUDA device ready for cuqr: context, streams, library handles and kernels.
///
/// All work queued by cuqr goes on [`Gpu::stream`] unless a caller explicitly
/// uses [`Gpu::stream2`] / [`Gpu::stream3`] (reserved for concurrency, e.g.
/// the seeds' separate-streams row removal, docs/algorithms.md#wavefront-schedule). cuBLAS and
/// cuSOLVER are bound to [`Gpu::stream`]; a second cuBLAS handle to the high-priority
/// `stream_urgent` (the LU look-ahead).
pub struct Gpu {
    // Field order is drop order: library handles and the module before the
    // streams, the context last.
    pub(crate) blas: CudaBlas,
    /// A second cuBLAS handle, bound to [`Gpu::stream_urgent`] (the LU look-ahead's
    /// recursive panel runs its TRSM and GEMM there).
    pub(crate) blas_urgent: CudaBlas,
    pub(crate) solver: DnHandle,
    pub(crate) kernels: Kernels,
    /// The sm_90 module's kernels, on devices of compute capability 9.0 or later
    /// (`kernels_sm90.rs`).
    pub(crate) sm90: Option<crate::gpu::runtime::module::Sm90Kernels>,
    /// Page-locked staging of the updates' uploads (`DevMat::from_host_async`).
    pub(crate) upload_staging: std::sync::Mutex<Option<crate::gpu::runtime::matrix::UploadStaging>>,
    /// Named events of a stage profile ([`Gpu::stage_marks_begin`]); None when off.
    /// Launch facts and scratch buffers of the launchers and algorithms above the runtime,
    /// one value per type, made by the first use.
    pub(crate) caches: super::cache::Caches,
    pub(crate) stage_marks: std::sync::Mutex<Option<Vec<(&'static str, CudaEvent)>>>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) stream2: Arc<CudaStream>,
    pub(crate) stream3: Arc<CudaStream>,
    /// A stream of the device's highest priority, for the critical path of a
    /// look-ahead (the LU's next panel): as SMs free up, the block scheduler
    /// starts its blocks before the pending blocks of the other streams' kernels (a
    /// large Schur GEMM), so the panel runs beside the GEMM instead of after it.
    pub(crate) stream_urgent: Arc<CudaStream>,
    pub(crate) ctx: Arc<CudaContext>,
    /// Kernel launches, cuBLAS/cuSOLVER calls and memcpys issued so far
    /// (docs/design.md "Launch counting").
    pub(crate) launches: AtomicU64,
    /// GEMM precision of f32 GEMMs (`blas::GemmMode` code; 0 = plain f32), set only by
    /// a [`crate::gpu::ffi::blas::GemmPrecisionGuard`] (docs/algorithms.md#mixed-precision).
    pub(crate) gemm_mode: core::sync::atomic::AtomicU8,
}

impl core::fmt::Debug for Gpu {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Gpu")
            .field("ordinal", &self.ctx.ordinal())
            .field("name", &self.name().unwrap_or_default())
            .finish_non_exhaustive()
    }
}

impl Gpu {
    /// Streaming multiprocessors of the device (at least 1): the bound on co-resident
    /// blocks of a cooperative launch, with the occupancy.
    ///
    /// # Errors
    /// [`Error::Driver`] if the attribute query fails.
    pub(crate) fn sm_count(&self) -> Result<usize> {
        Ok(self
            .ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(driver_err("querying the SM count"))?
            .max(1) as usize)
    }

    /// Opt-in dynamic shared memory per block in bytes (at least the 48 KiB every device
    /// grants without opting in).
    ///
    /// # Errors
    /// [`Error::Driver`] if the attribute query fails.
    pub(crate) fn smem_optin(&self) -> Result<usize> {
        Ok(self
            .ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(driver_err("querying the shared memory per block"))?
            .max(48 * 1024) as usize)
    }

    /// Opens device `ordinal`: probes the driver, cuBLAS and cuSOLVER libraries,
    /// retains the primary context, creates three non-blocking streams, binds
    /// cuBLAS and cuSOLVER to the first, and loads the embedded PTX, resolving
    /// every kernel of the kernel table (`KERNELS`) in both precisions.
    ///
    /// # Errors
    /// [`Error::NoDevice`] if a library cannot be loaded, there is no device
    /// `ordinal`, or the context cannot be created; [`Error::MissingKernel`] if
    /// the PTX lacks a kernel; [`Error::Driver`], [`Error::Cublas`],
    /// [`Error::Cusolver`] for other failures while setting up.
    pub fn new(ordinal: usize) -> Result<Self> {
        crate::gpu::ffi::driver::probe_libraries()?;
        // cudarc panics (rather than returning an error) if a symbol it expects
        // is missing from an older library; turn that into NoDevice as well.
        match std::panic::catch_unwind(|| Self::new_unchecked(ordinal)) {
            Ok(r) => r,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                Err(Error::NoDevice(format!("CUDA setup panicked: {msg}")))
            }
        }
    }

    /// [`Gpu::new`], leaving the calling thread's current CUDA context as it was: for a
    /// thread shared with CuPy or PyTorch, whose current device follows that context
    /// (opening device 1 must not move their arrays there). The first operation on this
    /// device binds its context again.
    ///
    /// # Errors
    /// As [`Gpu::new`].
    ///
    /// # Examples
    /// ```no_run
    /// let gpu = cuqr::Gpu::new_leaving_context(1)?;
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn new_leaving_context(ordinal: usize) -> Result<Self> {
        crate::gpu::ffi::driver::keeping_current_context(|| Self::new(ordinal))
    }

    fn new_unchecked(ordinal: usize) -> Result<Self> {
        let count = CudaContext::device_count()
            .map_err(|e| Error::NoDevice(format!("cuInit / device count failed: {e}")))?;
        if count <= 0 {
            return Err(Error::NoDevice("the driver reports no CUDA devices".into()));
        }
        if ordinal >= count as usize {
            return Err(Error::NoDevice(format!(
                "device ordinal {ordinal} requested, but only {count} device(s) present"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| {
            Error::NoDevice(format!("cannot create a context on device {ordinal}: {e}"))
        })?;
        let kernels = Kernels::load(&ctx)?;
        let (major, _) = ctx
            .compute_capability()
            .map_err(driver_err("compute capability"))?;
        let sm90 = crate::gpu::runtime::module::Sm90Kernels::load(&ctx, major)?;
        crate::gpu::ffi::driver::keep_pool_memory(&ctx)?;
        Self::with_kernels(ctx, kernels, sm90)
    }

    /// A second handle on this device for a logical partition that runs beside this one:
    /// the same context and loaded kernels, its own streams and cuBLAS/cuSOLVER handles,
    /// so that work issued on it from another thread overlaps work on this one (a
    /// distributed state's tree combine runs each level's pair QRs side by side on such
    /// partitions; docs/scaling.md#the-tree-combine). Buffers may pass between the two:
    /// the streams are ordered by the events cudarc records on every buffer.
    ///
    /// # Errors
    /// [`Error::Driver`], [`Error::Cublas`] or [`Error::Cusolver`] if a stream or handle
    /// cannot be made.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// let gpu = Arc::new(cuqr::Gpu::new(0)?);
    /// let parts: Vec<Arc<cuqr::Gpu>> =
    ///     (0..8).map(|_| gpu.partition().map(Arc::new)).collect::<Result<_, _>>()?;
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn partition(&self) -> Result<Self> {
        self.ctx
            .bind_to_thread()
            .map_err(driver_err("binding the context"))?;
        Self::with_kernels(self.ctx.clone(), self.kernels.clone(), self.sm90.clone())
    }

    /// The streams and library handles of a device handle on `ctx` with its kernels loaded.
    fn with_kernels(
        ctx: Arc<CudaContext>,
        kernels: Kernels,
        sm90: Option<crate::gpu::runtime::module::Sm90Kernels>,
    ) -> Result<Self> {
        let stream = ctx.new_stream().map_err(driver_err("creating stream 1"))?;
        let stream2 = ctx.new_stream().map_err(driver_err("creating stream 2"))?;
        let stream3 = ctx.new_stream().map_err(driver_err("creating stream 3"))?;
        let blas =
            CudaBlas::new(stream.clone()).map_err(|e| Error::cublas("creating the handle", e))?;
        let (_, greatest) = cudarc::driver::result::stream::get_priority_range()
            .map_err(driver_err("querying stream priorities"))?;
        let stream_urgent = ctx
            .new_stream_with_priority(greatest)
            .map_err(driver_err("creating the high-priority stream"))?;
        let blas_urgent = CudaBlas::new(stream_urgent.clone())
            .map_err(|e| Error::cublas("creating the second handle", e))?;
        let solver = DnHandle::new(stream.clone())
            .map_err(|e| Error::cusolver("creating the dense handle", e))?;
        Ok(Self {
            blas,
            blas_urgent,
            solver,
            kernels,
            sm90,
            upload_staging: std::sync::Mutex::new(None),
            caches: super::cache::Caches::default(),
            stage_marks: std::sync::Mutex::new(None),
            stream,
            stream2,
            stream3,
            stream_urgent,
            ctx,
            launches: AtomicU64::new(0),
            gemm_mode: core::sync::atomic::AtomicU8::new(0),
        })
    }

    /// How many kernel launches, cuBLAS and cuSOLVER calls and memcpys cuqr
    /// has issued on this device (docs/design.md "Launch counting"):
    /// read it before and after an operation to count that operation's launches.
    pub fn launch_count(&self) -> u64 {
        self.launches.load(Ordering::Relaxed)
    }

    /// Counts one launch, library call or memcpy (see [`Gpu::launch_count`]).
    pub(crate) fn count_launch(&self) {
        self.launches.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts a stage profile (`cuqr bench updates --stages`): from now on the
    /// update paths record a named event on [`Gpu::stream`] at the end of each stage,
    /// until [`Gpu::stage_marks_end`]. Work the marks bracket must be on the main
    /// stream (side-stream work counts to the stage that joins it).
    ///
    /// # Errors
    /// [`Error::Driver`] if the start event cannot be recorded.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn stage_marks_begin(&self) -> Result<()> {
        let ev = self
            .stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(driver_err("recording a stage mark"))?;
        *self.stage_marks.lock().unwrap_or_else(|e| e.into_inner()) = Some(vec![("", ev)]);
        Ok(())
    }

    /// Records the end of stage `name` when a stage profile is running (else nothing:
    /// one uncontended lock). A mark that cannot be recorded is dropped; profiling
    /// never fails an operation. The update paths mark their own stages; callers may
    /// mark theirs (e.g. a benchmark's solve after an update).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn stage_mark(&self, name: &'static str) {
        let mut g = self.stage_marks.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(v) = g.as_mut() {
            if let Ok(ev) = self
                .stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            {
                v.push((name, ev));
            }
        }
    }

    /// Ends the stage profile: waits for the last mark and returns each stage's name
    /// with its milliseconds (from the previous mark), in order; a name may repeat.
    ///
    /// # Errors
    /// [`Error::Driver`] (also when no profile was started).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn stage_marks_end(&self) -> Result<Vec<(&'static str, f64)>> {
        let marks = self
            .stage_marks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| Error::Driver("stage_marks_end without stage_marks_begin".into()))?;
        let mut out = Vec::with_capacity(marks.len());
        for w in marks.windows(2) {
            let ms = w[0]
                .1
                .elapsed_ms(&w[1].1)
                .map_err(driver_err("reading a stage mark"))?;
            out.push((w[1].0, f64::from(ms)));
        }
        Ok(out)
    }

    /// Whether `other` works in this handle's device context (the same handle, or a
    /// partition of it made by [`Gpu::partition`]): memory of one is usable by the other.
    pub(crate) fn shares_context(&self, other: &Gpu) -> bool {
        Arc::ptr_eq(&self.ctx, &other.ctx)
    }

    /// The device ordinal this was opened on.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The cudarc context.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The main stream: every cuqr launch, copy, cuBLAS and cuSOLVER call.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A second non-blocking stream for concurrent work (docs/algorithms.md#wavefront-schedule).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn stream2(&self) -> &Arc<CudaStream> {
        &self.stream2
    }

    /// A third non-blocking stream for concurrent work (docs/algorithms.md#wavefront-schedule).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn stream3(&self) -> &Arc<CudaStream> {
        &self.stream3
    }

    /// The cuBLAS handle, bound to [`Gpu::stream`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn blas(&self) -> &CudaBlas {
        &self.blas
    }

    /// The cuSOLVER dense handle, bound to [`Gpu::stream`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn solver(&self) -> &DnHandle {
        &self.solver
    }

    /// The resolved kernels of both precisions.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn kernels(&self) -> &Kernels {
        &self.kernels
    }

    /// The device name, e.g. "NVIDIA H100 80GB HBM3".
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn name(&self) -> Result<String> {
        self.ctx.name().map_err(driver_err("device name"))
    }

    /// Compute capability (major, minor), e.g. (9, 0).
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        self.ctx
            .compute_capability()
            .map_err(driver_err("compute capability"))
    }

    /// Device memory (free, total) in bytes.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(driver_err("memory info"))
    }

    /// A one-line description: name, compute capability, memory, for reports.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn describe(&self) -> Result<String> {
        let (maj, min) = self.compute_capability()?;
        let (free, total) = self.mem_info()?;
        Ok(format!(
            "{} (sm_{maj}{min}, {:.1} GiB total, {:.1} GiB free)",
            self.name()?,
            total as f64 / (1u64 << 30) as f64,
            free as f64 / (1u64 << 30) as f64
        ))
    }

    /// Waits for all work on all of this device's streams.
    ///
    /// # Errors
    /// [`Error::Driver`] if any queued work failed (an asynchronous fault).
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.synchronize().map_err(driver_err("synchronize"))
    }

    /// Bytes of device memory now handed out by the stream-ordered pool, after waiting
    /// for all queued work (so frees have happened); `None` without that allocator. A
    /// leak test compares it before and after a call.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn memory_in_use(&self) -> Result<Option<u64>> {
        self.synchronize()?;
        crate::gpu::ffi::driver::pool_bytes_in_use(&self.ctx)
    }

    /// Allocates `len` elements of page-locked host memory (not write-combined,
    /// so the host can read it fast), zero-filled: staging for
    /// [`super::DevMat::upload_pinned`] / [`super::DevMat::download_pinned`].
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] or [`Error::Driver`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn alloc_pinned<T: GpuScalar>(
        &self,
        len: usize,
    ) -> Result<cudarc::driver::PinnedHostSlice<T>> {
        let bytes = len.max(1) * core::mem::size_of::<T>();
        crate::gpu::ffi::driver::alloc_pinned_zeroed::<T>(&self.ctx, len.max(1)).map_err(
            |e| match e {
                Ok(e) => alloc_err("pinned host staging", bytes)(e),
                Err(e) => driver_err("pinned host pointer")(e),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::gpu::ffi::blas::Op;
    use crate::gpu::runtime::matrix::DevMat;
    use crate::Error;

    /// A stage profile names the stages in order with finite non-negative times (no
    /// assertion on the times themselves: timing.rs keeps timing out of tests), records
    /// nothing when off, and ending one that was never started is an error.
    #[test]
    fn stage_marks_name_the_stages_in_order() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        assert!(matches!(g.stage_marks_end(), Err(Error::Driver(_))));
        g.stage_mark("ignored: no profile running");
        assert!(g.stage_marks_end().is_err());
        let a = DevMat::<f64>::zeros(&g, 1024, 1024).unwrap();
        let mut c = DevMat::<f64>::zeros(&g, 1024, 1024).unwrap();
        g.synchronize().unwrap();
        g.stage_marks_begin().unwrap();
        g.stage_mark("empty");
        for _ in 0..4 {
            g.gemm(
                Op::N,
                Op::N,
                1.0,
                &a.view(),
                &a.view(),
                0.0,
                &mut c.view_mut(),
            )
            .unwrap();
        }
        g.stage_mark("gemm");
        g.stage_mark("empty");
        let st = g.stage_marks_end().unwrap();
        let names: Vec<&str> = st.iter().map(|x| x.0).collect();
        assert_eq!(names, ["empty", "gemm", "empty"]);
        assert!(st.iter().all(|x| x.1 >= 0.0 && x.1.is_finite()));
        // the profile is over: later marks are not recorded
        g.stage_mark("after");
        assert!(g.stage_marks_end().is_err());
    }
}
