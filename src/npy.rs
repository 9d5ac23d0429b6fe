//! Reading and writing NumPy `.npy` files (format versions 1.0, 2.0 and 3.0).
//!
//! The reader accepts float64 and float32 data (`<f8`, `<f4`, `>f8`, `>f4`,
//! `=f8`, `=f4`), C or Fortran order, 1-D or 2-D; everything else is refused
//! with a one-line error. Arrays come back as column-major f64 data (f32
//! widens exactly), so the caller converts once to its working precision.
//! [`read_file_complex`] also takes complex128 and complex64 (`c16`, `c8`), whose
//! imaginary parts come back beside the real ones.
//! The writer emits version 1.0 (2.0 when the header needs it), little-endian,
//! Fortran order (or C order for arrays of any rank, `encode_c`), with the header
//! padded so the data starts on a 64-byte boundary as NumPy does.

use std::fmt;
use std::io::Read;
use std::path::Path;

use cuqr::{Mat, Scalar};

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Why a `.npy` file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyError(pub String);

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NpyError {}

fn err<T>(msg: impl Into<String>) -> Result<T, NpyError> {
    Err(NpyError(msg.into()))
}

/// Element type stored in a `.npy` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// IEEE double (`f8`).
    F64,
    /// IEEE single (`f4`).
    F32,
    /// Two IEEE doubles, real part first (`c16`).
    C128,
    /// Two IEEE singles, real part first (`c8`).
    C64,
}

impl Dtype {
    /// Whether the elements are complex.
    pub fn is_complex(self) -> bool {
        matches!(self, Dtype::C128 | Dtype::C64)
    }
    /// Bytes an element.
    fn size(self) -> usize {
        match self {
            Dtype::F64 | Dtype::C64 => 8,
            Dtype::F32 => 4,
            Dtype::C128 => 16,
        }
    }
}

/// A 1-D or 2-D floating-point array read from a `.npy` file, held as
/// column-major f64 (a 1-D array of length k is k×1).
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// Rows (the length, for a 1-D array).
    pub nrows: usize,
    /// Columns (1 for a 1-D array).
    pub ncols: usize,
    /// True when the file held a 1-D array.
    pub one_d: bool,
    /// The dtype in the file.
    pub dtype: Dtype,
    /// Column-major values (the real parts of complex ones).
    pub data: Vec<f64>,
    /// The imaginary parts, column-major, of a complex array ([`read_file_complex`]).
    pub imag: Option<Vec<f64>>,
}

impl Array {
    /// The array as a matrix of the working precision (f64 → f32 rounds).
    pub fn to_mat<T: Scalar>(&self) -> Mat<T> {
        Mat::from_fn(self.nrows, self.ncols, |i, j| {
            T::from_f64(self.data[i + j * self.nrows])
        })
    }
}

/// Element types the writer can emit: f64, f32, c64 and c32.
pub trait NpyValue: Copy {
    /// NumPy `descr` string (little-endian).
    const DESCR: &'static str;
    /// Appends the little-endian bytes of `self` (real part first).
    fn put(self, out: &mut Vec<u8>);
}

/// The real element types of the GPU backend that the writer can emit.
pub trait NpyElem: cuqr::GpuScalar + NpyValue {}
impl NpyElem for f64 {}
impl NpyElem for f32 {}

impl NpyValue for f64 {
    const DESCR: &'static str = "<f8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyValue for f32 {
    const DESCR: &'static str = "<f4";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl NpyValue for cuqr::explicit::c64 {
    const DESCR: &'static str = "<c16";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.re.to_le_bytes());
        out.extend_from_slice(&self.im.to_le_bytes());
    }
}

impl NpyValue for cuqr::explicit::c32 {
    const DESCR: &'static str = "<c8";
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.re.to_le_bytes());
        out.extend_from_slice(&self.im.to_le_bytes());
    }
}

/// Largest `.npy` header the reader accepts (NumPy writes a few hundred bytes; format
/// 2.0 allows up to 4 GiB, which would only be read to be refused).
const MAX_HEADER: usize = 1 << 20;

/// Reads a `.npy` file from disk; errors name the file. The file is read in stages —
/// the preamble, the header, then exactly the data the header announces and one byte
/// more (to detect trailing data) — so a file that is not `.npy`, or a stream without
/// end such as `/dev/zero`, is refused after a few bytes instead of read whole.
pub fn read_file(path: &Path) -> Result<Array, NpyError> {
    let a = read_file_complex(path)?;
    if a.dtype.is_complex() {
        return err(format!(
            "{}: complex data; this command reads float64 or float32 (`cuqr update` takes \
             complex128 and complex64)",
            path.display()
        ));
    }
    Ok(a)
}

