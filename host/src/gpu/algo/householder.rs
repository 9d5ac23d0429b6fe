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
//! those GEMMs run (look-ahead, `blocked_qr_impl`).
//! A `band` limits each reflector to band+1 rows (column deletion,
//! docs/algorithms.md#column-deletion).
//! A factorisation that keeps Q forms it afterwards from the kept blocks, backwards,
//! merging consecutive blocks into block reflectors of up to 256 columns first
//! (`accumulate_q_backward`).

use core::ops::Range;

use cudarc::driver::{CudaSlice, DevicePtrMut, PinnedHostSlice};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::Op;
use crate::gpu::launch::basic::BUILD_T_MAX_K;
use crate::gpu::launch::fused_panel::{FusedPanelWork, RawMat, FUSED_MAX_JB, FUSED_MAX_ROWS};
use crate::gpu::launch::small_panel::SMALL_PANEL_FAST_ROWS;
use crate::gpu::launch::tsqr::{TsqrWork, TSQR_MAX_COLS};
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
/// ([`GpuQr::factorize_dev_phases`](super::GpuQr::factorize_dev_phases)), in
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

/// Widest merged block reflector of the trailing update in [`blocked_qr_impl`]: the
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

/// Fewest panels a factorisation needs for look-ahead (see [`blocked_qr_impl`]).
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
    let merge = merges_trailing::<T>(cols.len());
    blocked_qr_impl(
        gpu,
        a,
        rows,
        cols,
        band,
        d,
        q,
        nb,
        keep,
        PanelImpl::Auto,
        merge,
        None,
    )
}

/// How [`blocked_qr_impl`] factors each panel.
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

