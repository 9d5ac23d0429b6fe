//! Raw CUDA driver calls below the runtime: library probes, the memory pool, allocation
//! of plain-old-data buffers, a 2-D memset, shrinking an allocation in place, and the
//! page-locked staging of uploads and downloads. Each function is safe to call: it
//! checks what its `unsafe` block relies on, or keeps the memory it hands out alive
//! until the copies reading it have completed.

use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaEvent, CudaSlice, CudaStream, CudaViewMut, DevicePtr, DevicePtrMut,
    DeviceRepr, DriverError, PinnedHostSlice, ValidAsZeroBits,
};

use crate::base::error::{Error, Result};

pub mod fault;

/// Element types for which every bit pattern is a valid value: device or page-locked
/// memory of them may be read before it is written (the values are unspecified, never
/// undefined behaviour) and may be reinterpreted from `f64` words.
///
/// # Safety
/// Every bit pattern of `size_of::<Self>()` bytes is a valid `Self`, and
/// `align_of::<Self>() <= 8`.
pub unsafe trait Pod: DeviceRepr + ValidAsZeroBits + Copy + Send + Sync + 'static {}
// SAFETY: IEEE binary32/binary64 and the fixed-width integers accept every bit pattern
// and are at most 8-byte aligned.
unsafe impl Pod for f32 {}
// SAFETY: as above.
unsafe impl Pod for f64 {}
// SAFETY: as above.
unsafe impl Pod for u8 {}
// SAFETY: as above.
unsafe impl Pod for u16 {}
// SAFETY: as above.
unsafe impl Pod for u32 {}
// SAFETY: as above.
unsafe impl Pod for u64 {}
// SAFETY: as above.
unsafe impl Pod for i32 {}

/// Which shared libraries cudarc will load, with the probe for each.
pub(crate) fn probe_libraries() -> Result<()> {
    // SAFETY: `is_culib_present` only tries `dlopen` on candidate library names
    // and drops what it opened; it has no preconditions and touches no CUDA
    // state (cudarc 0.19 driver/sys: "is_culib_present() only probes").
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    if !driver {
        return Err(Error::NoDevice(
            "the CUDA driver library (libcuda) cannot be loaded; is an NVIDIA driver installed?"
                .into(),
        ));
    }
    // SAFETY: as above, a dlopen probe of the cuBLAS library names only.
    let cublas = unsafe { cudarc::cublas::sys::is_culib_present() };
    if !cublas {
        return Err(Error::NoDevice(
            "the cuBLAS library (libcublas) cannot be loaded; check LD_LIBRARY_PATH".into(),
        ));
    }
    // SAFETY: as above, a dlopen probe of the cuSOLVER library names only.
    let cusolver = unsafe { cudarc::cusolver::sys::is_culib_present() };
    if !cusolver {
        return Err(Error::NoDevice(
            "the cuSOLVER library (libcusolver) cannot be loaded; check LD_LIBRARY_PATH".into(),
        ));
    }
    Ok(())
}

/// Fraction of the device's memory that the default memory pool keeps reserved after
/// a synchronisation (1/8).
const POOL_KEEP_DIVISOR: u64 = 8;