/// [`read_file`] that also reads complex arrays (their imaginary parts in
/// [`Array::imag`]).
pub fn read_file_complex(path: &Path) -> Result<Array, NpyError> {
    let named = |e: NpyError| NpyError(format!("{}: {}", path.display(), e.0));
    let cannot = |e: std::io::Error| NpyError(format!("cannot read {}: {e}", path.display()));
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    let mut read_to = |bytes: &mut Vec<u8>, total: usize| -> Result<(), NpyError> {
        let more = total.saturating_sub(bytes.len()) as u64;
        (&mut file)
            .take(more)
            .read_to_end(bytes)
            .map(drop)
            .map_err(cannot)
    };
    read_to(&mut bytes, 12)?;
    let (hlen, hstart) = preamble(&bytes).map_err(named)?;
    if hlen > MAX_HEADER {
        return Err(named(NpyError(format!(
            "header of {hlen} bytes is longer than cuqr reads ({MAX_HEADER})"
        ))));
    }
    read_to(&mut bytes, hstart + hlen)?;
    if let Some(header) = bytes.get(hstart..hstart + hlen) {
        let header = std::str::from_utf8(header)
            .map_err(|_| named(NpyError("header is not text".into())))?;
        let m = header_meta(header).map_err(named)?;
        let end = (hstart + hlen).saturating_add(m.need);
        let what = format!("shape {:?} of {} needs {} bytes", m.shape, m.descr, m.need);
        read_to(&mut bytes, end.saturating_add(1))?;
        if bytes.len() > end {
            return Err(named(NpyError(format!(
                "data is longer than the header says ({what})"
            ))));
        }
    }
    parse(&bytes).map_err(named)
}

/// The header length and where the header starts, from the preamble (magic string,
/// version, length field).
fn preamble(bytes: &[u8]) -> Result<(usize, usize), NpyError> {
    if bytes.get(..6) != Some(&MAGIC[..]) {
        return err("not a .npy file (bad magic string)");
    }
    if bytes.len() < 10 {
        return err("truncated .npy header");
    }
    let major = bytes[6];
    let (hlen, hstart) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return err("truncated .npy header");
            }
            let n = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (n as usize, 12)
        }
        v => return err(format!("unsupported .npy format version {v}")),
    };
    Ok((hlen, hstart))
}

/// What the header says: element type and byte order, order, shape, and the data's
/// byte length.
struct Meta<'h> {
    descr: &'h str,
    dtype: Dtype,
    big: bool,
    fortran: bool,
    shape: Vec<usize>,
    nrows: usize,
    ncols: usize,
    one_d: bool,
    size: usize,
    count: usize,
    need: usize,
}

fn header_meta(header: &str) -> Result<Meta<'_>, NpyError> {
    let descr = dict_str(header, "descr")?;
    let fortran = match dict_raw(header, "fortran_order")? {
        s if is_word(s, "True") => true,
        s if is_word(s, "False") => false,
        _ => return err("header: fortran_order is neither True nor False"),
    };
    let shape = parse_shape(dict_raw(header, "shape")?)?;
    let (dtype, big) = match descr {
        "<f8" | "=f8" => (Dtype::F64, false),
        ">f8" => (Dtype::F64, true),
        "<f4" | "=f4" => (Dtype::F32, false),
        ">f4" => (Dtype::F32, true),
        "<c16" | "=c16" => (Dtype::C128, false),
        ">c16" => (Dtype::C128, true),
        "<c8" | "=c8" => (Dtype::C64, false),
        ">c8" => (Dtype::C64, true),
        d => {
            return err(format!(
                "unsupported dtype '{d}' (cuqr reads float64 or float32, and `cuqr update` \
                 complex128 or complex64)"
            ))
        }
    };
    let (nrows, ncols, one_d) = match shape.as_slice() {
        [k] => (*k, 1, true),
        [r, c] => (*r, *c, false),
        s => {
            return err(format!(
                "{}-dimensional array; cuqr reads 1-D or 2-D arrays",
                s.len()
            ))
        }
    };
    let size = dtype.size();
    let overflow = || {
        NpyError(format!(
            "shape {shape:?} of {descr} is too large (its byte size overflows)"
        ))
    };
    let count = nrows.checked_mul(ncols).ok_or_else(overflow)?;
    let need = count.checked_mul(size).ok_or_else(overflow)?;
    Ok(Meta {
        descr,
        dtype,
        big,
        fortran,
        shape,
        nrows,
        ncols,
        one_d,
        size,
        count,
        need,
    })
}

