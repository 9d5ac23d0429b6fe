//! The panel loop of the blocked QR (docs/algorithms.md#blocked-householder-qr): each
//! panel's block reflector merged into its run, applied to the next panel's columns
//! (look-ahead), the trailing columns, d and Q, then the next panel factored.

#[allow(unused_imports)]
use super::*;

use crate::gpu::runtime::DevMatView;
use cudarc::driver::{CudaEvent, CudaStream};

/// A block reflector I − V T Vᵀ as (V, T, first row).
type Reflector<'r, 'v, T> = (&'r DevMatView<'v, T>, &'r DevMatView<'v, T>, usize);

/// The merged reflectors of the runs: two buffers (run g's reflector is still being
/// applied, in chunks, while run g+1's is merged) and the columns still owed one.
pub(super) struct RunMerge<T> {
    bufs: Vec<MergedBlock<T>>,
    /// The merged reflector still owed to columns: (buffer, first row, columns).
    pending: Option<(usize, usize, Range<usize>)>,
}

impl<T: GpuScalar> RunMerge<T> {
    /// Buffers for the plan's widest run (none when no run has more than one panel).
    pub(super) fn new(gpu: &Gpu, plan: &PanelPlan) -> Result<Self> {
        let rows = plan.params.rows.len();
        let bufs = match plan.kmax {
            Some(k) => vec![
                MergedBlock::new(gpu, rows, k)?,
                MergedBlock::new(gpu, rows, k)?,
            ],
            None => Vec::new(),
        };
        Ok(Self {
            bufs,
            pending: None,
        })
    }

    /// The previous merged run's chunk for panel `s`: the columns after that run, split
    /// over this run's panels but its last (a run of one panel takes them all, before
    /// anything else touches them). Forgets the owed columns at the chunk that ends them.
    fn owed(&mut self, s: &PanelStep) -> Option<(usize, usize, Range<usize>)> {
        let parts = s.run.len().saturating_sub(1).max(1);
        let owed = self.pending.clone().and_then(|(b, row0, c)| {
            (s.pos < parts).then(|| {
                let at = |p: usize| c.start + c.len() * p / parts;
                (b, row0, at(s.pos)..at(s.pos + 1))
            })
        });
        if s.pos + 1 >= parts {
            self.pending = None;
        }
        owed
    }
}

/// The state of the panel loop: the operands, the plan, the workspace, Q's merge, the
/// spare panel buffers and the look-ahead choice.
pub(super) struct PanelLoop<'g, 'o, T> {
    gpu: &'g Gpu,
    a: &'o mut DevMat<T>,
    out: QrOutputs<'o, T>,
    plan: PanelPlan,
    ws: Work<T>,
    q_merge: Option<QMerge<T>>,
    /// A by its address for look-ahead panels on stream 2 (see [`blocked_qr_with`]).
    raw: RawMat,
    /// Panel buffers: fresh per panel when kept, else two reused sets (look-ahead
    /// factors panel i+1 into one while panel i's are read from the other).
    spare: Vec<PanelBufs<T>>,
    lookahead: bool,
}