/// Raises the release threshold of the device's default memory pool (the pool that
/// cudarc's stream-ordered allocations come from) to 1/[`POOL_KEEP_DIVISOR`] of the
/// device memory, unless it is already higher. With CUDA's default of 0, every stream
/// or event synchronisation returns all freed pool memory to the driver, and the next
/// allocation maps it again: a factorisation that frees its panel buffers and then
/// synchronises for the rank check paid ≈ 0.3–0.9 ms of host-side unmapping and
/// remapping per call on an H100 (1048576×32, docs/performance.md). Memory above the
/// threshold is still released at synchronisation. Nothing to do without the
/// stream-ordered allocator.
pub(crate) fn keep_pool_memory(ctx: &CudaContext) -> Result<()> {
    use cudarc::driver::sys::{self, CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD};
    let check = |r: sys::CUresult, what: &str| -> Result<()> {
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(Error::driver(what, DriverError(r)))
        }
    };
    if !ctx.has_async_alloc() {
        return Ok(()); // no stream-ordered allocator: nothing is pooled
    }
    ctx.bind_to_thread()
        .map_err(|e| Error::driver("binding the context", e))?;
    let dev = ctx.cu_device();
    let mut total = 0usize;
    let mut pool: sys::CUmemoryPool = core::ptr::null_mut();
    let mut cur = 0u64;
    // SAFETY: `dev` is the context's device handle; each call writes only through the
    // pointer it is given (a usize, a CUmemoryPool, a u64: the types the driver API
    // documents for these queries), all live locals.
    unsafe {
        check(
            sys::cuDeviceTotalMem_v2(&mut total, dev),
            "querying the device memory",
        )?;
        check(
            sys::cuDeviceGetDefaultMemPool(&mut pool, dev),
            "querying the default memory pool",
        )?;
        check(
            sys::cuMemPoolGetAttribute(
                pool,
                CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut cur as *mut u64).cast(),
            ),
            "reading the pool's release threshold",
        )?;
    }
    let mut keep = total as u64 / POOL_KEEP_DIVISOR;
    if keep > cur {
        // SAFETY: `pool` was returned by the driver above; the attribute takes a u64.
        unsafe {
            check(
                sys::cuMemPoolSetAttribute(
                    pool,
                    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    (&mut keep as *mut u64).cast(),
                ),
                "setting the pool's release threshold",
            )?;
        }
    }
    Ok(())
}

/// Runs `f` and then makes the calling thread's current CUDA context the one it had before
/// (none included): for opening a device on a thread that CuPy or PyTorch also use, whose
/// current device follows that context. Without the driver library `f` just runs.
pub(crate) fn keeping_current_context<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: a dlopen probe of the driver's library names only (see `probe_libraries`).
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return f();
    }
    let before = cudarc::driver::result::ctx::get_current();
    let out = f();
    if let Ok(ctx) = before {
        // SAFETY: `ctx` was this thread's current context a moment ago (or none, a null
        // handle, which unbinds); the contexts cuqr opens are primary contexts, retained
        // while a `Gpu` lives, so a context current before `f` is still valid after it.
        let _ = unsafe {
            cudarc::driver::result::ctx::set_current(ctx.unwrap_or(core::ptr::null_mut()))
        };
    }
    out
}

/// Bytes of the device's default memory pool now handed out to allocations (the pool's
/// `USED_MEM_CURRENT`); `None` without the stream-ordered allocator. Frees are
/// stream-ordered: synchronise first for a settled figure.
///
/// # Errors
/// [`Error::Driver`].
pub(crate) fn pool_bytes_in_use(ctx: &CudaContext) -> Result<Option<u64>> {
    use cudarc::driver::sys::{self, CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT};
    if !ctx.has_async_alloc() {
        return Ok(None);
    }
    ctx.bind_to_thread()
        .map_err(|e| Error::driver("binding the context", e))?;
    let mut pool: sys::CUmemoryPool = core::ptr::null_mut();
    let mut used = 0u64;
    // SAFETY: the context's device handle; each call writes only through the pointer it
    // is given (a CUmemoryPool, then the u64 the attribute documents), live locals.
    let (r0, r1) = unsafe {
        let r0 = sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device());
        let r1 = if r0 == sys::CUresult::CUDA_SUCCESS {
            sys::cuMemPoolGetAttribute(
                pool,
                CU_MEMPOOL_ATTR_USED_MEM_CURRENT,
                (&mut used as *mut u64).cast(),
            )
        } else {
            r0
        };
        (r0, r1)
    };
    r0.result()
        .and(r1.result())
        .map_err(|e| Error::driver("reading the memory pool's use", e))?;
    Ok(Some(used))
}

/// Stream-ordered allocations that pass the fault hook ([`fault`]): with
/// [`alloc_uninit`] and [`alloc_pinned_zeroed`], every allocation of the library.
pub(crate) trait StreamAlloc {
    /// `len` zero-filled elements of `T` (cudarc's `alloc_zeros`).
    fn alloc_zeroed<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> core::result::Result<CudaSlice<T>, DriverError>;
    /// A device copy of `src` (cudarc's `clone_htod`).
    fn htod_copy<T: DeviceRepr>(
        &self,
        src: &[T],
    ) -> core::result::Result<CudaSlice<T>, DriverError>;
}

