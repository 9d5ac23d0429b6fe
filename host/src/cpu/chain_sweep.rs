//! The full kind's row deletion applied to Q in one sweep over its columns
//! (docs/algorithms.md#one-sweep-row-deletion): the p descending chains of neighbour
//! rotations that turn the deleted rows into [I, 0] run as a wavefront, each column of Q
//! read once and written once to its final place, the deleted rows and the first p
//! columns removed on the way.
#![forbid(unsafe_code)]

use faer::reborrow::ReborrowMut;
use faer::MatMut;
use rayon::prelude::*;

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::givens::{givens, rot_pair};
use crate::cpu::settings::{threads, PARALLEL_MIN_FLOPS};

/// Entries (of the carried columns and the column in flight) above which the sweep runs
/// over blocks of rows instead of whole columns: whole columns keep p + 2 of them in the
/// 2 MiB second-level cache of the build machine's cores.
const SWEEP_MAX_ENTRIES: usize = 1 << 17;

/// The rotations of the full kind's row deletion (docs/algorithms.md#row-deletion) as p
/// descending chains: chain i holds the (c, s) of the planes (k, k+1) for k = m−2 down to
/// i, generated on the deleted rows Z (p×m) alone, the rotations of row i applied to the
/// later rows as they are made (the rows above are already zero there).
pub(crate) struct DowndateChains<T> {
    m: usize,
    pairs: Vec<Vec<(T, T)>>,
}

impl<T: Scalar> DowndateChains<T> {
    /// Generates the chains on `z` (the deleted rows of Q, p×m), which ends as [Δ, 0].
    pub(crate) fn generate(z: &mut Mat<T>) -> Self {
        let (p, m) = (z.nrows(), z.ncols());
        let mut pairs = Vec::with_capacity(p);
        for i in 0..p {
            let mut chain = Vec::with_capacity(m.saturating_sub(i + 1));
            for j in (i + 1..m).rev() {
                let (c, s, rho) = givens(z[(i, j - 1)], z[(i, j)]);
                z[(i, j - 1)] = rho;
                z[(i, j)] = T::ZERO;
                for k in i + 1..p {
                    let (mut a, mut b) = (z[(k, j - 1)], z[(k, j)]);
                    rot_pair(c, s, &mut a, &mut b);
                    z[(k, j - 1)] = a;
                    z[(k, j)] = b;
                }
                chain.push((c, s));
            }
            pairs.push(chain);
        }
        Self { m, pairs }
    }

    /// The chains' count p.
    pub(crate) fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Chain i's rotation on the plane (k, k+1), i ≤ k ≤ m−2.
    fn pair(&self, i: usize, k: usize) -> (T, T) {
        self.pairs[i][self.m - 2 - k]
    }

