//! Blocked Householder QR on the device (docs/algorithms.md#blocked-householder-qr; docs/design.md
//! "Shared building blocks"): each panel of nb ≤ 64 columns in one cooperative launch
//! of `fused_panel_qr` (R with exact zeros below the diagonal, V with explicit unit
//! diagonal and zeros, τ, and T as LAPACK larft, τ ≥ 0, docs/algorithms.md#block-reflector-sign;
//! without Q, a panel is narrowed in steps of 8 columns, to no less than half, when that keeps its
//! rows in shared memory; the kernel's scratch lives on [`Gpu`]); wider panels per
//! column (`householder_house` + `panel_apply`, then `panel_extract_v` and
//! `wy_build_t`); then the trailing matrix, d and
//! Q updated with three cuBLAS GEMMs each: C −= V·(Tᵀ·(VᵀC)), Q −= ((QV)T)Vᵀ. Panels
//! whose rows fit one block's shared memory go to `small_panel_qr` (one block barrier a
//! column). Without a band and with Q of at least 4096 rows, Q's side takes the panels'
//! reflectors merged into blocks of up to 256 columns, one pass over Q's columns each
//! (`QMerge`). With the one-launch panel, the next panel is factored on a second stream while
//! those GEMMs run (look-ahead, `blocked_qr_with`).
//! A `band` limits each reflector to band+1 rows (column deletion,
//! docs/algorithms.md#column-deletion).
//! A factorisation that keeps Q forms it afterwards from the kept blocks, backwards,
//! merging consecutive blocks into block reflectors of up to 256 columns first
//! (`accumulate_q_backward`).

use core::ops::Range;

use cudarc::driver::DevicePtrMut;

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::Op;
use crate::gpu::launch::fused_panel::{FusedPanelWork, RawMat, FUSED_MAX_JB, FUSED_MAX_ROWS};
use crate::gpu::launch::small_panel::SMALL_PANEL_FAST_ROWS;
use crate::gpu::launch::tsqr::{TsqrWork, TSQR_MAX_COLS};
use crate::gpu::launch::BUILD_T_MAX_K;
use crate::gpu::runtime::matrix::{DevMat, DevVec};
use crate::gpu::runtime::timing::PhaseClock;
use crate::gpu::runtime::{Dtype, Gpu, GpuScalar};

/// One block reflector I − V T Vᵀ acting on rows `row0 .. row0 + v.nrows()`,
/// kept for backward accumulation of Q (docs/algorithms.md#blocked-householder-qr).
pub(crate) struct Block<T> {
    /// First row the block acts on.
    pub row0: usize,
    /// V (ℓ×jb, unit lower trapezoidal, explicit 1s and 0s).
    pub v: DevMat<T>,
    /// T (jb×jb upper triangular).
    pub t: DevMat<T>,
}

/// Time per phase of one profiled device factorisation
/// (`GpuQr::factorize_dev_phases`), in
/// milliseconds from CUDA events around each phase of each panel: the split of Kerr et
/// al.'s Table 2 for cuqr's blocked QR (docs/algorithms.md#blocked-householder-qr).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QrPhaseTimes {
    /// The panels: Householder vectors, their application inside the panel and T
    /// (Kerr's "Householder", "A = P·A" and "WY computation"; one launch a panel).
    pub panel_ms: f64,
    /// The trailing update A −= V(Tᵀ(VᵀA)) (Kerr's "A ← (I + WYᴴ)ᴴA").
    pub trailing_ms: f64,
    /// The right-hand sides d −= V(Tᵀ(Vᵀd)).
    pub rhs_ms: f64,
    /// The rank check of R.
    pub rank_ms: f64,
    /// Forming the explicit Q (backward accumulation; Kerr's "Q ← Q(I + WYᴴ)").
    pub q_ms: f64,
    /// The whole factorisation, allocations included, from the first event to the last.
    pub total_ms: f64,
    /// Flops of the panels as LAPACK counts an unblocked QR: Σ 2ℓ·jb² − 2jb³/3 over
    /// the panels (ℓ×jb) the factorisation actually took.
    pub panel_flops: f64,
    /// Flops of the trailing update: Σ 4ℓ·jb·c over the panels (c trailing columns;
    /// the two tall GEMMs of each block reflector).
    pub trailing_flops: f64,
}

