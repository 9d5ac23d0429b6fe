//! Row-distributed least squares over several GPUs (docs/scaling.md): [`DistQr`] keeps a
//! block of rows of A and b on each GPU (and, for the thin kind, its rows of Q₁) with R, d
//! and the residual norms replicated on every GPU.
//!
//! * Factorisation by TSQR: cuqr's blocked Householder QR of each block, then the G
//!   R-factors (with their d) combined by a binary tree of 2n×n QRs ([`Combine`]) or
//!   all-gathered and the stacked G·n×n factorised on every GPU (the thin kind);
//!   the thin Q₁ block of each GPU is its local Q times its block of the stacked Q.
//! * Row insertion, deletion and the window step run on the GPU that owns (or receives) the
//!   rows, with the R-only window step's Gram form (docs/algorithms.md#r-only-window-step);
//!   R, d and the residual norms are then broadcast (n×n). The window's rows move round the
//!   GPUs like a ring buffer: new rows go to one GPU until it holds its share, the oldest
//!   leave another.
//! * Column insertion and rank-one take AᵀU (or Aᵀu) as local products and one all-reduce,
//!   then the R-only algorithms (the corrected semi-normal equations).
//! * The thin kind's updates (row insertion and deletion, the window step, column insertion,
//!   rank-one) are small replicated work from all-reduced products and one GEMM over each
//!   rank's rows of Q₁ (docs/scaling.md#the-thin-kind).
//! * Solving uses the replicated R.
//!
//! Two ways to start: one process driving all GPUs of a host ([`DistQr::factorize`] with a
//! list of devices: NCCL's `Comm::from_devices`), or one process per GPU
//! ([`DistQr::factorize_rank`] with a [`RankComm`] made from a shared [`NcclId`]: NCCL's
//! `Comm::from_rank`), so that several hosts need only a launcher: under `torchrun`,
//! `mpirun` or `srun`, [`RankComm::from_env`] reads the rank from the launcher's
//! environment ([`Launch`]) and hands NCCL's id over TCP ([`Rendezvous`]). Listing one
//! device G times runs G logical partitions on it without NCCL (the tests' form).
#![forbid(unsafe_code)]

mod cols;
mod factorize;
mod launch;
mod net;
mod rows;
mod thin;
mod tree;

use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;

use crate::gpu::ffi::nccl::ForeignComm;
pub use crate::gpu::ffi::nccl::ForeignNccl;
pub use launch::{Launch, Rendezvous};
pub use net::DistScalar;
use net::Link;
pub(crate) use net::Net;
pub use tree::Combine;

use crate::backend::QrUpdate;
use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::Mat;
use crate::base::params::UpdateParams;
use crate::base::solution::Solution;
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::Gpu;
use crate::state::gpu::GpuQr;

/// The unique id that the ranks of one NCCL communicator share: rank 0 makes it
/// ([`NcclId::new`]) and hands it to the others as text ([`NcclId::to_hex`],
/// [`NcclId::from_hex`]) through a file or an environment variable.
///
/// # Examples
/// ```no_run
/// use cuqr::distributed::NcclId;
/// let id = NcclId::new()?;                       // on rank 0
/// std::fs::write("/tmp/cuqr.id", id.to_hex()).unwrap();
/// let text = std::fs::read_to_string("/tmp/cuqr.id").unwrap(); // on every rank
/// let same = NcclId::from_hex(&text)?;
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct NcclId(cudarc::nccl::Id);

impl NcclId {
    /// A fresh id (NCCL's `ncclGetUniqueId`).
    ///
    /// # Errors
    /// [`Error::NoDevice`] without the NCCL library; [`Error::Driver`] if NCCL fails.
    pub fn new() -> Result<Self> {
        crate::gpu::ffi::nccl::probe()?;
        Ok(Self(
            cudarc::nccl::Id::new().map_err(net::nccl_err("making a unique id"))?,
        ))
    }

    /// The id as 256 hexadecimal digits.
    pub fn to_hex(&self) -> String {
        self.0
            .internal()
            .iter()
            .map(|&c| format!("{:02x}", c as u8))
            .collect()
    }

