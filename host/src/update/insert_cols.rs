//! Insert a block of p columns at k0 (spec §1.7; S0 §2.4.1, §4.1; S2 §3.1). Step 1 QᵀU
//! (2m²p), step 2 blocked Householder QR of the (m−n)×p block below row n (applied to d and
//! Q), step 3 Givens on the strip, n−k0 rotations per new column, skipped when k0 = n (on
//! the GPU, for large p, one blocked Householder QR of the strip's (n+p−k0)² block instead).
//! Errata fixed: E3 (QᵀU, column k), E12 (rotations per column = n−k0, steps n−k0+p−1,
//! early exit at k0 = n). Needs Q.
#![forbid(unsafe_code)]

use crate::cpu::givens::{givens, rot, rot_pair};
use crate::cpu::householder::{apply_left, house};
use crate::cpu::wy::{larfb_left, larfb_right, larft, resolve_block_size};
use crate::cpu::{CpuQr, Dims};
use crate::error::{Error, Result};
use crate::mat::{Mat, MatRef};
use crate::params::QPolicy;
use crate::scalar::Scalar;

const OP: &str = "insert_cols";

/// A validated column insertion (spec §1.7): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows m (unchanged).
    pub m: usize,
    /// Columns before the update.
    pub n: usize,
    /// Number of inserted columns.
    pub p: usize,
    /// First inserted column in the result (0-based, ≤ n).
    pub k0: usize,
    /// Householder block size n_b for step 2.
    pub nb: usize,
}

