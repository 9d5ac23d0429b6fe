//! The GPU path: validation, the choice of path by the state's kind and the swap; the
//! algorithm is `gpu/algo/delete_rows.rs`.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::gpu::algo::delete_rows::{
    self as algo, refactorising_pays, DeletedRows, RowsDeleted, ThinSmallSide,
};
use crate::gpu::algo::reduced::DowndateRefusal;

/// Deletes rows k0..k0+p on the device (docs/algorithms.md#row-deletion; docs/design.md): the
/// rotations on copies of Q, R and d ([`algo::full`]; `params.row_removal`: two-phase, or the
/// seed composite / separate-streams designs), the rank check, and the swap. For large p
/// (`RowRemoval::Refactorise`, or `Auto` where `refactorising_pays`) no rotations:
/// A′ = Q(kept, 0:n)·R and b′ = Q(kept, :)·d ([`algo::refactorised_data`]), then A′ is
/// factorised again with the state's rank tolerance.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    use crate::base::params::{FactorParams, RowRemoval};
    use crate::state::gpu::GpuQr;
    let Plan { m, n, p, k0 } = plan(st.dims, k0, p)?;
    if st.dims.policy == QPolicy::Thin {
        return run_gpu_thin(st, Plan { m, n, p, k0 });
    }
    if st.dims.policy == QPolicy::None {
        return run_gpu_reduced(st, Plan { m, n, p, k0 }, None);
    }
    if st.q.is_none() {
        return Err(crate::ops::needs_q_or_data(OP));
    }
    let mp = m - p;
    let refactorise = match st.params.row_removal {
        RowRemoval::Refactorise => true,
        RowRemoval::Auto => refactorising_pays(m, n, p, core::mem::size_of::<T>()),
        _ => false,
    };
    if refactorise {
        let fresh = st.guarded(|| {
            let gpu = &*st.gpu;
            let (a, b) = algo::refactorised_data(gpu, st.factors(), (k0, p))?;
            let params = FactorParams {
                block_size: None,
                rank_tol: Some(st.rank_tol),
                keep_data: false,
            };
            let fresh = GpuQr::factorize_dev(&st.gpu, a, b, QPolicy::Full, params)?;
            gpu.stage_mark("refactorise");
            Ok(fresh)
        })?;
        let (r, q, d) = fresh.into_parts();
        st.r = r;
        st.q = q;
        st.d = d;
        st.dims.m = mp;
        return Ok(());
    }
    let row_removal = st.params.row_removal;
    let out = st.guarded(|| algo::full(&st.gpu, st.factors(), row_removal, (k0, p)))?;
    swap_in(st, out, p);
    Ok(())
}

/// Swaps the new factors in: R, d, Q and (thin kind) b; m loses p rows.
fn swap_in<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    out: RowsDeleted<T>,
    p: usize,
) {
    st.r = out.r;
    st.q = Some(out.q);
    st.d = out.d;
    if out.b.is_some() {
        st.b = out.b;
    }
    st.dims.m -= p;
}

/// [`run_gpu`] with the deleted rows of A and b given by the caller (`delete_rows_with`):
/// an R-only state without kept data downdates with them; the other kinds delete rows
/// k0..k0+p as [`run_gpu`] does.
///
/// # Errors
/// Those of `plan_given`, then as [`run_gpu`].
pub fn run_gpu_given<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
) -> Result<()> {
    let p = plan_given(st.dims, k0, rows, rhs)?;
    if st.dims.policy == QPolicy::None && st.a.is_none() {
        let plan = plan(st.dims, k0, p)?;
        return run_gpu_reduced(st, plan, Some((rows, rhs)));
    }
    run_gpu(st, k0, p)
}

