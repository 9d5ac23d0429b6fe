//! The distributed state (`cuqr::distributed::DistQr`) against the single-GPU state on the same
//! data, f64, sizes that are no multiples of 32: the TSQR factorisation (R-only and thin),
//! then a sequence of window steps (with and without forgetting, rows crossing ranks), row
//! insertion and deletion, column insertion and rank-one, comparing the solution, the
//! residual norms and |diag R| after each (the thin kind also Q₁ up to column signs,
//! Q₁ᵀQ₁ = I and Q₁R = A). G = 1 and G = 3 logical partitions on GPU 0; with
//! several GPUs, the same across all of them through NCCL (keep `NCCL_NVLS_ENABLE=0`).
//! Without a GPU every test prints "skipped"; `CUQR_REQUIRE_GPU=1` makes that a failure.

mod common;

use std::sync::Arc;

use common::{random_mat, rng};
use cuqr::distributed::{Combine, DistGroup, DistQr};
use cuqr::internals::splice::{rows_deleted, rows_inserted};
use cuqr::{Error, FactorParams, Gpu, GpuQr, Mat, QPolicy, QrUpdate, UpdateParams};

/// Every device that opens, when there are at least two.
fn devices() -> Option<Vec<Arc<Gpu>>> {
    let _ = common::shared_gpu()?;
    let gs: Vec<Arc<Gpu>> = (0..8)
        .map_while(|i| Gpu::new(i).ok().map(Arc::new))
        .collect();
    if gs.len() < 2 {
        eprintln!("skipped: fewer than two GPUs");
        return None;
    }
    Some(gs)
}

fn keep() -> FactorParams {
    FactorParams {
        keep_data: true,
        ..FactorParams::default()
    }
}

/// max |x − y| / max(1, max |y|)
fn rel(x: &Mat<f64>, y: &Mat<f64>) -> f64 {
    assert_eq!((x.nrows(), x.ncols()), (y.nrows(), y.ncols()));
    let mut num: f64 = 0.0;
    let mut den: f64 = 1.0;
    for j in 0..y.ncols() {
        for i in 0..y.nrows() {
            num = num.max((x[(i, j)] - y[(i, j)]).abs());
            den = den.max(y[(i, j)].abs());
        }
    }
    num / den
}

fn same(what: &str, d: &DistQr<f64>, s: &GpuQr<f64>) {
    assert_eq!(d.nrows(), s.nrows(), "{what}: rows");
    assert_eq!(d.ncols(), s.ncols(), "{what}: cols");
    let (xd, xs) = (d.solve().unwrap(), s.solve().unwrap());
    let ex = rel(&xd.x, &xs.x);
    assert!(ex < 1e-8, "{what}: solution differs by {ex:e}");
    for (a, b) in xd.residual_norms.iter().zip(&xs.residual_norms) {
        assert!(
            (a - b).abs() <= 1e-8 * b.abs().max(1.0),
            "{what}: residual norm {a} against {b}"
        );
    }
    let (rd, rs) = (d.r().unwrap(), s.r().unwrap());
    let n = rs.ncols();
    let dd = Mat::from_fn(n, 1, |i, _| rd[(i, i)].abs());
    let ds = Mat::from_fn(n, 1, |i, _| rs[(i, i)].abs());
    let er = rel(&dd, &ds);
    assert!(er < 1e-8, "{what}: |diag R| differs by {er:e}");
}

