//! The Arrow <-> Avro schema mapping of Hudi's Spark writers (HUDI_FORMAT §5 "Schema
//! conventions"), as found in `extraMetadata.schema` of commits and `parquet.avro.schema` of
//! base files.
//!
//! Arrow -> Avro follows Spark's `SchemaConverters.toAvroType` as Hudi post-processes it: every
//! field is a `["null", T]` union with a null default; a nested record is named after its field
//! and namespaced by the enclosing record's full name; a decimal is a `fixed` named `fixed` in the
//! namespace `<enclosing record full name>.<field>`, sized to the fewest bytes holding its
//! precision; list elements and map values are nullable unions without a default. Avro -> Arrow
//! is the log-block codec's mapping (`logformat::datum::arrow`), so there is one inverse.

use serde_json::{json, Map, Value};

use arrow_schema::{DataType, Field, Schema as ArrowSchema, TimeUnit};

use crate::error::{Error, Result};
use crate::logformat::datum::arrow::record_to_arrow_schema;
use crate::logformat::datum::schema::Schema as AvroSchema;

/// The Avro writer schema (JSON text) of records with `schema`'s fields, as Spark/Hudi write
/// it: record `record_name` in `namespace` (Hudi uses `<table>_record` and `hoodie.<table>`).
/// The record name and each namespace component are sanitized as Hudi sanitizes a table name
/// (see [`sanitize_name`]), so that a table named `user-events` can be written, as Hudi writes
/// it; field names are not, since they name the columns.
pub fn arrow_to_avro_schema(
    schema: &ArrowSchema,
    record_name: &str,
    namespace: &str,
) -> Result<String> {
    let record_name = sanitize_name(record_name);
    check_name(&record_name, "record name")?;
    let namespace = if namespace.is_empty() {
        String::new()
    } else {
        let parts: Vec<String> = namespace.split('.').map(sanitize_name).collect();
        for part in &parts {
            check_name(part, "namespace component")?;
        }
        parts.join(".")
    };
    let record = record_json(
        schema.fields().iter().map(|f| f.as_ref()),
        &record_name,
        &namespace,
        "",
    )?;
    Ok(record.to_string())
}

/// Hudi's `HoodieAvroUtils.sanitizeName`: a first character no Avro name may start with, then
/// every other character no Avro name may hold, becomes `__` (one per code point, as Java's
/// regex matches them). Names that are valid already come back unchanged; an empty name stays
/// empty (and is refused as invalid).
pub fn sanitize_name(name: &str) -> String {
    const MASK: &str = "__";
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        let valid = c.is_ascii_alphabetic() || c == '_' || (i > 0 && c.is_ascii_digit());
        if valid {
            out.push(c);
        } else {
            out.push_str(MASK);
        }
    }
    out
}

/// The Arrow schema of an Avro record schema given as JSON text. Unions of null and one type are
/// nullable fields (either order); logical types map to Arrow's temporal and decimal types; enums
/// become utf8 and plain fixed becomes fixed_size_binary.
pub fn avro_to_arrow_schema(schema_json: &str) -> Result<ArrowSchema> {
    record_to_arrow_schema(&AvroSchema::parse(schema_json)?)
}

/// Avro names: `[A-Za-z_][A-Za-z0-9_]*`. Java's schema parser rejects anything else, so a table
/// with such a column could not be read by Hudi; fail at conversion instead.
fn check_name(name: &str, what: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "{what} {name:?} is not a valid Avro name"
        )))
    }
}

fn full_name(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_owned()
    } else {
        format!("{namespace}.{name}")
    }
}

/// Hudi's meta fields (HUDI_FORMAT §5), which its writers add to a record schema with `"doc":""`.
const META_FIELDS: [&str; 6] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
    "_hoodie_operation",
];