/// [`blocked_qr_band`] with the panel implementation chosen explicitly.
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
/// merged reflector (see `runs` below; [`merges_trailing`] is the default choice).
///
/// With a `clock`, every phase is bracketed by events on the main stream
/// ([`QrPhaseTimes`]) and there is no look-ahead (the phases would overlap).
///
/// Long because the panel loop keeps its look-ahead state (the two reused panel-buffer
/// sets, the merged reflector still owed to later columns, Q's merge buffer and the
/// phase clock) in locals that its closures share; splitting it would pass a dozen
/// buffers and flags between the pieces.
#[allow(clippy::too_many_arguments)]
pub(crate) fn blocked_qr_impl<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    rows: Range<usize>,
    cols: Range<usize>,
    band: Option<usize>,
    mut d: Option<&mut DevMat<T>>,
    mut q: Option<&mut DevMat<T>>,
    nb: usize,
    mut keep: Option<&mut Vec<Block<T>>>,
    panel: PanelImpl,
    merge_trailing: bool,
    mut clock: Option<&mut QrClock>,
) -> Result<()> {
    if nb == 0 {
        return Err(Error::InvalidParam {
            op: "blocked_qr",
            what: "block size",
            why: "must be at least 1".into(),
        });
    }
    // T is built by one block of wy_build_t: at most 256 reflectors per block.
    let nb = nb.min(BUILD_T_MAX_K);
    assert!(rows.end <= a.nrows() && cols.end <= a.ncols());
    assert!(cols.len() <= rows.len(), "more columns than rows");
    if let Some(dm) = d.as_deref() {
        assert_eq!(dm.nrows(), a.nrows());
    }
    if let Some(qm) = q.as_deref() {
        assert_eq!(qm.ncols(), a.nrows());
    }
    if cols.is_empty() {
        return Ok(());
    }
    let nb_req = nb.min(cols.len());
    // A block size wider than the one-launch panel (up to 256) is kept for the blocked
    // algorithm's outer level, not for the panel: its panels are factored FUSED_MAX_JB
    // columns at a time by `fused_panel_qr` (each updating the rest of its n_b-wide
    // block, as a recursive panel would), and, unbanded, their reflectors are merged
    // into runs of up to n_b columns that update the later columns, d and Q as one
    // block reflector of the requested width. Banded panels (column deletion) cannot
    // merge (a merged V must reach the last row) and are applied FUSED_MAX_JB at a
    // time. The per-column panel took 2 launches a column (BS at n_b = 100–500:
    // 0.12–0.48× of refactorising, H100, docs/performance.md).
    let split = panel == PanelImpl::Auto && nb_req > FUSED_MAX_JB;
    let nb = if split { FUSED_MAX_JB } else { nb_req };
    let span_rows = |r0: usize, jb: usize| -> usize {
        let l = rows.end - r0;
        band.map_or(l, |b| l.min(b + jb))
    };
    let fused = if span_rows(rows.start, nb) <= FUSED_MAX_ROWS
        && nb <= FUSED_MAX_JB
        && panel != PanelImpl::PerColumn
    {
        let mut w = FusedPanelWork::new(gpu)?;
        w.force_in_place = panel == PanelImpl::FusedInPlace;
        Some(w)
    } else {
        None
    };
    let slab_ok = fused.as_ref().is_some_and(|f| !f.force_in_place);
    // Narrower panels whose rows fit shared memory pay off when only A and d are
    // updated; with Q kept (here or backwards from `keep`), every panel is one more
    // pass over Q's columns, which costs more than the in-place panel saves.
    let narrow = q.is_none() && keep.is_none();
    // A tall panel whose rows do not fit the slab variant (which would stream them from
    // global memory once a column) is a TSQR panel instead, when nothing but A and d is
    // updated. It reads its rows a fixed number of times whatever its width, so it is
    // TSQR_MAX_COLS wide (or the columns left) whatever nb.
    let elem = core::mem::size_of::<T>();
    let tsqr_for = |l: usize, jb: usize| -> bool {
        band.is_none()
            && jb <= TSQR_MAX_COLS
            && l >= jb
            && match panel {
                PanelImpl::Tsqr => true,
                PanelImpl::Auto => narrow && slab_ok && !gpu.fused_panel_in_shared(l, jb, elem),
                _ => false,
            }
    };
    // The panels (first column, width, TSQR or not), fixed before any work so that
    // panel i+1 is known while panel i is applied.
    let mut panels = Vec::new();
    let mut use_tsqr = Vec::new();
    let mut j0 = cols.start;
    while j0 < cols.end {
        let r0 = rows.start + (j0 - cols.start);
        let wide = TSQR_MAX_COLS.min(cols.end - j0);
        let tall = tsqr_for(span_rows(r0, wide), wide);
        let jb = if tall {
            wide
        } else if narrow && slab_ok {
            // Narrower, if that lets the panel's rows sit in shared memory.
            let jb = nb.min(cols.end - j0);
            gpu.fused_panel_width(span_rows(r0, jb), jb, elem)
        } else if split {
            // Equal sub-panels of at most FUSED_MAX_JB inside each n_b-wide block, so
            // that a run of them is exactly one block.
            let off = j0 - cols.start;
            let b0 = off - off % nb_req;
            let bw = nb_req.min(cols.len() - b0);
            let sub = bw.div_ceil(bw.div_ceil(FUSED_MAX_JB));
            (b0 + ((off - b0) / sub + 1) * sub).min(b0 + bw) - off
        } else {
            nb.min(cols.end - j0)
        };
        panels.push((j0, jb));
        use_tsqr.push(tall);
        j0 += jb;
    }
    // The widest panel sizes the GEMM workspace and the panel buffers.
    let nb = panels.iter().map(|&(_, jb)| jb).max().unwrap_or(1);
    let lmax = span_rows(rows.start, nb);
    // Runs of panels whose trailing update is merged (unbanded panels only: a merged
    // V must reach the last row; not TSQR panels: their very tall V makes W = VᵀC a
    // GEMM with a tiny output, slower merged): run g's panels update the run's own
    // columns one by one; at its last panel, the run's merged reflector of up to
    // TRAILING_MERGE_WIDTH columns (GEMMs with that inner dimension instead of jb)
    // updates the next run's columns at once and the columns after those in chunks,
    // one after each of the next run's panels but its last, so that every look-ahead
    // panel again has GEMM work beside it.
    let merge_width = if split { nb_req } else { TRAILING_MERGE_WIDTH };
    let runs: Vec<Range<usize>> = if band.is_none() && (merge_trailing || split) {
        let shapes: Vec<(usize, usize, usize)> = panels
            .iter()
            .map(|&(j0, jb)| {
                let r0 = rows.start + (j0 - cols.start);
                (r0, rows.end - r0, jb)
            })
            .collect();
        merge_groups(&shapes, rows.end, merge_width)
            .into_iter()
            .flat_map(|r| {
                if use_tsqr[r.clone()].iter().any(|&t| t) {
                    r.map(|i| i..i + 1).collect::<Vec<_>>()
                } else {
                    vec![r]
                }
            })
            .collect()
    } else {
        (0..panels.len()).map(|i| i..i + 1).collect()
    };
    let run_of: Vec<usize> = runs
        .iter()
        .enumerate()
        .flat_map(|(g, r)| r.clone().map(move |_| g))
        .collect();
    let run_width = |r: &Range<usize>| -> usize { panels[r.clone()].iter().map(|p| p.1).sum() };
    let kmax = runs.iter().filter(|r| r.len() > 1).map(run_width).max();
    // Two merge buffers: run g's reflector is still being applied (in chunks) while
    // run g+1's is merged.
    let mut merged: Vec<MergedBlock<T>> = match kmax {
        Some(k) => vec![
            MergedBlock::new(gpu, rows.len(), k)?,
            MergedBlock::new(gpu, rows.len(), k)?,
        ],
        None => Vec::new(),
    };
    let run_cols_end = |g: usize| -> usize {
        let (j, w) = panels[runs[g].end - 1];
        j + w
    };
    // The merged reflector still owed to columns: (buffer, first row, columns).
    let mut pending: Option<(usize, usize, Range<usize>)> = None;
    // Q's side merged too (unbanded, Q of at least Q_MERGE_MIN_ROWS rows): the panels'
    // reflectors are merged into block reflectors of up to Q_MERGE_WIDTH columns and
    // each is applied to Q's columns at once, one pass over them instead of one per
    // panel (column insertion's 10000 rows × 200 new columns: 10 passes of three GEMMs
    // with inner dimension 20 took 18 ms of a 40 ms update on an H100).
    let mut q_merge = match q.as_deref() {
        Some(qm) if band.is_none() && panels.len() > 1 && qm.nrows() >= Q_MERGE_MIN_ROWS => Some(
            QMerge::new(gpu, rows.len(), Q_MERGE_WIDTH.min(cols.len()), nb)?,
        ),
        _ => None,
    };
    let wrows = nb.max(kmax.unwrap_or(0));
    let qcols = d.as_deref().map_or(0, |x| x.ncols());
    let wcols = (a.ncols() - cols.start).max(qcols).max(1);
    let mut ws = Work {
        w: DevMat::zeros(gpu, wrows, wcols)?,
        w2: DevMat::zeros(gpu, wrows, wcols)?,
        wq: match q.as_deref() {
            Some(qm) => {
                let w = q_merge.as_ref().map_or(nb, |x| x.width);
                Some((
                    DevMat::zeros(gpu, qm.nrows(), w)?,
                    DevMat::zeros(gpu, qm.nrows(), w)?,
                ))
            }
            None => None,
        },
        fused,
        tsqr: None,
        small: matches!(panel, PanelImpl::Auto | PanelImpl::FusedInOrder),
    };
    if let Some(i) = use_tsqr.iter().position(|&t| t) {
        // The first TSQR panel is the tallest.
        let (j0, _) = panels[i];
        ws.tsqr = Some(TsqrWork::new(
            gpu,
            span_rows(rows.start + (j0 - cols.start), 1),
        )?);
    }
    let at = |i: usize| -> (usize, usize, usize, usize) {
        let (j0, jb) = panels[i];
        let r0 = rows.start + (j0 - cols.start);
        (j0, jb, r0, span_rows(r0, jb))
    };
    let any_tsqr = ws.tsqr.is_some();
    // Look-ahead pays when a panel leaves most SMs to the concurrent trailing update:
    // the slab variant (about 32 blocks). The in-place variant of very tall panels
    // streams A on every SM, and running the trailing GEMM beside it was slower
    // (1048576×32 on an H100, docs/performance.md). Its fixed cost (three more GEMM
    // launches and two events a panel) needs a few panels to pay back: with three
    // (column insertion's 20 new columns, H100) it was slower.
    let lookahead = panels.len() >= LOOKAHEAD_MIN_PANELS
        && ws.fused.as_ref().is_some_and(|f| !f.force_in_place)
        && panel != PanelImpl::FusedInOrder
        && !any_tsqr
        && clock.is_none()
        && {
            let (_, jb, _, l) = at(1);
            gpu.fused_panel_in_shared(l, jb, core::mem::size_of::<T>())
        };
    // A by its address for look-ahead panels on stream 2 (see the doc comment). The
    // guard is dropped at once; its event, recorded on the main stream before any of
    // this function's work, orders nothing that matters here.
    let raw = RawMat::alias_of(gpu, a);
    // Panel buffers: fresh per panel when kept, else two reused sets (look-ahead
    // factors panel i+1 into one while panel i's are read from the other).
    let mut spare: Vec<PanelBufs<T>> = Vec::new();
    if keep.is_none() {
        for _ in 0..if lookahead { 2 } else { 1 } {
            spare.push(PanelBufs::new(gpu, lmax, nb)?);
        }
    }
    let take = |i: usize, spare: &mut Vec<PanelBufs<T>>| -> Result<PanelBufs<T>> {
        match spare.pop() {
            Some(b) => Ok(b),
            None => {
                let (_, jb, _, l) = at(i);
                PanelBufs::new(gpu, l, jb)
            }
        }
    };
    let record = |s: &cudarc::driver::CudaStream| {
        s.record_event(None)
            .map_err(crate::gpu::runtime::driver_err(
                "recording a look-ahead event",
            ))
    };

    let panel_flops = |i: usize| -> f64 {
        let (_, jb, _, l) = at(i);
        let (l, jb) = (l as f64, jb as f64);
        2.0 * l * jb * jb - 2.0 * jb * jb * jb / 3.0
    };
    let mut cur = take(0, &mut spare)?;
    PhaseClock::add_flops(clock.as_deref_mut(), PHASE_PANEL, panel_flops(0));
    PhaseClock::time(clock.as_deref_mut(), gpu, PHASE_PANEL, || {
        factor_panel(
            gpu,
            a,
            &raw,
            &mut ws,
            at(0),
            use_tsqr[0],
            rows.end,
            band,
            &mut cur,
            None,
        )
    })?;
    gpu.stage_mark("qr panel");
    for i in 0..panels.len() {
        let (j0, jb, r0, l) = at(i);
        let next_cols = if i + 1 < panels.len() {
            let (j1, jb1, _, _) = at(i + 1);
            j1..j1 + jb1
        } else {
            a.ncols()..a.ncols()
        };
        // The run of panel i: its columns end at `run_end`; the columns after it are
        // updated by the run's merged reflector once its last panel is factored (by
        // panel i itself when the run is one panel).
        let g = run_of[i];
        let run = runs[g].clone();
        let run_end = run_cols_end(g);
        let last_of_run = i + 1 == run.end;
        let pos = i - run.start;
        let buf = g % 2;
        let run_row0 = rows.start + (panels[run.start].0 - cols.start);
        let ncols = a.ncols();
        let mut next = None;
        {
            let (vv, tv) = (cur.v.block(0, 0, l, jb), cur.t.block(0, 0, jb, jb));
            if run.len() > 1 {
                let mb = &mut merged[buf];
                PhaseClock::time(clock.as_deref_mut(), gpu, PHASE_TRAILING, || {
                    if pos == 0 {
                        mb.reset(gpu, r0, l)?;
                    }
                    mb.append(gpu, r0, &vv, &tv, &mut ws.w, &mut ws.w2)
                })?;
            }
            let mut trailing = |a: &mut DevMat<T>,
                                ws: &mut Work<T>,
                                v: &crate::gpu::runtime::DevMatView<'_, T>,
                                t: &crate::gpu::runtime::DevMatView<'_, T>,
                                row0: usize,
                                c: Range<usize>|
             -> Result<()> {
                if c.is_empty() {
                    return Ok(());
                }
                let flops = 4.0 * v.nrows() as f64 * v.ncols() as f64 * c.len() as f64;
                PhaseClock::add_flops(clock.as_deref_mut(), PHASE_TRAILING, flops);
                PhaseClock::time(clock.as_deref_mut(), gpu, PHASE_TRAILING, || {
                    larfb_left(gpu, v, t, true, a, row0, c, &mut ws.w, &mut ws.w2)
                })
            };
            // The previous merged run's chunk for this panel: the columns after this
            // run, split over this run's panels but its last (a run of one panel takes
            // them all, before anything else touches them).
            let owed = pending.clone().and_then(|(b, row0, c)| {
                let parts = run.len().saturating_sub(1).max(1);
                (pos < parts).then(|| {
                    let at = |p: usize| c.start + c.len() * p / parts;
                    (b, row0, at(pos)..at(pos + 1))
                })
            });
            if pos + 1 >= run.len().saturating_sub(1).max(1) {
                pending = None;
            }
            // (a run of one panel: before its own reflector reaches those columns)
            let owed_first = run.len() == 1;
            if let (true, Some((b, row0, c))) = (owed_first, owed.clone()) {
                trailing(a, &mut ws, &merged[b].v(), &merged[b].t(), row0, c)?;
            }
            // The reflector for the columns after the run, with its first row.
            let run_views = if run.len() > 1 && last_of_run {
                Some((merged[buf].v(), merged[buf].t()))
            } else {
                None
            };
            let far = match (run.len() > 1, &run_views) {
                (false, _) => Some((&vv, &tv, r0)),
                (true, Some((v, t))) => Some((v, t, run_row0)),
                (true, None) => None,
            };
            if lookahead && !next_cols.is_empty() {
                // Panel i+1's columns first (inside the run: panel i; after it: the
                // run's reflector), then panel i+1 on stream 2 while the main stream
                // applies panel i to everything else.
                let (v1, t1, row1) = match far {
                    Some(f) if next_cols.start >= run_end => f,
                    _ => (&vv, &tv, r0),
                };
                larfb_left(
                    gpu,
                    v1,
                    t1,
                    true,
                    a,
                    row1,
                    next_cols.clone(),
                    &mut ws.w,
                    &mut ws.w2,
                )?;
                let mut nb_ = take(i + 1, &mut spare)?;
                let ready = record(&gpu.stream)?;
                gpu.stream2
                    .wait(&ready)
                    .map_err(crate::gpu::runtime::driver_err("look-ahead stream wait"))?;
                factor_panel(
                    gpu,
                    a,
                    &raw,
                    &mut ws,
                    at(i + 1),
                    use_tsqr[i + 1],
                    rows.end,
                    band,
                    &mut nb_,
                    Some(&gpu.stream2),
                )?;
                let done = record(&gpu.stream2)?;
                next = Some((nb_, done));
            }
            // Trailing columns: C −= V (Tᵀ (Vᵀ C)), panel i inside its run, the run's
            // reflector after it.
            let done_to = if next.is_some() {
                next_cols.end
            } else {
                j0 + jb
            };
            trailing(a, &mut ws, &vv, &tv, r0, done_to.min(run_end)..run_end)?;
            if let (false, Some((b, row0, c))) = (owed_first, owed) {
                trailing(a, &mut ws, &merged[b].v(), &merged[b].t(), row0, c)?;
            }
            if let Some((fv, ft, frow)) = far {
                // A merged run updates the next run's columns now, the rest later.
                let now_end = if run.len() > 1 && g + 1 < runs.len() {
                    run_cols_end(g + 1)
                } else {
                    ncols
                };
                trailing(a, &mut ws, fv, ft, frow, done_to.max(run_end)..now_end)?;
                if now_end < ncols {
                    pending = Some((buf, run_row0, now_end..ncols));
                }
            }
            if let Some(dm) = d.as_deref_mut() {
                let qc = dm.ncols();
                PhaseClock::time(clock.as_deref_mut(), gpu, PHASE_RHS, || {
                    larfb_left(gpu, &vv, &tv, true, dm, r0, 0..qc, &mut ws.w, &mut ws.w2)
                })?;
            }
            // Q[:, r0..r0+l] −= ((Q V) T) Vᵀ, for this panel or, merged, for a run of
            // panels once the merge is full or the last panel is in.
            if let (Some(qm), Some((wq, wq2))) = (q.as_deref_mut(), ws.wq.as_mut()) {
                let last = i + 1 == panels.len();
                PhaseClock::time(clock.as_deref_mut(), gpu, PHASE_Q, || {
                    match q_merge.as_mut() {
                        Some(qmg) => {
                            if qmg.block.k > 0 && qmg.block.k + jb > qmg.width {
                                let (v, t) = (qmg.block.v(), qmg.block.t());
                                q_times_block(gpu, qm, &v, &t, qmg.block.row0, wq, wq2)?;
                                qmg.block.k = 0;
                            }
                            if qmg.block.k == 0 {
                                qmg.block.reset(gpu, r0, l)?;
                            }
                            qmg.block
                                .append(gpu, r0, &vv, &tv, &mut qmg.w, &mut qmg.w2)?;
                            if last {
                                let (v, t) = (qmg.block.v(), qmg.block.t());
                                q_times_block(gpu, qm, &v, &t, qmg.block.row0, wq, wq2)?;
                            }
                            Ok(())
                        }
                        None => q_times_block(gpu, qm, &vv, &tv, r0, wq, wq2),
                    }
                })?;
            }
        }
        gpu.stage_mark("qr trailing, d, Q");
        let done_cur = match keep.as_deref_mut() {
            Some(list) => {
                list.push(Block {
                    row0: r0,
                    v: cur.v,
                    t: cur.t,
                });
                None
            }
            None => Some(cur),
        };
        if i + 1 == panels.len() {
            break;
        }
        if let Some(b) = done_cur {
            spare.push(b);
        }
        cur = match next {
            Some((b, done)) => {
                gpu.stream
                    .wait(&done)
                    .map_err(crate::gpu::runtime::driver_err("look-ahead stream wait"))?;
                gpu.stage_mark("qr look-ahead wait");
                b
            }
            None => {
                let mut b = take(i + 1, &mut spare)?;
                PhaseClock::add_flops(clock.as_deref_mut(), PHASE_PANEL, panel_flops(i + 1));
                PhaseClock::time(clock.as_deref_mut(), gpu, PHASE_PANEL, || {
                    factor_panel(
                        gpu,
                        a,
                        &raw,
                        &mut ws,
                        at(i + 1),
                        use_tsqr[i + 1],
                        rows.end,
                        band,
                        &mut b,
                        None,
                    )
                })?;
                gpu.stage_mark("qr panel");
                b
            }
        };
    }
    // Every access to A through `raw` is now ordered before the main stream's next
    // work; record that in A's cudarc event, so other streams order after it too.
    drop(a.buf_mut().device_ptr_mut(&gpu.stream));
    Ok(())
}

