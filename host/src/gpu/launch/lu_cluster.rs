//! Typed launcher of the thread-block-cluster LU panel `lu_cluster_panel`
//! (gpu-kernels/src/lu_cluster.rs, sm_90 only): its launch shape, cluster attribute and
//! occupancy check, and whether a cooperative leaf splits in halves to fit a cluster; used
//! by the device LU's cooperative leaves ([`super::lu`]).

use cudarc::driver::sys::{
    CUfunction, CUfunction_attribute, CUlaunchAttribute, CUlaunchAttributeID,
    CUlaunchAttributeValue, CUlaunchConfig, CUresult,
};

use crate::base::error::Result;
use crate::gpu::launch::launch_err;
use crate::gpu::launch::lu::{CoopPtrs, LuPtrs};
use crate::gpu::runtime::{driver_err, Gpu, GpuScalar};

/// Threads per block of `lu_cluster_panel` (80 registers a thread in f64: 512 fit).
pub const LU_CLUSTER_BLOCK: u32 = 512;

/// Cluster sizes `lu_cluster_panel` tries, largest first (16 is beyond the portable
/// limit of 8 and needs the non-portable attribute and a GPC with 16 free SMs; the
/// kernel has candidate slots for at most 16 blocks).
const LU_CLUSTER_SIZES: [usize; 2] = [16, 8];

/// Bytes of `lu_cluster_panel`'s shared memory before the slab (gpu-kernels
/// `lu_cluster::cluster_header_bytes`): mbarriers, candidate records and partials in
/// the first KiB, then two buffers each of the pushed pivot row and row j.
fn cluster_header_bytes(w: usize, elem: usize) -> usize {
    1024 + 4 * w * elem
}

/// The launch shape of `lu_cluster_panel` for a panel of `rows` × `w`: (blocks, slab
/// rows a block, dynamic shared memory bytes) when the rows fit in the shared memory of
/// one cluster of at most `max_cluster` blocks, at least two (distributed shared memory
/// wants a cluster of two or more: compute-sanitizer rejects a one-block cluster's
/// `st.async`); None otherwise.
fn cluster_shape(
    cw: &CoopPtrs,
    max_cluster: usize,
    rows: usize,
    w: usize,
    elem: usize,
) -> Option<(usize, usize, usize)> {
    let header = cluster_header_bytes(w, elem);
    if cw.smem_optin <= header + w * elem || rows < 2 || max_cluster < 2 {
        return None;
    }
    let slab_cap = (cw.smem_optin - header) / (w * elem);
    let need = rows.div_ceil(slab_cap);
    if need > max_cluster {
        return None;
    }
    let blocks = rows
        .div_ceil(cw.rows_per_block)
        .clamp(need.max(2), max_cluster);
    let slab = rows.div_ceil(blocks);
    let blocks = rows.div_ceil(slab);
    debug_assert!(blocks >= 2);
    Some((blocks, slab, header + slab * w * elem))
}

/// The launch attribute of a one-dimensional cluster of `size` blocks.
fn cluster_attr(size: usize) -> CUlaunchAttribute {
    // SAFETY: an all-zero launch attribute value is valid plain data (a C union of
    // integers and structs of integers).
    let mut value: CUlaunchAttributeValue = unsafe { core::mem::zeroed() };
    value.clusterDim.x = u32::try_from(size).expect("cluster size fits u32");
    value.clusterDim.y = 1;
    value.clusterDim.z = 1;
    CUlaunchAttribute {
        id: CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
        pad: [0; 4],
        value,
    }
}

/// The launch of `lu_cluster_panel` as one cluster of `size` blocks of
/// [`LU_CLUSTER_BLOCK`] threads with `smem` bytes of dynamic shared memory on `stream`;
/// `attr` (from [`cluster_attr`]) must outlive the returned config's use.
fn cluster_config(
    size: usize,
    smem: usize,
    stream: cudarc::driver::sys::CUstream,
    attr: &mut CUlaunchAttribute,
) -> CUlaunchConfig {
    CUlaunchConfig {
        gridDimX: u32::try_from(size).expect("grid fits u32"),
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: LU_CLUSTER_BLOCK,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: u32::try_from(smem).expect("shared memory fits u32"),
        hStream: stream,
        attrs: attr,
        numAttrs: 1,
    }
}