/// Row deletion from an R-only state on the device, as a block downdate of [R d]
/// ([`algo::r_only`], docs/algorithms.md#updates-without-q) with the deleted rows from the
/// kept data or from the caller; a refused downdate (a pivot ≤ √u: the rows left do not
/// determine R) is [`Error::DowndateFailed`].
///
/// # Errors
/// As [`run_gpu`]; [`Error::NeedsData`] without kept data or given rows. On error the
/// state is unchanged.
fn run_gpu_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    Plan { m, p, k0, .. }: Plan,
    given: Option<(MatRef<'_, T>, MatRef<'_, T>)>,
) -> Result<()> {
    let out = st.guarded(|| {
        let rows = match (st.a.as_ref(), st.b.as_ref(), given) {
            (Some(a), Some(b), _) => DeletedRows::Kept(a, b),
            (_, _, Some((rows, rhs))) => DeletedRows::Given(rows, rhs),
            _ => return Ok(Err(crate::ops::needs_q_or_data(OP))),
        };
        Ok(algo::r_only(&st.gpu, st.factors(), rows, (k0, p))?.map_err(|e| downdate_error(k0, e)))
    })?;
    let out = out?;
    if let Some((a, b)) = out.kept {
        st.a = Some(a);
        st.b = Some(b);
    }
    st.r = out.r;
    st.d = out.d;
    st.rho = out.rho;
    st.dims.m = m - p;
    Ok(())
}

/// The error of a refused block downdate of the rows from k0.
fn downdate_error(k0: usize, e: DowndateRefusal) -> Error {
    match e {
        DowndateRefusal::NotPositiveDefinite { row, alpha2 } => Error::DowndateFailed {
            op: OP,
            row: k0 + row,
            why: format!("the rows left do not determine R (1 − ‖R⁻ᵀa‖² = {alpha2:e})"),
        },
        DowndateRefusal::Residual { rhs } => Error::DowndateFailed {
            op: OP,
            row: k0,
            why: format!("right-hand side {rhs} of the rows exceeds the residual they leave"),
        },
    }
}

/// Row deletion from a thin state on the device (docs/algorithms.md#thin-q-updates-on-the-gpu):
/// the completion of the deleted rows from the small side ([`algo::thin_small_side`], a
/// pivot ≤ √u refuses the rows: [`Error::DowndateFailed`]) and Q₁′ = Q₁(kept rows)·M
/// ([`algo::thin_finish`]). Where a pivot is below ½ (a deleted row of leverage above ½,
/// where this completion loses accuracy) the explicit completion
/// ([`algo::thin_completed`]) runs instead.
///
/// # Errors
/// As [`run_gpu`]. On error the state is unchanged.
fn run_gpu_thin<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    Plan { p, k0, .. }: Plan,
) -> Result<()> {
    let tol = crate::base::refusal::completion_tol::<T>();
    let out = st.guarded(|| {
        let small = match algo::thin_small_side(&st.gpu, st.factors(), (k0, p), tol)? {
            ThinSmallSide::Ready(x) => x,
            ThinSmallSide::Refused { row, norm } => {
                return Ok(Err(thin_refusal::<T>(k0, row, norm)))
            }
            ThinSmallSide::Completed => return Ok(Ok(None)),
        };
        Ok(Ok(Some(algo::thin_finish(
            &st.gpu,
            st.factors(),
            small,
            (k0, p),
        )?)))
    })?;
    let out = match out? {
        Some(out) => out,
        None => st
            .guarded(|| algo::thin_completed(&st.gpu, st.factors(), (k0, p), tol))?
            .map_err(|e| crate::base::refusal::thin_error(OP, k0, e, tol))?,
    };
    swap_in(st, out, p);
    Ok(())
}

/// The error of a thin row deletion whose completion from the small side is refused: the
/// pivot `row` of the deleted rows (from k0) has norm `norm`.
pub(crate) fn thin_refusal<T: crate::gpu::runtime::GpuScalar>(
    k0: usize,
    row: usize,
    norm: f64,
) -> Error {
    crate::base::refusal::thin_error(
        OP,
        k0,
        crate::base::refusal::ThinFailure::IllDeterminedCompletion { row, norm },
        crate::base::refusal::completion_tol::<T>(),
    )
}