impl StreamAlloc for Arc<CudaStream> {
    fn alloc_zeroed<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> core::result::Result<CudaSlice<T>, DriverError> {
        fault::alloc()?;
        self.alloc_zeros::<T>(len)
    }
    fn htod_copy<T: DeviceRepr>(
        &self,
        src: &[T],
    ) -> core::result::Result<CudaSlice<T>, DriverError> {
        fault::alloc()?;
        self.clone_htod(src)
    }
}

/// `len` elements of `T` on `stream`'s device, not initialised (stream-ordered).
///
/// # Errors
/// The driver's allocation error.
pub(crate) fn alloc_uninit<T: Pod>(
    stream: &Arc<CudaStream>,
    len: usize,
) -> core::result::Result<CudaSlice<T>, DriverError> {
    fault::alloc()?;
    // SAFETY: cudarc's `alloc` is unsafe because the memory is unset; for a `Pod` type
    // every bit pattern is a value, so reading before writing yields unspecified values
    // but no undefined behaviour.
    unsafe { stream.alloc::<T>(len) }
}

/// `len` zero-filled page-locked host elements of `T`.
///
/// # Errors
/// `Err(Ok(e))`: the allocation failed; `Err(Err(e))`: its host pointer could not be read.
pub(crate) fn alloc_pinned_zeroed<T: Pod>(
    ctx: &Arc<CudaContext>,
    len: usize,
) -> core::result::Result<PinnedHostSlice<T>, core::result::Result<DriverError, DriverError>> {
    fault::alloc().map_err(Ok)?;
    // SAFETY: cuMemHostAlloc with flags 0 returns uninitialised page-locked memory
    // (cudarc `alloc_pinned_with_flags`: "the memory is unset"); it is zero-filled below
    // before anything reads it.
    let mut p = unsafe { ctx.alloc_pinned_with_flags::<T>(len, 0) }.map_err(Ok)?;
    let ptr = p.as_mut_ptr().map_err(Err)?;
    // SAFETY: `ptr` points at `len` elements of T just allocated and exclusively owned by
    // `p`; all-zero bits are a valid T (`Pod`).
    unsafe { core::ptr::write_bytes(ptr, 0, len) };
    Ok(p)
}

/// Zeroes rows `nrows..ld` of each of the `ncols` columns of the column-major buffer
/// `buf` (leading dimension `ld`), on `stream`.
///
/// # Errors
/// [`Error::Driver`].
///
/// # Panics
/// If the region exceeds the buffer, or the element size is not a multiple of 4 bytes.
pub(crate) fn zero_padding_rows<T: Pod>(
    stream: &Arc<CudaStream>,
    buf: &mut CudaSlice<T>,
    nrows: usize,
    ld: usize,
    ncols: usize,
) -> Result<()> {
    let elem = core::mem::size_of::<T>();
    assert!(elem.is_multiple_of(4) && nrows < ld && ld * ncols <= buf.len());
    let (ptr, _record) = buf.device_ptr_mut(stream);
    // SAFETY: rows nrows..ld of each of the ncols columns lie inside the allocation of
    // ≥ ld·ncols elements (asserted); the start is 4-byte aligned and each row of the
    // 2-D region is (ld − nrows)·elem bytes, a multiple of 4 (asserted); the memset is
    // queued on `stream`, which `_record` orders against other streams' use of `buf`.
    let r = unsafe {
        cudarc::driver::sys::cuMemsetD2D32Async(
            ptr + (nrows * elem) as u64,
            ld * elem,
            0,
            (ld - nrows) * elem / 4,
            ncols,
            stream.cu_stream(),
        )
    };
    if r == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::driver("zeroing padding rows", DriverError(r)))
    }
}

