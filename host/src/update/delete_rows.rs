//! Delete rows k0..k0+p of A (spec §1.10; S0 §2.4.4, §4.4; S2 §3.4). Givens rotations on
//! the columns of Q zero Z = Q(k0:k0+p, :) right of its diagonal; pm − p(p+1)/2 rotations,
//! each on a Q column pair (m entries), d, and R rows only where they are nonzero (note G4),
//! ≈ 6pm² + 3pn² flops. Errata fixed: E5 (GᵀR, not GR), E17 (Z is rows k0..k0+p, all
//! columns; p, not `pnumadded`). Needs Q.
#![forbid(unsafe_code)]

use crate::cpu::givens::{givens, rot, rot_pair};
use crate::cpu::{CpuQr, Dims};
use crate::error::{Error, Result};
use crate::mat::Mat;
use crate::params::QPolicy;
use crate::scalar::Scalar;

const OP: &str = "delete_rows";

/// A validated row deletion (spec §1.10): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows before the update.
    pub m: usize,
    /// Columns n (unchanged).
    pub n: usize,
    /// Number of deleted rows.
    pub p: usize,
    /// First deleted row (0-based, ≤ m − p).
    pub k0: usize,
}

/// Validates deleting rows k0..k0+p (spec §1.10, §0.2: k0 ∈ [0, m−p]).
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 + p > m),
/// [`Error::Underdetermined`] (m − p < n), [`Error::NeedsQ`] (Q-less state).
pub(crate) fn plan(dims: Dims, k0: usize, p: usize) -> Result<Plan> {
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    if k0.checked_add(p).is_none_or(|end| end > dims.m) {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.m,
        });
    }
    if dims.m - p < dims.n {
        return Err(Error::Underdetermined {
            op: OP,
            m: dims.m - p,
            n: dims.n,
        });
    }
    if dims.policy == QPolicy::None {
        return Err(Error::NeedsQ {
            op: OP,
            policy: dims.policy,
        });
    }
    Ok(Plan {
        m: dims.m,
        n: dims.n,
        p,
        k0,
    })
}

/// Q, R and d after the rotations of §1.10, before the first p rows/columns are dropped:
/// Z·G = [Δ, 0] with Δ ≈ I, and GᵀR = [S; R̃] with R̃ upper trapezoidal up to rounding.
pub(crate) struct Rotated<T> {
    pub q: Mat<T>,
    pub r: Mat<T>,
    pub d: Mat<T>,
}

/// Applies the rotations of spec §1.10 to copies of Q, R and d. For each row i of Z
/// (i = 0..p) and j = m−1 down to i+1, the rotation on plane (j−1, j) zeroes Z(i, j)
/// against Z(i, j−1) of the current Q. While row i is processed R has i sub-diagonals, so
/// rows ≥ n+i are zero: planes with j−1 ≥ n+i skip R, and the others touch only
/// columns ≥ j−1−i (note G4).
pub(crate) fn rotate_out<T: Scalar>(q: &Mat<T>, r: &Mat<T>, d: &Mat<T>, plan: &Plan) -> Rotated<T> {
    let Plan { m, n, p, k0 } = *plan;
    let (mut q, mut r, mut d) = (q.clone(), r.clone(), d.clone());
    let nrhs = d.ncols();
    for i in 0..p {
        let zi = k0 + i;
        for j in (i + 1..m).rev() {
            let (c, s, rho) = givens(q[(zi, j - 1)], q[(zi, j)]);
            let (x, y) = q.two_cols_mut(j - 1, j);
            rot(c, s, x, y);
            x[zi] = rho;
            y[zi] = T::ZERO;
            if j - 1 < n + i {
                for col in (j - 1).saturating_sub(i)..n {
                    let (mut a, mut b) = (r[(j - 1, col)], r[(j, col)]);
                    rot_pair(c, s, &mut a, &mut b);
                    r[(j - 1, col)] = a;
                    r[(j, col)] = b;
                }
            }
            for k in 0..nrhs {
                let (mut a, mut b) = (d[(j - 1, k)], d[(j, k)]);
                rot_pair(c, s, &mut a, &mut b);
                d[(j - 1, k)] = a;
                d[(j, k)] = b;
            }
        }
    }
    Rotated { q, r, d }
}