    /// The id from [`NcclId::to_hex`]'s text (surrounding white space ignored).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] unless the text is 256 hexadecimal digits.
    pub fn from_hex(text: &str) -> Result<Self> {
        let t = text.trim();
        let bad = || Error::InvalidParam {
            op: "NcclId::from_hex",
            what: "text",
            why: "expected 256 hexadecimal digits".into(),
        };
        if t.len() != 256 || !t.is_ascii() {
            return Err(bad());
        }
        let mut raw = [0 as core::ffi::c_char; 128];
        for (i, x) in raw.iter_mut().enumerate() {
            *x = u8::from_str_radix(&t[2 * i..2 * i + 2], 16).map_err(|_| bad())? as _;
        }
        Ok(Self(cudarc::nccl::Id::uninit(raw)))
    }
}

/// One process's membership of a group of processes, one GPU each (NCCL's
/// `Comm::from_rank`): made on every rank with the same [`NcclId`] and world size.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::distributed::{NcclId, RankComm};
/// use cuqr::Gpu;
/// let (rank, world) = (0, 2);
/// let id = NcclId::from_hex(&std::env::var("CUQR_NCCL_ID").unwrap())?;
/// let gpu = Arc::new(Gpu::new(rank)?);
/// let comm = RankComm::new(&gpu, rank, world, id)?;
/// # Ok::<(), cuqr::Error>(())
/// ```
///
/// A `RankComm` is cheap to clone: the clones share the communicator, so that one
/// process makes it once and factorises several states in it (every rank making the same
/// calls in the same order).
#[derive(Clone)]
pub struct RankComm {
    pub(crate) net: Rc<Net>,
    pub(crate) gpu: Arc<Gpu>,
    rank: usize,
    world: usize,
    pub(crate) combine: Combine,
}

impl core::fmt::Debug for RankComm {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RankComm")
            .field("rank", &self.rank)
            .field("world", &self.world)
            .finish_non_exhaustive()
    }
}

impl RankComm {
    /// Joins the group as `rank` of `world` on `gpu`; blocks until every rank has joined.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for `rank ≥ world`; [`Error::NoDevice`] without the NCCL
    /// library; [`Error::Driver`] if NCCL fails.
    pub fn new(gpu: &Arc<Gpu>, rank: usize, world: usize, id: NcclId) -> Result<Self> {
        if rank >= world {
            return Err(Error::InvalidParam {
                op: "RankComm::new",
                what: "rank",
                why: format!("rank {rank} of a world of {world}"),
            });
        }
        crate::gpu::ffi::nccl::probe()?;
        let comm = cudarc::nccl::Comm::from_rank(gpu.stream().clone(), rank, world, id.0)
            .map_err(net::nccl_err("joining the group"))?;
        Ok(Self {
            net: Rc::new(Net::Rank(Link::Own(comm))),
            gpu: gpu.clone(),
            rank,
            world,
            combine: Combine::Auto,
        })
    }

