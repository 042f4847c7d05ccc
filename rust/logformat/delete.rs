//! DELETE_BLOCK content (version 3): Java's `HoodieDeleteRecordList` as an Avro binary datum.
//!
//! Content = int32 version (3), int32 payload length, payload. The payload is
//! `record { array<record { union{null,string} recordKey; union{null,string} partitionPath;
//! union{null, BooleanWrapper, IntWrapper, LongWrapper, FloatWrapper, DoubleWrapper,
//! BytesWrapper, StringWrapper, DateWrapper, DecimalWrapper, TimeMicrosWrapper,
//! TimestampMicrosWrapper} orderingVal }> deleteRecordList }`, each wrapper a record with one
//! `value` field (spec §7.3). This is Java's layout, not the primitive union hudi-rs bundles.
//!
//! In Arrow the ordering value is a dense union whose type ids are the Avro branch indices, so a
//! decoded block re-encodes to the same bytes; see [`ordering_value_field`].

use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Decimal256Type, DurationMicrosecondType, Float16Type,
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, Float32Array,
    Float64Array, Int32Array, Int64Array, NullArray, RecordBatch, StringArray,
    Time64MicrosecondArray, TimestampMicrosecondArray, UnionArray,
};
use arrow_buffer::ScalarBuffer;
use arrow_schema::{DataType, Field, Schema, TimeUnit, UnionFields, UnionMode};

use super::block::{encode_block, len_i32, BlockType, HeaderKey, CONTENT_VERSION};
use super::datum::binary::{
    decimal_from_be_bytes, decimal_to_min_bytes, write_bytes, write_long, Reader,
};
use crate::error::{Error, Result};

/// Scale of `DecimalWrapper.value` (`decimal(30, 15)` on `bytes`).
pub const DECIMAL_SCALE: i8 = 15;
/// Precision of `DecimalWrapper.value`.
pub const DECIMAL_PRECISION: u8 = 30;

/// An ordering value as persisted in a delete record; variant order = Avro union branch index.
#[derive(Clone, Debug, PartialEq)]
pub enum OrderingValue {
    /// Branch 0: no ordering value.
    Null,
    /// Branch 1: `BooleanWrapper`.
    Boolean(bool),
    /// Branch 2: `IntWrapper` (Spark SQL deletes write `Int(0)`, "natural order").
    Int(i32),
    /// Branch 3: `LongWrapper`.
    Long(i64),
    /// Branch 4: `FloatWrapper`.
    Float(f32),
    /// Branch 5: `DoubleWrapper`.
    Double(f64),
    /// Branch 6: `BytesWrapper`.
    Bytes(Vec<u8>),
    /// Branch 7: `StringWrapper`.
    String(String),
    /// Branch 8: `DateWrapper`, days since the epoch.
    Date(i32),
    /// Branch 9: `DecimalWrapper`, the unscaled value at scale 15 (|v| < 10^30).
    Decimal(i128),
    /// Branch 10: `TimeMicrosWrapper`, microseconds since midnight.
    TimeMicros(i64),
    /// Branch 11: `TimestampMicrosWrapper`, microseconds since the epoch (UTC).
    TimestampMicros(i64),
}

/// Names of the ordering-value union members, indexed by Avro branch (= Arrow type id).
pub const ORDERING_BRANCH_NAMES: [&str; 12] = [
    "null",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "bytes",
    "string",
    "date",
    "decimal",
    "time_micros",
    "timestamp_micros",
];

