//! One process per GPU the way launchers start them (docs/scaling.md#launchers): the rank,
//! world size and local rank from the environment that `torchrun`, `mpirun` (Open MPI,
//! MPICH) or `srun` set ([`Launch`]), and NCCL's unique id handed from rank 0 to the others
//! over one TCP connection each ([`Rendezvous`]), so that no shared file is needed.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{NcclId, RankComm};
use crate::base::error::{Error, Result};
use crate::gpu::runtime::Gpu;

const OP: &str = "Rendezvous";

/// This process's place in a group of processes, as a launcher set it.
///
/// # Examples
/// ```no_run
/// use cuqr::distributed::Launch;
/// // under `torchrun --nproc-per-node 2 prog` or `mpirun -n 2 prog`
/// let me = Launch::from_env()?.expect("started by a launcher");
/// println!("rank {} of {}, GPU {}", me.rank, me.world, me.local_rank);
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// This process's rank, `0..world`.
    pub rank: usize,
    /// Processes in all.
    pub world: usize,
    /// This process's rank among those on its host: the GPU it takes.
    pub local_rank: usize,
    /// The launcher whose variables were read: `"torchrun"` (also any launcher setting
    /// `RANK` and `WORLD_SIZE`), `"openmpi"`, `"mpich"` or `"slurm"`.
    pub launcher: &'static str,
}

/// Each launcher's variables for the rank, the world size and the local rank, in the order
/// they are tried.
const LAUNCHERS: [(&str, &str, &str, &str); 4] = [
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    (
        "openmpi",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
    ),
    ("mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
];

impl Launch {
    /// Reads the first launcher's variables that are set (`RANK`/`WORLD_SIZE`/`LOCAL_RANK`
    /// of `torchrun`; `OMPI_COMM_WORLD_*` of Open MPI; `PMI_RANK`/`PMI_SIZE`/
    /// `MPI_LOCALRANKID` of MPICH and Intel MPI; `SLURM_PROCID`/`SLURM_NTASKS`/
    /// `SLURM_LOCALID` of `srun`). A missing local rank is taken as the rank (one host).
    /// `None` where no launcher's rank and world size are both set.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for a variable that is not a whole number, a world size of
    /// 0 or a rank not below it.
    pub fn from_env() -> Result<Option<Self>> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// [`Launch::from_env`] over any source of variables.
    pub(crate) fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        for (launcher, rank, world, local) in LAUNCHERS {
            let (Some(r), Some(w)) = (get(rank), get(world)) else {
                continue;
            };
            let num = |name: &str, v: &str| {
                v.trim().parse::<usize>().map_err(|_| Error::InvalidParam {
                    op: "Launch::from_env",
                    what: "environment",
                    why: format!("{name}={v:?} is not a whole number"),
                })
            };
            let (r, w) = (num(rank, &r)?, num(world, &w)?);
            if r >= w {
                return Err(Error::InvalidParam {
                    op: "Launch::from_env",
                    what: "environment",
                    why: format!("{rank}={r} is not below {world}={w}"),
                });
            }
            let local_rank = match get(local) {
                Some(v) => num(local, &v)?,
                None => r,
            };
            return Ok(Some(Self {
                rank: r,
                world: w,
                local_rank,
                launcher,
            }));
        }
        Ok(None)
    }
}

/// Where rank 0 hands NCCL's unique id to the other ranks: a TCP address every rank can
/// reach, on which rank 0 listens.
///
/// # Examples
/// ```no_run
/// use cuqr::distributed::{Launch, Rendezvous};
/// let me = Launch::from_env()?.expect("started by a launcher");
/// let id = Rendezvous::from_env()?.share_id(me.rank, me.world)?;  // same id on every rank
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendezvous {
    /// `host:port` of rank 0.
    pub addr: String,
    /// How long a rank waits for the others (rank 0) or for rank 0 (the others).
    pub timeout: Duration,
}

/// The first bytes of every message, so that a stray connection is told apart.
const MAGIC: &[u8; 8] = b"cuqr-id1";

impl Rendezvous {
    /// A rendezvous at `addr` (`host:port`) with a timeout.
    pub fn new(addr: impl Into<String>, timeout: Duration) -> Self {
        Self {
            addr: addr.into(),
            timeout,
        }
    }

