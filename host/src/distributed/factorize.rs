//! Distributed factorisation by TSQR (docs/scaling.md#factorisation): a local blocked
//! Householder QR on every rank, then the R-factors (with their d) combined: by a binary
//! tree of pair QRs (the R-only kind's default, tree.rs) or all-gathered and the stacked
//! G·n×n factorised on every rank; the thin kind's Q₁ block of rank i is its local Q₁ times
//! block i of the stacked factor's Q.
#![forbid(unsafe_code)]

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaSlice;

use super::{DistGroup, DistQr, DistScalar, DistTimes, Kept, Net, Part, RankComm};
use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorParams, QPolicy};
use crate::gpu::algo::thin;
use crate::gpu::ffi::blas::{Op, Side};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{DevVec, Gpu};
use crate::state::gpu::GpuQr;

const OP: &str = "DistQr::factorize";

/// The rows of `a` from `r0` (`len` of them) as a matrix of their own.
fn row_block<T: DistScalar>(a: MatRef<'_, T>, r0: usize, len: usize) -> Mat<T> {
    Mat::from_fn(len, a.ncols(), |i, j| a.get(r0 + i, j))
}

impl<T: DistScalar> DistQr<T> {
    /// Factorises A (m×n) with right-hand sides b (m×q) over `gpus`, one rank each, from
    /// one process: A's rows are split into G nearly equal consecutive blocks (each at
    /// least n rows). Distinct devices talk through NCCL (`Comm::from_devices`); one device
    /// listed G times holds G logical partitions (no NCCL).
    ///
    /// # Errors
    /// The factorisation's validation errors ([`Error::Shape`], [`Error::Underdetermined`],
    /// [`Error::NonFinite`], [`Error::InvalidParam`], also for [`QPolicy::Full`], an empty
    /// device list or fewer than n rows a rank), [`Error::RankDeficient`],
    /// [`Error::NoDevice`] (no NCCL library for several devices), device errors.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::distributed::DistQr;
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let parts = vec![gpu.clone(), gpu.clone(), gpu];  // three partitions on one GPU
    /// let a = Mat::<f64>::from_fn(3000, 40, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
    /// let b = Mat::<f64>::from_fn(3000, 1, |i, _| i as f64);
    /// let qr = DistQr::factorize(&parts, a.as_ref(), b.as_ref(), QPolicy::Thin, FactorParams::default())?;
    /// let q1 = qr.q()?;                                  // 3000×40, gathered
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn factorize(
        gpus: &[Arc<Gpu>],
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        crate::ops::factorize::plan(a, b, policy, params)?;
        split(a.nrows(), gpus.len(), a.ncols())?;
        Self::factorize_in(&DistGroup::new(gpus)?, a, b, policy, params)
    }

    /// [`DistQr::factorize`] in a [`DistGroup`] made before (its communicators reused).
    ///
    /// # Errors
    /// As [`DistQr::factorize`].
    pub fn factorize_in(
        group: &DistGroup,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        crate::ops::factorize::plan(a, b, policy, params)?;
        let gpus = group.gpus();
        let counts = split(a.nrows(), gpus.len(), a.ncols())?;
        let mut blocks = Vec::with_capacity(gpus.len());
        let mut r0 = 0;
        for (g, &len) in gpus.iter().zip(&counts) {
            let ab = DevMat::from_host(g, row_block(a, r0, len).as_ref())?;
            let bb = DevMat::from_host(g, row_block(b, r0, len).as_ref())?;
            blocks.push((ab, bb));
            r0 += len;
        }
        Ok(Self::factorize_in_dev_timed(group, blocks, policy, params)?.0)
    }

