//! `cuqr bench batch`: the batched CPU state (`cuqr::batch::BatchQr`) on B small problems
//! (docs/performance.md#batched-states-cpu): factorisation, one rank-one update of every
//! problem, one row in and one row out, each against a loop of single [`CpuQr`] states
//! making the same calls and against refactorising every updated problem with faer's QR,
//! by the wall clock, in one process on the same random data.

use cuqr::batch::{BatchQr, BatchRef};
use cuqr::{CpuQr, FactorParams, Mat, MatRef, QPolicy, QrUpdate, Scalar};
use cuqr_cli::cli::CliResult;
use rayon::prelude::*;

use super::common::utc_date_time;
use super::dense::{rows_deleted, rows_inserted};
use super::stats::{median_ms, wall_ms};
use super::BenchOpts;

const CMD: &str = "bench batch";

/// `cuqr bench batch --help`.
pub const HELP: &str = "\
cuqr bench batch: B independent small problems in one batched CPU state (BatchQr)
vs a loop of single CpuQr states and vs refactorising every problem with faer

Usage: cuqr bench batch [--batch B] [--m M] [--n N] [--q full|thin|none,...]
                        [--precision f64|f32|both] [--reps R]

  --batch      problems B (default 10000)
  --m          rows m of each A, m >= n + 2 (default 64)
  --n          columns n of each A (default 8)
  --q          the kinds of state: full (Q m×m), thin (Q1 m×n), none (R only, A and b
               kept); a comma-separated list (default thin)
  --precision  f64, f32 or both (default f64)
  --reps       timed repetitions, at least 5 (default 5, after 1 warm-up)

Random data (entries in ±[0.1, 1)), one right-hand side per problem, the problems
stored one column-major matrix after another. Operations: factorize; rank_one (a
random u and v per problem); insert_rows (1 row at k0 = m/3); delete_rows (1 row at
k0 = m/3).

batch ms: the BatchQr call on a fresh copy of the factorised batch (the copy is
untimed), problems spread over the rayon pool. loop ms: the same calls on B single
CpuQr states, one problem after another (as a plain loop over problems makes them).
faer ms: faer's QR of every updated A (the kind's Q formed for full and thin), the
problems spread over the rayon pool, faer sequential within a problem; the updated
matrices are built untimed. Wall clock, upper median of --reps runs after one warm-up.
loop/batch and faer/batch are the ratios; µs a problem is batch ms / B.
";

/// The state kinds by name.
fn kind_of(name: &str) -> CliResult<(&'static str, QPolicy, FactorParams)> {
    crate::opts::kind_of(CMD, "--q", name)
}

/// Runs `cuqr bench batch`.
pub fn run(args: &[String]) -> CliResult<()> {
    let o = BenchOpts::parse(
        CMD,
        args,
        &[],
        &["batch", "m", "n", "q", "precision", "reps"],
    )?;
    let nb = o.usize("batch")?.unwrap_or(10_000);
    let m = o.usize("m")?.unwrap_or(64);
    let n = o.usize("n")?.unwrap_or(8);
    if m < n + 2 {
        return Err(format!("{CMD}: need m >= n + 2 (a row out keeps m > n), got {m}x{n}").into());
    }
    let kinds = o
        .get("q")
        .unwrap_or("thin")
        .split(',')
        .map(|k| kind_of(k.trim()))
        .collect::<CliResult<Vec<_>>>()?;
    let precisions = super::precision_list("precision", o.get("precision").unwrap_or("f64"))?;
    let reps = o.reps()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    println!("date: {}", utc_date_time(now));
    println!(
        "machine: {} cores available; rayon pool of {} threads; faer QR",
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        rayon::current_num_threads()
    );
    println!("command: cuqr {CMD} {}", args.join(" "));
    println!();
    println!("| op | B | m×n | q | prec | batch ms | loop ms | faer ms | loop / batch | faer / batch | µs a problem |");
    println!("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|");
    // faer within one problem stays sequential: the problems are the parallelism
    faer::set_global_parallelism(faer::Par::Seq);
    for &prec in precisions {
        for &(kind, policy, params) in &kinds {
            let case = Case {
                nb,
                m,
                n,
                policy,
                params,
                reps,
            };
            let rows = if prec == "f32" {
                case.run::<f32>()?
            } else {
                case.run::<f64>()?
            };
            for r in rows {
                println!(
                    "| {} | {nb} | {m}×{n} | {kind} | {prec} | {:.2} | {:.2} | {:.2} | {:.1} | {:.1} | {:.2} |",
                    r.op,
                    r.batch_ms,
                    r.loop_ms,
                    r.faer_ms,
                    r.loop_ms / r.batch_ms,
                    r.faer_ms / r.batch_ms,
                    1e3 * r.batch_ms / nb as f64
                );
            }
        }
    }
    Ok(())
}