fn sequence(parts: &[Arc<Gpu>], seed: u64) {
    let g0 = parts[0].clone();
    let mut r = rng(seed);
    let (m, n, q) = (1111, 37, 2);
    let a = random_mat::<f64>(&mut r, m, n);
    let b = random_mat::<f64>(&mut r, m, q);
    let mut d = DistQr::factorize(parts, a.as_ref(), b.as_ref(), QPolicy::None, keep()).unwrap();
    let mut s = GpuQr::factorize(&g0, a.as_ref(), b.as_ref(), QPolicy::None, keep()).unwrap();
    same("factorize", &d, &s);
    // window steps: enough to move the new rows round the ranks
    for step in 0..24 {
        let p = 23 + step % 3 * 10;
        let rows = random_mat::<f64>(&mut r, p, n);
        let rhs = random_mat::<f64>(&mut r, p, q);
        d.slide(rows.as_ref(), rhs.as_ref(), p).unwrap();
        s.slide(rows.as_ref(), rhs.as_ref(), p).unwrap();
        same(&format!("slide {step}"), &d, &s);
    }
    let params = UpdateParams {
        forget: 0.9,
        ..d.params()
    };
    d.set_params(params);
    s.set_params(params);
    let rows = random_mat::<f64>(&mut r, 41, n);
    let rhs = random_mat::<f64>(&mut r, 41, q);
    d.slide(rows.as_ref(), rhs.as_ref(), 19).unwrap();
    s.slide(rows.as_ref(), rhs.as_ref(), 19).unwrap();
    same("slide with forgetting", &d, &s);
    let params = UpdateParams {
        forget: 1.0,
        ..params
    };
    d.set_params(params);
    s.set_params(params);
    let u = random_mat::<f64>(&mut r, 13, n);
    let e = random_mat::<f64>(&mut r, 13, q);
    d.insert_rows(500, u.as_ref(), e.as_ref()).unwrap();
    s.insert_rows(500, u.as_ref(), e.as_ref()).unwrap();
    same("insert_rows", &d, &s);
    let mid = d.nrows() / 2 - 20;
    d.delete_rows(mid, 57).unwrap();
    s.delete_rows(mid, 57).unwrap();
    same("delete_rows across ranks", &d, &s);
    let uc = random_mat::<f64>(&mut r, d.nrows(), 3);
    d.insert_cols(5, uc.as_ref()).unwrap();
    s.insert_cols(5, uc.as_ref()).unwrap();
    same("insert_cols", &d, &s);
    let u1: Vec<f64> = (0..d.nrows())
        .map(|i| ((i * 7) % 13) as f64 / 13.0 - 0.4)
        .collect();
    let v1: Vec<f64> = (0..d.ncols())
        .map(|j| ((j * 5) % 11) as f64 / 11.0 - 0.5)
        .collect();
    d.rank_one(&u1, &v1).unwrap();
    s.rank_one(&u1, &v1).unwrap();
    same("rank_one", &d, &s);
    // a refused update leaves the state as it was
    let before = d.solve().unwrap().x;
    let too_many = d.nrows() - d.ncols() + 1;
    assert!(d.delete_rows(0, too_many).is_err());
    let bad = Mat::from_fn(3, d.ncols(), |_, _| f64::NAN);
    let e3 = Mat::<f64>::zeros(3, q);
    assert!(matches!(
        d.slide(bad.as_ref(), e3.as_ref(), 3),
        Err(Error::NonFinite { .. })
    ));
    assert_eq!(d.solve().unwrap().x.as_slice(), before.as_slice());
    same("after refused updates", &d, &s);
}

/// The thin kinds agree: `same`, Q₁ against the single-GPU Q₁ up to column signs, Q₁ᵀQ₁ = I
/// and Q₁R = A (the data the single-GPU state was updated to, tracked on the host).
fn same_thin(what: &str, d: &DistQr<f64>, s: &GpuQr<f64>, a: &Mat<f64>) {
    same(what, d, s);
    let (qd, qs) = (d.q().unwrap(), s.q().unwrap().expect("thin"));
    let n = qs.ncols();
    assert_eq!(
        (qd.nrows(), qd.ncols()),
        (qs.nrows(), n),
        "{what}: Q₁ shape"
    );
    let signed = Mat::from_fn(qd.nrows(), n, |i, j| {
        let dot: f64 = (0..qd.nrows()).map(|k| qd[(k, j)] * qs[(k, j)]).sum();
        qd[(i, j)] * dot.signum()
    });
    let e = rel(&signed, &qs);
    assert!(
        e < 1e-8,
        "{what}: Q₁ differs from the single-GPU Q₁ by {e:e}"
    );
    let e = rel(&qd.transpose().matmul(&qd), &Mat::identity(n));
    assert!(e < 1e-12, "{what}: Q₁ᵀQ₁ differs from I by {e:e}");
    let e = rel(&qd.matmul(&d.r().unwrap()), a);
    assert!(e < 1e-11, "{what}: Q₁R differs from A by {e:e}");
}

