//! The types the steps of `cuqr bench updates` share: what a sweep runs with ([`Ctx`])
//! and what one point's measurement gives ([`Row`], [`Accuracy`]). They sit below the
//! steps that fill them (run, cpu, sweep) and the ones that print them (tables,
//! charts), so that imports point one way.

use std::sync::Arc;

use cuqr::Gpu;

/// Everything a sweep needs besides the points.
pub(super) struct Ctx<'a> {
    pub(super) gpu: Option<&'a Arc<Gpu>>,
    pub(super) reps: usize,
    pub(super) cpu: bool,
    pub(super) cpu_budget: f64,
    /// CPU points of one state timed at once (one serial update a thread).
    pub(super) cpu_threads: usize,
    /// Time the TUS/TUT protocols where the seeds give their ratios.
    pub(super) transfers: bool,
    /// Time the seeds' Wavefront strategy at every point with a Givens stage.
    pub(super) wavefront: bool,
    pub(super) profile: bool,
    pub(super) stages: bool,
    /// How the GPU states insert rows (`--row-insertion`).
    pub(super) row_insertion: cuqr::RowInsertion,
}

/// One measured row.
#[derive(Clone, Debug, Default)]
pub(super) struct Row {
    pub(super) upd_ms: Option<f64>,
    pub(super) launches: Option<u64>,
    pub(super) refac_ms: Option<f64>,
    pub(super) solve_ms: Option<f64>,
    pub(super) cpu_ms: Option<f64>,
    pub(super) cpu_runs: usize,
    /// (d) faer's CPU refactorisation + least-squares solve of the updated matrix.
    pub(super) faer_ms: Option<f64>,
    pub(super) faer_runs: usize,
    /// ‖x_update − x_refactorise‖/‖x_refactorise‖ (GPU only).
    pub(super) ex: Option<f64>,
    /// The update (+ solve) with the seeds' Wavefront strategy, where it applies.
    pub(super) wf_ms: Option<f64>,
    /// Launches of the Wavefront update alone.
    pub(super) wf_launches: Option<u64>,
    /// e_x of the Wavefront update's solution.
    pub(super) wf_ex: Option<f64>,
    /// RR-comp: the seeds' three-stream row removal (Wavefront, separate Q/R/d).
    pub(super) streams_ms: Option<f64>,
    /// TUS: copy of the state from page-locked host memory + update + solve.
    pub(super) tus_ms: Option<f64>,
    /// (b) under TUS: copy of the updated A and b from page-locked memory + (b).
    pub(super) tus_base_ms: Option<f64>,
    /// TUT: TUS + copy of the new state back to page-locked host memory.
    pub(super) tut_ms: Option<f64>,
    /// ACC: e_Q and e_A (where Q is kept) and ‖L‖_F of the updated state.
    pub(super) acc: Option<Accuracy>,
}

/// The accuracy measures of an updated state (Frobenius norms, f64;
/// docs/algorithms.md#accuracy-measures).
#[derive(Clone, Copy, Debug)]
pub(super) struct Accuracy {
    pub(super) e_q: Option<f64>,
    pub(super) e_a: Option<f64>,
    pub(super) l_norm: f64,
}
