//! Avro binary encoding primitives (zig-zag varints, little-endian floats, length-prefixed bytes)
//! with a bounds-checked reader that reports damage as [`Error::Corrupt`] instead of panicking.

use crate::error::{Error, Result};

/// Appends `v` as an Avro `long`/`int` (zig-zag, then base-128 varint, low groups first).
#[inline]
pub fn write_long(out: &mut Vec<u8>, v: i64) {
    let mut n = ((v << 1) ^ (v >> 63)) as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends an Avro `bytes`/`string`: long length, then the bytes.
#[inline]
pub fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// Minimal big-endian two's-complement bytes of `v`, as Java's `BigInteger.toByteArray` gives
/// (Avro `decimal` on `bytes` stores exactly these).
pub fn decimal_to_min_bytes(v: i128) -> Vec<u8> {
    let full = v.to_be_bytes();
    let mut skip = 0;
    // A leading byte is redundant when it only repeats the sign bit of the byte after it.
    while skip < full.len() - 1 {
        let (b, next) = (full[skip], full[skip + 1]);
        if (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
            skip += 1;
        } else {
            break;
        }
    }
    full[skip..].to_vec()
}

/// Sign-extends big-endian two's-complement bytes to an `i128`; `None` when they do not fit.
pub fn decimal_from_be_bytes(b: &[u8]) -> Option<i128> {
    let negative = b.first().is_some_and(|x| x & 0x80 != 0);
    let fill = if negative { 0xff } else { 0x00 };
    let (extra, tail) = b.split_at(b.len().saturating_sub(16));
    // Bytes beyond 16 must be pure sign extension, and must agree with the sign of the rest.
    if extra.iter().any(|&x| x != fill) || tail.first().is_some_and(|x| (x & 0x80 != 0) != negative)
    {
        return None;
    }
    let mut full = [fill; 16];
    full[16 - tail.len()..].copy_from_slice(tail);
    Some(i128::from_be_bytes(full))
}

/// Bounds-checked reader over Avro binary data.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Reads a zig-zag varint `long`.
    #[inline]
    pub fn long(&mut self) -> Result<i64> {
        let mut n: u64 = 0;
        let mut shift = 0;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(truncated("varint"));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(Error::Corrupt("Avro varint overflows a long".into()));
            }
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 63 {
                return Err(Error::Corrupt("Avro varint longer than 10 bytes".into()));
            }
        }
        Ok(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    /// Reads a zig-zag varint `int`, rejecting values outside 32 bits.
    #[inline]
    pub fn int(&mut self) -> Result<i32> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| Error::Corrupt(format!("Avro int out of range: {v}")))
    }

    /// Reads a non-negative length (of bytes, a string, or an item count).
    #[inline]
    pub fn length(&mut self) -> Result<usize> {
        let v = self.long()?;
        usize::try_from(v).map_err(|_| Error::Corrupt(format!("negative Avro length {v}")))
    }

    /// Reads `n` raw bytes.
    #[inline]
    pub fn fixed(&mut self, n: usize) -> Result<&'a [u8]> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.buf.len() => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(truncated("bytes")),
        }
    }

    /// Reads a length-prefixed `bytes`/`string` payload.
    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.length()?;
        self.fixed(n)
    }

    /// Reads a UTF-8 `string`.
    pub fn string(&mut self) -> Result<&'a str> {
        std::str::from_utf8(self.bytes()?)
            .map_err(|_| Error::Corrupt("Avro string is not UTF-8".into()))
    }

    /// Reads a `boolean` (Java's decoder takes exactly 1 as true).
    #[inline]
    pub fn boolean(&mut self) -> Result<bool> {
        Ok(self.fixed(1)?[0] == 1)
    }

    /// Reads a little-endian `float`.
    #[inline]
    pub fn float(&mut self) -> Result<f32> {
        let b = self.fixed(4)?;
        Ok(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a little-endian `double`.
    #[inline]
    pub fn double(&mut self) -> Result<f64> {
        let b = self.fixed(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_le_bytes(a))
    }

    /// Reads the item count of the next array/map block. A negative count announces a byte size
    /// that follows it (which we do not need), per the Avro spec.
    pub fn block_count(&mut self) -> Result<usize> {
        let n = self.long()?;
        if n < 0 {
            self.long()?;
            return n
                .checked_neg()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| Error::Corrupt("Avro block count overflows".into()));
        }
        Ok(n as usize)
    }
}

fn truncated(what: &str) -> Error {
    Error::Corrupt(format!("Avro datum truncated while reading {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_varints_match_the_avro_spec_table() {
        // Avro spec examples: 0→00, -1→01, 1→02, -2→03, 2→04, -64→7f, 64→80 01.
        let cases: [(i64, &[u8]); 7] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-2, &[0x03]),
            (2, &[0x04]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
        ];
        for (v, bytes) in cases {
            let mut out = Vec::new();
            write_long(&mut out, v);
            assert_eq!(out, bytes, "{v}");
            assert_eq!(Reader::new(bytes).long().unwrap(), v);
        }
        for v in [i64::MIN, i64::MAX, i32::MIN as i64, 1 << 40] {
            let mut out = Vec::new();
            write_long(&mut out, v);
            assert_eq!(Reader::new(&out).long().unwrap(), v);
        }
    }

    #[test]
    fn bad_varints_are_corrupt() {
        assert!(Reader::new(&[0x80]).long().is_err());
        assert!(Reader::new(&[0xff; 11]).long().is_err());
        assert!(Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x10]).int().is_err());
        assert!(Reader::new(&[0x01]).length().is_err());
        assert!(Reader::new(&[0x04, b'a']).bytes().is_err());
    }

    #[test]
    fn decimal_bytes_match_java_big_integer() {
        // BigInteger.toByteArray: 0→[00], 127→[7f], 128→[00 80], -1→[ff], -128→[80], -129→[ff 7f].
        let cases: [(i128, &[u8]); 6] = [
            (0, &[0x00]),
            (127, &[0x7f]),
            (128, &[0x00, 0x80]),
            (-1, &[0xff]),
            (-128, &[0x80]),
            (-129, &[0xff, 0x7f]),
        ];
        for (v, bytes) in cases {
            assert_eq!(decimal_to_min_bytes(v), bytes, "{v}");
            assert_eq!(decimal_from_be_bytes(bytes), Some(v));
        }
        assert_eq!(decimal_from_be_bytes(&[0xff; 20]), Some(-1));
        assert_eq!(decimal_from_be_bytes(&[0x01; 17]), None);
        for v in [i128::MIN, i128::MAX] {
            assert_eq!(decimal_from_be_bytes(&decimal_to_min_bytes(v)), Some(v));
        }
    }
}