/// Shrinks `buf` to its first `len` elements without a copy or a new allocation (the
/// whole allocation is still freed when the buffer drops).
///
/// # Panics
/// If `len` exceeds the buffer. If cudarc panics while re-creating the buffer's tracking
/// events the process aborts: the buffer is between its old and new descriptions then.
pub(crate) fn shrink_in_place<T: DeviceRepr>(buf: &mut CudaSlice<T>, len: usize) {
    assert!(len <= buf.len(), "shrink_in_place({len}) of {}", buf.len());
    /// Aborts if dropped during an unwind between the read and the write below.
    struct AbortOnUnwind;
    impl Drop for AbortOnUnwind {
        fn drop(&mut self) {
            std::process::abort();
        }
    }
    let guard = AbortOnUnwind;
    let stream = buf.stream().clone();
    // SAFETY: `*buf` is read out and the slot is overwritten by the `ptr::write` below
    // before anything else can observe or drop it; the only code in between that can
    // panic (cudarc's event creation in `upgrade_device_ptr`) aborts the process through
    // `guard` instead of unwinding past the moved-out slot, so the buffer is never
    // dropped twice.
    let old = unsafe { core::ptr::read(buf) };
    // `leak` waits on the buffer's tracking events, drops them and returns the base
    // pointer without freeing it.
    let ptr = old.leak();
    // SAFETY: `ptr` is the base of a live allocation of at least `len` elements of T,
    // made on `stream` and no longer owned by anything after `leak`; the new slice
    // describes a prefix of it and frees the whole allocation (cuMemFreeAsync of the base
    // pointer) when dropped.
    let new = unsafe { stream.upgrade_device_ptr::<T>(ptr, len) };
    // SAFETY: the slot holds the moved-out `old` (now leaked); writing without dropping
    // it is what the read above requires.
    unsafe { core::ptr::write(buf, new) };
    core::mem::forget(guard);
}

/// The first `len` elements of `T` in a buffer of `f64` words, as a mutable view.
///
/// # Panics
/// If they do not fit.
pub(crate) fn view_words_as_mut<T: Pod>(
    words: &mut CudaSlice<f64>,
    len: usize,
) -> CudaViewMut<'_, T> {
    assert!(
        len * core::mem::size_of::<T>() <= words.len() * 8,
        "view past the buffer"
    );
    // SAFETY: reinterprets a prefix of the f64 buffer as `len` elements of T (`Pod`:
    // alignment ≤ 8, every bit pattern valid); the prefix fits (asserted).
    unsafe { words.transmute_mut::<T>(len) }.expect("the prefix fits (asserted)")
}

/// Page-locked host memory through which uploads go without waiting. Uploads take
/// consecutive regions (128-byte aligned); when one does not fit what is left, the host
/// waits for `done` (every copy queued so far out of this buffer) and starts again at the
/// front, so no region is rewritten while a copy may still read it.
pub(crate) struct UploadStaging {
    host: PinnedHostSlice<f64>,
    /// Next free f64 slot.
    cursor: usize,
    /// Recorded on the stream after each copy out of `host`.
    done: CudaEvent,
}

impl UploadStaging {
    /// Smallest staging, in f64s (1 MiB).
    pub(crate) const MIN_LEN: usize = 1 << 17;