    /// [`DistQr::factorize`] of blocks already in device memory (one (A_i, b_i) per device,
    /// in rank order; consecutive blocks of rows), with the wall time of each phase. The
    /// communicators are made by this call (see [`DistQr::factorize_in_dev_timed`] to reuse
    /// them).
    ///
    /// # Errors
    /// As [`DistQr::factorize`] (the values are not scanned: see
    /// [`GpuQr::factorize_dev`]).
    pub fn factorize_dev_timed(
        gpus: &[Arc<Gpu>],
        blocks: Vec<(DevMat<T>, DevMat<T>)>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<(Self, DistTimes)> {
        Self::factorize_in_dev_timed(&DistGroup::new(gpus)?, blocks, policy, params)
    }

    /// [`DistQr::factorize_dev_timed`] in a [`DistGroup`] made before.
    ///
    /// # Errors
    /// As [`DistQr::factorize`].
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::distributed::{DistGroup, DistQr};
    /// use cuqr::{DevMat, FactorParams, Gpu, Mat, QPolicy};
    /// let gpus = vec![Arc::new(Gpu::new(0)?), Arc::new(Gpu::new(1)?)];
    /// let group = DistGroup::new(&gpus)?;
    /// let mut blocks = Vec::new();
    /// for g in &gpus {
    ///     let a = Mat::<f64>::from_fn(5000, 64, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
    ///     let b = Mat::<f64>::from_fn(5000, 1, |i, _| i as f64);
    ///     blocks.push((DevMat::from_host(g, a.as_ref())?, DevMat::from_host(g, b.as_ref())?));
    /// }
    /// let (qr, t) = DistQr::factorize_in_dev_timed(&group, blocks, QPolicy::None, FactorParams::default())?;
    /// println!("local {:.1} ms, all-gather {:.1} ms", t.local_ms, t.comm_ms);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn factorize_in_dev_timed(
        group: &DistGroup,
        blocks: Vec<(DevMat<T>, DevMat<T>)>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<(Self, DistTimes)> {
        let gpus = group.gpus();
        if blocks.len() != gpus.len() {
            return Err(Error::InvalidParam {
                op: OP,
                what: "gpus",
                why: format!(
                    "{} devices for {} blocks (as many blocks as devices)",
                    gpus.len(),
                    blocks.len()
                ),
            });
        }
        let counts: Vec<usize> = blocks.iter().map(|(a, _)| a.nrows()).collect();
        let ranks: Vec<usize> = (0..gpus.len()).collect();
        build(BuildPlan {
            net: group.net.clone(),
            ranks,
            world: gpus.len(),
            gpus: gpus.to_vec(),
            blocks,
            counts,
            policy,
            params,
            combine: group.combine,
        })
    }

    /// Factorises this process's rows `a` (m_i×n) and `b` (m_i×q) as rank `comm`'s block of
    /// a problem whose ranks, one process each, make the same call (`Comm::from_rank`); the
    /// global rows are the ranks' blocks in rank order.
    ///
    /// # Errors
    /// As [`DistQr::factorize`]. Every rank returns an error when one does: a rank whose
    /// rows fail the checks returns its own error and the others [`Error::InvalidParam`]
    /// naming it, and blocks of different widths are refused on every rank alike.
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::distributed::{DistQr, NcclId, RankComm};
    /// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
    /// let (rank, world) = (1, 2);
    /// let id = NcclId::from_hex(&std::fs::read_to_string("/tmp/cuqr.id").unwrap())?;
    /// let gpu = Arc::new(Gpu::new(rank)?);
    /// let comm = RankComm::new(&gpu, rank, world, id)?;
    /// let a = Mat::<f64>::from_fn(5000, 64, |i, j| ((i * 7 + j * 13 + rank) % 29) as f64);
    /// let b = Mat::<f64>::from_fn(5000, 1, |i, _| i as f64);
    /// let qr = DistQr::factorize_rank(comm, a.as_ref(), b.as_ref(), QPolicy::None, FactorParams::default())?;
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn factorize_rank(
        comm: RankComm,
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        let g = comm.gpu.clone();
        let block = crate::ops::factorize::plan(a, b, policy, params)
            .and_then(|_| Ok((DevMat::from_host(&g, a)?, DevMat::from_host(&g, b)?)));
        Ok(rank_build(comm, block, policy, params)?.0)
    }

    /// [`DistQr::factorize_rank`] of this rank's block already in device memory, with the
    /// wall time of each phase.
    ///
    /// # Errors
    /// As [`DistQr::factorize_rank`].
    pub fn factorize_rank_dev_timed(
        comm: RankComm,
        block: (DevMat<T>, DevMat<T>),
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<(Self, DistTimes)> {
        rank_build(comm, Ok(block), policy, params)
    }
}

/// One rank's factorisation: every rank's row count, widths and verdict on its own block are
/// summed first, so that a rank whose block was refused (`block` an error) or whose widths
/// differ stops every rank instead of leaving them waiting in a collective.
fn rank_build<T: DistScalar>(
    comm: RankComm,
    block: Result<(DevMat<T>, DevMat<T>)>,
    policy: QPolicy,
    params: FactorParams,
) -> Result<(DistQr<T>, DistTimes)> {
    let (rank, world) = (comm.rank(), comm.world());
    let g = comm.gpu.clone();
    let combine = comm.combine;
    let net = comm.net;
    // [rows | columns | right-hand sides | refused], one entry per rank each
    let mut mine = vec![0.0; 4 * world];
    match &block {
        Ok((a, b)) => {
            mine[rank] = a.nrows() as f64;
            mine[world + rank] = a.ncols() as f64;
            mine[2 * world + rank] = b.ncols() as f64;
        }
        Err(_) => mine[3 * world + rank] = 1.0,
    }
    let all: Vec<usize> = net
        .sum_host::<f64>(&g, &[mine])?
        .into_iter()
        .map(|x| x.round() as usize)
        .collect();
    if let Some(bad) = (0..world).find(|&r| all[3 * world + r] > 0) {
        block?;
        return Err(Error::InvalidParam {
            op: OP,
            what: "rows",
            why: format!("rank {bad} refused its rows (its own error says why)"),
        });
    }
    let (ns, qs) = (&all[world..2 * world], &all[2 * world..3 * world]);
    if ns.iter().any(|&x| x != ns[0]) || qs.iter().any(|&x| x != qs[0]) {
        return Err(Error::InvalidParam {
            op: OP,
            what: "block shapes",
            why: format!(
                "the ranks' blocks have {ns:?} columns and {qs:?} right-hand sides (the same on every rank)"
            ),
        });
    }
    build(BuildPlan {
        net,
        ranks: vec![rank],
        world,
        gpus: vec![g],
        blocks: vec![block?],
        counts: all[..world].to_vec(),
        policy,
        params,
        combine,
    })
}

/// Nearly equal row counts for `parts` ranks, each at least n.
fn split(m: usize, parts: usize, n: usize) -> Result<Vec<usize>> {
    if parts == 0 || m / parts.max(1) < n {
        return Err(Error::InvalidParam {
            op: OP,
            what: "gpus",
            why: format!("{m} rows over {parts} ranks: each needs at least n = {n}"),
        });
    }
    Ok((0..parts)
        .map(|i| m / parts + usize::from(i < m % parts))
        .collect())
}

/// The local QR of one block on its device (its own thread: the ranks run side by side).
fn local_qr<T: DistScalar>(
    g: &Arc<Gpu>,
    a: DevMat<T>,
    b: DevMat<T>,
    policy: QPolicy,
    params: FactorParams,
) -> Result<GpuQr<T>> {
    g.context()
        .bind_to_thread()
        .map_err(crate::gpu::runtime::driver_err("binding the context"))?;
    let local = FactorParams {
        rank_tol: None,
        ..params
    };
    let st = GpuQr::factorize_dev(g, a, b, policy, local)?;
    g.synchronize()?;
    Ok(st)
}

/// What [`build`] starts from: this process's ranks, their devices and row blocks, and
/// every rank's row count.
struct BuildPlan<T: DistScalar> {
    net: Rc<Net>,
    /// The ranks this process holds, one per device of `gpus`.
    ranks: Vec<usize>,
    world: usize,
    gpus: Vec<Arc<Gpu>>,
    /// Each held rank's rows of A and b.
    blocks: Vec<(DevMat<T>, DevMat<T>)>,
    /// Rows of every rank, this process's or not.
    counts: Vec<usize>,
    policy: QPolicy,
    params: FactorParams,
    /// How the R-factors are combined.
    combine: super::tree::Combine,
}

/// The sizes of the whole problem, once [`BuildPlan::check`] has passed.
#[derive(Clone, Copy)]
struct BuildDims {
    m: usize,
    n: usize,
    q: usize,
}

/// The packed [R d] of every rank gathered on each held device (empty for one rank), with
/// the leading dimension and length of one rank's pack.
struct Gathered<T> {
    recvs: Vec<CudaSlice<T>>,
    /// The packs sent, kept (as the received ones) until the state is built.
    _packs: Vec<DevMat<T>>,
    ld: usize,
    len: usize,
}

impl<T: DistScalar> BuildPlan<T> {
    /// Checks the policy, the blocks' shapes and the rows per rank.
    fn check(&self) -> Result<BuildDims> {
        if self.policy == QPolicy::Full {
            return Err(Error::InvalidParam {
                op: OP,
                what: "policy",
                why: "the distributed state holds R only or the thin Q₁ (Full would be m×m)".into(),
            });
        }
        let (n, q) = (self.blocks[0].0.ncols(), self.blocks[0].1.ncols());
        for (i, (a, b)) in self.blocks.iter().enumerate() {
            if a.ncols() != n || b.ncols() != q || b.nrows() != a.nrows() {
                return Err(Error::Shape {
                    op: OP,
                    what: "block shapes",
                    got: i,
                    expected: 0,
                });
            }
        }
        if let Some(&c) = self.counts.iter().find(|&&c| c < n) {
            return Err(Error::InvalidParam {
                op: OP,
                what: "rows per rank",
                why: format!("a rank holds {c} rows, fewer than n = {n}"),
            });
        }
        let m: usize = self.counts.iter().sum();
        Ok(BuildDims { m, n, q })
    }
}

/// Step 1: the local QRs, one thread per device where there are several; the first
/// device's context is bound to this thread again afterwards.
fn local_factorisations<T: DistScalar>(
    net: &Net,
    gpus: &[Arc<Gpu>],
    blocks: Vec<(DevMat<T>, DevMat<T>)>,
    policy: QPolicy,
    params: FactorParams,
) -> Result<Vec<GpuQr<T>>> {
    let locals: Vec<GpuQr<T>> = if matches!(*net, Net::Local) || gpus.len() == 1 {
        let mut v = Vec::new();
        for (g, (a, b)) in gpus.iter().zip(blocks) {
            v.push(local_qr(g, a, b, policy, params)?);
        }
        v
    } else {
        let outs: Vec<Result<GpuQr<T>>> = std::thread::scope(|s| {
            let hs: Vec<_> = gpus
                .iter()
                .zip(blocks)
                .map(|(g, (a, b))| s.spawn(move || local_qr(g, a, b, policy, params)))
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(Error::Driver("a local factorisation panicked".into()))
                    })
                })
                .collect()
        });
        outs.into_iter().collect::<Result<_>>()?
    };
    gpus[0]
        .context()
        .bind_to_thread()
        .map_err(crate::gpu::runtime::driver_err("binding the context"))?;
    Ok(locals)
}

