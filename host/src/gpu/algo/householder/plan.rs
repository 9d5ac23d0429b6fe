//! The panel layout of the blocked QR, fixed before any work so that panel i+1 is known
//! while panel i is applied: the block widths, each panel's columns and kind, and the runs
//! of panels whose trailing update is merged (docs/algorithms.md#blocked-householder-qr).

#[allow(unused_imports)]
use super::*;

/// The block widths a factorisation cuts its panels from.
pub(super) struct BlockWidths {
    /// The requested block size, grouped (n_b under `FUSED_MAX_JB`) and at most the
    /// columns to factor.
    pub(super) nb_req: usize,
    /// Whether a requested block wider than the one-launch panel is factored in
    /// `FUSED_MAX_JB`-wide sub-panels.
    pub(super) split: bool,
    /// The panel width before narrowing: `FUSED_MAX_JB` when split, else `nb_req`.
    pub(super) nb: usize,
}

impl BlockWidths {
    /// The widths for block size `nb` (already at most `BUILD_T_MAX_K`).
    pub(super) fn new(params: &BlockedQrParams, nb: usize) -> Self {
        let ncols = params.cols.len();
        let nb_req = nb.min(ncols);
        let auto = params.panel == PanelImpl::Auto;
        // A block size under FUSED_MAX_JB is grouped (unbanded, default panels): its blocks
        // are factored inside one-launch panels of ⌊FUSED_MAX_JB/n_b⌋·n_b columns, where each
        // reflector reaches the rest of its panel as it is made (as a block's reflectors
        // would reach the next block of the same panel), and the panel's reflectors reach
        // the later columns, d and Q as one block: one launch and one pass over Q per panel
        // instead of per block. Taken one block at a time, n_b = 1 cost a launch and three
        // GEMMs over Q's block a column, 230 µs (BS column insertion at n_b = 1: 0.08× of
        // refactorising, H100, docs/performance.md).
        let nb_req = if auto && params.band.is_none() && nb_req < FUSED_MAX_JB {
            (FUSED_MAX_JB / nb_req * nb_req).min(ncols)
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
        let split = auto && nb_req > FUSED_MAX_JB;
        let nb = if split { FUSED_MAX_JB } else { nb_req };
        Self { nb_req, split, nb }
    }
}

/// The panels of one factorisation and the runs they are merged into.
pub(super) struct PanelPlan {
    /// The factorisation's rows, columns, band and panel choice.
    pub(super) params: BlockedQrParams,
    /// Each panel's first column and width, in order.
    pub(super) panels: Vec<(usize, usize)>,
    /// Whether each panel is a TSQR panel.
    pub(super) use_tsqr: Vec<bool>,
    /// The widest panel (sizes the GEMM workspace and the panel buffers).
    pub(super) nb: usize,
    /// Rows of the tallest panel buffer.
    pub(super) lmax: usize,
    /// Runs of consecutive panels (indices) whose trailing update is merged.
    pub(super) runs: Vec<Range<usize>>,
    /// The run of each panel.
    pub(super) run_of: Vec<usize>,
    /// The widest run of more than one panel, if any.
    pub(super) kmax: Option<usize>,
}

/// Where panel i sits: its block of A, its run and the columns of the panel after it.
pub(super) struct PanelStep {
    /// The panel's index.
    pub(super) i: usize,
    /// First column, width, first row and rows of the panel.
    pub(super) j0: usize,
    pub(super) jb: usize,
    pub(super) r0: usize,
    pub(super) l: usize,
    /// Columns of panel i+1 (empty, at A's last column, for the last panel).
    pub(super) next_cols: Range<usize>,
    /// The panel's run, its panels and the end of its columns.
    pub(super) g: usize,
    pub(super) run: Range<usize>,
    pub(super) run_end: usize,
    /// The panel's place in its run.
    pub(super) pos: usize,
    /// The merge buffer of the run.
    pub(super) buf: usize,
    /// First row of the run's first panel.
    pub(super) run_row0: usize,
}

impl PanelStep {
    /// Whether the panel ends its run.
    pub(super) fn last_of_run(&self) -> bool {
        self.i + 1 == self.run.end
    }
}

impl PanelPlan {
    /// Cuts `params.cols` into panels (TSQR, narrowed to shared memory, split inside
    /// wide blocks, or `widths.nb` wide) and groups them into runs.
    pub(super) fn new<T: GpuScalar>(
        gpu: &Gpu,
        params: &BlockedQrParams,
        widths: &BlockWidths,
        slab_ok: bool,
        narrow: bool,
    ) -> Self {
        let (panels, use_tsqr) = cut_panels::<T>(gpu, params, widths, slab_ok, narrow);
        // The widest panel sizes the GEMM workspace and the panel buffers.
        let nb = panels.iter().map(|&(_, jb)| jb).max().unwrap_or(1);
        let lmax = params.span_rows(params.rows.start, nb);
        let runs = merge_runs(params, widths, &panels, &use_tsqr);
        let run_of: Vec<usize> = runs
            .iter()
            .enumerate()
            .flat_map(|(g, r)| r.clone().map(move |_| g))
            .collect();
        let run_width = |r: &Range<usize>| -> usize { panels[r.clone()].iter().map(|p| p.1).sum() };
        let kmax = runs.iter().filter(|r| r.len() > 1).map(run_width).max();
        Self {
            params: params.clone(),
            panels,
            use_tsqr,
            nb,
            lmax,
            runs,
            run_of,
            kmax,
        }
    }