    /// The address from `CUQR_RENDEZVOUS` (`host:port`) where set, otherwise
    /// `MASTER_ADDR` with the port after `MASTER_PORT` (`torchrun` keeps its own store on
    /// `MASTER_PORT`); the timeout from `CUQR_RENDEZVOUS_TIMEOUT` (seconds, default 300).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] where neither is set or a value does not parse.
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// [`Rendezvous::from_env`] over any source of variables.
    pub(crate) fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let bad = |why: String| Error::InvalidParam {
            op: OP,
            what: "environment",
            why,
        };
        let timeout = match get("CUQR_RENDEZVOUS_TIMEOUT") {
            Some(v) => match v.trim().parse::<f64>() {
                Ok(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
                _ => return Err(bad(format!("CUQR_RENDEZVOUS_TIMEOUT={v:?} is not seconds"))),
            },
            None => Duration::from_secs(300),
        };
        if let Some(a) = get("CUQR_RENDEZVOUS") {
            return Ok(Self::new(a.trim(), timeout));
        }
        match (get("MASTER_ADDR"), get("MASTER_PORT")) {
            (Some(host), Some(port)) => {
                let port: u16 = port
                    .trim()
                    .parse()
                    .ok()
                    .filter(|&p| p < u16::MAX)
                    .ok_or_else(|| bad(format!("MASTER_PORT={port:?} is not a port")))?;
                Ok(Self::new(format!("{}:{}", host.trim(), port + 1), timeout))
            }
            _ => Err(bad(
                "set CUQR_RENDEZVOUS=host:port (rank 0's host and a free port), or MASTER_ADDR and MASTER_PORT"
                    .into(),
            )),
        }
    }

    /// Makes NCCL's unique id on rank 0 and hands it to the other ranks; every rank of
    /// `world` calls this with its own rank and gets the same id.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] for `rank ≥ world`, an address that does not resolve, a
    /// rank 0 that cannot listen on it, a rank that arrives with another world size or
    /// twice, or the timeout passing; [`Error::NoDevice`] without NCCL (rank 0).
    pub fn share_id(&self, rank: usize, world: usize) -> Result<NcclId> {
        let raw = self.share_bytes(rank, world, || {
            let id = NcclId::new()?;
            let mut raw = [0u8; 128];
            for (x, &c) in raw.iter_mut().zip(id.0.internal().iter()) {
                *x = c as u8;
            }
            Ok(raw)
        })?;
        let mut id = [0 as core::ffi::c_char; 128];
        for (x, &c) in id.iter_mut().zip(raw.iter()) {
            *x = c as _;
        }
        Ok(NcclId(cudarc::nccl::Id::uninit(id)))
    }

    /// Hands the 128 bytes that rank 0's `make` returns to every rank.
    pub(crate) fn share_bytes(
        &self,
        rank: usize,
        world: usize,
        make: impl FnOnce() -> Result<[u8; 128]>,
    ) -> Result<[u8; 128]> {
        if rank >= world {
            return Err(self.fail(format!("rank {rank} of a world of {world}")));
        }
        if world == 1 {
            return make();
        }
        if rank == 0 {
            let listener = self.listen()?;
            let payload = make()?;
            self.serve(listener, world, &payload)?;
            Ok(payload)
        } else {
            self.fetch(rank, world)
        }
    }

    fn fail(&self, why: String) -> Error {
        Error::InvalidParam {
            op: OP,
            what: "addr",
            why,
        }
    }

    fn port(&self) -> Result<u16> {
        self.addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .ok_or_else(|| self.fail(format!("{:?} is not host:port", self.addr)))
    }

    /// Rank 0 listens on every interface at the address's port.
    fn listen(&self) -> Result<TcpListener> {
        let port = self.port()?;
        let l = TcpListener::bind(("0.0.0.0", port))
            .map_err(|e| self.fail(format!("rank 0 cannot listen on port {port}: {e}")))?;
        l.set_nonblocking(true)
            .map_err(|e| self.fail(format!("listening on port {port}: {e}")))?;
        Ok(l)
    }