/// The squared residual norms of each local factorisation, per column of b.
fn local_residuals<T: DistScalar>(locals: &[GpuQr<T>]) -> Result<Vec<Vec<f64>>> {
    let mut rho_local = Vec::new();
    for st in locals {
        let g = &*st.gpu;
        let r2: Vec<f64> = match &st.q {
            Some(q1) => {
                let mut res = st.kept_b().dup(g)?;
                g.gemm(
                    Op::N,
                    Op::N,
                    -T::ONE,
                    &q1.view(),
                    &st.d.view(),
                    T::ONE,
                    &mut res.view_mut(),
                )?;
                thin::column_norms(g, &res.view())?
            }
            None => st.rho.iter().map(|x| x.to_f64()).collect(),
        };
        rho_local.push(r2.iter().map(|x| x * x).collect::<Vec<f64>>());
    }
    Ok(rho_local)
}

/// Every local [R d] as one n×(n+q) matrix (one layout for all).
fn pack_factors<T: DistScalar>(locals: &[GpuQr<T>], n: usize, q: usize) -> Result<Vec<DevMat<T>>> {
    let mut packs = Vec::new();
    for st in locals {
        let g = &*st.gpu;
        let mut p = DevMat::<T>::zeros(g, n, n + q)?;
        g.panel_copy(&st.r.view(), &mut p.block_mut(0, 0, n, n))?;
        g.panel_copy(&st.d.view(), &mut p.block_mut(0, n, n, q))?;
        packs.push(p);
    }
    Ok(packs)
}