impl<'g, 'o, T: GpuScalar> PanelLoop<'g, 'o, T> {
    /// Allocates Q's merge, the workspace and the spare panel buffers, and chooses
    /// look-ahead.
    pub(super) fn new(
        gpu: &'g Gpu,
        a: &'o mut DevMat<T>,
        out: QrOutputs<'o, T>,
        plan: PanelPlan,
        fused: Option<FusedPanelWork<T>>,
    ) -> Result<Self> {
        let p = &plan.params;
        // Q's side merged too (unbanded, Q of at least Q_MERGE_MIN_ROWS rows): the panels'
        // reflectors are merged into block reflectors of up to Q_MERGE_WIDTH columns and
        // each is applied to Q's columns at once, one pass over them instead of one per
        // panel (column insertion's 10000 rows × 200 new columns: 10 passes of three GEMMs
        // with inner dimension 20 took 18 ms of a 40 ms update on an H100).
        let q_merge = match out.q.as_deref() {
            Some(qm)
                if p.band.is_none() && plan.panels.len() > 1 && qm.nrows() >= Q_MERGE_MIN_ROWS =>
            {
                Some(QMerge::new(
                    gpu,
                    p.rows.len(),
                    Q_MERGE_WIDTH.min(p.cols.len()),
                    plan.nb,
                )?)
            }
            _ => None,
        };
        let ws = Work::new(gpu, a, &out, &plan, q_merge.as_ref(), fused)?;
        let lookahead = choose_lookahead::<T>(gpu, &plan, &ws, out.clock.is_some());
        // A by its address for look-ahead panels on stream 2 (see the doc comment). The
        // guard is dropped at once; its event, recorded on the main stream before any of
        // this function's work, orders nothing that matters here.
        let raw = RawMat::alias_of(gpu, a);
        let mut spare: Vec<PanelBufs<T>> = Vec::new();
        if out.keep.is_none() {
            for _ in 0..if lookahead { 2 } else { 1 } {
                spare.push(PanelBufs::new(gpu, plan.lmax, plan.nb)?);
            }
        }
        Ok(Self {
            gpu,
            a,
            out,
            plan,
            ws,
            q_merge,
            raw,
            spare,
            lookahead,
        })
    }

    /// Factors every panel and applies it, in order.
    pub(super) fn run(mut self, mut merge: RunMerge<T>) -> Result<()> {
        let npanels = self.plan.panels.len();
        let mut cur = self.take(0)?;
        self.factor_in_order(0, &mut cur)?;
        for i in 0..npanels {
            let step = self.plan.step(i, self.a.ncols());
            let next = self.apply_panel(&mut merge, &step, &cur)?;
            self.gpu.stage_mark("qr trailing, d, Q");
            let done_cur = match self.out.keep.as_deref_mut() {
                Some(list) => {
                    list.push(Block {
                        row0: step.r0,
                        v: cur.v,
                        t: cur.t,
                    });
                    None
                }
                None => Some(cur),
            };
            if i + 1 == npanels {
                break;
            }
            if let Some(b) = done_cur {
                self.spare.push(b);
            }
            cur = match next {
                Some((b, done)) => {
                    self.gpu
                        .stream
                        .wait(&done)
                        .map_err(crate::gpu::runtime::driver_err("look-ahead stream wait"))?;
                    self.gpu.stage_mark("qr look-ahead wait");
                    b
                }
                None => {
                    let mut b = self.take(i + 1)?;
                    self.factor_in_order(i + 1, &mut b)?;
                    b
                }
            };
        }
        // Every access to A through `raw` is now ordered before the main stream's next
        // work; record that in A's cudarc event, so other streams order after it too.
        drop(self.a.buf_mut().device_ptr_mut(&self.gpu.stream));
        Ok(())
    }

    /// A spare panel buffer set, or a fresh one sized for panel i.
    fn take(&mut self, i: usize) -> Result<PanelBufs<T>> {
        match self.spare.pop() {
            Some(b) => Ok(b),
            None => {
                let (_, jb, _, l) = self.plan.at(i);
                PanelBufs::new(self.gpu, l, jb)
            }
        }
    }

    /// Factors panel i into `out`, on `stream2` when given (look-ahead), else on the
    /// main stream.
    fn factor(
        &mut self,
        i: usize,
        out: &mut PanelBufs<T>,
        stream2: Option<&CudaStream>,
    ) -> Result<()> {
        factor_panel(
            self.gpu,
            self.a,
            &self.raw,
            &mut self.ws,
            self.plan.at(i),
            self.plan.use_tsqr[i],
            self.plan.params.rows.end,
            self.plan.params.band,
            out,
            stream2,
        )
    }

