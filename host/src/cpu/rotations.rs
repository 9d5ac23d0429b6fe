//! Recorded column transformations (plane rotations and Householder reflectors acting
//! on columns) applied to a matrix in row blocks (docs/algorithms.md#blocked-column-transformations):
//! the rows are independent, so a block of rows small enough for the cache takes the
//! whole sequence before the next block is read, and the blocks run in parallel.
#![forbid(unsafe_code)]

use faer::reborrow::{Reborrow, ReborrowMut};
use faer::{MatMut, MatRef};
use rayon::prelude::*;

use crate::base::scalar::Scalar;
use crate::cpu::givens::rot_pair;
use crate::cpu::settings::{threads, PARALLEL_MIN_FLOPS};

/// One recorded transformation of columns.
#[derive(Clone, Copy, Debug)]
enum Step<T> {
    /// Columns (a, b): a ← c·a + s·b, b ← −s·a + c·b.
    Rotate { a: u32, b: u32, c: T, s: T },
    /// A chain of rotations of neighbouring columns, (k, k+1) for k = `lo`..`lo + len`
    /// in descending order of k (`down`) or ascending, their (c, s) in the shared
    /// buffer from `at`: the column shared by consecutive rotations stays in a register
    /// block between them (docs/algorithms.md#blocked-column-transformations).
    Chain {
        lo: u32,
        len: u32,
        at: usize,
        down: bool,
    },
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
    /// (c, s) of the chains' rotations.
    pairs: Vec<(T, T)>,
    /// The lowest and highest (relative) column any step touches.
    span: (usize, usize),
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
            pairs: Vec::new(),
            span: (usize::MAX, 0),
            first,
        }
    }

    /// Records the rotation of columns (a, b): a ← c·a + s·b, b ← −s·a + c·b.
    pub fn rotate(&mut self, a: usize, b: usize, c: T, s: T) {
        if s == T::ZERO && c == T::ONE {
            return;
        }
        debug_assert!(a >= self.first && b >= self.first);
        let (a, b) = ((a - self.first) as u32, (b - self.first) as u32);
        self.touch(a.min(b) as usize, a.max(b) as usize);
        if b == a + 1 {
            // Extends the last chain when this pair continues it.
            if let Some(Step::Chain { lo, len, down, .. }) = self.steps.last_mut() {
                let extends_down = (*down || *len == 1) && b == *lo;
                let extends_up = (!*down || *len == 1) && a == *lo + *len;
                if extends_down || extends_up {
                    *down = extends_down;
                    if extends_down {
                        *lo = a;
                    }
                    *len += 1;
                    self.pairs.push((c, s));
                    return;
                }
            }
            // A new chain of one; its direction is fixed by the next rotation.
            self.pairs.push((c, s));
            self.steps.push(Step::Chain {
                lo: a,
                len: 1,
                at: self.pairs.len() - 1,
                down: true,
            });
            return;
        }
        self.steps.push(Step::Rotate { a, b, c, s });
    }

    /// Records the reflector H = I − τ v vᵀ (v = [1; v_tail]) on column `head` and the
    /// contiguous columns `tail0..tail0 + v_tail.len()`.
    pub fn reflect(&mut self, head: usize, tail0: usize, v_tail: &[T], tau: T) {
        if tau == T::ZERO {
            return;
        }
        let at = self.tails.len();
        self.tails.extend_from_slice(v_tail);
        let (h, t0) = (head - self.first, tail0 - self.first);
        self.touch(h.min(t0), h.max(t0 + v_tail.len().max(1) - 1));
        debug_assert!(head >= self.first && tail0 >= self.first);
        self.steps.push(Step::Reflect {
            head: (head - self.first) as u32,
            tail0: (tail0 - self.first) as u32,
            at,
            len: v_tail.len() as u32,
            tau,
        });
    }

    /// Widens the span of touched columns to lo..=hi.
    fn touch(&mut self, lo: usize, hi: usize) {
        self.span = (self.span.0.min(lo), self.span.1.max(hi));
    }

    /// Applies the sequence, in order, to every row of `a` (a ← a·G₁G₂⋯): rows in
    /// blocks that stay in cache, the blocks spread over [`threads`] threads; only the
    /// columns the sequence touches are read.
    pub fn apply(&self, a: MatMut<'_, T>) {
        if self.steps.is_empty() || a.nrows() == 0 {
            return;
        }
        let (lo, hi) = self.span;
        let a = a.subcols_mut(lo, hi + 1 - lo);
        let nc = a.ncols();
        let rows = a.nrows();
        self.run_blocks(a, empty(rows), nc, |_, blk, _, buf| {
            copy_in(blk.rb(), buf);
            self.apply_block(buf, blk.nrows(), lo);
            copy_out(buf, blk.nrows(), 0, blk);
        });
    }

    /// Applies the sequence to [a extra] (the same rows; `extra`'s columns follow `a`'s),
    /// in place, without the two ever being stored side by side.
    pub fn apply_with(&self, a: MatMut<'_, T>, extra: MatMut<'_, T>) {
        assert_eq!(a.nrows(), extra.nrows());
        if self.steps.is_empty() || a.nrows() == 0 {
            return;
        }
        let (na, nc) = (a.ncols(), a.ncols() + extra.ncols());
        self.run_blocks(a, extra, nc, |_, blk, more, buf| {
            let rb = blk.nrows();
            copy_in(blk.rb(), &mut buf[..rb * na]);
            copy_in(more.rb(), &mut buf[rb * na..]);
            self.apply_block(buf, rb, 0);
            copy_out(&buf[..rb * na], rb, 0, blk);
            copy_out(&buf[rb * na..], rb, 0, more);
        });
    }

    /// Applies the sequence to [a x] where the column x (after `a`'s columns) is made
    /// block by block and dropped at the end: `make(first row, block of a, rows, x's
    /// entries)` fills x's rows of the block from a's (copied, column-major). Q₁ is then
    /// read once for the new column and the rotations together.
    pub fn apply_with_made_column(
        &self,
        a: MatMut<'_, T>,
        make: impl Fn(usize, &[T], usize, &mut [T]) + Sync,
    ) {
        if self.steps.is_empty() {
            return;
        }
        let rows = a.nrows();
        self.made_column_pass(a, empty(rows), make);
    }

    /// [`ColumnTransforms::apply_with_made_column`] with the made column kept: its rows
    /// after the sequence go to `out` (one column, `a`'s rows). Thin row deletion keeps
    /// it as Q₁′'s last column (docs/algorithms.md#thin-row-deletion).
    pub fn apply_with_made_column_into(
        &self,
        a: MatMut<'_, T>,
        out: MatMut<'_, T>,
        make: impl Fn(usize, &[T], usize, &mut [T]) + Sync,
    ) {
        assert_eq!((out.nrows(), out.ncols()), (a.nrows(), 1));
        self.made_column_pass(a, out, make);
    }

    /// The pass of both: x made block by block after `a`'s columns, the sequence applied,
    /// `a` written back and x into `out` (one column, or none to drop it).
    fn made_column_pass(
        &self,
        a: MatMut<'_, T>,
        out: MatMut<'_, T>,
        make: impl Fn(usize, &[T], usize, &mut [T]) + Sync,
    ) {
        if a.nrows() == 0 {
            return;
        }
        let na = a.ncols();
        self.run_blocks(a, out, na + 1, |r0, blk, more, buf| {
            let rb = blk.nrows();
            let (head, x) = buf.split_at_mut(rb * na);
            copy_in(blk.rb(), head);
            make(r0, head, rb, &mut x[..rb]);
            self.apply_block(buf, rb, 0);
            copy_out(&buf[..rb * na], rb, 0, blk);
            copy_out(&buf[rb * na..], rb, 0, more);
        });
    }

    /// Calls `block(first row, rows of dst, rows of extra, buffer)` for every block of
    /// rows of `dst` and `extra`,
    /// the blocks split over [`threads`] threads when the work is large enough.
    fn run_blocks(
        &self,
        mut dst: MatMut<'_, T>,
        mut extra: MatMut<'_, T>,
        nc: usize,
        block: impl Fn(usize, MatMut<'_, T>, MatMut<'_, T>, &mut [T]) + Sync,
    ) {
        let rows = rows_per_block(nc);
        let work = 6.0
            * dst.nrows() as f64
            * (self.pairs.len() + self.steps.len() + self.tails.len()) as f64;
        let nthreads = if work < PARALLEL_MIN_FLOPS {
            1
        } else {
            threads().min(dst.nrows().div_ceil(rows)).max(1)
        };
        let run = |r0: usize, mut part: MatMut<'_, T>, mut more: MatMut<'_, T>| {
            let mut buf = vec![T::ZERO; rows * nc];
            let mut i = 0;
            while i < part.nrows() {
                let rb = rows.min(part.nrows() - i);
                block(
                    r0 + i,
                    part.rb_mut().subrows_mut(i, rb),
                    more.rb_mut().subrows_mut(i, rb),
                    &mut buf[..rb * nc],
                );
                i += rb;
            }
        };
        if nthreads == 1 {
            run(0, dst, extra);
            return;
        }
        // Row ranges of about equal size, whole blocks each.
        let per = dst.nrows().div_ceil(rows).div_ceil(nthreads) * rows;
        let mut parts = Vec::new();
        let mut r0 = 0;
        while dst.nrows() > per {
            let (head, tail) = dst.split_at_row_mut(per);
            let (more, rest) = extra.split_at_row_mut(per);
            parts.push((r0, head, more));
            r0 += per;
            dst = tail;
            extra = rest;
        }
        parts.push((r0, dst, extra));
        parts
            .into_par_iter()
            .for_each(|(r0, part, more)| run(r0, part, more));
    }

    /// The sequence on one block of `rb` rows held column-major in `buf`.
    fn apply_block(&self, buf: &mut [T], rb: usize, shift: usize) {
        let mut acc = vec![T::ZERO; rb];
        for step in &self.steps {
            match *step {
                Step::Chain { lo, len, at, down } => {
                    let (lo, len) = (lo as usize - shift, len as usize);
                    let pairs = &self.pairs[at..at + len];
                    // LANES rows at a time with the carried column in registers, then
                    // the rows left over one by one.
                    let mut r = 0;
                    while r + LANES <= rb {
                        chain_rows::<T, LANES>(buf, rb, r, lo, pairs, down);
                        r += LANES;
                    }
                    // Blocks of 8 rows (wide matrices) still take the rotations a
                    // SIMD vector at a time.
                    while r + HALF_LANES <= rb {
                        chain_rows::<T, HALF_LANES>(buf, rb, r, lo, pairs, down);
                        r += HALF_LANES;
                    }
                    while r < rb {
                        chain_rows::<T, 1>(buf, rb, r, lo, pairs, down);
                        r += 1;
                    }
                }
                Step::Rotate { a, b, c, s } => {
                    let (x, y) = two_cols(buf, rb, a as usize - shift, b as usize - shift);
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
                    let (head, tail0, len) =
                        (head as usize - shift, tail0 as usize - shift, len as usize);
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
    }
}

/// An empty (no column) matrix of `rows` rows.
fn empty<'a, T: Scalar>(rows: usize) -> MatMut<'a, T> {
    MatMut::from_column_major_slice_mut(&mut [], rows, 0)
}

/// Copies the block `src` into `buf` (column-major, contiguous).
fn copy_in<T: Scalar>(src: MatRef<'_, T>, buf: &mut [T]) {
    let rb = src.nrows();
    for j in 0..src.ncols() {
        let col = src.col(j).try_as_col_major().expect("column-major storage");
        buf[j * rb..(j + 1) * rb].copy_from_slice(col.as_slice());
    }
}

/// Copies `buf`'s columns from `skip` on into the block `dst`.
fn copy_out<T: Scalar>(buf: &[T], rb: usize, skip: usize, mut dst: MatMut<'_, T>) {
    for j in 0..dst.ncols() {
        let col = dst
            .rb_mut()
            .col_mut(j)
            .try_as_col_major_mut()
            .expect("column-major storage");
        col.as_slice_mut()
            .copy_from_slice(&buf[(j + skip) * rb..(j + skip + 1) * rb]);
    }
}

/// Rows per block: about 256 KiB of f64 per block (in L2; a pair of columns of it stays
/// in L1), at least 8 rows (a SIMD vector or two per column) and at most 256.
fn rows_per_block(ncols: usize) -> usize {
    (32768 / ncols.max(1)).clamp(8, 256) / 8 * 8
}

/// Rows a chain handles together (independent carries, enough to hide the FMA latency).
const LANES: usize = 16;
/// The narrower width for blocks with fewer than [`LANES`] rows left.
const HALF_LANES: usize = 8;

/// A chain of rotations on neighbouring columns lo..=lo+len (len = `pairs.len()`) of rows
/// r..r+W of the column-major `buf` (rb rows), the carried column held in registers.
/// `down`: planes (k, k+1) for k = lo+len−1 down to lo, column k's new value carried into
/// the next rotation as its second column; otherwise k = lo up to lo+len−1, column k+1's
/// new value carried as its first. The arithmetic of [`rot_pair`], entry by entry.
#[inline(always)]
fn chain_rows<T: Scalar, const W: usize>(
    buf: &mut [T],
    rb: usize,
    r: usize,
    lo: usize,
    pairs: &[(T, T)],
    down: bool,
) {
    let len = pairs.len();
    let at = |k: usize| k * rb + r;
    let mut carry = [T::ZERO; W];
    let first = if down { lo + len } else { lo };
    carry.copy_from_slice(&buf[at(first)..at(first) + W]);
    for (i, &(c, s)) in pairs.iter().enumerate() {
        // The column read and the column written.
        let (read, write) = if down {
            (lo + len - 1 - i, lo + len - i)
        } else {
            (lo + i + 1, lo + i)
        };
        let mut x = [T::ZERO; W];
        x.copy_from_slice(&buf[at(read)..at(read) + W]);
        let out = &mut buf[at(write)..at(write) + W];
        for ((o, cv), &xv) in out.iter_mut().zip(carry.iter_mut()).zip(&x) {
            if down {
                let (a, b) = (xv, *cv);
                *o = c.mul_add(b, -(s * a));
                *cv = c.mul_add(a, s * b);
            } else {
                let (a, b) = (*cv, xv);
                *o = c.mul_add(a, s * b);
                *cv = c.mul_add(b, -(s * a));
            }
        }
    }
    let last = if down { lo } else { lo + len };
    buf[at(last)..at(last) + W].copy_from_slice(&carry);
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
            } else if k % 5 == 1 {
                // a chain down, then one up, of neighbouring columns
                let top = 3 + k % (n - 8);
                let pairs: Vec<usize> = if k % 2 == 0 {
                    (top - 3..top + 4).rev().collect()
                } else {
                    (top - 3..top + 4).collect()
                };
                for a in pairs {
                    let th = next();
                    let (c, s) = (th.cos(), th.sin());
                    ops.rotate(a, a + 1, c, s);
                    let (x, y) = reference.two_cols_mut(a, a + 1);
                    rot(c, s, x, y);
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