/// The phases a [`QrClock`] times, as indices.
pub(crate) const PHASE_PANEL: usize = 0;
pub(crate) const PHASE_TRAILING: usize = 1;
pub(crate) const PHASE_RHS: usize = 2;
pub(crate) const PHASE_RANK: usize = 3;
pub(crate) const PHASE_Q: usize = 4;
/// Events around the phases of a profiled factorisation ([`QrPhaseTimes`]).
pub(crate) type QrClock = PhaseClock<5>;

/// Fewest panels a factorisation needs for look-ahead (see [`blocked_qr_with`]).
const LOOKAHEAD_MIN_PANELS: usize = 4;

/// One panel's outputs: V, T and τ (sized for the widest panel, or exactly for a kept
/// block).
struct PanelBufs<T> {
    v: DevMat<T>,
    t: DevMat<T>,
    tau: DevVec<T>,
}

impl<T: GpuScalar> PanelBufs<T> {
    /// V is left unset: every panel implementation writes all of V's l×jb block
    /// (explicit 1s and 0s above the reflectors: `fused_panel_qr`'s write-back,
    /// `panel_extract_v`, the TSQR panel's leaf-0 apply, `tsqr_reconstruct` and final
    /// apply) before the block reflector reads it, so the fill pass over the tallest
    /// panel's rows (256 MiB for 1048576×32 f64) is not needed.
    fn new(gpu: &Gpu, l: usize, jb: usize) -> Result<Self> {
        Ok(Self {
            // SAFETY: see above: only the block (0..l', 0..jb') of the panel being
            // factored is read, after the panel wrote all of it.
            v: DevMat::uninit(gpu, l.max(1), jb)?,
            t: DevMat::zeros(gpu, jb, jb)?,
            tau: DevVec::zeros(gpu, jb)?,
        })
    }
}

/// Workspace of [`blocked_qr`]: the GEMM intermediates and the panel's scratch handle.
struct Work<T> {
    w: DevMat<T>,
    w2: DevMat<T>,
    wq: Option<(DevMat<T>, DevMat<T>)>,
    /// Handle on the one-launch panel's scratch, which lives on [`Gpu`] (None:
    /// per-column panel, nb > 64 or more rows than the kernel indexes).
    fused: Option<FusedPanelWork<T>>,
    /// Scratch of the TSQR panel, when some panel takes it.
    tsqr: Option<TsqrWork<T>>,
    /// Panels of at most `SMALL_PANEL_FAST_ROWS` rows that fit one block's shared memory
    /// go to `small_panel_qr` ([`PanelImpl::Auto`] and its in-order twin; the other
    /// choices keep their kernel for tests).
    small: bool,
}

/// Triangularises A[rows, cols] in place (β on the diagonal, exact zeros below),
/// applying the reflectors to A[rows, cols.end..] (trailing columns), to d[rows, :]
/// from the left (Qᵀ side) and to Q[:, rows] from the right (Q := Q·H), with
/// compact-WY blocks of `nb` reflectors (docs/algorithms.md#blocked-householder-qr).
///
/// # Errors
/// [`Error::InvalidParam`] for nb = 0 (nb > 256 is clamped to 256), [`Error::OutOfMemory`] for the
/// workspace, [`Error::Driver`], [`Error::Cublas`].
///
/// # Panics
/// If the ranges do not fit `a`, or d / Q do not match its rows (a cuqr bug).
pub fn blocked_qr<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    rows: Range<usize>,
    cols: Range<usize>,
    d: Option<&mut DevMat<T>>,
    q: Option<&mut DevMat<T>>,
    nb: usize,
) -> Result<()> {
    blocked_qr_band(gpu, a, rows, cols, None, d, q, nb, None)
}