    /// Joins the group of a communicator that another library made (PyTorch's
    /// `ProcessGroupNCCL`, say) instead of making one: the rank and world size are the
    /// communicator's, its device must be `gpu`'s. Nothing waits: the communicator exists
    /// already. cuqr issues its collectives on `gpu`'s stream and never destroys it.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for a null communicator or one on another device;
    /// [`Error::NoDevice`] without the NCCL library; [`Error::Driver`] if NCCL cannot read
    /// it.
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(ptr: usize) -> cuqr::Result<()> {
    /// use std::sync::Arc;
    /// use cuqr::distributed::{ForeignNccl, RankComm};
    /// let gpu = Arc::new(cuqr::Gpu::new(0)?);
    /// // SAFETY: `ptr` is a live communicator on device 0 whose owner is idle (ForeignNccl::new).
    /// let comm = RankComm::from_nccl(&gpu, unsafe { ForeignNccl::new(ptr as *mut _) })?;
    /// assert!(comm.rank() < comm.world());
    /// # Ok(()) }
    /// ```
    pub fn from_nccl(gpu: &Arc<Gpu>, comm: ForeignNccl) -> Result<Self> {
        let comm = ForeignComm::new(comm, gpu.stream().clone())?;
        let (rank, world, device) = comm.place();
        if device != gpu.ordinal() || rank >= world {
            return Err(Error::InvalidParam {
                op: "RankComm::from_nccl",
                what: "comm",
                why: format!(
                    "rank {rank} of {world} on device {device}, used on device {}",
                    gpu.ordinal()
                ),
            });
        }
        Ok(Self {
            net: Rc::new(Net::Rank(Link::Foreign(comm))),
            gpu: gpu.clone(),
            rank,
            world,
            combine: Combine::Auto,
        })
    }

    /// The same membership with the factorisations' combine chosen
    /// ([`Combine::Auto`] by default); every rank must choose alike.
    pub fn with_combine(mut self, combine: Combine) -> Self {
        self.combine = combine;
        self
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the group.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Every rank's verdict on its own part of a step that all ranks make (arguments read,
    /// checks passed): the lowest rank that `refused`, the same on every rank, or `None`.
    /// A rank that cannot go on calls this instead of returning early, so that the others
    /// learn it instead of waiting for it in the step's first collective.
    ///
    /// # Errors
    /// [`Error::Driver`] if the all-reduce fails.
    ///
    /// # Examples
    /// ```no_run
    /// # fn demo(comm: &cuqr::distributed::RankComm, rows: Option<Vec<f64>>) -> cuqr::Result<()> {
    /// if let Some(r) = comm.first_refusal(rows.is_none())? {
    ///     eprintln!("rank {r} has no rows: every rank stops here");
    ///     return Ok(());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn first_refusal(&self, refused: bool) -> Result<Option<usize>> {
        let mut mine = vec![0.0; self.world];
        mine[self.rank] = f64::from(u8::from(refused));
        let all = self.net.sum_host::<f64>(&self.gpu, &[mine])?;
        Ok(all.iter().position(|&x| x > 0.5))
    }

    /// This rank's device.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }
}

/// The rows one rank keeps: A and b (R-only kind with kept data) in buffers with room
/// below for a window's new rows; rows `row0..row0 + rows` are live.
pub(crate) struct Kept<T> {
    pub(crate) a: DevMat<T>,
    pub(crate) b: DevMat<T>,
    pub(crate) row0: usize,
    pub(crate) rows: usize,
}

/// A copy of one rank's R, d, residual norms and dimensions.
pub(crate) type CoreCopy<T> = (DevMat<T>, DevMat<T>, Vec<T>, Dims);

/// What one rank holds.
pub(crate) struct Part<T: DistScalar> {
    /// The rank.
    pub(crate) rank: usize,
    /// R, d and the residual norms of the whole problem (replicated), as an R-only state
    /// without data whose m is the global row count.
    pub(crate) core: GpuQr<T>,
    /// The rank's rows of A and b (R-only kind with kept data).
    pub(crate) kept: Option<Kept<T>>,
    /// The rank's rows of Q₁ and b (thin kind).
    pub(crate) thin: Option<(DevMat<T>, DevMat<T>)>,
}

/// The GPUs of one process with their NCCL communicators, made once and shared by every
/// [`DistQr`] factorised in it: NCCL's set-up (communicators and their first connections)
/// costs tens of milliseconds, more than a whole factorisation's communication.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::distributed::{DistGroup, DistQr};
/// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
/// let gpus = vec![Arc::new(Gpu::new(0)?), Arc::new(Gpu::new(1)?)];
/// let group = DistGroup::new(&gpus)?;                    // communicators, once
/// let a = Mat::<f64>::from_fn(10_000, 50, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
/// let b = Mat::<f64>::from_fn(10_000, 1, |i, _| (i % 17) as f64);
/// for _ in 0..3 {
///     let qr = DistQr::factorize_in(&group, a.as_ref(), b.as_ref(), QPolicy::None, FactorParams::default())?;
///     let x = qr.solve()?.x;
/// }
/// # Ok::<(), cuqr::Error>(())
/// ```
pub struct DistGroup {
    pub(crate) gpus: Vec<Arc<Gpu>>,
    pub(crate) net: Rc<Net>,
    pub(crate) combine: Combine,
}

impl DistGroup {
    /// Opens the communicators of `gpus` (one rank each, in order): NCCL's for distinct
    /// devices, none for logical partitions of one device.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for an empty list or a device listed twice among others;
    /// [`Error::NoDevice`] without the NCCL library; [`Error::Driver`] if NCCL fails.
    pub fn new(gpus: &[Arc<Gpu>]) -> Result<Self> {
        if gpus.is_empty() {
            return Err(Error::InvalidParam {
                op: "DistGroup::new",
                what: "gpus",
                why: "no devices".into(),
            });
        }
        Ok(Self {
            gpus: gpus.to_vec(),
            net: Rc::new(Net::for_devices(gpus)?),
            combine: Combine::Auto,
        })
    }