    /// Every rotation, chain by chain, as (plane k, c, s).
    pub(crate) fn each(&self) -> impl Iterator<Item = (usize, usize, T, T)> + '_ {
        self.pairs.iter().enumerate().flat_map(move |(i, chain)| {
            chain
                .iter()
                .enumerate()
                .map(move |(t, &(c, s))| (i, self.m - 2 - t, c, s))
        })
    }

    /// Q ← (Q·G)(rows ∉ k0..k0+p, p..m) in Q's own buffer: the rotations applied once to
    /// every row, then the deleted rows (now [Δ, 0]) and the first p columns dropped.
    /// Whole columns stream through when p + 2 of them fit [`SWEEP_MAX_ENTRIES`] (one
    /// pass over Q, on one thread); otherwise blocks of rows take the sweep in parallel
    /// and the removal follows as a second pass.
    pub(crate) fn apply_and_remove(&self, q: &mut Mat<T>, k0: usize) {
        let (m, p) = (self.m, self.len());
        debug_assert_eq!((q.nrows(), q.ncols()), (m, m));
        if p == 0 {
            return;
        }
        if (p + 2) * m <= SWEEP_MAX_ENTRIES {
            self.sweep_columns(q, k0);
        } else {
            self.sweep_row_blocks(crate::cpu::dense::view_mut(q));
            q.remove_rows_cols(k0..k0 + p, 0..p);
        }
    }

    /// One step of the wavefront, column k of Q in `x` (any block of its rows): chain i
    /// takes the column k+i that chain i−1 gives it, rotates it against its carried
    /// column on the plane (k+i, k+i+1), keeps column k+i as its new carry and passes
    /// its finished column k+i+1 on. A chain meeting column m−1 takes it as its first
    /// carry. Returns whether the last chain gave a column (column k+p, final) in `x`.
    /// Four chains at a time keep the column in flight in registers between them.
    fn step(&self, k: usize, x: &mut [T], carries: &mut [T]) -> bool {
        let (rows, p) = (x.len(), self.len());
        // Chains 0..active rotate; chain `active`, if any, meets column m−1.
        let active = (self.m - 1 - k).min(p);
        let mut i = 0;
        while i + 4 <= active {
            let pairs = [0, 1, 2, 3].map(|t| self.pair(i + t, k + i + t));
            let group = &mut carries[i * rows..(i + 4) * rows];
            let (c0, rest) = group.split_at_mut(rows);
            let (c1, rest) = rest.split_at_mut(rows);
            let (c2, c3) = rest.split_at_mut(rows);
            for ((((xv, v0), v1), v2), v3) in x
                .iter_mut()
                .zip(c0.iter_mut())
                .zip(c1.iter_mut())
                .zip(c2.iter_mut())
                .zip(c3.iter_mut())
            {
                let mut a = *xv;
                for (cv, &(c, s)) in [v0, v1, v2, v3].into_iter().zip(&pairs) {
                    rotate_on(c, s, &mut a, cv);
                }
                *xv = a;
            }
            i += 4;
        }
        for (t, carry) in carries[i * rows..active * rows]
            .chunks_exact_mut(rows)
            .enumerate()
        {
            let (c, s) = self.pair(i + t, k + i + t);
            for (xv, cv) in x.iter_mut().zip(carry.iter_mut()) {
                rotate_on(c, s, xv, cv);
            }
        }
        if active < p {
            carries[active * rows..(active + 1) * rows].copy_from_slice(x);
            return false;
        }
        true
    }

    /// The sweep over whole columns, last first, with the removal fused: the finished
    /// column k+p becomes column k of the (m−p)×(m−p) result, written without the deleted
    /// rows once every old column its new place overlaps has been read.
    fn sweep_columns(&self, q: &mut Mat<T>, k0: usize) {
        let (m, p) = (self.m, self.len());
        let mk = m - p;
        let mut x = vec![T::ZERO; m];
        let mut carries = vec![T::ZERO; p * m];
        // Finished columns waiting for their place, newest last: (new index, entries).
        let mut waiting: std::collections::VecDeque<(usize, Vec<T>)> = Default::default();
        let mut spare: Vec<Vec<T>> = Vec::new();
        let data = q.as_mut_slice();
        for k in (0..m).rev() {
            x.copy_from_slice(&data[k * m..(k + 1) * m]);
            if self.step(k, &mut x, &mut carries) {
                let mut done = spare.pop().unwrap_or_else(|| vec![T::ZERO; mk]);
                done[..k0].copy_from_slice(&x[..k0]);
                done[k0..].copy_from_slice(&x[k0 + p..]);
                waiting.push_back((k, done));
            }
            // Old columns k.. are read: a new column t whose place [t·mk, (t+1)·mk)
            // starts at or after k·m overwrites nothing still to be read.
            while let Some((t, _)) = waiting.front() {
                if t * mk < k * m {
                    break;
                }
                let (t, done) = waiting.pop_front().expect("a waiting column");
                data[t * mk..(t + 1) * mk].copy_from_slice(&done);
                spare.push(done);
            }
        }
        debug_assert!(waiting.is_empty());
        q.truncate_to(mk, mk);
    }

    /// The sweep in place on blocks of rows of `q` (all m columns), in parallel: column
    /// k+p's final entries are written over column k+p (read long before); the first p
    /// columns' final entries stay in the carries (they are dropped).
    fn sweep_row_blocks(&self, mut q: MatMut<'_, T>) {
        let (m, p) = (self.m, self.len());
        let rows = (SWEEP_MAX_ENTRIES / (p + 2)).clamp(8, 4096) / 8 * 8;
        let mut blocks = Vec::new();
        while q.nrows() > rows {
            let (head, tail) = q.split_at_row_mut(rows);
            blocks.push(head);
            q = tail;
        }
        blocks.push(q);
        let run = |mut blk: MatMut<'_, T>| {
            let rb = blk.nrows();
            let mut x = vec![T::ZERO; rb];
            let mut carries = vec![T::ZERO; p * rb];
            for k in (0..m).rev() {
                x.copy_from_slice(column(blk.rb_mut(), k));
                if self.step(k, &mut x, &mut carries) {
                    column(blk.rb_mut(), k + p).copy_from_slice(&x);
                }
            }
        };
        let work = 6.0 * (p * m) as f64 * m as f64;
        if work < PARALLEL_MIN_FLOPS || threads() == 1 || blocks.len() == 1 {
            blocks.into_iter().for_each(run);
        } else {
            blocks.into_par_iter().for_each(run);
        }
    }
}

