//! Factoring one panel of the blocked QR: the TSQR panel, the one-launch fused panel, or the
//! per-column kernels (docs/algorithms.md#blocked-householder-qr).

#[allow(unused_imports)]
use super::*;

/// Factors the panel (j0, jb, r0, l) of `a` (rows up to `rows_end`) into `out` (V, τ,
/// T): the TSQR panel when `tsqr` (main stream), else one launch of
/// `fused_panel_qr` (on `stream2` through `raw` when given, else on the main stream),
/// or the per-column kernels.
#[allow(clippy::too_many_arguments)]
pub(super) fn factor_panel<T: GpuScalar>(
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