/// Validates inserting the m×p block `u` as columns k0..k0+p (spec §1.7, §0.2).
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::Shape`] (u has ≠ m rows),
/// [`Error::OutOfRange`] (k0 > n), [`Error::Underdetermined`] (n + p > m),
/// [`Error::NeedsQ`] (Q-less state), [`Error::InvalidParam`] (block size 0),
/// [`Error::NonFinite`] (NaN or ±∞ in u).
pub(crate) fn plan<T: Scalar>(
    dims: Dims,
    k0: usize,
    u: MatRef<'_, T>,
    block_size: Option<usize>,
) -> Result<Plan> {
    let plan = plan_shape(dims, k0, (u.nrows(), u.ncols()), block_size)?;
    if let Some((row, col)) = u.first_non_finite() {
        return Err(Error::NonFinite {
            op: OP,
            what: "u",
            row,
            col,
        });
    }
    Ok(plan)
}

/// [`plan`] from the shape of u alone: every check but the non-finite one (which update
/// data already on the device makes there, `Gpu::first_non_finite`).
///
/// # Errors
/// Those of [`plan`] but [`Error::NonFinite`].
pub(crate) fn plan_shape(
    dims: Dims,
    k0: usize,
    (u_rows, p): (usize, usize),
    block_size: Option<usize>,
) -> Result<Plan> {
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    if u_rows != dims.m {
        return Err(Error::Shape {
            op: OP,
            what: "rows of u",
            got: u_rows,
            expected: dims.m,
        });
    }
    if k0 > dims.n {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.n,
        });
    }
    if dims.n + p > dims.m {
        return Err(Error::Underdetermined {
            op: OP,
            m: dims.m,
            n: dims.n + p,
        });
    }
    if dims.policy == QPolicy::None {
        return Err(Error::NeedsQ {
            op: OP,
            policy: dims.policy,
        });
    }
    let nb = resolve_block_size(OP, block_size, p)?;
    Ok(Plan {
        m: dims.m,
        n: dims.n,
        p,
        k0,
        nb,
    })
}

/// Inserts the m×p block `u` as columns k0..k0+p of A, updating R, d and Q serially
/// (spec §1.7). Works on new buffers and swaps them in only after the rank check.
///
/// # Errors
/// Those of `plan` (above), and [`Error::RankDeficient`] when the new matrix is numerically
/// rank deficient (e.g. `u` repeats a column of A). On error the state is unchanged.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, u: MatRef<'_, T>) -> Result<()> {
    let plan = plan(st.dims, k0, u, st.params.block_size)?;
    let Plan { m, n, p, k0, .. } = plan;
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
    let mut q = q_old.clone();
    let mut d = st.d.clone();

    // Step 0 + 1: R' = [R(:, 0:k0) | QᵀU | R(:, k0:n)].
    let mut r = Mat::<T>::zeros(m, n + p);
    for j in 0..k0 {
        r.col_mut(j).copy_from_slice(st.r.col(j));
    }
    for j in k0..n {
        r.col_mut(j + p).copy_from_slice(st.r.col(j));
    }
    for j in 0..p {
        let uj = u.col(j);
        for i in 0..m {
            let qi = q.col(i);
            let mut acc = T::ZERO;
            for (a, b) in qi.iter().zip(uj) {
                acc = a.mul_add(*b, acc);
            }
            r[(i, k0 + j)] = acc;
        }
    }

    // Step 2: blocked Householder QR of R'(n:m, k0:k0+p).
    if m > n {
        householder_below(&mut r, &mut q, &mut d, &plan);
    }

    // Step 3: Givens on the strip (skipped when appending, erratum E12).
    if k0 < n {
        for j in 0..p {
            let c = k0 + j;
            let bottom = (n + j).min(m - 1);
            for row in (c + 1..=bottom).rev() {
                let (cs, sn, rho) = givens(r[(row - 1, c)], r[(row, c)]);
                r[(row - 1, c)] = rho;
                r[(row, c)] = T::ZERO;
                rot_rows(&mut r, row - 1, row, cs, sn, c + 1..n + p);
                let (x, y) = q.two_cols_mut(row - 1, row);
                rot(cs, sn, x, y);
                rot_rows(&mut d, row - 1, row, cs, sn, 0..st.dims.q);
            }
        }
    }
    // Entries below the diagonal are exact zeros by construction (set explicitly or
    // produced by rotating two zeros); clearing makes ‖L‖ = 0 independent of that argument.
    clear_lower(&mut r);
    let next = CpuQr {
        dims: Dims {
            n: n + p,
            ..st.dims
        },
        r,
        d,
        q: Some(q),
        params: st.params,
        rank_tol: st.rank_tol,
    };
    next.check_rank()?;
    *st = next;
    Ok(())
}

/// Rotates rows (i, k) of `a` over the columns `cols` (x ← c·x + s·y, y ← −s·x + c·y).
fn rot_rows<T: Scalar>(
    a: &mut Mat<T>,
    i: usize,
    k: usize,
    c: T,
    s: T,
    cols: core::ops::Range<usize>,
) {
    for j in cols {
        let (mut x, mut y) = (a[(i, j)], a[(k, j)]);
        rot_pair(c, s, &mut x, &mut y);
        a[(i, j)] = x;
        a[(k, j)] = y;
    }
}

/// Sets the strictly lower part of `r` to exact zeros.
fn clear_lower<T: Scalar>(r: &mut Mat<T>) {
    let m = r.nrows();
    for j in 0..r.ncols() {
        let col = r.col_mut(j);
        if j + 1 < m {
            col[j + 1..].fill(T::ZERO);
        }
    }
}

/// Step 2 (spec §1.4 on the block B = R'(n:m, k0:k0+p)): panels of `nb` reflectors, each
/// panel turned into the compact WY form I − V T Vᵀ (LAPACK sign, erratum E14) and applied
/// to the trailing columns of B, to d(n:m) from the left and to Q(:, n:m) from the right
/// (`cpu::wy::larft`/`larfb_*`).
fn householder_below<T: Scalar>(r: &mut Mat<T>, q: &mut Mat<T>, d: &mut Mat<T>, plan: &Plan) {
    let Plan { m, n, p, k0, nb } = *plan;
    let ell = m - n;
    let c = p.min(ell);
    let mut j0 = 0;
    while j0 < c {
        let jb = nb.min(c - j0);
        let top = n + j0; // first row the panel's reflectors touch
        let mut taus = Vec::with_capacity(jb);
        // Panel: level-2 Householder on columns k0+j0 .. k0+j0+jb.
        for j in j0..j0 + jb {
            let (col, row) = (k0 + j, n + j);
            let cj = r.col_mut(col);
            let (head, tail) = cj[row..m].split_first_mut().expect("row < m");
            let (beta, tau) = house(*head, tail);
            *head = beta;
            taus.push(tau);
            for col2 in col + 1..k0 + j0 + jb {
                let (vc, cc) = r.two_cols_mut(col, col2);
                apply_left(&vc[row + 1..m], tau, &mut cc[row..m]);
            }
        }
        // V: (m − top) × jb with unit diagonal and zeros above it.
        let rows = m - top;
        let v = Mat::from_fn(rows, jb, |i, jj| {
            if i < jj {
                T::ZERO
            } else if i == jj {
                T::ONE
            } else {
                r[(top + i, k0 + j0 + jj)]
            }
        });
        let t = larft(&v, &taus);
        // Trailing columns of B and d: C := (I − V Tᵀ Vᵀ) C.
        larfb_left(&v, &t, true, r, top, k0 + j0 + jb..k0 + p);
        let nrhs = d.ncols();
        larfb_left(&v, &t, true, d, top, 0..nrhs);
        // Q(:, top:m) := Q(:, top:m) (I − V T Vᵀ).
        larfb_right(&v, &t, q, top);
        // The reflectors are stored; below the diagonal the block is now exactly zero.
        for jj in 0..jb {
            r.col_mut(k0 + j0 + jj)[top + jj + 1..m].fill(T::ZERO);
        }
        j0 += jb;
    }
}

/// Inserts the m×p block `u` as columns k0..k0+p on the device (spec §1.7;
/// docs/design.md): R' = [R(:, 0:k0) | QᵀU | R(:, k0:n)] in a new buffer (two device
/// copies and one cuBLAS GEMM), blocked Householder on R'(n:m, k0:k0+p) applied to copies
/// of d and Q (`gpu::householder::blocked_qr`), then the strip unless k0 = n: Givens
/// rotations (`params.givens`: two-phase, or the seed wavefront) or, where p is a large
/// fraction of n − k0 (`params.column_strip`, `householder_strip_pays`), one blocked
/// Householder QR of the (n + p − k0)² block at rows and columns k0..n+p; the rank
/// check, and the swap.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    k0: usize,
    u: MatRef<'_, T>,
) -> Result<()> {
    let plan = plan(st.dims, k0, u, st.params.block_size)?;
    run_gpu_planned(st, plan, UData::Host(u))
}

/// [`run_gpu`] with U already on the device (`GpuQr::insert_cols_device`): the same
/// update without U's upload. The non-finite check runs on the device
/// (`Gpu::first_non_finite`: one launch and a download of p `u32`s).
///
/// # Errors
/// As [`run_gpu`].
pub fn run_gpu_device<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    k0: usize,
    u: &crate::gpu::DevMatView<'_, T>,
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

/// Where the new columns come from.
enum UData<'a, 'v, T> {
    /// On the host: uploaded inside the update.
    Host(MatRef<'a, T>),
    /// On the device already.
    Device(&'a crate::gpu::DevMatView<'v, T>),
}

/// Whether column insertion's strip (p new columns at k0, R of n columns, m rows) is
/// cheaper as one blocked Householder QR of the L×L block, L = n + p − k0, than as
/// Givens rotations on the GPU (`ColumnStrip::Auto`). A time model in milliseconds
/// from the H100 measurements in docs/performance.md (eleventh session, "Column
/// insertion's strip by Householder"): the rotations, p·(n − k0) of them on Q's m rows and R's rows
/// (6 flops an element pair), run at about 1.5 TFLOP/s where windows apply them; the
/// Householder QR of an L×L block takes about 5 µs a column (its panel chain) plus
/// 7.2·10⁻¹¹·L³ ms, and its reflectors reach Q (4·m·L² flops) at about 30 TFLOP/s.
/// The first guard keeps every point where p is a small fraction of n − k0 (the
/// windowed rotations run far faster than the model there, e.g. AC-stage) on Givens.
pub(crate) fn householder_strip_pays(m: usize, n: usize, k0: usize, p: usize) -> bool {
    let h = n.saturating_sub(k0);
    if 4 * p < h || h == 0 {
        return false;
    }
    let (m, h, p) = (m as f64, h as f64, p as f64);
    let l = h + p;
    let givens_ms = 6.0 * p * h * (m + l) / 1.5e9;
    let householder_ms = 5e-3 * l + 7.2e-11 * l * l * l + 4.0 * m * l * l / 3.0e10;
    householder_ms < givens_ms
}

fn run_gpu_planned<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    Plan { m, n, p, k0, nb }: Plan,
    u: UData<'_, '_, T>,
) -> Result<()> {
    use crate::gpu::{givens_two_phase as tp, givens_wavefront as wf, householder, DevMat, Op};
    use crate::params::{ColumnStrip, Givens};
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
    let (r, q, d) = st.guarded(|| {
        let gpu = &*st.gpu;
        let uploaded = match u {
            UData::Host(u) => Some(DevMat::from_host_async(gpu, u)?),
            UData::Device(_) => None,
        };
        let ud = match (&uploaded, u) {
            (Some(x), _) => x.view(),
            (None, UData::Device(v)) => v.reborrow(),
            (None, UData::Host(_)) => unreachable!("uploaded above"),
        };
        let mut r = DevMat::zeros(gpu, m, n + p)?;
        gpu.stage_mark("upload, alloc");
        if k0 > 0 {
            let src = st.r.block(0, 0, m, k0);
            gpu.two_phase_copy(&src, &mut r.block_mut(0, 0, m, k0), 0..0, false)?;
        }
        if k0 < n {
            let src = st.r.block(0, k0, m, n - k0);
            gpu.two_phase_copy(&src, &mut r.block_mut(0, k0 + p, m, n - k0), 0..0, false)?;
        }
        gpu.stage_mark("copy R");
        // For k0 < n, QᵀU goes into a matrix of its own, so that the Householder stage on
        // its rows n..m has no trailing columns: R's later columns are exact zeros in
        // those rows (H·0 = 0), and the three GEMMs over them were pure cost (issue 7).
        // At k0 = n the new columns are R's last, so they are worked on in place.
        let mut own = if k0 < n {
            Some(DevMat::zeros(gpu, m, p)?)
        } else {
            None
        };
        {
            let mut dst = match own.as_mut() {
                Some(x) => x.view_mut(),
                None => r.block_mut(0, k0, m, p),
            };
            gpu.gemm(Op::T, Op::N, T::ONE, &q_old.view(), &ud, T::ZERO, &mut dst)?;
        }
        gpu.stage_mark("Q^T U");
        let mut q = tp::dup(gpu, q_old)?;
        let mut d = tp::dup(gpu, &st.d)?;
        gpu.stage_mark("copy Q, d");
        if m > n {
            let (a, cols) = match own.as_mut() {
                Some(x) => (x, 0..p),
                None => (&mut r, k0..k0 + p),
            };
            householder::blocked_qr(gpu, a, n..m, cols, Some(&mut d), Some(&mut q), nb)?;
            gpu.stage_mark("householder rows n..m");
        }
        if let Some(x) = own.as_ref() {
            gpu.panel_copy(&x.view(), &mut r.block_mut(0, k0, m, p))?;
        }
        if k0 < n {
            let householder_strip = match st.params.column_strip {
                ColumnStrip::Givens => false,
                ColumnStrip::Householder => true,
                _ => householder_strip_pays(m, n, k0, p),
            };
            if householder_strip {
                // rows n+p..m are exact zeros in columns k0.. by now: the strip is the
                // (n + p − k0)² block at rows and columns k0..n+p
                let nb2 = crate::params::default_block_size(n + p - k0);
                householder::blocked_qr(
                    gpu,
                    &mut r,
                    k0..n + p,
                    k0..n + p,
                    Some(&mut d),
                    Some(&mut q),
                    nb2,
                )?;
                gpu.stage_mark("householder strip");
            } else {
                match st.params.givens {
                    Givens::Wavefront => {
                        wf::insert_cols_strip_wavefront(gpu, &mut r, &mut q, &mut d, k0, p, n)?
                    }
                    Givens::TwoPhase => {
                        tp::insert_cols_strip_two_phase(gpu, &mut r, &mut q, &mut d, k0, p, n)?
                    }
                }
            }
        }
        tp::check_rank(gpu, &r, n + p, st.rank_tol)?;
        Ok((r, q, d))
    })?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    st.dims.n = n + p;
    Ok(())
}

/// Shared helpers for the update tests (spec §3.7 measures, computed in f64).
#[cfg(test)]
pub(crate) mod testkit {
    use crate::cpu::CpuQr;
    use crate::mat::Mat;
    use crate::params::{FactorParams, QPolicy};
    use crate::scalar::Scalar;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Seeded generator.
    pub fn rng(seed: u64) -> StdRng {
        StdRng::seed_from_u64(seed)
    }

    /// Uniform entries in [−1, 1), never exactly zero.
    pub fn rand_mat<T: Scalar>(rng: &mut StdRng, m: usize, n: usize) -> Mat<T> {
        Mat::from_fn(m, n, |_, _| loop {
            let x: f64 = rng.random_range(-1.0..1.0);
            if x != 0.0 {
                break T::from_f64(x);
            }
        })
    }

    /// A random vector, never exactly zero entries.
    pub fn rand_vec<T: Scalar>(rng: &mut StdRng, m: usize) -> Vec<T> {
        rand_mat::<T>(rng, m, 1).into_vec()
    }

    /// 10·m·u (spec §3.7).
    pub fn tol<T: Scalar>(m: usize) -> f64 {
        10.0 * m as f64 * T::UNIT_ROUNDOFF
    }

    /// Factorises with the crate's factorisation, keeping Q.
    pub fn factor<T: Scalar>(a: &Mat<T>, b: &Mat<T>, policy: QPolicy) -> crate::Result<CpuQr<T>> {
        CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default())
    }

    /// Bit-for-bit equality of two states.
    pub fn same_state<T: Scalar>(x: &CpuQr<T>, y: &CpuQr<T>) -> bool {
        x.dims == y.dims
            && x.r == y.r
            && x.d == y.d
            && x.q == y.q
            && x.rank_tol == y.rank_tol
            && x.params == y.params
    }

    fn to64<T: Scalar>(a: &Mat<T>) -> Mat<f64> {
        Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64())
    }

    /// Spec §3.7 properties of `st` against the matrix Ã = `a` and right-hand sides `b`:
    /// ‖Q̃R̃ − Ã‖ ≤ 10·m·u·‖Ã‖, ‖Q̃ᵀQ̃ − I‖ ≤ 10·m·u, ‖Q̃d̃ − b‖ ≤ 10·m·u·‖b‖, ‖L‖ = 0 exactly.
    /// m = `m_op`, the row count the update worked on (before a row deletion, m > m̃).
    pub fn check_properties<T: Scalar>(st: &CpuQr<T>, a: &Mat<T>, b: &Mat<T>, m_op: usize) {
        let (m, n) = (a.nrows(), a.ncols());
        assert_eq!((st.dims.m, st.dims.n), (m, n));
        assert_eq!((st.r.nrows(), st.r.ncols()), (m, n));
        for j in 0..n {
            for i in j + 1..m {
                assert_eq!(st.r[(i, j)], T::ZERO, "L not exactly zero at ({i}, {j})");
            }
        }
        let tol = tol::<T>(m_op.max(m));
        let q = to64(st.q.as_ref().expect("Q kept"));
        let qr = q.matmul(&to64(&st.r));
        let ea = Mat::from_fn(m, n, |i, j| qr[(i, j)] - a[(i, j)].to_f64()).norm_fro();
        assert!(
            ea <= tol * a.norm_fro(),
            "e_A = {ea:e} > {:e}",
            tol * a.norm_fro()
        );
        let qtq = q.transpose().matmul(&q);
        let eq = Mat::from_fn(m, m, |i, j| qtq[(i, j)] - (i == j) as u8 as f64).norm_fro();
        assert!(eq <= tol, "e_Q = {eq:e} > {tol:e}");
        let qd = q.matmul(&to64(&st.d));
        let eb = Mat::from_fn(m, b.ncols(), |i, j| qd[(i, j)] - b[(i, j)].to_f64()).norm_fro();
        assert!(eb <= tol * b.norm_fro(), "‖Qd − b‖ = {eb:e}");
    }

    /// x = R₁⁻¹ d(0:n) (f64 back substitution) and the residual norms ‖d(n:m, j)‖.
    fn ls_of<T: Scalar>(st: &CpuQr<T>) -> (Mat<f64>, Vec<f64>) {
        let (m, n, q) = (st.dims.m, st.dims.n, st.dims.q);
        let mut x = Mat::<f64>::zeros(n, q);
        let mut res = Vec::with_capacity(q);
        for k in 0..q {
            for i in (0..n).rev() {
                let mut s = st.d[(i, k)].to_f64();
                for j in i + 1..n {
                    s -= st.r[(i, j)].to_f64() * x[(j, k)];
                }
                x[(i, k)] = s / st.r[(i, i)].to_f64();
            }
            res.push(
                (n..m)
                    .map(|i| st.d[(i, k)].to_f64().powi(2))
                    .sum::<f64>()
                    .sqrt(),
            );
        }
        (x, res)
    }

    /// κ₂(R₁) by power iteration on R₁ᵀR₁ and on (R₁ᵀR₁)⁻¹ (f64).
    fn cond<T: Scalar>(r: &Mat<T>, n: usize) -> f64 {
        let r = to64(r);
        let mul = |x: &[f64], tr: bool| -> Vec<f64> {
            (0..n)
                .map(|i| {
                    if tr {
                        (0..=i).map(|j| r[(j, i)] * x[j]).sum()
                    } else {
                        (i..n).map(|j| r[(i, j)] * x[j]).sum()
                    }
                })
                .collect()
        };
        let solve = |b: &[f64], tr: bool| -> Vec<f64> {
            let mut x = vec![0.0; n];
            if tr {
                for i in 0..n {
                    let s: f64 = (0..i).map(|j| r[(j, i)] * x[j]).sum();
                    x[i] = (b[i] - s) / r[(i, i)];
                }
            } else {
                for i in (0..n).rev() {
                    let s: f64 = (i + 1..n).map(|j| r[(i, j)] * x[j]).sum();
                    x[i] = (b[i] - s) / r[(i, i)];
                }
            }
            x
        };
        let power = |f: &dyn Fn(&[f64]) -> Vec<f64>| {
            let mut x: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 0.37).sin()).collect();
            let mut lam = 0.0;
            for _ in 0..60 {
                let y = f(&x);
                lam = y.iter().map(|t| t * t).sum::<f64>().sqrt();
                x = y.iter().map(|t| t / lam).collect();
            }
            lam
        };
        let smax2 = power(&|x| mul(&mul(x, false), true));
        let smin2inv = power(&|x| solve(&solve(x, true), false));
        (smax2 * smin2inv).sqrt()
    }

    /// Compares `st` with a fresh factorisation of (Ã, b): R up to row signs within
    /// 10·m·u·κ₂·‖Ã‖; x within the LS perturbation bound 10·m·u·(κ₂ + κ₂²‖r‖/(‖Ã‖‖x‖));
    /// residual norms within 10·m·u·(1 + 2κ₂)·‖b‖ (Golub & Van Loan Thm 5.3.1);
    /// m = `m_op` as in [`check_properties`].
    pub fn check_against_refactor<T: Scalar>(st: &CpuQr<T>, a: &Mat<T>, b: &Mat<T>, m_op: usize) {
        let (m, n) = (a.nrows(), a.ncols());
        let fresh = factor(a, b, QPolicy::Full).expect("refactorisation");
        let tol = tol::<T>(m_op.max(m));
        let kappa = cond(&fresh.r, n);
        let anorm = a.norm_fro();
        let mut dr = 0.0f64;
        for i in 0..n {
            let s1 = st.r[(i, i)].to_f64().signum();
            let s2 = fresh.r[(i, i)].to_f64().signum();
            for j in i..n {
                dr += (s1 * st.r[(i, j)].to_f64() - s2 * fresh.r[(i, j)].to_f64()).powi(2);
            }
        }
        let dr = dr.sqrt();
        assert!(dr <= tol * kappa * anorm, "‖R − R̂‖ = {dr:e}, κ = {kappa:e}");
        let (x, res) = ls_of(st);
        let (xr, resr) = ls_of(&fresh);
        for k in 0..st.dims.q {
            let xn = (0..n).map(|i| xr[(i, k)].powi(2)).sum::<f64>().sqrt();
            let dx = (0..n)
                .map(|i| (x[(i, k)] - xr[(i, k)]).powi(2))
                .sum::<f64>()
                .sqrt();
            let bound = tol * (kappa + kappa * kappa * resr[k] / (anorm * xn));
            assert!(dx <= bound * xn, "e_x = {:e} > {bound:e}", dx / xn);
            let bn = b
                .col(k)
                .iter()
                .map(|t| t.to_f64().powi(2))
                .sum::<f64>()
                .sqrt();
            let dres = (res[k] - resr[k]).abs();
            assert!(
                dres <= tol * (1.0 + 2.0 * kappa) * bn,
                "residual {} vs {}",
                res[k],
                resr[k]
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;
    use crate::backend::QrUpdate;

    /// Ã = [A(:, 0:k0) | U | A(:, k0:n)].
    fn inserted<T: Scalar>(a: &Mat<T>, u: &Mat<T>, k0: usize) -> Mat<T> {
        let p = u.ncols();
        Mat::from_fn(a.nrows(), a.ncols() + p, |i, j| {
            if j < k0 {
                a[(i, j)]
            } else if j < k0 + p {
                u[(i, j - k0)]
            } else {
                a[(i, j - p)]
            }
        })
    }

    fn case<T: Scalar>(seed: u64, m: usize, n: usize, p: usize, k0: usize, nb: Option<usize>) {
        let mut g = rng(seed);
        let a = rand_mat::<T>(&mut g, m, n);
        let b = rand_mat::<T>(&mut g, m, 2);
        let u = rand_mat::<T>(&mut g, m, p);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        let mut prm = st.params();
        prm.block_size = nb;
        st.set_params(prm);
        st.insert_cols(k0, u.as_ref()).unwrap();
        let at = inserted(&a, &u, k0);
        check_properties(&st, &at, &b, m);
        check_against_refactor(&st, &at, &b, m);
    }

    fn sweep<T: Scalar>() {
        for &(m, n, p) in &[
            (2, 1, 1),
            (3, 1, 2),
            (3, 2, 1),
            (31, 7, 1),
            (33, 31, 2),
            (33, 20, 9),
            (127, 33, 5),
            (257, 127, 31),
        ] {
            for k0 in [0, n / 2, n] {
                case::<T>((m * 1000 + n * 10 + k0) as u64, m, n, p, k0, None);
            }
        }
        // Several Householder panels in step 2 (n_b = 3 for p = 7), and n_b = 1.
        case::<T>(11, 61, 29, 7, 13, Some(3));
        case::<T>(12, 61, 29, 7, 29, Some(1));
    }

    #[test]
    fn householder_strip_only_where_p_is_large() {
        // the seeds' grid points (spec §3.9): ACC (4000×2000, k0 = 0) switches from
        // p = 500 on; AC-p (strip of 20 rows), AC-k3, AC-k6 and AC-stage (p = 200)
        // keep their Givens strips
        assert!(!householder_strip_pays(4000, 2000, 0, 100));
        assert!(!householder_strip_pays(4000, 2000, 0, 300));
        for p in [500, 700, 900] {
            assert!(householder_strip_pays(4000, 2000, 0, p), "ACC p = {p}");
        }
        for p in [100, 700, 1500] {
            assert!(!householder_strip_pays(8000, 3000, 2980, p), "AC-p p = {p}");
        }
        for k0 in (0..3000).step_by(500) {
            assert!(
                !householder_strip_pays(4000, 3000, k0, 200),
                "AC-k3 k0 = {k0}"
            );
        }
        for k0 in (0..6000).step_by(500) {
            assert!(
                !householder_strip_pays(8000, 6000, k0, 200),
                "AC-k6 k0 = {k0}"
            );
        }
        assert!(!householder_strip_pays(16000, 6000, 500, 200));
        // nothing to triangularise at k0 = n
        assert!(!householder_strip_pays(4000, 2000, 2000, 900));
    }

    #[test]
    fn matches_refactorisation_f64() {
        sweep::<f64>();
    }

    #[test]
    fn matches_refactorisation_f32() {
        sweep::<f32>();
    }

    #[test]
    fn plan_rejects_bad_arguments() {
        let dims = Dims {
            m: 10,
            n: 4,
            q: 1,
            policy: QPolicy::Full,
        };
        let u = rand_mat::<f64>(&mut rng(1), 10, 3);
        assert!(plan(dims, 4, u.as_ref(), None).is_ok());
        let e = Mat::<f64>::zeros(10, 0);
        assert!(matches!(
            plan(dims, 0, e.as_ref(), None),
            Err(Error::EmptyBlock { .. })
        ));
        let short = rand_mat::<f64>(&mut rng(2), 9, 2);
        assert!(matches!(
            plan(dims, 0, short.as_ref(), None),
            Err(Error::Shape {
                got: 9,
                expected: 10,
                ..
            })
        ));
        assert!(matches!(
            plan(dims, 5, u.as_ref(), None),
            Err(Error::OutOfRange { k0: 5, .. })
        ));
        let wide = rand_mat::<f64>(&mut rng(3), 10, 7);
        assert!(matches!(
            plan(dims, 0, wide.as_ref(), None),
            Err(Error::Underdetermined { m: 10, n: 11, .. })
        ));
        let mut bad = u.clone();
        bad[(7, 2)] = f64::NAN;
        assert!(matches!(
            plan(dims, 0, bad.as_ref(), None),
            Err(Error::NonFinite { row: 7, col: 2, .. })
        ));
        assert!(matches!(
            plan(dims, 0, u.as_ref(), Some(0)),
            Err(Error::InvalidParam { .. })
        ));
        let qless = Dims {
            policy: QPolicy::None,
            ..dims
        };
        assert!(matches!(
            plan(qless, 0, u.as_ref(), None),
            Err(Error::NeedsQ { .. })
        ));
    }

    #[test]
    fn qless_state_is_refused_and_unchanged() {
        let mut g = rng(21);
        let a = rand_mat::<f64>(&mut g, 33, 7);
        let b = rand_mat::<f64>(&mut g, 33, 1);
        let u = rand_mat::<f64>(&mut g, 33, 2);
        let mut st = factor(&a, &b, QPolicy::None).unwrap();
        let snap = st.clone();
        assert!(matches!(
            st.insert_cols(3, u.as_ref()),
            Err(Error::NeedsQ { .. })
        ));
        assert!(same_state(&st, &snap));
    }

    #[test]
    fn dependent_column_is_rank_deficient_and_unchanged() {
        for (seed, k0) in [(31u64, 0usize), (32, 5), (33, 9)] {
            let mut g = rng(seed);
            let a = rand_mat::<f64>(&mut g, 31, 9);
            let b = rand_mat::<f64>(&mut g, 31, 1);
            let mut st = factor(&a, &b, QPolicy::Full).unwrap();
            let snap = st.clone();
            // Column 4 of A, inserted again: the new matrix has two equal columns.
            let dup: Vec<f64> = a.col(4).to_vec();
            let err = st.insert_col(k0, &dup).unwrap_err();
            assert!(matches!(err, Error::RankDeficient { .. }), "{err}");
            assert!(same_state(&st, &snap));
            let mut g32 = rng(seed);
            let a32 = rand_mat::<f32>(&mut g32, 31, 9);
            let b32 = rand_mat::<f32>(&mut g32, 31, 1);
            let mut st32 = factor(&a32, &b32, QPolicy::Full).unwrap();
            let snap32 = st32.clone();
            let dup32: Vec<f32> = a32.col(2).to_vec();
            assert!(matches!(
                st32.insert_col(k0, &dup32),
                Err(Error::RankDeficient { .. })
            ));
            assert!(same_state(&st32, &snap32));
        }
    }
}
