//! A compact Avro schema model parsed from JSON, enough to drive the datum codec.
//!
//! Our own model rather than `apache_avro::Schema` because the codec needs two things that crate
//! makes awkward: lenient parsing of what Java Avro accepts in Hudi headers (e.g. a union default
//! that does not match the first branch, as `hoodie.table.create.schema` has), and cheap access to
//! field defaults and logical types while compiling decoders. Named types are inlined at each
//! reference (`Arc`), so recursive schemas — which Arrow cannot represent — are rejected.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, Result};

/// Avro logical types the codec understands. Invalid annotations are dropped, as Java does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logical {
    /// `int` days since the epoch.
    Date,
    /// `int` milliseconds since midnight.
    TimeMillis,
    /// `long` microseconds since midnight.
    TimeMicros,
    /// `long` milliseconds since the epoch, UTC.
    TimestampMillis,
    /// `long` microseconds since the epoch, UTC.
    TimestampMicros,
    /// `long` nanoseconds since the epoch, UTC.
    TimestampNanos,
    /// `long` milliseconds, wall-clock (no zone).
    LocalTimestampMillis,
    /// `long` microseconds, wall-clock (no zone).
    LocalTimestampMicros,
    /// `long` nanoseconds, wall-clock (no zone).
    LocalTimestampNanos,
    /// `bytes`/`fixed` big-endian two's-complement unscaled value.
    Decimal {
        /// Total digits.
        precision: u8,
        /// Digits after the point.
        scale: i8,
    },
    /// `string` UUID.
    Uuid,
}

/// A record field.
#[derive(Clone, Debug)]
pub struct RecordField {
    /// Field name.
    pub name: String,
    /// Field aliases (used to match writer fields during resolution).
    pub aliases: Vec<String>,
    /// Field type.
    pub schema: Schema,
    /// JSON default, if declared.
    pub default: Option<Value>,
}

/// A record type.
#[derive(Debug)]
pub struct Record {
    /// Full name.
    pub name: String,
    /// Fields in declaration order.
    pub fields: Vec<RecordField>,
}

/// An enum type.
#[derive(Debug)]
pub struct Enum {
    /// Full name.
    pub name: String,
    /// Symbols in ordinal order.
    pub symbols: Vec<String>,
    /// Reader-side fallback symbol for unknown writer symbols.
    pub default: Option<String>,
}

/// A fixed type.
#[derive(Debug)]
pub struct Fixed {
    /// Full name.
    pub name: String,
    /// Byte size.
    pub size: usize,
}

/// The shape of an Avro type.
#[derive(Clone, Debug)]
pub enum Kind {
    /// `null`.
    Null,
    /// `boolean`.
    Boolean,
    /// `int`.
    Int,
    /// `long`.
    Long,
    /// `float`.
    Float,
    /// `double`.
    Double,
    /// `bytes`.
    Bytes,
    /// `string`.
    String,
    /// `record`.
    Record(Arc<Record>),
    /// `enum`.
    Enum(Arc<Enum>),
    /// `array` of items.
    Array(Box<Schema>),
    /// `map` with string keys.
    Map(Box<Schema>),
    /// `union` of branches.
    Union(Vec<Schema>),
    /// `fixed`.
    Fixed(Arc<Fixed>),
}

/// An Avro type with its (valid) logical annotation.
#[derive(Clone, Debug)]
pub struct Schema {
    /// The underlying type.
    pub kind: Kind,
    /// Logical type, if any and valid for `kind`.
    pub logical: Option<Logical>,
}

impl Schema {
    fn plain(kind: Kind) -> Self {
        Self {
            kind,
            logical: None,
        }
    }

    /// Parses a schema from its JSON text.
    pub fn parse(json: &str) -> Result<Self> {
        let value: Value = serde_json::from_str(json)
            .map_err(|e| Error::InvalidArgument(format!("Avro schema is not JSON: {e}")))?;
        Parser::default().parse(&value, "")
    }