impl OrderingValue {
    /// The Avro union branch index (also the Arrow union type id).
    pub fn branch(&self) -> i8 {
        match self {
            Self::Null => 0,
            Self::Boolean(_) => 1,
            Self::Int(_) => 2,
            Self::Long(_) => 3,
            Self::Float(_) => 4,
            Self::Double(_) => 5,
            Self::Bytes(_) => 6,
            Self::String(_) => 7,
            Self::Date(_) => 8,
            Self::Decimal(_) => 9,
            Self::TimeMicros(_) => 10,
            Self::TimestampMicros(_) => 11,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        write_long(out, i64::from(self.branch()));
        match self {
            Self::Null => {}
            Self::Boolean(b) => out.push(u8::from(*b)),
            Self::Int(v) | Self::Date(v) => write_long(out, i64::from(*v)),
            Self::Long(v) | Self::TimeMicros(v) | Self::TimestampMicros(v) => write_long(out, *v),
            Self::Float(v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::Double(v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::Bytes(b) => write_bytes(out, b),
            Self::String(s) => write_bytes(out, s.as_bytes()),
            Self::Decimal(v) => write_bytes(out, &decimal_to_min_bytes(*v)),
        }
    }

    fn read(r: &mut Reader<'_>) -> Result<Self> {
        let branch = r.long()?;
        Ok(match branch {
            0 => Self::Null,
            1 => Self::Boolean(r.boolean()?),
            2 => Self::Int(r.int()?),
            3 => Self::Long(r.long()?),
            4 => Self::Float(r.float()?),
            5 => Self::Double(r.double()?),
            6 => Self::Bytes(r.bytes()?.to_vec()),
            7 => Self::String(r.string()?.to_string()),
            8 => Self::Date(r.int()?),
            9 => {
                let b = r.bytes()?;
                let v = (!b.is_empty())
                    .then(|| decimal_from_be_bytes(b))
                    .flatten()
                    .filter(|v| v.unsigned_abs() < 10u128.pow(u32::from(DECIMAL_PRECISION)))
                    .ok_or_else(|| {
                        Error::Corrupt("DecimalWrapper value is not a decimal(30,15)".into())
                    })?;
                Self::Decimal(v)
            }
            10 => Self::TimeMicros(r.long()?),
            11 => Self::TimestampMicros(r.long()?),
            other => {
                return Err(Error::Corrupt(format!(
                    "delete record ordering value has unknown union branch {other}"
                )))
            }
        })
    }
}

/// One entry of a delete block.
#[derive(Clone, Debug, PartialEq)]
pub struct DeleteRecord {
    /// `_hoodie_record_key` of the deleted record.
    pub record_key: Option<String>,
    /// Partition path of the deleted record.
    pub partition_path: Option<String>,
    /// Ordering value the delete carries (§9.5 decides whether it wins).
    pub ordering_value: OrderingValue,
}

fn write_opt_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => write_long(out, 0),
        Some(s) => {
            write_long(out, 1);
            write_bytes(out, s.as_bytes());
        }
    }
}

fn read_opt_string(r: &mut Reader<'_>) -> Result<Option<String>> {
    match r.long()? {
        0 => Ok(None),
        1 => Ok(Some(r.string()?.to_string())),
        b => Err(Error::Corrupt(format!(
            "delete record string has unknown union branch {b}"
        ))),
    }
}

/// Serializes delete records into version-3 delete block content.
pub fn encode_delete_content<'a>(
    records: impl ExactSizeIterator<Item = (Option<&'a str>, Option<&'a str>, &'a OrderingValue)>,
) -> Result<Vec<u8>> {
    let mut payload = Vec::new();
    // Java's encoder writes the whole array as one block: count (if non-zero), items, 0.
    let n = records.len();
    if n > 0 {
        write_long(&mut payload, n as i64);
    }
    for (key, partition, ordering) in records {
        write_opt_string(&mut payload, key);
        write_opt_string(&mut payload, partition);
        ordering.write(&mut payload);
    }
    write_long(&mut payload, 0);
    let mut content = Vec::with_capacity(payload.len() + 8);
    content.extend_from_slice(&CONTENT_VERSION.to_be_bytes());
    content.extend_from_slice(&len_i32(payload.len(), "delete block payload")?.to_be_bytes());
    content.extend_from_slice(&payload);
    Ok(content)
}

/// Parses version-3 delete block content.
pub fn decode_delete_content(content: &[u8]) -> Result<Vec<DeleteRecord>> {
    if content.len() < 8 {
        return Err(Error::Corrupt(
            "delete block content shorter than 8 bytes".into(),
        ));
    }
    let version = i32::from_be_bytes([content[0], content[1], content[2], content[3]]);
    match version {
        CONTENT_VERSION => {}
        // Versions 1 and 2 hold Kryo-serialized Java objects.
        1 | 2 => {
            return Err(Error::Unsupported(format!(
                "delete block content version {version} (only 3 is supported)"
            )))
        }
        _ => {
            return Err(Error::Corrupt(format!(
                "delete block content version {version} is not a Hudi version"
            )))
        }
    }
    let len = i32::from_be_bytes([content[4], content[5], content[6], content[7]]);
    let payload = usize::try_from(len)
        .ok()
        .and_then(|len| content.get(8..8 + len))
        .ok_or_else(|| Error::Corrupt(format!("delete block payload length {len} is invalid")))?;
    let mut r = Reader::new(payload);
    let mut records = Vec::new();
    loop {
        let count = r.block_count()?;
        if count == 0 {
            break;
        }
        // Every entry takes at least 3 bytes, so a larger count is damage, not a big block.
        if count > r.remaining() / 3 {
            return Err(Error::Corrupt(format!(
                "delete record count {count} exceeds the payload"
            )));
        }
        records.reserve(count);
        for _ in 0..count {
            records.push(DeleteRecord {
                record_key: read_opt_string(&mut r)?,
                partition_path: read_opt_string(&mut r)?,
                ordering_value: OrderingValue::read(&mut r)?,
            });
        }
    }
    if r.remaining() != 0 {
        return Err(Error::Corrupt(format!(
            "{} trailing bytes after the delete record list",
            r.remaining()
        )));
    }
    Ok(records)
}

/// Encodes a complete DELETE_BLOCK from columns: `record_keys` and `partition_paths` are string
/// arrays (nulls allowed, as the schema allows), `ordering_values` any array
/// [`ordering_values_from_arrow`] accepts, or `None` for Spark's default `IntWrapper(0)`.
pub fn encode_delete_block(
    record_keys: &dyn Array,
    partition_paths: &dyn Array,
    ordering_values: Option<&dyn Array>,
    header: &[(HeaderKey, String)],
) -> Result<Vec<u8>> {
    let n = record_keys.len();
    if partition_paths.len() != n || ordering_values.is_some_and(|o| o.len() != n) {
        return Err(Error::InvalidArgument(format!(
            "delete columns differ in length: {n} keys, {} partition paths, {} ordering values",
            partition_paths.len(),
            ordering_values.map_or(n, |o| o.len())
        )));
    }
    let keys = strings_of(record_keys, "record_keys")?;
    let partitions = strings_of(partition_paths, "partition_paths")?;
    let ordering = match ordering_values {
        Some(a) => ordering_values_from_arrow(a)?,
        None => vec![OrderingValue::Int(0); n],
    };
    let content = encode_delete_content(
        keys.iter()
            .zip(&partitions)
            .zip(&ordering)
            .map(|((k, p), o)| (*k, *p, o)),
    )?;
    encode_block(BlockType::Delete, header, &content, &[])
}

fn strings_of<'a>(array: &'a dyn Array, what: &str) -> Result<Vec<Option<&'a str>>> {
    match array.data_type() {
        DataType::Utf8 => Ok(array.as_string::<i32>().iter().collect()),
        DataType::LargeUtf8 => Ok(array.as_string::<i64>().iter().collect()),
        DataType::Utf8View => Ok(array.as_string_view().iter().collect()),
        other => Err(Error::InvalidArgument(format!(
            "{what} must be strings, got {other}"
        ))),
    }
}

