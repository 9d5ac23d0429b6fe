//! Row insertion, deletion and the window step of the distributed state
//! (docs/scaling.md#updates): the rank that owns (or receives) the rows updates R, d and the
//! residual norms with the R-only window step's Gram form
//! (docs/algorithms.md#r-only-window-step) and broadcasts them.
#![forbid(unsafe_code)]

use super::thin::Entering;
use super::{DistQr, DistScalar, Net};
use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::params::QPolicy;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::Gpu;

/// New rows and their right-hand sides on the receiving rank's device.
type NewRows<T> = Option<(DevMat<T>, DevMat<T>)>;

impl<T: DistScalar> DistQr<T> {
    /// [`Error::NeedsData`] where rows must leave an R-only state without kept data (the thin
    /// kind holds its rows of Q₁ and b instead).
    pub(crate) fn need_kept(&self, op: &'static str, rows_leave: bool) -> Result<()> {
        if self.dims.policy == QPolicy::Thin {
            return Ok(());
        }
        if rows_leave && self.parts.iter().any(|p| p.kept.is_none()) {
            return Err(Error::NeedsData {
                op,
                what: "the kept rows of A and b (FactorParams::keep_data)",
            });
        }
        Ok(())
    }

    /// Uploads the new rows to `owner`'s device where this process holds it.
    fn upload_new(&self, owner: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<NewRows<T>> {
        match self.part_index(owner) {
            Some(i) if u.nrows() > 0 => {
                let g = &self.parts[i].core.gpu;
                Ok(Some((DevMat::from_host(g, u)?, DevMat::from_host(g, e)?)))
            }
            _ => Ok(None),
        }
    }

    /// One step on `owner`: the leaving rows `old` (local start, count) of its kept data and
    /// the entering rows `new`, with forgetting factor `forget`; R, d and the residual norms
    /// then go to every rank.
    fn owner_step(
        &mut self,
        op: &'static str,
        owner: usize,
        old: Option<(usize, usize)>,
        new: &NewRows<T>,
        forget: f64,
    ) -> Result<()> {
        let (n, q) = (self.dims.n, self.dims.q);
        let res = match self.part_index(owner) {
            Some(i) => {
                let part = &mut self.parts[i];
                let g: &Gpu = &part.core.gpu.clone();
                let out = {
                    let core = &part.core;
                    let (ao, eo) = match (old, part.kept.as_ref()) {
                        (Some((s, c)), Some(k)) => (
                            k.a.block(k.row0 + s, 0, c, n),
                            k.b.block(k.row0 + s, 0, c, q),
                        ),
                        _ => (core.r.block(0, 0, 0, n), core.d.block(0, 0, 0, q)),
                    };
                    let ao = ao.reborrow();
                    let eo = eo.reborrow();
                    let (an, en) = match new {
                        Some((a, e)) => (a.view(), e.view()),
                        None => (core.r.block(0, 0, 0, n), core.d.block(0, 0, 0, q)),
                    };
                    crate::ops::slide::reduced_rows_step(g, core, (&ao, &eo), (&an, &en), forget)
                        .and_then(|(r2, d2, rho2)| {
                            crate::gpu::algo::rank::check_rank(g, &r2, n, core.rank_tol)?;
                            Ok((r2, d2, rho2))
                        })
                };
                out.map(|(r2, d2, rho2)| {
                    part.core.r = r2;
                    part.core.d = d2;
                    part.core.rho = rho2
                        .into_iter()
                        .map(|x| T::from_f64(x.max(0.0).sqrt()))
                        .collect();
                })
            }
            None => Ok(()),
        };
        if self.world > 1 && (res.is_ok() || matches!(*self.net, Net::Rank(_))) {
            let shared = self.share_core(owner, op, res.is_ok());
            res?;
            return shared;
        }
        res
    }

    /// Runs `f`; on error puts every rank's R, d and residual norms back.
    fn atomically(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let snap = self.snapshot()?;
        match f(self) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.restore(snap);
                Err(e)
            }
        }
    }

    /// Slides the window (as [`crate::QrUpdate::slide`]): the p×n `rows` with right-hand
    /// sides `rhs` enter at the end, on the rank that takes new rows, the oldest `drop` rows
    /// leave their rank, and λ = `params().forget` < 1 scales the rows kept. Where one rank
    /// both loses and takes rows (the ring's usual case) one Gram step there does both;
    /// otherwise each rank that loses rows downdates and the receiving rank then updates.
    /// In the one-process-per-GPU form every rank makes the same call with the same rows.
    /// The thin kind does all of it in one step (docs/scaling.md#the-thin-kind).
    ///
    /// # Errors
    /// As [`crate::QrUpdate::slide`]; [`Error::InvalidParam`] where fewer than n rows would stay between the rows leaving and entering. On error the
    /// state is unchanged.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::distributed::DistQr;
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let a = Mat::<f64>::from_fn(4000, 30, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
    /// let b = Mat::<f64>::from_fn(4000, 1, |i, _| (i % 17) as f64);
    /// let keep = FactorParams { keep_data: true, ..FactorParams::default() };
    /// let mut qr = DistQr::factorize(&[gpu.clone(), gpu], a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
    /// let rows = Mat::<f64>::from_fn(50, 30, |i, j| (i * j % 7) as f64);
    /// let rhs = Mat::<f64>::from_fn(50, 1, |i, _| i as f64);
    /// qr.slide(rows.as_ref(), rhs.as_ref(), 50)?;
    /// assert_eq!(qr.nrows(), 4000);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn slide(&mut self, rows: MatRef<'_, T>, rhs: MatRef<'_, T>, drop: usize) -> Result<()> {
        const OP: &str = "DistQr::slide";
        self.need_kept(OP, drop > 0)?;
        let plan = crate::ops::slide::plan(self.dims, rows, rhs, drop, self.params)?;
        let n = self.dims.n;
        if !plan.drop_first(n) {
            return Err(Error::InvalidParam {
                op: OP,
                what: "drop",
                why: format!(
                    "{} rows would stay between the leaving and the entering rows, fewer than n = {n}",
                    self.dims.m - drop
                ),
            });
        }
        let (p, lam) = (rows.nrows(), plan.forget);
        let heads = self.pieces(0, drop);
        // the receiving rank: the last rows' rank while it holds less than its share
        let last = self.segs.back().map_or(0, |s| s.0);
        let lost: usize = heads.iter().filter(|h| h.0 == last).map(|h| h.2).sum();
        let t = if self.counts[last] - lost + p <= self.cap {
            last
        } else {
            (last + 1) % self.world
        };
        if self.dims.policy == QPolicy::Thin {
            let lost_t: usize = heads.iter().filter(|h| h.0 == t).map(|h| h.2).sum();
            let at = self.counts[t] - lost_t;
            let entering = (p > 0).then_some(Entering {
                rank: t,
                at,
                rows,
                rhs,
            });
            self.thin_rows_step(OP, &heads, entering, lam)?;
            let m = self.dims.m;
            self.cut_segments(0, drop);
            if p > 0 {
                self.add_segment(m - drop, t, p);
            }
            self.set_m(m - drop + p);
            return Ok(());
        }
        let new = self.upload_new(t, rows, rhs)?;
        self.atomically(|st| {
            if heads.is_empty() {
                st.owner_step(OP, t, None, &new, lam)
            } else if heads.len() == 1 && heads[0].0 == t && p > 0 {
                st.owner_step(OP, t, Some((heads[0].1, heads[0].2)), &new, lam)
            } else {
                let k = heads.len();
                for (i, h) in heads.iter().enumerate() {
                    let l = if p == 0 && i + 1 == k { lam } else { 1.0 };
                    st.owner_step(OP, h.0, Some((h.1, h.2)), &None, l)?;
                }
                if p > 0 {
                    st.owner_step(OP, t, None, &new, lam)?;
                }
                Ok(())
            }
        })?;
        // past every step: the kept rows move (only device faults can fail here)
        for h in &heads {
            if let Some(i) = self.part_index(h.0) {
                let k = self.parts[i].kept.as_mut().expect("checked");
                k.row0 += h.2;
                k.rows -= h.2;
            }
        }
        for part in &mut self.parts {
            if let Some(k) = part.kept.as_mut() {
                let g = &*part.core.gpu;
                if lam < 1.0 {
                    let s = T::from_f64(lam.sqrt());
                    g.scal(s, &mut k.a.buf_mut().slice_mut(..))?;
                    g.scal(s, &mut k.b.buf_mut().slice_mut(..))?;
                }
                if part.rank == t {
                    if let Some((a, e)) = &new {
                        k.append(g, &a.view(), &e.view())?;
                    }
                }
            }
        }
        let m = self.dims.m;
        self.cut_segments(0, drop);
        if p > 0 {
            self.add_segment(m - drop, t, p);
        }
        self.set_m(m - drop + p);
        Ok(())
    }

    /// Sets the global row count everywhere.
    fn set_m(&mut self, m: usize) {
        self.dims.m = m;
        for p in &mut self.parts {
            p.core.dims.m = m;
        }
    }

    /// Inserts the p×n block `u` (right-hand sides `e`, p×q) as rows k0..k0+p (as
    /// [`crate::QrUpdate::insert_rows`]): the rank holding row k0 (the last rows' rank for
    /// k0 = m) takes them and updates R; no rows of other ranks are touched.
    ///
    /// # Errors
    /// As [`crate::QrUpdate::insert_rows`]. On error the state is unchanged.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::distributed::DistQr;
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let a = Mat::<f64>::from_fn(600, 20, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
    /// let b = Mat::<f64>::from_fn(600, 1, |i, _| i as f64);
    /// let mut qr = DistQr::factorize(&[gpu.clone(), gpu], a.as_ref(), b.as_ref(), QPolicy::None, FactorParams::default())?;
    /// let u = Mat::<f64>::from_fn(5, 20, |i, j| (i + j) as f64);
    /// let e = Mat::<f64>::from_fn(5, 1, |i, _| i as f64);
    /// qr.insert_rows(100, u.as_ref(), e.as_ref())?;
    /// assert_eq!(qr.nrows(), 605);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn insert_rows(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
        const OP: &str = "DistQr::insert_rows";
        self.need_kept(OP, false)?;
        crate::ops::insert_rows::plan(self.dims, k0, u, e)?;
        let (owner, li) = self.locate(k0);
        if self.dims.policy == QPolicy::Thin {
            let entering = Entering {
                rank: owner,
                at: li,
                rows: u,
                rhs: e,
            };
            self.thin_rows_step(OP, &[], Some(entering), 1.0)?;
            let (m, p) = (self.dims.m, u.nrows());
            self.add_segment(k0, owner, p);
            self.set_m(m + p);
            return Ok(());
        }
        let new = self.upload_new(owner, u, e)?;
        self.atomically(|st| st.owner_step(OP, owner, None, &new, 1.0))?;
        if let Some(i) = self.part_index(owner) {
            let part = &mut self.parts[i];
            let g = &*part.core.gpu;
            if let (Some(k), Some((a, e))) = (part.kept.as_mut(), &new) {
                k.settle(g)?;
                k.a = crate::gpu::algo::reduced::with_rows_inserted(g, &k.a, li, &a.view())?;
                k.b = crate::gpu::algo::reduced::with_rows_inserted(g, &k.b, li, &e.view())?;
                k.rows += a.nrows();
            }
        }
        let (m, p) = (self.dims.m, u.nrows());
        self.add_segment(k0, owner, p);
        self.set_m(m + p);
        Ok(())
    }

    /// Deletes rows k0..k0+p (as [`crate::QrUpdate::delete_rows`]): each rank holding some
    /// of them downdates R with its rows, in turn. Needs the kept data (R-only kind); the thin
    /// kind takes the rows out of every rank in one step.
    ///
    /// # Errors
    /// As [`crate::QrUpdate::delete_rows`]; [`Error::NeedsData`] for an R-only state without
    /// kept data. On error the state is unchanged.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::distributed::DistQr;
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let a = Mat::<f64>::from_fn(600, 20, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
    /// let b = Mat::<f64>::from_fn(600, 1, |i, _| i as f64);
    /// let keep = FactorParams { keep_data: true, ..FactorParams::default() };
    /// let mut qr = DistQr::factorize(&[gpu.clone(), gpu], a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
    /// qr.delete_rows(290, 20)?;   // rows of both partitions
    /// assert_eq!(qr.nrows(), 580);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn delete_rows(&mut self, k0: usize, p: usize) -> Result<()> {
        const OP: &str = "DistQr::delete_rows";
        self.need_kept(OP, true)?;
        crate::ops::delete_rows::plan(self.dims, k0, p)?;
        let pieces = self.pieces(k0, p);
        if self.dims.policy == QPolicy::Thin {
            self.thin_rows_step(OP, &pieces, None, 1.0)?;
            let m = self.dims.m;
            self.cut_segments(k0, p);
            self.set_m(m - p);
            return Ok(());
        }
        self.atomically(|st| {
            for pc in &pieces {
                st.owner_step(OP, pc.0, Some((pc.1, pc.2)), &None, 1.0)?;
            }
            Ok(())
        })?;
        let mut mine: Vec<_> = pieces
            .iter()
            .filter(|pc| self.part_index(pc.0).is_some())
            .copied()
            .collect();
        mine.sort_by_key(|x| std::cmp::Reverse(x.1));
        for (rank, s, c) in mine {
            let i = self.part_index(rank).expect("filtered");
            let part = &mut self.parts[i];
            let g = &*part.core.gpu;
            let k = part.kept.as_mut().expect("checked");
            k.settle(g)?;
            k.a = without_rows(g, &k.a, s, c)?;
            k.b = without_rows(g, &k.b, s, c)?;
            k.rows -= c;
        }
        let m = self.dims.m;
        self.cut_segments(k0, p);
        self.set_m(m - p);
        Ok(())
    }
}

/// `a` without rows s..s+c (a new buffer).
fn without_rows<T: DistScalar>(g: &Gpu, a: &DevMat<T>, s: usize, c: usize) -> Result<DevMat<T>> {
    let (m, n) = (a.nrows(), a.ncols());
    let mut out = DevMat::<T>::for_overwrite(g, m - c, n)?;
    if s > 0 {
        g.panel_copy(&a.block(0, 0, s, n), &mut out.block_mut(0, 0, s, n))?;
    }
    if s + c < m {
        g.panel_copy(
            &a.block(s + c, 0, m - s - c, n),
            &mut out.block_mut(s, 0, m - s - c, n),
        )?;
    }
    Ok(out)
}