    /// The same group with the factorisations' combine chosen ([`Combine::Auto`] by
    /// default; docs/scaling.md#the-tree-combine).
    pub fn with_combine(mut self, combine: Combine) -> Self {
        self.combine = combine;
        self
    }

    /// The devices, in rank order.
    pub fn gpus(&self) -> &[Arc<Gpu>] {
        &self.gpus
    }
}

impl core::fmt::Debug for DistGroup {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DistGroup")
            .field("ranks", &self.gpus.len())
            .finish_non_exhaustive()
    }
}

/// Per-phase wall times of a distributed factorisation, in milliseconds (each phase ends
/// with every device synchronised).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DistTimes {
    /// The local QR of every block (compute).
    pub local_ms: f64,
    /// The all-gather of the R-factors (NCCL).
    pub comm_ms: f64,
    /// The stacked QR, the thin Q blocks and the broadcast of R (compute and NCCL).
    pub combine_ms: f64,
}

/// A QR factorisation of a tall A distributed by rows over several GPUs, with R, d and the
/// residual norms replicated (module docs; docs/scaling.md).
///
/// The kinds: [`crate::QPolicy::None`] (R-only; with [`crate::FactorParams::keep_data`] each GPU keeps
/// its rows of A and b, which row deletion, the window step, column insertion and rank-one
/// need) and [`crate::QPolicy::Thin`] (each GPU holds its rows of Q₁ and b; every update, each as
/// small replicated work and one GEMM over the GPU's rows of Q₁). Both kinds take
/// [`DistQr::insert_rows`], [`DistQr::delete_rows`], [`DistQr::slide`],
/// [`DistQr::insert_cols`], [`DistQr::rank_one`] and [`DistQr::solve`]; [`DistQr::q`] is the
/// thin kind's. Every update validates first and leaves the state unchanged on error.
///
/// # Examples
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::distributed::DistQr;
/// use cuqr::{FactorParams, Gpu, Mat, QPolicy};
/// let gpus = vec![Arc::new(Gpu::new(0)?), Arc::new(Gpu::new(1)?)];
/// let a = Mat::<f64>::from_fn(10_000, 50, |i, j| ((i * 7 + j * 13) % 29) as f64 - 14.0);
/// let b = Mat::<f64>::from_fn(10_000, 1, |i, _| (i % 17) as f64);
/// let keep = FactorParams { keep_data: true, ..FactorParams::default() };
/// let mut qr = DistQr::factorize(&gpus, a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
/// let rows = Mat::<f64>::from_fn(100, 50, |i, j| (i + j) as f64);
/// let rhs = Mat::<f64>::from_fn(100, 1, |i, _| i as f64);
/// qr.slide(rows.as_ref(), rhs.as_ref(), 100)?;   // 100 rows in, the 100 oldest out
/// let x = qr.solve()?.x;
/// # Ok::<(), cuqr::Error>(())
/// ```
pub struct DistQr<T: DistScalar> {
    /// The communicators, shared with the [`DistGroup`] the state was made in.
    pub(crate) net: Rc<Net>,
    /// This process's ranks, ascending.
    pub(crate) parts: Vec<Part<T>>,
    /// Ranks in all.
    pub(crate) world: usize,
    /// The global row order: (rank, rows) segments; a rank's segments appear in the order of
    /// its local rows.
    pub(crate) segs: VecDeque<(usize, usize)>,
    /// Rows held by each rank.
    pub(crate) counts: Vec<usize>,
    /// The share of rows a window step fills a rank to before the next takes new rows.
    pub(crate) cap: usize,
    /// Global dimensions and the kind.
    pub(crate) dims: Dims,
    /// Update options.
    pub(crate) params: UpdateParams,
}