/// The Arrow type of decoded ordering values: a dense union whose type ids are the Avro branch
/// indices 0–11 and whose members are named by [`ORDERING_BRANCH_NAMES`]: null, boolean, int32,
/// int64, float32, float64, binary, utf8, date32, decimal128(30,15), time64[us],
/// timestamp[us, UTC].
pub fn ordering_union_fields() -> UnionFields {
    let types = [
        DataType::Null,
        DataType::Boolean,
        DataType::Int32,
        DataType::Int64,
        DataType::Float32,
        DataType::Float64,
        DataType::Binary,
        DataType::Utf8,
        DataType::Date32,
        DataType::Decimal128(DECIMAL_PRECISION, DECIMAL_SCALE),
        DataType::Time64(TimeUnit::Microsecond),
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
    ];
    let fields = types
        .into_iter()
        .zip(ORDERING_BRANCH_NAMES)
        .map(|(t, name)| Field::new(name, t, true));
    UnionFields::try_new(0..12i8, fields).expect("12 distinct type ids")
}

/// The `ordering_value` field of [`deletes_to_arrow`] batches.
pub fn ordering_value_field() -> Field {
    Field::new(
        "ordering_value",
        DataType::Union(ordering_union_fields(), UnionMode::Dense),
        false,
    )
}

