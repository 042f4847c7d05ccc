//! Forward scan of a log file's bytes into blocks, resynchronising on `#HUDI#` after damage.
//!
//! Follows `HoodieLogFileReader.readBlock`: read the magic and the block size, check that the
//! trailing total length agrees, and otherwise emit a CORRUPT block that runs to the next magic
//! (or EOF) and continue there. Two deliberate differences from Java, both so that a torn append
//! never costs data that was committed before it:
//!
//! * Java also requires the 6 bytes after a block to be a magic or EOF. We instead require the
//!   block's own layout (header, content length, footer) to add up exactly to its size, which is
//!   a stronger check of the block itself, so garbage *after* a sound block marks only the
//!   garbage corrupt (Java would drop the sound block too).
//! * Java silently ignores 1–5 trailing bytes and throws on a file that does not start with a
//!   magic; we report both as CORRUPT blocks.
//!
//! Nothing here panics on any input: every read is bounds-checked.

use std::ops::Range;

use super::block::{header_get, BlockType, Header, HeaderKey, LOG_FORMAT_VERSION, MAGIC};

/// One block of a log file as located by [`read_blocks`]; its content is read lazily from the
/// file bytes through [`LogBlock::content`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogBlock {
    /// Byte offset of the block (its magic, or the first damaged byte) in the file.
    pub offset: usize,
    /// Bytes the block occupies, magic and trailing length included.
    pub size: usize,
    /// Block type; [`BlockType::Corrupt`] for bytes that do not frame as a block.
    pub block_type: BlockType,
    /// Log format version of the block (0 for corrupt blocks).
    pub format_version: i32,
    /// Header entries in file order.
    pub header: Header,
    /// Footer entries in file order (always empty in files written so far).
    pub footer: Header,
    /// Byte range of the content in the file; for corrupt blocks, the whole damaged range.
    pub content_range: Range<usize>,
    /// Why the block was judged corrupt.
    pub corrupt_reason: Option<String>,
}

impl LogBlock {
    /// The block's content, given the bytes of the file it was read from.
    pub fn content<'a>(&self, file: &'a [u8]) -> &'a [u8] {
        &file[self.content_range.clone()]
    }

    /// True for blocks synthesized over damaged bytes.
    pub fn is_corrupt(&self) -> bool {
        self.block_type == BlockType::Corrupt
    }

    /// The value of a header entry (the last one if a key repeats, as Java's map would keep).
    pub fn header_value(&self, key: HeaderKey) -> Option<&str> {
        header_get(&self.header, key)
    }

    /// The `INSTANT_TIME` header.
    pub fn instant_time(&self) -> Option<&str> {
        self.header_value(HeaderKey::InstantTime)
    }
}

/// Splits a whole log file into blocks, in file order; see the module docs for the rules.
pub fn read_blocks(file: &[u8]) -> Vec<LogBlock> {
    LogReader::new(file).collect()
}

/// Iterator over the blocks of a log file's bytes.
pub struct LogReader<'a> {
    file: &'a [u8],
    pos: usize,
}

impl<'a> LogReader<'a> {
    /// A reader positioned at the start of `file`.
    pub fn new(file: &'a [u8]) -> Self {
        Self { file, pos: 0 }
    }
}

impl Iterator for LogReader<'_> {
    type Item = LogBlock;

    fn next(&mut self) -> Option<LogBlock> {
        if self.pos >= self.file.len() {
            return None;
        }
        let start = self.pos;
        let block = match parse_block(self.file, start) {
            Ok(block) => block,
            Err(reason) => {
                let end = find_magic(self.file, start + 1).unwrap_or(self.file.len());
                LogBlock {
                    offset: start,
                    size: end - start,
                    block_type: BlockType::Corrupt,
                    format_version: 0,
                    header: Vec::new(),
                    footer: Vec::new(),
                    content_range: start..end,
                    corrupt_reason: Some(reason),
                }
            }
        };
        self.pos = start + block.size;
        Some(block)
    }
}

