//! Avro binary datums <-> JSON values, for timeline files (plans and metadata), which Python
//! reads and writes as plain dicts.
//!
//! JSON conventions (both directions): a union value is the bare value of its branch (on encode
//! the first branch the value fits is chosen); null is `null`; `bytes` and `fixed` are strings with
//! one code point U+0000..U+00FF per byte (the Avro JSON encoding); an enum is its symbol; a map
//! is an object; a record is an object keyed by field name, and on encode a missing field takes
//! the schema default (an error when there is none). Logical types are their underlying type.

use serde_json::{Map, Number, Value};

use crate::error::{Error, Result};
use crate::logformat::datum::binary::{write_bytes, write_long, Reader};
use crate::logformat::datum::schema::{Kind, Schema};

/// Nesting bound: deeper data is treated as corrupt rather than risking the stack.
const MAX_DEPTH: usize = 256;

/// Decodes one datum of `schema` from `r`.
pub fn decode_datum(schema: &Schema, r: &mut Reader<'_>) -> Result<Value> {
    decode(schema, r, 0)
}

fn decode(schema: &Schema, r: &mut Reader<'_>, depth: usize) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(Error::Corrupt(format!(
            "Avro datum nests deeper than {MAX_DEPTH}"
        )));
    }
    Ok(match &schema.kind {
        Kind::Null => Value::Null,
        Kind::Boolean => Value::Bool(r.boolean()?),
        Kind::Int => Value::from(r.int()?),
        Kind::Long => Value::from(r.long()?),
        Kind::Float => float_value(r.float()? as f64)?,
        Kind::Double => float_value(r.double()?)?,
        Kind::Bytes => Value::String(latin1(r.bytes()?)),
        Kind::String => Value::String(r.string()?.to_owned()),
        Kind::Fixed(f) => Value::String(latin1(r.fixed(f.size)?)),
        Kind::Enum(e) => {
            let i = r.int()?;
            let symbol = usize::try_from(i)
                .ok()
                .and_then(|i| e.symbols.get(i))
                .ok_or_else(|| Error::Corrupt(format!("enum {} has no symbol {i}", e.name)))?;
            Value::String(symbol.clone())
        }
        Kind::Record(rec) => {
            let mut obj = Map::with_capacity(rec.fields.len());
            for f in &rec.fields {
                obj.insert(f.name.clone(), decode(&f.schema, r, depth + 1)?);
            }
            Value::Object(obj)
        }
        Kind::Array(items) => {
            let mut out = Vec::new();
            read_blocks(r, |r| {
                out.push(decode(items, r, depth + 1)?);
                Ok(())
            })?;
            Value::Array(out)
        }
        Kind::Map(values) => {
            let mut obj = Map::new();
            read_blocks(r, |r| {
                let key = r.string()?.to_owned();
                obj.insert(key, decode(values, r, depth + 1)?);
                Ok(())
            })?;
            Value::Object(obj)
        }
        Kind::Union(branches) => {
            let i = r.long()?;
            let branch = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or_else(|| {
                    Error::Corrupt(format!(
                        "union branch {i} of {} does not exist",
                        branches.len()
                    ))
                })?;
            decode(branch, r, depth + 1)?
        }
    })
}

/// Reads array/map blocks until the empty block, calling `item` once per item. Every item of a
/// real datum takes at least one byte unless its type is empty (null, empty record), so a count
/// larger than the bytes left is only accepted up to a fixed bound: a forged count cannot spin.
fn read_blocks(
    r: &mut Reader<'_>,
    mut item: impl FnMut(&mut Reader<'_>) -> Result<()>,
) -> Result<()> {
    const MAX_EMPTY_ITEMS: usize = 1 << 20;
    let mut total = 0usize;
    loop {
        let n = r.block_count()?;
        if n == 0 {
            return Ok(());
        }
        total = total.saturating_add(n);
        if total > r.remaining().max(MAX_EMPTY_ITEMS) {
            return Err(Error::Corrupt(format!(
                "Avro block announces {n} items with {} bytes left",
                r.remaining()
            )));
        }
        for _ in 0..n {
            item(r)?;
        }
    }
}

/// JSON has no NaN or infinity; a timeline file never holds them, so refuse rather than guess.
fn float_value(v: f64) -> Result<Value> {
    Number::from_f64(v).map(Value::Number).ok_or_else(|| {
        Error::Unsupported(format!(
            "non-finite float {v} cannot be represented in JSON"
        ))
    })
}

/// Bytes as the Avro JSON string: each byte is the code point of the same value.
fn latin1(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| b as char).collect()
}

/// The inverse of `latin1`; `None` when a code point is above U+00FF.
fn from_latin1(s: &str) -> Option<Vec<u8>> {
    s.chars().map(|c| u8::try_from(c as u32).ok()).collect()
}

/// Encodes `value` as a datum of `schema`, appending to `out`. `path` names the value in errors.
pub fn encode_datum(schema: &Schema, value: &Value, out: &mut Vec<u8>) -> Result<()> {
    encode(schema, value, out, &mut String::from("$"), 0)
}

fn mismatch(schema: &Schema, value: &Value, path: &str) -> Error {
    let mut shown = value.to_string();
    if shown.chars().count() > 80 {
        shown = shown.chars().take(77).chain("...".chars()).collect();
    }
    Error::InvalidArgument(format!(
        "{path}: {shown} is not a valid Avro {}",
        schema.type_name()
    ))
}

