//! The thin kind's deletion of one column on the GPU by plane rotations
//! (docs/algorithms.md#thin-column-deletion-on-the-gpu): R's trailing block, upper
//! Hessenberg once the column is gone, is made triangular on the host by Givens rotations,
//! and the same rotations act on Q₁'s columns k0.. in place through the rotation-chain
//! kernel, which reads and writes each of those columns once. Nothing of Q₁ is copied and
//! its columns before k0 are not touched.
#![forbid(unsafe_code)]

use crate::base::error::Result;
use crate::base::mat::Mat;
use crate::base::params::QPolicy;
use crate::base::rotation_chain::{encode, ChainRotation};
use crate::cpu::givens::{givens, rot_pair};
use crate::gpu::algo::rank::check_rank_dev;
use crate::gpu::algo::thin::{from_host_f64, to_host_f64};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::GpuScalar;
use crate::state::gpu::GpuQr;

/// Trailing blocks (n − k0 columns) up to this width always take [`run`]: its host work is
/// then under about 0.25 ms.
const ALWAYS_TRAILING: usize = 128;
/// The widest trailing block [`run`] takes (its host work grows as (n − k0)²).
const MAX_TRAILING: usize = 4096;

/// Whether deleting columns k0..k0+p of an m×n state of kind `policy` (entries of `elem`
/// bytes) takes [`run`]: one column of a thin state, not the last (that one is a
/// truncation), where the trailing block is narrow or the time model says the rotations
/// cost less than the reflector path. The model, from `cuqr bench tall --stages` on an
/// H200 (docs/performance.md#tall-updates): the rotations spend 1.5·10⁻⁵·w² ms on the host
/// (w = n − k0; 15 ms at w = 1024 in f64) and move 2·m·w entries at 4 TB/s; the reflector
/// path multiplies Q₁(:, k0:n) by H at 40 TFLOP/s (2·m·w² flops) and copies Q₁'s first k0
/// columns.
pub(crate) fn takes_rotations(
    policy: QPolicy,
    (m, n): (usize, usize),
    (k0, p): (usize, usize),
    elem: usize,
) -> bool {
    if policy != QPolicy::Thin || p != 1 || k0 + 1 >= n {
        return false;
    }
    let w = n - k0;
    if w <= ALWAYS_TRAILING {
        return true;
    }
    let (m, w, k0, elem) = (m as f64, w as f64, k0 as f64, elem as f64);
    let rotations_ms = 1.5e-5 * w * w + 2.0 * m * w * elem / 4.0e9;
    let reflectors_ms = 2.0 * m * w * w / 4.0e10 + 2.0 * m * k0 * elem / 4.0e9;
    w <= MAX_TRAILING as f64 && rotations_ms <= reflectors_ms
}