/// Schema of decoded delete blocks: `record_key` utf8, `partition_path` utf8,
/// `ordering_value` dense union (see [`ordering_union_fields`]).
pub fn delete_schema() -> Schema {
    Schema::new(vec![
        Field::new("record_key", DataType::Utf8, true),
        Field::new("partition_path", DataType::Utf8, true),
        ordering_value_field(),
    ])
}

/// Ordering values as a dense union array (type ids = Avro branches).
pub fn ordering_values_to_arrow(values: &[OrderingValue]) -> Result<ArrayRef> {
    let mut type_ids = Vec::with_capacity(values.len());
    let mut offsets = Vec::with_capacity(values.len());
    let mut counts = [0i32; 12];
    let mut booleans = Vec::new();
    let mut ints = Vec::new();
    let mut longs = Vec::new();
    let mut floats = Vec::new();
    let mut doubles = Vec::new();
    let mut bytes: Vec<&[u8]> = Vec::new();
    let mut strings: Vec<&str> = Vec::new();
    let mut dates = Vec::new();
    let mut decimals = Vec::new();
    let mut times = Vec::new();
    let mut timestamps = Vec::new();
    for v in values {
        let id = v.branch();
        type_ids.push(id);
        offsets.push(counts[id as usize]);
        counts[id as usize] += 1;
        match v {
            OrderingValue::Null => {}
            OrderingValue::Boolean(b) => booleans.push(*b),
            OrderingValue::Int(x) => ints.push(*x),
            OrderingValue::Long(x) => longs.push(*x),
            OrderingValue::Float(x) => floats.push(*x),
            OrderingValue::Double(x) => doubles.push(*x),
            OrderingValue::Bytes(b) => bytes.push(b),
            OrderingValue::String(s) => strings.push(s),
            OrderingValue::Date(x) => dates.push(*x),
            OrderingValue::Decimal(x) => decimals.push(*x),
            OrderingValue::TimeMicros(x) => times.push(*x),
            OrderingValue::TimestampMicros(x) => timestamps.push(*x),
        }
    }
    let children: Vec<ArrayRef> = vec![
        Arc::new(NullArray::new(counts[0] as usize)),
        Arc::new(BooleanArray::from(booleans)),
        Arc::new(Int32Array::from(ints)),
        Arc::new(Int64Array::from(longs)),
        Arc::new(Float32Array::from(floats)),
        Arc::new(Float64Array::from(doubles)),
        Arc::new(BinaryArray::from_vec(bytes)),
        Arc::new(StringArray::from(strings)),
        Arc::new(Date32Array::from(dates)),
        Arc::new(
            Decimal128Array::from(decimals)
                .with_precision_and_scale(DECIMAL_PRECISION, DECIMAL_SCALE)
                .map_err(arrow_err)?,
        ),
        Arc::new(Time64MicrosecondArray::from(times)),
        Arc::new(TimestampMicrosecondArray::from(timestamps).with_timezone("UTC")),
    ];
    let union = UnionArray::try_new(
        ordering_union_fields(),
        ScalarBuffer::from(type_ids),
        Some(ScalarBuffer::from(offsets)),
        children,
    )
    .map_err(arrow_err)?;
    Ok(Arc::new(union))
}

/// Decoded delete records as a batch with [`delete_schema`].
pub fn deletes_to_arrow(records: &[DeleteRecord]) -> Result<RecordBatch> {
    let keys: StringArray = records.iter().map(|r| r.record_key.as_deref()).collect();
    let partitions: StringArray = records
        .iter()
        .map(|r| r.partition_path.as_deref())
        .collect();
    let ordering: Vec<OrderingValue> = records.iter().map(|r| r.ordering_value.clone()).collect();
    RecordBatch::try_new(
        Arc::new(delete_schema()),
        vec![
            Arc::new(keys),
            Arc::new(partitions),
            ordering_values_to_arrow(&ordering)?,
        ],
    )
    .map_err(arrow_err)
}