    /// For `["null", T]` / `[T, "null"]`: the index of the null branch and of `T`.
    pub fn nullable_branches(&self) -> Option<(usize, usize, &Schema)> {
        let Kind::Union(branches) = &self.kind else {
            return None;
        };
        if branches.len() != 2 {
            return None;
        }
        match (&branches[0].kind, &branches[1].kind) {
            (Kind::Null, k) if !matches!(k, Kind::Null) => Some((0, 1, &branches[1])),
            (k, Kind::Null) if !matches!(k, Kind::Null) => Some((1, 0, &branches[0])),
            _ => None,
        }
    }

    /// True if the type admits null (is `null` or a union with a `null` branch).
    pub fn is_nullable(&self) -> bool {
        match &self.kind {
            Kind::Null => true,
            Kind::Union(b) => b.iter().any(|s| matches!(s.kind, Kind::Null)),
            _ => false,
        }
    }

    /// Short name of the type for messages.
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Null => "null",
            Kind::Boolean => "boolean",
            Kind::Int => "int",
            Kind::Long => "long",
            Kind::Float => "float",
            Kind::Double => "double",
            Kind::Bytes => "bytes",
            Kind::String => "string",
            Kind::Record(_) => "record",
            Kind::Enum(_) => "enum",
            Kind::Array(_) => "array",
            Kind::Map(_) => "map",
            Kind::Union(_) => "union",
            Kind::Fixed(_) => "fixed",
        }
    }

    /// The full name of a named type.
    pub fn full_name(&self) -> Option<&str> {
        match &self.kind {
            Kind::Record(r) => Some(&r.name),
            Kind::Enum(e) => Some(&e.name),
            Kind::Fixed(f) => Some(&f.name),
            _ => None,
        }
    }
}

#[derive(Default)]
struct Parser {
    named: HashMap<String, Schema>,
    /// Records being parsed; a reference to one of these is recursion.
    open: Vec<String>,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::InvalidArgument(format!("invalid Avro schema: {}", msg.into()))
}

fn full_name(name: &str, namespace: Option<&str>, enclosing: &str) -> String {
    if name.contains('.') {
        return name.to_string();
    }
    match namespace.unwrap_or(enclosing) {
        "" => name.to_string(),
        ns => format!("{ns}.{name}"),
    }
}

fn namespace_of(full: &str) -> &str {
    full.rfind('.').map_or("", |i| &full[..i])
}

impl Parser {
    fn parse(&mut self, v: &Value, ns: &str) -> Result<Schema> {
        match v {
            Value::String(name) => self.named_or_primitive(name, ns),
            Value::Array(branches) => {
                let branches = branches
                    .iter()
                    .map(|b| self.parse(b, ns))
                    .collect::<Result<Vec<_>>>()?;
                if branches.iter().any(|b| matches!(b.kind, Kind::Union(_))) {
                    return Err(invalid("unions may not immediately contain unions"));
                }
                Ok(Schema::plain(Kind::Union(branches)))
            }
            Value::Object(obj) => {
                let ty = obj
                    .get("type")
                    .ok_or_else(|| invalid("object without \"type\""))?;
                let kind_schema = match ty.as_str() {
                    Some("record") | Some("error") => self.record(obj, ns)?,
                    Some("enum") => self.enumeration(obj, ns)?,
                    Some("fixed") => self.fixed(obj, ns)?,
                    Some("array") => {
                        let items = obj
                            .get("items")
                            .ok_or_else(|| invalid("array without items"))?;
                        Schema::plain(Kind::Array(Box::new(self.parse(items, ns)?)))
                    }
                    Some("map") => {
                        let values = obj
                            .get("values")
                            .ok_or_else(|| invalid("map without values"))?;
                        Schema::plain(Kind::Map(Box::new(self.parse(values, ns)?)))
                    }
                    // {"type": "string"} or {"type": {...}} or {"type": "SomeName"}.
                    _ => self.parse(ty, ns)?,
                };
                Ok(with_logical(kind_schema, obj))
            }
            other => Err(invalid(format!("unexpected JSON {other}"))),
        }
    }

