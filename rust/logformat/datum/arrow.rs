//! The Arrow type a decoded Avro value gets when the caller names none.
//!
//! Hudi's Spark writers only produce nullable unions (`["null", T]`), so those map to a nullable
//! `T`; other multi-branch unions have no agreed Arrow form and are reported as unsupported.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema as ArrowSchema, TimeUnit};

use super::schema::{Kind, Logical, Schema};
use crate::error::{Error, Result};

/// Arrow schema for the fields of an Avro record schema.
pub fn record_to_arrow_schema(schema: &Schema) -> Result<ArrowSchema> {
    let Kind::Record(r) = &schema.kind else {
        return Err(Error::InvalidArgument(format!(
            "expected an Avro record schema, got {}",
            schema.type_name()
        )));
    };
    let fields = r
        .fields
        .iter()
        .map(|f| avro_to_arrow_field(&f.name, &f.schema))
        .collect::<Result<Vec<_>>>()?;
    Ok(ArrowSchema::new(fields))
}

/// The Arrow field for a value of `schema` named `name`; nullable iff Avro admits null.
pub fn avro_to_arrow_field(name: &str, schema: &Schema) -> Result<Field> {
    let (inner, nullable) = strip_nullable(schema)?;
    Ok(Field::new(name, avro_to_arrow_type(inner)?, nullable))
}

/// Removes a nullable-union wrapper: `["null", T]` → (`T`, true), `T` → (`T`, false).
pub fn strip_nullable(schema: &Schema) -> Result<(&Schema, bool)> {
    match &schema.kind {
        Kind::Union(branches) => {
            let non_null: Vec<&Schema> = branches
                .iter()
                .filter(|b| !matches!(b.kind, Kind::Null))
                .collect();
            let nullable = non_null.len() < branches.len();
            match non_null.as_slice() {
                [only] => Ok((only, nullable)),
                [] => Ok((&branches[0], true)),
                _ => Err(Error::Unsupported(format!(
                    "Avro union with {} non-null branches has no Arrow mapping",
                    non_null.len()
                ))),
            }
        }
        Kind::Null => Ok((schema, true)),
        _ => Ok((schema, false)),
    }
}

fn avro_to_arrow_type(schema: &Schema) -> Result<DataType> {
    let utc = || Some(Arc::from("UTC"));
    Ok(match (&schema.kind, schema.logical) {
        (_, Some(Logical::Decimal { precision, scale })) if precision <= 38 => {
            DataType::Decimal128(precision, scale)
        }
        (_, Some(Logical::Decimal { precision, scale })) => DataType::Decimal256(precision, scale),
        (Kind::Null, _) => DataType::Null,
        (Kind::Boolean, _) => DataType::Boolean,
        (Kind::Int, Some(Logical::Date)) => DataType::Date32,
        (Kind::Int, Some(Logical::TimeMillis)) => DataType::Time32(TimeUnit::Millisecond),
        (Kind::Int, _) => DataType::Int32,
        (Kind::Long, Some(Logical::TimeMicros)) => DataType::Time64(TimeUnit::Microsecond),
        (Kind::Long, Some(Logical::TimestampMillis)) => {
            DataType::Timestamp(TimeUnit::Millisecond, utc())
        }
        (Kind::Long, Some(Logical::TimestampMicros)) => {
            DataType::Timestamp(TimeUnit::Microsecond, utc())
        }
        (Kind::Long, Some(Logical::TimestampNanos)) => {
            DataType::Timestamp(TimeUnit::Nanosecond, utc())
        }
        (Kind::Long, Some(Logical::LocalTimestampMillis)) => {
            DataType::Timestamp(TimeUnit::Millisecond, None)
        }
        (Kind::Long, Some(Logical::LocalTimestampMicros)) => {
            DataType::Timestamp(TimeUnit::Microsecond, None)
        }
        (Kind::Long, Some(Logical::LocalTimestampNanos)) => {
            DataType::Timestamp(TimeUnit::Nanosecond, None)
        }
        (Kind::Long, _) => DataType::Int64,
        (Kind::Float, _) => DataType::Float32,
        (Kind::Double, _) => DataType::Float64,
        (Kind::Bytes, _) => DataType::Binary,
        (Kind::String, _) => DataType::Utf8,
        (Kind::Enum(_), _) => DataType::Utf8,
        (Kind::Fixed(f), _) => DataType::FixedSizeBinary(
            i32::try_from(f.size)
                .map_err(|_| Error::Unsupported(format!("fixed size {} too large", f.size)))?,
        ),
        (Kind::Record(r), _) => DataType::Struct(Fields::from(
            r.fields
                .iter()
                .map(|f| avro_to_arrow_field(&f.name, &f.schema))
                .collect::<Result<Vec<_>>>()?,
        )),
        (Kind::Array(items), _) => DataType::List(Arc::new(avro_to_arrow_field("item", items)?)),
        (Kind::Map(values), _) => DataType::Map(
            Arc::new(Field::new(
                "entries",
                DataType::Struct(Fields::from(vec![
                    Field::new("keys", DataType::Utf8, false),
                    avro_to_arrow_field("values", values)?,
                ])),
                false,
            )),
            false,
        ),
        (Kind::Union(_), _) => {
            let (inner, _) = strip_nullable(schema)?;
            return avro_to_arrow_type(inner);
        }
    })
}
