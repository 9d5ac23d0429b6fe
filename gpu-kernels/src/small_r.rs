//! The k×k triangular least-squares state of one small problem in a thread's registers
//! (docs/algorithms.md#rolling-least-squares): R, d = Q₁ᵀy and the residual norm ρ, a row
//! entering by Givens rotations, a row leaving by the LINPACK-style downdate with the
//! refusal test of `host/src/cpu/rfactor.rs`, and the back substitution — the arithmetic
//! of `host/src/cpu/rolling.rs` (`LsWindow`). Used by the rolling walk and the batched
//! R-only states.

// The last unrolled copy of a loop body assigns values that no later copy reads.
#![allow(unused_assignments)]

use crate::device::Float;

/// `$body` for `$i` = 0, 1, … while below `$n` (at most 16), each copy with `$i` a
/// constant: arrays indexed by `$i` stay in registers (a `for` loop unrolled late would
/// leave them in local memory).
macro_rules! unroll {
    ($i:ident in ..$n:expr => $body:block) => {
        unroll!(@go $i, $n, $body; 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15)
    };
    ($i:ident in rev ..$n:expr => $body:block) => {
        unroll!(@go $i, $n, $body; 15 14 13 12 11 10 9 8 7 6 5 4 3 2 1 0)
    };
    (@go $i:ident, $n:expr, $body:block; $($k:literal)*) => {
        $(
            if $k < $n {
                let $i: usize = $k;
                $body
            }
        )*
    };
}

/// R (upper triangle), d and ρ of one window, for at most K ≤ 16 columns (k used; the
/// entries past k stay zero).
pub(crate) struct Window<T, const K: usize> {
    pub k: usize,
    pub r: [[T; K]; K],
    pub d: [T; K],
    pub rho: T,
}

impl<T: Float, const K: usize> Window<T, K> {
    #[inline(always)]
    pub(crate) fn new(k: usize) -> Self {
        Self {
            k,
            r: [[T::ZERO; K]; K],
            d: [T::ZERO; K],
            rho: T::ZERO,
        }
    }

    #[inline(always)]
    pub(crate) fn clear(&mut self) {
        unroll!(i in ..K => {
            unroll!(j in ..K => {
                self.r[i][j] = T::ZERO;
            });
            self.d[i] = T::ZERO;
        });
        self.rho = T::ZERO;
    }

    /// R, d and ρ times `s`.
    #[inline(always)]
    pub(crate) fn scale(&mut self, s: T) {
        unroll!(i in ..K => {
            unroll!(j in ..K => {
                if j >= i {
                    self.r[i][j] = self.r[i][j].mul(s);
                }
            });
            self.d[i] = self.d[i].mul(s);
        });
        self.rho = self.rho.mul(s);
    }

    /// Folds the row w·x (right-hand side w·y) in by Givens rotations, as
    /// `LsWindow::add_row` (columns past k hold zeros and stay zero).
    #[inline(always)]
    pub(crate) fn add_row(&mut self, x: &[T; K], y: T, w: T) {
        let k = self.k;
        let mut z = [T::ZERO; K];
        unroll!(j in ..K => {
            z[j] = w.mul(x[j]);
        });
        let mut e = w.mul(y);
        unroll!(j in ..K => {
            if j < k {
                let (c, s) = crate::givens::make(self.r[j][j], z[j]);
                self.r[j][j] = c.mul_add(self.r[j][j], s.mul(z[j]));
                unroll!(l in ..K => {
                    if l > j {
                        let (rv, zv) = (self.r[j][l], z[l]);
                        self.r[j][l] = c.mul_add(rv, s.mul(zv));
                        z[l] = c.mul_add(zv, s.mul(rv).neg());
                    }
                });
                let (dv, ev) = (self.d[j], e);
                self.d[j] = c.mul_add(dv, s.mul(ev));
                e = c.mul_add(ev, s.mul(dv).neg());
            }
        });
        self.rho = self.rho.hypot(e);
    }

