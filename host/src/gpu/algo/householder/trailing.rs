//! The trailing update of the blocked QR: larfb (C := (I − V op(T) Vᵀ) C in three GEMMs, or
//! W = VᵀC by the tall-skinny GEMM where that pays), the merged trailing reflectors of runs of
//! panels and the block reflector merged from consecutive blocks (docs/algorithms.md#blocked-reflectors).

#[allow(unused_imports)]
use super::*;

/// Widest merged block reflector of the trailing update in [`blocked_qr_with`]: the
/// panels of a run of this many columns update only the run's own columns, and the
/// columns after the run get the run's merged reflector at once.
pub(crate) const TRAILING_MERGE_WIDTH: usize = 256;

/// Whether [`blocked_qr_band`] merges the trailing update of runs of panels for a
/// factorisation of `ncols` columns in `T`: in f64 from 8192 columns on. Measured on
/// an H100 (docs/performance.md):
/// f64 `geqrf`/cuqr 8192² 1.15 → 1.25×, 16384² 1.06 → 1.50×, 16384×8192 1.60 → 1.82×,
/// but 4096² 1.00 → 0.98×, and f32 slower at every size (its GEMMs with one panel's
/// inner dimension already run near the merged rate, so the merges cost more than
/// they save).
pub(crate) fn merges_trailing<T: GpuScalar>(ncols: usize) -> bool {
    core::mem::size_of::<T>() == 8 && ncols >= 8192
}

/// C[row0 .. row0+ℓ, cols] := (I − V op(T) Vᵀ) C with op(T) = Tᵀ when `trans`
/// (the Qᵀ side, H_k⋯H_1) or T (H_1⋯H_k, backward accumulation): three GEMMs
/// (docs/algorithms.md#blocked-reflectors, LAPACK larfb pattern). `w`, `w2` hold ≥ jb × |cols|.
#[allow(clippy::too_many_arguments)]
pub(crate) fn larfb_left<T: GpuScalar>(
    gpu: &Gpu,
    v: &crate::gpu::runtime::DevMatView<'_, T>,
    t: &crate::gpu::runtime::DevMatView<'_, T>,
    trans: bool,
    c: &mut DevMat<T>,
    row0: usize,
    cols: Range<usize>,
    w: &mut DevMat<T>,
    w2: &mut DevMat<T>,
) -> Result<()> {
    let (l, jb, nc) = (v.nrows(), v.ncols(), cols.len());
    if nc == 0 || jb == 0 {
        return Ok(());
    }
    let mut w = w.block_mut(0, 0, jb, nc);
    let cb = c.block(row0, cols.start, l, nc);
    // (Not under a lower GEMM precision: that asks for cuBLAS's tensor-core products.)
    if ts_gemm_pays::<T>(l, nc)
        && gpu.gemm_precision() == crate::base::precision::GemmPrecision::F32
        && gpu.ts_gemm_fits(v, &cb)
    {
        gpu.ts_gemm_tn(v, &cb, &mut w)?;
    } else {
        gpu.gemm(Op::T, Op::N, T::ONE, v, &cb, T::ZERO, &mut w)?;
    }
    let mut w2 = w2.block_mut(0, 0, jb, nc);
    let op = if trans { Op::T } else { Op::N };
    gpu.gemm(op, Op::N, T::ONE, t, &w.as_view(), T::ZERO, &mut w2)?;
    gpu.gemm(
        Op::N,
        Op::N,
        -T::ONE,
        v,
        &w2.as_view(),
        T::ONE,
        &mut c.block_mut(row0, cols.start, l, nc),
    )
}

/// Fewest blocks (4096-row chunks × 64-column tiles of C) for which `larfb_left` takes
/// W = VᵀC from [`Gpu::ts_gemm_tn`] instead of cuBLAS: one an SM of an H100, so that
/// the chunked product fills the GPU.
const TS_GEMM_MIN_BLOCKS: usize = 132;

/// Widest C for which `larfb_left` takes [`Gpu::ts_gemm_tn`]: the trailing columns of a
/// tall-skinny factorisation with few columns. Measured on the H100 (f32): 1048576×128
/// (C of 96, 64, 32 columns) 6.62–6.65 → 6.54 ms; 262144×512 with it for C up to 480
/// columns 17.31–17.42 → 18.47–18.51 ms (each 64 columns read V again, and the FMA rate,
/// not the bandwidth, bounds the kernel there).
const TS_GEMM_MAX_NC: usize = 128;

