//! The launch format of the GPU rotation-chain kernel (gpu-kernels/src/rotation_chain.rs;
//! docs/algorithms.md#rotation-chains-on-the-gpu): a sequence of unitary 2×2 rotations,
//! each applied as Q ← Q·Gᴴ to two columns of a column-major Q, encoded so that one
//! thread per row of Q reads and writes each column once per run of rotations that share
//! a column with their predecessor.
//!
//! A *segment* is a run in which every rotation shares one column (the *carried* one)
//! with the rotation before it and touches one column that no earlier rotation of the
//! segment touched (the *new* one). Neighbour chains ((i − 1, i) upwards or downwards)
//! and pivot chains ((j, t) for a fixed t) are one segment each; any other sequence is
//! cut into segments where the property breaks. The kernel loads a segment's first
//! carried column, then per rotation the new column only (several ahead, since none was
//! written earlier in the segment), keeps the column the next rotation shares in a
//! register and writes the other back.

use crate::base::field::Field;
use crate::base::scalar::Scalar;

/// The bits of an op word that hold the new column (columns < 2³⁰).
pub const COL_MASK: u32 = (1 << 30) - 1;
/// Op flag: the carried column is the rotation's `top` (else its `bot`).
pub const CARRY_TOP: u32 = 1 << 30;
/// Op flag: after the rotation the thread keeps `top` (writes `bot` back), else the
/// reverse.
pub const KEEP_TOP: u32 = 1 << 31;

/// One rotation: columns (`top`, `bot`) of Q become (c·q_top + s̄·q_bot, c·q_bot − s·q_top),
/// which is Q·Gᴴ for G = [[c, s], [−s̄, c]] acting on rows (`top`, `bot`) of R.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChainRotation<T: Field> {
    /// First column of the pair.
    pub top: usize,
    /// Second column of the pair (≠ `top`).
    pub bot: usize,
    /// The real cosine.
    pub c: T::Real,
    /// The sine.
    pub s: T,
}

impl<T: Field> ChainRotation<T> {
    /// (a, b) ← (c·a + s̄·b, c·b − s·a): the rotation on one row's two entries.
    #[inline(always)]
    pub fn apply_to_pair(&self, a: T, b: T) -> (T, T) {
        (
            a.scale(self.c) + self.s.conj() * b,
            b.scale(self.c) - self.s * a,
        )
    }

    /// Whether the rotation is exactly the identity (c = 1, s = 0), which changes nothing.
    pub fn is_identity(&self) -> bool {
        self.c == <T::Real as Scalar>::ONE && self.s == T::zero()
    }
}

/// A rotation sequence in the kernel's format.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EncodedChain<T: Field> {
    /// Per rotation: the new column | [`CARRY_TOP`] | [`KEEP_TOP`].
    pub ops: Vec<u32>,
    /// Per rotation: c.
    pub c: Vec<T::Real>,
    /// Per rotation: s.
    pub s: Vec<T>,
    /// [start₀, seed₀, start₁, seed₁, …, end]: segment g holds ops start_g .. start_{g+1}
    /// (the last ends at `end` = ops.len()) and begins by loading column seed_g.
    pub segs: Vec<u32>,
}