    /// Factors panel i on the main stream, timed as the panel phase.
    fn factor_in_order(&mut self, i: usize, out: &mut PanelBufs<T>) -> Result<()> {
        let flops = self.plan.panel_flops(i);
        PhaseClock::add_flops(self.out.clock.as_deref_mut(), PHASE_PANEL, flops);
        // The clock is lent out for the call (the panel itself does not use it).
        let mut clock = self.out.clock.take();
        let done = PhaseClock::time(clock.as_deref_mut(), self.gpu, PHASE_PANEL, || {
            self.factor(i, out, None)
        });
        self.out.clock = clock;
        done?;
        self.gpu.stage_mark("qr panel");
        Ok(())
    }

    /// Applies the panel of `step` (V, T in `cur`) everywhere it reaches: its run's
    /// merge, the next panel's columns and that panel on stream 2 (look-ahead), the
    /// trailing columns (its own run's, those owed by the previous run, those after its
    /// run), d and Q. Returns the look-ahead panel with the event that ends it.
    fn apply_panel(
        &mut self,
        merge: &mut RunMerge<T>,
        s: &PanelStep,
        cur: &PanelBufs<T>,
    ) -> Result<Option<(PanelBufs<T>, CudaEvent)>> {
        let (vv, tv) = (cur.v.block(0, 0, s.l, s.jb), cur.t.block(0, 0, s.jb, s.jb));
        if s.run.len() > 1 {
            self.merge_into_run(merge, s, &vv, &tv)?;
        }
        let owed = merge.owed(s);
        // (a run of one panel: before its own reflector reaches those columns)
        let owed_first = s.run.len() == 1;
        if let (true, Some((b, row0, c))) = (owed_first, owed.clone()) {
            self.trailing((&merge.bufs[b].v(), &merge.bufs[b].t(), row0), c)?;
        }
        // The reflector for the columns after the run, with its first row.
        let run_views = if s.run.len() > 1 && s.last_of_run() {
            Some((merge.bufs[s.buf].v(), merge.bufs[s.buf].t()))
        } else {
            None
        };
        let far = match (s.run.len() > 1, &run_views) {
            (false, _) => Some((&vv, &tv, s.r0)),
            (true, Some((v, t))) => Some((v, t, s.run_row0)),
            (true, None) => None,
        };
        let next = if self.lookahead && !s.next_cols.is_empty() {
            Some(self.look_ahead(s, far, (&vv, &tv, s.r0))?)
        } else {
            None
        };
        // Trailing columns: C −= V (Tᵀ (Vᵀ C)), panel i inside its run, the run's
        // reflector after it.
        let done_to = if next.is_some() {
            s.next_cols.end
        } else {
            s.j0 + s.jb
        };
        self.trailing((&vv, &tv, s.r0), done_to.min(s.run_end)..s.run_end)?;
        if let (false, Some((b, row0, c))) = (owed_first, owed) {
            self.trailing((&merge.bufs[b].v(), &merge.bufs[b].t(), row0), c)?;
        }
        if let Some(f) = far {
            // A merged run updates the next run's columns now, the rest later.
            let ncols = self.a.ncols();
            let now_end = if s.run.len() > 1 && s.g + 1 < self.plan.runs.len() {
                self.plan.run_cols_end(s.g + 1)
            } else {
                ncols
            };
            self.trailing(f, done_to.max(s.run_end)..now_end)?;
            if now_end < ncols {
                merge.pending = Some((s.buf, s.run_row0, now_end..ncols));
            }
        }
        self.update_rhs((&vv, &tv, s.r0))?;
        self.update_q(s, &vv, &tv)?;
        Ok(next)
    }

    /// Appends the panel's reflector to its run's merged block (reset at the run's first
    /// panel).
    fn merge_into_run(
        &mut self,
        merge: &mut RunMerge<T>,
        s: &PanelStep,
        vv: &DevMatView<'_, T>,
        tv: &DevMatView<'_, T>,
    ) -> Result<()> {
        let (gpu, ws) = (self.gpu, &mut self.ws);
        let mb = &mut merge.bufs[s.buf];
        PhaseClock::time(self.out.clock.as_deref_mut(), gpu, PHASE_TRAILING, || {
            if s.pos == 0 {
                mb.reset(gpu, s.r0, s.l)?;
            }
            mb.append(gpu, s.r0, vv, tv, &mut ws.w, &mut ws.w2)
        })
    }

