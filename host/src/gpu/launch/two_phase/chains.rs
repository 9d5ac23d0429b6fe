//! Launchers of the chained generate `two_phase_gen_chains` (gpu-kernels `two_phase/chains.rs`;
//! docs/algorithms.md#two-phase-design): its block cap, fit check, launch shape and launch.

use super::*;
#[allow(unused_imports)]
use crate::gpu::ffi::driver::StreamAlloc;

impl Gpu {
    /// Caps the blocks of every later `two_phase_gen_chains` launch on this device at
    /// `cap` (at least one; `None`: as many as fit the GPU at once, at most one a chain).
    /// The rotations and driver do not depend on it (each chain is made by one block
    /// either way); tests use it to run many chains on few blocks.
    #[doc(hidden)]
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_chains_block_cap(&self, cap: Option<usize>) {
        let chains_slot = self.caches.get::<ChainsCache>();
        let mut cache = chains_slot.lock().unwrap_or_else(|e| e.into_inner());
        cache.block_cap = cap.map(|c| c.max(1));
    }

    /// Whether `two_phase_gen_chains` ([`GenPath::Chains`]) can run `chains` chains whose
    /// longest vector has `len` elements: a vector must fit a block's shared memory (any
    /// number of chains: the resident blocks take them in turn).
    ///
    /// # Errors
    /// [`Error::Driver`] if a device query fails.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn two_phase_chains_fit<T: GpuScalar>(
        &self,
        chains: usize,
        len: usize,
    ) -> Result<bool> {
        Ok(self.chains_shape::<T>(chains, len)?.is_some())
    }

    /// (threads a block, chunk, shared bytes, blocks) of `two_phase_gen_chains`, or
    /// `None` when a vector does not fit a block's shared memory (or no block fits an
    /// SM). Blocks: as many as fit the GPU at once, at most one a chain (a block makes
    /// chains b, b + G, … when there are more). 32·w threads with w = ⌈len/128⌉ ≤ 8, chunk
    /// = ⌈len/(32·w)⌉ rounded up to odd, so the threads' chunks fall in different
    /// shared-memory banks. Raises the kernel's shared-memory limit to the device's
    /// opt-in maximum when needed. Memoised on the [`Gpu`] ([`ChainsCache`]): a repeated
    /// query makes no driver call.
    pub(super) fn chains_shape<T: GpuScalar>(
        &self,
        chains: usize,
        len: usize,
    ) -> Result<Option<ChainShape>> {
        let key = (size_of::<T>(), chains, len);
        let chains_slot = self.caches.get::<ChainsCache>();
        let mut cache = chains_slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&(_, shape)) = cache.shapes.iter().find(|(k, _)| *k == key) {
            return Ok(shape);
        }
        let shape = self.chains_shape_query::<T>(chains, len)?;
        if cache.shapes.len() >= CHAINS_MEMO {
            cache.shapes.remove(0);
        }
        cache.shapes.push((key, shape));
        Ok(shape)
    }

    /// [`Gpu::chains_shape`] from the device's limits (driver queries; not memoised).
    pub(super) fn chains_shape_query<T: GpuScalar>(
        &self,
        chains: usize,
        len: usize,
    ) -> Result<Option<ChainShape>> {
        if chains == 0 || len < 2 || u32::try_from(chains).is_err() {
            return Ok(None);
        }
        let threads = len.div_ceil(128).clamp(1, CHAIN_MAX_THREADS / 32) * 32;
        let chunk = len.div_ceil(threads) | 1;
        let bytes = (CHAIN_SCRATCH + threads * chunk) * size_of::<T>();
        let optin = self.smem_optin()?;
        if bytes > optin {
            return Ok(None);
        }
        let f = &T::kernel_set(&self.kernels).two_phase_gen_chains;
        raise_smem_limit(
            f,
            bytes,
            optin,
            "raising two_phase_gen_chains's shared memory limit",
        )?;
        let per_sm = f
            .occupancy_max_active_blocks_per_multiprocessor(threads as u32, bytes, None)
            .map_err(crate::gpu::runtime::driver_err(
                "querying two_phase_gen_chains's occupancy",
            ))?;
        // As many blocks as fit the GPU at once, at most one a chain; a block makes
        // chains b, b + G, … in order when there are more chains than blocks.
        let blocks = ((per_sm as usize) * self.sm_count()?).min(chains);
        if blocks == 0 {
            return Ok(None);
        }
        Ok(Some((threads, chunk, bytes, blocks)))
    }

    /// Launches `two_phase_gen_chains` on `p` chains (chain c: elements 0..=hi0 + inc·c
    /// of vector c through `io`), recording into `list` (which the caller then describes).
    /// The publication flags are the [`ChainsCache`]'s, with the next `base`.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if the chains do not fit ([`Gpu::two_phase_chains_fit`];
    /// nothing launched), [`Error::OutOfMemory`] for the flags, [`Error::Driver`].
    ///
    /// # Safety
    /// `io` addresses every chain's vector (elements 0..=hi_c) inside live device memory
    /// that this stream's order gives to this launch alone (src and dst may coincide),
    /// hi_c ≥ c + 1, hi_{p−1} + 1 ≤ `len`, and `list` holds every chain's rotations
    /// (Σ_c (hi_c − c)).
    pub(super) unsafe fn gen_chains_launch<T: GpuScalar>(
        &self,
        io: ChainIo,
        p: usize,
        hi0: usize,
        inc: usize,
        len: usize,
        list: &mut RotList<T>,
    ) -> Result<()> {
        let Some((threads, chunk, bytes, blocks)) = self.chains_shape::<T>(p, len)? else {
            return Err(Error::InvalidParam {
                op: "two_phase_gen_chains",
                what: "path",
                why: format!(
                    "a vector of {len} elements does not fit a block's shared memory \
                     ({p} chains)"
                ),
            });
        };
        // The cache stays locked until the launch is queued, so launches take their
        // `base` values in stream order.
        let chains_slot = self.caches.get::<ChainsCache>();
        let mut cache = chains_slot.lock().unwrap_or_else(|e| e.into_inner());
        if cache.flags.as_ref().is_none_or(|f| f.len() < p) {
            cache.flags = None;
            let n = p.next_power_of_two().max(1024);
            let flags = self
                .stream
                .alloc_zeroed::<u32>(n)
                .map_err(alloc_err("the chain flags", 4 * n))?;
            self.count_launch();
            cache.flags = Some(flags);
            cache.base = 0;
        }
        if cache.base >= u32::MAX - 1 {
            let flags = cache.flags.as_mut().expect("made above");
            self.stream
                .memset_zeros(flags)
                .map_err(crate::gpu::runtime::driver_err("zeroing the chain flags"))?;
            self.count_launch();
            cache.base = 0;
        }
        cache.base += 1;
        let set = cache.base;
        let blocks = cache.block_cap.map_or(blocks, |c| blocks.min(c));
        let flags = cache.flags.as_mut().expect("made above");
        list.clear();
        let f = &T::kernel_set(&self.kernels).two_phase_gen_chains;
        let launch = LaunchConfig {
            grid_dim: (
                u32::try_from(blocks).expect("blocks ≤ chains < 2³² (chains_shape)"),
                1,
                1,
            ),
            block_dim: (threads as u32, 1, 1),
            shared_mem_bytes: u32::try_from(bytes).expect("shared memory fits u32"),
        };
        let mut b = self.kernel_args(f);
        b.arg(&io.src)
            .arg(&io.src_vs)
            .arg(&io.src_es)
            .arg(&io.dst)
            .arg(&io.dst_vs)
            .arg(&io.dst_es)
            .arg(&p)
            .arg(&hi0)
            .arg(&inc)
            .arg(&chunk)
            .arg(&mut list.rot)
            .arg(&mut list.plane)
            .arg(flags)
            .arg(&set);
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("two_phase_gen_chains"))?;
        // SAFETY: matches two_phase_gen_chains_{f32,f64}(src: *const T, src_vs, src_es,
        // dst: *mut T, dst_vs, dst_es, p, hi0, inc, chunk, rot: *mut T, plane: *mut u32,
        // flags: *mut u32, set: u32) (device pointers are 64-bit). The vectors are the
        // caller's (this fn's contract); rot/plane are the list's own buffers, flags the
        // cache's ≥ p u32s, all ≤ set − 1 (ChainsCache; none equals `set`), all distinct;
        // chains_shape gave 1 ≤ blocks ≤ p blocks of `threads` = 32·w threads (w ≤ 8),
        // CHAIN_SCRATCH + threads·chunk elements of shared memory (within the limit it
        // raised) with threads·chunk ≥ len, and no more blocks than fit the GPU at once,
        // which the cooperative launch then guarantees (or fails).
        unsafe { b.launch_cooperative(launch) }.map_err(launch_err("two_phase_gen_chains"))?;
        Ok(())
    }
}