/// Whether W = VᵀC with ℓ rows and nc columns of C goes through [`Gpu::ts_gemm_tn`]: in
/// f32 only (cuBLAS's SGEMM of this shape reads its operands at 1.2 TB/s on an H100, its
/// DGEMM at 3.1 TB/s: docs/performance.md), for 2 to [`TS_GEMM_MAX_NC`] columns (one
/// column is a GEMV, at bandwidth) and enough chunks and tiles to fill the GPU.
pub(super) fn ts_gemm_pays<T: GpuScalar>(l: usize, nc: usize) -> bool {
    T::DTYPE == Dtype::F32
        && (2..=TS_GEMM_MAX_NC).contains(&nc)
        && l.div_ceil(4096) * nc.div_ceil(64) >= TS_GEMM_MIN_BLOCKS
}

/// A block reflector merged from consecutive blocks B₁⋯B_g (as [`merge_groups`] forms
/// them): V = [V₁ V₂ ⋯] with each block's V at its own rows and zeros above, and T by
/// the forward recurrence (LAPACK larft, blocked): each new block's T_new joins as
/// T₁₂ = −T_acc·(V_accᵀV_new)·T_new, three GEMMs ([`MergedBlock::append`]).
pub(crate) struct MergedBlock<T> {
    pub(super) v: DevMat<T>,
    pub(super) t: DevMat<T>,
    pub(super) row0: usize,
    pub(super) rows: usize,
    pub(super) k: usize,
}

impl<T: GpuScalar> MergedBlock<T> {
    /// Scratch for merged reflectors of up to `rows`×`width`.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn new(gpu: &Gpu, rows: usize, width: usize) -> Result<Self> {
        Ok(Self {
            v: DevMat::zeros(gpu, rows.max(1), width.max(1))?,
            t: DevMat::zeros(gpu, width.max(1), width.max(1))?,
            row0: 0,
            rows: 0,
            k: 0,
        })
    }

    /// Starts an empty merge of blocks acting on rows `row0 .. row0 + rows`.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub(crate) fn reset(&mut self, gpu: &Gpu, row0: usize, rows: usize) -> Result<()> {
        assert!(rows <= self.v.nrows());
        // Zeros above each block's rows and below T's diagonal.
        for x in [&mut self.v, &mut self.t] {
            gpu.stream
                .memset_zeros(x.buf_mut())
                .map_err(crate::gpu::runtime::driver_err(
                    "clearing merged reflector scratch",
                ))?;
        }
        (self.row0, self.rows, self.k) = (row0, rows, 0);
        Ok(())
    }

    /// Appends the block I − V T Vᵀ acting on rows `row0 ..` to the merge's last row
    /// (V ℓ×jb, unit lower trapezoidal, starting where the previous block's columns
    /// end). `w`, `w2` hold at least k×jb (k the columns merged so far).
    ///
    /// # Errors
    /// [`Error::Driver`], [`Error::Cublas`].
    pub(crate) fn append(
        &mut self,
        gpu: &Gpu,
        row0: usize,
        v: &crate::gpu::runtime::DevMatView<'_, T>,
        t: &crate::gpu::runtime::DevMatView<'_, T>,
        w: &mut DevMat<T>,
        w2: &mut DevMat<T>,
    ) -> Result<()> {
        let (k, jb, off, l) = (self.k, t.ncols(), row0 - self.row0, self.rows);
        assert!(v.nrows() == l - off && v.ncols() == jb && k + jb <= self.t.ncols());
        gpu.panel_copy(v, &mut self.v.block_mut(off, k, l - off, jb))?;
        gpu.panel_copy(t, &mut self.t.block_mut(k, k, jb, jb))?;
        if k > 0 {
            // W = V_accᵀ V_new over the new block's rows (V_new is zero above them),
            // W₂ = T_acc W, T₁₂ = −W₂ T_new.
            let mut wk = w.block_mut(0, 0, k, jb);
            gpu.gemm(
                Op::T,
                Op::N,
                T::ONE,
                &self.v.block(off, 0, l - off, k),
                v,
                T::ZERO,
                &mut wk,
            )?;
            let mut w2k = w2.block_mut(0, 0, k, jb);
            gpu.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &self.t.block(0, 0, k, k),
                &wk.as_view(),
                T::ZERO,
                &mut w2k,
            )?;
            gpu.gemm(
                Op::N,
                Op::N,
                -T::ONE,
                &w2k.as_view(),
                t,
                T::ZERO,
                &mut self.t.block_mut(0, k, k, jb),
            )?;
        }
        self.k += jb;
        Ok(())
    }

    /// V (rows×k) of the blocks merged so far.
    pub(crate) fn v(&self) -> crate::gpu::runtime::DevMatView<'_, T> {
        self.v.block(0, 0, self.rows, self.k)
    }

    /// T (k×k) of the blocks merged so far.
    pub(crate) fn t(&self) -> crate::gpu::runtime::DevMatView<'_, T> {
        self.t.block(0, 0, self.k, self.k)
    }
}