    /// Panel i+1's columns first (inside the run: panel i; after it: the run's
    /// reflector `far`), then panel i+1 on stream 2 while the main stream applies
    /// panel i to everything else. Returns panel i+1's buffers and the event that
    /// ends it.
    fn look_ahead(
        &mut self,
        s: &PanelStep,
        far: Option<Reflector<'_, '_, T>>,
        panel: Reflector<'_, '_, T>,
    ) -> Result<(PanelBufs<T>, CudaEvent)> {
        let gpu = self.gpu;
        let (v1, t1, row1) = match far {
            Some(f) if s.next_cols.start >= s.run_end => f,
            _ => panel,
        };
        let ws = &mut self.ws;
        larfb_left(
            gpu,
            v1,
            t1,
            true,
            self.a,
            row1,
            s.next_cols.clone(),
            &mut ws.w,
            &mut ws.w2,
        )?;
        let mut next = self.take(s.i + 1)?;
        let ready = record_lookahead(&gpu.stream)?;
        gpu.stream2
            .wait(&ready)
            .map_err(crate::gpu::runtime::driver_err("look-ahead stream wait"))?;
        self.factor(s.i + 1, &mut next, Some(&gpu.stream2))?;
        let done = record_lookahead(&gpu.stream2)?;
        Ok((next, done))
    }

    /// C −= V (Tᵀ (Vᵀ C)) for A's columns `c` (nothing when empty), timed and counted
    /// as the trailing phase.
    fn trailing(&mut self, (v, t, row0): Reflector<'_, '_, T>, c: Range<usize>) -> Result<()> {
        if c.is_empty() {
            return Ok(());
        }
        let (gpu, ws, a) = (self.gpu, &mut self.ws, &mut *self.a);
        let flops = 4.0 * v.nrows() as f64 * v.ncols() as f64 * c.len() as f64;
        PhaseClock::add_flops(self.out.clock.as_deref_mut(), PHASE_TRAILING, flops);
        PhaseClock::time(self.out.clock.as_deref_mut(), gpu, PHASE_TRAILING, || {
            larfb_left(gpu, v, t, true, a, row0, c, &mut ws.w, &mut ws.w2)
        })
    }

    /// d[rows, :] −= V (Tᵀ (Vᵀ d)), timed as the right-hand-side phase.
    fn update_rhs(&mut self, (v, t, r0): Reflector<'_, '_, T>) -> Result<()> {
        let (gpu, ws) = (self.gpu, &mut self.ws);
        if let Some(dm) = self.out.d.as_deref_mut() {
            let qc = dm.ncols();
            PhaseClock::time(self.out.clock.as_deref_mut(), gpu, PHASE_RHS, || {
                larfb_left(gpu, v, t, true, dm, r0, 0..qc, &mut ws.w, &mut ws.w2)
            })?;
        }
        Ok(())
    }

    /// Q[:, r0..r0+l] −= ((Q V) T) Vᵀ, for this panel or, merged, for a run of
    /// panels once the merge is full or the last panel is in.
    fn update_q(
        &mut self,
        s: &PanelStep,
        vv: &DevMatView<'_, T>,
        tv: &DevMatView<'_, T>,
    ) -> Result<()> {
        let gpu = self.gpu;
        let (Some(qm), Some((wq, wq2))) = (self.out.q.as_deref_mut(), self.ws.wq.as_mut()) else {
            return Ok(());
        };
        let last = s.i + 1 == self.plan.panels.len();
        let (r0, l, jb) = (s.r0, s.l, s.jb);
        let q_merge = &mut self.q_merge;
        PhaseClock::time(
            self.out.clock.as_deref_mut(),
            gpu,
            PHASE_Q,
            || match q_merge.as_mut() {
                Some(qmg) => {
                    if qmg.block.k > 0 && qmg.block.k + jb > qmg.width {
                        let (v, t) = (qmg.block.v(), qmg.block.t());
                        q_times_block(gpu, qm, &v, &t, qmg.block.row0, wq, wq2)?;
                        qmg.block.k = 0;
                    }
                    if qmg.block.k == 0 {
                        qmg.block.reset(gpu, r0, l)?;
                    }
                    qmg.block.append(gpu, r0, vv, tv, &mut qmg.w, &mut qmg.w2)?;
                    if last {
                        let (v, t) = (qmg.block.v(), qmg.block.t());
                        q_times_block(gpu, qm, &v, &t, qmg.block.row0, wq, wq2)?;
                    }
                    Ok(())
                }
                None => q_times_block(gpu, qm, vv, tv, r0, wq, wq2),
            },
        )
    }
}