/// One measured operation.
struct Row {
    op: &'static str,
    batch_ms: f64,
    loop_ms: f64,
    faer_ms: f64,
}

/// One batch size, shape and kind.
struct Case {
    nb: usize,
    m: usize,
    n: usize,
    policy: QPolicy,
    params: FactorParams,
    reps: usize,
}

/// Problem i's m×n block of B column-major matrices stored one after another.
fn block<T: Scalar>(data: &[T], i: usize, m: usize, n: usize) -> cuqr::Result<MatRef<'_, T>> {
    MatRef::new(&data[i * m * n..(i + 1) * m * n], m, n, m)
}

/// B random column-major r×c matrices one after another.
fn random<T: Scalar>(rng: &mut cuqr_cli::rng::Rng, nb: usize, r: usize, c: usize) -> Vec<T> {
    (0..nb * r * c).map(|_| rng.signed()).collect()
}

impl Case {
    fn run<T: Scalar>(&self) -> CliResult<Vec<Row>> {
        let (nb, m, n, policy, params, reps) =
            (self.nb, self.m, self.n, self.policy, self.params, self.reps);
        let mut rng = cuqr_cli::rng::Rng::new((nb * 31 + m * 7 + n) as u64);
        let a: Vec<T> = random(&mut rng, nb, m, n);
        let b: Vec<T> = random(&mut rng, nb, m, 1);
        let (ab, bb) = (
            BatchRef::col_major(&a, nb, m, n)?,
            BatchRef::col_major(&b, nb, m, 1)?,
        );
        let mut rows = Vec::new();

        // factorize
        let batch_ms = median_ms(reps, || {
            wall_ms(|| BatchQr::factorize(ab, bb, policy, params))
        })?;
        let loop_ms = median_ms(reps, || {
            wall_ms(|| {
                (0..nb)
                    .map(|i| {
                        CpuQr::factorize(block(&a, i, m, n)?, block(&b, i, m, 1)?, policy, params)
                    })
                    .collect::<cuqr::Result<Vec<_>>>()
            })
        })?;
        let originals = (0..nb)
            .map(|i| block(&a, i, m, n).map(|x| x.to_owned()))
            .collect::<cuqr::Result<Vec<_>>>()?;
        rows.push(Row {
            op: "factorize",
            batch_ms,
            loop_ms,
            faer_ms: faer_ms(&originals, policy, reps),
        });
        let base = BatchQr::factorize(ab, bb, policy, params)?;
        let singles: Vec<CpuQr<T>> = base.problems().to_vec();

        // rank_one: a random u (m) and v (n) per problem
        let u: Vec<T> = random(&mut rng, nb, m, 1);
        let v: Vec<T> = random(&mut rng, nb, n, 1);
        let (ub, vb) = (
            BatchRef::col_major(&u, nb, m, 1)?,
            BatchRef::col_major(&v, nb, n, 1)?,
        );
        let updated = (0..nb)
            .map(|i| {
                let (ui, vi) = (&u[i * m..(i + 1) * m], &v[i * n..(i + 1) * n]);
                let ai = block(&a, i, m, n)?;
                Ok(Mat::from_fn(m, n, |r, c| ai.get(r, c) + ui[r] * vi[c]))
            })
            .collect::<cuqr::Result<Vec<_>>>()?;
        rows.push(Row {
            op: "rank_one",
            batch_ms: time_batch(&base, reps, |st| st.rank_one(ub, vb).map(drop))?,
            loop_ms: time_loop(&singles, reps, |i, st| {
                st.rank_one(&u[i * m..(i + 1) * m], &v[i * n..(i + 1) * n])
            })?,
            faer_ms: faer_ms(&updated, policy, reps),
        });

        // insert_rows: one row at k0 = m/3
        let k0 = m / 3;
        let new_rows: Vec<T> = random(&mut rng, nb, 1, n);
        let new_rhs: Vec<T> = random(&mut rng, nb, 1, 1);
        let (rb, eb) = (
            BatchRef::col_major(&new_rows, nb, 1, n)?,
            BatchRef::col_major(&new_rhs, nb, 1, 1)?,
        );
        let updated = (0..nb)
            .map(|i| {
                let row = block(&new_rows, i, 1, n)?.to_owned();
                Ok(rows_inserted(&originals[i], k0, &row))
            })
            .collect::<cuqr::Result<Vec<_>>>()?;
        rows.push(Row {
            op: "insert_rows (1)",
            batch_ms: time_batch(&base, reps, |st| st.insert_rows(k0, rb, eb).map(drop))?,
            loop_ms: time_loop(&singles, reps, |i, st| {
                st.insert_rows(k0, block(&new_rows, i, 1, n)?, block(&new_rhs, i, 1, 1)?)
            })?,
            faer_ms: faer_ms(&updated, policy, reps),
        });

        // delete_rows: one row at k0 = m/3
        let updated: Vec<Mat<T>> = originals.iter().map(|x| rows_deleted(x, k0, 1)).collect();
        rows.push(Row {
            op: "delete_rows (1)",
            batch_ms: time_batch(&base, reps, |st| st.delete_rows(k0, 1).map(drop))?,
            loop_ms: time_loop(&singles, reps, |_, st| st.delete_rows(k0, 1))?,
            faer_ms: faer_ms(&updated, policy, reps),
        });
        Ok(rows)
    }
}

