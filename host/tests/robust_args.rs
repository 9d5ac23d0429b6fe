//! Argument fuzzing of the CPU backend's update API (robustness sweep): random
//! sequences of updates with arbitrary positions and block sizes (small, at the
//! edges, or near `usize::MAX`), operands of arbitrary shapes, and values that are
//! sometimes NaN, ±∞, zero, huge or subnormal. Every call must return (no panic);
//! a failed call leaves the state bit-for-bit unchanged; an accepted call gives the
//! expected dimensions and a finite, upper-trapezoidal R. Accuracy of accepted
//! updates is the business of `cpu_oracle` and `properties`.

mod common;

use common::{random_mat, rng, snapshot};
use cuqr::{CpuQr, FactorParams, Mat, MatRef, QPolicy, QrUpdate, UpdateParams};
use proptest::prelude::*;

/// A position or count: mostly small, sometimes at the overflow edge.
fn index() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 0usize..16,
        1 => Just(usize::MAX),
        1 => Just(usize::MAX / 2 + 1),
    ]
}

/// A value for an operand entry: mostly ordinary, sometimes special.
fn special() -> impl Strategy<Value = Option<f64>> {
    prop_oneof![
        12 => Just(None),
        1 => Just(Some(f64::NAN)),
        1 => Just(Some(f64::INFINITY)),
        1 => Just(Some(0.0)),
        1 => Just(Some(1e300)),
        1 => Just(Some(1e-310)),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    InsertCols {
        k0: usize,
        rows: usize,
        cols: usize,
    },
    DeleteCols {
        k0: usize,
        p: usize,
    },
    InsertRows {
        k0: usize,
        rows: usize,
        cols: usize,
        erows: usize,
        ecols: usize,
    },
    DeleteRows {
        k0: usize,
        p: usize,
    },
    RankOne {
        ulen: usize,
        vlen: usize,
    },
    BlockSize(Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (index(), 0usize..14, 0usize..4).prop_map(|(k0, rows, cols)| Op::InsertCols {
            k0,
            rows,
            cols
        }),
        (index(), index()).prop_map(|(k0, p)| Op::DeleteCols { k0, p }),
        (index(), 0usize..4, 0usize..10, 0usize..4, 0usize..4).prop_map(
            |(k0, rows, cols, erows, ecols)| Op::InsertRows {
                k0,
                rows,
                cols,
                erows,
                ecols
            }
        ),
        (index(), index()).prop_map(|(k0, p)| Op::DeleteRows { k0, p }),
        (0usize..14, 0usize..10).prop_map(|(ulen, vlen)| Op::RankOne { ulen, vlen }),
        prop_oneof![
            Just(None),
            Just(Some(0)),
            Just(Some(1)),
            Just(Some(usize::MAX))
        ]
        .prop_map(Op::BlockSize),
    ]
}

/// Random m×n data with `sp` written at a random entry.
fn operand(g: &mut rand::rngs::StdRng, m: usize, n: usize, sp: Option<f64>, at: usize) -> Mat<f64> {
    let mut x = random_mat::<f64>(g, m, n);
    if let (Some(v), true) = (sp, m * n > 0) {
        let k = at % (m * n);
        x.as_mut_slice()[k] = v;
    }
    x
}

fn run(
    seed: u64,
    m: usize,
    n: usize,
    q: usize,
    kind: u8,
    ops: &[(Op, Option<f64>, usize)],
) -> Result<(), TestCaseError> {
    let mut g = rng(seed);
    let a = random_mat::<f64>(&mut g, m, n);
    let b = random_mat::<f64>(&mut g, m, q);
    // the three state kinds, the R-only one with and without kept data
    let (policy, keep_data) = match kind % 4 {
        0 => (QPolicy::Full, false),
        1 => (QPolicy::Thin, false),
        2 => (QPolicy::None, true),
        _ => (QPolicy::None, false),
    };
    let params = FactorParams {
        keep_data,
        ..FactorParams::default()
    };
    let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params).unwrap();
    for (op, sp, at) in ops {
        let before = snapshot::<f64>(&st);
        let (m0, n0) = (st.nrows(), st.ncols());
        let (res, expect) = match op {
            Op::InsertCols { k0, rows, cols } => {
                let u = operand(&mut g, *rows, *cols, *sp, *at);
                (st.insert_cols(*k0, u.as_ref()), (m0, n0 + cols))
            }
            Op::DeleteCols { k0, p } => (st.delete_cols(*k0, *p), (m0, n0.wrapping_sub(*p))),
            Op::InsertRows {
                k0,
                rows,
                cols,
                erows,
                ecols,
            } => {
                let u = operand(&mut g, *rows, *cols, *sp, *at);
                let e = operand(&mut g, *erows, *ecols, None, 0);
                // Views with a leading dimension above the row count.
                let ud: Vec<f64> = (0..cols * (rows + 2))
                    .map(|k| {
                        if k % (rows + 2) < *rows {
                            u[(k % (rows + 2), k / (rows + 2))]
                        } else {
                            f64::NAN
                        }
                    })
                    .collect();
                let uv = MatRef::new(&ud, *rows, *cols, rows + 2).unwrap();
                (st.insert_rows(*k0, uv, e.as_ref()), (m0 + rows, n0))
            }
            Op::DeleteRows { k0, p } => (st.delete_rows(*k0, *p), (m0.wrapping_sub(*p), n0)),
            Op::RankOne { ulen, vlen } => {
                let u = operand(&mut g, *ulen, 1, *sp, *at);
                let v = operand(&mut g, *vlen, 1, None, 0);
                (st.rank_one(u.as_slice(), v.as_slice()), (m0, n0))
            }
            Op::BlockSize(nb) => {
                st.set_params(UpdateParams {
                    block_size: *nb,
                    ..st.params()
                });
                continue;
            }
        };
        match res {
            Err(e) => {
                prop_assert_eq!(
                    &snapshot::<f64>(&st),
                    &before,
                    "{:?} failed ({}) but changed the state",
                    op,
                    e
                );
                prop_assert!(!e.to_string().is_empty());
            }
            Ok(()) => {
                prop_assert_eq!((st.nrows(), st.ncols()), expect, "{:?}", op);
                prop_assert!(st.nrows() >= st.ncols());
                let r = st.r().unwrap();
                for j in 0..st.ncols() {
                    for i in 0..r.nrows() {
                        prop_assert!(
                            r[(i, j)].is_finite(),
                            "{:?}: R({}, {}) = {}",
                            op,
                            i,
                            j,
                            r[(i, j)]
                        );
                        if i > j {
                            prop_assert_eq!(r[(i, j)], 0.0);
                        }
                    }
                }
                prop_assert!(st.solve().is_ok());
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn arbitrary_update_arguments_never_panic_and_failures_change_nothing(
        seed in any::<u64>(),
        m in 2usize..12,
        n_frac in 0.0f64..1.0,
        q in 1usize..3,
        kind in any::<u8>(),
        ops in proptest::collection::vec((op(), special(), any::<usize>()), 1..10),
    ) {
        let n = 1 + ((m - 1) as f64 * n_frac) as usize;
        run(seed, m, n, q, kind, &ops)?;
    }
}
