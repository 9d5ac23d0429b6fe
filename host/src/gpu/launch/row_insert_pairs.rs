//! Launcher of `row_insert_pairs` (gpu-kernels/src/row_insert.rs, docs/kernels.md): the
//! QRs of many stacked pairs of triangles [R_a d_a; R_b d_b] in one launch, one block a
//! pair — a level of the distributed tree combine (docs/scaling.md#the-tree-combine) whose
//! time does not grow with its pairs while they fit the device's SMs.

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaSlice, DevicePtrMut};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::launch_config;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

/// Most threads a block of `row_insert_pairs` takes: 16 warps (the kernel holds a column's
/// rows in 16 registers a lane and takes 125 registers a thread in f64 on sm_90). The
/// launch takes fewer if the driver's build of the kernel allows fewer.
const PAIRS_BLOCK_MAX: i32 = 512;

/// Reflectors of a group (gpu-kernels `row_insert::PAIRS_NB`).
const PAIRS_NB: usize = 8;

/// Largest n the kernel takes (gpu-kernels `row_insert::PAIRS_MAX_N`).
const PAIRS_MAX_N: usize = 512;

/// Shared memory a launch may take without raising the kernel's limit.
const SMEM_DEFAULT: usize = 48 * 1024;

/// Whether `row_insert_pairs` takes pairs of n×n triangles: 1 ≤ n ≤ 512 (a column's rows
/// in 16 registers a lane).
pub(crate) fn pairs_fit(n: usize) -> bool {
    (1..=PAIRS_MAX_N).contains(&n)
}

/// Dynamic shared memory of a launch for n: the two parities' panels of [`PAIRS_NB`]
/// columns (PAIRS_NB tops and n tail rows each) and their τ.
fn smem_bytes<T>(n: usize) -> usize {
    (2 * PAIRS_NB * (n + PAIRS_NB) + 2 * PAIRS_NB) * std::mem::size_of::<T>()
}

impl Gpu {
    /// The QR of each pair [R_a d_a; R_b d_b] (`pairs[i]` = (the n×(n+q) pack [R_a d_a], the
    /// partner's pack [R_b d_b] in a buffer of the same layout)), R_a and R_b upper
    /// triangular, in place and in one launch on [`Gpu::stream`]: the pack receives the
    /// pair's [R d] (R upper triangular; the strict lower triangle untouched), the partner's
    /// buffer scratch (its last q columns the transformed d_b). Returns, per pair, the 2-norms of the transformed d_b's columns (the
    /// rows the pair's QR moves below n). Synchronises the stream before it returns, so
    /// that handles of other streams may use the packs at once.
    ///
    /// The caller orders the packs' and partners' last writes before this call (on this
    /// stream, or by synchronising the streams that wrote them).
    ///
    /// # Errors
    /// [`Error::Shape`] if a pack is not n×(n+q), the packs' leading dimensions differ, or a
    /// partner is shorter than a pack; [`Error::InvalidParam`] if n is outside
    /// [`pairs_fit`] or past 65,535 pairs; [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn row_insert_pairs<T: GpuScalar>(
        &self,
        pairs: &mut [(&mut DevMat<T>, &mut CudaSlice<T>)],
        (n, q): (usize, usize),
    ) -> Result<Vec<Vec<f64>>> {
        const OP: &str = "row_insert_pairs";
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        if !pairs_fit(n) || pairs.len() > 65_535 {
            return Err(Error::InvalidParam {
                op: OP,
                what: "n",
                why: format!(
                    "{} pairs of {n}×{n} triangles do not fit one launch",
                    pairs.len()
                ),
            });
        }
        let ld = pairs[0].0.ld();
        for (pack, partner) in pairs.iter() {
            let shape = |what, got, expected| Error::Shape {
                op: OP,
                what,
                got,
                expected,
            };
            if pack.nrows() != n {
                return Err(shape("rows of a pack", pack.nrows(), n));
            }
            if pack.ncols() != n + q {
                return Err(shape("columns of a pack", pack.ncols(), n + q));
            }
            if pack.ld() != ld {
                return Err(shape("leading dimension of a pack", pack.ld(), ld));
            }
            if partner.len() < pack.buf().len() {
                return Err(shape(
                    "length of a partner",
                    partner.len(),
                    pack.buf().len(),
                ));
            }
        }
        let count = pairs.len();
        let norms_len = (count * q).max(1);
        let mut norms = self
            .stream
            .alloc_zeroed::<T>(norms_len)
            .map_err(alloc_err("the pairs' residual norms", norms_len))?;
        let mut guards = Vec::with_capacity(2 * count);
        let (mut a_ptrs, mut b_ptrs) = (Vec::with_capacity(count), Vec::with_capacity(count));
        for (pack, partner) in pairs.iter_mut() {
            let (pa, ga) = pack.buf_mut().device_ptr_mut(&self.stream);
            let (pb, gb) = partner.device_ptr_mut(&self.stream);
            a_ptrs.push(pa);
            b_ptrs.push(pb);
            guards.push(ga);
            guards.push(gb);
        }
        let up = |v: &[u64]| {
            self.stream
                .htod_copy(v)
                .map_err(alloc_err("the pairs' pointers", v.len()))
        };
        let (pa, pb) = (up(&a_ptrs)?, up(&b_ptrs)?);
        let f = &T::kernel_set(&self.kernels).row_insert_pairs;
        let most = f
            .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
            .map_err(driver_err("querying row_insert_pairs' block limit"))?
            .min(PAIRS_BLOCK_MAX);
        // A build that takes fewer than one warp a block is not one this launch can use.
        let block = u32::try_from(most - most % 32)
            .ok()
            .filter(|&b| b >= 64)
            .ok_or(Error::InvalidParam {
                op: OP,
                what: "block",
                why: format!("the driver's build of the kernel takes {most} threads a block"),
            })?;
        let smem = smem_bytes::<T>(n);
        if smem > SMEM_DEFAULT {
            f.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                i32::try_from(smem).expect("shared memory fits i32"),
            )
            .map_err(driver_err("raising row_insert_pairs' shared memory limit"))?;
        }
        let config = launch_config((count as u32, 1), (block, 1), smem);
        // SAFETY: matches row_insert_pairs_{f32,f64}(packs: *const *mut T, partners: *const
        // *mut T, ld, n, q, norms: *mut T): `pa`/`pb` hold `count` device pointers (grid
        // x = count ≤ 65,535), taken from distinct `&mut` packs and partners (so no two of
        // the 2·count matrices overlap), each checked above to be n×(n+q) with leading
        // dimension ld ≥ n (a DevMat's) — the partners at least as long; the guards keep
        // them borrowed until the stream is synchronised below; `norms` holds count·q
        // (≥ 1) elements of its own; 1 ≤ n ≤ 512 (`pairs_fit`); the shared memory is the
        // kernel's (2·8·(n + 8) + 16) elements, the limit raised above 48 KiB; the block is
        // a multiple of 32 from 64 to the kernel's limit.
        unsafe {
            crate::gpu::launch::launch_kernel!(self, f, config, OP; &pa, &pb, &ld, &n, &q, &mut norms)
        }?;
        let host = self
            .stream
            .clone_dtoh(&norms)
            .map_err(driver_err("downloading the pairs' residual norms"))?;
        self.stream
            .synchronize()
            .map_err(driver_err("synchronising row_insert_pairs"))?;
        drop(guards);
        Ok((0..count)
            .map(|i| {
                host[i * q..(i + 1) * q]
                    .iter()
                    .map(|x| x.to_f64())
                    .collect()
            })
            .collect())
    }
}