/// Step 2: every local [R d] packed and all-gathered onto each held device.
fn gather_factors<T: DistScalar>(
    net: &Net,
    gpus: &[Arc<Gpu>],
    locals: &[GpuQr<T>],
    world: usize,
    BuildDims { n, q, .. }: BuildDims,
) -> Result<Gathered<T>> {
    let gr: Vec<&Gpu> = gpus.iter().map(|g| &**g).collect();
    let packs = pack_factors(locals, n, q)?;
    let (ld, len) = (packs[0].ld(), packs[0].buf().len());
    let mut recvs = Vec::new();
    if world > 1 {
        for st in locals {
            recvs.push(st.gpu.stream().alloc_zeroed::<T>(len * world).map_err(
                crate::gpu::runtime::alloc_err("the gathered R-factors", len * world),
            )?);
        }
        let sends: Vec<_> = packs.iter().map(|p| p.buf()).collect();
        let mut rv: Vec<_> = recvs.iter_mut().collect();
        net.all_gather(&gr, &sends, &mut rv)?;
        for g in gpus {
            g.synchronize()?;
        }
    }
    Ok(Gathered {
        recvs,
        _packs: packs,
        ld,
        len,
    })
}

/// The R, d and Q₁ of one held rank after the stacked QR (step 3).
struct StackedFactors<T> {
    r: DevMat<T>,
    d: DevMat<T>,
    q1: Option<DevMat<T>>,
}