fn arrow_err(e: arrow_schema::ArrowError) -> Error {
    Error::InvalidArgument(e.to_string())
}

/// Rescales a decimal to `DecimalWrapper`'s scale 15 without rounding, as Java's
/// `tryUpcastDecimal` requires, and checks it fits precision 30.
pub fn rescale_decimal(unscaled: i128, scale: i8) -> Result<i128> {
    let target = i32::from(DECIMAL_SCALE);
    let diff = target - i32::from(scale);
    let overflow = || {
        Error::InvalidArgument(format!(
            "decimal {unscaled}e-{scale} exceeds decimal(30,15)"
        ))
    };
    let v = if diff >= 0 {
        10i128
            .checked_pow(diff as u32)
            .and_then(|m| unscaled.checked_mul(m))
            .ok_or_else(overflow)?
    } else {
        let d = 10i128.checked_pow((-diff) as u32).ok_or_else(overflow)?;
        if unscaled % d != 0 {
            return Err(Error::InvalidArgument(format!(
                "decimal {unscaled}e-{scale} cannot be rescaled to scale 15 without rounding"
            )));
        }
        unscaled / d
    };
    if v.unsigned_abs() >= 10u128.pow(u32::from(DECIMAL_PRECISION)) {
        return Err(overflow());
    }
    Ok(v)
}

macro_rules! map_primitive {
    ($array:expr, $t:ty, $f:expr) => {{
        let a = $array.as_primitive::<$t>();
        a.iter()
            .map(|v| v.map_or(Ok(OrderingValue::Null), $f))
            .collect::<Result<Vec<_>>>()
    }};
}

