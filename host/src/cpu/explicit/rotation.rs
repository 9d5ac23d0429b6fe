//! Unitary 2×2 rotations G = [[c, s], [−s̄, c]] (c real) that zero one entry, and their
//! application: G to two rows of R, Gᴴ to the same two columns of Q
//! (docs/algorithms.md#complex-rotations).

#[cfg(test)]
use super::trapezoid::Trapezoid;
use crate::base::field::Field;
use crate::base::rotation_chain::ChainRotation;
use crate::base::scalar::Scalar;

/// A rotation acting on the pair (`top`, `bot`) of rows of R (columns of Q).
#[derive(Clone, Copy, Debug)]
pub(super) struct Rotation<T: Field> {
    pub top: usize,
    pub bot: usize,
    c: T::Real,
    s: T,
}

impl<T: Field> Rotation<T> {
    /// The rotation with G·[f; g] = [ρ; 0], and ρ (|ρ| = ‖(f, g)‖; ρ = f when g = 0).
    pub fn zeroing(top: usize, bot: usize, f: T, g: T) -> (Self, T) {
        let zero = <T::Real as Scalar>::ZERO;
        let one = <T::Real as Scalar>::ONE;
        let (c, s, rho) = if g == T::zero() {
            (one, T::zero(), f)
        } else if f == T::zero() {
            let ng = g.modulus();
            (zero, g.conj().scale(one / ng), T::from_real(ng))
        } else {
            let (nf, ng) = (f.modulus(), g.modulus());
            let d = nf.hypot(ng);
            let phase = f.scale(one / nf);
            (nf / d, phase * g.conj().scale(one / d), phase.scale(d))
        };
        (Self { top, bot, c, s }, rho)
    }

    /// [x; y] ← G·[x; y].
    #[inline(always)]
    fn apply(&self, x: &mut T, y: &mut T) {
        let (a, b) = (*x, *y);
        *x = a.scale(self.c) + self.s * b;
        *y = b.scale(self.c) - self.s.conj() * a;
    }

    /// Entries `top` and `bot` of a vector that transforms as Qᴴu, multiplied by G.
    #[cfg(test)]
    pub fn vector(&self, w: &mut [T]) {
        let (mut x, mut y) = (w[self.top], w[self.bot]);
        self.apply(&mut x, &mut y);
        w[self.top] = x;
        w[self.bot] = y;
    }

    /// Entries `top` and `bot` of one column of R, multiplied by G.
    #[inline(always)]
    pub fn column(&self, col: &mut [T]) {
        let (mut x, mut y) = (col[self.top], col[self.bot]);
        self.apply(&mut x, &mut y);
        col[self.top] = x;
        col[self.bot] = y;
    }

    /// A rotation (`top`, pivot) on one column whose pivot-row entry is carried in `e`
    /// (the row is not stored in the column).
    #[inline(always)]
    pub fn pivot(&self, col: &mut [T], e: &mut T) {
        let mut x = col[self.top];
        self.apply(&mut x, e);
        col[self.top] = x;
    }

    /// A rotation (pivot, `bot`) on one column whose pivot-row entry (its `top`) is
    /// carried in `e`.
    #[inline(always)]
    pub fn pivot_top(&self, e: &mut T, col: &mut [T]) {
        let mut y = col[self.bot];
        self.apply(e, &mut y);
        col[self.bot] = y;
    }

    /// `rots` in order on each of `cols` (independent chains, interleaved so that the
    /// processor overlaps them).
    pub fn on_columns(rots: &[Self], cols: &mut [&mut [T]]) {
        for rot in rots {
            for col in cols.iter_mut() {
                rot.column(col);
            }
        }
    }

    /// `rots` (pairs (`top`, pivot)) in order on each of `cols`, the pivot-row entries
    /// carried in `e`.
    pub fn pivot_on_columns(rots: &[Self], cols: &mut [&mut [T]], e: &mut [T]) {
        for rot in rots {
            for (col, e) in cols.iter_mut().zip(e.iter_mut()) {
                rot.pivot(col, e);
            }
        }
    }

    /// `rots` (pairs (pivot, `bot`)) in order on each of `cols`, the pivot-row entries
    /// carried in `e`.
    pub fn pivot_top_on_columns(rots: &[Self], cols: &mut [&mut [T]], e: &mut [T]) {
        for rot in rots {
            for (col, e) in cols.iter_mut().zip(e.iter_mut()) {
                rot.pivot_top(e, col);
            }
        }
    }

    /// The rotation of rows (c, c + 1) that zeroes entry c + 1 of `cols[i]` (column c of
    /// R) against entry c, applied to it and to the columns `cols[i + 1..]` right of it.
    pub fn make_subdiagonal(cols: &mut [&mut [T]], i: usize, c: usize) -> Self {
        let col = &mut cols[i];
        let (rot, rho) = Self::zeroing(c, c + 1, col[c], col[c + 1]);
        col[c] = rho;
        col[c + 1] = T::zero();
        Self::on_columns(&[rot], &mut cols[i + 1..]);
        rot
    }

    /// The same rotation as Q takes it (Q ← Q·Gᴴ on columns `top` and `bot`).
    pub fn for_q(&self) -> ChainRotation<T> {
        ChainRotation {
            top: self.top,
            bot: self.bot,
            c: self.c,
            s: self.s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::field::c64;

    #[test]
    fn zeroes_the_second_entry_and_keeps_the_product() {
        let cases = [
            (c64::new(1.0, 2.0), c64::new(-3.0, 0.5)),
            (c64::new(0.0, 0.0), c64::new(0.0, -2.0)),
            (c64::new(4.0, -1.0), c64::new(0.0, 0.0)),
        ];
        for (f, g) in cases {
            let (rot, rho) = Rotation::zeroing(0, 1, f, g);
            let mut w = [f, g];
            rot.vector(&mut w);
            assert!((w[0] - rho).modulus() < 1e-15 && w[1].modulus() < 1e-15);
            assert!((rho.modulus() - f.modulus().hypot(g.modulus())).abs() < 1e-14);
            // Q·Gᴴ·G·R = Q·R for Q = I
            let mut q = crate::cpu::explicit::Dense::from_col_major(
                2,
                2,
                vec![
                    c64::new(1.0, 0.0),
                    c64::new(0.0, 0.0),
                    c64::new(0.0, 0.0),
                    c64::new(1.0, 0.0),
                ],
            );
            let mut r = Trapezoid::from_col_major(2, 1, &[f, g]);
            rot.column(r.columns_mut(0, 1, |_| 2)[0]);
            r.trim_cols(0, 1);
            crate::cpu::explicit::QStore::rotate(&mut q, rot.for_q()).unwrap();
            for i in 0..2 {
                let back = q.at(i, 0) * r.at(0, 0) + q.at(i, 1) * r.at(1, 0);
                assert!((back - [f, g][i]).modulus() < 1e-14);
            }
        }
    }
}