/// Step 3 on one held rank (`i`-th of this process, global rank `rank`): the QR of the
/// stacked R-factors, with d and Q₁ brought along; also the column norms of the stacked
/// d's rows below n (the residual's extra part) when `want_extra`.
#[allow(clippy::type_complexity)]
fn stacked_qr<T: DistScalar>(
    g: &Gpu,
    recv: &CudaSlice<T>,
    gathered: &Gathered<T>,
    (world, rank): (usize, usize),
    BuildDims { n, q, .. }: BuildDims,
    q1_loc: Option<DevMat<T>>,
    want_extra: bool,
) -> Result<(StackedFactors<T>, Option<Vec<f64>>)> {
    let (ld, len) = (gathered.ld, gathered.len);
    let gn = world * n;
    let mut s = DevMat::<T>::for_overwrite(g, gn, n)?;
    let mut ds = DevMat::<T>::for_overwrite(g, gn, q)?;
    for r in 0..world {
        let chunk = DevMatView::new(recv.slice(r * len..(r + 1) * len), n, n + q, ld)?;
        g.panel_copy(&chunk.block(0, 0, n, n), &mut s.block_mut(r * n, 0, n, n))?;
        g.panel_copy(&chunk.block(0, n, n, q), &mut ds.block_mut(r * n, 0, n, q))?;
    }
    let mut tau = DevVec::<T>::zeros(g, n)?;
    g.geqrf(&mut s.view_mut(), &mut tau.view_mut())?;
    g.ormqr(
        Side::Left,
        Op::T,
        &s.view(),
        n,
        &tau.view(),
        &mut ds.view_mut(),
    )?;
    let r = g.two_phase_copy_new(&s.block(0, 0, n, n), 0..0, true)?;
    let d = g.two_phase_copy_new(&ds.block(0, 0, n, q), 0..0, false)?;
    let extra = if want_extra {
        Some(thin::column_norms(g, &ds.block(n, 0, gn - n, q))?)
    } else {
        None
    };
    let q1 = match q1_loc {
        Some(q1) => {
            g.orgqr(&mut s.view_mut(), n, &tau.view())?;
            let mut qn = DevMat::<T>::for_overwrite(g, q1.nrows(), n)?;
            g.gemm(
                Op::N,
                Op::N,
                T::ONE,
                &q1.view(),
                &s.block(rank * n, 0, n, n),
                T::ZERO,
                &mut qn.view_mut(),
            )?;
            Some(qn)
        }
        None => None,
    };
    Ok((StackedFactors { r, d, q1 }, extra))
}

