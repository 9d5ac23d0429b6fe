//! cuqr device code: the kernel entry points of docs/kernels.md, each stamped for f32 and
//! f64 by `entries!` below. The PTX symbol is the Rust fn name,
//! `<file>_<action>_<dtype>`. Built only for `nvptx64-nvidia-cuda` (nightly) by
//! `cargo xtask build-ptx`; the host crate embeds the resulting
//! `host/ptx/cuqr_kernels.ptx` (and `cuqr_kernels_sm90.ptx` for the sm_90 module).
//!
//! Bodies live as generic `#[inline(always)]` fns in the per-topic modules; all
//! intrinsics and `asm!` live in [`device`].
#![no_std]
#![feature(
    abi_ptx,
    stdarch_nvptx,
    core_float_math,
    asm_experimental_arch,
    core_intrinsics,
    gpu_intrinsics,
    gpu_launch_sized_workgroup_mem
)]
#![allow(internal_features)]
#![deny(unsafe_op_in_unsafe_fn)]

#[macro_use]
mod small_r;
pub mod batch_q;
pub mod batch_r;
pub mod convert;
pub mod device;
mod elementwise;
pub mod fused_panel;
pub mod givens;
pub mod householder;
pub mod lu;
#[cfg(cuqr_sm90)]
pub mod lu_cluster;
pub mod panel;
pub mod reduce;
pub mod rolling;
pub mod rotation_chain;
pub mod row_insert;
pub mod small_panel;
pub mod small_window;
pub mod transpose;
pub mod ts_gemm;
pub mod tsqr;
pub mod two_phase;
pub mod wy;

/// With `panic = "abort"` a panic can only come from a bug (no kernel indexes slices);
/// trap so the launch fails loudly instead of continuing.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    device::trap()
}