    /// Rank 0: answers `world - 1` distinct ranks with the payload.
    fn serve(&self, listener: TcpListener, world: usize, payload: &[u8; 128]) -> Result<()> {
        let deadline = Instant::now() + self.timeout;
        let mut seen = vec![false; world];
        seen[0] = true;
        let mut left = world - 1;
        while left > 0 {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if Instant::now() > deadline {
                        let missing: Vec<usize> = (0..world).filter(|&r| !seen[r]).collect();
                        return Err(self.fail(format!(
                            "ranks {missing:?} did not arrive within {:?}",
                            self.timeout
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Err(e) => return Err(self.fail(format!("accepting a rank: {e}"))),
            };
            // a connection that is not a rank of this group is dropped, not fatal
            if let Some(r) = self.greet(stream, world, &seen, payload)? {
                seen[r] = true;
                left -= 1;
            }
        }
        Ok(())
    }

    /// Reads one rank's hello and answers it; `Some(rank)` once it has the payload.
    fn greet(
        &self,
        mut s: TcpStream,
        world: usize,
        seen: &[bool],
        payload: &[u8; 128],
    ) -> Result<Option<usize>> {
        let io = |e: std::io::Error| self.fail(format!("talking to a rank: {e}"));
        s.set_nonblocking(false).map_err(io)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(io)?;
        let mut hello = [0u8; 24];
        if s.read_exact(&mut hello).is_err() || &hello[..8] != MAGIC {
            return Ok(None);
        }
        let r = u64::from_le_bytes(hello[8..16].try_into().expect("8 bytes")) as usize;
        let w = u64::from_le_bytes(hello[16..24].try_into().expect("8 bytes")) as usize;
        if w == world && r > 0 && r < world && seen[r] {
            // a rank that already has this round's id, early for the next round: it
            // asks again once this round's listener has closed
            let mut later = MAGIC.to_vec();
            later.push(2);
            later.extend_from_slice(&[b' '; 128]);
            s.write_all(&later).map_err(io)?;
            return Ok(None);
        }
        let refusal = if w != world {
            Some(format!(
                "rank {r} says the world has {w} ranks, rank 0 says {world}"
            ))
        } else if r == 0 || r >= world {
            Some(format!("rank {r} is not a rank of a world of {world}"))
        } else {
            None
        };
        let mut reply = Vec::with_capacity(8 + 1 + 128);
        reply.extend_from_slice(MAGIC);
        match &refusal {
            None => {
                reply.push(1);
                reply.extend_from_slice(payload);
            }
            Some(why) => {
                reply.push(0);
                let mut msg = [b' '; 128];
                let b = why.as_bytes();
                msg[..b.len().min(128)].copy_from_slice(&b[..b.len().min(128)]);
                reply.extend_from_slice(&msg);
            }
        }
        s.write_all(&reply).map_err(io)?;
        match refusal {
            None => Ok(Some(r)),
            Some(why) => Err(self.fail(why)),
        }
    }

    /// A rank other than 0: connects (again until rank 0 listens) and reads the payload.
    fn fetch(&self, rank: usize, world: usize) -> Result<[u8; 128]> {
        let deadline = Instant::now() + self.timeout;
        let addrs: Vec<_> = self
            .addr
            .to_socket_addrs()
            .map_err(|e| self.fail(format!("{:?} does not resolve: {e}", self.addr)))?
            .collect();
        let mut hello = Vec::with_capacity(24);
        hello.extend_from_slice(MAGIC);
        hello.extend_from_slice(&(rank as u64).to_le_bytes());
        hello.extend_from_slice(&(world as u64).to_le_bytes());
        loop {
            for a in &addrs {
                let Ok(mut s) = TcpStream::connect_timeout(a, Duration::from_secs(2)) else {
                    continue;
                };
                // a connection that rank 0's previous round left in its listener's queue is
                // reset when that listener closes: ask again, as when no one listens
                let mut reply = [0u8; 8 + 1 + 128];
                if s.set_read_timeout(Some(self.timeout)).is_err()
                    || s.write_all(&hello).is_err()
                    || s.read_exact(&mut reply).is_err()
                {
                    continue;
                }
                if &reply[..8] != MAGIC {
                    return Err(self.fail(format!("{} is not a cuqr rendezvous", self.addr)));
                }
                let body: [u8; 128] = reply[9..].try_into().expect("128 bytes");
                if reply[8] == 2 {
                    continue;
                }
                if reply[8] != 1 {
                    let why = String::from_utf8_lossy(&body).trim_end().to_string();
                    return Err(self.fail(format!("rank 0 refused: {why}")));
                }
                return Ok(body);
            }
            if Instant::now() > deadline {
                return Err(self.fail(format!(
                    "rank 0 did not answer at {} within {:?}",
                    self.addr, self.timeout
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl RankComm {
    /// Joins the group that a launcher started ([`Launch::from_env`]), on the GPU of the
    /// local rank, with NCCL's unique id handed out by [`Rendezvous::from_env`]: under
    /// `torchrun`, `mpirun` or `srun` every process calls this and nothing else is needed
    /// (`srun` and `mpirun` need `CUQR_RENDEZVOUS=host:port` of rank 0's host).
    ///
    /// # Errors
    /// [`Error::InvalidParam`] where no launcher's variables are set or the rendezvous
    /// fails; as [`Gpu::new`] and [`RankComm::new`].
    ///
    /// # Examples
    /// ```no_run
    /// use cuqr::distributed::{DistQr, RankComm};
    /// use cuqr::{FactorParams, Mat, QPolicy};
    /// let comm = RankComm::from_env()?;    // torchrun --nproc-per-node 2 prog
    /// let a = Mat::<f64>::from_fn(5000, 64, |i, j| ((i * 7 + j * 13) % 29) as f64);
    /// let b = Mat::<f64>::from_fn(5000, 1, |i, _| i as f64);
    /// let qr = DistQr::factorize_rank(comm, a.as_ref(), b.as_ref(), QPolicy::None, FactorParams::default())?;
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn from_env() -> Result<Self> {
        let me = Launch::from_env()?.ok_or_else(|| Error::InvalidParam {
            op: "RankComm::from_env",
            what: "environment",
            why: "no launcher's RANK and WORLD_SIZE (or OMPI_COMM_WORLD_*, PMI_*, SLURM_*) set"
                .into(),
        })?;
        Self::from_launch(me, me.local_rank)
    }

    /// Joins as the rank `me` says on GPU `device` (usually `me.local_rank`), NCCL's id
    /// handed out by [`Rendezvous::from_env`] (a group of one makes its own and needs no
    /// address).
    ///
    /// # Errors
    /// As [`RankComm::from_env`].
    pub fn from_launch(me: Launch, device: usize) -> Result<Self> {
        let id = if me.world == 1 {
            NcclId::new()?
        } else {
            Rendezvous::from_env()?.share_id(me.rank, me.world)?
        };
        let gpu = Arc::new(Gpu::new(device)?);
        RankComm::new(&gpu, me.rank, me.world, id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn launchers_are_read_in_order_and_checked() {
        let t = Launch::from_vars(vars(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
        ]));
        assert_eq!(
            t.unwrap(),
            Some(Launch {
                rank: 3,
                world: 8,
                local_rank: 1,
                launcher: "torchrun"
            })
        );
        let o = Launch::from_vars(vars(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            (o.rank, o.world, o.local_rank, o.launcher),
            (1, 2, 1, "openmpi")
        );
        let s = Launch::from_vars(vars(&[
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "6"),
            ("SLURM_LOCALID", "1"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((s.rank, s.local_rank, s.launcher), (5, 1, "slurm"));
        assert_eq!(Launch::from_vars(vars(&[("RANK", "0")])).unwrap(), None);
        for bad in [
            [("RANK", "2"), ("WORLD_SIZE", "2")],
            [("RANK", "x"), ("WORLD_SIZE", "2")],
        ] {
            assert!(matches!(
                Launch::from_vars(vars(&bad)),
                Err(Error::InvalidParam { .. })
            ));
        }
    }

    #[test]
    fn rendezvous_address_from_the_environment() {
        let r = Rendezvous::from_vars(vars(&[("MASTER_ADDR", "node7"), ("MASTER_PORT", "29500")]))
            .unwrap();
        assert_eq!(r.addr, "node7:29501");
        assert_eq!(r.timeout, Duration::from_secs(300));
        let r = Rendezvous::from_vars(vars(&[
            ("CUQR_RENDEZVOUS", "10.0.0.1:4000"),
            ("MASTER_ADDR", "node7"),
            ("MASTER_PORT", "29500"),
            ("CUQR_RENDEZVOUS_TIMEOUT", "2.5"),
        ]))
        .unwrap();
        assert_eq!(r.addr, "10.0.0.1:4000");
        assert_eq!(r.timeout, Duration::from_millis(2500));
        assert!(Rendezvous::from_vars(vars(&[])).is_err());
        assert!(
            Rendezvous::from_vars(vars(&[("MASTER_ADDR", "a"), ("MASTER_PORT", "p")])).is_err()
        );
        assert!(Rendezvous::from_vars(vars(&[
            ("CUQR_RENDEZVOUS", "a:1"),
            ("CUQR_RENDEZVOUS_TIMEOUT", "-1")
        ]))
        .is_err());
    }

    /// A free port on the loopback interface (bound, read, released).
    fn free_port() -> u16 {
        TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    #[test]
    fn every_rank_gets_rank_zeros_bytes() {
        let world = 5;
        let rv = Rendezvous::new(
            format!("127.0.0.1:{}", free_port()),
            Duration::from_secs(20),
        );
        let mut payload = [0u8; 128];
        payload
            .iter_mut()
            .enumerate()
            .for_each(|(i, x)| *x = (i * 7 + 3) as u8);
        // the other ranks start first: they must wait for rank 0 to listen
        let got: Vec<[u8; 128]> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..world)
                .rev()
                .map(|r| {
                    let rv = rv.clone();
                    s.spawn(move || rv.share_bytes(r, world, || Ok(payload)).unwrap())
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(got.iter().all(|g| *g == payload));
    }

    /// Rounds one after the other on one address (as two states made in a row): a rank
    /// that is early for the second round waits for it instead of breaking the first.
    #[test]
    fn rounds_in_a_row_on_one_address() {
        let world = 4;
        let rv = Rendezvous::new(
            format!("127.0.0.1:{}", free_port()),
            Duration::from_secs(30),
        );
        let got: Vec<Vec<[u8; 128]>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..world)
                .map(|r| {
                    let rv = rv.clone();
                    s.spawn(move || {
                        (0..3u8)
                            .map(|round| {
                                if r == world - 1 {
                                    // the last rank is slow: rank 0 waits in each round
                                    std::thread::sleep(Duration::from_millis(30));
                                }
                                rv.share_bytes(r, world, || Ok([round; 128])).unwrap()
                            })
                            .collect()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for g in &got {
            assert_eq!(g, &vec![[0u8; 128], [1u8; 128], [2u8; 128]]);
        }
    }

    #[test]
    fn a_rank_with_another_world_size_is_refused_on_both_sides() {
        let rv = Rendezvous::new(
            format!("127.0.0.1:{}", free_port()),
            Duration::from_secs(20),
        );
        let (zero, one) = std::thread::scope(|s| {
            let a = {
                let rv = rv.clone();
                s.spawn(move || rv.share_bytes(0, 2, || Ok([1u8; 128])))
            };
            let b = {
                let rv = rv.clone();
                s.spawn(move || rv.share_bytes(1, 3, || unreachable!("only rank 0 makes")))
            };
            (a.join().unwrap(), b.join().unwrap())
        });
        let (Err(Error::InvalidParam { why: w0, .. }), Err(Error::InvalidParam { why: w1, .. })) =
            (zero, one)
        else {
            panic!("both sides must fail");
        };
        assert!(w0.contains("3 ranks"), "{w0}");
        assert!(
            w1.contains("rank 0 refused") && w1.contains("3 ranks"),
            "{w1}"
        );
    }

    #[test]
    fn a_group_of_one_needs_no_address() {
        let rv = Rendezvous::new("no-such-host.invalid:1", Duration::from_millis(100));
        assert_eq!(rv.share_bytes(0, 1, || Ok([9u8; 128])).unwrap(), [9u8; 128]);
    }

    #[test]
    fn missing_ranks_time_out_with_their_names() {
        let rv = Rendezvous::new(
            format!("127.0.0.1:{}", free_port()),
            Duration::from_millis(300),
        );
        let Err(Error::InvalidParam { why, .. }) = rv.share_bytes(0, 3, || Ok([0u8; 128])) else {
            panic!("must time out");
        };
        assert!(why.contains("[1, 2]"), "{why}");
        let late = Rendezvous::new(
            format!("127.0.0.1:{}", free_port()),
            Duration::from_millis(300),
        );
        assert!(late.share_bytes(1, 2, || unreachable!()).is_err());
        assert!(rv.share_bytes(2, 2, || unreachable!()).is_err());
    }
}
