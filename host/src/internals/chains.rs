//! Single launches of cuqr's dependent chains, for `cuqr bench chains`
//! (docs/performance.md#chain-latency): the reflector chain of row insertion, the band
//! chain of column deletion, and the one-block and cooperative QR panels, each on
//! device matrices the caller fills. The Givens generates are reached through
//! [`Gpu`]'s two-phase launchers, the LU panel through `GpuLu`'s phase times.

use crate::base::error::{Error, Result};
use crate::gpu::launch::fused_panel::FusedPanelWork;
use crate::gpu::launch::row_insert::RowInsertShape;
use crate::gpu::runtime::{DevMat, DevVec, Gpu, GpuScalar};

/// Overrides of a reflector-chain launch's shape; `None` keeps the planned value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainTuning {
    /// Columns per block (the plan's ring kept; a shape whose blocks cannot all be
    /// resident fails at the launch).
    pub cpb: Option<usize>,
}

/// The launch shape a chain kernel ran with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainShape {
    /// Columns per block.
    pub cpb: usize,
    /// Blocks (all co-resident).
    pub blocks: usize,
}

impl From<RowInsertShape> for ChainShape {
    fn from(s: RowInsertShape) -> Self {
        Self {
            cpb: s.cpb,
            blocks: s.blocks,
        }
    }
}

/// `plan` with `tuning` applied.
///
/// # Errors
/// [`Error::InvalidParam`] for zero columns per block.
fn tuned<T: GpuScalar>(
    plan: RowInsertShape,
    tuning: ChainTuning,
    n: usize,
    q: usize,
    p: usize,
) -> Result<RowInsertShape> {
    let mut s = plan;
    if let Some(cpb) = tuning.cpb {
        if cpb == 0 {
            return Err(Error::InvalidParam {
                op: "reflector chain",
                what: "columns per block",
                why: "must be at least 1".into(),
            });
        }
        s = s.with_cpb(n, q, p, core::mem::size_of::<T>(), cpb);
    }
    Ok(s)
}

/// The row-insertion chain (`row_insert_qr`, docs/algorithms.md#row-insertion) on
/// [R d; U e]: `r` n×n upper triangular, `d` n×q, `u` p×n, `e` p×q, all updated in
/// place. Returns the shape it ran with, or `None` (nothing run) when the sizes take
/// the blocked path.
///
/// # Errors
/// [`Error::InvalidParam`] for zero columns per block; those of the launch (a tuned
/// shape whose blocks cannot all be resident fails there).
pub fn reflector_chain<T: GpuScalar>(
    gpu: &Gpu,
    r: &mut DevMat<T>,
    d: &mut DevMat<T>,
    u: &mut DevMat<T>,
    e: &mut DevMat<T>,
    tuning: ChainTuning,
) -> Result<Option<ChainShape>> {
    let (n, q, p) = (r.ncols(), d.ncols(), u.nrows());
    let Some(plan) = gpu.row_insert_plan::<T>(n, q, p)? else {
        return Ok(None);
    };
    let s = tuned::<T>(plan, tuning, n, q, p)?;
    gpu.row_insert_qr(r, d, u, e, n, q, p, s)?;
    Ok(Some(ChainShape::from(s)))
}

/// The QRs of stacked pairs of triangles in one launch (`row_insert_pairs`, a level of the
/// distributed tree combine, docs/scaling.md#the-tree-combine): `packs[i]` (n×(n+q), [R_a
/// d_a]) receives the QR's [R d] of [R_a d_a; R_b d_b] with [R_b d_b] = `partners[i]` (same
/// shape and leading dimension), which becomes scratch. Returns, per pair, the 2-norms of
/// the transformed d_b's columns.
///
/// # Errors
/// [`Error::InvalidParam`] when the packs and partners differ in number or there are
/// none; those of the launcher (shapes, n outside 1..=512, the launch).
pub fn pair_qrs<T: GpuScalar>(
    gpu: &Gpu,
    packs: &mut [DevMat<T>],
    partners: &mut [DevMat<T>],
) -> Result<Vec<Vec<f64>>> {
    if packs.len() != partners.len() || packs.is_empty() {
        return Err(Error::InvalidParam {
            op: "pair_qrs",
            what: "partners",
            why: format!("{} packs and {} partners", packs.len(), partners.len()),
        });
    }
    let n = packs[0].nrows();
    let q = packs[0].ncols().saturating_sub(n);
    let mut pairs: Vec<_> = packs
        .iter_mut()
        .zip(partners.iter_mut())
        .map(|(a, b)| (a, b.buf_mut()))
        .collect();
    gpu.row_insert_pairs(&mut pairs, (n, q))
}

