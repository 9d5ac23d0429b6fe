//! Recorded column transformations (plane rotations and Householder reflectors acting
//! on columns) applied to a matrix in row blocks (docs/algorithms.md#blocked-column-transformations):
//! the rows are independent, so a block of rows small enough for the cache takes the
//! whole sequence before the next block is read, and the blocks run in parallel.
#![forbid(unsafe_code)]

use faer::reborrow::ReborrowMut;
use faer::MatMut;
use rayon::prelude::*;

use crate::base::scalar::Scalar;
use crate::cpu::givens::rot_pair;
use crate::cpu::settings::threads;

/// One recorded transformation of columns.
#[derive(Clone, Copy, Debug)]
enum Step<T> {
    /// Columns (a, b): a ← c·a + s·b, b ← −s·a + c·b.
    Rotate { a: u32, b: u32, c: T, s: T },
    /// H = I − τ v vᵀ on columns `head`, then `cols[..]` (v(0) = 1, its tail stored
    /// in the shared buffer at `at..at + len`) (x ← x·H, i.e. H on each row).
    Reflect {
        head: u32,
        tail0: u32,
        at: usize,
        len: u32,
        tau: T,
    },
}

/// A sequence of column transformations, recorded as they are generated and applied
/// later to every row of a matrix by [`ColumnTransforms::apply`].
#[derive(Clone, Debug, Default)]
pub struct ColumnTransforms<T> {
    steps: Vec<Step<T>>,
    tails: Vec<T>,
    /// Column indices are recorded relative to this one: [`ColumnTransforms::apply`]
    /// then takes the columns from here on.
    first: usize,
}

impl<T: Scalar> ColumnTransforms<T> {
    /// An empty sequence.
    pub fn new() -> Self {
        Self::from_column(0)
    }

    /// An empty sequence that touches no column before `first`: indices are recorded
    /// relative to it and [`ColumnTransforms::apply`] is given the columns from `first` on.
    pub fn from_column(first: usize) -> Self {
        Self {
            steps: Vec::new(),
            tails: Vec::new(),
            first,
        }
    }

    /// Records the rotation of columns (a, b): a ← c·a + s·b, b ← −s·a + c·b.
    pub fn rotate(&mut self, a: usize, b: usize, c: T, s: T) {
        if s == T::ZERO && c == T::ONE {
            return;
        }
        debug_assert!(a >= self.first && b >= self.first);
        self.steps.push(Step::Rotate {
            a: (a - self.first) as u32,
            b: (b - self.first) as u32,
            c,
            s,
        });
    }

    /// Records the reflector H = I − τ v vᵀ (v = [1; v_tail]) on column `head` and the
    /// contiguous columns `tail0..tail0 + v_tail.len()`.
    pub fn reflect(&mut self, head: usize, tail0: usize, v_tail: &[T], tau: T) {
        if tau == T::ZERO {
            return;
        }
        let at = self.tails.len();
        self.tails.extend_from_slice(v_tail);
        debug_assert!(head >= self.first && tail0 >= self.first);
        self.steps.push(Step::Reflect {
            head: (head - self.first) as u32,
            tail0: (tail0 - self.first) as u32,
            at,
            len: v_tail.len() as u32,
            tau,
        });
    }

    /// Applies the sequence, in order, to every row of `a` (a ← a·G₁G₂⋯): rows in
    /// blocks that stay in cache, the blocks spread over [`threads`] threads.
    pub fn apply(&self, a: MatMut<'_, T>) {
        if self.steps.is_empty() || a.nrows() == 0 {
            return;
        }
        let rows = rows_per_block(a.ncols());
        let nthreads = threads().min(a.nrows().div_ceil(rows)).max(1);
        if nthreads == 1 {
            let mut buf = vec![T::ZERO; rows * a.ncols()];
            let mut a = a;
            let mut r0 = 0;
            while r0 < a.nrows() {
                let rb = rows.min(a.nrows() - r0);
                self.apply_block(a.rb_mut().subrows_mut(r0, rb), &mut buf);
                r0 += rb;
            }
        } else {
            a.par_row_partition_mut(nthreads).for_each(|mut part| {
                let mut buf = vec![T::ZERO; rows * part.ncols()];
                let mut r0 = 0;
                while r0 < part.nrows() {
                    let rb = rows.min(part.nrows() - r0);
                    self.apply_block(part.rb_mut().subrows_mut(r0, rb), &mut buf);
                    r0 += rb;
                }
            });
        }
    }