impl<T: DistScalar> core::fmt::Debug for DistQr<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DistQr")
            .field("dims", &self.dims)
            .field("world", &self.world)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl<T: DistScalar> DistQr<T> {
    /// Global dimensions and kind.
    pub fn dims(&self) -> Dims {
        self.dims
    }

    /// Rows m of A.
    pub fn nrows(&self) -> usize {
        self.dims.m
    }

    /// Columns n of A.
    pub fn ncols(&self) -> usize {
        self.dims.n
    }

    /// Ranks (GPUs or partitions) in all.
    pub fn world(&self) -> usize {
        self.world
    }

    /// Rows each rank holds.
    pub fn rows_per_rank(&self) -> &[usize] {
        &self.counts
    }

    /// The global rows a rank holds, as ranges in the order of its local rows.
    pub fn rank_rows(&self, rank: usize) -> Vec<core::ops::Range<usize>> {
        let mut out = Vec::new();
        let mut g0 = 0;
        for &(r, len) in &self.segs {
            if r == rank && len > 0 {
                out.push(g0..g0 + len);
            }
            g0 += len;
        }
        out
    }

    /// Update options.
    pub fn params(&self) -> UpdateParams {
        self.params
    }

    /// Replaces the update options (the forgetting factor of [`DistQr::slide`]).
    pub fn set_params(&mut self, params: UpdateParams) {
        self.params = params;
        for p in &mut self.parts {
            p.core.params = params;
        }
    }

    /// R (n×n), from this process's first rank.
    ///
    /// # Errors
    /// Device errors.
    pub fn r(&self) -> Result<Mat<T>> {
        self.parts[0].core.r()
    }

    /// d = Qᵀb (n×q), from this process's first rank.
    ///
    /// # Errors
    /// Device errors.
    pub fn d(&self) -> Result<Mat<T>> {
        self.parts[0].core.d()
    }

    /// The least-squares solution and residual norms from the replicated R and d.
    ///
    /// # Errors
    /// As [`QrUpdate::solve`].
    pub fn solve(&self) -> Result<Solution<T>> {
        self.parts[0].core.solve()
    }

    /// Q₁ (m×n) of a thin state gathered to the host in global row order (every rank in
    /// this process; in the one-process-per-GPU form, [`DistQr::local_q`]).
    ///
    /// # Errors
    /// [`Error::NeedsQ`] for an R-only state; [`Error::InvalidParam`] in the
    /// one-process-per-GPU form; device errors.
    pub fn q(&self) -> Result<Mat<T>> {
        if self.parts.len() != self.world {
            return Err(Error::InvalidParam {
                op: "DistQr::q",
                what: "ranks",
                why: "this process holds only its own rows: use local_q".into(),
            });
        }
        let (m, n) = (self.dims.m, self.dims.n);
        let mut out = Mat::<T>::zeros(m, n);
        // rows in the order of each rank's ranges
        for p in &self.parts {
            let local = self.local_q_of(p)?;
            let mut l0 = 0;
            for rg in self.rank_rows(p.rank) {
                let len = rg.len();
                for k in 0..len {
                    for j in 0..n {
                        out[(rg.start + k, j)] = local[(l0 + k, j)];
                    }
                }
                l0 += len;
            }
        }
        Ok(out)
    }

    /// This process's first rank's rows of Q₁ (thin kind), in the order of
    /// [`DistQr::rank_rows`].
    ///
    /// # Errors
    /// [`Error::NeedsQ`] for an R-only state; device errors.
    pub fn local_q(&self) -> Result<Mat<T>> {
        self.local_q_of(&self.parts[0])
    }

    fn local_q_of(&self, p: &Part<T>) -> Result<Mat<T>> {
        match &p.thin {
            Some((q1, _)) => q1.to_host(&p.core.gpu),
            None => Err(Error::NeedsQ {
                op: "DistQr::q",
                policy: self.dims.policy,
            }),
        }
    }

    /// The devices of this process's ranks.
    pub(crate) fn gpus(&self) -> Vec<Arc<Gpu>> {
        self.parts.iter().map(|p| p.core.gpu.clone()).collect()
    }

    /// Waits for every device of this process.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn synchronize(&self) -> Result<()> {
        for p in &self.parts {
            p.core.gpu.synchronize()?;
        }
        Ok(())
    }

    /// The local part of `rank`, if this process holds it.
    pub(crate) fn part_index(&self, rank: usize) -> Option<usize> {
        self.parts.iter().position(|p| p.rank == rank)
    }

    /// Copies R, d and the residual norms of `owner`'s core to every rank (after a step
    /// that only the owner computed), with the new global row count.
    pub(crate) fn share_core(&mut self, owner: usize, op: &'static str, ok: bool) -> Result<()> {
        let me = self.parts[0].core.gpu.clone();
        if !self.net.agree::<T>(&me, ok, owner)? {
            return Err(Error::InvalidParam {
                op,
                what: "rows",
                why: format!("rank {owner}, which owns the rows, refused the update"),
            });
        }
        let gpus = self.gpus();
        let gr: Vec<&Gpu> = gpus.iter().map(|g| &**g).collect();
        let ranks: Vec<usize> = self.parts.iter().map(|p| p.rank).collect();
        let (n, q) = (self.dims.n, self.dims.q);
        // the receivers' buffers take the owner's shapes
        for p in &mut self.parts {
            if p.rank != owner {
                if p.core.r.nrows() != n || p.core.r.ncols() != n {
                    p.core.r = DevMat::zeros(&p.core.gpu, n, n)?;
                }
                if p.core.d.nrows() != n || p.core.d.ncols() != q {
                    p.core.d = DevMat::zeros(&p.core.gpu, n, q)?;
                }
            }
        }
        {
            let mut rb: Vec<_> = self.parts.iter_mut().map(|p| p.core.r.buf_mut()).collect();
            self.net.broadcast(&gr, &mut rb, owner, &ranks)?;
        }
        {
            let mut db: Vec<_> = self.parts.iter_mut().map(|p| p.core.d.buf_mut()).collect();
            self.net.broadcast(&gr, &mut db, owner, &ranks)?;
        }
        // residual norms: host copies in one process, a device broadcast between processes
        let rho: Vec<f64> = match self.part_index(owner) {
            Some(i) => self.parts[i].core.rho.iter().map(|x| x.to_f64()).collect(),
            None => vec![0.0; q],
        };
        let rho = if let Net::Rank(_) = *self.net {
            let own = if self.part_index(owner).is_some() {
                rho
            } else {
                vec![0.0; q]
            };
            self.net.sum_host::<T>(&me, &[own])?
        } else {
            rho
        };
        for p in &mut self.parts {
            p.core.rho = rho.iter().map(|&x| T::from_f64(x)).collect();
        }
        Ok(())
    }

    /// Copies of every local core's R, d and residual norms (restored where a multi-step
    /// update fails part way).
    pub(crate) fn snapshot(&self) -> Result<Vec<CoreCopy<T>>> {
        self.parts
            .iter()
            .map(|p| {
                Ok((
                    p.core.r.dup(&p.core.gpu)?,
                    p.core.d.dup(&p.core.gpu)?,
                    p.core.rho.clone(),
                    p.core.dims,
                ))
            })
            .collect()
    }

    /// Puts back a [`DistQr::snapshot`].
    pub(crate) fn restore(&mut self, snap: Vec<CoreCopy<T>>) {
        for (p, (r, d, rho, dims)) in self.parts.iter_mut().zip(snap) {
            p.core.r = r;
            p.core.d = d;
            p.core.rho = rho;
            p.core.dims = dims;
        }
    }

    /// The rank holding global row `k` and its local index (k = m: the last segment's rank,
    /// at its end).
    pub(crate) fn locate(&self, k: usize) -> (usize, usize) {
        let mut local = vec![0usize; self.world];
        let mut g0 = 0;
        for &(r, len) in &self.segs {
            if k < g0 + len {
                return (r, local[r] + (k - g0));
            }
            local[r] += len;
            g0 += len;
        }
        let r = self.segs.back().map_or(0, |s| s.0);
        (r, local[r])
    }

    /// The rows k0..k0+p as (rank, local start, count) pieces, in global order.
    pub(crate) fn pieces(&self, k0: usize, p: usize) -> Vec<(usize, usize, usize)> {
        let mut out = Vec::new();
        let mut local = vec![0usize; self.world];
        let mut g0 = 0;
        let end = k0 + p;
        for &(r, len) in &self.segs {
            let (s, e) = (k0.max(g0), end.min(g0 + len));
            if s < e {
                out.push((r, local[r] + (s - g0), e - s));
            }
            local[r] += len;
            g0 += len;
        }
        out
    }

    /// Removes global rows k0..k0+p from the segment list and counts.
    pub(crate) fn cut_segments(&mut self, k0: usize, p: usize) {
        let mut out = VecDeque::new();
        let mut g0 = 0;
        let end = k0 + p;
        for &(r, len) in &self.segs {
            let (s, e) = (k0.max(g0), end.min(g0 + len));
            let cut = e.saturating_sub(s);
            if len > cut {
                out.push_back((r, len - cut));
            }
            self.counts[r] -= cut;
            g0 += len;
        }
        self.segs = merge(out);
    }

    /// Inserts p rows for `rank` at global row k0 into the segment list and counts.
    pub(crate) fn add_segment(&mut self, k0: usize, rank: usize, p: usize) {
        let mut out = VecDeque::new();
        let mut g0 = 0;
        let mut done = false;
        for &(r, len) in &self.segs {
            if !done && k0 >= g0 && k0 <= g0 + len && (k0 < g0 + len || r == rank) {
                if r == rank {
                    out.push_back((r, len + p));
                } else {
                    out.push_back((r, k0 - g0));
                    out.push_back((rank, p));
                    out.push_back((r, g0 + len - k0));
                }
                done = true;
            } else {
                out.push_back((r, len));
            }
            g0 += len;
        }
        if !done {
            out.push_back((rank, p));
        }
        self.counts[rank] += p;
        self.segs = merge(out);
    }
}