fn encode(
    schema: &Schema,
    value: &Value,
    out: &mut Vec<u8>,
    path: &mut String,
    depth: usize,
) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "{path}: nests deeper than {MAX_DEPTH}"
        )));
    }
    match (&schema.kind, value) {
        (Kind::Null, Value::Null) => {}
        (Kind::Boolean, Value::Bool(b)) => out.push(*b as u8),
        (Kind::Int, Value::Number(n)) => {
            let v = n.as_i64().and_then(|v| i32::try_from(v).ok());
            write_long(out, v.ok_or_else(|| mismatch(schema, value, path))? as i64);
        }
        (Kind::Long, Value::Number(n)) => write_long(
            out,
            n.as_i64().ok_or_else(|| mismatch(schema, value, path))?,
        ),
        (Kind::Float, Value::Number(n)) => {
            let v = n.as_f64().ok_or_else(|| mismatch(schema, value, path))?;
            out.extend_from_slice(&(v as f32).to_le_bytes());
        }
        (Kind::Double, Value::Number(n)) => {
            let v = n.as_f64().ok_or_else(|| mismatch(schema, value, path))?;
            out.extend_from_slice(&v.to_le_bytes());
        }
        (Kind::String, Value::String(s)) => write_bytes(out, s.as_bytes()),
        (Kind::Bytes, Value::String(s)) => write_bytes(
            out,
            &from_latin1(s).ok_or_else(|| mismatch(schema, value, path))?,
        ),
        (Kind::Fixed(f), Value::String(s)) => match from_latin1(s) {
            Some(b) if b.len() == f.size => out.extend_from_slice(&b),
            _ => return Err(mismatch(schema, value, path)),
        },
        (Kind::Enum(e), Value::String(s)) => {
            let i = e
                .symbols
                .iter()
                .position(|x| x == s)
                .ok_or_else(|| mismatch(schema, value, path))?;
            write_long(out, i as i64);
        }
        (Kind::Array(items), Value::Array(values)) => {
            if !values.is_empty() {
                write_long(out, values.len() as i64);
                for (i, v) in values.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    encode(items, v, out, path, depth + 1)?;
                    path.truncate(len);
                }
            }
            out.push(0);
        }
        (Kind::Map(values), Value::Object(obj)) => {
            if !obj.is_empty() {
                write_long(out, obj.len() as i64);
                for (k, v) in obj {
                    write_bytes(out, k.as_bytes());
                    let len = path.len();
                    path.push_str(&format!("[{k:?}]"));
                    encode(values, v, out, path, depth + 1)?;
                    path.truncate(len);
                }
            }
            out.push(0);
        }
        (Kind::Record(rec), Value::Object(obj)) => {
            if let Some(unknown) = obj
                .keys()
                .find(|k| !rec.fields.iter().any(|f| &f.name == *k))
            {
                return Err(Error::InvalidArgument(format!(
                    "{path}: record {} has no field {unknown:?}",
                    rec.name
                )));
            }
            for f in &rec.fields {
                let len = path.len();
                path.push('.');
                path.push_str(&f.name);
                match (obj.get(&f.name), &f.default) {
                    (Some(v), _) => encode(&f.schema, v, out, path, depth + 1)?,
                    (None, Some(default)) => encode(&f.schema, default, out, path, depth + 1)?,
                    (None, None) => {
                        return Err(Error::InvalidArgument(format!(
                            "{path}: missing and the schema gives no default"
                        )))
                    }
                }
                path.truncate(len);
            }
        }
        (Kind::Union(branches), _) => {
            let i = branches
                .iter()
                .position(|b| fits(b, value, depth + 1))
                .ok_or_else(|| mismatch(schema, value, path))?;
            write_long(out, i as i64);
            encode(&branches[i], value, out, path, depth + 1)?;
        }
        _ => return Err(mismatch(schema, value, path)),
    }
    Ok(())
}

/// Whether `value` can be encoded as `schema` (deeply), which picks a union branch.
fn fits(schema: &Schema, value: &Value, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    match (&schema.kind, value) {
        (Kind::Null, Value::Null) => true,
        (Kind::Boolean, Value::Bool(_)) => true,
        (Kind::Int, Value::Number(n)) => n.as_i64().is_some_and(|v| i32::try_from(v).is_ok()),
        (Kind::Long, Value::Number(n)) => n.as_i64().is_some(),
        (Kind::Float | Kind::Double, Value::Number(_)) => true,
        (Kind::String, Value::String(_)) => true,
        (Kind::Bytes, Value::String(s)) => s.chars().all(|c| (c as u32) < 256),
        (Kind::Fixed(f), Value::String(s)) => {
            s.chars().count() == f.size && s.chars().all(|c| (c as u32) < 256)
        }
        (Kind::Enum(e), Value::String(s)) => e.symbols.iter().any(|x| x == s),
        (Kind::Array(items), Value::Array(vs)) => vs.iter().all(|v| fits(items, v, depth + 1)),
        (Kind::Map(values), Value::Object(obj)) => obj.values().all(|v| fits(values, v, depth + 1)),
        (Kind::Record(rec), Value::Object(obj)) => {
            obj.keys().all(|k| rec.fields.iter().any(|f| &f.name == k))
                && rec.fields.iter().all(|f| match obj.get(&f.name) {
                    Some(v) => fits(&f.schema, v, depth + 1),
                    None => f.default.is_some(),
                })
        }
        (Kind::Union(branches), v) => branches.iter().any(|b| fits(b, v, depth + 1)),
        _ => false,
    }
}
