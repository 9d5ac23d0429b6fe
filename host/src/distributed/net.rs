//! The communication under a [`crate::distributed::DistQr`]: NCCL communicators for one process
//! driving all GPUs of a host (`Comm::from_devices`, every collective in one NCCL group) or
//! one process per GPU (`Comm::from_rank`), and in-process copies for logical partitions that
//! share one device (NCCL takes one rank per device).
#![forbid(unsafe_code)]

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use cudarc::nccl::{group_end, group_start, Comm, ReduceOp};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::ffi::nccl::ForeignComm;
use crate::gpu::runtime::{Gpu, GpuScalar};

/// A scalar the distributed state can hold: a [`GpuScalar`] that NCCL can reduce (`f32`,
/// `f64`).
pub trait DistScalar: GpuScalar + cudarc::nccl::NcclType {}
impl DistScalar for f32 {}
impl DistScalar for f64 {}

/// How the ranks talk.
pub(crate) enum Net {
    /// Every rank in this process on one device: copies and sums on that device.
    Local,
    /// Every rank in this process, one communicator per device (collectives grouped).
    Group(Vec<Comm>),
    /// This process is one rank of `world`.
    Rank(Link),
}

/// The communicator of a process that is one rank: its own, or one another library made.
pub(crate) enum Link {
    /// Made by cuqr from a shared id ([`crate::distributed::RankComm::new`]); destroyed with it.
    Own(Comm),
    /// Made and owned by another library ([`crate::distributed::RankComm::from_nccl`]).
    Foreign(ForeignComm),
}

type NcclResult = std::result::Result<(), cudarc::nccl::result::NcclError>;

impl Link {
    fn all_reduce_sum<T: DistScalar>(&self, buf: &mut CudaSlice<T>) -> NcclResult {
        match self {
            Link::Own(c) => c.all_reduce_in_place(buf, &ReduceOp::Sum).map(|_| ()),
            Link::Foreign(c) => c.all_reduce_sum(buf),
        }
    }

    fn broadcast<T: DistScalar>(&self, buf: &mut CudaSlice<T>, root: usize) -> NcclResult {
        match self {
            Link::Own(c) => c.broadcast_in_place(buf, root as i32).map(|_| ()),
            Link::Foreign(c) => c.broadcast(buf, root),
        }
    }

    fn all_gather<T: DistScalar>(
        &self,
        send: &CudaSlice<T>,
        recv: &mut CudaSlice<T>,
    ) -> NcclResult {
        match self {
            Link::Own(c) => c.all_gather(send, recv).map(|_| ()),
            Link::Foreign(c) => c.all_gather(send, recv),
        }
    }

    fn send<T: DistScalar>(&self, buf: &CudaSlice<T>, peer: usize) -> NcclResult {
        match self {
            Link::Own(c) => c.send(buf, peer as i32),
            Link::Foreign(c) => c.send(buf, peer),
        }
    }

    fn recv<T: DistScalar>(&self, buf: &mut CudaSlice<T>, peer: usize) -> NcclResult {
        match self {
            Link::Own(c) => c.recv(buf, peer as i32).map(|_| ()),
            Link::Foreign(c) => c.recv(buf, peer),
        }
    }
}

/// An NCCL error as a [`Error::Driver`] (a failed collective may leave the buffers
/// half-written, so it poisons like a driver fault).
pub(crate) fn nccl_err(
    what: &'static str,
) -> impl FnOnce(cudarc::nccl::result::NcclError) -> Error {
    move |e| Error::Driver(format!("NCCL {what}: {e:?}").into())
}

fn copy<T: GpuScalar>(g: &Gpu, src: &CudaSlice<T>, dst: &mut CudaSlice<T>) -> Result<()> {
    g.stream()
        .memcpy_dtod(src, dst)
        .map_err(crate::gpu::runtime::driver_err(
            "copying between partitions",
        ))?;
    g.count_launch();
    Ok(())
}

/// Runs `f` on every communicator inside one NCCL group (one thread drives all devices).
fn grouped<X>(
    comms: &[Comm],
    bufs: &mut [X],
    what: &'static str,
    mut f: impl FnMut(&Comm, &mut X) -> std::result::Result<(), cudarc::nccl::result::NcclError>,
) -> Result<()> {
    group_start().map_err(nccl_err(what))?;
    let mut out = Ok(());
    for (c, b) in comms.iter().zip(bufs.iter_mut()) {
        if let Err(e) = f(c, b) {
            out = Err(e);
            break;
        }
    }
    let end = group_end();
    out.map_err(nccl_err(what))?;
    end.map(|_| ()).map_err(nccl_err(what))
}