/// Deletes rows k0..k0+p of A, producing Q̃ ((m−p)×(m−p)), R̃ and d̃ (spec §1.10).
/// Works on new buffers and swaps them in only after the rank check.
///
/// # Errors
/// Those of `plan` (above), and [`Error::RankDeficient`] when the remaining rows are
/// numerically rank deficient. On error the state is unchanged.
pub fn run_cpu<T: Scalar>(st: &mut CpuQr<T>, k0: usize, p: usize) -> Result<()> {
    let plan = plan(st.dims, k0, p)?;
    let Plan { m, n, .. } = plan;
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
    let rot = rotate_out(q_old, &st.r, &st.d, &plan);
    let mp = m - p;
    // Q̃ = Q(rows ∉ block, p:m): rows of the deleted block are [Δ, 0] = [I, 0] and the
    // other rows of Q(:, 0:p) are zero (orthogonality), so both are dropped.
    let q = Mat::from_fn(mp, mp, |i, j| {
        let row = if i < k0 { i } else { i + p };
        rot.q[(row, j + p)]
    });
    // R̃ = (GᵀR)(p:m, :); its strictly lower part is rounding residue: cleared to exact 0.
    let r = Mat::from_fn(
        mp,
        n,
        |i, j| if i > j { T::ZERO } else { rot.r[(i + p, j)] },
    );
    let d = Mat::from_fn(mp, st.dims.q, |i, j| rot.d[(i + p, j)]);
    let next = CpuQr {
        dims: Dims { m: mp, ..st.dims },
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

/// Whether deleting p of m rows (n columns, Q kept, elements of `elem` bytes) is
/// cheaper on the GPU by refactorising A′ = Q(kept, 0:n)·R than by the rotations
/// (`RowRemoval::Auto`'s choice): only where p ≥ m/16, and where a time model in
/// milliseconds from the H100 measurements in docs/performance.md (eleventh session)
/// says so. f64: the rotations 2.3·10⁻⁹·p·m·(m + n) ms (the ACC row deletions at
/// p = 100–500, windowed); the factorisation with its m′×m′ Q 6.15·10⁻³·n ms (panel
/// chain) plus (2m′n² + 4m′²n) flops at 30.7 TFLOP/s (fitted to cuqr's 2048×1024 and
/// 4096×2048 factorisations with Q), plus the 2m′n² of A′'s GEMM. f32: rotations
/// 1.08× (the f32/f64 ratio of the ACC rotations at p = 300, where the choice is close;
/// at p = 500–900 they were 1.35–1.48× slower, so the factor errs towards rotating) and
/// refactorisation 0.88× (ACC p = 500) those.
pub(crate) fn refactorising_pays(m: usize, n: usize, p: usize, elem: usize) -> bool {
    if 16 * p < m || p >= m {
        return false;
    }
    let (mp, m, n, p) = ((m - p) as f64, m as f64, n as f64, p as f64);
    let (rot, refac) = if elem == 4 { (1.08, 0.88) } else { (1.0, 1.0) };
    let rotations_ms = rot * 2.3e-9 * p * m * (m + n);
    let flops = 2.0 * mp * n * n + 4.0 * mp * mp * n + 2.0 * mp * n * n;
    let refactorise_ms = refac * (6.15e-3 * n + flops / 3.07e10);
    refactorise_ms < rotations_ms
}

/// Deletes rows k0..k0+p on the device (spec §1.10; docs/design.md): the rotations
/// on copies of Q, R and d (`params.row_removal`: two-phase, or the seed composite /
/// separate-streams designs), then Q̃ = Q(rows ∉ block, p:m), R̃ = R(p:m, :) with exact
/// zeros below the diagonal and d̃ = d(p:m, :) gathered into new buffers, the rank check,
/// and the swap. For large p (`RowRemoval::Refactorise`, or `Auto` where
/// `refactorising_pays`) no rotations: A′ = Q(kept, 0:n)·R and b′ = Q(kept, :)·d, then
/// A′ is factorised again with the state's rank tolerance.
///
/// # Errors
/// Those of `plan` (above), [`Error::RankDeficient`], [`Error::OutOfMemory`], and device
/// errors. On error the state is unchanged (a device fault also poisons it).
pub fn run_gpu<T: crate::gpu::GpuScalar>(
    st: &mut crate::gpu::GpuQr<T>,
    k0: usize,
    p: usize,
) -> Result<()> {
    use crate::gpu::{givens_two_phase as tp, givens_wavefront as wf, DevMat, GpuQr, Op};
    use crate::params::{FactorParams, RowRemoval};
    let Plan { m, n, p, k0 } = plan(st.dims, k0, p)?;
    let q_old = st.q.as_ref().ok_or(Error::NeedsQ {
        op: OP,
        policy: st.dims.policy,
    })?;
    let (mp, nrhs) = (m - p, st.dims.q);
    let refactorise = match st.params.row_removal {
        RowRemoval::Refactorise => true,
        RowRemoval::Auto => refactorising_pays(m, n, p, core::mem::size_of::<T>()),
        _ => false,
    };
    if refactorise {
        let fresh = st.guarded(|| {
            let gpu = &*st.gpu;
            // A′ = Q(kept, 0:n)·R(0:n, :) (R's rows n.. are zero) and b′ = Q(kept, :)·d
            // (b = Q·d, Q square), by the two row blocks of Q that are kept
            let mut a = DevMat::<T>::zeros(gpu, mp, n)?;
            let mut b = DevMat::<T>::zeros(gpu, mp, nrhs)?;
            for (src, dst, rows) in [(0, 0, k0), (k0 + p, k0, m - k0 - p)] {
                if rows == 0 {
                    continue;
                }
                gpu.gemm(
                    Op::N,
                    Op::N,
                    T::ONE,
                    &q_old.block(src, 0, rows, n),
                    &st.r.block(0, 0, n, n),
                    T::ZERO,
                    &mut a.block_mut(dst, 0, rows, n),
                )?;
                gpu.gemm(
                    Op::N,
                    Op::N,
                    T::ONE,
                    &q_old.block(src, 0, rows, m),
                    &st.d.view(),
                    T::ZERO,
                    &mut b.block_mut(dst, 0, rows, nrhs),
                )?;
            }
            gpu.stage_mark("A' and b'");
            let params = FactorParams {
                block_size: None,
                rank_tol: Some(st.rank_tol),
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
    let (r, q, d) = st.guarded(|| {
        let gpu = &*st.gpu;
        let mut q = tp::dup(gpu, q_old)?;
        let mut r = tp::dup(gpu, &st.r)?;
        let mut d = tp::dup(gpu, &st.d)?;
        gpu.stage_mark("copies");
        match st.params.row_removal {
            RowRemoval::Composite => {
                wf::delete_rows_rotate_composite(gpu, &mut q, &mut r, &mut d, k0, p)?
            }
            RowRemoval::SeparateStreams => {
                wf::delete_rows_rotate_separate(gpu, &mut q, &mut r, &mut d, k0, p)?
            }
            // (Refactorise returned above)
            RowRemoval::TwoPhase | RowRemoval::Auto | RowRemoval::Refactorise => {
                tp::delete_rows_rotate_two_phase(gpu, &mut q, &mut r, &mut d, k0, p)?
            }
        }
        gpu.stage_mark("rotations");
        let qn = gpu.two_phase_copy_new(&q.block(0, p, m, mp), k0..k0 + p, false)?;
        let rn = gpu.two_phase_copy_new(&r.block(p, 0, mp, n), 0..0, true)?;
        let dn = gpu.two_phase_copy_new(&d.block(p, 0, mp, nrhs), 0..0, false)?;
        gpu.stage_mark("drop rows");
        tp::check_rank(gpu, &rn, n, st.rank_tol)?;
        Ok((rn, qn, dn))
    })?;
    st.r = r;
    st.q = Some(q);
    st.d = d;
    st.dims.m = mp;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::update::insert_cols::testkit::*;

    /// Rows of `a` outside k0..k0+p.
    fn removed<T: Scalar>(a: &Mat<T>, k0: usize, p: usize) -> Mat<T> {
        Mat::from_fn(a.nrows() - p, a.ncols(), |i, j| {
            a[(if i < k0 { i } else { i + p }, j)]
        })
    }

    fn case<T: Scalar>(seed: u64, m: usize, n: usize, p: usize, k0: usize) {
        let mut g = rng(seed);
        let a = rand_mat::<T>(&mut g, m, n);
        let b = rand_mat::<T>(&mut g, m, 2);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();

        // Before the first p rows and columns are dropped: Δ = I, Q(rows ∉ block, 0:p) = 0,
        // and the strictly lower part of (GᵀR)(p:m, :) is rounding residue only.
        let pl = plan(st.dims, k0, p).unwrap();
        let rot = rotate_out(st.q.as_ref().unwrap(), &st.r, &st.d, &pl);
        let tol = tol::<T>(m);
        let (mut e_delta, mut low) = (0.0f64, 0.0f64);
        for i in 0..m {
            for j in 0..p {
                let want = (i >= k0 && i - k0 == j) as u8 as f64;
                e_delta += (rot.q[(i, j)].to_f64() - want).powi(2);
            }
        }
        for j in 0..n {
            for i in j + 1..m - p {
                low += rot.r[(i + p, j)].to_f64().powi(2);
            }
        }
        assert!(
            e_delta.sqrt() <= tol,
            "‖Q(:, 0:p) − [I; 0]‖ = {:e}",
            e_delta.sqrt()
        );
        assert!(
            low.sqrt() <= tol * a.norm_fro(),
            "residue below R̃'s diagonal {:e}",
            low.sqrt()
        );

        st.delete_rows(k0, p).unwrap();
        let (at, bt) = (removed(&a, k0, p), removed(&b, k0, p));
        check_properties(&st, &at, &bt, m);
        check_against_refactor(&st, &at, &bt, m);
    }

    fn sweep<T: Scalar>() {
        for &(m, n, p) in &[
            (2, 1, 1),
            (3, 1, 2),
            (3, 2, 1),
            (33, 7, 1),
            (33, 31, 2),
            (33, 20, 9),
            (127, 33, 5),
            (257, 127, 31),
        ] {
            for k0 in [0, (m - p) / 2, m - p] {
                case::<T>((m * 1000 + n * 10 + k0) as u64, m, n, p, k0);
            }
        }
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
    fn refactorising_only_for_large_p() {
        // the seeds' grids (spec §3.9): ACC (4000×2000) from p = 500 in f64 and from
        // p = 300 in f32 (there the rotations are slower and the factorisation faster);
        // none of RR-seq, RR-n, RR-m, RR-comp (p ≤ 100)
        for elem in [4, 8] {
            assert!(!refactorising_pays(4000, 2000, 100, elem));
            for p in [500, 700, 900] {
                assert!(refactorising_pays(4000, 2000, p, elem), "ACC p = {p}");
            }
            for p in [20, 40, 60, 80, 100] {
                for m in [2000, 4000, 6000] {
                    assert!(!refactorising_pays(m, 1000, p, elem), "RR-seq {m} {p}");
                }
                for n in [6000, 8000, 10000] {
                    assert!(!refactorising_pays(12000, n, p, elem), "RR-n {n} {p}");
                }
                for m in [8000, 12000, 16000] {
                    assert!(!refactorising_pays(m, 6000, p, elem), "RR-m {m} {p}");
                }
            }
            for n in [1000, 2000, 3000, 4000] {
                assert!(!refactorising_pays(5000, n, 50, elem), "RR-comp n = {n}");
            }
            assert!(!refactorising_pays(10, 4, 10, elem));
        }
        assert!(!refactorising_pays(4000, 2000, 300, 8));
        assert!(refactorising_pays(4000, 2000, 300, 4));
    }

    #[test]
    fn plan_rejects_bad_arguments() {
        let dims = Dims {
            m: 10,
            n: 4,
            q: 1,
            policy: QPolicy::Full,
        };
        assert!(plan(dims, 4, 6).is_ok());
        assert!(matches!(plan(dims, 0, 0), Err(Error::EmptyBlock { .. })));
        assert!(matches!(
            plan(dims, 5, 6),
            Err(Error::OutOfRange {
                k0: 5,
                p: 6,
                n: 10,
                ..
            })
        ));
        assert!(matches!(
            plan(dims, usize::MAX, 2),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            plan(dims, 0, 7),
            Err(Error::Underdetermined { m: 3, n: 4, .. })
        ));
        let qless = Dims {
            policy: QPolicy::None,
            ..dims
        };
        assert!(matches!(plan(qless, 0, 1), Err(Error::NeedsQ { .. })));
    }

    #[test]
    fn qless_state_is_refused_and_unchanged() {
        let mut g = rng(41);
        let a = rand_mat::<f32>(&mut g, 33, 7);
        let b = rand_mat::<f32>(&mut g, 33, 1);
        let mut st = factor(&a, &b, QPolicy::None).unwrap();
        let snap = st.clone();
        assert!(matches!(st.delete_rows(3, 2), Err(Error::NeedsQ { .. })));
        assert!(same_state(&st, &snap));
    }

    fn rank_deficient_case<T: Scalar>(seed: u64, k0: usize) {
        // Column 3 equals column 1 except in the rows that are deleted: A has full rank,
        // Ã does not.
        let (m, n, p) = (31, 6, 3);
        let mut g = rng(seed);
        let mut a = rand_mat::<T>(&mut g, m, n);
        for i in (0..m).filter(|i| !(k0..k0 + p).contains(i)) {
            a[(i, 3)] = a[(i, 1)];
        }
        let b = rand_mat::<T>(&mut g, m, 1);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        let snap = st.clone();
        let err = st.delete_rows(k0, p).unwrap_err();
        assert!(
            matches!(err, Error::RankDeficient { column: 3, .. }),
            "{err}"
        );
        assert!(same_state(&st, &snap));
    }

    #[test]
    fn dependent_remainder_is_rank_deficient_and_unchanged() {
        for k0 in [0, 14, 28] {
            rank_deficient_case::<f64>(50 + k0 as u64, k0);
            rank_deficient_case::<f32>(60 + k0 as u64, k0);
        }
    }
}