/// [`blocked_qr`] with an optional `band`: reflector j touches at most band+1 rows
/// (its column is zero below that, docs/algorithms.md#column-deletion), so V blocks have ≤ band +
/// nb rows and only those rows of the trailing columns, d and Q's columns change. With `keep`,
/// every block's V and T are kept (for backward accumulation of Q).
#[allow(clippy::too_many_arguments)]
pub(crate) fn blocked_qr_band<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    rows: Range<usize>,
    cols: Range<usize>,
    band: Option<usize>,
    d: Option<&mut DevMat<T>>,
    q: Option<&mut DevMat<T>>,
    nb: usize,
    keep: Option<&mut Vec<Block<T>>>,
) -> Result<()> {
    let params = BlockedQrParams {
        merge_trailing: merges_trailing::<T>(cols.len()),
        band,
        ..BlockedQrParams::new(rows, cols, nb)
    };
    let outputs = QrOutputs {
        d,
        q,
        keep,
        clock: None,
    };
    blocked_qr_with(gpu, a, outputs, &params)
}

/// How [`blocked_qr_with`] factors each panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PanelImpl {
    /// `fused_panel_qr` (one launch) when nb ≤ 64, with look-ahead; else per column.
    Auto,
    /// `householder_house` + `panel_apply` per column, then V and T (reference path).
    PerColumn,
    /// `fused_panel_qr` forced into its in-place (global-memory) variant.
    FusedInPlace,
    /// `fused_panel_qr` as in `Auto`, every panel on the main stream (no look-ahead).
    FusedInOrder,
    /// The TSQR panel for every panel without a band, 32 columns wide (tests of that
    /// path); banded panels as in `FusedInOrder`.
    #[cfg_attr(not(test), allow(dead_code))]
    Tsqr,
}

/// The choices of one blocked factorisation ([`blocked_qr_with`]): the block of A it
/// triangularises, the band, the block size and how panels are factored and applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockedQrParams {
    /// Rows of A the reflectors act on.
    pub rows: Range<usize>,
    /// Columns of A to triangularise (no more than `rows`).
    pub cols: Range<usize>,
    /// Reflector j touches at most band+1 rows (column deletion); `None`: all of `rows`.
    pub band: Option<usize>,
    /// The block size n_b: 0 is an error, above 256 it is clamped to 256.
    pub nb: usize,
    /// How each panel is factored.
    pub panel: PanelImpl,
    /// Whether runs of panels update the columns after them with one merged reflector
    /// ([`merges_trailing`] is the default choice).
    pub merge_trailing: bool,
}

impl BlockedQrParams {
    /// A[rows, cols] with blocks of `nb`, unbanded, [`PanelImpl::Auto`] panels and no
    /// merged trailing update.
    pub(crate) fn new(rows: Range<usize>, cols: Range<usize>, nb: usize) -> Self {
        Self {
            rows,
            cols,
            band: None,
            nb,
            panel: PanelImpl::Auto,
            merge_trailing: false,
        }
    }

    /// Rows of the panel whose first row is `r0` and width `jb`: to the end of `rows`,
    /// or band + jb with a band.
    fn span_rows(&self, r0: usize, jb: usize) -> usize {
        let l = self.rows.end - r0;
        self.band.map_or(l, |b| l.min(b + jb))
    }
}

/// What a blocked factorisation updates besides A, each optional: the right-hand sides
/// d (Qᵀ side), Q (Q := Q·H), the kept blocks (for backward accumulation of Q), and the
/// phase clock of a profiled run.
pub(crate) struct QrOutputs<'o, T> {
    /// d[rows, :] −= V(Tᵀ(Vᵀd)); d has A's rows.
    pub d: Option<&'o mut DevMat<T>>,
    /// Q[:, rows] −= ((QV)T)Vᵀ; Q has as many columns as A has rows.
    pub q: Option<&'o mut DevMat<T>>,
    /// Every block's V and T, pushed in order.
    pub keep: Option<&'o mut Vec<Block<T>>>,
    /// Events around every phase ([`QrPhaseTimes`]); no look-ahead with a clock.
    pub clock: Option<&'o mut QrClock>,
}