/// Where a held rank finds the combined factor: the gathered packs (every rank factorises
/// the stack) or the tree's final pack.
enum Combined<'a, T> {
    Gathered(&'a Gathered<T>),
    Tree(&'a [DevMat<T>]),
}

/// One held rank's part of the state from its local factorisation `st` (and, over
/// several ranks, the stacked QR); also the stacked factor's extra residual norms on the
/// first held rank.
fn rank_part<T: DistScalar>(
    i: usize,
    st: GpuQr<T>,
    plan: (&[usize], usize, &Combined<'_, T>),
    dims: BuildDims,
    rank_tol: f64,
) -> Result<(Part<T>, Option<Vec<f64>>)> {
    let (ranks, world, combined) = plan;
    let BuildDims { m, n, q } = dims;
    let GpuQr {
        gpu,
        r: r_loc,
        d: d_loc,
        q: q1_loc,
        b: b_loc,
        a: a_loc,
        params: up,
        drift,
        ..
    } = st;
    let g = &*gpu;
    let (StackedFactors { r, d, q1 }, extra) = if world == 1 {
        let f = StackedFactors {
            r: r_loc,
            d: d_loc,
            q1: q1_loc,
        };
        (f, None)
    } else {
        drop((r_loc, d_loc));
        match combined {
            Combined::Gathered(gathered) => {
                let at = (world, ranks[i]);
                stacked_qr(g, &gathered.recvs[i], gathered, at, dims, q1_loc, i == 0)?
            }
            Combined::Tree(packs) => {
                let p = &packs[i];
                let f = StackedFactors {
                    r: g.two_phase_copy_new(&p.block(0, 0, n, n), 0..0, true)?,
                    d: g.two_phase_copy_new(&p.block(0, n, n, q), 0..0, false)?,
                    q1: None,
                };
                (f, None)
            }
        }
    };
    crate::gpu::algo::rank::check_rank(g, &r, n, rank_tol)?;
    let (kept, thin_part) = match (a_loc, b_loc, q1) {
        (Some(a), Some(b), _) => (
            Some(Kept {
                rows: a.nrows(),
                a,
                b,
                row0: 0,
            }),
            None,
        ),
        (None, Some(b), Some(q1)) => (None, Some((q1, b))),
        _ => (None, None),
    };
    let core = GpuQr {
        gpu: gpu.clone(),
        dims: Dims {
            m,
            n,
            q,
            policy: QPolicy::None,
        },
        r,
        d,
        q: None,
        b: None,
        a: None,
        kept_row0: 0,
        rho: Vec::new(),
        params: up,
        rank_tol,
        drift,
        poisoned: AtomicBool::new(false),
    };
    let part = Part {
        rank: ranks[i],
        core,
        kept,
        thin: thin_part,
    };
    Ok((part, extra))
}

/// The distributed state of `plan` (docs/scaling.md): local QRs, their R-factors and d
/// all-gathered, the stacked QR on every rank, the residual norms summed, one R for all.
fn build<T: DistScalar>(plan: BuildPlan<T>) -> Result<(DistQr<T>, DistTimes)> {
    let dims = plan.check()?;
    let BuildPlan {
        net,
        ranks,
        world,
        gpus,
        blocks,
        counts,
        policy,
        params,
        combine,
    } = plan;
    let BuildDims { m, n, q } = dims;
    let u = T::UNIT_ROUNDOFF;
    let rank_tol = params
        .rank_tol
        .unwrap_or_else(|| crate::ops::factorize::default_rank_tol(m, n, u));
    let mut times = DistTimes::default();
    let t0 = Instant::now();
    // 1. local QRs, one thread per device where there are several
    let locals = local_factorisations(&net, &gpus, blocks, policy, params)?;
    times.local_ms = t0.elapsed().as_secs_f64() * 1e3;
    // local residual norms (squared, summed over the ranks)
    let rho_local = local_residuals(&locals)?;
    let mut rho2 = net.sum_host::<T>(&gpus[0], &rho_local)?;
    if combine.takes_tree(world, policy) {
        // 2–3. the binary tree: pairs of packs factorised level by level, rank 0's R shared
        let t1 = Instant::now();
        let packs = pack_factors(&locals, n, q)?;
        let out = super::tree::tree_combine(&net, &gpus, &ranks, world, packs, (n, q))?;
        times.comm_ms = out.comm_ms;
        let mut parts = Vec::new();
        let combined = Combined::Tree(&out.packs);
        for (i, st) in locals.into_iter().enumerate() {
            parts.push(rank_part(i, st, (&ranks, world, &combined), dims, rank_tol)?.0);
        }
        let extra2 = if let Net::Rank(_) = *net {
            net.sum_host::<T>(&gpus[0], &[out.extra2])?
        } else {
            out.extra2
        };
        rho2.iter_mut().zip(extra2).for_each(|(x, e)| *x += e);
        let st = assemble(net, parts, (counts, world), dims, policy, &rho2)?;
        times.combine_ms = t1.elapsed().as_secs_f64() * 1e3 - times.comm_ms;
        return Ok((st, times));
    }
    // 2. the R-factors and d, all-gathered
    let t1 = Instant::now();
    let gathered = gather_factors(&net, &gpus, &locals, world, dims)?;
    times.comm_ms = t1.elapsed().as_secs_f64() * 1e3;
    // 3. the stacked QR on every rank
    let t2 = Instant::now();
    let mut parts = Vec::new();
    let mut extra = vec![0.0; q];
    let combined = Combined::Gathered(&gathered);
    for (i, st) in locals.into_iter().enumerate() {
        let (part, e) = rank_part(i, st, (&ranks, world, &combined), dims, rank_tol)?;
        if let Some(e) = e {
            extra = e;
        }
        parts.push(part);
    }
    // the stacked factor's extra rows add to the residual (rank 0's copy, shared)
    if world > 1 {
        let mine = if ranks[0] == 0 { extra } else { vec![0.0; q] };
        let e = if let Net::Rank(_) = *net {
            net.sum_host::<T>(&gpus[0], &[mine])?
        } else {
            mine
        };
        rho2.iter_mut().zip(e).for_each(|(x, e)| *x += e * e);
    }
    let st = assemble(net, parts, (counts, world), dims, policy, &rho2)?;
    times.combine_ms = t2.elapsed().as_secs_f64() * 1e3;
    Ok((st, times))
}

/// The state from the held ranks' parts, with the residual norms (`rho2`, squared) and one
/// R for all (rank 0's, bit for bit).
fn assemble<T: DistScalar>(
    net: Rc<Net>,
    parts: Vec<Part<T>>,
    (counts, world): (Vec<usize>, usize),
    BuildDims { m, n, q }: BuildDims,
    policy: QPolicy,
    rho2: &[f64],
) -> Result<DistQr<T>> {
    let params_u = parts[0].core.params;
    let mut segs = VecDeque::new();
    for (r, &c) in counts.iter().enumerate() {
        segs.push_back((r, c));
    }
    let mut st = DistQr {
        net,
        parts,
        world,
        segs,
        cap: m.div_ceil(world),
        counts,
        dims: Dims { m, n, q, policy },
        params: params_u,
    };
    for p in &mut st.parts {
        p.core.rho = rho2
            .iter()
            .map(|&x| T::from_f64(x.max(0.0).sqrt()))
            .collect();
    }
    if world > 1 {
        st.share_core(0, OP, true)?;
    }
    st.synchronize()?;
    Ok(st)
}
