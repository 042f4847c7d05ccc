//! Avro binary datums → Arrow, with Avro schema resolution (writer schema → reader schema).
//!
//! Compilation walks the writer schema, the reader schema and the target Arrow type together and
//! produces a tree of [`Op`]s (driven by the writer's bytes) that append into an arena of column
//! builders (shaped by the Arrow type). Resolution follows the Avro spec: record fields match by
//! name or reader alias, writer-only fields are skipped, reader-only fields take their default
//! (null when they have none but are nullable), numbers promote int→long→float→double, string and
//! bytes interconvert, enum symbols match by name.

use std::ops::Range;
use std::sync::Arc;

use arrow_array::{make_array, ArrayRef, RecordBatch};
use arrow_buffer::{i256, BooleanBufferBuilder, Buffer, NullBufferBuilder};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, SchemaRef};
use serde_json::Value;

use super::arrow::strip_nullable;
use super::binary::{decimal_from_be_bytes, Reader};
use super::schema::{Kind, Schema};
use crate::error::{Error, Result};

/// Builder storage of one Arrow column.
enum Store {
    Null,
    Bool(BooleanBufferBuilder),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    I128(Vec<i128>),
    I256(Vec<i256>),
    Bin {
        offsets: Vec<i32>,
        data: Vec<u8>,
    },
    LargeBin {
        offsets: Vec<i64>,
        data: Vec<u8>,
    },
    Fixed {
        size: usize,
        data: Vec<u8>,
    },
    /// Dictionary-encoded enum: int32 keys into the reader's symbols.
    Dict {
        keys: Vec<i32>,
        values: ArrayRef,
    },
    /// Children occupy a contiguous range of the arena.
    Struct {
        children: Range<usize>,
    },
    List {
        offsets: Vec<i32>,
        child: usize,
    },
    LargeList {
        offsets: Vec<i64>,
        child: usize,
    },
    /// `entries` is the struct column holding keys and values.
    Map {
        offsets: Vec<i32>,
        entries: usize,
    },
}

struct Col {
    data_type: DataType,
    len: usize,
    nulls: NullBufferBuilder,
    store: Store,
}

/// Column arena; ops address columns by index so that sibling ops can share none.
struct Cols(Vec<Col>);