impl Net {
    /// Builds the communicators for `gpus` (one rank each, in order): none where every
    /// entry is the same device, one per device where all differ.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for a device listed twice among others; [`Error::NoDevice`]
    /// without the NCCL library; [`Error::Driver`] if NCCL fails to set up.
    pub(crate) fn for_devices(gpus: &[Arc<Gpu>]) -> Result<Self> {
        let ords: Vec<usize> = gpus.iter().map(|g| g.ordinal()).collect();
        if ords.iter().all(|&o| o == ords[0]) {
            return Ok(Net::Local);
        }
        let mut sorted = ords.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != ords.len() {
            return Err(Error::InvalidParam {
                op: "DistQr",
                what: "gpus",
                why: format!(
                    "devices {ords:?}: either all partitions on one device or each on its own"
                ),
            });
        }
        crate::gpu::ffi::nccl::probe()?;
        let streams = gpus.iter().map(|g| g.stream().clone()).collect();
        Ok(Net::Group(
            Comm::from_devices(streams).map_err(nccl_err("initialising the communicators"))?,
        ))
    }

    /// Sums `bufs` (one per local rank, equal lengths) over all ranks, in place.
    pub(crate) fn all_reduce<T: DistScalar>(
        &self,
        gpus: &[&Gpu],
        bufs: &mut [&mut CudaSlice<T>],
    ) -> Result<()> {
        match self {
            Net::Local => {
                let g = gpus[0];
                let (first, rest) = bufs.split_first_mut().expect("one rank at least");
                for b in rest.iter() {
                    g.axpy(T::ONE, &b.slice(..), &mut first.slice_mut(..))?;
                }
                for b in rest.iter_mut() {
                    copy(g, first, b)?;
                }
                Ok(())
            }
            Net::Group(comms) => grouped(comms, bufs, "all-reduce", |c, b| {
                c.all_reduce_in_place(*b, &ReduceOp::Sum).map(|_| ())
            }),
            Net::Rank(c) => c.all_reduce_sum(bufs[0]).map_err(nccl_err("all-reduce")),
        }
    }

    /// Copies `bufs[root]`'s contents (the buffer of rank `root`) to every rank's buffer.
    pub(crate) fn broadcast<T: DistScalar>(
        &self,
        gpus: &[&Gpu],
        bufs: &mut [&mut CudaSlice<T>],
        root: usize,
        my_ranks: &[usize],
    ) -> Result<()> {
        match self {
            Net::Local => {
                let i = my_ranks
                    .iter()
                    .position(|&r| r == root)
                    .expect("local root");
                let (head, tail) = bufs.split_at_mut(i);
                let (src, tail) = tail.split_first_mut().expect("root buffer");
                for b in head.iter_mut().chain(tail.iter_mut()) {
                    copy(gpus[0], src, b)?;
                }
                Ok(())
            }
            Net::Group(comms) => grouped(comms, bufs, "broadcast", |c, b| {
                c.broadcast_in_place(*b, root as i32).map(|_| ())
            }),
            Net::Rank(c) => c.broadcast(bufs[0], root).map_err(nccl_err("broadcast")),
        }
    }

    /// Gathers every rank's `sends` (equal lengths) into each rank's `recvs`, rank by rank.
    pub(crate) fn all_gather<T: DistScalar>(
        &self,
        gpus: &[&Gpu],
        sends: &[&CudaSlice<T>],
        recvs: &mut [&mut CudaSlice<T>],
    ) -> Result<()> {
        match self {
            Net::Local => {
                let g = gpus[0];
                let len = sends[0].len();
                for rv in recvs.iter_mut() {
                    for (r, s) in sends.iter().enumerate() {
                        g.stream()
                            .memcpy_dtod(*s, &mut rv.slice_mut(r * len..(r + 1) * len))
                            .map_err(crate::gpu::runtime::driver_err("gathering"))?;
                        g.count_launch();
                    }
                }
                Ok(())
            }
            Net::Group(comms) => {
                let mut pairs: Vec<(&CudaSlice<T>, &mut CudaSlice<T>)> = sends
                    .iter()
                    .copied()
                    .zip(recvs.iter_mut().map(|r| &mut **r))
                    .collect();
                grouped(comms, &mut pairs, "all-gather", |c, (s, r)| {
                    c.all_gather(*s, *r).map(|_| ())
                })
            }
            Net::Rank(c) => c
                .all_gather(sends[0], recvs[0])
                .map_err(nccl_err("all-gather")),
        }
    }