/// Parses the bytes of a `.npy` file.
pub fn parse(bytes: &[u8]) -> Result<Array, NpyError> {
    let (hlen, hstart) = preamble(bytes)?;
    let Some(header) = bytes.get(hstart..hstart + hlen) else {
        return err("truncated .npy header");
    };
    let header = std::str::from_utf8(header).map_err(|_| NpyError("header is not text".into()))?;
    let m = header_meta(header)?;
    let (nrows, ncols, dtype, big) = (m.nrows, m.ncols, m.dtype, m.big);
    let body = &bytes[hstart + hlen..];
    if body.len() != m.need {
        return err(format!(
            "data is {} bytes, shape {:?} of {} needs {}",
            body.len(),
            m.shape,
            m.descr,
            m.need
        ));
    }
    let complex = dtype.is_complex();
    let part = if complex { m.size / 2 } else { m.size };
    let part_type = match dtype {
        Dtype::C128 => Dtype::F64,
        Dtype::C64 => Dtype::F32,
        d => d,
    };
    let parts: Vec<f64> = body
        .chunks_exact(part)
        .map(|c| decode(c, part_type, big))
        .collect();
    // C order holds row-major data: transpose it into column-major.
    let in_order = m.fortran || m.one_d || ncols == 1 || nrows == 1;
    let column_major = |flat: Vec<f64>| {
        if in_order {
            return flat;
        }
        let mut d = vec![0.0; m.count];
        for i in 0..nrows {
            for j in 0..ncols {
                d[i + j * nrows] = flat[i * ncols + j];
            }
        }
        d
    };
    let (data, imag) = if complex {
        let re = parts.iter().step_by(2).copied().collect();
        let im = parts.iter().skip(1).step_by(2).copied().collect();
        (column_major(re), Some(column_major(im)))
    } else {
        (column_major(parts), None)
    };
    Ok(Array {
        nrows,
        ncols,
        one_d: m.one_d,
        dtype,
        data,
        imag,
    })
}

/// One real element's bytes as f64 (`dtype` a real type).
fn decode(chunk: &[u8], dtype: Dtype, big: bool) -> f64 {
    match dtype {
        Dtype::F64 => {
            let b: [u8; 8] = chunk.try_into().expect("8 bytes");
            if big {
                f64::from_be_bytes(b)
            } else {
                f64::from_le_bytes(b)
            }
        }
        Dtype::F32 => {
            let b: [u8; 4] = chunk.try_into().expect("4 bytes");
            f64::from(if big {
                f32::from_be_bytes(b)
            } else {
                f32::from_le_bytes(b)
            })
        }
        Dtype::C128 | Dtype::C64 => unreachable!("complex elements are decoded by parts"),
    }
}

/// An open `.npy` file's header text and where its data start.
fn open_header(path: &Path) -> Result<(std::fs::File, String, u64), NpyError> {
    let named = |e: NpyError| NpyError(format!("{}: {}", path.display(), e.0));
    let cannot = |e: std::io::Error| NpyError(format!("cannot read {}: {e}", path.display()));
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let mut head = Vec::new();
    (&mut file)
        .take(12)
        .read_to_end(&mut head)
        .map_err(cannot)?;
    let (hlen, hstart) = preamble(&head).map_err(named)?;
    if hlen > MAX_HEADER {
        return Err(named(NpyError(format!(
            "header of {hlen} bytes is longer than cuqr reads ({MAX_HEADER})"
        ))));
    }
    let more = (hstart + hlen).saturating_sub(head.len()) as u64;
    (&mut file)
        .take(more)
        .read_to_end(&mut head)
        .map_err(cannot)?;
    let header = head
        .get(hstart..hstart + hlen)
        .ok_or_else(|| named(NpyError("truncated .npy header".into())))?;
    let header =
        std::str::from_utf8(header).map_err(|_| named(NpyError("header is not text".into())))?;
    Ok((file, header.to_owned(), (hstart + hlen) as u64))
}

/// The element type of a `.npy` file, from its header alone.
pub fn dtype_of(path: &Path) -> Result<Dtype, NpyError> {
    let (_, header, _) = open_header(path)?;
    let m = header_meta(&header).map_err(|e| NpyError(format!("{}: {}", path.display(), e.0)))?;
    Ok(m.dtype)
}

/// The header of an open `.npy` file: its meta data (owned) and where the data start.
fn open_meta(path: &Path) -> Result<(std::fs::File, RowsMeta, u64), NpyError> {
    let named = |e: NpyError| NpyError(format!("{}: {}", path.display(), e.0));
    let cannot = |e: std::io::Error| NpyError(format!("cannot read {}: {e}", path.display()));
    let (file, header, start) = open_header(path)?;
    let header = header.as_str();
    let m = header_meta(header).map_err(named)?;
    if m.dtype.is_complex() {
        return Err(named(NpyError(format!(
            "complex data ({}); this command reads float64 or float32",
            m.descr
        ))));
    }
    let len = file.metadata().map_err(cannot)?.len();
    if len != start + m.need as u64 {
        return Err(named(NpyError(format!(
            "data is {} bytes, shape {:?} of {} needs {}",
            len.saturating_sub(start),
            m.shape,
            m.descr,
            m.need
        ))));
    }
    let meta = RowsMeta {
        dtype: m.dtype,
        big: m.big,
        fortran: m.fortran || m.one_d,
        nrows: m.nrows,
        ncols: m.ncols,
        one_d: m.one_d,
        size: m.size,
    };
    Ok((file, meta, start))
}