impl<T: Field> EncodedChain<T> {
    /// Number of segments.
    pub fn segments(&self) -> usize {
        self.segs.len() / 2
    }
    /// Whether there is nothing to apply.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// Encodes `rots` (applied in order) for the kernel, dropping exact identities.
///
/// # Panics
/// If a rotation's two columns coincide or a column is ≥ 2³⁰ (cuqr bugs).
pub fn encode<T: Field>(rots: &[ChainRotation<T>]) -> EncodedChain<T> {
    let live: Vec<&ChainRotation<T>> = rots.iter().filter(|r| !r.is_identity()).collect();
    let mut out = EncodedChain {
        ops: Vec::with_capacity(live.len()),
        c: Vec::with_capacity(live.len()),
        s: Vec::with_capacity(live.len()),
        segs: Vec::new(),
    };
    // touched[col] == segment stamp ⇔ col was touched in the current segment
    let width = live.iter().map(|r| r.top.max(r.bot) + 1).max().unwrap_or(0);
    let mut touched = vec![0u32; width];
    let mut stamp = 0u32;
    let mut carry: Option<usize> = None;
    for (idx, r) in live.iter().enumerate() {
        assert!(r.top != r.bot, "rotation on one column");
        assert!(r.top.max(r.bot) <= COL_MASK as usize, "column beyond 2^30");
        let continues = |cc: usize, other: usize| cc != other && touched[other] != stamp;
        let (carry_top, new_col) = match carry {
            Some(cc) if cc == r.top && continues(cc, r.bot) => (true, r.bot),
            Some(cc) if cc == r.bot && continues(cc, r.top) => (false, r.top),
            _ => {
                stamp += 1;
                out.segs.push(out.ops.len() as u32);
                out.segs.push(r.top as u32);
                touched[r.top] = stamp;
                (true, r.bot)
            }
        };
        touched[new_col] = stamp;
        let keep_top = match live.get(idx + 1) {
            Some(n) => n.top == r.top || n.bot == r.top,
            None => true,
        };
        carry = Some(if keep_top { r.top } else { r.bot });
        let mut op = new_col as u32;
        if carry_top {
            op |= CARRY_TOP;
        }
        if keep_top {
            op |= KEEP_TOP;
        }
        out.ops.push(op);
        out.c.push(r.c);
        out.s.push(r.s);
    }
    if !out.ops.is_empty() {
        out.segs.push(out.ops.len() as u32);
    }
    out
}

/// The kernel's algorithm on the host, one row at a time: `chain` applied to the
/// column-major `q` (`rows` rows, leading dimension `ld`). Reads and writes exactly what
/// the kernel does, in its order, so the encoding can be checked without a GPU.
#[cfg(test)]
pub fn replay<T: Field>(chain: &EncodedChain<T>, q: &mut [T], rows: usize, ld: usize) {
    for i in 0..rows {
        for g in 0..chain.segments() {
            let (l0, seed, l1) = (
                chain.segs[2 * g] as usize,
                chain.segs[2 * g + 1] as usize,
                chain.segs[2 * g + 2] as usize,
            );
            let mut carry_col = seed;
            let mut carry = q[i + carry_col * ld];
            for l in l0..l1 {
                let op = chain.ops[l];
                let new_col = (op & COL_MASK) as usize;
                let y = q[i + new_col * ld];
                let rot = ChainRotation {
                    top: 0,
                    bot: 1,
                    c: chain.c[l],
                    s: chain.s[l],
                };
                let (top, bot, a, b) = if op & CARRY_TOP != 0 {
                    (carry_col, new_col, carry, y)
                } else {
                    (new_col, carry_col, y, carry)
                };
                let (a, b) = rot.apply_to_pair(a, b);
                if op & KEEP_TOP != 0 {
                    q[i + bot * ld] = b;
                    (carry, carry_col) = (a, top);
                } else {
                    q[i + top * ld] = a;
                    (carry, carry_col) = (b, bot);
                }
            }
            q[i + carry_col * ld] = carry;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::field::c64;

    fn rot(top: usize, bot: usize, k: usize) -> ChainRotation<c64> {
        let th = 0.3 + 0.17 * k as f64;
        ChainRotation {
            top,
            bot,
            c: th.cos(),
            s: c64::new(th.sin() * 0.6, th.sin() * 0.8),
        }
    }

    /// Each rotation applied on its own, column pair by column pair.
    fn direct(rots: &[ChainRotation<c64>], q: &mut [c64], rows: usize, ld: usize) {
        for r in rots {
            for i in 0..rows {
                let (a, b) = r.apply_to_pair(q[i + r.top * ld], q[i + r.bot * ld]);
                q[i + r.top * ld] = a;
                q[i + r.bot * ld] = b;
            }
        }
    }

    fn check(rots: &[ChainRotation<c64>], cols: usize, want_segments: usize) {
        let (rows, ld) = (5, 7);
        let q0: Vec<c64> = (0..ld * cols)
            .map(|e| c64::new((e as f64 * 0.37).sin(), (e as f64 * 0.91).cos()))
            .collect();
        let mut want = q0.clone();
        direct(rots, &mut want, rows, ld);
        let enc = encode(rots);
        let mut got = q0.clone();
        replay(&enc, &mut got, rows, ld);
        assert_eq!(got, want);
        assert_eq!(enc.segments(), want_segments, "{:?}", enc.segs);
    }

    #[test]
    fn neighbour_and_pivot_chains_are_one_segment() {
        let up: Vec<_> = (1..9).rev().map(|i| rot(i - 1, i, i)).collect();
        check(&up, 9, 1);
        let down: Vec<_> = (0..8).map(|i| rot(i, i + 1, i)).collect();
        check(&down, 9, 1);
        let pivot: Vec<_> = (0..8).map(|j| rot(j, 8, j)).collect();
        check(&pivot, 9, 1);
        let pivot_top: Vec<_> = (0..8).rev().map(|j| rot(8, j, j)).collect();
        check(&pivot_top, 9, 1);
    }

    #[test]
    fn a_column_met_again_starts_a_segment() {
        // up then down over the same columns (the rank-one update's two sweeps)
        let mut both: Vec<_> = (1..6).rev().map(|i| rot(i - 1, i, i)).collect();
        both.extend((0..5).map(|i| rot(i, i + 1, 10 + i)));
        check(&both, 6, 2);
        // the same pair twice, and unrelated pairs
        check(
            &[rot(2, 3, 1), rot(2, 3, 2), rot(0, 1, 3), rot(4, 1, 4)],
            5,
            3,
        );
    }

    #[test]
    fn identities_are_dropped() {
        let mut rots: Vec<_> = (0..4).map(|i| rot(i, i + 1, i)).collect();
        rots[2].c = 1.0;
        rots[2].s = c64::new(0.0, 0.0);
        let enc = encode(&rots);
        assert_eq!(enc.ops.len(), 3);
        check(&rots, 5, 2);
        assert!(encode::<c64>(&[]).is_empty());
        assert_eq!(encode::<c64>(&[]).segments(), 0);
    }

    #[test]
    fn random_sequences_replay_exactly() {
        let mut x = 12345u64;
        let mut next = |k: usize| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % k as u64) as usize
        };
        for case in 0..200 {
            let cols = 2 + next(9);
            let len = next(20);
            let rots: Vec<_> = (0..len)
                .map(|k| {
                    let a = next(cols);
                    let b = (a + 1 + next(cols - 1)) % cols;
                    rot(a, b, k + case)
                })
                .collect();
            let (rows, ld) = (3, 4);
            let q0: Vec<c64> = (0..ld * cols)
                .map(|e| c64::new(e as f64 + 0.5, -(e as f64)))
                .collect();
            let mut want = q0.clone();
            direct(&rots, &mut want, rows, ld);
            let mut got = q0;
            replay(&encode(&rots), &mut got, rows, ld);
            assert_eq!(got, want, "case {case}");
        }
    }
}