    /// Staging of `len` f64 words.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] / [`Error::Driver`].
    pub(crate) fn new(ctx: &Arc<CudaContext>, len: usize) -> Result<Self> {
        let host = alloc_pinned_zeroed::<f64>(ctx, len.max(1)).map_err(|e| match e {
            Ok(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY => {
                Error::OutOfMemory {
                    what: "pinned host staging",
                    bytes: len.max(1) * 8,
                }
            }
            Ok(e) | Err(e) => Error::driver("pinned host staging", e),
        })?;
        let done = ctx
            .new_event(None)
            .map_err(|e| Error::driver("creating the upload staging event", e))?;
        Ok(Self {
            host,
            cursor: 0,
            done,
        })
    }

    /// f64 words held.
    pub(crate) fn len(&self) -> usize {
        self.host.len()
    }

    /// Copies `len` elements of T, written into the staging by `fill`, into `dst` from
    /// element `at` on (`dst` holds ≥ `at + len`) with one asynchronous copy on `stream`;
    /// `align_words` is the alignment of a region in f64 words.
    ///
    /// # Errors
    /// [`Error::Driver`].
    ///
    /// # Panics
    /// If `dst` is shorter than `at + len` or the staging is smaller than the region.
    pub(crate) fn upload<T: Pod>(
        &mut self,
        stream: &Arc<CudaStream>,
        (dst, at): (&mut CudaSlice<T>, usize),
        len: usize,
        align_words: usize,
        fill: impl FnOnce(&mut [T]),
    ) -> Result<()> {
        let drv = |what: &'static str| move |e: DriverError| Error::driver(what, e);
        assert!(at.checked_add(len).is_some_and(|end| dst.len() >= end));
        let need = (len * core::mem::size_of::<T>()).div_ceil(8);
        assert!(need <= self.host.len(), "staging smaller than one upload");
        let mut off = self.cursor.next_multiple_of(align_words);
        if off + need > self.host.len() {
            self.done
                .synchronize()
                .map_err(drv("waiting for the upload staging"))?;
            off = 0;
        }
        let host = self.host.as_mut_slice().map_err(drv("upload staging"))?;
        // SAFETY: f64 slots off..off+need of the page-locked buffer (inside it: checked
        // above) hold `len` elements of T (`Pod`: alignment ≤ 8, every bit pattern valid);
        // no queued copy reads this region (a region is reused only after `done` has been
        // waited for).
        let region =
            unsafe { core::slice::from_raw_parts_mut(host[off..].as_mut_ptr().cast::<T>(), len) };
        fill(region);
        {
            let (dptr, _record) = dst.device_ptr_mut(stream);
            let dptr = dptr + (at * core::mem::size_of::<T>()) as u64;
            // SAFETY: copies `len` elements from page-locked host memory that stays
            // allocated and unmodified until `done` (recorded right after, on the same
            // stream) has completed, into elements at..at + len of `dst`, which it holds
            // (asserted); `_record` keeps cudarc's ordering of `dst` across streams.
            unsafe {
                cudarc::driver::result::memcpy_htod_async(dptr, &*region, stream.cu_stream())
            }
            .map_err(drv("staged upload"))?;
        }
        self.done
            .record(stream)
            .map_err(drv("recording the upload staging event"))?;
        self.cursor = off + need;
        Ok(())
    }
}

impl Drop for UploadStaging {
    fn drop(&mut self) {
        // The page-locked memory must outlive every copy still reading it.
        let _ = self.done.synchronize();
    }
}

/// Copies the first `slots` f64 words of `src` into the page-locked `host`, waits for
/// `stream`, and returns the first `len` elements of T of the copy.
///
/// # Errors
/// [`Error::Driver`] (including an earlier asynchronous fault on the stream).
///
/// # Panics
/// If `slots` exceeds either buffer or `len` elements of T exceed `slots` words.
pub(crate) fn download_words<'h, T: Pod>(
    stream: &Arc<CudaStream>,
    src: &CudaSlice<f64>,
    host: &'h mut PinnedHostSlice<f64>,
    slots: usize,
    len: usize,
) -> Result<&'h [T]> {
    let drv = |e: DriverError| Error::driver("download", e);
    assert!(slots <= src.len() && slots <= host.len());
    assert!(len * core::mem::size_of::<T>() <= slots * 8);
    let h = host.as_mut_slice().map_err(drv)?;
    {
        let (sp, _record) = src.device_ptr(stream);
        // SAFETY: copies `slots` f64s from the device buffer into the first `slots` of the
        // page-locked host buffer (both checked); `host` is borrowed mutably until the
        // stream wait below completes the copy, before anything reads it.
        unsafe {
            cudarc::driver::result::memcpy_dtoh_async(&mut h[..slots], sp, stream.cu_stream())
        }
        .map_err(drv)?;
    }
    // Wait by the stream (the context's spin-then-yield policy), not by the page-locked
    // buffer's own event: cudarc creates that one blocking-sync, and waiting on it puts the
    // thread to sleep.
    stream.synchronize().map_err(drv)?;
    // SAFETY: the first len·size_of::<T>() ≤ slots·8 bytes of the page-locked f64 buffer
    // (alignment 8 ≥ that of T) hold what the copy above brought back (completed by the
    // stream wait); every bit pattern is a valid T (`Pod`).
    Ok(unsafe { core::slice::from_raw_parts(h.as_ptr().cast::<T>(), len) })
}