fn thin(parts: &[Arc<Gpu>], seed: u64) {
    let g0 = parts[0].clone();
    let mut r = rng(seed);
    let (m, n, q) = (997, 45, 1);
    let mut a = random_mat::<f64>(&mut r, m, n);
    let b = random_mat::<f64>(&mut r, m, q);
    let fp = FactorParams::default();
    let mut d = DistQr::factorize(parts, a.as_ref(), b.as_ref(), QPolicy::Thin, fp).unwrap();
    let mut s = GpuQr::factorize(&g0, a.as_ref(), b.as_ref(), QPolicy::Thin, fp).unwrap();
    same_thin("thin factorize", &d, &s, &a);
    // window steps: the new rows go round the ranks, the oldest leave
    for step in 0..14 {
        let p = 29 + step % 3 * 17;
        let rows = random_mat::<f64>(&mut r, p, n);
        let rhs = random_mat::<f64>(&mut r, p, q);
        d.slide(rows.as_ref(), rhs.as_ref(), p).unwrap();
        s.slide(rows.as_ref(), rhs.as_ref(), p).unwrap();
        a = rows_inserted(&rows_deleted(&a, 0, p), a.nrows() - p, &rows);
        same_thin(&format!("thin slide {step}"), &d, &s, &a);
    }
    // new rows that weigh much more than the window (the Householder form)
    let big = Mat::from_fn(7, n, |i, j| 1e3 * (((i * 31 + j * 17) % 23) as f64 - 11.0));
    let big_rhs = random_mat::<f64>(&mut r, 7, q);
    d.slide(big.as_ref(), big_rhs.as_ref(), 7).unwrap();
    s.slide(big.as_ref(), big_rhs.as_ref(), 7).unwrap();
    a = rows_inserted(&rows_deleted(&a, 0, 7), a.nrows() - 7, &big);
    same_thin("thin slide, heavy rows", &d, &s, &a);
    let params = UpdateParams {
        forget: 0.9,
        ..d.params()
    };
    d.set_params(params);
    s.set_params(params);
    for step in 0..3 {
        let rows = random_mat::<f64>(&mut r, 41, n);
        let rhs = random_mat::<f64>(&mut r, 41, q);
        d.slide(rows.as_ref(), rhs.as_ref(), 19).unwrap();
        s.slide(rows.as_ref(), rhs.as_ref(), 19).unwrap();
        let kept = rows_deleted(&a, 0, 19);
        let scaled = Mat::from_fn(kept.nrows(), n, |i, j| 0.9f64.sqrt() * kept[(i, j)]);
        a = rows_inserted(&scaled, scaled.nrows(), &rows);
        same_thin(&format!("thin slide with forgetting {step}"), &d, &s, &a);
    }
    let params = UpdateParams {
        forget: 1.0,
        ..params
    };
    d.set_params(params);
    s.set_params(params);
    let u = random_mat::<f64>(&mut r, 13, n);
    let e = random_mat::<f64>(&mut r, 13, q);
    d.insert_rows(500, u.as_ref(), e.as_ref()).unwrap();
    s.insert_rows(500, u.as_ref(), e.as_ref()).unwrap();
    a = rows_inserted(&a, 500, &u);
    same_thin("thin insert_rows", &d, &s, &a);
    let mid = d.nrows() / 2 - 20;
    d.delete_rows(mid, 57).unwrap();
    s.delete_rows(mid, 57).unwrap();
    a = rows_deleted(&a, mid, 57);
    same_thin("thin delete_rows across ranks", &d, &s, &a);
    let uc = random_mat::<f64>(&mut r, d.nrows(), 3);
    d.insert_cols(5, uc.as_ref()).unwrap();
    s.insert_cols(5, uc.as_ref()).unwrap();
    a = Mat::from_fn(a.nrows(), n + 3, |i, j| match j {
        j if j < 5 => a[(i, j)],
        j if j < 8 => uc[(i, j - 5)],
        j => a[(i, j - 3)],
    });
    same_thin("thin insert_cols", &d, &s, &a);
    let uc = random_mat::<f64>(&mut r, d.nrows(), 2);
    d.insert_cols(d.ncols(), uc.as_ref()).unwrap();
    s.insert_cols(s.ncols(), uc.as_ref()).unwrap();
    let n2 = a.ncols();
    a = Mat::from_fn(a.nrows(), n2 + 2, |i, j| {
        if j < n2 {
            a[(i, j)]
        } else {
            uc[(i, j - n2)]
        }
    });
    same_thin("thin insert_cols at the end", &d, &s, &a);
    let u1: Vec<f64> = (0..d.nrows())
        .map(|i| ((i * 7) % 13) as f64 / 13.0 - 0.4)
        .collect();
    let v1: Vec<f64> = (0..d.ncols())
        .map(|j| ((j * 5) % 11) as f64 / 11.0 - 0.5)
        .collect();
    d.rank_one(&u1, &v1).unwrap();
    s.rank_one(&u1, &v1).unwrap();
    a = Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)] + u1[i] * v1[j]);
    same_thin("thin rank_one", &d, &s, &a);
    // u inside range(Q₁): no new direction
    let qd = d.q().unwrap();
    let u2: Vec<f64> = (0..d.nrows())
        .map(|i| qd[(i, 2)] - 0.5 * qd[(i, 7)])
        .collect();
    d.rank_one(&u2, &v1).unwrap();
    s.rank_one(&u2, &v1).unwrap();
    a = Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)] + u2[i] * v1[j]);
    same_thin("thin rank_one inside range(Q₁)", &d, &s, &a);
    // refused updates leave the state as it was
    let before = (d.solve().unwrap().x, d.q().unwrap());
    let too_many = d.nrows() - d.ncols() + 1;
    assert!(d.delete_rows(0, too_many).is_err());
    let bad = Mat::from_fn(3, d.ncols(), |_, _| f64::NAN);
    let e3 = Mat::<f64>::zeros(3, q);
    assert!(matches!(
        d.slide(bad.as_ref(), e3.as_ref(), 3),
        Err(Error::NonFinite { .. })
    ));
    let dep = Mat::from_fn(d.nrows(), 1, |i, _| before.1[(i, 3)] + before.1[(i, 9)]);
    assert!(matches!(
        d.insert_cols(0, dep.as_ref()),
        Err(Error::RankDeficient { .. })
    ));
    assert_eq!(d.solve().unwrap().x.as_slice(), before.0.as_slice());
    assert_eq!(d.q().unwrap().as_slice(), before.1.as_slice());
    same_thin("thin after refused updates", &d, &s, &a);
}