    fn named_or_primitive(&self, name: &str, ns: &str) -> Result<Schema> {
        let kind = match name {
            "null" => Kind::Null,
            "boolean" => Kind::Boolean,
            "int" => Kind::Int,
            "long" => Kind::Long,
            "float" => Kind::Float,
            "double" => Kind::Double,
            "bytes" => Kind::Bytes,
            "string" => Kind::String,
            _ => {
                let candidates = [full_name(name, None, ns), name.to_string()];
                for c in &candidates {
                    if self.open.contains(c) {
                        return Err(Error::Unsupported(format!(
                            "recursive Avro type {c} has no Arrow representation"
                        )));
                    }
                    if let Some(s) = self.named.get(c) {
                        return Ok(s.clone());
                    }
                }
                return Err(invalid(format!("unknown type {name:?}")));
            }
        };
        Ok(Schema::plain(kind))
    }

    fn name_of(&self, obj: &serde_json::Map<String, Value>, ns: &str) -> Result<String> {
        let name = obj
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("named type without a name"))?;
        let namespace = obj.get("namespace").and_then(Value::as_str);
        Ok(full_name(name, namespace, ns))
    }

    fn define(&mut self, name: &str, schema: &Schema) -> Result<()> {
        if self
            .named
            .insert(name.to_string(), schema.clone())
            .is_some()
        {
            return Err(invalid(format!("type {name} defined twice")));
        }
        Ok(())
    }

    fn record(&mut self, obj: &serde_json::Map<String, Value>, ns: &str) -> Result<Schema> {
        let name = self.name_of(obj, ns)?;
        let inner_ns = namespace_of(&name).to_string();
        let fields_json = obj
            .get("fields")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(format!("record {name} without fields")))?;
        self.open.push(name.clone());
        let mut fields = Vec::with_capacity(fields_json.len());
        for f in fields_json {
            let fname = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid(format!("field of {name} without a name")))?;
            let ftype = f
                .get("type")
                .ok_or_else(|| invalid(format!("field {fname} without a type")))?;
            let schema = self.parse(ftype, &inner_ns)?;
            let aliases = f
                .get("aliases")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default();
            fields.push(RecordField {
                name: fname.to_string(),
                aliases,
                schema,
                default: f.get("default").cloned(),
            });
        }
        self.open.pop();
        let schema = Schema::plain(Kind::Record(Arc::new(Record {
            name: name.clone(),
            fields,
        })));
        self.define(&name, &schema)?;
        Ok(schema)
    }

    fn enumeration(&mut self, obj: &serde_json::Map<String, Value>, ns: &str) -> Result<Schema> {
        let name = self.name_of(obj, ns)?;
        let symbols = obj
            .get("symbols")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(format!("enum {name} without symbols")))?
            .iter()
            .map(|s| {
                s.as_str()
                    .map(String::from)
                    .ok_or_else(|| invalid("enum symbol is not a string"))
            })
            .collect::<Result<Vec<_>>>()?;
        let default = obj.get("default").and_then(Value::as_str).map(String::from);
        let schema = Schema::plain(Kind::Enum(Arc::new(Enum {
            name: name.clone(),
            symbols,
            default,
        })));
        self.define(&name, &schema)?;
        Ok(schema)
    }

    fn fixed(&mut self, obj: &serde_json::Map<String, Value>, ns: &str) -> Result<Schema> {
        let name = self.name_of(obj, ns)?;
        let size = obj
            .get("size")
            .and_then(Value::as_u64)
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| invalid(format!("fixed {name} without a valid size")))?;
        let schema = Schema::plain(Kind::Fixed(Arc::new(Fixed {
            name: name.clone(),
            size,
        })));
        self.define(&name, &schema)?;
        // The logical annotation lives on the same object; `with_logical` adds it for this use,
        // while references by name get the plain fixed (as Java's parser shares one instance).
        Ok(schema)
    }
}