impl Gpu {
    /// The largest cluster size of [`LU_CLUSTER_SIZES`] at which `lu_cluster_panel`
    /// (blocks of [`LU_CLUSTER_BLOCK`] threads with `smem_optin` bytes of shared memory,
    /// one a SM) has at least one cluster that can be resident; None on devices
    /// without the sm_90 module or where no size fits. Raises the kernel's
    /// shared-memory limit and allows non-portable cluster sizes.
    pub(super) fn lu_cluster_max<T: GpuScalar>(&self, smem_optin: usize) -> Result<Option<usize>> {
        let Some(k) = self.sm90.as_ref() else {
            return Ok(None);
        };
        let f = &T::sm90_set(k).lu_cluster_panel;
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(smem_optin).unwrap_or(i32::MAX),
        )
        .map_err(driver_err("raising lu_cluster_panel's shared memory limit"))?;
        f.set_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
            1,
        )
        .map_err(driver_err(
            "allowing lu_cluster_panel's non-portable clusters",
        ))?;
        for size in LU_CLUSTER_SIZES {
            if self.lu_cluster_fits(f.cu_function(), size, smem_optin)? {
                return Ok(Some(size));
            }
        }
        Ok(None)
    }

    /// Whether at least one cluster of `size` blocks of [`LU_CLUSTER_BLOCK`] threads
    /// with `smem` bytes of dynamic shared memory can be resident
    /// (`cuOccupancyMaxActiveClusters`); an error of that query counts as no.
    fn lu_cluster_fits(&self, f: CUfunction, size: usize, smem: usize) -> Result<bool> {
        let mut attr = cluster_attr(size);
        let cfg = cluster_config(size, smem, self.stream.cu_stream(), &mut attr);
        let mut clusters: core::ffi::c_int = 0;
        // SAFETY: `f` is a live function of a module this Gpu owns; `cfg` and `attr`
        // are valid for the call and only read; `clusters` is written.
        let r =
            unsafe { cudarc::driver::sys::cuOccupancyMaxActiveClusters(&mut clusters, f, &cfg) };
        Ok(r == CUresult::CUDA_SUCCESS && clusters >= 1)
    }

    /// `lu_cluster_panel` for the panel c0..c0+w on `stream` when its rows fit in the
    /// shared memory of one cluster of at most `max_cluster` blocks; returns false (and
    /// launches nothing) when they do not, for the cooperative panel to take it.
    pub(super) fn lu_cluster_panel_on<T: GpuScalar>(
        &self,
        p: &LuPtrs,
        c0: usize,
        w: usize,
        stream: &cudarc::driver::CudaStream,
        max_cluster: usize,
    ) -> Result<bool> {
        let cw = p.coop.as_ref().expect("cooperative scratch present");
        let k = self.sm90.as_ref().expect("sm_90 kernels present");
        let f = T::sm90_set(k).lu_cluster_panel.cu_function();
        let Some((blocks, slab, smem)) =
            cluster_shape(cw, max_cluster, p.m - c0, w, core::mem::size_of::<T>())
        else {
            return Ok(false);
        };
        let (a, lda, m, ipiv, diag) = (p.a, p.lda, p.m, p.ipiv, p.diag);
        let mut args: [*mut core::ffi::c_void; 8] = [
            (&a as *const u64).cast_mut().cast(),
            (&lda as *const usize).cast_mut().cast(),
            (&m as *const usize).cast_mut().cast(),
            (&c0 as *const usize).cast_mut().cast(),
            (&w as *const usize).cast_mut().cast(),
            (&ipiv as *const u64).cast_mut().cast(),
            (&diag as *const u64).cast_mut().cast(),
            (&slab as *const usize).cast_mut().cast(),
        ];
        let mut attr = cluster_attr(blocks);
        let cfg = cluster_config(blocks, smem, stream.cu_stream(), &mut attr);
        self.count_launch();
        crate::gpu::ffi::driver::fault::launch().map_err(launch_err("lu_cluster_panel"))?;
        // SAFETY: matches lu_cluster_panel_{f32,f64}(a: *mut T, lda, m, c0, w, ipiv: *mut
        // u32, diag: *mut T, slab) (device pointers are 64-bit; each args entry points at
        // a live local of the entry's type). LuPtrs' invariant gives `a` m×n (ld lda ≥
        // m) and ipiv/diag of min(m, n) entries, and the caller's assert c0 + w ≤
        // min(m, n), so rows c0..m of the panel's columns and entries c0..c0+w are in
        // bounds. The grid is one cluster (cluster dimension = grid = blocks ≤
        // max_cluster; lu_cluster_max had cuOccupancyMaxActiveClusters accept a cluster
        // of max_cluster blocks at the opt-in maximum ≥ smem bytes, so this smaller
        // cluster with less memory fits too; the limit was raised to that maximum); blocks·slab ≥
        // rows and every block's slab starts below m (blocks = ⌈rows/slab⌉); block
        // LU_CLUSTER_BLOCK ≤ 16 blocks (LU_CLUSTER_SIZES), cluster_header_bytes(w, elem)
        // + slab·w·elem bytes as the entry requires. Stream ordering as for lu_panel_coop (the caller's contract:
        // self.stream, or the look-ahead stream ordered by events); the guards are held by
        // lu_factor_in_place.
        unsafe {
            cudarc::driver::sys::cuLaunchKernelEx(&cfg, f, args.as_mut_ptr(), core::ptr::null_mut())
        }
        .result()
        .map_err(launch_err("lu_cluster_panel"))?;
        Ok(true)
    }

    /// Whether the cooperative leaf c0..c0+w splits in halves for the cluster panel:
    /// clusters are on, the leaf's rows do not fit one cluster at width w, its halves
    /// are at least [`LuPanelOpts::cluster_leaf_min`] wide and some width down to that
    /// minimum fits (else the whole-GPU cooperative launch takes the leaf as it is).
    pub(super) fn lu_leaf_splits<T: GpuScalar>(&self, p: &LuPtrs, c0: usize, w: usize) -> bool {
        let Some(cw) = p.coop.as_ref() else {
            return false;
        };
        let Some(max_cluster) = cw.max_cluster else {
            return false;
        };
        let (rows, elem) = (p.m - c0, core::mem::size_of::<T>());
        let min_w = cw.cluster_leaf_min.max(1);
        w / 2 >= min_w
            && cluster_shape(cw, max_cluster, rows, w, elem).is_none()
            && cluster_shape(cw, max_cluster, rows, min_w, elem).is_some()
    }
}