/// A record type JSON. `path` is the dotted Arrow field path, for error messages.
fn record_json<'a>(
    fields: impl Iterator<Item = &'a Field>,
    name: &str,
    namespace: &str,
    path: &str,
) -> Result<Value> {
    let child_namespace = full_name(namespace, name);
    let mut out = Vec::new();
    for f in fields {
        check_name(f.name(), "field name")?;
        let field_path = if path.is_empty() {
            f.name().clone()
        } else {
            format!("{path}.{}", f.name())
        };
        let t = type_json(f.data_type(), f.name(), &child_namespace, &field_path)?;
        if path.is_empty() && META_FIELDS.contains(&f.name().as_str()) {
            // Hudi's `addMetadataFields` documents its meta fields with an empty doc.
            out.push(json!({"name": f.name(), "type": ["null", t], "doc": "", "default": null}));
        } else {
            out.push(json!({"name": f.name(), "type": ["null", t], "default": null}));
        }
    }
    let mut record = Map::new();
    record.insert("type".into(), "record".into());
    record.insert("name".into(), name.into());
    if !namespace.is_empty() {
        record.insert("namespace".into(), namespace.into());
    }
    record.insert("fields".into(), Value::Array(out));
    Ok(Value::Object(record))
}

/// Spark's `minBytesForPrecision`: the fewest bytes whose two's complement holds 10^p - 1.
fn min_bytes_for_precision(precision: u8) -> usize {
    let max = 10u128.pow(precision as u32) - 1;
    (1..=16).find(|&n| max < 1u128 << (8 * n - 1)).unwrap_or(16)
}

/// The (non-null) Avro type of a value of `dt`. Spark converts the value of field `name` inside
/// the record whose full name is `namespace`; arrays and maps pass both on to their elements.
fn type_json(dt: &DataType, name: &str, namespace: &str, path: &str) -> Result<Value> {
    let unsupported = |why: &str| {
        Err(Error::Unsupported(format!(
            "column {path} of type {dt}: {why}"
        )))
    };
    Ok(match dt {
        DataType::Boolean => json!("boolean"),
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 => {
            json!("int")
        }
        DataType::Int64 | DataType::UInt32 => json!("long"),
        DataType::Float32 => json!("float"),
        DataType::Float64 => json!("double"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => json!("string"),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => json!("bytes"),
        DataType::Date32 => json!({"type": "int", "logicalType": "date"}),
        DataType::Time32(TimeUnit::Millisecond) => {
            json!({"type": "int", "logicalType": "time-millis"})
        }
        DataType::Time64(TimeUnit::Microsecond) => {
            json!({"type": "long", "logicalType": "time-micros"})
        }
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            json!({"type": "long", "logicalType": "timestamp-micros"})
        }
        DataType::Timestamp(TimeUnit::Millisecond, _) => {
            json!({"type": "long", "logicalType": "timestamp-millis"})
        }
        DataType::Timestamp(_, _) => {
            return unsupported("Hudi/Spark timestamps are micro- or milliseconds; cast first")
        }
        DataType::Decimal128(precision, scale) => {
            if *precision == 0 || *precision > 38 || *scale < 0 {
                return unsupported("decimal precision must be 1..=38 and scale non-negative");
            }
            json!({
                "type": "fixed",
                "name": "fixed",
                "namespace": full_name(namespace, name),
                "size": min_bytes_for_precision(*precision),
                "logicalType": "decimal",
                "precision": precision,
                "scale": scale,
            })
        }
        DataType::List(item) | DataType::LargeList(item) => json!({
            "type": "array",
            "items": ["null", type_json(item.data_type(), name, namespace, &format!("{path}[]"))?],
        }),
        DataType::Struct(fields) => {
            record_json(fields.iter().map(|f| f.as_ref()), name, namespace, path)?
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return unsupported("map entries are not a struct");
            };
            if kv.len() != 2 {
                return unsupported("map entries must have a key and a value");
            }
            if !matches!(
                kv[0].data_type(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) {
                return unsupported("Avro map keys are strings");
            }
            json!({
                "type": "map",
                "values": ["null", type_json(kv[1].data_type(), name, namespace, &format!("{path}{{}}"))?],
            })
        }
        _ => return unsupported("no Avro mapping"),
    })
}
