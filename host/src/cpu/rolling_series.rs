//! Rolling and recursive least squares on the CPU (docs/algorithms.md#rolling-least-squares):
//! per series, one [`LsWindow`] walks the time steps — the new observation enters by
//! Givens rotations, the one leaving the window is downdated out, a refused downdate (and
//! every `refresh` downdates) refactorises the window from its data — and each step's
//! estimates are one back substitution. Series run in parallel on rayon's pool, each
//! thread with one workspace allocated up front.
#![forbid(unsafe_code)]

use rayon::prelude::*;

pub use crate::base::rolling::Refactorisations;
use crate::base::rolling::{RollingData, WindowPlan};
use crate::base::scalar::Scalar;
use crate::cpu::rolling::LsWindow;
use crate::cpu::settings::{threads, PARALLEL_MIN_FLOPS};

/// The estimates of every series, series-major: params (series × nobs × k), the residual
/// sums of squares and the rank-deficiency flags (series × nobs each).
pub(crate) struct SeriesMajor<T> {
    pub params: Vec<T>,
    pub rss: Vec<T>,
    pub rank_deficient: Vec<bool>,
    pub counts: Refactorisations,
}

/// One series' output rows: params (nobs × k), rss and flags (nobs).
struct Out<'o, T> {
    params: &'o mut [T],
    rss: &'o mut [T],
    rank_deficient: &'o mut [bool],
}

/// A group of series: its index and its params, rss and flag rows.
type Group<'o, T> = (usize, ((&'o mut [T], &'o mut [T]), &'o mut [bool]));

/// Runs every series; outputs start as NaN (no estimate) and `false`.
pub(crate) fn run<T: Scalar>(data: &RollingData<'_, T>, plan: &WindowPlan) -> SeriesMajor<T> {
    let (nt, ns, k) = (data.nobs, data.series, data.k);
    let nan = T::from_f64(f64::NAN);
    let mut params = vec![nan; ns * nt * k];
    let mut rss = vec![nan; ns * nt];
    let mut rank_deficient = vec![false; ns * nt];
    let work = 10.0 * (nt * ns) as f64 * (k * k) as f64;
    let nthreads = if work < PARALLEL_MIN_FLOPS {
        1
    } else {
        threads().min(ns).max(1)
    };
    let per = ns.div_ceil(nthreads).max(1);
    let groups: Vec<_> = params
        .chunks_mut(per * nt * k)
        .zip(rss.chunks_mut(per * nt))
        .zip(rank_deficient.chunks_mut(per * nt))
        .enumerate()
        .collect();
    let one_group = |(g, ((p, r), f)): Group<'_, T>| {
        let mut st = LsWindow::new(k);
        let mut counts = Refactorisations::default();
        let series = p.len() / (nt * k).max(1);
        for i in 0..series {
            let out = Out {
                params: &mut p[i * nt * k..(i + 1) * nt * k],
                rss: &mut r[i * nt..(i + 1) * nt],
                rank_deficient: &mut f[i * nt..(i + 1) * nt],
            };
            counts = counts + one_series(data, plan, g * per + i, &mut st, out);
        }
        counts
    };
    let counts = if nthreads == 1 || k == 0 {
        groups
            .into_iter()
            .map(one_group)
            .fold(Default::default(), |a, b| a + b)
    } else {
        groups
            .into_par_iter()
            .map(one_group)
            .reduce(Refactorisations::default, |a, b| a + b)
    };
    SeriesMajor {
        params,
        rss,
        rank_deficient,
        counts,
    }
}

/// The walk over time of series `s`.
fn one_series<T: Scalar>(
    data: &RollingData<'_, T>,
    plan: &WindowPlan,
    s: usize,
    st: &mut LsWindow<T>,
    out: Out<'_, T>,
) -> Refactorisations {
    let (nt, k, w) = (data.nobs, data.k, plan.window);
    let lambda = plan.forget;
    let root = T::from_f64(lambda.sqrt());
    // A row leaves w steps after it entered: its weight is then λ^w (√ on the row).
    let leave_weight = T::from_f64(lambda.powf(w as f64 / 2.0));
    let mut counts = Refactorisations::default();
    let (mut valid, mut invalid) = (0usize, 0usize);
    let mut downdates = 0usize;
    st.clear();
    for t in 0..nt {
        if lambda < 1.0 {
            st.scale(root);
        }
        if data.is_finite(t, s) {
            st.add_row(data.x_row(t, s), data.y_at(t, s), T::ONE);
            valid += 1;
        } else {
            invalid += 1;
        }
        if t >= w {
            let old = t - w;
            if data.is_finite(old, s) {
                valid -= 1;
                let refused = leave_weight != T::ZERO
                    && st
                        .remove_row(data.x_row(old, s), data.y_at(old, s), leave_weight)
                        .is_err();
                downdates += 1;
                if refused {
                    refactorise(data, plan, s, t, st);
                    counts.after_failed_downdate += 1;
                    downdates = 0;
                } else if downdates >= plan.refresh {
                    refactorise(data, plan, s, t, st);
                    counts.scheduled += 1;
                    downdates = 0;
                }
            } else {
                invalid -= 1;
            }
        }
        let started = t + 1 >= w || (plan.expanding && t + 1 >= plan.min_nobs);
        let enough = valid >= plan.min_nobs && valid >= k;
        if !started || !enough || (plan.skip_missing && invalid > 0) {
            continue;
        }
        let u = T::UNIT_ROUNDOFF;
        let tol = plan
            .rank_tol
            .unwrap_or_else(|| (plan.default_rank_tol)(valid, k, u));
        if st.solve(tol, &mut out.params[t * k..(t + 1) * k]) {
            out.rss[t] = st.rss();
        } else {
            out.rank_deficient[t] = true;
        }
    }
    counts
}

/// Factorises the window ending at `t` of series `s` again from its finite rows, each
/// weighted by λ^(age) (√ on the row).
fn refactorise<T: Scalar>(
    data: &RollingData<'_, T>,
    plan: &WindowPlan,
    s: usize,
    t: usize,
    st: &mut LsWindow<T>,
) {
    st.clear();
    let lo = (t + 1).saturating_sub(plan.window);
    for i in lo..=t {
        if !data.is_finite(i, s) {
            continue;
        }
        let wt = if plan.forget < 1.0 {
            T::from_f64(plan.forget.powf((t - i) as f64 / 2.0))
        } else {
            T::ONE
        };
        st.add_row(data.x_row(i, s), data.y_at(i, s), wt);
    }
}