    /// Panel i as (first column, width, first row, rows).
    pub(super) fn at(&self, i: usize) -> (usize, usize, usize, usize) {
        let (j0, jb) = self.panels[i];
        let r0 = self.params.rows.start + (j0 - self.params.cols.start);
        (j0, jb, r0, self.params.span_rows(r0, jb))
    }

    /// The column after run g's last panel.
    pub(super) fn run_cols_end(&self, g: usize) -> usize {
        let (j, w) = self.panels[self.runs[g].end - 1];
        j + w
    }

    /// Flops of panel i as LAPACK counts an unblocked QR: 2ℓ·jb² − 2jb³/3.
    pub(super) fn panel_flops(&self, i: usize) -> f64 {
        let (_, jb, _, l) = self.at(i);
        let (l, jb) = (l as f64, jb as f64);
        2.0 * l * jb * jb - 2.0 * jb * jb * jb / 3.0
    }

    /// Where panel i sits, in A of `ncols` columns.
    pub(super) fn step(&self, i: usize, ncols: usize) -> PanelStep {
        let (j0, jb, r0, l) = self.at(i);
        let next_cols = if i + 1 < self.panels.len() {
            let (j1, jb1, _, _) = self.at(i + 1);
            j1..j1 + jb1
        } else {
            ncols..ncols
        };
        // The run of panel i: its columns end at `run_end`; the columns after it are
        // updated by the run's merged reflector once its last panel is factored (by
        // panel i itself when the run is one panel).
        let g = self.run_of[i];
        let run = self.runs[g].clone();
        let run_row0 = self.params.rows.start + (self.panels[run.start].0 - self.params.cols.start);
        PanelStep {
            i,
            j0,
            jb,
            r0,
            l,
            next_cols,
            g,
            run_end: self.run_cols_end(g),
            pos: i - run.start,
            buf: g % 2,
            run,
            run_row0,
        }
    }
}

/// The panels (first column, width, TSQR or not), fixed before any work so that
/// panel i+1 is known while panel i is applied.
fn cut_panels<T: GpuScalar>(
    gpu: &Gpu,
    params: &BlockedQrParams,
    widths: &BlockWidths,
    slab_ok: bool,
    narrow: bool,
) -> (Vec<(usize, usize)>, Vec<bool>) {
    let (rows, cols) = (&params.rows, &params.cols);
    // A tall panel whose rows do not fit the slab variant (which would stream them from
    // global memory once a column) is a TSQR panel instead, when nothing but A and d is
    // updated. It reads its rows a fixed number of times whatever its width, so it is
    // TSQR_MAX_COLS wide (or the columns left) whatever nb.
    let elem = core::mem::size_of::<T>();
    let tsqr_for = |l: usize, jb: usize| -> bool {
        params.band.is_none()
            && jb <= TSQR_MAX_COLS
            && l >= jb
            && match params.panel {
                PanelImpl::Tsqr => true,
                PanelImpl::Auto => narrow && slab_ok && !gpu.fused_panel_in_shared(l, jb, elem),
                _ => false,
            }
    };
    let nb = widths.nb;
    let mut panels = Vec::new();
    let mut use_tsqr = Vec::new();
    let mut j0 = cols.start;
    while j0 < cols.end {
        let r0 = rows.start + (j0 - cols.start);
        let wide = TSQR_MAX_COLS.min(cols.end - j0);
        let tall = tsqr_for(params.span_rows(r0, wide), wide);
        let jb = if tall {
            wide
        } else if narrow && slab_ok {
            // Narrower, if that lets the panel's rows sit in shared memory.
            let jb = nb.min(cols.end - j0);
            gpu.fused_panel_width(params.span_rows(r0, jb), jb, elem)
        } else if widths.split {
            // Equal sub-panels of at most FUSED_MAX_JB inside each n_b-wide block, so
            // that a run of them is exactly one block.
            let off = j0 - cols.start;
            let b0 = off - off % widths.nb_req;
            let bw = widths.nb_req.min(cols.len() - b0);
            let sub = bw.div_ceil(bw.div_ceil(FUSED_MAX_JB));
            (b0 + ((off - b0) / sub + 1) * sub).min(b0 + bw) - off
        } else {
            nb.min(cols.end - j0)
        };
        panels.push((j0, jb));
        use_tsqr.push(tall);
        j0 += jb;
    }
    (panels, use_tsqr)
}

/// Runs of panels whose trailing update is merged (unbanded panels only: a merged
/// V must reach the last row; not TSQR panels: their very tall V makes W = VᵀC a
/// GEMM with a tiny output, slower merged): run g's panels update the run's own
/// columns one by one; at its last panel, the run's merged reflector of up to
/// TRAILING_MERGE_WIDTH columns (GEMMs with that inner dimension instead of jb)
/// updates the next run's columns at once and the columns after those in chunks,
/// one after each of the next run's panels but its last, so that every look-ahead
/// panel again has GEMM work beside it.
fn merge_runs(
    params: &BlockedQrParams,
    widths: &BlockWidths,
    panels: &[(usize, usize)],
    use_tsqr: &[bool],
) -> Vec<Range<usize>> {
    let rows = &params.rows;
    let merge_width = if widths.split {
        widths.nb_req
    } else {
        TRAILING_MERGE_WIDTH
    };
    if params.band.is_some() || !(params.merge_trailing || widths.split) {
        return (0..panels.len()).map(|i| i..i + 1).collect();
    }
    let shapes: Vec<(usize, usize, usize)> = panels
        .iter()
        .map(|&(j0, jb)| {
            let r0 = rows.start + (j0 - params.cols.start);
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
}
