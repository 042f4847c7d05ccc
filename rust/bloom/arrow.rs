//! Batch add and probe over Arrow string arrays: the bloom index probes whole key columns.

use arrow_array::cast::AsArray;
use arrow_array::{Array, BooleanArray};
use arrow_buffer::{BooleanBuffer, Buffer};
use arrow_schema::DataType;

use super::simple::{BitVector, HashParams};
use super::{probe, BloomFilter, BloomFilterType};
use crate::error::{Error, Result};

/// Runs `$body` with `$key: impl Fn(usize) -> Option<&[u8]>` over any string or binary array.
macro_rules! with_keys {
    ($array:expr, |$key:ident| $body:expr) => {{
        let array: &dyn Array = $array;
        match array.data_type() {
            DataType::Utf8 => {
                let a = array.as_string::<i32>();
                let $key = |i: usize| a.is_valid(i).then(|| a.value(i).as_bytes());
                Ok($body)
            }
            DataType::LargeUtf8 => {
                let a = array.as_string::<i64>();
                let $key = |i: usize| a.is_valid(i).then(|| a.value(i).as_bytes());
                Ok($body)
            }
            DataType::Utf8View => {
                let a = array.as_string_view();
                let $key = |i: usize| a.is_valid(i).then(|| a.value(i).as_bytes());
                Ok($body)
            }
            DataType::Binary => {
                let a = array.as_binary::<i32>();
                let $key = |i: usize| a.is_valid(i).then(|| a.value(i));
                Ok($body)
            }
            DataType::LargeBinary => {
                let a = array.as_binary::<i64>();
                let $key = |i: usize| a.is_valid(i).then(|| a.value(i));
                Ok($body)
            }
            DataType::BinaryView => {
                let a = array.as_binary_view();
                let $key = |i: usize| a.is_valid(i).then(|| a.value(i));
                Ok($body)
            }
            other => Err(Error::Unsupported(format!(
                "bloom filter keys must be a string or binary array, got {other}"
            ))),
        }
    }};
}

impl BloomFilter {
    /// Adds every key of a string (or binary) array, in order. A null key is
    /// `Error::InvalidArgument` and leaves the filter unchanged.
    pub fn add_array(&mut self, keys: &dyn Array) -> Result<()> {
        if keys.null_count() > 0 {
            return Err(Error::InvalidArgument(format!(
                "{} of {} bloom filter keys are null",
                keys.null_count(),
                keys.len()
            )));
        }
        with_keys!(keys, |key| {
            let ks: Vec<&[u8]> = (0..keys.len()).filter_map(key).collect();
            let rows: Vec<usize> = match self {
                BloomFilter::Simple(_) => vec![0; ks.len()],
                BloomFilter::DynamicV0(f) => ks.iter().map(|_| f.claim_row()).collect(),
            };
            let (params, bits): (HashParams, &mut [BitVector]) = match self {
                BloomFilter::Simple(f) => (f.params, std::slice::from_mut(&mut f.bits)),
                BloomFilter::DynamicV0(f) => (f.params, &mut f.rows[..]),
            };
            super::probe::add_batch(&params, bits, &ks, &rows);
        })
    }

    /// Probes every key of a string (or binary) array; null keys give null results.
    pub fn might_contain_array(&self, keys: &dyn Array) -> Result<BooleanArray> {
        let (params, rows) = self.parts();
        let n = keys.len();
        let words = with_keys!(keys, |key| probe::contains_batch(params, rows, n, key))?;
        let values = BooleanBuffer::new(Buffer::from_vec(words), 0, n);
        Ok(BooleanArray::new(values, keys.logical_nulls()))
    }
}

/// Builds a filter over `keys` and returns its footer value: what a writer puts under
/// `org.apache.hudi.bloomfilter` for a new base file.
pub fn footer_for_keys(
    keys: &dyn Array,
    num_entries: i32,
    fpp: f64,
    max_entries: i32,
    ty: BloomFilterType,
) -> Result<String> {
    let mut filter = match ty {
        BloomFilterType::Simple => BloomFilter::simple(num_entries, fpp)?,
        BloomFilterType::DynamicV0 => BloomFilter::dynamic_v0(num_entries, fpp, max_entries)?,
    };
    filter.add_array(keys)?;
    Ok(filter.to_footer())
}