/// Deletes column k0 of a thin state (validated by the caller; see [`takes_rotations`]):
/// H = R(k0:n, k0+1:n) and D = d(k0:n, :) come to the host, rotation j of rows (j, j+1)
/// zeroes H(j+1, j) (j = 0..n−k0−1) and acts on D; R′ and d′ are assembled in new
/// buffers and rank-checked before anything of the state changes; then Q₁ takes the
/// rotations on columns (k0+j, k0+j+1) in place and loses its last column.
///
/// # Errors
/// [`crate::Error::RankDeficient`] (state unchanged), [`crate::Error::OutOfMemory`],
/// device errors.
pub(crate) fn run<T: GpuScalar>(st: &mut GpuQr<T>, k0: usize) -> Result<()> {
    let gpu = st.gpu.clone();
    let (n, q) = (st.dims.n, st.dims.q);
    let (w, nn) = (n - k0, n - 1);
    let mut h = to_host_f64(&gpu, &st.r.block(k0, k0 + 1, w, w - 1))?;
    let mut e = to_host_f64(&gpu, &st.d.block(k0, 0, w, q))?;
    let rots = triangularise(&mut h, &mut e, k0);
    gpu.stage_mark("R's block on the host");
    let mut r = DevMat::<T>::zeros(&gpu, nn, nn)?;
    let mut d = DevMat::<T>::zeros(&gpu, nn, q)?;
    if k0 > 0 {
        gpu.panel_copy(&st.r.block(0, 0, k0, k0), &mut r.block_mut(0, 0, k0, k0))?;
        gpu.panel_copy(
            &st.r.block(0, k0 + 1, k0, nn - k0),
            &mut r.block_mut(0, k0, k0, nn - k0),
        )?;
        gpu.panel_copy(&st.d.block(0, 0, k0, q), &mut d.block_mut(0, 0, k0, q))?;
    }
    let block = Mat::from_fn(
        nn - k0,
        nn - k0,
        |i, j| if i <= j { h[(i, j)] } else { 0.0 },
    );
    gpu.panel_copy(
        &from_host_f64::<T>(&gpu, &block)?.view(),
        &mut r.block_mut(k0, k0, nn - k0, nn - k0),
    )?;
    if q > 0 {
        let rhs = Mat::from_fn(nn - k0, q, |i, l| e[(i, l)]);
        gpu.panel_copy(
            &from_host_f64::<T>(&gpu, &rhs)?.view(),
            &mut d.block_mut(k0, 0, nn - k0, q),
        )?;
    }
    check_rank_dev(&gpu, &r, nn, st.rank_tol)?;
    gpu.stage_mark("R' and d'");
    // From here the state changes: Q₁'s columns in place, then R and d swapped in.
    let chain = encode(&rots);
    let q1 = st.q.as_mut().expect("a thin state holds Q₁");
    let m = q1.nrows();
    gpu.rotation_chain_apply_real(q1, (m, n), &chain)?;
    q1.truncate_cols(nn);
    gpu.stage_mark("Q1 in place");
    st.r = r;
    st.d = d;
    st.dims.n = nn;
    Ok(())
}