    /// The sequence on one block of rows, copied into `buf` (column-major, contiguous).
    fn apply_block(&self, mut blk: MatMut<'_, T>, buf: &mut [T]) {
        let (rb, nc) = (blk.nrows(), blk.ncols());
        let buf = &mut buf[..rb * nc];
        for j in 0..nc {
            for (i, x) in buf[j * rb..(j + 1) * rb].iter_mut().enumerate() {
                *x = blk[(i, j)];
            }
        }
        let mut acc = vec![T::ZERO; rb];
        for step in &self.steps {
            match *step {
                Step::Rotate { a, b, c, s } => {
                    let (x, y) = two_cols(buf, rb, a as usize, b as usize);
                    for (u, v) in x.iter_mut().zip(y.iter_mut()) {
                        rot_pair(c, s, u, v);
                    }
                }
                Step::Reflect {
                    head,
                    tail0,
                    at,
                    len,
                    tau,
                } => {
                    let (head, tail0, len) = (head as usize, tail0 as usize, len as usize);
                    let v = &self.tails[at..at + len];
                    // w = x·v over the rows; x −= τ w vᵀ.
                    acc.copy_from_slice(&buf[head * rb..(head + 1) * rb]);
                    for (k, &vk) in v.iter().enumerate() {
                        let col = &buf[(tail0 + k) * rb..(tail0 + k + 1) * rb];
                        for (w, &x) in acc.iter_mut().zip(col) {
                            *w = vk.mul_add(x, *w);
                        }
                    }
                    for w in acc.iter_mut() {
                        *w *= tau;
                    }
                    for (x, &w) in buf[head * rb..(head + 1) * rb].iter_mut().zip(&acc) {
                        *x -= w;
                    }
                    for (k, &vk) in v.iter().enumerate() {
                        let col = &mut buf[(tail0 + k) * rb..(tail0 + k + 1) * rb];
                        for (x, &w) in col.iter_mut().zip(&acc) {
                            *x = (-vk).mul_add(w, *x);
                        }
                    }
                }
            }
        }
        for j in 0..nc {
            for (i, x) in buf[j * rb..(j + 1) * rb].iter().enumerate() {
                blk[(i, j)] = *x;
            }
        }
    }
}

/// Rows per block: about 32 KiB of f64 per block for wide matrices, at least 8 rows
/// (one or two SIMD vectors per column) and at most 64.
fn rows_per_block(ncols: usize) -> usize {
    (4096 / ncols.max(1)).clamp(8, 64) / 8 * 8
}

/// Columns a ≠ b of the column-major `buf` (rb rows), both mutable.
fn two_cols<T>(buf: &mut [T], rb: usize, a: usize, b: usize) -> (&mut [T], &mut [T]) {
    debug_assert_ne!(a, b);
    if a < b {
        let (lo, hi) = buf.split_at_mut(b * rb);
        (&mut lo[a * rb..(a + 1) * rb], &mut hi[..rb])
    } else {
        let (lo, hi) = buf.split_at_mut(a * rb);
        let (y, x) = (&mut lo[b * rb..(b + 1) * rb], &mut hi[..rb]);
        (x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::mat::Mat;
    use crate::cpu::givens::rot;
    use crate::cpu::householder::apply_left_split;

    /// The blocked, parallel pass equals the transformations applied one at a time to
    /// whole columns, bit for bit (the same operations in the same order per entry).
    #[test]
    fn blocked_pass_equals_column_by_column() {
        let (m, n) = (203, 37);
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            ((seed >> 11) as f64 / (1u64 << 53) as f64) - 0.5
        };
        let a0 = Mat::from_fn(m, n, |_, _| next());
        let mut ops = ColumnTransforms::new();
        let mut reference = a0.clone();
        for k in 0..300 {
            if k % 7 == 3 {
                let head = k % (n - 6);
                let tail: Vec<f64> = (0..5).map(|_| next()).collect();
                let tau = 1.3;
                ops.reflect(head, head + 1, &tail, tau);
                for i in 0..m {
                    let mut h = reference[(i, head)];
                    let mut row: Vec<f64> = (0..5).map(|t| reference[(i, head + 1 + t)]).collect();
                    apply_left_split(&tail, tau, &mut h, &mut row);
                    reference[(i, head)] = h;
                    for t in 0..5 {
                        reference[(i, head + 1 + t)] = row[t];
                    }
                }
            } else {
                let (a, b) = (k % n, (k * 5 + 1) % n);
                if a == b {
                    continue;
                }
                let th = next();
                let (c, s) = (th.cos(), th.sin());
                ops.rotate(a, b, c, s);
                let (x, y) = if a < b {
                    let (x, y) = reference.two_cols_mut(a, b);
                    (x, y)
                } else {
                    let (y, x) = reference.two_cols_mut(b, a);
                    (x, y)
                };
                rot(c, s, x, y);
            }
        }
        for t in [1, 2, 3] {
            crate::cpu::settings::set_threads(t);
            let mut a = a0.clone();
            ops.apply(crate::cpu::dense::view_mut(&mut a));
            crate::cpu::settings::set_threads(0);
            assert!(a == reference, "threads {t}");
        }
    }
}