/// What [`read_rows`] needs of a header.
struct RowsMeta {
    dtype: Dtype,
    big: bool,
    fortran: bool,
    nrows: usize,
    ncols: usize,
    one_d: bool,
    size: usize,
}

/// The number of rows and columns of a `.npy` file (a 1-D array of length k is k×1),
/// from its header alone.
pub fn shape_of(path: &Path) -> Result<(usize, usize), NpyError> {
    let (_, m, _) = open_meta(path)?;
    Ok((m.nrows, m.ncols))
}

/// Rows `r0..r0 + len` of a `.npy` file, reading only those bytes (one read in C order,
/// one a column in Fortran order): what each rank of a distributed problem takes of one
/// shared file.
pub fn read_rows(path: &Path, r0: usize, len: usize) -> Result<Array, NpyError> {
    use std::io::{Seek, SeekFrom};
    let (mut file, m, start) = open_meta(path)?;
    if r0.checked_add(len).is_none_or(|e| e > m.nrows) {
        return err(format!(
            "{}: rows {r0}..{} asked of {} rows",
            path.display(),
            r0.saturating_add(len),
            m.nrows
        ));
    }
    let cannot = |e: std::io::Error| NpyError(format!("cannot read {}: {e}", path.display()));
    let mut read_at = |at: usize, bytes: usize| -> Result<Vec<u8>, NpyError> {
        file.seek(SeekFrom::Start(start + at as u64))
            .map_err(cannot)?;
        let mut buf = vec![0u8; bytes];
        file.read_exact(&mut buf).map_err(cannot)?;
        Ok(buf)
    };
    let (n, size) = (m.ncols, m.size);
    let mut data = vec![0.0; len * n];
    if m.fortran {
        for j in 0..n {
            let buf = read_at((j * m.nrows + r0) * size, len * size)?;
            for (i, c) in buf.chunks_exact(size).enumerate() {
                data[i + j * len] = decode(c, m.dtype, m.big);
            }
        }
    } else {
        let buf = read_at(r0 * n * size, len * n * size)?;
        for (k, c) in buf.chunks_exact(size).enumerate() {
            data[k / n + (k % n) * len] = decode(c, m.dtype, m.big);
        }
    }
    Ok(Array {
        nrows: len,
        ncols: n,
        one_d: m.one_d,
        dtype: m.dtype,
        data,
        imag: None,
    })
}

/// Whether `s` starts with the Python literal `word` followed by the end of the
/// value (`,`, `}` or white space), so that `Trueish` is not read as `True`.
fn is_word(s: &str, word: &str) -> bool {
    s.strip_prefix(word)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with([',', '}', ' ', '\n', '\t']))
}

/// The text after `'key':` in the header dictionary.
fn dict_raw<'h>(header: &'h str, key: &str) -> Result<&'h str, NpyError> {
    for quote in ['\'', '"'] {
        let pat = format!("{quote}{key}{quote}");
        if let Some(pos) = header.find(&pat) {
            let rest = header[pos + pat.len()..].trim_start();
            let Some(rest) = rest.strip_prefix(':') else {
                return err(format!("header: no ':' after '{key}'"));
            };
            return Ok(rest.trim_start());
        }
    }
    err(format!("header has no '{key}' entry"))
}

/// A quoted string value in the header dictionary.
fn dict_str<'h>(header: &'h str, key: &str) -> Result<&'h str, NpyError> {
    let raw = dict_raw(header, key)?;
    let mut chars = raw.chars();
    let Some(q) = chars.next().filter(|c| *c == '\'' || *c == '"') else {
        return err(format!(
            "header: '{key}' is not a string (structured dtypes are not supported)"
        ));
    };
    let body = &raw[1..];
    match body.find(q) {
        Some(end) => Ok(&body[..end]),
        None => err(format!("header: unterminated string for '{key}'")),
    }
}

fn parse_shape(raw: &str) -> Result<Vec<usize>, NpyError> {
    let Some(rest) = raw.strip_prefix('(') else {
        return err("header: shape is not a tuple");
    };
    let Some(end) = rest.find(')') else {
        return err("header: unterminated shape tuple");
    };
    rest[..end]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.trim_end_matches('L')
                .parse::<usize>()
                .map_err(|_| NpyError(format!("header: bad dimension '{s}' in shape")))
        })
        .collect()
}