impl<T> Default for QrOutputs<'_, T> {
    fn default() -> Self {
        Self {
            d: None,
            q: None,
            keep: None,
            clock: None,
        }
    }
}

/// The blocked QR of A[`rows`, `cols`] with the panel implementation chosen explicitly
/// ([`BlockedQrParams`]), updating the [`QrOutputs`] given.
///
/// With the one-launch panel, panels are factored with look-ahead
/// (docs/algorithms.md#blocked-householder-qr, Kerr
/// et al.'s "next panel early"): once panel i is factored, its block reflector is
/// applied first to panel i+1's columns, panel i+1 is then factored on
/// [`Gpu::stream2`] while the main stream applies panel i to the remaining columns,
/// d and Q, and the main stream waits for panel i+1 before going on. The two streams
/// touch disjoint elements meanwhile (panel i+1's columns, with their V, T, τ and the
/// panel scratch, against the columns after them, d, Q and the GEMM workspace); the
/// panel works on A by its raw address, so that cudarc's per-buffer event tracking
/// does not order stream 2 after the main stream's GEMMs on A's other columns.
///
/// With `merge_trailing`, runs of panels update the columns after the run with one
/// merged reflector ([`merges_trailing`] is the default choice).
///
/// With a `clock`, every phase is bracketed by events on the main stream
/// ([`QrPhaseTimes`]) and there is no look-ahead (the phases would overlap).
///
/// The steps: check the operands, cut the columns into panels and runs
/// ([`PanelPlan`]), allocate the merge buffers and workspace, then the panel loop
/// ([`PanelLoop`]).
///
/// # Errors
/// As [`blocked_qr`].
pub(crate) fn blocked_qr_with<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    out: QrOutputs<'_, T>,
    params: &BlockedQrParams,
) -> Result<()> {
    if params.nb == 0 {
        return Err(Error::InvalidParam {
            op: "blocked_qr",
            what: "block size",
            why: "must be at least 1".into(),
        });
    }
    // T is built by one block of wy_build_t: at most 256 reflectors per block.
    let nb = params.nb.min(BUILD_T_MAX_K);
    let (rows, cols) = (&params.rows, &params.cols);
    assert!(rows.end <= a.nrows() && cols.end <= a.ncols());
    assert!(cols.len() <= rows.len(), "more columns than rows");
    if let Some(dm) = out.d.as_deref() {
        assert_eq!(dm.nrows(), a.nrows());
    }
    if let Some(qm) = out.q.as_deref() {
        assert_eq!(qm.ncols(), a.nrows());
    }
    if cols.is_empty() {
        return Ok(());
    }
    let widths = BlockWidths::new(params, nb);
    let fused = if params.span_rows(rows.start, widths.nb) <= FUSED_MAX_ROWS
        && widths.nb <= FUSED_MAX_JB
        && params.panel != PanelImpl::PerColumn
    {
        let mut w = FusedPanelWork::new(gpu)?;
        w.force_in_place = params.panel == PanelImpl::FusedInPlace;
        Some(w)
    } else {
        None
    };
    let slab_ok = fused.as_ref().is_some_and(|f| !f.force_in_place);
    // Narrower panels whose rows fit shared memory pay off when only A and d are
    // updated; with Q kept (here or backwards from `keep`), every panel is one more
    // pass over Q's columns, which costs more than the in-place panel saves.
    let narrow = out.q.is_none() && out.keep.is_none();
    let plan = PanelPlan::new::<T>(gpu, params, &widths, slab_ok, narrow);
    let merge = RunMerge::new(gpu, &plan)?;
    PanelLoop::new(gpu, a, out, plan, fused)?.run(merge)
}

mod driver;
mod panel;
mod plan;
mod q;
#[cfg(test)]
mod tests;
mod trailing;

use driver::*;
use panel::*;
use plan::*;
pub(crate) use q::*;
#[cfg(test)]
pub(crate) use tests::tests_gate;
pub(crate) use trailing::*;