/// Offset of the first `#HUDI#` at or after `from`.
pub fn find_magic(file: &[u8], from: usize) -> Option<usize> {
    let hay = file.get(from..)?;
    hay.windows(MAGIC.len())
        .position(|w| w == MAGIC)
        .map(|p| p + from)
}

/// Bounds-checked big-endian cursor over one block.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        match self.pos.checked_add(n) {
            Some(stop) if stop <= self.end => {
                let s = &self.buf[self.pos..stop];
                self.pos = stop;
                Ok(s)
            }
            _ => Err(format!("{what} runs past the end of the block")),
        }
    }

    fn i32(&mut self, what: &str) -> Result<i32, String> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i64(&mut self, what: &str) -> Result<i64, String> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    fn len(&mut self, what: &str) -> Result<usize, String> {
        let n = self.i32(what)?;
        usize::try_from(n).map_err(|_| format!("negative {what} {n}"))
    }

    fn metadata(&mut self, what: &str) -> Result<Header, String> {
        let count = self.len(what)?;
        // Each entry takes at least 8 bytes; refusing larger counts up front keeps a garbage
        // count from reserving memory.
        if count > (self.end - self.pos) / 8 {
            return Err(format!("{what} entry count {count} exceeds the block"));
        }
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            let key = HeaderKey::from_ordinal(self.i32(what)?);
            let len = self.len(what)?;
            let bytes = self.take(len, what)?;
            // Java decodes with the platform charset, replacing malformed input; lossy UTF-8
            // is the same outcome for the UTF-8 default.
            entries.push((key, String::from_utf8_lossy(bytes).into_owned()));
        }
        Ok(entries)
    }
}

