//! Q of the blocked QR: the backward accumulation from the kept blocks, merged into block
//! reflectors of up to 256 columns, and the merge of Q's side during the factorisation
//! (docs/algorithms.md#blocked-householder-qr).

#[allow(unused_imports)]
use super::*;

/// The merge of [`blocked_qr_with`]'s reflectors for Q's side: the merged block and
/// the scratch of its T products.
pub(super) struct QMerge<T> {
    pub(super) block: MergedBlock<T>,
    /// Most columns merged before the block is applied.
    pub(super) width: usize,
    pub(super) w: DevMat<T>,
    pub(super) w2: DevMat<T>,
}

impl<T: GpuScalar> QMerge<T> {
    /// Scratch for merges of up to `rows`×`width`, appending panels of up to `nb`.
    pub(super) fn new(gpu: &Gpu, rows: usize, width: usize, nb: usize) -> Result<Self> {
        Ok(Self {
            block: MergedBlock::new(gpu, rows, width)?,
            width,
            w: DevMat::zeros(gpu, width, nb)?,
            w2: DevMat::zeros(gpu, width, nb)?,
        })
    }
}

/// Q[:, row0..row0+ℓ] −= ((Q V) T) Vᵀ (Q := Q·(I − V T Vᵀ), V ℓ×k): three GEMMs.
/// `wq`, `wq2` hold at least Q's rows × k.
pub(super) fn q_times_block<T: GpuScalar>(
    gpu: &Gpu,
    qm: &mut DevMat<T>,
    v: &crate::gpu::runtime::DevMatView<'_, T>,
    t: &crate::gpu::runtime::DevMatView<'_, T>,
    row0: usize,
    wq: &mut DevMat<T>,
    wq2: &mut DevMat<T>,
) -> Result<()> {
    let (mq, l, k) = (qm.nrows(), v.nrows(), v.ncols());
    let mut w = wq.block_mut(0, 0, mq, k);
    gpu.gemm(
        Op::N,
        Op::N,
        T::ONE,
        &qm.block(0, row0, mq, l),
        v,
        T::ZERO,
        &mut w,
    )?;
    let mut w2 = wq2.block_mut(0, 0, mq, k);
    gpu.gemm(Op::N, Op::N, T::ONE, &w.as_view(), t, T::ZERO, &mut w2)?;
    gpu.gemm(
        Op::N,
        Op::T,
        -T::ONE,
        &w2.as_view(),
        v,
        T::ONE,
        &mut qm.block_mut(0, row0, mq, l),
    )
}

/// Widest merged block reflector of [`accumulate_q_backward`]: the inner dimension of
/// its two tall GEMMs (one panel's 64 leaves the H100's f64 GEMM at ≈ 23 TFLOP/s,
/// docs/performance.md).
pub(crate) const Q_MERGE_WIDTH: usize = 256;

/// Fewest rows of Q for [`accumulate_q_backward`] to merge blocks. Below, the Q phase is
/// short and merging buys little time, while the merged T's longer products cost a
/// little orthogonality that Kerr's m·u criterion does not leave room for at small m
/// (H100, f64 257×257 with 32-column panels: ‖QᵀQ − I‖_F 1.5e-14 one block at a time,
/// 3.0e-14 merged, m·u = 2.9e-14, cuSOLVER's Q 2.7e-14; at 4096² 1.9e-13 → 2.2e-13 against
/// 4.5e-13 with the Q phase 6.3 → 4.7 ms).
pub(crate) const Q_MERGE_MIN_ROWS: usize = 4096;

