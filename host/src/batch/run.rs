//! How a batched call runs its problems: serially below the crate's parallel threshold
//! (`cpu::settings`), else in up to `cpu::threads()` groups on rayon's pool; per problem
//! (shape-preserving updates) or all-or-nothing on copies (shape-changing ones).
#![forbid(unsafe_code)]

use rayon::prelude::*;

use crate::base::error::{Error, Result};
use crate::base::scalar::Scalar;
use crate::cpu::{threads, PARALLEL_MIN_FLOPS};
use crate::state::cpu::CpuQr;

use super::report::{refusals, BatchReport};

/// `f(i, item)` for every item, in item order; `work` (flops of the whole call) decides
/// whether the items are split into groups run on rayon's pool.
pub(crate) fn map<S: Send, R: Send>(
    items: &mut [S],
    work: f64,
    f: impl Fn(usize, &mut S) -> R + Sync,
) -> Vec<R> {
    let b = items.len();
    let groups = if work < PARALLEL_MIN_FLOPS {
        1
    } else {
        threads().min(b).max(1)
    };
    if groups == 1 {
        return items.iter_mut().enumerate().map(|(i, s)| f(i, s)).collect();
    }
    let per = b.div_ceil(groups);
    let f = &f;
    items
        .par_chunks_mut(per)
        .enumerate()
        .flat_map_iter(|(g, chunk)| {
            chunk
                .iter_mut()
                .enumerate()
                .map(move |(j, s)| f(g * per + j, s))
        })
        .collect()
}

/// A shape-preserving update: each problem updated on its own, a refusing one left as it
/// was (the single-problem state's guarantee).
pub(crate) fn each<T: Scalar>(
    states: &mut [CpuQr<T>],
    work: f64,
    f: impl Fn(usize, &mut CpuQr<T>) -> Result<()> + Sync,
) -> BatchReport {
    BatchReport {
        outcomes: map(states, work, f),
    }
}

/// A shape-changing update: every problem updated, or none (on copies, swapped in when all
/// succeeded). Each problem is copied by the thread that updates it, right before its
/// update (a serial copy of the whole batch first cost more than the updates: 10,000
/// full-Q 64×8 problems, 0.25 s of a 0.4 s row insertion on two cores).
///
/// # Errors
/// [`Error::BatchRefused`] naming each refusing problem; then no problem changed.
pub(crate) fn all_or_nothing<T: Scalar>(
    op: &'static str,
    states: &mut Vec<CpuQr<T>>,
    work: f64,
    f: impl Fn(usize, &mut CpuQr<T>) -> Result<()> + Sync,
) -> Result<BatchReport> {
    let refused = |problems| Error::BatchRefused { op, problems };
    if let [one] = states.as_mut_slice() {
        // one state refuses as a whole by itself
        return match f(0, one) {
            Ok(()) => Ok(BatchReport {
                outcomes: vec![Ok(())],
            }),
            Err(e) => Err(refused(vec![(0, e)])),
        };
    }
    let updated = map(states, work, |i, s| {
        let mut next = s.clone();
        f(i, &mut next).map(|()| next)
    });
    let next = refusals(updated).map_err(refused)?;
    let b = next.len();
    let old = std::mem::replace(states, next);
    // the old states are freed on the pool too when the update ran there
    if work >= PARALLEL_MIN_FLOPS && threads() > 1 {
        old.into_par_iter().for_each(drop);
    }
    Ok(BatchReport {
        outcomes: (0..b).map(|_| Ok(())).collect(),
    })
}
