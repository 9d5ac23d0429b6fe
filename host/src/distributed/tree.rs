//! The binary-tree combine of the distributed factorisation (docs/scaling.md#the-tree-combine):
//! instead of gathering every rank's [R d] on every rank and factorising the G·n×n stack,
//! the ranks pair up over log₂G levels — at the level of stride s, rank r (r a multiple of
//! 2s) receives the pack of rank r + s and factorises the 2n×n stack of the two — and rank
//! 0's final R and d are broadcast. Each level moves one n×(n+q) pack a pair; the rows of
//! the transformed d below n add to the residual norms.
#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::CudaSlice;

use super::{DistScalar, Net};
use crate::base::error::{Error, Result};
use crate::base::params::QPolicy;
use crate::gpu::algo::thin;
use crate::gpu::ffi::blas::{Op, Side};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{DevVec, Gpu};

/// How a distributed factorisation combines the ranks' R-factors
/// (docs/scaling.md#the-tree-combine).
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::distributed::{Combine, DistGroup, DistQr};
/// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
/// let gpus: Vec<Arc<Gpu>> = (0..4).map(|i| Gpu::new(i).map(Arc::new)).collect::<Result<_, _>>()?;
/// let group = DistGroup::new(&gpus)?.with_combine(Combine::Tree);
/// let a = Mat::<f64>::from_fn(40_000, 64, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
/// let b = Mat::<f64>::from_fn(40_000, 1, |i, _| (i % 17) as f64);
/// let qr = DistQr::factorize_in(&group, a.as_ref(), b.as_ref(), QPolicy::None, FactorParams::default())?;
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Combine {
    /// The tree for the R-only kind (measured faster from two ranks on, on GPUs of their
    /// own or as logical partitions of one), the all-gather for the thin kind.
    #[default]
    Auto,
    /// Every rank's [R d] gathered on every rank, one G·n×n QR on each.
    AllGather,
    /// log₂G levels of 2n×n QRs of pairs, then rank 0's R and d broadcast (R-only kind;
    /// the thin kind, whose Q₁ blocks need the whole stacked factor, always gathers).
    Tree,
}

impl Combine {
    /// Whether a factorisation over `world` ranks talking through `net` takes the tree.
    pub(crate) fn takes_tree(self, world: usize, policy: QPolicy) -> bool {
        if policy != QPolicy::None || world < 2 {
            return false;
        }
        match self {
            Combine::AllGather => false,
            // the all-gather factorises the G·n×n stack on every rank, G·(G·n×n) on a
            // device of logical partitions; the tree one 2n×n stack a pair and level
            // (docs/performance.md#the-tree-combine)
            Combine::Tree | Combine::Auto => true,
        }
    }
}

/// What the tree leaves on each rank this process holds.
pub(crate) struct TreeOut<T> {
    /// Rank 0's final [R d] (n×(n+q), R upper triangular), a copy on every held rank.
    pub(crate) packs: Vec<DevMat<T>>,
    /// The squared norms of the rows that the held ranks' pair QRs moved below n, per
    /// column of d (to be summed over the processes).
    pub(crate) extra2: Vec<f64>,
    /// Wall time of the exchanges (each level's sends and receives, synchronised).
    pub(crate) comm_ms: f64,
}

/// Combines the held ranks' packs (`packs[i]` of rank `ranks[i]`, n×(n+q), made by one
/// `DevMat::zeros` shape so that all have one layout) over the tree.
pub(crate) fn tree_combine<T: DistScalar>(
    net: &Net,
    gpus: &[Arc<Gpu>],
    ranks: &[usize],
    world: usize,
    mut packs: Vec<DevMat<T>>,
    (n, q): (usize, usize),
) -> Result<TreeOut<T>> {
    let gr: Vec<&Gpu> = gpus.iter().map(|g| &**g).collect();
    let (ld, len) = (packs[0].ld(), packs[0].buf().len());
    let mut recvs = Vec::with_capacity(packs.len());
    for g in gpus {
        recvs.push(
            g.stream()
                .alloc_zeroed::<T>(len)
                .map_err(crate::gpu::runtime::alloc_err("a partner's R-factor", len))?,
        );
    }
    let mut extra2 = vec![0.0; q];
    let mut comm_ms = 0.0;
    let mut stride = 1;
    while stride < world {
        let t = Instant::now();
        {
            let sends: Vec<&CudaSlice<T>> = packs.iter().map(|p| p.buf()).collect();
            let mut rv: Vec<&mut CudaSlice<T>> = recvs.iter_mut().collect();
            net.pair_exchange(&gr, &sends, &mut rv, (stride, world), ranks)?;
        }
        for g in gpus {
            g.synchronize()?;
        }
        comm_ms += t.elapsed().as_secs_f64() * 1e3;
        let receivers: Vec<usize> = (0..ranks.len())
            .filter(|&i| ranks[i].is_multiple_of(2 * stride) && ranks[i] + stride < world)
            .collect();
        if one_launch(gpus, &receivers, n) {
            let mut pairs: Vec<(&mut DevMat<T>, &mut CudaSlice<T>)> = packs
                .iter_mut()
                .zip(recvs.iter_mut())
                .enumerate()
                .filter(|(i, _)| receivers.contains(i))
                .map(|(_, pr)| pr)
                .collect();
            for e in gpus[receivers[0]].row_insert_pairs(&mut pairs, (n, q))? {
                extra2.iter_mut().zip(e).for_each(|(x, e)| *x += e * e);
            }
        } else {
            let outs = level_qrs(gpus, &packs, &recvs, &receivers, (n, q, ld))?;
            for (&i, (pack, e)) in receivers.iter().zip(outs) {
                extra2.iter_mut().zip(e).for_each(|(x, e)| *x += e * e);
                packs[i] = pack;
            }
        }
        stride *= 2;
    }
    {
        let mut bufs: Vec<&mut CudaSlice<T>> = packs.iter_mut().map(|p| p.buf_mut()).collect();
        net.broadcast(&gr, &mut bufs, 0, ranks)?;
    }
    Ok(TreeOut {
        packs,
        extra2,
        comm_ms,
    })
}