impl Cols {
    /// Allocates the column subtree for `dt`, returning the index of its root.
    fn alloc(&mut self, dt: &DataType) -> Result<usize> {
        let idx = self.0.len();
        self.0.push(Col {
            data_type: dt.clone(),
            len: 0,
            nulls: NullBufferBuilder::new(0),
            store: Store::Null,
        });
        let store = match dt {
            DataType::Null => Store::Null,
            DataType::Boolean => Store::Bool(BooleanBufferBuilder::new(0)),
            DataType::Int8 => Store::I8(Vec::new()),
            DataType::Int16 => Store::I16(Vec::new()),
            DataType::Int32 | DataType::Date32 | DataType::Time32(_) => Store::I32(Vec::new()),
            DataType::Int64
            | DataType::Date64
            | DataType::Time64(_)
            | DataType::Timestamp(_, _)
            | DataType::Duration(_) => Store::I64(Vec::new()),
            DataType::Float32 => Store::F32(Vec::new()),
            DataType::Float64 => Store::F64(Vec::new()),
            DataType::Decimal128(_, _) => Store::I128(Vec::new()),
            DataType::Decimal256(_, _) => Store::I256(Vec::new()),
            DataType::Utf8 | DataType::Binary => Store::Bin {
                offsets: vec![0],
                data: Vec::new(),
            },
            DataType::LargeUtf8 | DataType::LargeBinary => Store::LargeBin {
                offsets: vec![0],
                data: Vec::new(),
            },
            DataType::FixedSizeBinary(n) => Store::Fixed {
                size: usize::try_from(*n)
                    .map_err(|_| Error::InvalidArgument(format!("bad fixed size {n}")))?,
                data: Vec::new(),
            },
            DataType::Dictionary(k, v)
                if k.as_ref() == &DataType::Int32 && v.as_ref() == &DataType::Utf8 =>
            {
                // Values are filled in when an enum op is compiled against this column.
                Store::Dict {
                    keys: Vec::new(),
                    values: Arc::new(arrow_array::StringArray::from(Vec::<&str>::new())),
                }
            }
            DataType::Struct(fields) => {
                let start = self.0.len();
                // Reserve contiguous slots first so the children form a range; grandchildren
                // are allocated after them.
                for _ in fields.iter() {
                    self.0.push(Col {
                        data_type: DataType::Null,
                        len: 0,
                        nulls: NullBufferBuilder::new(0),
                        store: Store::Null,
                    });
                }
                for (i, f) in fields.iter().enumerate() {
                    self.fill(start + i, f.data_type())?;
                }
                Store::Struct {
                    children: start..start + fields.len(),
                }
            }
            DataType::List(f) => Store::List {
                offsets: vec![0],
                child: self.alloc(f.data_type())?,
            },
            DataType::LargeList(f) => Store::LargeList {
                offsets: vec![0],
                child: self.alloc(f.data_type())?,
            },
            DataType::Map(entries, _) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err(Error::InvalidArgument(
                        "map entries must be a struct".into(),
                    ));
                };
                if kv.len() != 2 || !matches!(kv[0].data_type(), DataType::Utf8) {
                    return Err(Error::InvalidArgument(
                        "map entries must be (utf8 key, value)".into(),
                    ));
                }
                Store::Map {
                    offsets: vec![0],
                    entries: self.alloc(entries.data_type())?,
                }
            }
            other => {
                return Err(Error::Unsupported(format!(
                    "Arrow type {other} as an Avro decoding target"
                )))
            }
        };
        self.0[idx].store = store;
        Ok(idx)
    }

    /// Allocates a subtree for `dt` and moves its root into the reserved slot `slot`.
    fn fill(&mut self, slot: usize, dt: &DataType) -> Result<()> {
        let root = self.alloc(dt)?;
        let col = std::mem::replace(
            &mut self.0[root],
            Col {
                data_type: DataType::Null,
                len: 0,
                nulls: NullBufferBuilder::new(0),
                store: Store::Null,
            },
        );
        self.0[slot] = col;
        // `root` stays behind as an unused placeholder: harmless, never finished.
        Ok(())
    }

    fn push_null(&mut self, i: usize) {
        let col = &mut self.0[i];
        col.len += 1;
        col.nulls.append_null();
        match &mut col.store {
            Store::Null => {}
            Store::Bool(b) => b.append(false),
            Store::I8(v) => v.push(0),
            Store::I16(v) => v.push(0),
            Store::I32(v) => v.push(0),
            Store::I64(v) => v.push(0),
            Store::F32(v) => v.push(0.0),
            Store::F64(v) => v.push(0.0),
            Store::I128(v) => v.push(0),
            Store::I256(v) => v.push(i256::ZERO),
            Store::Bin { offsets, .. } => offsets.push(*offsets.last().unwrap_or(&0)),
            Store::LargeBin { offsets, .. } => offsets.push(*offsets.last().unwrap_or(&0)),
            Store::Fixed { size, data } => data.resize(data.len() + *size, 0),
            Store::Dict { keys, .. } => keys.push(0),
            Store::List { offsets, .. } => offsets.push(*offsets.last().unwrap_or(&0)),
            Store::LargeList { offsets, .. } => offsets.push(*offsets.last().unwrap_or(&0)),
            Store::Map { offsets, .. } => offsets.push(*offsets.last().unwrap_or(&0)),
            Store::Struct { children } => {
                // Struct children need a slot for every parent row, null or not.
                for c in children.clone() {
                    self.push_null(c);
                }
            }
        }
    }

    #[inline]
    fn valid(&mut self, i: usize) -> &mut Col {
        let col = &mut self.0[i];
        col.len += 1;
        col.nulls.append_non_null();
        col
    }

    #[inline]
    fn push_long(&mut self, i: usize, v: i64) -> Result<()> {
        match &mut self.valid(i).store {
            Store::I64(x) => x.push(v),
            Store::I32(x) => x.push(narrow(v)?),
            Store::I16(x) => x.push(narrow(v)?),
            Store::I8(x) => x.push(narrow(v)?),
            Store::F32(x) => x.push(v as f32),
            Store::F64(x) => x.push(v as f64),
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    #[inline]
    fn push_double(&mut self, i: usize, v: f64) -> Result<()> {
        match &mut self.valid(i).store {
            Store::F64(x) => x.push(v),
            Store::F32(x) => x.push(v as f32),
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    #[inline]
    fn push_bytes(&mut self, i: usize, b: &[u8]) -> Result<()> {
        match &mut self.valid(i).store {
            Store::Bin { offsets, data } => {
                data.extend_from_slice(b);
                offsets.push(i32::try_from(data.len()).map_err(|_| {
                    Error::Unsupported("more than 2 GiB of strings in one column".into())
                })?);
            }
            Store::LargeBin { offsets, data } => {
                data.extend_from_slice(b);
                offsets.push(data.len() as i64);
            }
            Store::Fixed { size, data } => {
                if b.len() != *size {
                    return Err(Error::Corrupt(format!(
                        "fixed value of {} bytes, expected {size}",
                        b.len()
                    )));
                }
                data.extend_from_slice(b);
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    fn push_decimal(&mut self, i: usize, b: &[u8]) -> Result<()> {
        let bad = || Error::Corrupt("decimal value does not fit its Arrow type".into());
        match &mut self.valid(i).store {
            Store::I128(x) => x.push(decimal_from_be_bytes(b).ok_or_else(bad)?),
            Store::I256(x) => {
                if b.len() > 32 {
                    return Err(bad());
                }
                let fill = if b.first().is_some_and(|x| x & 0x80 != 0) {
                    0xff
                } else {
                    0
                };
                let mut full = [fill; 32];
                full[32 - b.len()..].copy_from_slice(b);
                x.push(i256::from_be_bytes(full));
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    fn finish(&mut self, i: usize) -> Result<ArrayData> {
        let (data_type, len, nulls, store) = {
            let col = &mut self.0[i];
            let store = std::mem::replace(&mut col.store, Store::Null);
            (col.data_type.clone(), col.len, col.nulls.finish(), store)
        };
        let nulls = if matches!(data_type, DataType::Null) {
            None
        } else {
            nulls
        };
        let b = ArrayData::builder(data_type).len(len).nulls(nulls);
        let b = match store {
            Store::Null => b,
            Store::Bool(mut v) => b.add_buffer(v.finish().into_inner()),
            Store::I8(v) => b.add_buffer(Buffer::from_vec(v)),
            Store::I16(v) => b.add_buffer(Buffer::from_vec(v)),
            Store::I32(v) => b.add_buffer(Buffer::from_vec(v)),
            Store::I64(v) => b.add_buffer(Buffer::from_vec(v)),
            Store::F32(v) => b.add_buffer(Buffer::from_vec(v)),
            Store::F64(v) => b.add_buffer(Buffer::from_vec(v)),
            Store::I128(v) => b.add_buffer(Buffer::from_vec(v)),
            Store::I256(v) => b.add_buffer(Buffer::from_vec(v)),
            Store::Bin { offsets, data } => b
                .add_buffer(Buffer::from_vec(offsets))
                .add_buffer(Buffer::from_vec(data)),
            Store::LargeBin { offsets, data } => b
                .add_buffer(Buffer::from_vec(offsets))
                .add_buffer(Buffer::from_vec(data)),
            Store::Fixed { data, .. } => b.add_buffer(Buffer::from_vec(data)),
            Store::Dict { keys, values } => b
                .add_buffer(Buffer::from_vec(keys))
                .child_data(vec![values.to_data()]),
            Store::Struct { children } => {
                let kids = children
                    .map(|c| self.finish(c))
                    .collect::<Result<Vec<_>>>()?;
                b.child_data(kids)
            }
            Store::List { offsets, child } => b
                .add_buffer(Buffer::from_vec(offsets))
                .child_data(vec![self.finish(child)?]),
            Store::LargeList { offsets, child } => b
                .add_buffer(Buffer::from_vec(offsets))
                .child_data(vec![self.finish(child)?]),
            Store::Map { offsets, entries } => b
                .add_buffer(Buffer::from_vec(offsets))
                .child_data(vec![self.finish(entries)?]),
        };
        // Full validation: catches invalid UTF-8, nulls in non-nullable children, bad keys.
        b.build()
            .map_err(|e| Error::Corrupt(format!("decoded Avro data is not valid Arrow: {e}")))
    }
}

fn narrow<T: TryFrom<i64>>(v: i64) -> Result<T> {
    T::try_from(v).map_err(|_| Error::Corrupt(format!("value {v} does not fit the Arrow type")))
}

fn mismatch() -> Error {
    Error::InvalidArgument("internal: Avro op does not match its Arrow column".into())
}

/// A literal default value of a reader-only field.
#[derive(Clone, Debug)]
enum Lit {
    Null,
    Bool(bool),
    Long(i64),
    Double(f64),
    Str(String),
}

/// One step of decoding, driven by the writer schema.
enum Op {
    /// Writer `null`.
    Null(usize),
    Bool(usize),
    Int(usize),
    Long(usize),
    Float(usize),
    Double(usize),
    /// `bytes` or `string` into a binary/string/fixed column.
    Bytes(usize),
    /// `bytes` holding a decimal.
    DecimalBytes(usize),
    /// `fixed` of this size into a fixed/binary column.
    Fixed(usize, usize),
    /// `fixed` of this size holding a decimal.
    DecimalFixed(usize, usize),
    /// Writer symbol index → reader symbol index (None: not in the reader, no default).
    Enum {
        col: usize,
        map: Vec<Option<i32>>,
        symbols: Arc<Vec<String>>,
    },
    Record {
        col: Option<usize>,
        steps: Vec<Op>,
        defaults: Vec<(usize, Lit)>,
    },
    Array {
        col: usize,
        item_min: usize,
        item: Box<Op>,
    },
    Map {
        col: usize,
        keys: usize,
        values: Box<Op>,
    },
    /// Writer union with at most one non-null branch.
    Union {
        col: usize,
        null_branch: Option<i64>,
        value_branch: i64,
        branches: i64,
        value: Box<Op>,
    },
    /// A writer field the reader does not want.
    Skip(Schema),
}

/// Decodes Avro binary records of one writer schema into Arrow record batches.
pub struct RecordDecoder {
    schema: SchemaRef,
    cols: Cols,
    roots: Vec<usize>,
    op: Op,
    rows: usize,
}

impl RecordDecoder {
    /// Prepares to decode records written with `writer`, resolved against `reader` (the writer
    /// schema itself when `None`), into batches of `arrow_schema`, whose fields must be the
    /// reader record's fields in order.
    pub fn new(writer: &Schema, reader: Option<&Schema>, arrow_schema: SchemaRef) -> Result<Self> {
        let reader = reader.unwrap_or(writer);
        let (Kind::Record(_), Kind::Record(_)) = (&writer.kind, &reader.kind) else {
            return Err(Error::InvalidArgument(
                "log block schemas must be Avro records".into(),
            ));
        };
        let mut cols = Cols(Vec::new());
        let roots = arrow_schema
            .fields()
            .iter()
            .map(|f| cols.alloc(f.data_type()))
            .collect::<Result<Vec<_>>>()?;
        let op = compile_record(
            writer,
            reader,
            None,
            &roots,
            arrow_schema.fields(),
            &mut cols,
        )?;
        Ok(Self {
            schema: arrow_schema,
            cols,
            roots,
            op,
            rows: 0,
        })
    }

    /// Decodes one record datum. Trailing bytes after the record are ignored, as Java's
    /// per-record decoder does.
    pub fn decode(&mut self, datum: &[u8]) -> Result<()> {
        let mut r = Reader::new(datum);
        run(&self.op, &mut r, &mut self.cols)?;
        self.rows += 1;
        Ok(())
    }

    /// Records decoded so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The decoded records as one batch.
    pub fn finish(mut self) -> Result<RecordBatch> {
        let columns = self
            .roots
            .iter()
            .map(|&c| self.cols.finish(c).map(make_array))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let options = arrow_array::RecordBatchOptions::new().with_row_count(Some(self.rows));
        RecordBatch::try_new_with_options(self.schema, columns, &options)
            .map_err(|e| Error::Corrupt(format!("decoded records do not fit the schema: {e}")))
    }
}

fn run(op: &Op, r: &mut Reader<'_>, cols: &mut Cols) -> Result<()> {
    match op {
        Op::Null(c) => cols.push_null(*c),
        Op::Bool(c) => {
            let v = r.boolean()?;
            match &mut cols.valid(*c).store {
                Store::Bool(b) => b.append(v),
                _ => return Err(mismatch()),
            }
        }
        Op::Int(c) => {
            let v = r.int()?;
            cols.push_long(*c, i64::from(v))?;
        }
        Op::Long(c) => {
            let v = r.long()?;
            cols.push_long(*c, v)?;
        }
        Op::Float(c) => {
            let v = r.float()?;
            cols.push_double(*c, f64::from(v))?;
        }
        Op::Double(c) => {
            let v = r.double()?;
            cols.push_double(*c, v)?;
        }
        Op::Bytes(c) => {
            let b = r.bytes()?;
            cols.push_bytes(*c, b)?;
        }
        Op::DecimalBytes(c) => {
            let b = r.bytes()?;
            cols.push_decimal(*c, b)?;
        }
        Op::Fixed(size, c) => {
            let b = r.fixed(*size)?;
            cols.push_bytes(*c, b)?;
        }
        Op::DecimalFixed(size, c) => {
            let b = r.fixed(*size)?;
            cols.push_decimal(*c, b)?;
        }
        Op::Enum { col, map, symbols } => {
            let w = r.int()?;
            let reader_idx = usize::try_from(w)
                .ok()
                .and_then(|w| map.get(w))
                .ok_or_else(|| Error::Corrupt(format!("enum index {w} out of range")))?
                .ok_or_else(|| {
                    Error::Corrupt(format!(
                        "enum symbol #{w} is unknown to the reader schema and it has no default"
                    ))
                })?;
            match &mut cols.0[*col].store {
                Store::Dict { keys, .. } => {
                    keys.push(reader_idx);
                    let c = &mut cols.0[*col];
                    c.len += 1;
                    c.nulls.append_non_null();
                }
                _ => cols.push_bytes(*col, symbols[reader_idx as usize].as_bytes())?,
            }
        }
        Op::Record {
            col,
            steps,
            defaults,
        } => {
            if let Some(c) = col {
                cols.valid(*c);
            }
            for step in steps {
                run(step, r, cols)?;
            }
            for (c, lit) in defaults {
                push_lit(cols, *c, lit)?;
            }
        }
        Op::Array {
            col,
            item_min,
            item,
        } => {
            let mut n = 0usize;
            loop {
                let count = r.block_count()?;
                if count == 0 {
                    break;
                }
                check_count(count, *item_min, r.remaining())?;
                for _ in 0..count {
                    run(item, r, cols)?;
                }
                n += count;
            }
            let c = cols.valid(*col);
            match &mut c.store {
                Store::List { offsets, .. } => {
                    let last = *offsets.last().unwrap_or(&0);
                    offsets.push(last + narrow::<i32>(n as i64)?);
                }
                Store::LargeList { offsets, .. } => {
                    let last = *offsets.last().unwrap_or(&0);
                    offsets.push(last + n as i64);
                }
                _ => return Err(mismatch()),
            }
        }
        Op::Map { col, keys, values } => {
            let Store::Map { entries, .. } = &cols.0[*col].store else {
                return Err(mismatch());
            };
            let entries = *entries;
            let mut n = 0usize;
            loop {
                let count = r.block_count()?;
                if count == 0 {
                    break;
                }
                // Every entry has at least its key's length byte.
                check_count(count, 1, r.remaining())?;
                for _ in 0..count {
                    let k = r.bytes()?;
                    cols.push_bytes(*keys, k)?;
                    run(values, r, cols)?;
                    cols.valid(entries);
                }
                n += count;
            }
            let c = cols.valid(*col);
            match &mut c.store {
                Store::Map { offsets, .. } => {
                    let last = *offsets.last().unwrap_or(&0);
                    offsets.push(last + narrow::<i32>(n as i64)?);
                }
                _ => return Err(mismatch()),
            }
        }
        Op::Union {
            col,
            null_branch,
            value_branch,
            branches,
            value,
        } => {
            let b = r.long()?;
            if Some(b) == *null_branch {
                cols.push_null(*col);
            } else if b == *value_branch {
                run(value, r, cols)?;
            } else {
                return Err(Error::Corrupt(format!(
                    "union branch {b} out of range (union has {branches})"
                )));
            }
        }
        Op::Skip(schema) => skip(schema, r)?,
    }
    Ok(())
}

/// Reads past one value of `schema`.
pub fn skip(schema: &Schema, r: &mut Reader<'_>) -> Result<()> {
    match &schema.kind {
        Kind::Null => {}
        Kind::Boolean => {
            r.fixed(1)?;
        }
        Kind::Int | Kind::Long | Kind::Enum(_) => {
            r.long()?;
        }
        Kind::Float => {
            r.fixed(4)?;
        }
        Kind::Double => {
            r.fixed(8)?;
        }
        Kind::Bytes | Kind::String => {
            r.bytes()?;
        }
        Kind::Fixed(f) => {
            r.fixed(f.size)?;
        }
        Kind::Record(rec) => {
            for f in &rec.fields {
                skip(&f.schema, r)?;
            }
        }
        Kind::Array(_) | Kind::Map(_) => loop {
            let n = r.long()?;
            if n == 0 {
                break;
            }
            if n < 0 {
                // A negative count is followed by the block's byte size: jump over it.
                let size = r.length()?;
                r.fixed(size)?;
                continue;
            }
            let n = n as usize;
            let item_min = match &schema.kind {
                Kind::Array(items) => min_size(items),
                _ => 1,
            };
            check_count(n, item_min, r.remaining())?;
            for _ in 0..n {
                match &schema.kind {
                    Kind::Array(items) => skip(items, r)?,
                    Kind::Map(values) => {
                        r.bytes()?;
                        skip(values, r)?;
                    }
                    _ => unreachable!("outer match"),
                }
            }
        },
        Kind::Union(branches) => {
            let b = r.long()?;
            let branch = usize::try_from(b)
                .ok()
                .and_then(|b| branches.get(b))
                .ok_or_else(|| Error::Corrupt(format!("union branch {b} out of range")))?;
            skip(branch, r)?;
        }
    }
    Ok(())
}

fn push_lit(cols: &mut Cols, c: usize, lit: &Lit) -> Result<()> {
    match lit {
        Lit::Null => cols.push_null(c),
        Lit::Bool(v) => match &mut cols.valid(c).store {
            Store::Bool(b) => b.append(*v),
            _ => return Err(mismatch()),
        },
        Lit::Long(v) => cols.push_long(c, *v)?,
        Lit::Double(v) => cols.push_double(c, *v)?,
        Lit::Str(s) => cols.push_bytes(c, s.as_bytes())?,
    }
    Ok(())
}

fn incompatible(writer: &Schema, reader: &Schema, dt: &DataType) -> Error {
    Error::InvalidArgument(format!(
        "cannot read Avro {} (writer) as {} (reader) into Arrow {dt}",
        describe(writer),
        describe(reader)
    ))
}

fn describe(s: &Schema) -> String {
    match s.full_name() {
        Some(n) => format!("{} {n}", s.type_name()),
        None => s.type_name().to_string(),
    }
}

fn compile_record(
    writer: &Schema,
    reader: &Schema,
    col: Option<usize>,
    children: &[usize],
    fields: &arrow_schema::Fields,
    cols: &mut Cols,
) -> Result<Op> {
    let (Kind::Record(w), Kind::Record(rd)) = (&writer.kind, &reader.kind) else {
        return Err(incompatible(
            writer,
            reader,
            &DataType::Struct(fields.clone()),
        ));
    };
    if fields.len() != rd.fields.len() {
        return Err(Error::InvalidArgument(format!(
            "Arrow struct has {} fields but Avro record {} has {}",
            fields.len(),
            rd.name,
            rd.fields.len()
        )));
    }
    let mut matched = vec![false; rd.fields.len()];
    let mut steps = Vec::with_capacity(w.fields.len());
    for wf in &w.fields {
        let pos = rd
            .fields
            .iter()
            .position(|rf| rf.name == wf.name)
            .or_else(|| {
                rd.fields
                    .iter()
                    .position(|rf| rf.aliases.contains(&wf.name))
            });
        match pos {
            Some(i) if !matched[i] => {
                matched[i] = true;
                if fields[i].name() != &rd.fields[i].name {
                    return Err(Error::InvalidArgument(format!(
                        "Arrow field {} does not match Avro field {}",
                        fields[i].name(),
                        rd.fields[i].name
                    )));
                }
                steps.push(compile(
                    &wf.schema,
                    &rd.fields[i].schema,
                    &fields[i],
                    children[i],
                    cols,
                )?);
            }
            _ => steps.push(Op::Skip(wf.schema.clone())),
        }
    }
    let mut defaults = Vec::new();
    for (i, rf) in rd.fields.iter().enumerate() {
        if matched[i] {
            continue;
        }
        let lit = default_lit(rf.default.as_ref(), &rf.schema, &fields[i]).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "reader field {} is not in the writer schema and has no usable default",
                rf.name
            ))
        })?;
        defaults.push((children[i], lit));
    }
    // Merge consecutive skips? Not needed: skipping is already cheap relative to decoding.
    Ok(Op::Record {
        col,
        steps,
        defaults,
    })
}

/// The literal to fill a reader-only field with; null when the field is nullable and has no
/// (or a null) default, matching what Hudi's schema evolution adds.
fn default_lit(default: Option<&Value>, schema: &Schema, field: &Field) -> Option<Lit> {
    let (inner, _) = strip_nullable(schema).ok()?;
    match default {
        None | Some(Value::Null) => field.is_nullable().then_some(Lit::Null),
        Some(Value::Bool(b)) => Some(Lit::Bool(*b)),
        Some(Value::Number(n)) => match inner.kind {
            Kind::Int | Kind::Long => n.as_i64().map(Lit::Long),
            Kind::Float | Kind::Double => n.as_f64().map(Lit::Double),
            _ => None,
        },
        Some(Value::String(s)) => match inner.kind {
            Kind::String | Kind::Enum(_) => Some(Lit::Str(s.clone())),
            // Avro JSON encodes bytes defaults as ISO-8859-1 code points.
            Kind::Bytes if inner.logical.is_none() => {
                let bytes: Option<Vec<u8>> =
                    s.chars().map(|c| u8::try_from(u32::from(c)).ok()).collect();
                String::from_utf8(bytes?).ok().map(Lit::Str)
            }
            _ => None,
        },
        _ => None,
    }
}

/// Compiles the op for one value: `writer` bytes, `reader` shape, into column `col` of `field`.
fn compile(
    writer: &Schema,
    reader: &Schema,
    field: &Field,
    col: usize,
    cols: &mut Cols,
) -> Result<Op> {
    let (reader_inner, _) = strip_nullable(reader)?;
    if let Kind::Union(branches) = &writer.kind {
        let (winner, _) = strip_nullable(writer)?;
        let null_branch = branches
            .iter()
            .position(|b| matches!(b.kind, Kind::Null))
            .map(|i| i as i64);
        let value_branch = branches
            .iter()
            .position(|b| !matches!(b.kind, Kind::Null))
            .map_or(-1, |i| i as i64);
        let value = if value_branch < 0 {
            Op::Null(col)
        } else {
            compile_value(winner, reader_inner, field.data_type(), col, cols)?
        };
        return Ok(Op::Union {
            col,
            null_branch,
            value_branch,
            branches: branches.len() as i64,
            value: Box::new(value),
        });
    }
    compile_value(writer, reader_inner, field.data_type(), col, cols)
}

fn compile_value(
    writer: &Schema,
    reader: &Schema,
    dt: &DataType,
    col: usize,
    cols: &mut Cols,
) -> Result<Op> {
    use DataType as D;
    let err = || incompatible(writer, reader, dt);
    let is_decimal = matches!(dt, D::Decimal128(_, _) | D::Decimal256(_, _));
    let is_int_target = matches!(dt, D::Int8 | D::Int16 | D::Int32 | D::Date32 | D::Time32(_));
    let is_long_target = matches!(
        dt,
        D::Int64 | D::Date64 | D::Time64(_) | D::Timestamp(_, _) | D::Duration(_)
    );
    let is_float = matches!(dt, D::Float32 | D::Float64);
    let is_binary = matches!(dt, D::Utf8 | D::LargeUtf8 | D::Binary | D::LargeBinary);
    if matches!(writer.kind, Kind::Null) {
        return Ok(Op::Null(col));
    }
    if matches!(reader.kind, Kind::Null) {
        // Reader wants only nulls; consume the writer value and record a null.
        return Ok(Op::Record {
            col: None,
            steps: vec![Op::Skip(writer.clone()), Op::Null(col)],
            defaults: Vec::new(),
        });
    }
    Ok(match (&writer.kind, &reader.kind) {
        (Kind::Boolean, Kind::Boolean) if matches!(dt, D::Boolean) => Op::Bool(col),
        (Kind::Int, Kind::Int) if is_int_target || is_long_target || is_float => Op::Int(col),
        (Kind::Int, Kind::Long) if is_long_target || is_float => Op::Int(col),
        (Kind::Int | Kind::Long, Kind::Float | Kind::Double) if is_float => {
            if matches!(writer.kind, Kind::Int) {
                Op::Int(col)
            } else {
                Op::Long(col)
            }
        }
        (Kind::Long, Kind::Long) if is_long_target || is_float => Op::Long(col),
        (Kind::Float, Kind::Float | Kind::Double) if is_float => Op::Float(col),
        (Kind::Double, Kind::Double) if is_float => Op::Double(col),
        (Kind::Bytes, Kind::Bytes) if is_decimal => Op::DecimalBytes(col),
        (Kind::Bytes | Kind::String, Kind::Bytes | Kind::String) if is_binary => Op::Bytes(col),
        (Kind::Fixed(w), Kind::Fixed(r)) if w.size == r.size => match dt {
            _ if is_decimal => Op::DecimalFixed(w.size, col),
            D::FixedSizeBinary(n) if usize::try_from(*n).ok() == Some(w.size) => {
                Op::Fixed(w.size, col)
            }
            D::Binary | D::LargeBinary => Op::Fixed(w.size, col),
            _ => return Err(err()),
        },
        (Kind::Enum(w), Kind::Enum(r)) => {
            let default = r
                .default
                .as_ref()
                .and_then(|d| r.symbols.iter().position(|s| s == d));
            let map = w
                .symbols
                .iter()
                .map(|s| {
                    r.symbols
                        .iter()
                        .position(|x| x == s)
                        .or(default)
                        .map(|i| i as i32)
                })
                .collect();
            let symbols = Arc::new(r.symbols.clone());
            match (&mut cols.0[col].store, dt) {
                (Store::Dict { values, .. }, _) => {
                    *values = Arc::new(arrow_array::StringArray::from(
                        symbols.iter().map(String::as_str).collect::<Vec<_>>(),
                    ));
                }
                (Store::Bin { .. } | Store::LargeBin { .. }, D::Utf8 | D::LargeUtf8) => {}
                _ => return Err(err()),
            }
            Op::Enum { col, map, symbols }
        }
        (Kind::Record(_), Kind::Record(_)) => {
            let (D::Struct(fields), Store::Struct { children }) = (dt, &cols.0[col].store) else {
                return Err(err());
            };
            let children: Vec<usize> = children.clone().collect();
            compile_record(writer, reader, Some(col), &children, fields, cols)?
        }
        (Kind::Array(wi), Kind::Array(ri)) => {
            let (item_field, child) = match (dt, &cols.0[col].store) {
                (D::List(f), Store::List { child, .. })
                | (D::LargeList(f), Store::LargeList { child, .. }) => (f.clone(), *child),
                _ => return Err(err()),
            };
            Op::Array {
                col,
                item_min: min_size(wi),
                item: Box::new(compile(wi, ri, &item_field, child, cols)?),
            }
        }
        (Kind::Map(wv), Kind::Map(rv)) => {
            let (D::Map(entries_field, _), Store::Map { entries, .. }) = (dt, &cols.0[col].store)
            else {
                return Err(err());
            };
            let entries = *entries;
            let D::Struct(kv) = entries_field.data_type() else {
                return Err(err());
            };
            let Store::Struct { children } = &cols.0[entries].store else {
                return Err(err());
            };
            let (keys, values_col) = (children.start, children.start + 1);
            let value_field = kv[1].clone();
            Op::Map {
                col,
                keys,
                values: Box::new(compile(wv, rv, &value_field, values_col, cols)?),
            }
        }
        _ => return Err(err()),
    })
}

/// Fewest bytes one value of `schema` can occupy; bounds item counts read from damaged input.
fn min_size(schema: &Schema) -> usize {
    match &schema.kind {
        Kind::Null => 0,
        Kind::Fixed(f) => f.size,
        Kind::Float => 4,
        Kind::Double => 8,
        Kind::Record(r) => r.fields.iter().map(|f| min_size(&f.schema)).sum(),
        _ => 1,
    }
}

/// Rejects an item count that the remaining input cannot hold. Zero-size items (nulls, empty
/// records) are capped instead, so a garbage count cannot make us allocate without bound.
fn check_count(count: usize, item_min: usize, remaining: usize) -> Result<()> {
    let limit = remaining.checked_div(item_min).unwrap_or(1 << 24);
    if count > limit {
        return Err(Error::Corrupt(format!(
            "block of {count} items exceeds the remaining {remaining} bytes"
        )));
    }
    Ok(())
}
