//! Rounding formats of the mixed-precision GEMMs (docs/algorithms.md#mixed-precision).
#![forbid(unsafe_code)]

/// How the inputs of the trailing-update and Q-accumulation GEMMs are rounded
/// (docs/algorithms.md#mixed-precision). Accumulation is always in f32. Rounding is to nearest,
/// ties to even, straight
/// from the working precision (f64 inputs go through f32 with round-to-odd, which makes
/// the two-step rounding exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GemmPrecision {
    /// bfloat16: 8-bit significand (7 stored bits), f32's exponent range; u = 2⁻⁸.
    Bf16,
    /// IEEE binary16: 11-bit significand, exponents −14..15 (max 65504), so each GEMM
    /// operand is pre-scaled by a power of two (exact) to keep its largest entry in
    /// [2¹⁴, 2¹⁵) and the result is scaled back; u = 2⁻¹¹.
    F16,
    /// TensorFloat-32: 11-bit significand (10 stored bits), f32's exponent range;
    /// u = 2⁻¹¹.
    Tf32,
    /// Plain IEEE binary32 inputs (no tensor-core rounding; on the GPU, SGEMM): the
    /// reference point of the three low formats; u = 2⁻²⁴.
    F32,
}

impl GemmPrecision {
    /// Unit roundoff u = 2⁻ᵗ of the format (t = significand bits).
    pub const fn unit_roundoff(self) -> f64 {
        match self {
            GemmPrecision::Bf16 => 1.0 / 256.0,
            GemmPrecision::F16 | GemmPrecision::Tf32 => 1.0 / 2048.0,
            GemmPrecision::F32 => 1.0 / 16_777_216.0,
        }
    }

    /// Number of stored significand (mantissa) bits: 7, 10, 10, 23.
    pub const fn mantissa_bits(self) -> u32 {
        match self {
            GemmPrecision::Bf16 => 7,
            GemmPrecision::F16 | GemmPrecision::Tf32 => 10,
            GemmPrecision::F32 => 23,
        }
    }

    /// Rounds one value to this format, to nearest with ties to even, and returns it as
    /// the f32 a tensor core would multiply (exactly representable in f32). No scaling:
    /// values beyond the format's range become ±∞ (f16 above 65520, bf16/tf32 beyond
    /// f32's range), values below its subnormal range become ±0. NaN stays NaN.
    pub fn round(self, x: f64) -> f32 {
        match self {
            GemmPrecision::F32 => x as f32,
            GemmPrecision::Bf16 => half::bf16::from_f32(f64_to_f32_round_odd(x)).to_f32(),
            GemmPrecision::F16 => half::f16::from_f32(f64_to_f32_round_odd(x)).to_f32(),
            GemmPrecision::Tf32 => f32_to_tf32(f64_to_f32_round_odd(x)),
        }
    }
}

/// f64 → f32 rounded to odd: truncate, then set the last bit if anything was lost.
/// Rounding the result to nearest in any format with at most 22 significand bits equals
/// rounding x directly (Boldo & Melquiond, IEEE TC 57(4), 2008).
fn f64_to_f32_round_odd(x: f64) -> f32 {
    let y = x as f32;
    if x.is_nan() || y as f64 == x {
        return y;
    }
    let mut bits = y.to_bits();
    if (y as f64).abs() > x.abs() {
        bits -= 1; // y was rounded away from zero: step its magnitude down one ulp.
    }
    f32::from_bits(bits | 1)
}

/// f32 → tf32 (10 stored significand bits) by round to nearest even on the bit pattern;
/// a carry into the exponent gives the next binade or ±∞, as IEEE rounding does.
fn f32_to_tf32(y: f32) -> f32 {
    if !y.is_finite() {
        return y;
    }
    let bits = y.to_bits();
    let lsb = (bits >> 13) & 1;
    f32::from_bits(bits.wrapping_add(0xFFF + lsb) & !0x1FFF)
}