/// Upper median ms of `f` on a fresh copy of `base` (the copy untimed, the updated batch
/// dropped after the clock stops).
fn time_batch<T: Scalar>(
    base: &BatchQr<T>,
    reps: usize,
    f: impl Fn(&mut BatchQr<T>) -> cuqr::Result<()>,
) -> cuqr::Result<f64> {
    median_ms(reps, || {
        let mut st = base.clone();
        wall_ms(|| f(&mut st).map(|()| st))
    })
}

/// Upper median ms of `f` on every state of a fresh copy of `base`, one after another.
fn time_loop<T: Scalar>(
    base: &[CpuQr<T>],
    reps: usize,
    f: impl Fn(usize, &mut CpuQr<T>) -> cuqr::Result<()>,
) -> cuqr::Result<f64> {
    median_ms(reps, || {
        let mut sts = base.to_vec();
        wall_ms(|| {
            for (i, s) in sts.iter_mut().enumerate() {
                f(i, s)?;
            }
            Ok::<_, cuqr::Error>(sts)
        })
    })
}

/// Upper median ms of faer's QR of every matrix (with the kind's Q), the matrices spread
/// over the rayon pool; the conversion to faer's type is untimed.
fn faer_ms<T: Scalar>(mats: &[Mat<T>], policy: QPolicy, reps: usize) -> f64 {
    fn run<F: faer::traits::RealField + Copy>(
        mats: &[faer::Mat<F>],
        policy: QPolicy,
        reps: usize,
    ) -> f64 {
        let once = || {
            mats.par_iter().for_each(|a| {
                let qr = a.qr();
                match policy {
                    QPolicy::Full => drop(std::hint::black_box(qr.compute_Q())),
                    QPolicy::Thin => drop(std::hint::black_box(qr.compute_thin_Q())),
                    _ => drop(std::hint::black_box(qr)),
                }
            });
            Ok::<(), std::convert::Infallible>(())
        };
        let timed = median_ms(reps, || wall_ms(once));
        timed.unwrap_or_else(|never| match never {})
    }
    if T::NAME == "f32" {
        let fm: Vec<_> = mats
            .iter()
            .map(|a| {
                faer::Mat::<f32>::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64() as f32)
            })
            .collect();
        run(&fm, policy, reps)
    } else {
        let fm: Vec<_> = mats
            .iter()
            .map(|a| faer::Mat::<f64>::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64()))
            .collect();
        run(&fm, policy, reps)
    }
}