    /// Removes the row w·x (right-hand side w·y), as `LsWindow::remove_row`; returns
    /// false and changes nothing when the refusal tests turn the downdate down.
    #[inline(always)]
    pub(crate) fn remove_row(&mut self, x: &[T; K], y: T, w: T) -> bool {
        let k = self.k;
        let mut z = [T::ZERO; K];
        unroll!(j in ..K => {
            z[j] = w.mul(x[j]);
        });
        let mut zz = 0.0f64;
        unroll!(i in ..K => {
            if i < k {
                let zi = z[i].div(self.r[i][i]);
                z[i] = zi;
                zz += zi.to_f64() * zi.to_f64();
                unroll!(l in ..K => {
                    if l > i {
                        z[l] = self.r[i][l].neg().mul_add(zi, z[l]);
                    }
                });
            }
        });
        let alpha2 = 1.0 - zz;
        // The refusal test of `cpu::rfactor::downdate_refused`.
        if alpha2.is_nan() || alpha2 <= sqrt_f64(T::UNIT_ROUNDOFF) {
            return false;
        }
        let mut cs = [(T::ONE, T::ZERO); K];
        let mut alpha = T::from_f64(sqrt_f64(alpha2));
        unroll!(i in rev ..K => {
            if i < k {
                let h = alpha.hypot(z[i]);
                cs[i] = (alpha.div(h), z[i].div(h));
                alpha = h;
            }
        });
        let mut t = w.mul(y);
        let mut d_new = [T::ZERO; K];
        unroll!(i in ..K => {
            if i < k {
                let (c, s) = cs[i];
                let di = self.d[i];
                let t_in = s.neg().mul_add(di, t).div(c);
                d_new[i] = c.mul_add(di, s.mul(t_in).neg());
                t = t_in;
            }
        });
        let (rk, u) = (self.rho.to_f64(), t.to_f64().abs());
        let mut dn = 0.0f64;
        unroll!(i in ..K => {
            dn += self.d[i].to_f64() * self.d[i].to_f64();
        });
        let slack = 100.0 * (k as f64 + 1.0) * T::UNIT_ROUNDOFF * (dn + rk * rk);
        if u * u > rk * rk + slack || !(u - u == 0.0) {
            return false;
        }
        self.rho = T::from_f64(sqrt_f64(max_f64((rk - u) * (rk + u), 0.0)));
        self.d = d_new;
        let mut run = [T::ZERO; K];
        unroll!(i in rev ..K => {
            if i < k {
                let (c, s) = cs[i];
                unroll!(l in ..K => {
                    if l >= i {
                        let (rv, xv) = (self.r[i][l], run[l]);
                        run[l] = c.mul_add(xv, s.mul(rv));
                        self.r[i][l] = c.mul_add(rv, s.mul(xv).neg());
                    }
                });
            }
        });
        true
    }

    /// Solves Rβ = d into `out` when every |R_jj| > tol·‖R‖_F (finite); false otherwise.
    #[inline(always)]
    pub(crate) fn solve(&self, tol: f64, out: &mut [T; K]) -> bool {
        let k = self.k;
        let mut nrm = 0.0f64;
        unroll!(i in ..K => {
            unroll!(j in ..K => {
                if j >= i {
                    nrm += self.r[i][j].to_f64() * self.r[i][j].to_f64();
                }
            });
        });
        let limit = tol * sqrt_f64(nrm);
        let mut ok = limit - limit == 0.0;
        unroll!(i in ..K => {
            if i < k {
                let v = self.r[i][i].to_f64();
                let v = if v < 0.0 { -v } else { v };
                ok &= v - v == 0.0 && v > limit;
            }
        });
        if !ok {
            return false;
        }
        unroll!(i in rev ..K => {
            if i < k {
                let mut s = self.d[i];
                unroll!(l in ..K => {
                    if l > i {
                        s = self.r[i][l].neg().mul_add(out[l], s);
                    }
                });
                out[i] = s.div(self.r[i][i]);
            }
        });
        true
    }
}

#[inline(always)]
pub(crate) fn sqrt_f64(v: f64) -> f64 {
    <f64 as Float>::sqrt(v)
}

#[inline(always)]
pub(crate) fn max_f64(a: f64, b: f64) -> f64 {
    <f64 as Float>::max(a, b)
}