/// Attaches a logical type from `obj` when it is valid for the underlying type.
fn with_logical(mut schema: Schema, obj: &serde_json::Map<String, Value>) -> Schema {
    let Some(lt) = obj.get("logicalType").and_then(Value::as_str) else {
        return schema;
    };
    let logical = match (lt, &schema.kind) {
        ("date", Kind::Int) => Some(Logical::Date),
        ("time-millis", Kind::Int) => Some(Logical::TimeMillis),
        ("time-micros", Kind::Long) => Some(Logical::TimeMicros),
        ("timestamp-millis", Kind::Long) => Some(Logical::TimestampMillis),
        ("timestamp-micros", Kind::Long) => Some(Logical::TimestampMicros),
        ("timestamp-nanos", Kind::Long) => Some(Logical::TimestampNanos),
        ("local-timestamp-millis", Kind::Long) => Some(Logical::LocalTimestampMillis),
        ("local-timestamp-micros", Kind::Long) => Some(Logical::LocalTimestampMicros),
        ("local-timestamp-nanos", Kind::Long) => Some(Logical::LocalTimestampNanos),
        ("uuid", Kind::String) => Some(Logical::Uuid),
        ("decimal", Kind::Bytes | Kind::Fixed(_)) => decimal_of(obj, &schema.kind),
        _ => None,
    };
    if logical.is_some() {
        schema.logical = logical;
    }
    schema
}

fn decimal_of(obj: &serde_json::Map<String, Value>, kind: &Kind) -> Option<Logical> {
    let precision = obj.get("precision")?.as_u64()?;
    let scale = obj.get("scale").map_or(Some(0), Value::as_u64)?;
    if precision == 0 || scale > precision || precision > 76 {
        return None;
    }
    if let Kind::Fixed(f) = kind {
        // Largest precision a fixed of this size can hold: floor(log10(2^(8n-1) - 1)).
        let bits = (8 * f.size as u32).saturating_sub(1);
        let max = (f64::from(bits) * std::f64::consts::LOG10_2).floor() as u64;
        if precision > max {
            return None;
        }
    }
    Some(Logical::Decimal {
        precision: precision as u8,
        scale: scale as i8,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_named_references_and_namespaces() {
        let s = Schema::parse(
            r#"{"type":"record","name":"r","namespace":"a.b","fields":[
                {"name":"f","type":{"type":"fixed","name":"F","size":4}},
                {"name":"g","type":["null","F"],"default":null},
                {"name":"h","type":"a.b.F"},
                {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
                {"name":"t","type":{"type":"long","logicalType":"timestamp-micros"}},
                {"name":"bad","type":{"type":"string","logicalType":"date"}}
            ]}"#,
        )
        .unwrap();
        let Kind::Record(r) = &s.kind else { panic!() };
        assert_eq!(r.name, "a.b.r");
        assert_eq!(r.fields[0].schema.full_name(), Some("a.b.F"));
        let (null_idx, value_idx, inner) = r.fields[1].schema.nullable_branches().unwrap();
        assert_eq!(
            (null_idx, value_idx, inner.full_name()),
            (0, 1, Some("a.b.F"))
        );
        assert_eq!(r.fields[2].schema.full_name(), Some("a.b.F"));
        assert_eq!(
            r.fields[3].schema.logical,
            Some(Logical::Decimal {
                precision: 10,
                scale: 2
            })
        );
        assert_eq!(r.fields[4].schema.logical, Some(Logical::TimestampMicros));
        assert_eq!(r.fields[5].schema.logical, None);
        assert_eq!(r.fields[1].default, Some(Value::Null));
    }

    #[test]
    fn rejects_recursion_and_unknown_names() {
        let rec = r#"{"type":"record","name":"n","fields":[{"name":"next","type":["null","n"]}]}"#;
        assert!(matches!(Schema::parse(rec), Err(Error::Unsupported(_))));
        assert!(Schema::parse(r#""nope""#).is_err());
        assert!(Schema::parse("{").is_err());
    }

    #[test]
    fn decimal_precision_must_fit_the_fixed_size() {
        // 4 bytes hold at most 9 digits (2^31 - 1 = 2147483647).
        let ok = Schema::parse(
            r#"{"type":"fixed","name":"x","size":4,"logicalType":"decimal","precision":9}"#,
        )
        .unwrap();
        assert!(ok.logical.is_some());
        let too_big = Schema::parse(
            r#"{"type":"fixed","name":"x","size":4,"logicalType":"decimal","precision":10}"#,
        )
        .unwrap();
        assert!(too_big.logical.is_none());
    }
}
