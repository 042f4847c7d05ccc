//! Arrow → Avro binary datums, written straight from Arrow buffers.
//!
//! Compilation pairs each Avro field with its Arrow column (by name) and picks an [`Enc`] that
//! reads the column's buffers directly; encoding a row then walks that tree. The bytes are what
//! Java's `GenericDatumWriter` + `BinaryEncoder` write: arrays and maps as one block (count, items,
//! 0), decimals on `bytes` as minimal two's complement, on `fixed` sign-extended.

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal128Type, Decimal256Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type,
    Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow_buffer::{i256, NullBuffer};
use arrow_schema::{DataType, TimeUnit};

use super::arrow::strip_nullable;
use super::binary::{decimal_to_min_bytes, write_bytes, write_long};
use super::schema::{Kind, Logical, Schema};
use crate::error::{Error, Result};

/// How one Avro value is produced from an Arrow column.
enum Enc<'a> {
    /// Avro `null`: nothing to write.
    Null,
    /// Avro union: the branch index, then the value (or nothing for the null branch).
    Union {
        nulls: Option<NullBuffer>,
        null_branch: Option<i64>,
        value_branch: i64,
        value: Box<Enc<'a>>,
        field: String,
    },
    /// Field absent from the batch but nullable in Avro: always the null branch.
    ConstBranch(i64),
    /// A non-nullable Avro value over a column with nulls: fail on a null row.
    NonNull {
        nulls: NullBuffer,
        field: String,
        value: Box<Enc<'a>>,
    },
    Bool(&'a BooleanArray),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    /// A long with a unit change (e.g. Arrow nanoseconds into Avro timestamp-micros).
    Scaled {
        values: &'a [i64],
        mul: i64,
        div: i64,
    },
    F32(&'a [f32]),
    F32AsDouble(&'a [f32]),
    /// Avro `float` from integers (Avro's int/long → float promotion).
    I64AsFloat(&'a [i64]),
    F64(&'a [f64]),
    /// Avro `double` from integers.
    I64AsDouble(&'a [i64]),
    I32AsDouble(&'a [i32]),
    I32AsFloat(&'a [i32]),
    Bin {
        offsets: &'a [i32],
        data: &'a [u8],
    },
    LargeBin {
        offsets: &'a [i64],
        data: &'a [u8],
    },
    /// Utf8View/BinaryView arrays (no contiguous offsets).
    View(ViewArr<'a>),
    /// FixedSizeBinary into Avro `fixed` (raw) or `bytes` (length-prefixed).
    FixedBin {
        size: usize,
        data: &'a [u8],
        prefixed: bool,
    },
    DecBytes {
        values: &'a [i128],
        rescale: Rescale,
    },
    DecFixed {
        size: usize,
        values: &'a [i128],
        rescale: Rescale,
    },
    Dec256Bytes(&'a [i256]),
    Dec256Fixed {
        size: usize,
        values: &'a [i256],
    },
    /// Avro enum from strings: the per-row symbol index, computed up front.
    Enum(Vec<i32>),
    Record(Vec<Enc<'a>>),
    List {
        offsets: &'a [i32],
        item: Box<Enc<'a>>,
    },
    LargeList {
        offsets: &'a [i64],
        item: Box<Enc<'a>>,
    },
    Map {
        offsets: &'a [i32],
        keys: Box<Enc<'a>>,
        values: Box<Enc<'a>>,
    },
    /// Dictionary array: row → dictionary index, then the value's encoder.
    Dict {
        keys: Vec<usize>,
        values: Box<Enc<'a>>,
    },
}

/// String/binary view arrays, read value by value.
enum ViewArr<'a> {
    Utf8(&'a arrow_array::StringViewArray),
    Binary(&'a arrow_array::BinaryViewArray),
}

/// Exact rescaling of decimal unscaled values between Arrow's and Avro's scale.
#[derive(Clone, Copy)]
struct Rescale {
    up: i128,
    down: i128,
}

impl Rescale {
    fn new(from: i8, to: i8) -> Result<Self> {
        let diff = i32::from(to) - i32::from(from);
        let p = |e: i32| {
            10i128
                .checked_pow(e.unsigned_abs())
                .ok_or_else(|| Error::InvalidArgument(format!("cannot rescale decimal by 10^{e}")))
        };
        Ok(if diff >= 0 {
            Self {
                up: p(diff)?,
                down: 1,
            }
        } else {
            Self {
                up: 1,
                down: p(-diff)?,
            }
        })
    }

    #[inline]
    fn apply(self, v: i128) -> Result<i128> {
        if self.up == 1 && self.down == 1 {
            return Ok(v);
        }
        if v % self.down != 0 {
            return Err(Error::InvalidArgument(
                "decimal value needs rounding to fit the Avro scale".into(),
            ));
        }
        (v / self.down)
            .checked_mul(self.up)
            .ok_or_else(|| Error::InvalidArgument("decimal overflows while rescaling".into()))
    }
}

/// Sign-extends or truncates big-endian two's complement to `size` bytes (Java's `toFixed`).
fn fixed_decimal(out: &mut Vec<u8>, be: &[u8], size: usize) -> Result<()> {
    let negative = be.first().is_some_and(|b| b & 0x80 != 0);
    let fill = if negative { 0xff } else { 0x00 };
    if be.len() <= size {
        out.extend(std::iter::repeat_n(fill, size - be.len()));
        out.extend_from_slice(be);
        return Ok(());
    }
    let (extra, tail) = be.split_at(be.len() - size);
    if extra.iter().any(|&b| b != fill) || tail.first().is_some_and(|b| (b & 0x80 != 0) != negative)
    {
        return Err(Error::InvalidArgument(format!(
            "decimal value does not fit Avro fixed({size})"
        )));
    }
    out.extend_from_slice(tail);
    Ok(())
}

impl Enc<'_> {
    #[inline]
    fn write(&self, row: usize, out: &mut Vec<u8>) -> Result<()> {
        match self {
            Enc::Null => {}
            Enc::Union {
                nulls,
                null_branch,
                value_branch,
                value,
                field,
            } => {
                if nulls.as_ref().is_some_and(|n| n.is_null(row)) {
                    let Some(b) = null_branch else {
                        return Err(null_error(field));
                    };
                    write_long(out, *b);
                } else {
                    write_long(out, *value_branch);
                    value.write(row, out)?;
                }
            }
            Enc::ConstBranch(b) => write_long(out, *b),
            Enc::NonNull {
                nulls,
                field,
                value,
            } => {
                if nulls.is_null(row) {
                    return Err(null_error(field));
                }
                value.write(row, out)?;
            }
            Enc::Bool(a) => out.push(u8::from(a.value(row))),
            Enc::I8(v) => write_long(out, i64::from(v[row])),
            Enc::I16(v) => write_long(out, i64::from(v[row])),
            Enc::I32(v) => write_long(out, i64::from(v[row])),
            Enc::I64(v) => write_long(out, v[row]),
            Enc::U8(v) => write_long(out, i64::from(v[row])),
            Enc::U16(v) => write_long(out, i64::from(v[row])),
            Enc::U32(v) => write_long(out, i64::from(v[row])),
            Enc::U64(v) => write_long(
                out,
                i64::try_from(v[row]).map_err(|_| {
                    Error::InvalidArgument(format!("uint64 {} exceeds an Avro long", v[row]))
                })?,
            ),
            Enc::Scaled { values, mul, div } => {
                let v = values[row]
                    .checked_mul(*mul)
                    .ok_or_else(|| Error::InvalidArgument("timestamp out of range".into()))?;
                write_long(out, v.div_euclid(*div));
            }
            Enc::F32(v) => out.extend_from_slice(&v[row].to_le_bytes()),
            Enc::F32AsDouble(v) => out.extend_from_slice(&f64::from(v[row]).to_le_bytes()),
            Enc::I64AsFloat(v) => out.extend_from_slice(&(v[row] as f32).to_le_bytes()),
            Enc::F64(v) => out.extend_from_slice(&v[row].to_le_bytes()),
            Enc::I64AsDouble(v) => out.extend_from_slice(&(v[row] as f64).to_le_bytes()),
            Enc::I32AsDouble(v) => out.extend_from_slice(&f64::from(v[row]).to_le_bytes()),
            Enc::I32AsFloat(v) => out.extend_from_slice(&(v[row] as f32).to_le_bytes()),
            Enc::Bin { offsets, data } => {
                let (s, e) = (offsets[row] as usize, offsets[row + 1] as usize);
                write_bytes(out, &data[s..e]);
            }
            Enc::LargeBin { offsets, data } => {
                let (s, e) = (offsets[row] as usize, offsets[row + 1] as usize);
                write_bytes(out, &data[s..e]);
            }
            Enc::View(ViewArr::Utf8(a)) => write_bytes(out, a.value(row).as_bytes()),
            Enc::View(ViewArr::Binary(a)) => write_bytes(out, a.value(row)),
            Enc::FixedBin {
                size,
                data,
                prefixed,
            } => {
                let v = &data[row * size..(row + 1) * size];
                if *prefixed {
                    write_bytes(out, v);
                } else {
                    out.extend_from_slice(v);
                }
            }
            Enc::DecBytes { values, rescale } => {
                write_bytes(out, &decimal_to_min_bytes(rescale.apply(values[row])?));
            }
            Enc::DecFixed {
                size,
                values,
                rescale,
            } => {
                let v = rescale.apply(values[row])?;
                fixed_decimal(out, &v.to_be_bytes(), *size)?;
            }
            Enc::Dec256Bytes(values) => {
                let be = values[row].to_be_bytes();
                // Minimal form: drop redundant sign bytes, as BigInteger.toByteArray does.
                let mut skip = 0;
                while skip < 31
                    && ((be[skip] == 0 && be[skip + 1] & 0x80 == 0)
                        || (be[skip] == 0xff && be[skip + 1] & 0x80 != 0))
                {
                    skip += 1;
                }
                write_bytes(out, &be[skip..]);
            }
            Enc::Dec256Fixed { size, values } => {
                fixed_decimal(out, &values[row].to_be_bytes(), *size)?;
            }
            Enc::Enum(idx) => write_long(out, i64::from(idx[row])),
            Enc::Record(fields) => {
                for f in fields {
                    f.write(row, out)?;
                }
            }
            Enc::List { offsets, item } => {
                let (s, e) = (offsets[row] as usize, offsets[row + 1] as usize);
                write_items(out, s, e, |i, out| item.write(i, out))?;
            }
            Enc::LargeList { offsets, item } => {
                let (s, e) = (offsets[row] as usize, offsets[row + 1] as usize);
                write_items(out, s, e, |i, out| item.write(i, out))?;
            }
            Enc::Map {
                offsets,
                keys,
                values,
            } => {
                let (s, e) = (offsets[row] as usize, offsets[row + 1] as usize);
                write_items(out, s, e, |i, out| {
                    keys.write(i, out)?;
                    values.write(i, out)
                })?;
            }
            Enc::Dict { keys, values } => values.write(keys[row], out)?,
        }
        Ok(())
    }
}

/// One Avro array/map block holding items `s..e`, then the terminating zero count.
#[inline]
fn write_items(
    out: &mut Vec<u8>,
    s: usize,
    e: usize,
    mut f: impl FnMut(usize, &mut Vec<u8>) -> Result<()>,
) -> Result<()> {
    if e > s {
        write_long(out, (e - s) as i64);
        for i in s..e {
            f(i, out)?;
        }
    }
    write_long(out, 0);
    Ok(())
}

fn null_error(field: &str) -> Error {
    Error::InvalidArgument(format!(
        "null in field {field}, whose Avro type does not admit null"
    ))
}

/// Encodes the rows of a record batch as Avro binary datums of one record schema.
pub struct RecordEncoder<'a> {
    root: Enc<'a>,
    rows: usize,
}

impl<'a> RecordEncoder<'a> {
    /// Pairs every field of the Avro record `schema` with the batch column of the same name.
    /// Nullable Avro fields may be missing from the batch (written as null); batch columns that
    /// the schema does not name are an error, so no data is silently dropped.
    pub fn new(schema: &Schema, batch: &'a RecordBatch) -> Result<Self> {
        let Kind::Record(rec) = &schema.kind else {
            return Err(Error::InvalidArgument(
                "an Avro data block schema must be a record".into(),
            ));
        };
        let arrow_schema = batch.schema_ref();
        for f in arrow_schema.fields() {
            if !rec.fields.iter().any(|af| af.name == *f.name()) {
                return Err(Error::InvalidArgument(format!(
                    "batch column {} is not in the Avro schema {}",
                    f.name(),
                    rec.name
                )));
            }
        }
        let columns: Vec<(&str, &'a ArrayRef)> = arrow_schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .zip(batch.columns())
            .collect();
        let fields = compile_fields(&rec.fields, &columns, "")?;
        Ok(Self {
            root: Enc::Record(fields),
            rows: batch.num_rows(),
        })
    }

    /// Rows in the batch.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Appends the datum of `row` to `out`.
    #[inline]
    pub fn write_row(&self, row: usize, out: &mut Vec<u8>) -> Result<()> {
        self.root.write(row, out)
    }
}

fn compile_fields<'a>(
    fields: &[super::schema::RecordField],
    columns: &[(&'a str, &'a ArrayRef)],
    path: &str,
) -> Result<Vec<Enc<'a>>> {
    fields
        .iter()
        .map(|f| {
            let name = if path.is_empty() {
                f.name.clone()
            } else {
                format!("{path}.{}", f.name)
            };
            match columns.iter().find(|(n, _)| *n == f.name) {
                Some(&(_, array)) => compile(&f.schema, array.as_ref(), &name),
                None => {
                    let null_branch = match &f.schema.kind {
                        Kind::Null => return Ok(Enc::Null),
                        Kind::Union(b) => b.iter().position(|s| matches!(s.kind, Kind::Null)),
                        _ => None,
                    };
                    null_branch
                        .map(|b| Enc::ConstBranch(b as i64))
                        .ok_or_else(|| {
                            Error::InvalidArgument(format!(
                                "batch has no column {name}, which the Avro schema requires"
                            ))
                        })
                }
            }
        })
        .collect()
}

/// Compiles the encoder for one value of `schema` from `array` (a field called `name`).
fn compile<'a>(schema: &Schema, array: &'a dyn Array, name: &str) -> Result<Enc<'a>> {
    let nulls = array.logical_nulls().filter(|n| n.null_count() > 0);
    if let Kind::Union(branches) = &schema.kind {
        let (inner, _) = strip_nullable(schema)?;
        let null_branch = branches
            .iter()
            .position(|s| matches!(s.kind, Kind::Null))
            .map(|b| b as i64);
        if matches!(inner.kind, Kind::Null) {
            return Ok(Enc::ConstBranch(null_branch.unwrap_or(0)));
        }
        let value_branch = branches
            .iter()
            .position(|s| !matches!(s.kind, Kind::Null))
            .map_or(0, |b| b as i64);
        return Ok(Enc::Union {
            nulls,
            null_branch,
            value_branch,
            value: Box::new(compile_value(inner, array, name)?),
            field: name.to_string(),
        });
    }
    if matches!(schema.kind, Kind::Null) {
        return match nulls {
            Some(n) if n.null_count() == array.len() => Ok(Enc::Null),
            None if array.is_empty() || matches!(array.data_type(), DataType::Null) => {
                Ok(Enc::Null)
            }
            _ => Err(Error::InvalidArgument(format!(
                "field {name} is Avro null but the column has values"
            ))),
        };
    }
    let value = compile_value(schema, array, name)?;
    Ok(match nulls {
        Some(nulls) => Enc::NonNull {
            nulls,
            field: name.to_string(),
            value: Box::new(value),
        },
        None => value,
    })
}

fn avro_unit_of(logical: Option<Logical>) -> Option<TimeUnit> {
    match logical {
        Some(Logical::TimestampMillis | Logical::LocalTimestampMillis) => {
            Some(TimeUnit::Millisecond)
        }
        Some(Logical::TimestampMicros | Logical::LocalTimestampMicros | Logical::TimeMicros) => {
            Some(TimeUnit::Microsecond)
        }
        Some(Logical::TimestampNanos | Logical::LocalTimestampNanos) => Some(TimeUnit::Nanosecond),
        _ => None,
    }
}

fn per_second(unit: TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    }
}

macro_rules! prim {
    ($array:expr, $t:ty) => {
        &**$array.as_primitive::<$t>().values()
    };
}

fn compile_value<'a>(schema: &Schema, array: &'a dyn Array, name: &str) -> Result<Enc<'a>> {
    use arrow_array::types as T;
    use DataType as D;
    let dt = array.data_type();
    let err = || {
        Error::InvalidArgument(format!(
            "field {name}: cannot write Arrow {dt} as Avro {}",
            schema.type_name()
        ))
    };
    if let D::Dictionary(_, _) = dt {
        let dict = array.as_any_dictionary();
        let values = compile_value(schema, dict.values().as_ref(), name)?;
        return Ok(Enc::Dict {
            keys: dict.normalized_keys(),
            values: Box::new(values),
        });
    }
    let decimal_scale = match schema.logical {
        Some(Logical::Decimal { scale, .. }) => Some(scale),
        _ => None,
    };
    let int_or_long = matches!(schema.kind, Kind::Int | Kind::Long);
    Ok(match (&schema.kind, dt) {
        (Kind::Boolean, D::Boolean) => Enc::Bool(array.as_boolean()),
        (_, D::Int8) if int_or_long => Enc::I8(prim!(array, Int8Type)),
        (_, D::Int16) if int_or_long => Enc::I16(prim!(array, Int16Type)),
        (_, D::UInt8) if int_or_long => Enc::U8(prim!(array, UInt8Type)),
        (_, D::UInt16) if int_or_long => Enc::U16(prim!(array, UInt16Type)),
        (_, D::Int32) if int_or_long => Enc::I32(prim!(array, Int32Type)),
        (_, D::Date32) if int_or_long => Enc::I32(prim!(array, T::Date32Type)),
        (_, D::Time32(TimeUnit::Millisecond)) if int_or_long => {
            Enc::I32(prim!(array, T::Time32MillisecondType))
        }
        (_, D::Time32(TimeUnit::Second)) if int_or_long => {
            Enc::I32(prim!(array, T::Time32SecondType))
        }
        (Kind::Long, D::UInt32) => Enc::U32(prim!(array, UInt32Type)),
        (Kind::Long, D::UInt64) => Enc::U64(prim!(array, UInt64Type)),
        (Kind::Long, D::Int64) => Enc::I64(prim!(array, Int64Type)),
        (Kind::Long, D::Date64) => Enc::I64(prim!(array, T::Date64Type)),
        (Kind::Long, D::Duration(TimeUnit::Microsecond)) => {
            Enc::I64(prim!(array, T::DurationMicrosecondType))
        }
        (Kind::Long, D::Time64(unit) | D::Timestamp(unit, _)) => {
            let values: &[i64] = match dt {
                D::Time64(TimeUnit::Microsecond) => prim!(array, T::Time64MicrosecondType),
                D::Time64(TimeUnit::Nanosecond) => prim!(array, T::Time64NanosecondType),
                D::Timestamp(TimeUnit::Second, _) => prim!(array, T::TimestampSecondType),
                D::Timestamp(TimeUnit::Millisecond, _) => prim!(array, T::TimestampMillisecondType),
                D::Timestamp(TimeUnit::Microsecond, _) => prim!(array, T::TimestampMicrosecondType),
                D::Timestamp(TimeUnit::Nanosecond, _) => prim!(array, T::TimestampNanosecondType),
                _ => return Err(err()),
            };
            match avro_unit_of(schema.logical) {
                // Different units: convert (floor, as Java's Instant → micros does).
                Some(target) if target != *unit => {
                    let (from, to) = (per_second(*unit), per_second(target));
                    let (mul, div) = if to >= from {
                        (to / from, 1)
                    } else {
                        (1, from / to)
                    };
                    Enc::Scaled { values, mul, div }
                }
                _ => Enc::I64(values),
            }
        }
        (Kind::Float, D::Float32) => Enc::F32(prim!(array, Float32Type)),
        (Kind::Float, D::Int32) => Enc::I32AsFloat(prim!(array, Int32Type)),
        (Kind::Float, D::Int64) => Enc::I64AsFloat(prim!(array, Int64Type)),
        (Kind::Double, D::Float64) => Enc::F64(prim!(array, Float64Type)),
        (Kind::Double, D::Float32) => Enc::F32AsDouble(prim!(array, Float32Type)),
        (Kind::Double, D::Int32) => Enc::I32AsDouble(prim!(array, Int32Type)),
        (Kind::Double, D::Int64) => Enc::I64AsDouble(prim!(array, Int64Type)),
        (Kind::Bytes, D::Decimal128(_, s)) if decimal_scale.is_some() => Enc::DecBytes {
            values: prim!(array, Decimal128Type),
            rescale: Rescale::new(*s, decimal_scale.unwrap_or(0))?,
        },
        (Kind::Fixed(f), D::Decimal128(_, s)) if decimal_scale.is_some() => Enc::DecFixed {
            size: f.size,
            values: prim!(array, Decimal128Type),
            rescale: Rescale::new(*s, decimal_scale.unwrap_or(0))?,
        },
        (Kind::Bytes, D::Decimal256(_, s)) if decimal_scale == Some(*s) => {
            Enc::Dec256Bytes(prim!(array, Decimal256Type))
        }
        (Kind::Fixed(f), D::Decimal256(_, s)) if decimal_scale == Some(*s) => Enc::Dec256Fixed {
            size: f.size,
            values: prim!(array, Decimal256Type),
        },
        (Kind::Bytes | Kind::String, D::Utf8) => {
            let a = array.as_string::<i32>();
            Enc::Bin {
                offsets: a.value_offsets(),
                data: a.value_data(),
            }
        }
        (Kind::Bytes | Kind::String, D::LargeUtf8) => {
            let a = array.as_string::<i64>();
            Enc::LargeBin {
                offsets: a.value_offsets(),
                data: a.value_data(),
            }
        }
        (Kind::Bytes | Kind::String, D::Binary) => {
            let a = array.as_binary::<i32>();
            Enc::Bin {
                offsets: a.value_offsets(),
                data: a.value_data(),
            }
        }
        (Kind::Bytes | Kind::String, D::LargeBinary) => {
            let a = array.as_binary::<i64>();
            Enc::LargeBin {
                offsets: a.value_offsets(),
                data: a.value_data(),
            }
        }
        (Kind::Bytes | Kind::String, D::Utf8View) => {
            Enc::View(ViewArr::Utf8(array.as_string_view()))
        }
        (Kind::Bytes | Kind::String, D::BinaryView) => {
            Enc::View(ViewArr::Binary(array.as_binary_view()))
        }
        (Kind::Bytes | Kind::Fixed(_), D::FixedSizeBinary(n)) => {
            let size = *n as usize;
            if let Kind::Fixed(f) = &schema.kind {
                if f.size != size {
                    return Err(err());
                }
            }
            let a = array.as_fixed_size_binary();
            Enc::FixedBin {
                size,
                data: a.value_data(),
                prefixed: matches!(schema.kind, Kind::Bytes),
            }
        }
        (Kind::Enum(e), D::Utf8 | D::LargeUtf8 | D::Utf8View) => {
            let lookup: HashMap<&str, i32> = e
                .symbols
                .iter()
                .enumerate()
                .map(|(i, s)| (s.as_str(), i as i32))
                .collect();
            let strings: Vec<Option<&str>> = match dt {
                D::Utf8 => array.as_string::<i32>().iter().collect(),
                D::LargeUtf8 => array.as_string::<i64>().iter().collect(),
                _ => array.as_string_view().iter().collect(),
            };
            let idx = strings
                .into_iter()
                .map(|s| match s {
                    None => Ok(0),
                    Some(s) => lookup.get(s).copied().ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "field {name}: {s:?} is not a symbol of enum {}",
                            e.name
                        ))
                    }),
                })
                .collect::<Result<Vec<_>>>()?;
            Enc::Enum(idx)
        }
        (Kind::Record(rec), D::Struct(fields)) => {
            let a = array.as_struct();
            for f in fields.iter() {
                if !rec.fields.iter().any(|af| af.name == *f.name()) {
                    return Err(Error::InvalidArgument(format!(
                        "struct field {name}.{} is not in Avro record {}",
                        f.name(),
                        rec.name
                    )));
                }
            }
            let columns: Vec<(&str, &'a ArrayRef)> = fields
                .iter()
                .map(|f| f.name().as_str())
                .zip(a.columns())
                .collect();
            Enc::Record(compile_fields(&rec.fields, &columns, name)?)
        }
        (Kind::Array(items), D::List(_)) => {
            let a = array.as_list::<i32>();
            Enc::List {
                offsets: a.value_offsets(),
                item: Box::new(compile(items, a.values().as_ref(), &format!("{name}[]"))?),
            }
        }
        (Kind::Array(items), D::LargeList(_)) => {
            let a = array.as_list::<i64>();
            Enc::LargeList {
                offsets: a.value_offsets(),
                item: Box::new(compile(items, a.values().as_ref(), &format!("{name}[]"))?),
            }
        }
        (Kind::Map(values), D::Map(_, _)) => {
            let a = array.as_map();
            let string = Schema::parse("\"string\"")?;
            Enc::Map {
                offsets: a.value_offsets(),
                keys: Box::new(compile(&string, a.keys().as_ref(), &format!("{name}.key"))?),
                values: Box::new(compile(
                    values,
                    a.values().as_ref(),
                    &format!("{name}.value"),
                )?),
            }
        }
        _ => return Err(err()),
    })
}