/// Fewest pairs a level factorises in one launch of `row_insert_pairs`: at n = 512 on an
/// H200 the launch took about 7.4 ms whatever its pairs, one cuSOLVER pair QR 2.9–3.1 ms
/// (about 4.4 ms for two side by side in threads), so from three pairs on the launch is the
/// faster (docs/performance.md#the-tree-combine).
const ONE_LAUNCH_MIN_PAIRS: usize = 3;

/// Whether a level's pair QRs (`receivers`, indices into `gpus`) run as one launch of
/// `row_insert_pairs` (one block a pair): where at least [`ONE_LAUNCH_MIN_PAIRS`] of them
/// share one device context (one handle, or partitions made by [`Gpu::partition`]) and n
/// fits the kernel. One launch keeps a level's time about constant while the pairs fit
/// the SMs, where cuSOLVER's pair QRs, each many small launches, queue one after the other
/// (docs/performance.md#the-tree-combine).
fn one_launch(gpus: &[Arc<Gpu>], receivers: &[usize], n: usize) -> bool {
    receivers.len() >= ONE_LAUNCH_MIN_PAIRS
        && crate::gpu::launch::row_insert_pairs::pairs_fit(n)
        && receivers
            .iter()
            .all(|&i| gpus[i].shares_context(&gpus[receivers[0]]))
}

/// The pair QRs of one level: `receivers[k]` is the index of a held rank that factorises
/// its pack with the partner's in `recvs`. On distinct device handles (GPUs, or partitions
/// made by [`Gpu::partition`]) each runs in a thread of its own, so that the level takes
/// about one pair QR's time; on one shared handle they run one after the other. The first
/// handle's context is bound to this thread again afterwards.
fn level_qrs<T: DistScalar>(
    gpus: &[Arc<Gpu>],
    packs: &[DevMat<T>],
    recvs: &[CudaSlice<T>],
    receivers: &[usize],
    (n, q, ld): (usize, usize, usize),
) -> Result<Vec<(DevMat<T>, Vec<f64>)>> {
    let one = |i: usize| -> Result<(DevMat<T>, Vec<f64>)> {
        let theirs = DevMatView::new(recvs[i].slice(..), n, n + q, ld)?;
        pair_qr(&gpus[i], &packs[i], &theirs, n, q)
    };
    let distinct = receivers.iter().enumerate().all(|(k, &i)| {
        receivers[..k]
            .iter()
            .all(|&j| !Arc::ptr_eq(&gpus[i], &gpus[j]))
    });
    if receivers.len() < 2 || !distinct {
        return receivers.iter().map(|&i| one(i)).collect();
    }
    let outs: Vec<Result<(DevMat<T>, Vec<f64>)>> = std::thread::scope(|s| {
        let hs: Vec<_> = receivers
            .iter()
            .map(|&i| {
                let one = &one;
                s.spawn(move || {
                    gpus[i]
                        .context()
                        .bind_to_thread()
                        .map_err(crate::gpu::runtime::driver_err("binding the context"))?;
                    one(i)
                })
            })
            .collect();
        hs.into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::Driver("a pair QR panicked".into())))
            })
            .collect()
    });
    gpus[0]
        .context()
        .bind_to_thread()
        .map_err(crate::gpu::runtime::driver_err("binding the context"))?;
    outs.into_iter().collect()
}

/// The QR of [R_a d_a; R_b d_b] (2n×(n+q)): the new pack [R d] (R upper triangular) and
/// the norms of the transformed d's rows n..2n, per column.
fn pair_qr<T: DistScalar>(
    g: &Gpu,
    mine: &DevMat<T>,
    theirs: &DevMatView<'_, T>,
    n: usize,
    q: usize,
) -> Result<(DevMat<T>, Vec<f64>)> {
    let mut s = DevMat::<T>::for_overwrite(g, 2 * n, n)?;
    let mut ds = DevMat::<T>::for_overwrite(g, 2 * n, q)?;
    g.panel_copy(&mine.block(0, 0, n, n), &mut s.block_mut(0, 0, n, n))?;
    g.panel_copy(&theirs.block(0, 0, n, n), &mut s.block_mut(n, 0, n, n))?;
    g.panel_copy(&mine.block(0, n, n, q), &mut ds.block_mut(0, 0, n, q))?;
    g.panel_copy(&theirs.block(0, n, n, q), &mut ds.block_mut(n, 0, n, q))?;
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
    let mut pack = DevMat::<T>::zeros(g, n, n + q)?;
    g.panel_copy(&r.view(), &mut pack.block_mut(0, 0, n, n))?;
    g.panel_copy(&ds.block(0, 0, n, q), &mut pack.block_mut(0, n, n, q))?;
    let extra = thin::column_norms(g, &ds.block(n, 0, n, q))?;
    Ok((pack, extra))
}