impl<T: GpuScalar> Work<T> {
    /// The GEMM intermediates (as tall as the widest panel or run, as wide as the
    /// columns from the first one or d's), Q's (Q's rows × the widest merge or panel),
    /// and the TSQR scratch when some panel takes it.
    fn new(
        gpu: &Gpu,
        a: &DevMat<T>,
        out: &QrOutputs<'_, T>,
        plan: &PanelPlan,
        q_merge: Option<&QMerge<T>>,
        fused: Option<FusedPanelWork<T>>,
    ) -> Result<Self> {
        let p = &plan.params;
        let wrows = plan.nb.max(plan.kmax.unwrap_or(0));
        let qcols = out.d.as_deref().map_or(0, |x| x.ncols());
        let wcols = (a.ncols() - p.cols.start).max(qcols).max(1);
        let mut ws = Work {
            w: DevMat::zeros(gpu, wrows, wcols)?,
            w2: DevMat::zeros(gpu, wrows, wcols)?,
            wq: match out.q.as_deref() {
                Some(qm) => {
                    let w = q_merge.map_or(plan.nb, |x| x.width);
                    Some((
                        DevMat::zeros(gpu, qm.nrows(), w)?,
                        DevMat::zeros(gpu, qm.nrows(), w)?,
                    ))
                }
                None => None,
            },
            fused,
            tsqr: None,
            small: matches!(p.panel, PanelImpl::Auto | PanelImpl::FusedInOrder),
        };
        if let Some(i) = plan.use_tsqr.iter().position(|&t| t) {
            // The first TSQR panel is the tallest.
            let (j0, _) = plan.panels[i];
            ws.tsqr = Some(TsqrWork::new(
                gpu,
                p.span_rows(p.rows.start + (j0 - p.cols.start), 1),
            )?);
        }
        Ok(ws)
    }
}

/// Look-ahead pays when a panel leaves most SMs to the concurrent trailing update:
/// the slab variant (about 32 blocks). The in-place variant of very tall panels
/// streams A on every SM, and running the trailing GEMM beside it was slower
/// (1048576×32 on an H100, docs/performance.md). Its fixed cost (three more GEMM
/// launches and two events a panel) needs a few panels to pay back: with three
/// (column insertion's 20 new columns, H100) it was slower.
fn choose_lookahead<T: GpuScalar>(gpu: &Gpu, plan: &PanelPlan, ws: &Work<T>, timed: bool) -> bool {
    let any_tsqr = ws.tsqr.is_some();
    plan.panels.len() >= LOOKAHEAD_MIN_PANELS
        && ws.fused.as_ref().is_some_and(|f| !f.force_in_place)
        && plan.params.panel != PanelImpl::FusedInOrder
        && !any_tsqr
        && !timed
        && {
            let (_, jb, _, l) = plan.at(1);
            gpu.fused_panel_in_shared(l, jb, core::mem::size_of::<T>())
        }
}

/// Records an event on `s` for the look-ahead's stream order.
fn record_lookahead(s: &CudaStream) -> Result<CudaEvent> {
    s.record_event(None)
        .map_err(crate::gpu::runtime::driver_err(
            "recording a look-ahead event",
        ))
}