/// Encodes `a` as a `.npy` file (Fortran order); `one_d` writes an n×1
/// matrix as a 1-D array of length n.
pub fn encode<T: NpyElem>(a: &Mat<T>, one_d: bool) -> Vec<u8> {
    assert!(!one_d || a.ncols() == 1, "a 1-D array has one column");
    let shape = if one_d {
        vec![a.nrows()]
    } else {
        vec![a.nrows(), a.ncols()]
    };
    encode_with(a.as_slice(), &shape, true)
}

/// Encodes `data` as a C-ordered (row-major) `.npy` array of any `shape`.
pub fn encode_c<T: NpyElem>(data: &[T], shape: &[usize]) -> Vec<u8> {
    assert_eq!(
        data.len(),
        shape.iter().product::<usize>(),
        "data fills the shape"
    );
    encode_with(data, shape, false)
}

fn encode_with<T: NpyValue>(data: &[T], shape: &[usize], fortran: bool) -> Vec<u8> {
    let shape = match shape {
        [n] => format!("({n},)"),
        dims => format!(
            "({})",
            dims.iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let order = if fortran { "True" } else { "False" };
    let mut dict = format!(
        "{{'descr': '{}', 'fortran_order': {order}, 'shape': {shape}, }}",
        T::DESCR
    );
    // magic (6) + version (2) + length (2 or 4) + dict + '\n', padded to 64.
    let mut prefix = 10;
    if dict.len() + 1 + prefix > u16::MAX as usize {
        prefix = 12;
    }
    let total = (prefix + dict.len() + 1).div_ceil(64) * 64;
    while prefix + dict.len() + 1 < total {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = Vec::with_capacity(total + std::mem::size_of_val(data));
    out.extend_from_slice(MAGIC);
    if prefix == 10 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    for &x in data {
        x.put(&mut out);
    }
    out
}

/// Writes `data` to `path` as a C-ordered `.npy` array of `shape` (see [`encode_c`]).
pub fn write_file_c<T: NpyElem>(path: &Path, data: &[T], shape: &[usize]) -> Result<(), NpyError> {
    std::fs::write(path, encode_c(data, shape))
        .map_err(|e| NpyError(format!("cannot write {}: {e}", path.display())))
}

/// Writes the column-major `rows`×`cols` `data` to `path` as a Fortran-ordered `.npy`
/// file (a 1-D array of length `rows` when `one_d` and `cols` is 1), of any element type
/// the writer emits (complex ones included).
pub fn write_values<T: NpyValue>(
    path: &Path,
    data: &[T],
    (rows, cols): (usize, usize),
    one_d: bool,
) -> Result<(), NpyError> {
    assert_eq!(data.len(), rows * cols, "data fills the shape");
    assert!(!one_d || cols == 1, "a 1-D array has one column");
    let shape = if one_d { vec![rows] } else { vec![rows, cols] };
    std::fs::write(path, encode_with(data, &shape, true))
        .map_err(|e| NpyError(format!("cannot write {}: {e}", path.display())))
}

/// Writes `a` to `path` as a `.npy` file (see [`encode`]).
pub fn write_file<T: NpyElem>(path: &Path, a: &Mat<T>, one_d: bool) -> Result<(), NpyError> {
    std::fs::write(path, encode(a, one_d))
        .map_err(|e| NpyError(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// An independent C-order encoder, to test the reader on row-major data.
    fn encode_c(descr: &str, shape: &str, values_row_major: &[f64]) -> Vec<u8> {
        let mut dict =
            format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
        while (10 + dict.len() + 1) % 16 != 0 {
            dict.push(' ');
        }
        dict.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        for &v in values_row_major {
            match descr {
                "<f8" => out.extend_from_slice(&v.to_le_bytes()),
                ">f8" => out.extend_from_slice(&v.to_be_bytes()),
                "<f4" => out.extend_from_slice(&(v as f32).to_le_bytes()),
                // complex: `values_row_major` holds the parts, real first
                "<c16" => out.extend_from_slice(&v.to_le_bytes()),
                ">c8" => out.extend_from_slice(&(v as f32).to_be_bytes()),
                _ => out.extend_from_slice(&(v as i64).to_le_bytes()),
            }
        }
        out
    }

    fn random_mat<T: Scalar>(rng: &mut Rng, m: usize, n: usize) -> Mat<T> {
        Mat::from_fn(m, n, |_, _| T::from_f64(rng.normal()))
    }

    #[test]
    fn round_trip_f64_fortran_2d() {
        let mut rng = Rng::new(11);
        let a = random_mat::<f64>(&mut rng, 37, 5);
        let bytes = encode(&a, false);
        assert_eq!(bytes.len() % 8, 0);
        let hdr_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!(
            (10 + hdr_len) % 64,
            0,
            "data must start on a 64-byte boundary"
        );
        let back = parse(&bytes).unwrap();
        assert_eq!((back.nrows, back.ncols, back.one_d), (37, 5, false));
        assert_eq!(back.dtype, Dtype::F64);
        assert_eq!(back.to_mat::<f64>(), a);
    }

    #[test]
    fn round_trip_f32_fortran_2d_and_1d() {
        let mut rng = Rng::new(12);
        let a = random_mat::<f32>(&mut rng, 19, 3);
        let back = parse(&encode(&a, false)).unwrap();
        assert_eq!(back.dtype, Dtype::F32);
        assert_eq!(back.to_mat::<f32>(), a);

        let v = random_mat::<f32>(&mut rng, 23, 1);
        let back = parse(&encode(&v, true)).unwrap();
        assert_eq!((back.nrows, back.ncols, back.one_d), (23, 1, true));
        assert_eq!(back.to_mat::<f32>(), v);
    }

    #[test]
    fn reads_c_order_f64_and_f32() {
        let mut rng = Rng::new(13);
        let (m, n) = (7, 11);
        let rows: Vec<f64> = (0..m * n).map(|_| rng.normal()).collect();
        for descr in ["<f8", ">f8", "<f4"] {
            let a = parse(&encode_c(descr, &format!("({m}, {n})"), &rows)).unwrap();
            assert_eq!((a.nrows, a.ncols), (m, n));
            for i in 0..m {
                for j in 0..n {
                    let want = if descr == "<f4" {
                        rows[i * n + j] as f32 as f64
                    } else {
                        rows[i * n + j]
                    };
                    assert_eq!(a.data[i + j * m], want, "{descr} ({i}, {j})");
                }
            }
        }
    }

    #[test]
    fn reads_c_order_1d() {
        let vals = [1.5, -2.25, 3.0, 0.125, 9.0];
        let a = parse(&encode_c("<f8", "(5,)", &vals)).unwrap();
        assert!(a.one_d);
        assert_eq!(a.data, vals);
    }

    #[test]
    fn f64_file_converts_to_f32_by_rounding() {
        let a = Mat::<f64>::from_fn(3, 2, |i, j| 0.1 * (1 + i + 3 * j) as f64);
        let m32 = parse(&encode(&a, false)).unwrap().to_mat::<f32>();
        for j in 0..2 {
            for i in 0..3 {
                assert_eq!(m32[(i, j)], a[(i, j)] as f32);
            }
        }
    }

    #[test]
    fn rejects_unsupported_dtype_and_malformed_files() {
        let e = parse(&encode_c("<i8", "(2, 2)", &[1.0, 2.0, 3.0, 4.0])).unwrap_err();
        assert!(e.0.contains("unsupported dtype '<i8'"), "{e}");
        let e = parse(b"hello world, not npy").unwrap_err();
        assert!(e.0.contains("magic"), "{e}");
        // Truncated data.
        let mut bytes = encode_c("<f8", "(3, 2)", &[1.0; 6]);
        bytes.truncate(bytes.len() - 3);
        assert!(parse(&bytes).unwrap_err().0.contains("bytes"));
        // 3-D arrays are refused.
        let e = parse(&encode_c("<f8", "(2, 2, 2)", &[1.0; 8])).unwrap_err();
        assert!(e.0.contains("3-dimensional"), "{e}");
        // Structured dtypes are refused.
        let dict = "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (1,), }\n";
        let mut s = b"\x93NUMPY\x01\x00".to_vec();
        s.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        s.extend_from_slice(dict.as_bytes());
        s.extend_from_slice(&1.0f64.to_le_bytes());
        let e = parse(&s).unwrap_err();
        assert!(e.0.contains("structured"), "{e}");
    }

    /// Complex files: C order is transposed into column-major real and imaginary parts,
    /// big-endian complex64 decodes, the writer's complex128 reads back, and the real-only
    /// reader refuses them.
    #[test]
    fn complex_files_read_and_write() {
        // [[1+2i, 3+4i, 5+6i], [7+8i, 9+10i, 11+12i]]
        let parts: Vec<f64> = (1..=12).map(f64::from).collect();
        for descr in ["<c16", ">c8"] {
            let a = parse(&encode_c(descr, "(2, 3)", &parts)).unwrap();
            assert_eq!((a.nrows, a.ncols, a.dtype.is_complex()), (2, 3, true));
            assert_eq!(a.data, [1.0, 7.0, 3.0, 9.0, 5.0, 11.0]);
            assert_eq!(a.imag.unwrap(), [2.0, 8.0, 4.0, 10.0, 6.0, 12.0]);
        }
        let dir = std::env::temp_dir().join(format!("cuqr-npy-complex-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("z.npy");
        let z: Vec<cuqr::explicit::c64> = (0..6)
            .map(|k| cuqr::explicit::c64::new(k as f64, -(k as f64) / 4.0))
            .collect();
        write_values(&path, &z, (3, 2), false).unwrap();
        let a = read_file_complex(&path).unwrap();
        assert_eq!(a.data, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(a.imag.unwrap(), [0.0, -0.25, -0.5, -0.75, -1.0, -1.25]);
        assert_eq!(dtype_of(&path).unwrap(), Dtype::C128);
        let e = read_file(&path).unwrap_err();
        assert!(e.0.contains("complex data"), "{e}");
        let e = read_rows(&path, 0, 1).unwrap_err();
        assert!(e.0.contains("complex data"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file cut inside the preamble (after a correct magic string) is reported as
    /// truncated, not as "bad magic" (files of 6 to 9 bytes said bad magic).
    #[test]
    fn truncated_preamble_is_not_bad_magic() {
        let good = encode(&Mat::<f64>::zeros(2, 2), false);
        for len in 6..10 {
            let e = parse(&good[..len]).unwrap_err();
            assert!(e.0.contains("truncated"), "{len} bytes: {e}");
        }
        for bytes in [&b""[..], b"\x93NUM", b"\x93NUMPX\x01\x00\x00\x00"] {
            assert!(parse(bytes).unwrap_err().0.contains("magic"));
        }
    }

    /// `fortran_order` must be exactly True or False (a value such as `Trueish` or
    /// `False_` was read by its first letters).
    #[test]
    fn fortran_order_must_be_a_whole_literal() {
        let good = encode_c("<f8", "(2, 2)", &[1.0; 4]);
        assert!(parse(&good).is_ok());
        for bad in ["Trueish", "False_", "TrueFalse"] {
            let text = String::from_utf8_lossy(&good).replace("False", bad);
            let mut bytes = good[..8].to_vec();
            let hlen = u16::from_le_bytes([good[8], good[9]]) as usize + bad.len() - 5;
            bytes.extend_from_slice(&(hlen as u16).to_le_bytes());
            bytes.extend_from_slice(&text.as_bytes()[10..10 + hlen]);
            bytes.extend_from_slice(&good[good.len() - 32..]);
            let e = parse(&bytes).unwrap_err();
            assert!(e.0.contains("fortran_order"), "{bad}: {e}");
        }
    }

    /// Shapes whose byte size overflows are refused with the shape in the message.
    #[test]
    fn overflowing_shapes_name_the_shape() {
        for shape in ["(4294967296, 4294967296)", "(2305843009213693952,)"] {
            let e = parse(&encode_c("<f8", shape, &[])).unwrap_err();
            assert!(e.0.contains("too large"), "{shape}: {e}");
        }
    }

    /// `read_rows` returns exactly the rows `parse` gives for the whole file, in C and
    /// Fortran order, f32 and big-endian f64 and 1-D, and refuses rows past the end and a
    /// file whose length disagrees with its header.
    #[test]
    fn read_rows_equals_the_whole_file_sliced() {
        let dir = std::env::temp_dir().join(format!("cuqr-npy-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.npy");
        let mut rng = Rng::new(21);
        let a = random_mat::<f64>(&mut rng, 29, 4);
        let row_major: Vec<f64> = (0..29)
            .flat_map(|i| (0..4).map(move |j| (i, j)))
            .map(|(i, j)| a[(i, j)])
            .collect();
        let files = [
            encode(&a, false),
            encode_c("<f8", "(29, 4)", &row_major),
            encode_c(">f8", "(29, 4)", &row_major),
            encode_c("<f4", "(29, 4)", &row_major),
            encode(&random_mat::<f32>(&mut rng, 29, 1), true),
        ];
        for bytes in files {
            std::fs::write(&path, &bytes).unwrap();
            let whole = parse(&bytes).unwrap();
            assert_eq!(shape_of(&path).unwrap(), (whole.nrows, whole.ncols));
            for (r0, len) in [(0, 29), (0, 1), (5, 11), (28, 1), (29, 0)] {
                let part = read_rows(&path, r0, len).unwrap();
                assert_eq!((part.nrows, part.ncols), (len, whole.ncols));
                assert_eq!(part.one_d, whole.one_d);
                for j in 0..whole.ncols {
                    for i in 0..len {
                        assert_eq!(
                            part.data[i + j * len].to_bits(),
                            whole.data[r0 + i + j * whole.nrows].to_bits()
                        );
                    }
                }
            }
            let e = read_rows(&path, 20, 10).unwrap_err();
            assert!(e.0.contains("rows 20..30 asked of 29 rows"), "{e}");
            let mut short = bytes.clone();
            short.pop();
            std::fs::write(&path, &short).unwrap();
            assert!(read_rows(&path, 0, 1).unwrap_err().0.contains("needs"));
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    /// `read_file` reads in stages: a file that is not `.npy` is refused after its
    /// preamble (even an endless stream), a file with more data than its header
    /// announces is refused without reading the rest, and a valid file, a short one
    /// and an oversized header give the same results as `parse`.
    #[test]
    fn read_file_reads_only_what_the_header_announces() {
        let dir = std::env::temp_dir().join(format!("cuqr-npy-read-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.npy");
        let a = Mat::<f64>::from_fn(7, 3, |i, j| (i * 3 + j) as f64 - 2.5);
        let good = encode(&a, false);
        std::fs::write(&path, &good).unwrap();
        assert_eq!(read_file(&path).unwrap(), parse(&good).unwrap());
        // Trailing data (one byte or a megabyte): refused, naming the file.
        for extra in [1usize, 1 << 20] {
            let mut long = good.clone();
            long.extend(std::iter::repeat_n(0u8, extra));
            std::fs::write(&path, &long).unwrap();
            let e = read_file(&path).unwrap_err();
            assert!(e.0.contains("longer than the header says"), "{e}");
            assert!(e.0.contains("a.npy"), "{e}");
        }
        // Short data: the parser's message.
        std::fs::write(&path, &good[..good.len() - 8]).unwrap();
        let e = read_file(&path).unwrap_err();
        assert_eq!(
            e.0,
            format!(
                "{}: {}",
                path.display(),
                parse(&good[..good.len() - 8]).unwrap_err().0
            )
        );
        // A header announcing 2^40 values with none present: refused, nothing huge
        // allocated.
        std::fs::write(&path, encode_c("<f8", "(1099511627776,)", &[])).unwrap();
        assert!(read_file(&path).unwrap_err().0.contains("needs"));
        // A format-2.0 header length beyond MAX_HEADER.
        let mut v2 = MAGIC.to_vec();
        v2.extend_from_slice(&[2, 0]);
        v2.extend_from_slice(&(MAX_HEADER as u32 + 1).to_le_bytes());
        std::fs::write(&path, &v2).unwrap();
        assert!(read_file(&path)
            .unwrap_err()
            .0
            .contains("longer than cuqr reads"));
        // Not .npy at all, and an endless stream of zeros.
        std::fs::write(&path, b"hello").unwrap();
        assert!(read_file(&path).unwrap_err().0.contains("magic"));
        let zero = Path::new("/dev/zero");
        if zero.exists() {
            assert!(read_file(zero).unwrap_err().0.contains("not a .npy file"));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    mod fuzz {
        use super::super::*;
        use proptest::prelude::*;

        /// Whatever the bytes, `parse` returns (no panic), and an accepted array
        /// holds exactly rows × columns values.
        fn check(bytes: &[u8]) -> Result<(), TestCaseError> {
            if let Ok(a) = parse(bytes) {
                prop_assert_eq!(a.data.len(), a.nrows * a.ncols);
                prop_assert!(!a.one_d || a.ncols == 1);
            }
            Ok(())
        }

        fn valid() -> impl Strategy<Value = Vec<u8>> {
            (0usize..5, 0usize..5, any::<bool>(), any::<bool>()).prop_map(|(m, n, f32, one_d)| {
                let n = if one_d { 1 } else { n };
                if f32 {
                    encode(&Mat::<f32>::from_fn(m, n, |i, j| (i + 7 * j) as f32), one_d)
                } else {
                    encode(
                        &Mat::<f64>::from_fn(m, n, |i, j| (i * j) as f64 - 0.5),
                        one_d,
                    )
                }
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(400))]

            #[test]
            fn random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
                check(&bytes)?;
                // The same bytes behind a valid magic string and version.
                let mut b = b"\x93NUMPY".to_vec();
                b.extend_from_slice(&bytes);
                check(&b)?;
            }

            #[test]
            fn mutated_valid_files(
                file in valid(),
                cut in any::<prop::sample::Index>(),
                flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
                text in "[(),: 0-9a-zA-Z'<>=|{}\\[\\]L-]{0,12}",
                at in any::<prop::sample::Index>(),
            ) {
                check(&file)?;
                prop_assert!(parse(&file).is_ok());
                check(&file[..cut.index(file.len() + 1)])?;
                let mut f = file.clone();
                for (i, x) in &flips {
                    let k = i.index(f.len());
                    f[k] = *x;
                }
                check(&f)?;
                // Header text spliced in (the header is the first 64 bytes here).
                let mut g = file.clone();
                let k = 10 + at.index(54);
                g.splice(k..k, text.bytes());
                check(&g)?;
            }
        }
    }
}