/// Stamps, for each entry, `#[unsafe(no_mangle)] pub unsafe extern "ptx-kernel" fn
/// <name>_f32` and `<name>_f64`, each in a small module where `T` is the element type,
/// forwarding to the generic body `$body(args...)` (T is inferred from the pointers). Both symbol names are spelled
/// out (no proc-macro crates here); they must be `<name>_f32` / `<name>_f64`.
macro_rules! entries {
    ($(
        $(#[$doc:meta])*
        $f32:ident, $f64:ident ( $($arg:ident : $ty:ty),* $(,)? ) => $body:path ;
    )*) => {
        $(
            entries!(@one f32, $f32, [$(#[$doc])*], ($($arg : $ty),*), $body);
            entries!(@one f64, $f64, [$(#[$doc])*], ($($arg : $ty),*), $body);
        )*
    };
    (@one $t:ident, $sym:ident, [$($doc:tt)*], ($($arg:ident : $ty:ty),*), $body:path) => {
        #[doc(hidden)]
        pub mod $sym {
            #[allow(unused_imports)]
            use super::*;
            /// Element type of this instance.
            pub type T = $t;
            $($doc)*
            #[unsafe(no_mangle)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn $sym($($arg : $ty),*) {
                // SAFETY: the caller (host launch) upholds this entry's `# Safety`, which
                // is the body's contract.
                unsafe { $body($($arg),*) }
            }
        }
    };
}

// The sm_80 module: every kernel but the sm_90 ones (`cargo xtask build-ptx` builds the
// crate a second time with `--cfg cuqr_sm90` for `host/ptx/cuqr_kernels_sm90.ptx`).
#[cfg(not(cuqr_sm90))]
entries! {
    /// Robust Householder generation (docs/algorithms.md#householder-vectors;
    /// docs/kernels.md `householder_house`).
    ///
    /// # Safety
    /// Grid 1, block 256, dynamic shared memory ≥ 256·8 bytes; `alpha` and `tau` point at
    /// one writable element each, `x` at `n` read-writable elements; no overlap.
    householder_house_f32, householder_house_f64
        (alpha: *mut T, x: *mut T, n: usize, tau: *mut T) => householder::house;

    /// `*out = Σ x[i]·y[i]`, fused accumulation, block tree.
    ///
    /// # Safety
    /// Grid 1, block 256, dynamic shared memory ≥ 256·8 bytes; `x`, `y` readable for `n`;
    /// `out` writable.
    reduce_dot_f32, reduce_dot_f64
        (x: *const T, y: *const T, n: usize, out: *mut T) => reduce::dot;

    /// `*out = ‖x‖₂`, scaled two-pass (docs/algorithms.md#householder-vectors; 0 for n = 0).
    ///
    /// # Safety
    /// Grid 1, block 256, dynamic shared memory ≥ 256·8 bytes; `x` readable for `n`; `out`
    /// writable.
    reduce_nrm2_f32, reduce_nrm2_f64
        (x: *const T, n: usize, out: *mut T) => reduce::nrm2;

    /// One wavefront step of rotation generation (docs/algorithms.md#givens-rotations).
    ///
    /// # Safety
    /// Grid ⌈count/32⌉, block 32; row0 ≥ 1; rows row0 − 1 ..= row0 + 2(count − 1) of the
    /// row-major pitched `a` readable at columns col0 .. col0 + count; `c`, `s` writable
    /// for `count`, not overlapping `a`.
    givens_make_wavefront_f32, givens_make_wavefront_f64
        (a: *const T, pitch: usize, row0: usize, col0: usize, count: usize, c: *mut T, s: *mut T)
        => givens::make_wavefront;

    /// One wavefront step of rotation application (docs/algorithms.md#givens-rotations).
    ///
    /// # Safety
    /// Grid (⌈(col_end − col_begin)/128⌉, count), block 128; row0 ≥ 1; rows
    /// row0 − 1 ..= row0 + 2(count − 1) of the row-major pitched `a` read-writable at
    /// columns col_begin .. col_end (col_end ≤ pitch); `c`, `s` readable for `count`, not
    /// overlapping `a`.
    givens_apply_wavefront_f32, givens_apply_wavefront_f64
        (a: *mut T, pitch: usize, row0: usize, count: usize, col_begin: usize,
         col_step: usize, col_end: usize, c: *const T, s: *const T)
        => givens::apply_wavefront;

    /// Partial products of W = VᵀC over row chunks (tall-skinny trailing update;
    /// docs/kernels.md `ts_gemm_partial`).
    ///
    /// # Safety
    /// As `ts_gemm::partial`: grid (⌈rows/4096⌉, ⌈nc/64⌉), block 256, dynamic shared
    /// memory `ts_gemm::SMEM` elements; 1 ≤ k ≤ 32; `v` rows×k (ld ldv), `c` rows×nc (ld
    /// ldc) readable, 16-byte aligned with 16-byte multiples as leading dimensions;
    /// `part` writable for ⌈rows/4096⌉·32·nc elements.
    ts_gemm_partial_f32, ts_gemm_partial_f64
        (v: *const T, ldv: usize, c: *const T, ldc: usize, rows: usize, k: usize,
         nc: usize, part: *mut T)
        => ts_gemm::partial;

    /// W = Σ of `ts_gemm_partial`'s partials, in chunk order.
    ///
    /// # Safety
    /// As `ts_gemm::reduce`: grid ⌈32·nc/256⌉, block 256; `part` readable for
    /// chunks·32·nc elements; `w` writable k×nc (ld ldw ≥ k), no overlap.
    ts_gemm_reduce_f32, ts_gemm_reduce_f64
        (part: *const T, chunks: usize, k: usize, nc: usize, w: *mut T, ldw: usize)
        => ts_gemm::reduce;

    /// Partial products of W = AᵀB over row chunks for a narrow B (Q₁ᵀU of the thin
    /// updates; docs/kernels.md `ts_gemm_narrow_partial`).
    ///
    /// # Safety
    /// As `ts_gemm::narrow_partial`: grid (⌈ka/8⌉·⌈kb/4⌉, ⌈rows/16384⌉), block 256,
    /// dynamic shared memory ≥ 256 elements; `a` rows×ka (ld lda), `b` rows×kb (ld ldb)
    /// readable; `part` writable for ⌈rows/16384⌉·ka·kb elements.
    ts_gemm_narrow_partial_f32, ts_gemm_narrow_partial_f64
        (a: *const T, lda: usize, b: *const T, ldb: usize, rows: usize, ka: usize,
         kb: usize, part: *mut T)
        => ts_gemm::narrow_partial;

    /// `ts_gemm_narrow_partial` with tiles of 4 of A's columns by 8 of B's (B of 5 to 8
    /// columns in one pass over A).
    ///
    /// # Safety
    /// As `ts_gemm::narrow_partial_wide`: grid (⌈ka/4⌉·⌈kb/8⌉, ⌈rows/16384⌉), otherwise as
    /// `ts_gemm_narrow_partial`.
    ts_gemm_narrow_partial_wide_f32, ts_gemm_narrow_partial_wide_f64
        (a: *const T, lda: usize, b: *const T, ldb: usize, rows: usize, ka: usize,
         kb: usize, part: *mut T)
        => ts_gemm::narrow_partial_wide;

    /// W = Σ of `ts_gemm_narrow_partial`'s partials, in chunk order.
    ///
    /// # Safety
    /// As `ts_gemm::narrow_reduce`: grid ⌈ka·kb/256⌉, block 256; `part` readable for
    /// chunks·ka·kb elements; `w` writable ka×kb (ld ldw ≥ ka), no overlap.
    ts_gemm_narrow_reduce_f32, ts_gemm_narrow_reduce_f64
        (part: *const T, chunks: usize, ka: usize, kb: usize, w: *mut T, ldw: usize)
        => ts_gemm::narrow_reduce;

    /// Padded pitched transpose, 32×33 tile
    /// (docs/algorithms.md#padded-transpose-and-composite-layout).
    ///
    /// # Safety
    /// Grid (⌈rows/32⌉, ⌈cols/32⌉), block (32, 8), dynamic shared memory
    /// 32·33·size_of::<T>() bytes; `src` readable rows×cols (ld lds ≥ rows); `dst`
    /// writable cols×rows (ld ldd ≥ cols); no overlap.
    transpose_padded_f32, transpose_padded_f64
        (src: *const T, lds: usize, rows: usize, cols: usize, dst: *mut T, ldd: usize)
        => transpose::padded;

    /// `cm(i, j) += a(i, j) + b(i, j)` on an r×c tile (the composite layout's `doubleSum`,
    /// docs/algorithms.md#padded-transpose-and-composite-layout).
    ///
    /// # Safety
    /// Grid (⌈r/32⌉, ⌈c/32⌉), block (32, 8); `a`, `b` readable r×c (ld r); `cm`
    /// read-writable r×c (ld ldc ≥ r), not overlapping `a` or `b`.
    reduce_double_sum_f32, reduce_double_sum_f64
        (a: *const T, b: *const T, r: usize, c: usize, cm: *mut T, ldc: usize)
        => reduce::double_sum;

    /// Diagonal of the WY T factor: `t(i, i) = tau[i]` (docs/algorithms.md#blocked-reflectors).
    ///
    /// # Safety
    /// Grid ⌈k/128⌉, block 128; `tau` readable for k; `t` writable k×k (ld ldt ≥ k).
    wy_set_tau_f32, wy_set_tau_f64
        (tau: *const T, t: *mut T, k: usize, ldt: usize) => wy::set_tau;

    /// Full T factor, LAPACK `larft` forward/columnwise (docs/algorithms.md#blocked-reflectors).
    ///
    /// # Safety
    /// Grid 1, block 256, dynamic shared memory ≥ (256 + k)·8 bytes; `v` readable rows×k
    /// (ld ldv ≥ rows); `tau` readable for k; `t` writable k×k (ld ldt ≥ k); `t` does not
    /// overlap `v` or `tau`.
    wy_build_t_f32, wy_build_t_f64
        (v: *const T, ldv: usize, rows: usize, k: usize, tau: *const T, t: *mut T, ldt: usize)
        => wy::build_t;

    /// Strip wavefront generate on the driver block (docs/algorithms.md#column-insertion),
    /// one block.
    ///
    /// # Safety
    /// Grid 1; `x` read-writable (h+p)×p (ld ≥ h+p); `rot` writable for 2·p·h, `plane` for
    /// p·h; no overlap.
    two_phase_gen_strip_f32, two_phase_gen_strip_f64
        (x: *mut T, ld: usize, h: usize, p: usize, rot: *mut T, plane: *mut u32)
        => two_phase::gen_strip;

    /// Block wavefront generate on Z = Q(k0..k0+p, :) (docs/algorithms.md#row-deletion),
    /// one block.
    ///
    /// # Safety
    /// Grid 1; `qz` readable p×m (ld ldq); `z` writable p·m; `rot`/`plane` writable for
    /// pm − p(p+1)/2 rotations; no overlap; p < m.
    two_phase_gen_block_f32, two_phase_gen_block_f64
        (qz: *const T, ldq: usize, p: usize, m: usize, z: *mut T, rot: *mut T, plane: *mut u32)
        => two_phase::gen_block;

    /// Rank-one stage A on w (docs/algorithms.md#rank-one-update), one block.
    ///
    /// # Safety
    /// Grid 1, block a multiple of 32 (≤ 1024), 64 `T`s of dynamic shared memory; `w`
    /// read-writable for top+1; `rot`/`plane` writable for top.
    two_phase_gen_rank_one_a_f32, two_phase_gen_rank_one_a_f64
        (w: *mut T, top: usize, rot: *mut T, plane: *mut u32) => two_phase::gen_rank_one_a;

    /// Rank-one R(0,:) += w₀vᵀ and stage B on the Hessenberg R
    /// (docs/algorithms.md#rank-one-update), one block.
    ///
    /// # Safety
    /// Grid 1; `r` read-writable m×n (ld ldr); `w` readable 1, `v` n; `rot`/`plane`
    /// writable at k_off .. k_off + min(n, m−1); no overlap.
    two_phase_gen_rank_one_b_f32, two_phase_gen_rank_one_b_f64
        (r: *mut T, ldr: usize, m: usize, n: usize, w: *const T, v: *const T, rot: *mut T,
         plane: *mut u32, k_off: usize) => two_phase::gen_rank_one_b;

    /// Rank-one stage B pipelined, one barrier a step, one block.
    ///
    /// # Safety
    /// Grid 1, block nt with n ≤ nt·R1_PIPE_CPT, dyn smem 4·size_of::<T>(); `r`
    /// read-writable m×n (ld ldr); `w` readable 1, `v` n; `rot`/`plane` writable at
    /// k_off .. k_off + min(n, m−1); no overlap.
    two_phase_gen_rank_one_b_pipe_f32, two_phase_gen_rank_one_b_pipe_f64
        (r: *mut T, ldr: usize, m: usize, n: usize, w: *const T, v: *const T, rot: *mut T,
         plane: *mut u32, k_off: usize)
        => two_phase::gen_rank_one_b_pipe::<T, { two_phase::R1_PIPE_CPT }>;

    /// Rank-one stage B pipelined with two columns a thread (n ≤ 2·block).
    ///
    /// # Safety
    /// As `two_phase_gen_rank_one_b_pipe` with n ≤ 2·block.
    two_phase_gen_rank_one_b_pipe2_f32, two_phase_gen_rank_one_b_pipe2_f64
        (r: *mut T, ldr: usize, m: usize, n: usize, w: *const T, v: *const T, rot: *mut T,
         plane: *mut u32, k_off: usize)
        => two_phase::gen_rank_one_b_pipe::<T, { two_phase::R1_PIPE2_CPT }>;

    /// Strip wavefront generate, one barrier a step, driver in shared or global memory
    /// (docs/algorithms.md#column-insertion), one block.
    ///
    /// # Safety
    /// Grid 1; `x` read-writable (h+p)×p (ld ≥ h+p); `rot` writable for 2·p·h, `plane`
    /// for p·h; no overlap; dyn smem (4p + in_smem·(h+p)·p)·size_of::<T>().
    two_phase_gen_strip_pipe_f32, two_phase_gen_strip_pipe_f64
        (x: *mut T, ld: usize, h: usize, p: usize, rot: *mut T, plane: *mut u32,
         in_smem: usize) => two_phase::gen_strip_pipe;

    /// Block wavefront generate on Z = Q(k0..k0+p, :), one barrier a step, Z in shared
    /// or global memory (docs/algorithms.md#row-deletion), one block.
    ///
    /// # Safety
    /// Grid 1; `qz` readable p×m (ld ldq); `z` writable p·m; `rot`/`plane` writable for
    /// pm − p(p+1)/2 rotations; no overlap; p < m; dyn smem (4p + in_smem·p·m)·
    /// size_of::<T>().
    two_phase_gen_block_pipe_f32, two_phase_gen_block_pipe_f64
        (qz: *const T, ldq: usize, p: usize, m: usize, z: *mut T, rot: *mut T,
         plane: *mut u32, in_smem: usize) => two_phase::gen_block_pipe;

    /// Strip or block generate as chains of block scans, a block a chain at a time
    /// (column insertion's strip, row deletion's block); see `two_phase::gen_chains`.
    ///
    /// # Safety
    /// Cooperative launch of 1 ≤ G ≤ p blocks (block b makes chains b, b + G, …) of 32·w
    /// threads (w ≤ 8), dyn smem (CHAIN_SCRATCH + 32·w·chunk)·size_of::<T>() with
    /// 32·w·chunk > hi0 + inc·(p−1); `src`/`dst` cover every vector; `rot`/`plane` the p
    /// chains' rotations; `flags` p u32s, none equal to `set`.
    two_phase_gen_chains_f32, two_phase_gen_chains_f64
        (src: *const T, src_vs: usize, src_es: usize, dst: *mut T, dst_vs: usize,
         dst_es: usize, p: usize, hi0: usize, inc: usize, chunk: usize, rot: *mut T,
         plane: *mut u32, flags: *mut u32, set: u32) => two_phase::gen_chains;

    /// Streams a rank-one sweep list (planes down−1 … 0, then 0 … up−1) through up to
    /// three strided targets, loads a batch ahead (docs/algorithms.md#rank-one-update).
    ///
    /// # Safety
    /// Grid (⌈max n_g/128⌉, 3), block 128; see `two_phase::apply_sweep`.
    two_phase_apply_sweep_f32, two_phase_apply_sweep_f64
        (rot: *const T, down: usize, up: usize,
         x0: *mut T, rs0: usize, cs0: usize, n0: usize, b0: usize,
         x1: *mut T, rs1: usize, cs1: usize, n1: usize, b1: usize,
         x2: *mut T, rs2: usize, cs2: usize, n2: usize, b2: usize) => two_phase::apply_sweep;

    /// Streams a rotation list through up to three strided targets
    /// (docs/algorithms.md#givens-rotations).
    ///
    /// # Safety
    /// Grid (⌈max n_g/128⌉, 3), block 128; see `two_phase::apply`.
    two_phase_apply_f32, two_phase_apply_f64
        (rot: *const T, plane: *const u32, count: usize,
         x0: *mut T, rs0: usize, cs0: usize, n0: usize, b0: usize,
         x1: *mut T, rs1: usize, cs1: usize, n1: usize, b1: usize,
         x2: *mut T, rs2: usize, cs2: usize, n2: usize, b2: usize) => two_phase::apply;

    /// Streams a strip/block-schedule rotation list through up to three strided targets in
    /// wavefront step order (unrolled independent loads).
    ///
    /// # Safety
    /// Grid (⌈max n_g/128⌉, 3), block 128; see `two_phase::apply_sched`.
    two_phase_apply_sched_f32, two_phase_apply_sched_f64
        (rot: *const T, sched: usize, s0: usize, s1: usize,
         x0: *mut T, rs0: usize, cs0: usize, n0: usize, b0: usize,
         x1: *mut T, rs1: usize, cs1: usize, n1: usize, b1: usize,
         x2: *mut T, rs2: usize, cs2: usize, n2: usize, b2: usize) => two_phase::apply_sched;

    /// Streams a strip/block-schedule rotation list through up to three strided targets,
    /// block-pipelined register windows (one pass per warps·8 chains).
    ///
    /// # Safety
    /// Grid (⌈max n_g/32⌉, 3), block 32·nw (nw ≤ 16), dyn smem
    /// (2·nw·32 + nw·two_phase::PIPE_RING_ELEMS)·size_of::<T>();
    /// see `two_phase::apply_pipe`.
    two_phase_apply_pipe_f32, two_phase_apply_pipe_f64
        (rot: *const T, sched: usize, s0: usize, s1: usize,
         x0: *mut T, rs0: usize, cs0: usize, n0: usize, b0: usize,
         x1: *mut T, rs1: usize, cs1: usize, n1: usize, b1: usize,
         x2: *mut T, rs2: usize, cs2: usize, n2: usize, b2: usize) => two_phase::apply_pipe;

    /// Applies one Householder reflector to up to two strided targets (the rank-one
    /// update's Householder variant, docs/algorithms.md#rank-one-update).
    ///
    /// # Safety
    /// Grid (⌈max n_g/128⌉, 2), block 128; see `two_phase::house_apply`.
    two_phase_house_apply_f32, two_phase_house_apply_f64
        (vt: *const T, len: usize, tau: *const T,
         x0: *mut T, rs0: usize, cs0: usize, n0: usize,
         x1: *mut T, rs1: usize, cs1: usize, n1: usize) => two_phase::house_apply;

    /// Every window of a chain list as a stack of strip lists, and the identities they
    /// act on (for the host's windows of rotations applied by GEMM); see
    /// `two_phase::window_gather`.
    ///
    /// # Safety
    /// Grid (gx, windows), gx·block ≥ p·hw ≥ 1 threads; `src_rot` every chain's rotations;
    /// `dst_rot` 2·p·hw·windows and `z` (hw+p)²·windows elements (zeroed), no overlap.
    two_phase_window_gather_f32, two_phase_window_gather_f64
        (src_rot: *const T, dst_rot: *mut T, z: *mut T, p: usize, hw: usize,
         hi0: usize, inc: usize, l0: isize) => two_phase::window_gather;

    /// Every window's strip list applied to its identity block in one launch; see
    /// `two_phase::window_pipe`.
    ///
    /// # Safety
    /// Grid (⌈w/32⌉, windows), block 32·nw (nw ≤ 8), dynamic shared memory
    /// (2·nw·32 + nw·two_phase::PIPE_RING_ELEMS)·size_of::<T>(); `rot` windows·p·hw pairs,
    /// `z` windows·(hw+p)² elements.
    two_phase_window_pipe_f32, two_phase_window_pipe_f64
        (rot: *const T, hw: usize, p: usize, z: *mut T) => two_phase::window_pipe;

    /// Gathers a block, dropping a row range, optionally zeroing below the diagonal.
    ///
    /// # Safety
    /// Grid (⌈rows/32⌉, ⌈cols/8⌉), block (32, 8); see `two_phase::copy`.
    two_phase_copy_f32, two_phase_copy_f64
        (src: *const T, lds: usize, rows: usize, cols: usize, dst: *mut T, ldd: usize,
         skip0: usize, skip_p: usize, zero_lower: usize) => two_phase::copy;

    panel_apply_f32, panel_apply_f64
        (v: *const T, tau: *const T, head: *mut T, ldh: usize, tail: *mut T, ldt: usize,
         len: usize, ncols: usize) => panel::apply;

    panel_extract_v_f32, panel_extract_v_f64
        (a: *mut T, lda: usize, rows: usize, k: usize, v: *mut T, ldv: usize, ystride: usize)
        => panel::extract_v;

    panel_zero_lower_f32, panel_zero_lower_f64
        (a: *mut T, lda: usize, rows: usize, cols: usize, ystride: usize) => panel::zero_lower;

    /// The first non-finite row of each column (update data on the device); see
    /// `panel::first_non_finite`.
    ///
    /// # Safety
    /// Grid (cols·⌈rows/chunk⌉, 1), block a multiple of 32, dynamic shared memory ≥ 32
    /// f64; `a` rows × cols readable (ld lda); `out` cols·⌈rows/chunk⌉ `u32`s writable;
    /// 1 ≤ chunk, rows < 2³².
    panel_first_non_finite_f32, panel_first_non_finite_f64
        (a: *const T, lda: usize, rows: usize, cols: usize, chunk: usize, out: *mut u32)
        => panel::first_non_finite;

    panel_set_identity_f32, panel_set_identity_f64
        (a: *mut T, lda: usize, rows: usize, cols: usize, ystride: usize)
        => panel::set_identity;

    panel_copy_f32, panel_copy_f64
        (src: *const T, lds: usize, rows: usize, cols: usize, dst: *mut T, ldd: usize,
         ystride: usize) => panel::copy;

    panel_embed_q_f32, panel_embed_q_f64
        (q: *const T, ldq: usize, m: usize, p: usize, k0: usize, dst: *mut T, ldd: usize,
         ystride: usize) => panel::embed_q;

    panel_col_norms_f32, panel_col_norms_f64
        (a: *const T, lda: usize, rows: usize, cols: usize, out: *mut T) => panel::col_norms;

    /// One-launch Householder panel (docs/algorithms.md#blocked-householder-qr;
    /// fused_panel.rs).
    ///
    /// # Safety
    /// Cooperative launch, grid ⌈rows/rpb⌉, block 512, dynamic shared memory and
    /// scratch as `fused_panel::qr` documents.
    fused_panel_qr_f32, fused_panel_qr_f64
        (a: *mut T, lda: usize, rows: usize, jb: usize, band: usize, v: *mut T, ldv: usize,
         tau: *mut T, t: *mut T, ldt: usize, partials: *mut T, head: *mut T,
         counter: *mut u32, bar_base: u32, rpb: usize, in_shared: u32) => fused_panel::qr;

    /// One-block Householder panel for panels whose rows fit shared memory
    /// (small_panel.rs).
    ///
    /// # Safety
    /// Grid 1, block a multiple of 32 (≤ 1024), dynamic shared memory as
    /// `small_panel::qr` documents.
    small_panel_qr_f32, small_panel_qr_f64
        (a: *mut T, lda: usize, rows: usize, jb: usize, band: usize, v: *mut T, ldv: usize,
         tau: *mut T, t: *mut T, ldt: usize) => small_panel::qr;

    /// LU column step: pivot search, swap in the base panel, u_jj
    /// (docs/algorithms.md#lu-factorisation; lu/step.rs).
    ///
    /// # Safety
    /// Grid 1, block a multiple of 32 (≤ 1024), dynamic shared memory 32·12 + 4 bytes;
    /// see `lu::pivot`.
    lu_pivot_f32, lu_pivot_f64
        (a: *mut T, lda: usize, m: usize, j: usize, c0: usize, cend: usize,
         ipiv: *mut u32, diag: *mut T) => lu::pivot;

    /// LU column step: scaling and fused rank-1 update of the base panel.
    ///
    /// # Safety
    /// Grid ⌈(m − j − 1)/block⌉; see `lu::update`.
    lu_update_f32, lu_update_f64
        (a: *mut T, lda: usize, m: usize, j: usize, cend: usize) => lu::update;

    /// LU base panel c0..c0+w (w ≤ 64) by one block, all column steps fused.
    ///
    /// # Safety
    /// Grid 1, block a multiple of 32 (≤ 1024), dynamic shared memory 96·8 + 33·4 bytes;
    /// see `lu::panel_fused`.
    lu_panel_fused_f32, lu_panel_fused_f64
        (a: *mut T, lda: usize, m: usize, c0: usize, w: usize, ipiv: *mut u32, diag: *mut T)
        => lu::panel_fused;

    /// LU panel c0..c0+w by a cooperative grid, one grid barrier per column.
    ///
    /// # Safety
    /// Cooperative launch, all blocks co-resident; shared memory and partials as
    /// `lu::panel_coop` documents.
    lu_panel_coop_f32, lu_panel_coop_f64
        (a: *mut T, lda: usize, m: usize, c0: usize, w: usize, ipiv: *mut u32, diag: *mut T,
         slab: usize, in_smem: u32, pval: *mut T, pidx: *mut u32, prow: *mut T,
         counter: *mut u32, cbase: u32) => lu::panel_coop;

    /// Row interchanges ipiv[k1..k2) (at most 128) on 16-column tiles as one gather.
    ///
    /// # Safety
    /// Grid ⌈(col1 − col0)/16⌉, shared memory as `lu::laswp_tile` documents.
    lu_laswp_tile_f32, lu_laswp_tile_f64
        (a: *mut T, lda: usize, col0: usize, col1: usize, skip0: usize, skip1: usize,
         ipiv: *const u32, k1: usize, k2: usize) => lu::laswp_tile;

    /// Row interchanges ipiv[k1..k2) on columns col0..col1 minus skip0..skip1 (laswp).
    ///
    /// # Safety
    /// Grid ⌈(col1 − col0)/block⌉; see `lu::laswp`.
    lu_laswp_f32, lu_laswp_f64
        (a: *mut T, lda: usize, col0: usize, col1: usize, skip0: usize, skip1: usize,
         ipiv: *const u32, k1: usize, k2: usize) => lu::laswp;

    /// dst := f32(scale·src), elementwise, rounded to nearest
    /// (docs/algorithms.md#mixed-precision).
    ///
    /// # Safety
    /// Grid (⌈rows/128⌉, min(cols, 65535)), block 128, `ystride` = grid y; see
    /// `convert::to_f32`.
    convert_to_f32_f32, convert_to_f32_f64
        (src: *const T, lds: usize, rows: usize, cols: usize, scale: T, dst: *mut f32,
         ldd: usize, ystride: usize) => convert::to_f32;

    /// dst := scale·T(src), elementwise (docs/algorithms.md#mixed-precision).
    ///
    /// # Safety
    /// Grid (⌈rows/128⌉, min(cols, 65535)), block 128, `ystride` = grid y; see
    /// `convert::from_f32`.
    convert_from_f32_f32, convert_from_f32_f64
        (src: *const f32, lds: usize, rows: usize, cols: usize, scale: T, dst: *mut T,
         ldd: usize, ystride: usize) => convert::from_f32;

    /// dst := bf16/f16 bits of f32(src) (format 0/1), round to nearest even.
    ///
    /// # Safety
    /// Grid (⌈rows/128⌉, min(cols, 65535)), block 128, `ystride` = grid y; see
    /// `convert::to_half`.
    convert_to_half_f32, convert_to_half_f64
        (src: *const T, lds: usize, rows: usize, cols: usize, dst: *mut u16, ldd: usize,
         format: u32, ystride: usize) => convert::to_half;

    /// Row insertion without Q in one cooperative launch (docs/algorithms.md#row-insertion;
    /// row_insert.rs).
    ///
    /// # Safety
    /// As `row_insert::qr` documents (grid, block, shared memory, counter).
    row_insert_qr_f32, row_insert_qr_f64
        (r: *mut T, ldr: usize, d: *mut T, ldd: usize, u: *mut T, ldu: usize, e: *mut T,
         lde: usize, n: usize, q: usize, p: usize, tau: *mut T, counter: *mut u32,
         base: u32, cpb: usize, ring: usize) => row_insert::qr;

    /// Column deletion's banded re-triangularisation without Q in one cooperative launch
    /// (docs/algorithms.md#column-deletion; row_insert.rs).
    ///
    /// # Safety
    /// As `row_insert::band_qr` documents (grid, block, shared memory, counter).
    row_insert_band_qr_f32, row_insert_band_qr_f64
        (b: *mut T, ldb: usize, d: *mut T, ldd: usize, v: *mut T, ldv: usize, n: usize,
         q: usize, p: usize, tau: *mut T, counter: *mut u32, base: u32, cpb: usize,
         ring: usize) => row_insert::band_qr;

    /// The QRs of stacked pairs of triangles, one block a pair: a tree combine's level
    /// (docs/scaling.md#the-tree-combine; row_insert.rs).
    ///
    /// # Safety
    /// As `row_insert::pairs` documents (grid, block, shared memory, pointer arrays).
    row_insert_pairs_f32, row_insert_pairs_f64
        (packs: *const *mut T, partners: *const *mut T, ld: usize, n: usize, q: usize,
         norms: *mut T) => row_insert::pairs;

    /// TSQR leaf QRs of one tree level (docs/algorithms.md#tsqr; tsqr/leaf_qr.rs).
    ///
    /// # Safety
    /// As `tsqr::leaf_qr` documents (grid, block 256, shared memory, aux).
    tsqr_leaf_qr_f32, tsqr_leaf_qr_f64
        (a: *mut T, lda: usize, rows: usize, n: usize, kpw: usize, aux: *mut T, r_out: *mut T,
         ldr: usize) => tsqr::leaf_qr;

    /// TSQR explicit Q of one tree level; at level 0 also the reconstruction's V₂ (from
    /// C·M) and R written into the panel (tsqr/leaf_apply.rs).
    ///
    /// # Safety
    /// As `tsqr::leaf_apply` documents (grid, block 256, shared memory).
    tsqr_leaf_apply_f32, tsqr_leaf_apply_f64
        (v: *mut T, ldv: usize, rows: usize, n: usize, kpw: usize, aux: *const T,
         c_in: *const T, ldc: usize, out: *mut T, ldo: usize, skip_top: u32,
         top_only: u32, rh: *const T) => tsqr::leaf_apply;

    /// TSQR Householder reconstruction: V₁, T, τ, M = U⁻¹ and R (tsqr/reconstruct.rs).
    ///
    /// # Safety
    /// As `tsqr::reconstruct` documents (grid 1, block 1024, shared memory).
    tsqr_reconstruct_f32, tsqr_reconstruct_f64
        (y: *mut T, ldy: usize, rows: usize, n: usize, r_top: *const T, ldr: usize, t: *mut T,
         ldt: usize, tau: *mut T, m: *mut T, rh: *mut T) => tsqr::reconstruct;

    /// Rolling least squares, one thread per series and time segment, with k = 1 columns in registers
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_k1_f32, rolling_walk_k1_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 1>;

    /// Rolling least squares, one thread per series and time segment, with k = 2 columns in registers
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_k2_f32, rolling_walk_k2_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 2>;

    /// Rolling least squares, one thread per series and time segment, with k = 3 columns in registers
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_k3_f32, rolling_walk_k3_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 3>;

    /// Rolling least squares, one thread per series and time segment, with k = 4 columns in registers
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_k4_f32, rolling_walk_k4_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 4>;

    /// Rolling least squares, one thread per series and time segment, with k = 5 columns in registers
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_k5_f32, rolling_walk_k5_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 5>;

    /// Rolling least squares, one thread per series and time segment, with k = 6 columns in registers
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_k6_f32, rolling_walk_k6_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 6>;

    /// Rolling least squares, one thread per series and time segment, with k = 7 columns in registers
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_k7_f32, rolling_walk_k7_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 7>;

    /// Rolling least squares, one thread per series and time segment, with k = 8 columns in registers
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_k8_f32, rolling_walk_k8_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 8>;

    /// Rolling least squares, one thread per series and time segment, with 9 ≤ k ≤ 16 columns (arrays of 16, in local memory)
    /// (docs/algorithms.md#rolling-least-squares; rolling.rs).
    ///
    /// # Safety
    /// As `rolling::walk` documents (grid, block 128, buffers).
    rolling_walk_general_f32, rolling_walk_general_f64
        (y: *const T, x: *const T, nobs: usize, series: usize, k: usize, seg_len: usize,
         ld_y: usize, ld_x: usize, ld_p: usize, ld_r: usize, window: usize, min_nobs: usize, refresh: usize, bits: u32, forget: f64,
         leave_weight: f64, rank_tol: f64, params: *mut T, rss: *mut T, flags: *mut u8,
         counts: *mut u32) => rolling::walk_entry::<T, 16>;

    /// One step of B batched R-only states, one problem a thread, n = 1
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_k1_f32, batch_r_step_k1_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 1>;

    /// One step of B batched R-only states, one problem a thread, n = 2
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_k2_f32, batch_r_step_k2_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 2>;

    /// One step of B batched R-only states, one problem a thread, n = 3
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_k3_f32, batch_r_step_k3_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 3>;

    /// One step of B batched R-only states, one problem a thread, n = 4
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_k4_f32, batch_r_step_k4_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 4>;

    /// One step of B batched R-only states, one problem a thread, n = 5
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_k5_f32, batch_r_step_k5_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 5>;

    /// One step of B batched R-only states, one problem a thread, n = 6
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_k6_f32, batch_r_step_k6_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 6>;

    /// One step of B batched R-only states, one problem a thread, n = 7
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_k7_f32, batch_r_step_k7_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 7>;

    /// One step of B batched R-only states, one problem a thread, n = 8
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_k8_f32, batch_r_step_k8_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 8>;

    /// One step of B batched R-only states, one problem a thread, 9 ≤ n ≤ 16
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::step` documents (grid, block 128, buffers).
    batch_r_step_general_f32, batch_r_step_general_f64
        (r_in: *const T, d_in: *const T, rho_in: *const T, r_out: *mut T, d_out: *mut T,
         rho_out: *mut T, rows_in: *const T, rhs_in: *const T, rows_out: *const T,
         rhs_out: *const T, batch: usize, n: usize, p_in: usize, p_out: usize, bits: u32,
         scale: f64, rank_tol: f64, m_rows: usize, x: *mut T, rss: *mut T, status: *mut u32)
        => batch_r::step::<T, 16>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, n = 1
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_k1_f32, batch_r_refold_k1_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 1>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, n = 2
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_k2_f32, batch_r_refold_k2_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 2>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, n = 3
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_k3_f32, batch_r_refold_k3_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 3>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, n = 4
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_k4_f32, batch_r_refold_k4_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 4>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, n = 5
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_k5_f32, batch_r_refold_k5_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 5>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, n = 6
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_k6_f32, batch_r_refold_k6_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 6>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, n = 7
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_k7_f32, batch_r_refold_k7_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 7>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, n = 8
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_k8_f32, batch_r_refold_k8_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 8>;

    /// B batched R-only problems folded afresh from their rows by teams of threads, 9 ≤ n ≤ 16
    /// (docs/algorithms.md#batched-states; batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::refold` documents (grid, block 128, buffers).
    batch_r_refold_general_f32, batch_r_refold_general_f64
        (rows: *const T, rhs: *const T, batch: usize, n: usize, m: usize, team_log2: u32,
         bits: u32, rank_tol: f64, r_out: *mut T, d_out: *mut T, rho_out: *mut T, x: *mut T,
         rss: *mut T, status: *mut u32)
        => batch_r::refold::<T, 16>;

    /// The kept rows of B R-only problems rebuilt: rows and columns gathered from the old
    /// block or an extra one, a scale and a rank-k term (docs/algorithms.md#batched-states;
    /// batch_r.rs).
    ///
    /// # Safety
    /// As `batch_r::gather` documents (grid, block 128, buffers).
    batch_r_gather_f32, batch_r_gather_f64
        (old: *const T, m_old: usize, n_old: usize, out: *mut T, m_out: usize, n_out: usize,
         batch: usize, maps: *const i32, extra: *const T, extra_ld: usize, extra_row: usize,
         extra_col: usize, scale: f64, u: *const T, v: *const T, kk: usize, mask: *const u32,
         masked: u32)
        => batch_r::gather::<T>;

    /// Factorises B thin-Q problems, a team of lanes a problem (docs/algorithms.md#batched-states;
    /// batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::factor` documents (grid, block 32, shared memory, buffers).
    batch_q_factor_f32, batch_q_factor_f64
        (a: *const T, b: *const T, q: *mut T, r: *mut T, b_out: *mut T, status: *mut u32,
         batch: usize, m: usize, n: usize, team: usize) => batch_q::factor;

    /// Thin rank-k update (k rank-one updates) of B problems in place, a team of lanes a
    /// problem (docs/algorithms.md#batched-states; batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::rank_one` documents.
    batch_q_rank_one_f32, batch_q_rank_one_f64
        (q: *mut T, r: *mut T, u: *const T, v: *const T, status: *mut u32, export: *mut T,
         batch: usize, m: usize, n: usize, kk: usize, team: usize) => batch_q::rank_one;

    /// Thin column deletion in B problems, a team of lanes a problem
    /// (docs/algorithms.md#batched-states; batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::delete_cols` documents.
    batch_q_delete_cols_f32, batch_q_delete_cols_f64
        (q_in: *const T, r_in: *const T, q_out: *mut T, r_out: *mut T, status: *mut u32,
         export: *mut T, batch: usize, m: usize, n: usize, k0: usize, p: usize, team: usize)
        => batch_q::delete_cols;

    /// Drift check and refresh of B thin-Q problems in place, a team of lanes a problem
    /// (docs/algorithms.md#drift-control; batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::refresh` documents.
    batch_q_refresh_f32, batch_q_refresh_f64
        (q: *mut T, r: *mut T, drift: *mut T, status: *mut u32, extra2: *const T,
         batch: usize, m: usize, n: usize, tol: T, team: usize) => batch_q::refresh;

    /// A column of B thin-Q problems moved to another position, a team of lanes a problem
    /// (docs/algorithms.md#batched-states; batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::shift_col` documents.
    batch_q_shift_col_f32, batch_q_shift_col_f64
        (q_in: *const T, r_in: *const T, q_out: *mut T, r_out: *mut T, status: *mut u32,
         batch: usize, m: usize, n: usize, from: usize, to: usize, team: usize)
        => batch_q::shift_col;

    /// Thin column insertion in B problems, a team of lanes a problem
    /// (docs/algorithms.md#batched-states; batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::insert_cols` documents.
    batch_q_insert_cols_f32, batch_q_insert_cols_f64
        (q_in: *const T, r_in: *const T, u: *const T, q_out: *mut T, r_out: *mut T,
         status: *mut u32, export: *mut T, batch: usize, m: usize, n: usize, k0: usize,
         p: usize, team: usize) => batch_q::insert_cols;

    /// Thin row insertion in B problems, a team of lanes a problem
    /// (docs/algorithms.md#batched-states; batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::insert_rows` documents.
    batch_q_insert_rows_f32, batch_q_insert_rows_f64
        (q_in: *const T, r_in: *const T, b_in: *const T, rows: *const T, rhs: *const T,
         q_out: *mut T, r_out: *mut T, b_out: *mut T, status: *mut u32, export: *mut T,
         batch: usize, m: usize, n: usize, k0: usize, p: usize, scale: T, team: usize)
        => batch_q::insert_rows;

    /// Thin row deletion in B problems, a team of lanes a problem
    /// (docs/algorithms.md#batched-states; batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::delete_rows` documents.
    batch_q_delete_rows_f32, batch_q_delete_rows_f64
        (q_in: *const T, r_in: *const T, b_in: *const T, q_out: *mut T, r_out: *mut T,
         b_out: *mut T, q_fb: *const T, r_fb: *const T, b_fb: *const T, status: *mut u32,
         batch: usize, m: usize, n: usize, k0: usize, p: usize, team: usize) => batch_q::delete_rows;

    /// The complement Q₂ of B full-Q problems built from Q₁ (a factorisation or a refresh), one warp a problem
    /// (docs/algorithms.md#batched-full-q-states; batch_q/complement.rs).
    ///
    /// # Safety
    /// As `batch_q::complement` documents.
    batch_q_complement_build_f32, batch_q_complement_build_f64
        (op: u32, q1: *const T, q2_in: *const T, q2_out: *mut T, extra: *const T,
         fallback: *const T, status: *const u32, want: u32, e2: *mut T, batch: usize,
         m: usize, n: usize, c: usize, k0: usize, p: usize)
        => batch_q::complement::build_entry;

    /// The complement Q₂ of B full-Q problems carried over a rank-k update, one warp a problem
    /// (docs/algorithms.md#batched-full-q-states; batch_q/complement.rs).
    ///
    /// # Safety
    /// As `batch_q::complement` documents.
    batch_q_complement_replace_f32, batch_q_complement_replace_f64
        (op: u32, q1: *const T, q2_in: *const T, q2_out: *mut T, extra: *const T,
         fallback: *const T, status: *const u32, want: u32, e2: *mut T, batch: usize,
         m: usize, n: usize, c: usize, k0: usize, p: usize)
        => batch_q::complement::replace_entry;

    /// The complement Q₂ of B full-Q problems with rows or columns added, one warp a problem
    /// (docs/algorithms.md#batched-full-q-states; batch_q/complement.rs).
    ///
    /// # Safety
    /// As `batch_q::complement` documents.
    batch_q_complement_add_f32, batch_q_complement_add_f64
        (op: u32, q1: *const T, q2_in: *const T, q2_out: *mut T, extra: *const T,
         fallback: *const T, status: *const u32, want: u32, e2: *mut T, batch: usize,
         m: usize, n: usize, c: usize, k0: usize, p: usize)
        => batch_q::complement::add_entry;

    /// The complement Q₂ of B full-Q problems with rows or directions dropped, one warp a problem
    /// (docs/algorithms.md#batched-full-q-states; batch_q/complement.rs).
    ///
    /// # Safety
    /// As `batch_q::complement` documents.
    batch_q_complement_drop_f32, batch_q_complement_drop_f64
        (op: u32, q1: *const T, q2_in: *const T, q2_out: *mut T, extra: *const T,
         fallback: *const T, status: *const u32, want: u32, e2: *mut T, batch: usize,
         m: usize, n: usize, c: usize, k0: usize, p: usize)
        => batch_q::complement::drop_entry;

    /// The complement Q₂ of B full-Q problems measured for the drift check, one warp a problem
    /// (docs/algorithms.md#batched-full-q-states; batch_q/complement.rs).
    ///
    /// # Safety
    /// As `batch_q::complement` documents.
    batch_q_complement_measure_f32, batch_q_complement_measure_f64
        (op: u32, q1: *const T, q2_in: *const T, q2_out: *mut T, extra: *const T,
         fallback: *const T, status: *const u32, want: u32, e2: *mut T, batch: usize,
         m: usize, n: usize, c: usize, k0: usize, p: usize)
        => batch_q::complement::measure_entry;

    /// Least-squares solve of B thin-Q problems, a team of lanes a problem
    /// (docs/algorithms.md#batched-states; batch_q.rs).
    ///
    /// # Safety
    /// As `batch_q::solve` documents.
    batch_q_solve_f32, batch_q_solve_f64
        (q: *const T, r: *const T, b: *const T, x: *mut T, rss: *mut T, status: *mut u32,
         batch: usize, m: usize, n: usize, rank_tol: f64, team: usize) => batch_q::solve;

    /// One step of a small R-only state by one warp: a row in, in a window the oldest kept
    /// row out, then the solution (docs/algorithms.md#small-states; small_window.rs).
    ///
    /// # Safety
    /// As `small_window::step` documents (grid 1, block 32, shared memory, buffers).
    small_window_step_f32, small_window_step_f64
        (state: *mut T, ring: *mut T, meta: *mut u32, row: small_window::RowArg<T>,
         src_x: *const T, inc_x: usize, src_y: *const T, x_out: *mut T, rss_out: *mut T,
         n: usize, m: usize, flags: u32, scale: T, rank_tol: T) => small_window::step;

    /// Factorises a small state's kept rows afresh by one warp
    /// (docs/algorithms.md#small-states; small_window.rs).
    ///
    /// # Safety
    /// As `small_window::refold` documents (grid 1, block 32, shared memory, buffers).
    small_window_refold_f32, small_window_refold_f64
        (state: *mut T, ring: *const T, meta: *const u32, n: usize, m: usize)
        => small_window::refold;
}

/// Stamps one kernel for the four element types of explicit-factor updates: `<name>_f32`,
/// `_f64`, `_c32`, `_c64`, each in a small module where `T` is the element and `R` its real
/// type (complex elements as [`rotation_chain::Complex`]).
#[cfg(not(cuqr_sm90))]
macro_rules! field_entries {
    ($(#[$doc:meta])* [$f32:ident, $f64:ident, $c32:ident, $c64:ident]
        ( $($arg:ident : $ty:ty),* $(,)? ) => $body:path ;) => {
        field_entries!(@one f32, f32, $f32, [$(#[$doc])*], ($($arg : $ty),*), $body);
        field_entries!(@one f64, f64, $f64, [$(#[$doc])*], ($($arg : $ty),*), $body);
        field_entries!(@one rotation_chain::Complex<f32>, f32, $c32, [$(#[$doc])*],
            ($($arg : $ty),*), $body);
        field_entries!(@one rotation_chain::Complex<f64>, f64, $c64, [$(#[$doc])*],
            ($($arg : $ty),*), $body);
    };
    (@one $t:ty, $r:ident, $sym:ident, [$($doc:tt)*], ($($arg:ident : $ty:ty),*), $body:path) => {
        #[doc(hidden)]
        pub mod $sym {
            #[allow(unused_imports)]
            use super::*;
            /// Element type of this instance.
            pub type T = $t;
            /// Its real type.
            pub type R = $r;
            $($doc)*
            #[unsafe(no_mangle)]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "ptx-kernel" fn $sym($($arg : $ty),*) {
                // SAFETY: the caller (host launch) upholds this entry's `# Safety`, which
                // is the body's contract.
                unsafe { $body($($arg),*) }
            }
        }
    };
}

#[cfg(not(cuqr_sm90))]
field_entries! {
    /// A rotation sequence applied to Q's columns, one thread per row
    /// (docs/algorithms.md#rotation-chains-on-the-gpu).
    ///
    /// # Safety
    /// As `rotation_chain::apply` documents.
    [rotation_chain_apply_f32, rotation_chain_apply_f64, rotation_chain_apply_c32,
     rotation_chain_apply_c64]
        (q: *mut T, ldq: usize, rows: usize, ops: *const u32, c: *const R, s: *const T,
         segs: *const u32, nseg: usize) => rotation_chain::apply;
}

// The sm_90 module (`host/ptx/cuqr_kernels_sm90.ptx`): kernels that need Hopper
// instructions (thread-block clusters, distributed shared memory).
#[cfg(cuqr_sm90)]
entries! {
    /// The LU panel on one thread-block cluster (docs/algorithms.md#lu-factorisation).
    ///
    /// # Safety
    /// Grid = one cluster; shared memory as `lu_cluster::panel_cluster` documents.
    lu_cluster_panel_f32, lu_cluster_panel_f64
        (a: *mut T, lda: usize, m: usize, c0: usize, w: usize, ipiv: *mut u32, diag: *mut T,
         slab: usize) => lu_cluster::panel_cluster;
}