#[test]
fn one_partition_matches_the_single_gpu_state() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    sequence(std::slice::from_ref(&g), 11);
    thin(&[g], 12);
}

#[test]
fn three_partitions_on_one_gpu_match_the_single_gpu_state() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    sequence(&[g.clone(), g.clone(), g.clone()], 21);
    thin(&[g.clone(), g.clone(), g], 22);
}

#[test]
fn every_gpu_matches_the_single_gpu_state() {
    let Some(gs) = devices() else { return };
    sequence(&gs, 31);
    thin(&gs, 32);
}

#[test]
fn bad_arguments_are_refused() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    let mut r = rng(41);
    let a = random_mat::<f64>(&mut r, 100, 40);
    let b = random_mat::<f64>(&mut r, 100, 1);
    // three partitions of 33 rows cannot hold 40 columns
    let parts = [g.clone(), g.clone(), g.clone()];
    assert!(matches!(
        DistQr::factorize(&parts, a.as_ref(), b.as_ref(), QPolicy::None, keep()),
        Err(Error::InvalidParam { .. })
    ));
    assert!(matches!(
        DistQr::factorize(
            std::slice::from_ref(&g),
            a.as_ref(),
            b.as_ref(),
            QPolicy::Full,
            keep()
        ),
        Err(Error::InvalidParam { .. })
    ));
    let mut d = DistQr::factorize(
        &[g.clone(), g],
        a.as_ref(),
        b.as_ref(),
        QPolicy::None,
        FactorParams::default(),
    )
    .unwrap();
    assert!(matches!(d.delete_rows(0, 2), Err(Error::NeedsData { .. })));
    assert!(matches!(
        cuqr::distributed::NcclId::from_hex("zz"),
        Err(Error::InvalidParam { .. })
    ));
}