/// The band chain of column deletion (`row_insert_band_qr`,
/// docs/algorithms.md#column-deletion) on the (n+p)×n band `b` (column c nonzero in
/// rows 0..=c+p) and its right-hand sides `d` ((n+p)×q); `v` (p×n) receives the v
/// tails. Returns the shape, or `None` when the sizes take the blocked path.
///
/// # Errors
/// As [`reflector_chain`].
pub fn band_chain<T: GpuScalar>(
    gpu: &Gpu,
    b: &mut DevMat<T>,
    d: &mut DevMat<T>,
    v: &mut DevMat<T>,
    tuning: ChainTuning,
) -> Result<Option<ChainShape>> {
    let (n, q, p) = (b.ncols(), d.ncols(), v.nrows());
    let Some(plan) = gpu.band_qr_plan::<T>(n, q, p)? else {
        return Ok(None);
    };
    let s = tuned::<T>(plan, tuning, n, q, p)?;
    gpu.row_insert_band_qr(b, 0, 0, d, n, p, v, s)?;
    Ok(Some(ChainShape::from(s)))
}

/// Which QR panel kernel [`qr_panel`] ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PanelKernel {
    /// `small_panel_qr`: one block, the panel in shared memory, a block barrier a column.
    OneBlock,
    /// `fused_panel_qr`: one cooperative launch over several blocks.
    Cooperative,
}

/// Workspace of [`qr_panel`]: V, τ and T for panels of up to `rows`×`jb`.
#[derive(Debug)]
pub struct PanelOut<T: GpuScalar> {
    v: DevMat<T>,
    tau: DevVec<T>,
    t: DevMat<T>,
}

impl<T: GpuScalar> PanelOut<T> {
    /// Outputs for a rows×jb panel.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`].
    pub fn new(gpu: &Gpu, rows: usize, jb: usize) -> Result<Self> {
        Ok(Self {
            v: DevMat::zeros(gpu, rows, jb)?,
            tau: DevVec::zeros(gpu, jb)?,
            t: DevMat::zeros(gpu, jb, jb)?,
        })
    }
}

/// Factors the whole of `a` (rows×jb, jb ≤ 64) as one Householder QR panel
/// (docs/algorithms.md#blocked-householder-qr): by the one-block kernel when it fits
/// and `one_block` allows, else by the cooperative one.
///
/// # Errors
/// [`Error::InvalidParam`] for a panel neither kernel takes; those of the launch.
pub fn qr_panel<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    out: &mut PanelOut<T>,
    one_block: bool,
) -> Result<PanelKernel> {
    let (rows, jb) = (a.nrows(), a.ncols());
    if jb == 0 || jb > 64 || jb > rows {
        return Err(Error::InvalidParam {
            op: "qr panel",
            what: "shape",
            why: format!("{rows}×{jb}: at most 64 columns, no more columns than rows"),
        });
    }
    let PanelOut { v, tau, t } = out;
    if one_block && gpu.small_panel_fits::<T>(rows, jb) {
        gpu.small_panel_qr(
            a,
            0,
            0,
            rows,
            jb,
            None,
            &mut v.view_mut(),
            tau,
            &mut t.view_mut(),
        )?;
        return Ok(PanelKernel::OneBlock);
    }
    let mut w = FusedPanelWork::<T>::new(gpu)?;
    gpu.fused_panel_qr(
        &mut w,
        a,
        0,
        0,
        rows,
        jb,
        None,
        &mut v.view_mut(),
        tau,
        &mut t.view_mut(),
    )?;
    Ok(PanelKernel::Cooperative)
}
