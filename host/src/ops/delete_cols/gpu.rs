//! The GPU path: validation, the truncation fast path and the swap; the algorithm is
//! `gpu/algo/delete_cols.rs`.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::gpu::algo::delete_cols::{self as algo, ColDeleteParams};

/// GPU path of [`run_cpu`] (docs/algorithms.md#column-deletion,
/// docs/algorithms.md#column-deletion-block-height): validates with the same `plan`,
/// then [`algo::band`] (the kept columns moved into a new R, the banded reflectors on
/// copies of d and Q, or one cooperative launch for a state without Q), the thin kind's
/// [`algo::thin_finish`] (Q₁′ by one GEMM) or the R-only kind's [`algo::reduced_finish`].
/// A thin state's single column goes by rotations instead where they cost less, Q₁ changed in place after R′'s rank check (`thin_chain`,
/// docs/algorithms.md#thin-column-deletion-on-the-gpu).
/// The state is swapped in only after the rank check passes.
///
/// Fast path k0 = n−p: R's first n−p columns are kept **in place**
/// (`DevMat::truncate_cols`: no allocation, no copy, no launch,
/// no synchronisation) and there is no rank check: the kept columns and
/// their diagonal are unchanged and ‖R‖_F can only shrink, so a state that passed
/// its rank test (every GPU state did, at its own tolerance: factorisation and every
/// update check it) still passes it. The CPU path keeps its (cheap) check.
///
/// # Errors
/// As [`run_cpu`], plus [`Error::OutOfMemory`] and device errors.
pub fn run_gpu<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    run_gpu_path(st, k0, p, true)
}

/// [`run_gpu`] with the one-launch band (`row_insert_band_qr`, states without Q)
/// allowed or not (tests compare the two paths).
pub(crate) fn run_gpu_path<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
    one_launch: bool,
) -> Result<()> {
    let plan = plan(st.dims, k0, p)?;
    let nn = plan.n_new;
    let nb = resolve_block_size(OP, st.params.block_size, nn - k0)?;
    let thin = st.dims.policy == QPolicy::Thin;
    let reduced = st.dims.policy == QPolicy::None;
    if plan.is_truncation() {
        if reduced {
            let (r, d) = (st.r.dup(&st.gpu)?, st.d.dup(&st.gpu)?);
            return finish_reduced(st, r, d, k0, p);
        }
        if thin {
            // R and d are n rows high: their first nn rows are copied (allocations
            // first, so that out of memory leaves the state as it was); Q₁ loses its
            // last p columns in place
            let (r, d) = st.guarded(|| algo::thin_truncated(&st.gpu, st.factors(), nn))?;
            st.r = r;
            st.d = d;
            st.q.as_mut()
                .expect("a thin state holds Q₁")
                .truncate_cols(nn);
        } else {
            st.r.truncate_cols(nn);
        }
        st.dims.n = nn;
        return Ok(());
    }
    let (m, n) = (st.dims.m, st.dims.n);
    if super::thin_chain::takes_rotations(st.dims.policy, (m, n), (k0, p), size_of::<T>()) {
        return super::thin_chain::run(st, k0);
    }
    let gpu = st.gpu.clone();
    let params = ColDeleteParams {
        k0,
        p,
        nb,
        one_launch,
    };
    let mut out = algo::band(&gpu, st.factors(), params)?;
    if reduced {
        return finish_reduced(st, out.r, out.d, k0, p);
    }
    if thin {
        out = algo::thin_finish(&gpu, st.factors(), out, (k0, p))?;
    }
    st.r = out.r;
    st.d = out.d;
    st.q = out.q;
    st.dims.n = nn;
    Ok(())
}

/// The R-only kind's end ([`algo::reduced_finish`]), swapped in.
fn finish_reduced<T: crate::gpu::runtime::GpuScalar>(
    st: &mut crate::state::gpu::GpuQr<T>,
    r: crate::gpu::runtime::DevMat<T>,
    d: crate::gpu::runtime::DevMat<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    let out = algo::reduced_finish(&st.gpu, st.factors(), st.a.as_ref(), (r, d), (k0, p))?;
    if out.a.is_some() {
        st.a = out.a;
    }
    st.r = out.r;
    st.d = out.d;
    st.rho = out.rho;
    st.dims.n -= p;
    Ok(())
}