/// Makes the upper Hessenberg `h` (w × (w−1)) upper triangular by the rotations of rows
/// (j, j+1), j = 0..w−1, applied to the rows of `e` too; returns them as rotations of Q₁'s
/// columns (k0 + j, k0 + j + 1) (docs/algorithms.md#column-deletion). By columns: column l
/// takes rotations 0..l in order (a sweep down its contiguous entries), then gives rotation l
/// (docs/algorithms.md#thin-column-deletion-on-the-gpu).
fn triangularise(h: &mut Mat<f64>, e: &mut Mat<f64>, k0: usize) -> Vec<ChainRotation<f64>> {
    let cols = h.ncols();
    let mut pairs: Vec<(f64, f64)> = Vec::with_capacity(cols);
    let sweep = |col: &mut [f64], pairs: &[(f64, f64)]| {
        for (j, &(c, s)) in pairs.iter().enumerate() {
            let (mut x, mut y) = (col[j], col[j + 1]);
            rot_pair(c, s, &mut x, &mut y);
            (col[j], col[j + 1]) = (x, y);
        }
    };
    for l in 0..cols {
        let col = h.col_mut(l);
        sweep(col, &pairs);
        let (c, s, r) = givens(col[l], col[l + 1]);
        (col[l], col[l + 1]) = (r, 0.0);
        pairs.push((c, s));
    }
    for l in 0..e.ncols() {
        sweep(e.col_mut(l), &pairs);
    }
    pairs
        .into_iter()
        .enumerate()
        .map(|(j, (c, s))| ChainRotation {
            top: k0 + j,
            bot: k0 + j + 1,
            c,
            s,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::rotation_chain::replay;
    use crate::{CpuQr, FactorParams};

    /// The host's rotations, replayed on Q₁'s columns as the kernel applies them, give
    /// Q₁′R′ = A without column k0 with R′ upper triangular and d′ = Q₁′ᵀb, for every k0
    /// this path takes (a wrong sign or pairing convention between R's rows and Q₁'s
    /// columns fails here without a GPU).
    /// The model's choices at the measured shapes: rotations at 1,000,000×256 and
    /// 4,000,000×64 (k0 = n/2), the reflectors at 200,000×2048 (k0 = 1024), where the host's
    /// share took 15 of 17.8 ms against 11.2 ms; narrow blocks always; never several
    /// columns, the last column or another kind.
    #[test]
    fn the_time_model_picks_the_measured_winner() {
        let thin = QPolicy::Thin;
        assert!(takes_rotations(thin, (1_000_000, 256), (128, 1), 8));
        assert!(takes_rotations(thin, (4_000_000, 64), (32, 1), 4));
        assert!(!takes_rotations(thin, (200_000, 2048), (1024, 1), 8));
        assert!(takes_rotations(thin, (1_000_000, 1024), (0, 1), 8));
        assert!(takes_rotations(thin, (200_000, 2048), (1920, 1), 8));
        assert!(takes_rotations(thin, (300, 97), (0, 1), 8));
        assert!(!takes_rotations(thin, (300, 97), (96, 1), 8));
        assert!(!takes_rotations(thin, (1_000_000, 256), (128, 2), 8));
        assert!(!takes_rotations(QPolicy::Full, (300, 97), (10, 1), 8));
        assert!(!takes_rotations(QPolicy::None, (300, 97), (10, 1), 8));
    }

    #[test]
    fn rotations_keep_a_without_the_column() {
        let (m, n, q) = (41usize, 9usize, 2usize);
        let val =
            |i: usize, j: usize, s: usize| 0.1 + ((i * 7 + j * 13 + s * 29) % 31) as f64 / 31.0;
        let a = Mat::from_fn(m, n, |i, j| {
            val(i, j, 0) * if (i + j) % 3 == 0 { -1.0 } else { 1.0 }
        });
        let b = Mat::from_fn(m, q, |i, l| val(i, l, 5) - 0.5);
        let st = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::Thin,
            FactorParams::default(),
        )
        .unwrap();
        let (q1, r, d) = (st.q_ref().unwrap(), st.r_ref(), st.d_ref());
        for k0 in 0..n - 1 {
            let (w, nn) = (n - k0, n - 1);
            let mut h = Mat::from_fn(w, w - 1, |i, j| r[(k0 + i, k0 + 1 + j)]);
            let mut e = Mat::from_fn(w, q, |i, l| d[(k0 + i, l)]);
            let rots = triangularise(&mut h, &mut e, k0);
            assert_eq!(rots.len(), w - 1);
            let mut qq = q1.as_slice().to_vec();
            replay(&encode(&rots), &mut qq, m, m);
            let q2 = Mat::from_fn(m, nn, |i, j| qq[i + j * m]);
            let r2 = Mat::from_fn(nn, nn, |i, j| match (i < k0, j < k0) {
                (true, true) => r[(i, j)],
                (true, false) => r[(i, j + 1)],
                (false, true) => 0.0,
                (false, false) => h[(i - k0, j - k0)],
            });
            for j in 0..nn {
                for i in j + 1..nn {
                    assert!(r2[(i, j)].abs() < 1e-14, "k0 {k0}: R'({i},{j})");
                }
                for i in 0..m {
                    let qr: f64 = (0..nn).map(|l| q2[(i, l)] * r2[(l, j)]).sum();
                    let orig = a[(i, if j < k0 { j } else { j + 1 })];
                    assert!(
                        (qr - orig).abs() < 1e-13,
                        "k0 {k0}: A'({i},{j}) {qr} vs {orig}"
                    );
                }
            }
            for l in 0..q {
                for j in 0..nn {
                    let qb: f64 = (0..m).map(|i| q2[(i, j)] * b[(i, l)]).sum();
                    let dj = if j < k0 { d[(j, l)] } else { e[(j - k0, l)] };
                    assert!((qb - dj).abs() < 1e-13, "k0 {k0}: d'({j},{l})");
                }
            }
        }
    }
}
