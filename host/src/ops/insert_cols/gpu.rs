//! The GPU path: validation, the choice of path by the state's kind and the swap; the
//! algorithm is `gpu/algo/insert_cols.rs`.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::gpu::algo::factors::NewFactors;
use crate::gpu::algo::insert_cols::{self as algo, ColInsertParams, UData};

/// Inserts the m×p block `u` as columns k0..k0+p on the device
/// (docs/algorithms.md#column-insertion; docs/design.md): the full kind by
/// [`algo::full`], the thin kind by [`algo::thin_gram`] (or [`algo::thin_projected`] where
/// its Gram matrix is not accurate enough), the R-only kind with kept data by
/// [`algo::r_only`]; the rank check, and the swap.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
) -> Result<()> {
    let plan = plan(st.dims, k0, u, st.params.block_size)?;
    run_gpu_planned(st, plan, UData::Host(u))
}

/// [`run_gpu`] with U already on the device (`GpuQr::insert_cols_device`): the same
/// update without U's upload. The non-finite check runs on the device
/// (`Gpu::first_non_finite`: one launch and a download of a `u32` a chunk and column).
///
/// # Errors
/// As [`run_gpu`].
pub fn run_gpu_device<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    u: &crate::gpu::runtime::DevMatView<'_, T>,
) -> Result<()> {
    let plan = plan_shape(st.dims, k0, (u.nrows(), u.ncols()), st.params.block_size)?;
    if let Some((row, col)) = st.guarded(|| st.gpu.first_non_finite(u))? {
        return Err(Error::NonFinite {
            op: OP,
            what: "u",
            row,
            col,
        });
    }
    run_gpu_planned(st, plan, UData::Device(u))
}

pub(super) fn run_gpu_planned<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    Plan { n, p, k0, nb, .. }: Plan,
    u: UData<'_, '_, T>,
) -> Result<()> {
    let out = match st.dims.policy {
        QPolicy::Thin => {
            let out = st.guarded(|| algo::thin_gram(&st.gpu, st.factors(), (k0, p), u))?;
            match out {
                Some(out) => out,
                None => st
                    .guarded(|| algo::thin_projected(&st.gpu, st.factors(), (k0, p), u))?
                    .map_err(|e| {
                        let tol = crate::base::refusal::dependence_tol::<T>();
                        crate::base::refusal::thin_error(OP, k0, e, tol)
                    })?,
            }
        }
        QPolicy::None => {
            let kept = st
                .kept_data()
                .ok_or_else(|| crate::ops::needs_q_or_data(OP))?;
            let out = st.guarded(|| algo::r_only(&st.gpu, st.factors(), kept, (k0, p), u))??;
            st.r = out.r;
            st.d = out.d;
            st.a = Some(out.a);
            st.rho = out.rho;
            st.dims.n = n + p;
            return Ok(());
        }
        QPolicy::Full => {
            if st.q.is_none() {
                return Err(crate::ops::needs_q_or_data(OP));
            }
            let params = ColInsertParams {
                k0,
                p,
                nb,
                column_strip: st.params.column_strip,
                givens: st.params.givens,
            };
            st.guarded(|| algo::full(&st.gpu, st.factors(), params, u))?
        }
    };
    let NewFactors { r, d, q } = out;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    st.dims.n = n + p;
    Ok(())
}
