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
    // A block size under FUSED_MAX_JB is grouped (unbanded, default panels): its blocks
    // are factored inside one-launch panels of ⌊FUSED_MAX_JB/n_b⌋·n_b columns, where each
    // reflector reaches the rest of its panel as it is made (as a block's reflectors
    // would reach the next block of the same panel), and the panel's reflectors reach
    // the later columns, d and Q as one block: one launch and one pass over Q per panel
    // instead of per block. Taken one block at a time, n_b = 1 cost a launch and three
    // GEMMs over Q's block a column, 230 µs (BS column insertion at n_b = 1: 0.08× of
    // refactorising, H100, docs/performance.md).
    let nb_req = if panel == PanelImpl::Auto && band.is_none() && nb_req < FUSED_MAX_JB {
        (FUSED_MAX_JB / nb_req * nb_req).min(cols.len())
    } else {
        nb_req
    };
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

mod panel;
mod q;
#[cfg(test)]
mod tests;
mod trailing;

use panel::*;
pub(crate) use q::*;
#[cfg(test)]
pub(crate) use tests::tests_gate;
pub(crate) use trailing::*;