/// Q := H_1⋯H_K applied to the identity, backwards (Q = B₁(B₂(⋯(B_K I)))), each
/// block touching rows and columns row0.. only (docs/algorithms.md#blocked-householder-qr).
/// `q` is m×m for the full Q, or m×n for the thin Q₁ (the identity's first n columns).
/// Consecutive blocks that reach the last row (each starting where the previous one's columns
/// end) are merged into block reflectors of up to [`Q_MERGE_WIDTH`] columns first
/// ([`MergedBlock`]), so that each pass over Q does more work per byte, when Q has at
/// least [`Q_MERGE_MIN_ROWS`] rows.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`], [`Error::Cublas`].
pub(crate) fn accumulate_q_backward<T: GpuScalar>(
    gpu: &Gpu,
    blocks: &[Block<T>],
    q: &mut DevMat<T>,
) -> Result<()> {
    let width = if q.nrows() >= Q_MERGE_MIN_ROWS {
        Q_MERGE_WIDTH
    } else {
        0
    };
    accumulate_q_merged(gpu, blocks, q, width)
}

/// [`accumulate_q_backward`] with merged reflectors of at most `max_width` columns
/// (0: every block on its own).
pub(super) fn accumulate_q_merged<T: GpuScalar>(
    gpu: &Gpu,
    blocks: &[Block<T>],
    q: &mut DevMat<T>,
    max_width: usize,
) -> Result<()> {
    let m = q.nrows();
    // Q's columns: m for the square Q, n for the thin Q₁ = H₁⋯H_k·[I; 0] (a block
    // starting at row0 touches only columns row0.. of the identity's image)
    let nc = q.ncols();
    gpu.panel_set_identity(&mut q.view_mut())?;
    let shapes: Vec<(usize, usize, usize)> = blocks
        .iter()
        .map(|b| (b.row0, b.v.nrows(), b.t.ncols()))
        .collect();
    let groups = merge_groups(&shapes, m, max_width);
    let width = |g: &Range<usize>| -> usize { blocks[g.clone()].iter().map(|b| b.t.ncols()).sum() };
    let nb = groups.iter().map(width).max().unwrap_or(1);
    let mut w = DevMat::zeros(gpu, nb, m)?;
    let mut w2 = DevMat::zeros(gpu, nb, m)?;
    // Scratch of the merged reflectors: the tallest and the widest group of several
    // blocks (the first such group is the tallest).
    let multi = || groups.iter().filter(|g| g.len() > 1);
    let mut scratch = match (multi().next(), multi().map(width).max()) {
        (Some(g), Some(k)) => Some(MergedBlock::new(gpu, m - blocks[g.start].row0, k)?),
        _ => None,
    };
    for g in groups.iter().rev() {
        let row0 = blocks[g.start].row0;
        // One block as it is, or the group merged into the scratch.
        let (v, t) = if g.len() == 1 {
            let b = &blocks[g.start];
            (b.v.view(), b.t.view())
        } else {
            let mb = scratch
                .as_mut()
                .expect("scratch sized for every merged group");
            mb.reset(gpu, row0, m - row0)?;
            for b in &blocks[g.clone()] {
                mb.append(gpu, b.row0, &b.v.view(), &b.t.view(), &mut w, &mut w2)?;
            }
            (mb.v(), mb.t())
        };
        larfb_left(
            gpu,
            &v,
            &t,
            false,
            q,
            row0,
            row0.min(nc)..nc,
            &mut w,
            &mut w2,
        )?;
    }
    Ok(())
}

/// Splits blocks, given as (row0, rows of V, columns), into runs that
/// [`MergedBlock`] can merge: consecutive blocks whose V reaches row m
/// (rows = m − row0) and starts where the previous block's columns end (row0 + jb),
/// at most `max_width` columns a run (a single block may be wider).
pub(super) fn merge_groups(
    shapes: &[(usize, usize, usize)],
    m: usize,
    max_width: usize,
) -> Vec<Range<usize>> {
    let full = |&(row0, rows, _): &(usize, usize, usize)| rows == m - row0;
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut width = 0;
    for (i, b) in shapes.iter().enumerate() {
        let jb = b.2;
        let joins = out.last().is_some_and(|g| {
            let prev = &shapes[g.end - 1];
            full(prev) && full(b) && b.0 == prev.0 + prev.2 && width + jb <= max_width
        });
        if joins {
            out.last_mut().expect("a run to join").end = i + 1;
            width += jb;
        } else {
            out.push(i..i + 1);
            width = jb;
        }
    }
    out
}