    /// One level of a binary tree whose pairs are `stride` apart: every rank `r` with
    /// `r % (2·stride) == 0` and a partner `r + stride < world` receives that partner's
    /// `sends` into its `recvs` (equal lengths); the partners send. Ranks outside a pair
    /// at this level take no part. `my_ranks[i]` is the rank of `sends[i]` and `recvs[i]`.
    pub(crate) fn pair_exchange<T: DistScalar>(
        &self,
        gpus: &[&Gpu],
        sends: &[&CudaSlice<T>],
        recvs: &mut [&mut CudaSlice<T>],
        (stride, world): (usize, usize),
        my_ranks: &[usize],
    ) -> Result<()> {
        let receives = |r: usize| r.is_multiple_of(2 * stride) && r + stride < world;
        let sends_to = |r: usize| (r % (2 * stride) == stride).then(|| r - stride);
        match self {
            Net::Local => {
                for (i, &r) in my_ranks.iter().enumerate() {
                    if receives(r) {
                        let j = my_ranks
                            .iter()
                            .position(|&x| x == r + stride)
                            .expect("every rank in this process");
                        copy(gpus[0], sends[j], recvs[i])?;
                    }
                }
                Ok(())
            }
            Net::Group(comms) => {
                let mut slots: Vec<(usize, &CudaSlice<T>, &mut CudaSlice<T>)> = my_ranks
                    .iter()
                    .copied()
                    .zip(sends.iter().copied())
                    .zip(recvs.iter_mut().map(|r| &mut **r))
                    .map(|((r, s), v)| (r, s, v))
                    .collect();
                grouped(comms, &mut slots, "tree exchange", |c, (r, s, v)| {
                    if let Some(to) = sends_to(*r) {
                        c.send(*s, to as i32)?;
                    } else if receives(*r) {
                        c.recv(*v, (*r + stride) as i32)?;
                    }
                    Ok(())
                })
            }
            Net::Rank(c) => {
                let r = my_ranks[0];
                if let Some(to) = sends_to(r) {
                    c.send(sends[0], to).map_err(nccl_err("tree exchange"))?;
                } else if receives(r) {
                    c.recv(recvs[0], r + stride)
                        .map_err(nccl_err("tree exchange"))?;
                }
                Ok(())
            }
        }
    }

    /// Sums host vectors over all ranks: `local` holds one vector per local rank; every
    /// rank gets the sum. In-process ranks add on the host; a rank of a process group
    /// goes through the device (`gpu`).
    pub(crate) fn sum_host<T: DistScalar>(
        &self,
        gpu: &Gpu,
        local: &[Vec<f64>],
    ) -> Result<Vec<f64>> {
        let len = local[0].len();
        let mut s = vec![0.0; len];
        for v in local {
            s.iter_mut().zip(v).for_each(|(a, b)| *a += b);
        }
        if let Net::Rank(_) = self {
            if len == 0 {
                return Ok(s);
            }
            let host: Vec<T> = s.iter().map(|&x| T::from_f64(x)).collect();
            let mut dev = gpu
                .stream()
                .htod_copy(&host)
                .map_err(crate::gpu::runtime::driver_err("uploading a sum"))?;
            self.all_reduce(&[gpu], &mut [&mut dev])?;
            let back = gpu
                .stream()
                .clone_dtoh(&dev)
                .map_err(crate::gpu::runtime::driver_err("downloading a sum"))?;
            s = back.into_iter().map(|x| x.to_f64()).collect();
        }
        Ok(s)
    }

    /// Whether the owning rank's step succeeded, told to every rank (a process group only:
    /// in-process ranks see the result directly). `ok` is this process's answer where it owns
    /// the step.
    pub(crate) fn agree<T: DistScalar>(&self, gpu: &Gpu, ok: bool, owner: usize) -> Result<bool> {
        let Net::Rank(c) = self else {
            return Ok(ok);
        };
        let flag = [T::from_f64(if ok { 1.0 } else { 0.0 })];
        let mut dev = gpu
            .stream()
            .htod_copy(&flag)
            .map_err(crate::gpu::runtime::driver_err("uploading a flag"))?;
        c.broadcast(&mut dev, owner)
            .map_err(nccl_err("broadcast"))?;
        let back = gpu
            .stream()
            .clone_dtoh(&dev)
            .map_err(crate::gpu::runtime::driver_err("downloading a flag"))?;
        Ok(back[0].to_f64() > 0.5)
    }
}