/// Two factorisations in one [`DistGroup`] (its communicators made once), each matching the
/// single-GPU state, and updates on both interleaved.
fn shared_group(parts: &[Arc<Gpu>], seed: u64) {
    let group = DistGroup::new(parts).unwrap();
    let g0 = &parts[0];
    let mut g = rng(seed);
    let (m, n) = (1307, 29);
    let (a1, b1) = (
        random_mat::<f64>(&mut g, m, n),
        random_mat::<f64>(&mut g, m, 1),
    );
    let (a2, b2) = (
        random_mat::<f64>(&mut g, m, n),
        random_mat::<f64>(&mut g, m, 1),
    );
    let mut d1 =
        DistQr::factorize_in(&group, a1.as_ref(), b1.as_ref(), QPolicy::None, keep()).unwrap();
    let mut d2 =
        DistQr::factorize_in(&group, a2.as_ref(), b2.as_ref(), QPolicy::None, keep()).unwrap();
    let mut s1 = GpuQr::factorize(g0, a1.as_ref(), b1.as_ref(), QPolicy::None, keep()).unwrap();
    let mut s2 = GpuQr::factorize(g0, a2.as_ref(), b2.as_ref(), QPolicy::None, keep()).unwrap();
    same("first", &d1, &s1);
    same("second", &d2, &s2);
    for step in 0..3 {
        let rows = random_mat::<f64>(&mut g, 40, n);
        let rhs = random_mat::<f64>(&mut g, 40, 1);
        d1.slide(rows.as_ref(), rhs.as_ref(), 40).unwrap();
        s1.slide(rows.as_ref(), rhs.as_ref(), 40).unwrap();
        d2.slide(rows.as_ref(), rhs.as_ref(), 40).unwrap();
        s2.slide(rows.as_ref(), rhs.as_ref(), 40).unwrap();
        same(&format!("first, step {step}"), &d1, &s1);
        same(&format!("second, step {step}"), &d2, &s2);
    }
}

#[test]
fn one_group_serves_several_states() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    shared_group(&[g.clone(), g.clone()], 71);
    if let Some(all) = devices() {
        shared_group(&all, 72);
    }
}