/// Converts an Arrow column into ordering values, the way Java wraps the corresponding Java
/// values (`HoodieAvroUtils.wrapValueIntoAvro`): nulls → null branch; booleans; 8/16/32-bit and
/// small unsigned ints → int; int64/uint32/uint64 → long; float16/32 → float; float64 → double;
/// binary → bytes; strings → string; dates → date (days); decimals → decimal rescaled to 15;
/// times → time-micros; timestamps (any unit/zone) → timestamp-micros (floored); a dense or
/// sparse union (such as [`ordering_values_to_arrow`] produces) member by member.
pub fn ordering_values_from_arrow(array: &dyn Array) -> Result<Vec<OrderingValue>> {
    use OrderingValue as O;
    let floor_div = |v: i64, d: i64| Ok(O::TimestampMicros(v.div_euclid(d)));
    match array.data_type() {
        DataType::Null => Ok(vec![O::Null; array.len()]),
        DataType::Boolean => Ok(array
            .as_boolean()
            .iter()
            .map(|v| v.map_or(O::Null, O::Boolean))
            .collect()),
        DataType::Int8 => map_primitive!(array, Int8Type, |v| Ok(O::Int(v.into()))),
        DataType::Int16 => map_primitive!(array, Int16Type, |v| Ok(O::Int(v.into()))),
        DataType::Int32 => map_primitive!(array, Int32Type, |v| Ok(O::Int(v))),
        DataType::UInt8 => map_primitive!(array, UInt8Type, |v| Ok(O::Int(v.into()))),
        DataType::UInt16 => map_primitive!(array, UInt16Type, |v| Ok(O::Int(v.into()))),
        DataType::Int64 => map_primitive!(array, Int64Type, |v| Ok(O::Long(v))),
        DataType::UInt32 => map_primitive!(array, UInt32Type, |v| Ok(O::Long(v.into()))),
        DataType::UInt64 => map_primitive!(array, UInt64Type, |v: u64| i64::try_from(v)
            .map(O::Long)
            .map_err(|_| Error::InvalidArgument(format!("ordering value {v} exceeds a long")))),
        DataType::Float16 => map_primitive!(array, Float16Type, |v| Ok(O::Float(v.to_f32()))),
        DataType::Float32 => map_primitive!(array, Float32Type, |v| Ok(O::Float(v))),
        DataType::Float64 => map_primitive!(array, Float64Type, |v| Ok(O::Double(v))),
        DataType::Date32 => map_primitive!(array, Date32Type, |v| Ok(O::Date(v))),
        DataType::Date64 => map_primitive!(array, Date64Type, |v: i64| i32::try_from(
            v.div_euclid(86_400_000)
        )
        .map(O::Date)
        .map_err(|_| Error::InvalidArgument("date out of range".into()))),
        DataType::Decimal128(_, s) => {
            let s = *s;
            map_primitive!(array, Decimal128Type, |v| rescale_decimal(v, s)
                .map(O::Decimal))
        }
        DataType::Decimal256(_, s) => {
            let s = *s;
            map_primitive!(array, Decimal256Type, |v: arrow_buffer::i256| v
                .to_i128()
                .ok_or_else(|| Error::InvalidArgument("decimal256 exceeds decimal(30,15)".into()))
                .and_then(|v| rescale_decimal(v, s))
                .map(O::Decimal))
        }
        DataType::Time32(TimeUnit::Second) => {
            map_primitive!(array, Time32SecondType, |v| Ok(O::TimeMicros(
                i64::from(v) * 1_000_000
            )))
        }
        DataType::Time32(TimeUnit::Millisecond) => {
            map_primitive!(array, Time32MillisecondType, |v| Ok(O::TimeMicros(
                i64::from(v) * 1_000
            )))
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            map_primitive!(array, Time64MicrosecondType, |v| Ok(O::TimeMicros(v)))
        }
        DataType::Time64(TimeUnit::Nanosecond) => {
            map_primitive!(array, Time64NanosecondType, |v: i64| Ok(O::TimeMicros(
                v.div_euclid(1_000)
            )))
        }
        DataType::Timestamp(TimeUnit::Second, _) => {
            map_primitive!(array, TimestampSecondType, |v: i64| v
                .checked_mul(1_000_000)
                .map(O::TimestampMicros)
                .ok_or_else(|| Error::InvalidArgument("timestamp out of range".into())))
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            map_primitive!(array, TimestampMillisecondType, |v: i64| v
                .checked_mul(1_000)
                .map(O::TimestampMicros)
                .ok_or_else(|| Error::InvalidArgument("timestamp out of range".into())))
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            map_primitive!(array, TimestampMicrosecondType, |v| Ok(O::TimestampMicros(
                v
            )))
        }
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            map_primitive!(array, TimestampNanosecondType, |v| floor_div(v, 1_000))
        }
        DataType::Duration(TimeUnit::Microsecond) => {
            map_primitive!(array, DurationMicrosecondType, |v| Ok(O::Long(v)))
        }
        DataType::Binary => Ok(array
            .as_binary::<i32>()
            .iter()
            .map(|v| v.map_or(O::Null, |b| O::Bytes(b.to_vec())))
            .collect()),
        DataType::LargeBinary => Ok(array
            .as_binary::<i64>()
            .iter()
            .map(|v| v.map_or(O::Null, |b| O::Bytes(b.to_vec())))
            .collect()),
        DataType::BinaryView => Ok(array
            .as_binary_view()
            .iter()
            .map(|v| v.map_or(O::Null, |b| O::Bytes(b.to_vec())))
            .collect()),
        DataType::FixedSizeBinary(_) => Ok(array
            .as_fixed_size_binary()
            .iter()
            .map(|v| v.map_or(O::Null, |b| O::Bytes(b.to_vec())))
            .collect()),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            Ok(strings_of(array, "ordering values")?
                .into_iter()
                .map(|v| v.map_or(O::Null, |s| O::String(s.to_string())))
                .collect())
        }
        DataType::Union(fields, _) => {
            let union = array
                .as_any()
                .downcast_ref::<UnionArray>()
                .expect("union data type");
            let mut per_child: Vec<(i8, Vec<OrderingValue>)> = Vec::new();
            for (id, _) in fields.iter() {
                per_child.push((id, ordering_values_from_arrow(union.child(id).as_ref())?));
            }
            (0..union.len())
                .map(|i| {
                    let id = union.type_id(i);
                    let offset = union.value_offset(i);
                    per_child
                        .iter()
                        .find(|(cid, _)| *cid == id)
                        .and_then(|(_, vals)| vals.get(offset).cloned())
                        .ok_or_else(|| Error::InvalidArgument("malformed union array".into()))
                })
                .collect()
        }
        other => Err(Error::InvalidArgument(format!(
            "unsupported ordering value type {other}"
        ))),
    }
}