/// Factors the panel (j0, jb, r0, l) of `a` (rows up to `rows_end`) into `out` (V, τ,
/// T): the TSQR panel when `tsqr` (main stream), else one launch of
/// `fused_panel_qr` (on `stream2` through `raw` when given, else on the main stream),
/// or the per-column kernels.
#[allow(clippy::too_many_arguments)]
fn factor_panel<T: GpuScalar>(
    gpu: &Gpu,
    a: &mut DevMat<T>,
    raw: &RawMat,
    ws: &mut Work<T>,
    (j0, jb, r0, l): (usize, usize, usize, usize),
    tsqr: bool,
    rows_end: usize,
    band: Option<usize>,
    out: &mut PanelBufs<T>,
    stream2: Option<&cudarc::driver::CudaStream>,
) -> Result<()> {
    let (v, t, tau) = (&mut out.v, &mut out.t, &mut out.tau);
    if tsqr {
        assert!(
            stream2.is_none() && band.is_none(),
            "TSQR panels run in order, unbanded"
        );
        let work = ws
            .tsqr
            .as_mut()
            .expect("TSQR scratch made with the panel list");
        let mut vb = v.block_mut(0, 0, l, jb);
        let mut tb = t.block_mut(0, 0, jb, jb);
        gpu.tsqr_panel(work, a, r0, j0, l, jb, &mut vb, tau, &mut tb)
    } else if ws.fused.is_some()
        && ws.small
        && l <= SMALL_PANEL_FAST_ROWS
        && gpu.small_panel_fits::<T>(l, jb)
    {
        // A short panel: one block, in shared memory (R, V, τ, T as below).
        let mut vb = v.block_mut(0, 0, l, jb);
        let mut tb = t.block_mut(0, 0, jb, jb);
        let s = stream2.unwrap_or(&gpu.stream);
        gpu.small_panel_qr_on(raw, r0, j0, l, jb, band, &mut vb, tau, &mut tb, s)
    } else if let Some(fw) = ws.fused.as_mut() {
        // The whole panel in one cooperative launch: R (exact zeros below), V, τ, T.
        let mut vb = v.block_mut(0, 0, l, jb);
        let mut tb = t.block_mut(0, 0, jb, jb);
        match stream2 {
            Some(s) => {
                gpu.fused_panel_qr_on(fw, raw, r0, j0, l, jb, band, &mut vb, tau, &mut tb, s)
            }
            None => gpu.fused_panel_qr(fw, a, r0, j0, l, jb, band, &mut vb, tau, &mut tb),
        }
    } else {
        assert!(stream2.is_none(), "look-ahead needs the one-launch panel");
        // Panel (level 2): house + apply per column.
        for i in 0..jb {
            let (j, rj) = (j0 + i, r0 + i);
            let below = rows_end - rj - 1;
            let len = band.map_or(below, |b| b.min(below));
            gpu.house_at(a, rj, j, len, tau, i)?;
            gpu.panel_apply_in(a, j, rj, len, j + 1..j0 + jb, tau, i)?;
        }
        // V (explicit 1s/0s; exact zeros left below R's diagonal) and T.
        gpu.panel_extract_v(
            &mut a.block_mut(r0, j0, l, jb),
            &mut v.block_mut(0, 0, l, jb),
        )?;
        gpu.wy_build_t(
            &v.block(0, 0, l, jb),
            &tau.slice(0..jb),
            &mut t.block_mut(0, 0, jb, jb),
        )
    }
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
fn ts_gemm_pays<T: GpuScalar>(l: usize, nc: usize) -> bool {
    T::DTYPE == Dtype::F32
        && (2..=TS_GEMM_MAX_NC).contains(&nc)
        && l.div_ceil(4096) * nc.div_ceil(64) >= TS_GEMM_MIN_BLOCKS
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

/// The merge of [`blocked_qr_impl`]'s reflectors for Q's side: the merged block and
/// the scratch of its T products.
struct QMerge<T> {
    block: MergedBlock<T>,
    /// Most columns merged before the block is applied.
    width: usize,
    w: DevMat<T>,
    w2: DevMat<T>,
}

impl<T: GpuScalar> QMerge<T> {
    /// Scratch for merges of up to `rows`×`width`, appending panels of up to `nb`.
    fn new(gpu: &Gpu, rows: usize, width: usize, nb: usize) -> Result<Self> {
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
fn q_times_block<T: GpuScalar>(
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
fn accumulate_q_merged<T: GpuScalar>(
    gpu: &Gpu,
    blocks: &[Block<T>],
    q: &mut DevMat<T>,
    max_width: usize,
) -> Result<()> {
    let m = q.nrows();
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
        if g.len() == 1 {
            let b = &blocks[g.start];
            larfb_left(
                gpu,
                &b.v.view(),
                &b.t.view(),
                false,
                q,
                row0,
                row0..m,
                &mut w,
                &mut w2,
            )?;
            continue;
        }
        let mb = scratch
            .as_mut()
            .expect("scratch sized for every merged group");
        mb.reset(gpu, row0, m - row0)?;
        for b in &blocks[g.clone()] {
            mb.append(gpu, b.row0, &b.v.view(), &b.t.view(), &mut w, &mut w2)?;
        }
        larfb_left(
            gpu,
            &mb.v(),
            &mb.t(),
            false,
            q,
            row0,
            row0..m,
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
fn merge_groups(shapes: &[(usize, usize, usize)], m: usize, max_width: usize) -> Vec<Range<usize>> {
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

/// A block reflector merged from consecutive blocks B₁⋯B_g (as [`merge_groups`] forms
/// them): V = [V₁ V₂ ⋯] with each block's V at its own rows and zeros above, and T by
/// the forward recurrence (LAPACK larft, blocked): each new block's T_new joins as
/// T₁₂ = −T_acc·(V_accᵀV_new)·T_new, three GEMMs ([`MergedBlock::append`]).
pub(crate) struct MergedBlock<T> {
    v: DevMat<T>,
    t: DevMat<T>,
    row0: usize,
    rows: usize,
    k: usize,
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

/// Rank check of an upper-trapezoidal R on the device (docs/algorithms.md#rank-test): the first
/// column with |R_jj| ≤ rank_tol·‖R‖_F (or non-finite) is [`Error::RankDeficient`],
/// as `cpu::check_rank_of`. One launch (`panel_col_norms`: the n column norms and the
/// diagonal) and one download into page-locked memory, then one stream wait; the device and
/// host buffers are the [`RankScratch`] kept on [`Gpu`], so a check allocates nothing
/// once the device has checked an R at least this wide (no allocation, no
/// memset, no pageable staging in an update's timed path).
///
/// # Errors
/// [`Error::RankDeficient`], [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn check_rank_dev<T: GpuScalar>(
    gpu: &Gpu,
    r: &DevMat<T>,
    n: usize,
    rank_tol: f64,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let rank_scratch_slot = gpu.caches.get::<Option<RankScratch>>();
    let mut guard = rank_scratch_slot.lock().unwrap_or_else(|e| e.into_inner());
    let need = (2 * n * core::mem::size_of::<T>()).div_ceil(8);
    if guard.as_ref().is_none_or(|s| s.len() < need) {
        *guard = None;
        *guard = Some(RankScratch::new(gpu, need.next_power_of_two().max(1024))?);
    }
    let scratch = guard.as_mut().expect("made above");
    let h = scratch.norms_and_diag::<T>(gpu, r, n)?;
    let norms: Vec<f64> = h[..n].iter().map(|x| x.to_f64()).collect();
    let scale = norms.iter().fold(0.0f64, |s, x| s.max(x.abs()));
    let fro = if scale == 0.0 || !scale.is_finite() {
        scale
    } else {
        scale
            * norms
                .iter()
                .map(|x| (x / scale) * (x / scale))
                .sum::<f64>()
                .sqrt()
    };
    let tol = rank_tol * fro;
    for (j, x) in h[n..2 * n].iter().enumerate() {
        let rjj = x.to_f64().abs();
        if rjj <= tol || !rjj.is_finite() {
            return Err(Error::RankDeficient {
                column: j,
                r_jj: rjj,
                tol,
            });
        }
    }
    Ok(())
}

/// The buffers of [`check_rank_dev`], kept on [`Gpu`] (`Gpu::rank_scratch`): the
/// kernel's output on the device and its page-locked host copy, both `len` f64s (as
/// many f32s fit twice over), grown (never shrunk) when a wider R is checked.
pub(crate) struct RankScratch {
    dev: CudaSlice<f64>,
    host: PinnedHostSlice<f64>,
}

impl RankScratch {
    /// Allocates `len` f64s on the device and as many page-locked on the host.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    fn new(gpu: &Gpu, len: usize) -> Result<Self> {
        // Unset device memory; `norms_and_diag` reads back only the 2n entries its
        // launch has just written.
        let dev = crate::gpu::ffi::driver::alloc_uninit::<f64>(&gpu.stream, len).map_err(
            crate::gpu::runtime::alloc_err("the rank-check scratch", len * 8),
        )?;
        let host = gpu.alloc_pinned::<f64>(len)?;
        Ok(Self { dev, host })
    }

    /// f64s held (device and host alike).
    fn len(&self) -> usize {
        self.dev.len()
    }

    /// The n column norms of R(:, 0:n) (upper triangle) followed by its n diagonal
    /// entries, as `panel_col_norms` writes them, read back to the host (waits).
    ///
    /// # Errors
    /// [`Error::Driver`] (including an earlier asynchronous fault).
    fn norms_and_diag<T: GpuScalar>(&mut self, gpu: &Gpu, r: &DevMat<T>, n: usize) -> Result<&[T]> {
        let bytes = 2 * n * core::mem::size_of::<T>();
        assert!(bytes <= self.len() * 8, "rank scratch too small");
        {
            let mut out = crate::gpu::ffi::driver::view_words_as_mut::<T>(&mut self.dev, 2 * n);
            gpu.panel_col_norms(&r.block(0, 0, r.nrows(), n), &mut out)?;
        }
        // Only the f64 slots holding the 2n outputs come back (cudarc's memcpy_dtoh would
        // copy the whole host buffer, however wide an earlier check made it).
        let slots = bytes.div_ceil(8);
        gpu.count_launch();
        gpu.ctx
            .bind_to_thread()
            .map_err(crate::gpu::runtime::driver_err("rank check download"))?;
        crate::gpu::ffi::driver::download_words::<T>(
            &gpu.stream,
            &self.dev,
            &mut self.host,
            slots,
            2 * n,
        )
    }
}

/// A device copy of `a` (same shape and ld): one device-to-device memcpy, no memset.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn dup_mat<T: GpuScalar>(gpu: &Gpu, a: &DevMat<T>) -> Result<DevMat<T>> {
    a.dup(gpu)
}

#[cfg(test)]
mod tests {
    //! The one-launch panel against the per-column reference path and against the
    //! factorisation identities (docs/algorithms.md#accuracy-measures): exact zeros below R's
    //! diagonal, ‖RᵀR − AᵀA‖_F ≤ 10·m·u·‖A‖²_F, and with Q kept ‖QR − A‖_F ≤ 10·m·u·‖A‖_F,
    //! ‖QᵀQ − I‖_F ≤ 10·m·u, d = Qᵀb. Runs on a GPU; without one it prints that it
    //! skipped (a failure with `CUQR_REQUIRE_GPU=1`).
    use super::*;
    use crate::{Mat, Scalar};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn gpu() -> Option<Gpu> {
        crate::gpu::algo::householder::tests_gate()
    }

    /// Entries of magnitude in [0.1, 1) with random signs, zero below `band` (if any).
    fn rand_mat<T: Scalar>(seed: u64, m: usize, n: usize, band: Option<usize>) -> Mat<T> {
        let mut rng = StdRng::seed_from_u64(seed);
        Mat::from_fn(m, n, |i, j| {
            let x: f64 = rng.random_range(0.1..1.0);
            let x = if rng.random_bool(0.5) { x } else { -x };
            match band {
                Some(b) if i > j + b => T::ZERO,
                _ => T::from_f64(x),
            }
        })
    }

    fn to64<T: Scalar>(a: &Mat<T>) -> Mat<f64> {
        Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64())
    }

    struct Out {
        r: Mat<f64>,
        d: Mat<f64>,
        q: Option<Mat<f64>>,
    }

    #[allow(clippy::too_many_arguments)]
    fn factor<T: GpuScalar>(
        g: &Gpu,
        a: &Mat<T>,
        b: &Mat<T>,
        band: Option<usize>,
        nb: usize,
        with_q: bool,
        panel: PanelImpl,
    ) -> Out {
        let m = a.nrows();
        let mut da = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut dd = DevMat::from_host(g, b.as_ref()).unwrap();
        let mut dq = if with_q {
            let mut q = DevMat::<T>::zeros(g, m, m).unwrap();
            g.panel_set_identity(&mut q.view_mut()).unwrap();
            Some(q)
        } else {
            None
        };
        let n = a.ncols();
        blocked_qr_impl(
            g,
            &mut da,
            0..m,
            0..n,
            band,
            Some(&mut dd),
            dq.as_mut(),
            nb,
            None,
            panel,
            true,
            None,
        )
        .unwrap();
        Out {
            r: to64(&da.to_host(g).unwrap()),
            d: to64(&dd.to_host(g).unwrap()),
            q: dq.map(|q| to64(&q.to_host(g).unwrap())),
        }
    }

    fn check<T: GpuScalar>(
        g: &Gpu,
        seed: u64,
        (m, n): (usize, usize),
        band: Option<usize>,
        nb: usize,
        with_q: bool,
        panel: PanelImpl,
    ) {
        let a = rand_mat::<T>(seed, m, n, band);
        let b = rand_mat::<T>(seed + 1, m, 2, None);
        let (a64, b64) = (to64(&a), to64(&b));
        let tol = 10.0 * m as f64 * T::UNIT_ROUNDOFF;
        let what = format!("{m}x{n} {} nb {nb} band {band:?} {panel:?}", T::NAME);
        let out = factor(g, &a, &b, band, nb, with_q, panel);
        let refp = factor(g, &a, &b, band, nb, false, PanelImpl::PerColumn);
        for j in 0..n {
            for i in j + 1..m {
                assert!(
                    out.r[(i, j)] == 0.0,
                    "{what}: R({i},{j}) = {} ≠ 0",
                    out.r[(i, j)]
                );
            }
        }
        let na = a64.norm_fro();
        let r = Mat::from_fn(n, n, |i, j| out.r[(i, j)]);
        let mut gram = r.transpose().matmul(&r);
        let ata = a64.transpose().matmul(&a64);
        for j in 0..n {
            for i in 0..n {
                gram[(i, j)] -= ata[(i, j)];
            }
        }
        let e_gram = gram.norm_fro() / (na * na);
        assert!(
            e_gram <= tol,
            "{what}: ‖RᵀR − AᵀA‖/‖A‖² = {e_gram:e} > {tol:e}"
        );
        let mut diff = out.r.clone();
        for j in 0..n {
            for i in 0..m {
                diff[(i, j)] -= refp.r[(i, j)];
            }
        }
        let e_ref = diff.norm_fro() / na;
        assert!(
            e_ref <= 10.0 * tol,
            "{what}: ‖R_fused − R_per-column‖/‖A‖ = {e_ref:e} > {:e}",
            10.0 * tol
        );
        if let Some(q) = &out.q {
            let mut qr = q.matmul(&out.r);
            for j in 0..n {
                for i in 0..m {
                    qr[(i, j)] -= a64[(i, j)];
                }
            }
            let e_a = qr.norm_fro() / na;
            assert!(e_a <= tol, "{what}: ‖QR − A‖/‖A‖ = {e_a:e} > {tol:e}");
            let mut qtq = q.transpose().matmul(q);
            for i in 0..m {
                qtq[(i, i)] -= 1.0;
            }
            let e_q = qtq.norm_fro();
            assert!(e_q <= tol, "{what}: ‖QᵀQ − I‖ = {e_q:e} > {tol:e}");
            let mut qtb = q.transpose().matmul(&b64);
            for j in 0..2 {
                for i in 0..m {
                    qtb[(i, j)] -= out.d[(i, j)];
                }
            }
            let e_d = qtb.norm_fro() / b64.norm_fro();
            assert!(e_d <= tol, "{what}: ‖d − Qᵀb‖/‖b‖ = {e_d:e} > {tol:e}");
        }
    }

    fn cases<T: GpuScalar>(g: &Gpu) {
        use PanelImpl::{Auto, FusedInPlace};
        check::<T>(g, 1, (300, 200), None, 32, true, Auto);
        check::<T>(g, 2, (97, 97), None, 16, true, Auto);
        check::<T>(g, 3, (33, 33), None, 64, true, Auto);
        check::<T>(g, 4, (70, 45), None, 1, true, Auto);
        check::<T>(g, 5, (700, 130), None, 64, true, FusedInPlace);
        check::<T>(g, 6, (501, 77), None, 24, true, FusedInPlace);
        check::<T>(g, 7, (400, 120), Some(9), 32, true, Auto);
        check::<T>(g, 8, (400, 120), Some(9), 32, false, FusedInPlace);
        check::<T>(g, 9, (6007, 70), None, 64, false, Auto);
        check::<T>(g, 10, (6007, 41), None, 32, false, FusedInPlace);
        check::<T>(g, 11, (20011, 33), None, 33, false, Auto);
        check::<T>(g, 12, (300, 200), None, 32, true, PanelImpl::FusedInOrder);
        check::<T>(
            g,
            13,
            (400, 120),
            Some(9),
            32,
            true,
            PanelImpl::FusedInOrder,
        );
        // TSQR panels (32 columns, the last narrower), with and without Q; a band
        // falls back to the fused panel.
        check::<T>(g, 14, (300, 200), None, 32, true, PanelImpl::Tsqr);
        check::<T>(g, 15, (6007, 70), None, 64, false, PanelImpl::Tsqr);
        check::<T>(g, 16, (1000, 45), None, 64, true, PanelImpl::Tsqr);
        check::<T>(g, 17, (20011, 33), None, 33, false, PanelImpl::Tsqr);
        check::<T>(g, 18, (400, 120), Some(9), 32, true, PanelImpl::Tsqr);
        // Block sizes wider than the one-launch panel: sub-panels of ≤ 64 columns whose
        // reflectors merge into n_b-wide blocks (100 = 50 + 50, 200 = 4·50, 130 = 3·44;
        // the last block narrower), and banded ones applied a sub-panel at a time;
        // against the per-column panel with the same n_b.
        check::<T>(g, 22, (700, 300), None, 100, true, Auto);
        check::<T>(g, 23, (900, 470), None, 200, true, Auto);
        check::<T>(g, 24, (5000, 330), None, 130, false, Auto);
        check::<T>(g, 25, (600, 250), Some(9), 100, true, Auto);
        check::<T>(g, 26, (800, 300), None, 256, false, Auto);
    }

    /// A panel too tall for the slab variant takes the TSQR panel by itself (Auto).
    #[test]
    fn tall_panels_take_tsqr() {
        if let Some(g) = gpu() {
            check::<f64>(&g, 19, (300_007, 40), None, 64, false, PanelImpl::Auto);
            check::<f32>(&g, 20, (300_007, 40), None, 64, false, PanelImpl::Auto);
        }
    }

    /// A tall enough f32 factorisation that panel 0's trailing update (8 columns) and
    /// both panels' d update (2 columns) take W = VᵀC from `ts_gemm` (137 chunks of 4096
    /// rows): R against AᵀA and against the per-column panels, as `check`.
    #[test]
    fn tall_f32_trailing_takes_the_chunked_product() {
        assert!(ts_gemm_pays::<f32>(557_057, 8) && ts_gemm_pays::<f32>(557_025, 2));
        assert!(!ts_gemm_pays::<f64>(557_057, 8), "f64 keeps cuBLAS");
        assert!(!ts_gemm_pays::<f32>(557_057, 1), "one column is a GEMV");
        assert!(
            !ts_gemm_pays::<f32>(300_007, 8),
            "too few chunks to fill the GPU"
        );
        if let Some(g) = gpu() {
            check::<f32>(&g, 21, (557_057, 40), None, 64, false, PanelImpl::Auto);
        }
    }

    /// Look-ahead (panel i+1 on stream 2 during panel i's trailing update) against
    /// every panel in order on the main stream: the same arithmetic, so R, d and Q
    /// agree to m·u (the trailing GEMMs are split into two column ranges, which cuBLAS
    /// may round differently).
    fn lookahead_case<T: GpuScalar>(g: &Gpu, seed: u64, (m, n): (usize, usize), nb: usize) {
        let a = rand_mat::<T>(seed, m, n, None);
        let b = rand_mat::<T>(seed + 1, m, 2, None);
        let na = to64(&a).norm_fro();
        let nbn = to64(&b).norm_fro();
        let tol = m as f64 * T::UNIT_ROUNDOFF;
        let what = format!("{m}x{n} {} nb {nb}", T::NAME);
        for with_q in [false, true] {
            let la = factor(g, &a, &b, None, nb, with_q, PanelImpl::Auto);
            let io = factor(g, &a, &b, None, nb, with_q, PanelImpl::FusedInOrder);
            let diff = |x: &Mat<f64>, y: &Mat<f64>| {
                Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)] - y[(i, j)]).norm_fro()
            };
            let e_r = diff(&la.r, &io.r) / na;
            assert!(
                e_r <= tol,
                "{what} Q {with_q}: ‖R_la − R_in-order‖/‖A‖ = {e_r:e}"
            );
            let e_d = diff(&la.d, &io.d) / nbn;
            assert!(
                e_d <= tol,
                "{what} Q {with_q}: ‖d_la − d_in-order‖/‖b‖ = {e_d:e}"
            );
            if let (Some(q1), Some(q2)) = (&la.q, &io.q) {
                let e_q = diff(q1, q2) / (m as f64).sqrt();
                assert!(e_q <= tol, "{what}: ‖Q_la − Q_in-order‖/√m = {e_q:e}");
            }
        }
    }

    #[test]
    fn lookahead_matches_in_order_panels() {
        if let Some(g) = gpu() {
            for (i, &(m, n, nb)) in [(1000, 700, 64), (2001, 333, 48), (129, 129, 8)]
                .iter()
                .enumerate()
            {
                lookahead_case::<f64>(&g, 40 + i as u64, (m, n), nb);
                lookahead_case::<f32>(&g, 50 + i as u64, (m, n), nb);
            }
        }
    }

    #[test]
    fn merge_groups_take_consecutive_full_height_blocks() {
        let m = 1000;
        // five 64-column panels from row 0, then a 40-column one
        let s = [
            (0, 1000, 64),
            (64, 936, 64),
            (128, 872, 64),
            (192, 808, 64),
            (256, 744, 64),
            (320, 680, 40),
        ];
        assert_eq!(merge_groups(&s, m, 256), vec![0..4, 4..6]);
        assert_eq!(merge_groups(&s, m, 128), vec![0..2, 2..4, 4..6]);
        let single: Vec<Range<usize>> = (0..6).map(|i| i..i + 1).collect();
        assert_eq!(merge_groups(&s, m, 0), single);
        // a banded block (fewer rows) or a gap between blocks ends a run
        let t = [(0, 1000, 32), (32, 100, 32), (64, 936, 32), (100, 900, 32)];
        assert_eq!(merge_groups(&t, m, 256), vec![0..1, 1..2, 2..3, 3..4]);
        // a block wider than the limit stands alone
        assert_eq!(
            merge_groups(&[(0, 1000, 300), (300, 700, 8)], m, 256),
            vec![0..1, 1..2]
        );
        assert!(merge_groups(&[], m, 256).is_empty());
    }

    /// Q accumulated from merged block reflectors equals Q from one block at a time
    /// within m·u (‖ΔQ‖_F/√m), and is orthogonal to 10·m·u.
    fn merged_q_case<T: GpuScalar>(g: &Gpu, seed: u64, (m, n): (usize, usize), nb: usize) {
        let a = rand_mat::<T>(seed, m, n, None);
        let mut da = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut blocks = Vec::new();
        blocked_qr_band(
            g,
            &mut da,
            0..m,
            0..n,
            None,
            None,
            None,
            nb,
            Some(&mut blocks),
        )
        .unwrap();
        let q_of = |width: usize| -> Mat<f64> {
            let mut q = DevMat::<T>::zeros(g, m, m).unwrap();
            accumulate_q_merged(g, &blocks, &mut q, width).unwrap();
            to64(&q.to_host(g).unwrap())
        };
        let q0 = q_of(0);
        let tol = m as f64 * T::UNIT_ROUNDOFF;
        for width in [128, Q_MERGE_WIDTH, 1 << 20] {
            let qw = q_of(width);
            let e =
                Mat::from_fn(m, m, |i, j| qw[(i, j)] - q0[(i, j)]).norm_fro() / (m as f64).sqrt();
            assert!(
                e <= tol,
                "{m}x{n} {} nb {nb} width {width}: ‖ΔQ‖/√m = {e:e}",
                T::NAME
            );
            let mut orth = 0.0f64;
            for i in 0..m {
                for j in 0..m {
                    let dot: f64 = (0..m).map(|k| qw[(k, i)] * qw[(k, j)]).sum();
                    let d = dot - if i == j { 1.0 } else { 0.0 };
                    orth += d * d;
                }
            }
            assert!(
                orth.sqrt() <= 10.0 * tol,
                "{m}x{n} {} width {width}: ‖QᵀQ − I‖ = {:e}",
                T::NAME,
                orth.sqrt()
            );
        }
    }

    #[test]
    fn merged_block_reflectors_give_the_same_q() {
        if let Some(g) = gpu() {
            merged_q_case::<f64>(&g, 70, (700, 450), 64);
            merged_q_case::<f32>(&g, 71, (533, 301), 48);
            merged_q_case::<f64>(&g, 72, (300, 300), 8);
        }
    }

    /// With Q updated in place (column insertion's use), a Q of at least
    /// `Q_MERGE_MIN_ROWS` rows takes the panels' reflectors merged (up to
    /// `Q_MERGE_WIDTH` columns, then the rest): Q equals the one-block-at-a-time
    /// backward accumulation of the same factorisation's blocks within m·u
    /// (‖ΔQ‖_F/√m), and R and d equal that factorisation's exactly (Q's side does not
    /// touch them).
    fn q_merged_in_place_case<T: GpuScalar>(g: &Gpu, seed: u64, (m, n): (usize, usize), nb: usize) {
        assert!(m >= Q_MERGE_MIN_ROWS && n > Q_MERGE_WIDTH && n > nb);
        let a = rand_mat::<T>(seed, m, n, None);
        let b = rand_mat::<T>(seed + 1, m, 2, None);
        let out = factor(g, &a, &b, None, nb, true, PanelImpl::Auto);
        let mut da = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut dd = DevMat::from_host(g, b.as_ref()).unwrap();
        let mut blocks = Vec::new();
        blocked_qr_impl(
            g,
            &mut da,
            0..m,
            0..n,
            None,
            Some(&mut dd),
            None,
            nb,
            Some(&mut blocks),
            PanelImpl::Auto,
            true,
            None,
        )
        .unwrap();
        let what = format!("{m}x{n} {} nb {nb}", T::NAME);
        assert_eq!(out.r, to64(&da.to_host(g).unwrap()), "{what}: R");
        assert_eq!(out.d, to64(&dd.to_host(g).unwrap()), "{what}: d");
        let mut q0 = DevMat::<T>::zeros(g, m, m).unwrap();
        accumulate_q_merged(g, &blocks, &mut q0, 0).unwrap();
        let q0 = to64(&q0.to_host(g).unwrap());
        let q = out.q.expect("factored with Q");
        let e = Mat::from_fn(m, m, |i, j| q[(i, j)] - q0[(i, j)]).norm_fro() / (m as f64).sqrt();
        let tol = m as f64 * T::UNIT_ROUNDOFF;
        assert!(
            e <= tol,
            "{what}: ‖Q_merged − Q_per-block‖/√m = {e:e} > {tol:e}"
        );
        // Not a copy of the input: Q has left the identity everywhere it should.
        assert!(
            q[(m - 1, 0)] != 0.0 && q[(0, 0)] != 1.0,
            "{what}: Q left unchanged"
        );
    }

    #[test]
    fn q_merged_in_place_matches_per_block() {
        if let Some(g) = gpu() {
            // 15 panels of 20: a merge of 12 panels (240 columns; a 13th would pass
            // 256), then one of the last 3. f32: 8 panels of 32 fill 256 exactly, then
            // one of 14 columns.
            q_merged_in_place_case::<f64>(&g, 80, (4133, 300), 20);
            q_merged_in_place_case::<f32>(&g, 81, (4100, 270), 32);
        }
    }

    /// A profiled factorisation (events around every phase, no look-ahead) computes
    /// exactly what the in-order panels compute, and every phase it ran took time.
    fn profiled_case<T: GpuScalar>(g: &Gpu, seed: u64, (m, n): (usize, usize), nb: usize) {
        let a = rand_mat::<T>(seed, m, n, None);
        let b = rand_mat::<T>(seed + 1, m, 2, None);
        let io = factor(g, &a, &b, None, nb, true, PanelImpl::FusedInOrder);
        let mut da = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut dd = DevMat::from_host(g, b.as_ref()).unwrap();
        let mut dq = DevMat::<T>::zeros(g, m, m).unwrap();
        g.panel_set_identity(&mut dq.view_mut()).unwrap();
        let mut clock = QrClock::new();
        blocked_qr_impl(
            g,
            &mut da,
            0..m,
            0..n,
            None,
            Some(&mut dd),
            Some(&mut dq),
            nb,
            None,
            PanelImpl::Auto,
            true,
            Some(&mut clock),
        )
        .unwrap();
        let what = format!("{m}x{n} {} nb {nb}", T::NAME);
        assert!(to64(&da.to_host(g).unwrap()) == io.r, "{what}: R differs");
        assert!(to64(&dd.to_host(g).unwrap()) == io.d, "{what}: d differs");
        assert!(
            Some(to64(&dq.to_host(g).unwrap())) == io.q,
            "{what}: Q differs"
        );
        let t = clock.totals_ms().unwrap();
        for (name, i) in [
            ("panel", PHASE_PANEL),
            ("trailing", PHASE_TRAILING),
            ("rhs", PHASE_RHS),
            ("Q", PHASE_Q),
        ] {
            assert!(
                t[i] > 0.0 && t[i].is_finite(),
                "{what}: {name} phase {}",
                t[i]
            );
        }
        assert_eq!(
            t[PHASE_RANK], 0.0,
            "{what}: no rank check inside blocked_qr"
        );
    }

    #[test]
    fn profiled_factorisation_matches_in_order_panels() {
        if let Some(g) = gpu() {
            profiled_case::<f64>(&g, 60, (1000, 700), 64);
            profiled_case::<f32>(&g, 61, (777, 301), 48);
        }
    }

    #[test]
    fn fused_panel_matches_per_column_and_identities_f64() {
        if let Some(g) = gpu() {
            cases::<f64>(&g);
        }
    }

    #[test]
    fn fused_panel_matches_per_column_and_identities_f32() {
        if let Some(g) = gpu() {
            cases::<f32>(&g);
        }
    }
}

#[cfg(test)]
mod panel_tests {
    //! One panel through `fused_panel_qr` or the TSQR panel against the per-column kernels
    //! (`householder_house` + `panel_apply`, `panel_extract_v`, `wy_build_t`):
    //! R, V, τ and T agree to a few ulps of the data.
    use super::*;
    use crate::{Mat, Scalar};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn close<T: Scalar>(what: &str, x: &Mat<T>, y: &Mat<T>, tol: f64) {
        assert_eq!((x.nrows(), x.ncols()), (y.nrows(), y.ncols()));
        let mut worst = (0.0f64, 0, 0);
        for j in 0..x.ncols() {
            for i in 0..x.nrows() {
                let d = (x[(i, j)].to_f64() - y[(i, j)].to_f64()).abs();
                if d > worst.0 || d.is_nan() {
                    worst = (d, i, j);
                }
            }
        }
        let (d, i, j) = worst;
        assert!(
            d <= tol,
            "{what}: |fused − per-column| = {d:e} at ({i},{j}): {} vs {}",
            x[(i, j)].to_f64(),
            y[(i, j)].to_f64()
        );
    }

    /// Which panel kernel a test runs against the per-column reference.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Variant {
        /// `fused_panel_qr`, slab in shared memory where it fits.
        Slab,
        /// `fused_panel_qr` forced in place.
        InPlace,
        /// The TSQR panel (jb ≤ 32).
        Tsqr,
    }

    fn one<T: GpuScalar>(g: &Gpu, seed: u64, m: usize, jb: usize, variant: Variant) {
        one_scaled::<T>(g, seed, m, jb, variant, 1.0);
    }

    /// [`one`] on the random panel times `scale` (a power of two: the reference stays
    /// exact), with R compared relative to `scale` (V, τ and T do not scale).
    fn one_scaled<T: GpuScalar>(
        g: &Gpu,
        seed: u64,
        m: usize,
        jb: usize,
        variant: Variant,
        scale: f64,
    ) {
        one_col_scaled::<T>(g, seed, m, jb, variant, &vec![scale; jb]);
    }

    /// The m×jb panel `a` on the device and its V (m×jb), τ and T (jb×jb) outputs filled
    /// with NaN, so that an entry a panel kernel leaves unwritten shows.
    fn poisoned_panel<T: GpuScalar>(
        g: &Gpu,
        a: &Mat<T>,
    ) -> (DevMat<T>, DevMat<T>, DevVec<T>, DevMat<T>) {
        let (m, jb) = (a.nrows(), a.ncols());
        let nan = T::from_f64(f64::NAN);
        let fa = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut fv = DevMat::<T>::zeros(g, m, jb).unwrap();
        fv.fill(g, nan).unwrap();
        let mut ftau = DevVec::<T>::zeros(g, jb).unwrap();
        ftau.fill(g, nan).unwrap();
        let mut ft = DevMat::<T>::zeros(g, jb, jb).unwrap();
        ft.fill(g, nan).unwrap();
        (fa, fv, ftau, ft)
    }

    /// The whole of `a` (m×jb) as one TSQR panel: R in place, V, τ, T out.
    fn tsqr_whole<T: GpuScalar>(
        g: &Gpu,
        a: &mut DevMat<T>,
        v: &mut DevMat<T>,
        tau: &mut DevVec<T>,
        t: &mut DevMat<T>,
    ) {
        let (m, jb) = (a.nrows(), a.ncols());
        let mut work = TsqrWork::new(g, m).unwrap();
        g.tsqr_panel(
            &mut work,
            a,
            0,
            0,
            m,
            jb,
            &mut v.view_mut(),
            tau,
            &mut t.view_mut(),
        )
        .unwrap();
    }

    /// [`one`] on the random panel with column j times `scales[j]` (powers of two):
    /// QR(A·D) = Q·(R·D), so V, τ and T are those of A and R's column j is compared
    /// relative to `scales[j]`.
    fn one_col_scaled<T: GpuScalar>(
        g: &Gpu,
        seed: u64,
        m: usize,
        jb: usize,
        variant: Variant,
        scales: &[f64],
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = Mat::<T>::from_fn(m, jb, |_, j| {
            T::from_f64(rng.random_range(-1.0..1.0) * scales[j])
        });
        let (lo, hi) = scales
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), &s| (l.min(s), h.max(s)));
        let what = format!(
            "{m}x{jb} {} {variant:?} column scales {lo:e}..{hi:e}",
            T::NAME
        );
        // Per-column reference.
        let mut ra = DevMat::from_host(g, a.as_ref()).unwrap();
        let mut rtau = DevVec::<T>::zeros(g, jb).unwrap();
        for i in 0..jb {
            g.house_at(&mut ra, i, i, m - i - 1, &mut rtau, i).unwrap();
            g.panel_apply_in(&mut ra, i, i, m - i - 1, i + 1..jb, &rtau, i)
                .unwrap();
        }
        let mut rv = DevMat::<T>::zeros(g, m, jb).unwrap();
        g.panel_extract_v(&mut ra.view_mut(), &mut rv.view_mut())
            .unwrap();
        let mut rt = DevMat::<T>::zeros(g, jb, jb).unwrap();
        g.wy_build_t(&rv.view(), &rtau.slice(0..jb), &mut rt.view_mut())
            .unwrap();
        // The variant, outputs poisoned first.
        let (mut fa, mut fv, mut ftau, mut ft) = poisoned_panel(g, &a);
        if variant == Variant::Tsqr {
            tsqr_whole(g, &mut fa, &mut fv, &mut ftau, &mut ft);
        } else {
            let mut work = FusedPanelWork::new(g).unwrap();
            work.force_in_place = variant == Variant::InPlace;
            g.fused_panel_qr(
                &mut work,
                &mut fa,
                0,
                0,
                m,
                jb,
                None,
                &mut fv.view_mut(),
                &mut ftau,
                &mut ft.view_mut(),
            )
            .unwrap();
        }
        let tol = 50.0 * m as f64 * T::UNIT_ROUNDOFF;
        let tau_f = Mat::from_fn(jb, 1, |i, _| ftau.to_vec(g).unwrap()[i]);
        let tau_r = Mat::from_fn(jb, 1, |i, _| rtau.to_vec(g).unwrap()[i]);
        close(&format!("{what} tau"), &tau_f, &tau_r, tol);
        let unscaled = |x: Mat<T>| Mat::from_fn(m, jb, |i, j| x[(i, j)].to_f64() / scales[j]);
        close(
            &format!("{what} R"),
            &unscaled(fa.to_host(g).unwrap()),
            &unscaled(ra.to_host(g).unwrap()),
            tol,
        );
        close(
            &format!("{what} V"),
            &fv.to_host(g).unwrap(),
            &rv.to_host(g).unwrap(),
            tol,
        );
        close(
            &format!("{what} T"),
            &ft.to_host(g).unwrap(),
            &rt.to_host(g).unwrap(),
            tol,
        );
    }

    #[test]
    fn single_panels_match_per_column() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        for variant in [Variant::Slab, Variant::InPlace] {
            one::<f64>(&g, 1, 40, 8, variant);
            one::<f64>(&g, 2, 33, 33, variant);
            one::<f64>(&g, 3, 1000, 33, variant);
            one::<f64>(&g, 4, 9001, 64, variant);
            one::<f32>(&g, 5, 1000, 33, variant);
            one::<f32>(&g, 6, 77, 1, variant);
        }
    }

    #[test]
    fn tsqr_panels_match_per_column() {
        // One leaf (40, 33, 32 rows), two levels (1000: 2 leaves, the last ragged),
        // three (70001), one column; the tree's R, V, τ and T reconstructed must be the
        // per-column factorisation's to rounding.
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        let t = Variant::Tsqr;
        one::<f64>(&g, 21, 40, 8, t);
        one::<f64>(&g, 22, 33, 32, t);
        one::<f64>(&g, 23, 32, 32, t);
        one::<f64>(&g, 24, 1000, 32, t);
        one::<f64>(&g, 25, 9001, 17, t);
        one::<f64>(&g, 26, 70_001, 32, t);
        one::<f64>(&g, 27, 777, 1, t);
        one::<f32>(&g, 28, 1000, 32, t);
        one::<f32>(&g, 29, 70_001, 20, t);
        one::<f32>(&g, 30, 300, 3, t);
        // A leaf whose short last block would start a chain of its own (3 blocks, two a
        // chain, the last of one row): it joins the chain before.
        one::<f64>(&g, 31, 577, 32, t);
        one::<f32>(&g, 32, 1089, 13, t);
    }

    #[test]
    fn extreme_scales_neither_overflow_nor_underflow() {
        // Squares of these entries overflow or underflow: the power-of-two scaling of
        // the partial norms must keep R, V, τ and T as the per-column (scaled) kernels
        // compute them (docs/algorithms.md#householder-vectors,
        // docs/algorithms.md#householder-norm-scaling).
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        for variant in [Variant::Slab, Variant::InPlace, Variant::Tsqr] {
            let jb = if variant == Variant::Tsqr { 32 } else { 40 };
            one_scaled::<f64>(&g, 7, 3000, jb, variant, 2f64.powi(700));
            one_scaled::<f64>(&g, 8, 3000, jb, variant, 2f64.powi(-700));
            one_scaled::<f32>(&g, 9, 3000, jb, variant, 2f64.powi(90));
            one_scaled::<f32>(&g, 10, 3000, jb, variant, 2f64.powi(-90));
        }
    }

    /// The rank check with its scratch kept on `Gpu` (the updates' check): a wide R
    /// grows the scratch, narrower ones after it read back only their own outputs; the
    /// verdicts (column, |R_jj|, tolerance) are those of the CPU check on the same R.
    fn rank_checks_case<T: GpuScalar>(g: &Gpu) {
        for (seed, m, n, bad) in [
            (1u64, 9usize, 7usize, None),
            (2, 3100, 3000, None),
            (3, 40, 5, Some(3usize)),
            (4, 3100, 3000, Some(2999)),
            (5, 12, 11, Some(0)),
            (6, 33, 31, None),
        ] {
            let mut rng = StdRng::seed_from_u64(seed);
            // Upper triangular, entries of magnitude in [0.1, 1), random signs.
            let mut r = Mat::<T>::from_fn(m, n, |i, j| {
                let x: f64 = rng.random_range(0.1..1.0);
                let x = if rng.random_bool(0.5) { x } else { -x };
                if i > j {
                    T::ZERO
                } else {
                    T::from_f64(x)
                }
            });
            if let Some(j) = bad {
                r[(j, j)] = T::from_f64(1e-30);
            }
            let dr = DevMat::from_host(g, r.as_ref()).unwrap();
            let got = check_rank_dev(g, &dr, n, 1e-8);
            let want = crate::base::dims::check_rank_of(&r, n, 1e-8);
            match (&got, &want) {
                (Ok(()), Ok(())) => assert!(bad.is_none(), "n={n}: deficiency missed"),
                (
                    Err(Error::RankDeficient { column: cg, .. }),
                    Err(Error::RankDeficient { column: cc, .. }),
                ) => {
                    assert_eq!((Some(*cg), *cg), (bad, *cc), "n={n}");
                }
                _ => panic!("n={n}: GPU {got:?} against CPU {want:?}"),
            }
        }
    }

    #[test]
    fn rank_checks_for_updates_wide_then_narrow() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        rank_checks_case::<f64>(&g);
        rank_checks_case::<f32>(&g);
    }

    /// A TSQR panel of a rank-deficient matrix (a zero column, a repeated column, a
    /// multiple of another, and a column that is zero in the first rows): the
    /// per-column reference's reflectors are not unique there (τ = 0 against a
    /// reflection), so the factorisation itself is checked, in f64 on the host:
    /// Q₁ = (I − V T Vᵀ)[I; 0] has orthonormal columns and Q₁R = A, both to
    /// 50·m·u, R exactly zero below its diagonal.
    fn rank_deficient_tsqr<T: GpuScalar>(g: &Gpu, seed: u64, m: usize) {
        let jb = 32;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut a = Mat::<T>::from_fn(m, jb, |_, _| T::from_f64(rng.random_range(-1.0..1.0)));
        for i in 0..m {
            a[(i, 5)] = T::ZERO;
            a[(i, 9)] = a[(i, 3)];
            a[(i, 20)] = T::from_f64(2.0 * a[(i, 1)].to_f64());
            if i < m / 2 {
                a[(i, 0)] = T::ZERO;
            }
        }
        let what = format!("{m}x{jb} {} rank-deficient TSQR", T::NAME);
        let (mut fa, mut fv, mut ftau, mut ft) = poisoned_panel(g, &a);
        tsqr_whole(g, &mut fa, &mut fv, &mut ftau, &mut ft);
        let r = fa.to_host(g).unwrap();
        let v = fv.to_host(g).unwrap();
        let t = ft.to_host(g).unwrap();
        let f = |x: T| x.to_f64();
        // Q₁ = [I; 0] − V·(T·V₁ᵀ), with V₁ the top jb×jb of V.
        let mut tv1 = vec![0.0f64; jb * jb];
        for i in 0..jb {
            for j in 0..jb {
                tv1[i + j * jb] = (0..jb).map(|k| f(t[(i, k)]) * f(v[(j, k)])).sum();
            }
        }
        let mut q = vec![0.0f64; m * jb];
        for i in 0..m {
            for j in 0..jb {
                let vt: f64 = (0..jb).map(|k| f(v[(i, k)]) * tv1[k + j * jb]).sum();
                q[i + j * m] = if i == j { 1.0 } else { 0.0 } - vt;
            }
        }
        let tol = 50.0 * m as f64 * T::UNIT_ROUNDOFF;
        let (mut orth, mut back, mut norm_a) = (0.0f64, 0.0f64, 0.0f64);
        for i in 0..jb {
            for j in 0..jb {
                let d: f64 = (0..m).map(|k| q[k + i * m] * q[k + j * m]).sum::<f64>()
                    - if i == j { 1.0 } else { 0.0 };
                orth += d * d;
                if i > j {
                    assert!(
                        r[(i, j)] == T::ZERO,
                        "{what}: R({i},{j}) = {:e}",
                        f(r[(i, j)])
                    );
                }
            }
        }
        for i in 0..m {
            for j in 0..jb {
                let qr: f64 = (0..=j.min(jb - 1))
                    .map(|k| q[i + k * m] * f(r[(k, j)]))
                    .sum();
                let x = f(a[(i, j)]);
                back += (qr - x) * (qr - x);
                norm_a += x * x;
            }
        }
        let (orth, back) = (orth.sqrt(), (back / norm_a).sqrt());
        assert!(orth <= tol, "{what}: ‖Q₁ᵀQ₁ − I‖ = {orth:e} > {tol:e}");
        assert!(back <= tol, "{what}: ‖Q₁R − A‖/‖A‖ = {back:e} > {tol:e}");
        assert!(
            ftau.to_vec(g)
                .unwrap()
                .iter()
                .all(|x| x.to_f64().is_finite()),
            "{what}: τ not finite"
        );
    }

    #[test]
    fn tsqr_panel_of_a_rank_deficient_matrix() {
        // One leaf, two levels, and a tall panel whose leaf 0 chains its blocks in
        // reverse (warp 0's first block is not the panel's top block).
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        for m in [200, 3001, 70_001] {
            rank_deficient_tsqr::<f64>(&g, 51, m);
            rank_deficient_tsqr::<f32>(&g, 52, m);
        }
    }

    #[test]
    fn tsqr_panel_with_columns_of_far_apart_scales() {
        // Columns scaled by powers of two far apart (squares and cross products of the
        // unscaled entries overflow or underflow): each column is scaled by its own
        // power of two inside the leaves, so R, V, τ and T must match the per-column
        // kernels, R column by column relative to its scale.
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        let e64 = [700, -700, 0, 300, -1000, 500, -300, 0];
        let e32 = [90, -90, 0, 40, -100, 60, -40, 0];
        for (jb, m) in [(32, 3001), (13, 70_001)] {
            let s64: Vec<f64> = (0..jb).map(|j| 2f64.powi(e64[j % 8])).collect();
            one_col_scaled::<f64>(&g, 41, m, jb, Variant::Tsqr, &s64);
            let s32: Vec<f64> = (0..jb).map(|j| 2f64.powi(e32[j % 8])).collect();
            one_col_scaled::<f32>(&g, 42, m, jb, Variant::Tsqr, &s32);
        }
    }
}

/// The GPU gate of the in-crate GPU tests: a device, or `None` after printing that the
/// test skipped (a panic with `CUQR_REQUIRE_GPU=1`).
#[cfg(test)]
pub(crate) fn tests_gate() -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(g) => Some(g),
        Err(e) if std::env::var("CUQR_REQUIRE_GPU").as_deref() == Ok("1") => {
            panic!("CUQR_REQUIRE_GPU=1 but no GPU: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}