/// The binary-tree combine against the all-gather and the single-GPU state: G ranks
/// (logical partitions, or devices), two right-hand sides, then window steps and a row
/// deletion on the tree's state. The tree's R and d differ from the all-gather's in
/// rounding only (another order of the same orthogonal transformations).
fn tree_against_gather(parts: &[Arc<Gpu>], n: usize, seed: u64) {
    let g0 = &parts[0];
    let mut g = rng(seed);
    let q = 2;
    let m = parts.len() * (n + 9) + 17;
    let a = random_mat::<f64>(&mut g, m, n);
    let b = random_mat::<f64>(&mut g, m, q);
    let tree = DistGroup::new(parts).unwrap().with_combine(Combine::Tree);
    let gather = DistGroup::new(parts)
        .unwrap()
        .with_combine(Combine::AllGather);
    let mut dt =
        DistQr::factorize_in(&tree, a.as_ref(), b.as_ref(), QPolicy::None, keep()).unwrap();
    let dg = DistQr::factorize_in(&gather, a.as_ref(), b.as_ref(), QPolicy::None, keep()).unwrap();
    let mut s = GpuQr::factorize(g0, a.as_ref(), b.as_ref(), QPolicy::None, keep()).unwrap();
    let what = format!("tree of {} ranks", parts.len());
    same(&what, &dt, &s);
    same(&format!("all-gather of {} ranks", parts.len()), &dg, &s);
    for step in 0..3 {
        let p = 7 + step;
        let rows = random_mat::<f64>(&mut g, p, n);
        let rhs = random_mat::<f64>(&mut g, p, q);
        dt.slide(rows.as_ref(), rhs.as_ref(), p).unwrap();
        s.slide(rows.as_ref(), rhs.as_ref(), p).unwrap();
        same(&format!("{what}, slide {step}"), &dt, &s);
    }
    dt.delete_rows(3, 5).unwrap();
    s.delete_rows(3, 5).unwrap();
    same(&format!("{what}, delete_rows"), &dt, &s);
}

#[test]
fn the_tree_combine_matches_the_all_gather() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    // n = 31: one element a lane in the pair kernel's loops; 77 and 300: chunks of eight,
    // and tails longer than one chunk.
    for (k, (world, n)) in [
        (2usize, 31usize),
        (3, 31),
        (5, 31),
        (8, 31),
        (13, 31),
        (64, 31),
        (8, 77),
        (9, 300),
    ]
    .into_iter()
    .enumerate()
    {
        tree_against_gather(&vec![g.clone(); world], n, 81 + k as u64);
    }
    if let Some(all) = devices() {
        tree_against_gather(&all, 31, 91);
    }
}

/// Partitions with device handles of their own (`Gpu::partition`) run a tree level's pair
/// QRs side by side in threads; the arithmetic is the same as on one shared handle, so R
/// and d agree bit for bit, and the state matches the single-GPU one through updates.
#[test]
fn partitions_with_own_handles_match_one_handle() {
    let Some(g) = common::shared_gpu() else {
        return;
    };
    for (k, world) in [5usize, 13].into_iter().enumerate() {
        let mut own = vec![g.clone()];
        while own.len() < world {
            own.push(Arc::new(g.partition().unwrap()));
        }
        tree_against_gather(&own, 31, 95 + k as u64);
        let mut r = rng(97 + k as u64);
        let (n, q) = (29, 2);
        let m = world * (n + 5) + 11;
        let a = random_mat::<f64>(&mut r, m, n);
        let b = random_mat::<f64>(&mut r, m, q);
        let factor = |parts: &[Arc<Gpu>]| {
            let group = DistGroup::new(parts).unwrap().with_combine(Combine::Tree);
            DistQr::factorize_in(&group, a.as_ref(), b.as_ref(), QPolicy::None, keep()).unwrap()
        };
        let (shared, separate) = (factor(&vec![g.clone(); world]), factor(&own));
        assert_eq!(
            shared.r().unwrap(),
            separate.r().unwrap(),
            "R, {world} ranks"
        );
        assert_eq!(
            shared.d().unwrap(),
            separate.d().unwrap(),
            "d, {world} ranks"
        );
        let (xs, xo) = (shared.solve().unwrap(), separate.solve().unwrap());
        assert_eq!(xs.x, xo.x, "x, {world} ranks");
        assert_eq!(xs.residual_norms, xo.residual_norms, "ρ, {world} ranks");
    }
}