/// The 2-norms of `u`'s columns, in f64: the scale a new column's rank test measures it
/// against.
pub(crate) fn column_norms<T: crate::base::scalar::Scalar>(
    u: crate::base::mat::MatRef<'_, T>,
) -> Vec<f64> {
    (0..u.ncols())
        .map(|j| {
            u.col(j)
                .iter()
                .map(|x| x.to_f64().powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .collect()
}

/// Joins neighbouring segments of one rank and drops empty ones.
fn merge(segs: VecDeque<(usize, usize)>) -> VecDeque<(usize, usize)> {
    let mut out: VecDeque<(usize, usize)> = VecDeque::new();
    for (r, len) in segs {
        if len == 0 {
            continue;
        }
        match out.back_mut() {
            Some(last) if last.0 == r => last.1 += len,
            _ => out.push_back((r, len)),
        }
    }
    out
}

impl<T: DistScalar> Kept<T> {
    /// The live rows of A and b.
    pub(crate) fn views(&self) -> (DevMatView<'_, T>, DevMatView<'_, T>) {
        let (n, q) = (self.a.ncols(), self.b.ncols());
        (
            self.a.block(self.row0, 0, self.rows, n),
            self.b.block(self.row0, 0, self.rows, q),
        )
    }

    /// The live rows in buffers of exactly their size (one copy each where they are not).
    pub(crate) fn settle(&mut self, g: &Gpu) -> Result<()> {
        if self.row0 == 0 && self.a.nrows() == self.rows {
            return Ok(());
        }
        let (a, b) = {
            let (av, bv) = self.views();
            let mut a = DevMat::<T>::for_overwrite(g, self.rows, av.ncols())?;
            let mut b = DevMat::<T>::for_overwrite(g, self.rows, bv.ncols())?;
            if self.rows > 0 {
                g.panel_copy(&av, &mut a.view_mut())?;
                g.panel_copy(&bv, &mut b.view_mut())?;
            }
            (a, b)
        };
        self.a = a;
        self.b = b;
        self.row0 = 0;
        Ok(())
    }

    /// Appends rows at the end: below the live rows where the buffers have room, otherwise
    /// in new buffers with a quarter of the rows (at least eight blocks) to spare.
    pub(crate) fn append(
        &mut self,
        g: &Gpu,
        an: &DevMatView<'_, T>,
        en: &DevMatView<'_, T>,
    ) -> Result<()> {
        let p = an.nrows();
        if self.row0 + self.rows + p > self.a.nrows() {
            let room = (self.rows / 4).max(8 * p);
            let (n, q) = (self.a.ncols(), self.b.ncols());
            let mut a = DevMat::<T>::for_overwrite(g, self.rows + p + room, n)?;
            let mut b = DevMat::<T>::for_overwrite(g, self.rows + p + room, q)?;
            if self.rows > 0 {
                let (av, bv) = self.views();
                g.panel_copy(&av, &mut a.block_mut(0, 0, self.rows, n))?;
                g.panel_copy(&bv, &mut b.block_mut(0, 0, self.rows, q))?;
            }
            self.a = a;
            self.b = b;
            self.row0 = 0;
        }
        let at = self.row0 + self.rows;
        let (n, q) = (self.a.ncols(), self.b.ncols());
        g.panel_copy(an, &mut self.a.block_mut(at, 0, p, n))?;
        g.panel_copy(en, &mut self.b.block_mut(at, 0, p, q))?;
        self.rows += p;
        Ok(())
    }
}