/// One rotation of a chain on the plane (k, k+1): `a` enters as column k and leaves as
/// the finished column k+1, `carry` enters as column k+1 and leaves as column k (the
/// arithmetic of `rot_pair`, as the row blocks of `ColumnTransforms` do it).
#[inline(always)]
fn rotate_on<T: Scalar>(c: T, s: T, a: &mut T, carry: &mut T) {
    let (x, y) = (*a, *carry);
    *a = c.mul_add(y, -(s * x));
    *carry = c.mul_add(x, s * y);
}

/// Column j of a column-major block, as a slice.
fn column<T: Scalar>(blk: MatMut<'_, T>, j: usize) -> &mut [T] {
    blk.col_mut(j)
        .try_as_col_major_mut()
        .expect("column-major storage")
        .as_slice_mut()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::givens::rot;

    fn random(m: usize, n: usize, seed: &mut u64) -> Mat<f64> {
        Mat::from_fn(m, n, |_, _| {
            *seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (*seed >> 11) as f64 / (1u64 << 53) as f64;
            (0.1 + 0.9 * u) * if *seed & 1 == 0 { 1.0 } else { -1.0 }
        })
    }

    /// Both sweeps equal the chains applied one rotation at a time to whole columns,
    /// then the rows and columns removed, bit for bit (the same operations per entry).
    #[test]
    fn sweeps_equal_the_rotations_one_by_one() {
        let mut seed = 11u64;
        for (m, p, k0) in [
            (9, 1, 0),
            (9, 1, 8),
            (13, 3, 4),
            (40, 7, 33),
            (37, 36, 0),
            (300, 5, 101),
            (2000, 80, 1500),
        ] {
            let q0 = random(m, m, &mut seed);
            let mut z = Mat::from_fn(p, m, |i, j| q0[(k0 + i, j)]);
            let chains = DowndateChains::generate(&mut z);
            let mut want = q0.clone();
            for (_, k, c, s) in chains.each() {
                let (x, y) = want.two_cols_mut(k, k + 1);
                rot(c, s, x, y);
            }
            want.remove_rows_cols(k0..k0 + p, 0..p);
            let mut a = q0.clone();
            chains.sweep_columns(&mut a, k0);
            assert!(a == want, "columns m={m} p={p} k0={k0}");
            let mut b = q0.clone();
            for t in [1, 2] {
                crate::cpu::settings::set_threads(t);
                b = q0.clone();
                chains.sweep_row_blocks(crate::cpu::dense::view_mut(&mut b));
                b.remove_rows_cols(k0..k0 + p, 0..p);
                crate::cpu::settings::set_threads(0);
                assert!(b == want, "row blocks m={m} p={p} k0={k0} threads {t}");
            }
            let mut c = q0.clone();
            chains.apply_and_remove(&mut c, k0);
            assert!(c == want && b == c);
        }
    }
}
