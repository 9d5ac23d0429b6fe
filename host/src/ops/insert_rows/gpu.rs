//! The GPU path.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// GPU path of [`run_cpu`] (docs/algorithms.md#row-insertion,
/// docs/algorithms.md#row-insertion-listing): validates with the same `plan`,
/// then the compact-WY row addition on the device: phase 1 per column (`house` on
/// R(j, j) and U(:, j), `panel_apply` on the block's rest of R's row j and U), phase 2
/// T by `wy_build_t` on V_U, phase 3 by GEMMs (W = R₁ + V_UᵀU₂; R₁ −= TᵀW;
/// U₂ −= V_U(TᵀW)), d and e likewise; with Q, Q̃ = Pᵀ·diag(Q, I_p)·H₁⋯H_n with the
/// new rows at k0. Everything is built in new buffers and swapped in after the rank
/// check.
///
/// # Errors
/// As [`run_cpu`], plus [`Error::OutOfMemory`] and device errors.
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    run_gpu_path(st, k0, u, e, true)
}

/// [`run_gpu`] with the one-launch path (`row_insert_qr`, states without Q) allowed or
/// not; `false` takes the blocked compact-WY path where the structured reflectors run
/// (tests compare the two). [`UpdateParams::row_insertion`](crate::UpdateParams) chooses
/// between those and the dense QR of [R; U]. The algorithm is `gpu/algo/insert_rows.rs`;
/// this validates, picks the path and swaps the new factors in after the rank check.
pub(crate) fn run_gpu_path<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
    one_launch: bool,
) -> Result<()> {
    use crate::base::params::RowInsertion;
    use crate::gpu::algo::insert_rows::{
        self as algo, RowInsertParams, SMALL_PANEL_ROW_INSERT_MAX_ROWS,
    };
    use crate::gpu::launch::BUILD_T_MAX_K;
    let plan = plan(st.dims, k0, u, e)?;
    let Dims { m, n, .. } = st.dims;
    let p = plan.p;
    let gpu = st.gpu.clone();
    let g = &*gpu;
    let nb = resolve_block_size(OP, st.params.block_size, n)?
        .min(BUILD_T_MAX_K)
        .min(n);
    let small_panel =
        nb + p <= SMALL_PANEL_ROW_INSERT_MAX_ROWS && g.small_panel_fits::<T>(nb + p, nb);
    let dense = st.params.row_insertion == RowInsertion::Dense;
    if one_launch && !dense && st.q.is_none() {
        if let Some(rd) = algo::one_launch(g, st.factors(), u, e)? {
            return finish_reduced(st, rd, k0, u, e);
        }
    }
    let out = if dense {
        algo::dense(g, st.factors(), k0, u, e)?
    } else {
        let params = RowInsertParams { k0, nb };
        algo::blocked(g, st.factors(), params, small_panel, u, e)?
    };
    match st.dims.policy {
        QPolicy::Thin => {
            let thin = algo::thin_finish(g, st.factors(), out, k0, e)?;
            st.b = Some(thin.b);
            st.r = thin.r;
            st.d = thin.d;
            st.q = Some(thin.q);
        }
        QPolicy::None => return finish_reduced(st, (out.r, out.d), k0, u, e),
        QPolicy::Full => {
            st.r = out.r;
            st.d = out.d;
            st.q = out.q;
        }
    }
    st.dims.m = m + p;
    Ok(())
}

/// The R-only kind's end of a row insertion ([`crate::gpu::algo::insert_rows::reduced_finish`]),
/// swapped in.
fn finish_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    rd: (
        crate::gpu::runtime::DevMat<T>,
        crate::gpu::runtime::DevMat<T>,
    ),
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<()> {
    let g = &*st.gpu;
    let kept = match (st.a.as_ref(), st.b.as_ref()) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    let out = crate::gpu::algo::insert_rows::reduced_finish(g, st.factors(), kept, rd, k0, (u, e))?;
    if let Some((a, b)) = out.kept {
        st.a = Some(a);
        st.b = Some(b);
    }
    st.r = out.r;
    st.d = out.d;
    st.rho = out.rho;
    st.dims.m += u.nrows();
    Ok(())
}