/// Parses the block at `start`, or says why the bytes there are not a sound block.
fn parse_block(file: &[u8], start: usize) -> Result<LogBlock, String> {
    let rest = &file[start..];
    if rest.len() < MAGIC.len() || &rest[..MAGIC.len()] != MAGIC {
        return Err("no #HUDI# magic at block start".into());
    }
    if rest.len() < 14 {
        return Err("block size truncated".into());
    }
    let mut size_bytes = [0u8; 8];
    size_bytes.copy_from_slice(&rest[6..14]);
    let block_size = i64::from_be_bytes(size_bytes);
    // version, type, header count, content length, footer count, total length.
    const MIN_BLOCK_SIZE: i64 = 4 + 4 + 4 + 8 + 4 + 8;
    if block_size < MIN_BLOCK_SIZE {
        return Err(format!("block size {block_size} too small"));
    }
    let available = (rest.len() - 14) as u64;
    if block_size as u64 > available {
        return Err(format!(
            "block size {block_size} runs past end of file ({available} bytes left)"
        ));
    }
    let block_size = block_size as usize;
    let end = start + 14 + block_size;
    let mut trailer = [0u8; 8];
    trailer.copy_from_slice(&file[end - 8..end]);
    let total = i64::from_be_bytes(trailer);
    if total.checked_sub(6) != Some(block_size as i64) {
        return Err(format!(
            "trailing block length {total} does not match block size {block_size}"
        ));
    }
    let mut c = Cursor {
        buf: file,
        pos: start + 14,
        end: end - 8,
    };
    let version = c.i32("format version")?;
    if version != LOG_FORMAT_VERSION {
        return Err(format!("unsupported log format version {version}"));
    }
    let type_ordinal = c.i32("block type")?;
    let block_type = match BlockType::from_ordinal(type_ordinal) {
        Some(BlockType::Corrupt) | None => {
            return Err(format!("invalid block type {type_ordinal}"));
        }
        Some(t) => t,
    };
    let header = c.metadata("header")?;
    let content_len = c.i64("content length")?;
    let content_len = usize::try_from(content_len)
        .map_err(|_| format!("negative content length {content_len}"))?;
    let content_start = c.pos;
    c.take(content_len, "content")?;
    let content_range = content_start..c.pos;
    let footer = c.metadata("footer")?;
    if c.pos != c.end {
        return Err(format!(
            "block layout ends {} bytes before its trailing length",
            c.end - c.pos
        ));
    }
    Ok(LogBlock {
        offset: start,
        size: end - start,
        block_type,
        format_version: version,
        header,
        footer,
        content_range,
        corrupt_reason: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logformat::block::{encode_block, encode_command_block, rollback_header};

    fn data_block(instant: &str, payload: &[u8]) -> Vec<u8> {
        encode_block(
            BlockType::ParquetData,
            &[(HeaderKey::InstantTime, instant.to_string())],
            payload,
            &[],
        )
        .unwrap()
    }

    #[test]
    fn reads_consecutive_blocks() {
        let mut file = data_block("001", b"abc");
        let second_at = file.len();
        file.extend(encode_command_block(&rollback_header("002", "001")).unwrap());
        let blocks = read_blocks(&file);
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].offset, 0);
        assert_eq!(blocks[0].size, second_at);
        assert_eq!(blocks[0].content(&file), b"abc");
        assert_eq!(blocks[0].instant_time(), Some("001"));
        assert_eq!(blocks[1].offset, second_at);
        assert_eq!(blocks[1].block_type, BlockType::Command);
        assert_eq!(
            blocks[1].header_value(HeaderKey::TargetInstantTime),
            Some("001")
        );
        assert!(blocks.iter().all(|b| !b.is_corrupt()));
    }

    #[test]
    fn torn_tail_at_every_offset_keeps_earlier_blocks() {
        let first = data_block("001", b"first block payload");
        let second = data_block("002", b"second #HUDI block payload");
        for cut in 0..second.len() {
            for garbage in [&b""[..], b"\x00\xffgarbage\x01"] {
                let mut file = first.clone();
                file.extend_from_slice(&second[..cut]);
                file.extend_from_slice(garbage);
                let blocks = read_blocks(&file);
                assert_eq!(blocks[0].block_type, BlockType::ParquetData, "cut {cut}");
                assert_eq!(blocks[0].content(&file), b"first block payload");
                let tail_len = cut + garbage.len();
                if tail_len == 0 {
                    assert_eq!(blocks.len(), 1);
                } else {
                    assert!(blocks[1..].iter().all(LogBlock::is_corrupt), "cut {cut}");
                    let covered: usize = blocks[1..].iter().map(|b| b.size).sum();
                    assert_eq!(covered, tail_len, "cut {cut}");
                }
            }
        }
    }

    #[test]
    fn garbage_between_blocks_is_one_corrupt_block_and_resyncs() {
        let mut file = data_block("001", b"x");
        let garbage_at = file.len();
        file.extend_from_slice(b"not a block at all");
        let third_at = file.len();
        file.extend(data_block("003", b"y"));
        let blocks = read_blocks(&file);
        assert_eq!(blocks.len(), 3);
        assert!(blocks[1].is_corrupt());
        assert_eq!(blocks[1].offset, garbage_at);
        assert_eq!(blocks[1].size, third_at - garbage_at);
        assert_eq!(blocks[2].offset, third_at);
        assert_eq!(blocks[2].content(&file), b"y");
    }

    #[test]
    fn mismatched_trailing_length_is_corrupt() {
        let mut file = data_block("001", b"abc");
        let n = file.len();
        file[n - 1] ^= 1;
        let blocks = read_blocks(&file);
        assert_eq!(blocks.len(), 1);
        assert!(blocks[0].is_corrupt());
        assert!(blocks[0]
            .corrupt_reason
            .as_deref()
            .unwrap()
            .contains("trailing"));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A deterministic xorshift stream: garbage plus magics so the framing paths are hit.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for round in 0..2000 {
            let mut buf = Vec::new();
            let len = round % 300;
            for i in 0..len {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                if i % 50 == 0 && state % 3 == 0 {
                    buf.extend_from_slice(MAGIC);
                }
                buf.push(state as u8);
            }
            let blocks = read_blocks(&buf);
            let covered: usize = blocks.iter().map(|b| b.size).sum();
            assert_eq!(covered, buf.len());
        }
    }
}
