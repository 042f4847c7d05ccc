//! Avro container/JSON codec and schema mapping tests.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema as ArrowSchema, TimeUnit};
use serde_json::{json, Value};

use super::json::{decode_datum, encode_datum};
use super::*;
use crate::error::Error;
use crate::logformat::datum::binary::Reader;
use crate::logformat::datum::schema::{Kind, Schema};

fn schemas_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/spec/schemas")
}

/// A value of every branch shape: non-default, non-null where possible, so that a round trip
/// exercises each field's type rather than its default.
fn sample(schema: &Schema, depth: usize) -> Value {
    match &schema.kind {
        Kind::Null => Value::Null,
        Kind::Boolean => json!(true),
        Kind::Int => json!(-1234 - depth as i64),
        Kind::Long => json!(1i64 << 40),
        Kind::Float => json!(1.5),
        Kind::Double => json!(-2.25),
        Kind::Bytes => json!("\u{0}\u{ff}b"),
        Kind::String => json!(format!("s{depth}-é")),
        Kind::Fixed(f) => json!("x".repeat(f.size)),
        Kind::Enum(e) => json!(e.symbols.last().unwrap()),
        Kind::Record(r) => Value::Object(
            r.fields
                .iter()
                .map(|f| (f.name.clone(), sample(&f.schema, depth + 1)))
                .collect(),
        ),
        Kind::Array(items) => json!([sample(items, depth + 1), sample(items, depth + 2)]),
        Kind::Map(values) => {
            json!({"k1": sample(values, depth + 1), "k0": sample(values, depth + 2)})
        }
        // The last branch: with ["null", T] that is T, so the encoder must skip the null branch.
        Kind::Union(branches) => sample(branches.last().unwrap(), depth),
    }
}

#[test]
fn hudi_schemas_round_trip_through_containers() {
    let mut seen = 0;
    for entry in std::fs::read_dir(schemas_dir()).expect("shared/spec/schemas beside the repo") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "avsc") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let schema = Schema::parse(&text).unwrap();
        let record = sample(&schema, 0);
        let bytes = write_container(&text, &[record.clone(), record.clone()]).unwrap();
        let back = read_container(&bytes).unwrap();
        assert_eq!(
            back.records,
            vec![record.clone(), record],
            "{}",
            path.display()
        );
        assert_eq!(back.codec, "null");
        let stored: Value = serde_json::from_str(&back.schema).unwrap();
        assert_eq!(stored, serde_json::from_str::<Value>(&text).unwrap());
        seen += 1;
    }
    assert!(seen >= 15, "only {seen} schemas found");
}

#[test]
fn datum_bytes_match_the_avro_spec() {
    let schema = Schema::parse(
        r#"{"type":"record","name":"r","fields":[
            {"name":"a","type":"int"},
            {"name":"b","type":["null","string"],"default":null},
            {"name":"c","type":{"type":"array","items":"long"}},
            {"name":"d","type":{"type":"map","values":"boolean"}},
            {"name":"e","type":{"type":"enum","name":"E","symbols":["X","Y"]}},
            {"name":"f","type":{"type":"fixed","name":"F","size":2}},
            {"name":"g","type":"bytes"},
            {"name":"h","type":"double","default":0.5}
        ]}"#,
    )
    .unwrap();
    let value = json!({"a": -2, "b": "hi", "c": [1, 64], "d": {"k": true}, "e": "Y",
                       "f": "\u{1}\u{ff}", "g": "\u{80}"});
    let mut out = Vec::new();
    encode_datum(&schema, &value, &mut out).unwrap();
    let expected: Vec<u8> = [
        &[0x03][..],                     // a = -2 (zig-zag 3)
        &[0x02, 0x04, b'h', b'i'],       // b: branch 1, "hi"
        &[0x04, 0x02, 0x80, 0x01, 0x00], // c: block of 2: 1, 64, end
        &[0x02, 0x02, b'k', 0x01, 0x00], // d: block of 1: "k" -> true, end
        &[0x02],                         // e: symbol 1
        &[0x01, 0xff],                   // f: 2 raw bytes
        &[0x02, 0x80],                   // g: 1 byte 0x80
        &0.5f64.to_le_bytes(),           // h: default
    ]
    .concat();
    assert_eq!(out, expected);
    let decoded = decode_datum(&schema, &mut Reader::new(&out)).unwrap();
    let mut with_default = value.clone();
    with_default["h"] = json!(0.5);
    assert_eq!(decoded, with_default);
    // Decoding keeps schema field order and map entry order.
    let keys: Vec<&String> = decoded.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["a", "b", "c", "d", "e", "f", "g", "h"]);
}

#[test]
fn union_branch_is_the_first_that_fits() {
    let schema = Schema::parse(r#"["null","int","long","string",{"type":"record","name":"R","fields":[{"name":"x","type":"int","default":7}]}]"#).unwrap();
    let cases: [(Value, &[u8]); 5] = [
        (json!(null), &[0x00]),
        (json!(5), &[0x02, 0x0a]),
        (json!(1i64 << 33), &[0x04, 0x80, 0x80, 0x80, 0x80, 0x40]),
        (json!("a"), &[0x06, 0x02, b'a']),
        (json!({}), &[0x08, 0x0e]),
    ];
    for (value, bytes) in cases {
        let mut out = Vec::new();
        encode_datum(&schema, &value, &mut out).unwrap();
        assert_eq!(out, bytes, "{value}");
    }
    let mut out = Vec::new();
    let err = encode_datum(&schema, &json!(1.5), &mut out).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)));
}

#[test]
fn records_need_known_fields_and_defaults() {
    let schema = Schema::parse(
        r#"{"type":"record","name":"r","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"d"}]}"#,
    )
    .unwrap();
    let mut out = Vec::new();
    encode_datum(&schema, &json!({"a": 1}), &mut out).unwrap();
    assert_eq!(out, [0x02, 0x02, b'd']);
    for bad in [
        json!({"b": "x"}),
        json!({"a": 1, "zz": 2}),
        json!({"a": "one"}),
        json!({"a": 1i64 << 40}),
    ] {
        let err = encode_datum(&schema, &bad, &mut Vec::new()).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{bad}: {err}");
    }
    // Bytes and fixed accept only code points up to U+00FF.
    let bytes = Schema::parse(r#""bytes""#).unwrap();
    assert!(encode_datum(&bytes, &json!("Ā"), &mut Vec::new()).is_err());
}

#[test]
fn container_layout_and_damage() {
    let schema = r#"{"type":"record","name":"r","fields":[{"name":"a","type":"long"}]}"#;
    let bytes = json_to_container(schema, r#"[{"a": 1}, {"a": -1}]"#).unwrap();
    assert_eq!(&bytes[..4], b"Obj\x01");
    // Tail: count 2, size 2, records 02 01, then the 16-byte sync marker from the header.
    let n = bytes.len();
    assert_eq!(&bytes[n - 20..n - 16], &[0x04, 0x04, 0x02, 0x01]);
    assert_eq!(&bytes[n - 16..], &bytes[n - 36..n - 20]);
    assert_eq!(container_to_json(&bytes).unwrap(), r#"[{"a":1},{"a":-1}]"#);

    // No records: header only, no block.
    let empty = json_to_container(schema, "[]").unwrap();
    assert_eq!(container_to_json(&empty).unwrap(), "[]");
    assert_eq!(empty.len(), n - 20);

    for len in 0..n {
        if len == n - 20 {
            continue; // exactly the header: a valid file with no blocks
        }
        match read_container(&bytes[..len]) {
            Err(Error::Corrupt(_)) => {}
            other => panic!("truncated to {len}: {other:?}"),
        }
    }
    let mut bad_sync = bytes.clone();
    bad_sync[n - 1] ^= 1;
    assert!(matches!(read_container(&bad_sync), Err(Error::Corrupt(_))));
    assert!(matches!(
        json_to_container(schema, "{}"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        json_to_container("not json", "[]"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn container_with_deflate_codec_decodes() {
    // Re-pack our block with apache-avro's deflate to check codec handling end to end.
    let schema_text = r#"{"type":"record","name":"r","fields":[{"name":"s","type":"string"}]}"#;
    let schema = apache_avro::Schema::parse_str(schema_text).unwrap();
    let mut writer = apache_avro::Writer::with_codec(
        &schema,
        Vec::new(),
        apache_avro::Codec::Deflate(apache_avro::DeflateSettings::default()),
    );
    for s in ["a", "bb"] {
        let mut rec = apache_avro::types::Record::new(&schema).unwrap();
        rec.put("s", s);
        writer.append(rec).unwrap();
    }
    let bytes = writer.into_inner().unwrap();
    let c = read_container(&bytes).unwrap();
    assert_eq!(c.codec, "deflate");
    assert_eq!(c.records, vec![json!({"s": "a"}), json!({"s": "bb"})]);
}

fn nullable(name: &str, dt: DataType) -> Field {
    Field::new(name, dt, true)
}

/// `extraMetadata.schema` of the first commit of fixture cow_v6_complexkeygen_hivestyle.
const COMPLEXKEYGEN_COMMIT_SCHEMA: &str = r#"{"type":"record","name":"v6_complexkeygen_hivestyle_record","namespace":"hoodie.v6_complexkeygen_hivestyle","fields":[{"name":"id","type":["null","int"],"default":null},{"name":"name","type":["null","string"],"default":null},{"name":"isActive","type":["null","boolean"],"default":null},{"name":"intField","type":["null","int"],"default":null},{"name":"longField","type":["null","long"],"default":null},{"name":"floatField","type":["null","float"],"default":null},{"name":"doubleField","type":["null","double"],"default":null},{"name":"decimalField","type":["null",{"type":"fixed","name":"fixed","namespace":"hoodie.v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record.decimalField","size":5,"logicalType":"decimal","precision":10,"scale":5}],"default":null},{"name":"dateField","type":["null",{"type":"int","logicalType":"date"}],"default":null},{"name":"timestampField","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},{"name":"binaryField","type":["null","bytes"],"default":null},{"name":"arrayField","type":["null",{"type":"array","items":["null",{"type":"record","name":"arrayField","namespace":"hoodie.v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record","fields":[{"name":"arr_struct_f1","type":["null","string"],"default":null},{"name":"arr_struct_f2","type":["null","int"],"default":null}]}]}],"default":null},{"name":"mapField","type":["null",{"type":"map","values":["null",{"type":"record","name":"mapField","namespace":"hoodie.v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record","fields":[{"name":"map_field_value_struct_f1","type":["null","double"],"default":null},{"name":"map_field_value_struct_f2","type":["null","boolean"],"default":null}]}]}],"default":null},{"name":"structField","type":["null",{"type":"record","name":"structField","namespace":"hoodie.v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record","fields":[{"name":"field1","type":["null","string"],"default":null},{"name":"field2","type":["null","int"],"default":null},{"name":"child_struct","type":["null",{"type":"record","name":"child_struct","namespace":"hoodie.v6_complexkeygen_hivestyle.v6_complexkeygen_hivestyle_record.structField","fields":[{"name":"child_field1","type":["null","double"],"default":null},{"name":"child_field2","type":["null","boolean"],"default":null}]}],"default":null}]}],"default":null},{"name":"byteField","type":["null","int"],"default":null},{"name":"shortField","type":["null","int"],"default":null}]}"#;

/// The Arrow schema pyarrow reads from that table's base files (meta columns dropped).
fn complexkeygen_arrow() -> ArrowSchema {
    let arr_struct = DataType::Struct(Fields::from(vec![
        nullable("arr_struct_f1", DataType::Utf8),
        nullable("arr_struct_f2", DataType::Int32),
    ]));
    let map_value = DataType::Struct(Fields::from(vec![
        nullable("map_field_value_struct_f1", DataType::Float64),
        nullable("map_field_value_struct_f2", DataType::Boolean),
    ]));
    let entries = Field::new(
        "key_value",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            nullable("value", map_value),
        ])),
        false,
    );
    let child = DataType::Struct(Fields::from(vec![
        nullable("child_field1", DataType::Float64),
        nullable("child_field2", DataType::Boolean),
    ]));
    ArrowSchema::new(vec![
        nullable("id", DataType::Int32),
        nullable("name", DataType::Utf8),
        nullable("isActive", DataType::Boolean),
        nullable("intField", DataType::Int32),
        nullable("longField", DataType::Int64),
        nullable("floatField", DataType::Float32),
        nullable("doubleField", DataType::Float64),
        nullable("decimalField", DataType::Decimal128(10, 5)),
        nullable("dateField", DataType::Date32),
        nullable(
            "timestampField",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        ),
        nullable("binaryField", DataType::Binary),
        nullable(
            "arrayField",
            DataType::List(Arc::new(Field::new("array", arr_struct, false))),
        ),
        nullable("mapField", DataType::Map(Arc::new(entries), false)),
        nullable(
            "structField",
            DataType::Struct(Fields::from(vec![
                nullable("field1", DataType::Utf8),
                nullable("field2", DataType::Int32),
                nullable("child_struct", child),
            ])),
        ),
        // Spark ByteType / ShortType columns.
        nullable("byteField", DataType::Int8),
        nullable("shortField", DataType::Int16),
    ])
}

#[test]
fn arrow_to_avro_matches_the_fixture_commit_schema() {
    let got = arrow_to_avro_schema(
        &complexkeygen_arrow(),
        "v6_complexkeygen_hivestyle_record",
        "hoodie.v6_complexkeygen_hivestyle",
    )
    .unwrap();
    assert_eq!(got, COMPLEXKEYGEN_COMMIT_SCHEMA);
}

#[test]
fn decimal_fixed_sizes_follow_spark() {
    // Fewest bytes n with 2^(8n-1) - 1 >= 10^p - 1, worked out by hand.
    for (p, size) in [
        (1u8, 1u64),
        (2, 1),
        (3, 2),
        (4, 2),
        (5, 3),
        (9, 4),
        (10, 5),
        (18, 8),
        (19, 9),
        (38, 16),
    ] {
        let schema = ArrowSchema::new(vec![nullable("d", DataType::Decimal128(p, 0))]);
        let v: Value =
            serde_json::from_str(&arrow_to_avro_schema(&schema, "r", "ns").unwrap()).unwrap();
        assert_eq!(
            v["fields"][0]["type"][1]["size"],
            json!(size),
            "precision {p}"
        );
    }
}

#[test]
fn every_type_round_trips() {
    let utc = Some(Arc::from("UTC"));
    let item = |dt| Arc::new(Field::new("item", dt, true));
    let map = DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("keys", DataType::Utf8, false),
                nullable("values", DataType::Int64),
            ])),
            false,
        )),
        false,
    );
    let schema = ArrowSchema::new(vec![
        nullable("b", DataType::Boolean),
        nullable("i", DataType::Int32),
        nullable("l", DataType::Int64),
        nullable("f", DataType::Float32),
        nullable("d", DataType::Float64),
        nullable("s", DataType::Utf8),
        nullable("bin", DataType::Binary),
        nullable("date", DataType::Date32),
        nullable("tmillis", DataType::Time32(TimeUnit::Millisecond)),
        nullable("tmicros", DataType::Time64(TimeUnit::Microsecond)),
        nullable(
            "ts_us",
            DataType::Timestamp(TimeUnit::Microsecond, utc.clone()),
        ),
        nullable(
            "ts_ms",
            DataType::Timestamp(TimeUnit::Millisecond, utc.clone()),
        ),
        nullable("dec", DataType::Decimal128(38, 10)),
        nullable("list", DataType::List(item(DataType::Utf8))),
        nullable("list_dec", DataType::List(item(DataType::Decimal128(5, 2)))),
        nullable(
            "st",
            DataType::Struct(Fields::from(vec![
                nullable("x", DataType::Int32),
                nullable(
                    "inner",
                    DataType::Struct(Fields::from(vec![nullable(
                        "dec",
                        DataType::Decimal128(4, 1),
                    )])),
                ),
            ])),
        ),
        nullable("m", map),
    ]);
    let json = arrow_to_avro_schema(&schema, "t_record", "hoodie.t").unwrap();
    assert_eq!(avro_to_arrow_schema(&json).unwrap(), schema);
    // The result is a schema the container codec accepts.
    Schema::parse(&json).unwrap();
}

#[test]
fn narrowing_and_unsupported_types() {
    let schema = ArrowSchema::new(vec![
        nullable("a", DataType::Int8),
        nullable("b", DataType::LargeUtf8),
        nullable("c", DataType::Utf8View),
        nullable("d", DataType::LargeBinary),
        nullable("e", DataType::Timestamp(TimeUnit::Microsecond, None)),
    ]);
    let back = avro_to_arrow_schema(&arrow_to_avro_schema(&schema, "r", "").unwrap()).unwrap();
    let types: Vec<DataType> = back
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    assert_eq!(
        types,
        [
            DataType::Int32,
            DataType::Utf8,
            DataType::Utf8,
            DataType::Binary,
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        ]
    );
    for dt in [
        DataType::Timestamp(TimeUnit::Nanosecond, None),
        DataType::Timestamp(TimeUnit::Second, None),
        DataType::UInt64,
        DataType::Float16,
    ] {
        let s = ArrowSchema::new(vec![nullable("x", dt.clone())]);
        assert!(
            matches!(
                arrow_to_avro_schema(&s, "r", "ns"),
                Err(Error::Unsupported(_))
            ),
            "{dt}"
        );
    }
    let bad = ArrowSchema::new(vec![nullable("not valid", DataType::Int32)]);
    assert!(matches!(
        arrow_to_avro_schema(&bad, "r", "ns"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn avro_to_arrow_tolerates_both_union_orders_and_enums() {
    let json = r#"{"type":"record","name":"r","namespace":"a.b","fields":[
        {"name":"x","type":["string","null"]},
        {"name":"y","type":["null","long"],"default":null},
        {"name":"z","type":"int"},
        {"name":"e","type":{"type":"enum","name":"E","symbols":["A"]}},
        {"name":"f","type":{"type":"fixed","name":"F","size":3}},
        {"name":"n","type":{"type":"record","name":"N","fields":[{"name":"q","type":"double"}]}}
    ]}"#;
    let s = avro_to_arrow_schema(json).unwrap();
    assert_eq!(
        s,
        ArrowSchema::new(vec![
            nullable("x", DataType::Utf8),
            nullable("y", DataType::Int64),
            Field::new("z", DataType::Int32, false),
            Field::new("e", DataType::Utf8, false),
            Field::new("f", DataType::FixedSizeBinary(3), false),
            Field::new(
                "n",
                DataType::Struct(Fields::from(vec![Field::new(
                    "q",
                    DataType::Float64,
                    false
                )])),
                false
            ),
        ])
    );
}

#[test]
fn record_names_and_namespaces_are_sanitized_as_hudi_sanitizes_table_names() {
    use super::schema_convert::sanitize_name;
    assert_eq!(sanitize_name("trips"), "trips");
    assert_eq!(sanitize_name("user-events"), "user__events");
    assert_eq!(sanitize_name("2024trips"), "__024trips");
    assert_eq!(sanitize_name("_a1"), "_a1");
    assert_eq!(sanitize_name("ünï 🎉"), "__n______");
    let s = ArrowSchema::new(vec![nullable("x", DataType::Int32)]);
    let json: serde_json::Value = serde_json::from_str(
        &arrow_to_avro_schema(&s, "user-events_record", "hoodie.user-events").unwrap(),
    )
    .unwrap();
    assert_eq!(json["name"], "user__events_record");
    assert_eq!(json["namespace"], "hoodie.user__events");
    // Field names name the columns: they are checked, never rewritten.
    let bad = ArrowSchema::new(vec![nullable("user-id", DataType::Int32)]);
    assert!(matches!(
        arrow_to_avro_schema(&bad, "r", "ns"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        arrow_to_avro_schema(&s, "", "ns"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn meta_fields_carry_hudis_empty_doc() {
    // The first fields of a Hudi-written log block's SCHEMA header, byte for byte.
    let s = ArrowSchema::new(vec![
        nullable("_hoodie_commit_time", DataType::Utf8),
        nullable("ts", DataType::Int64),
        nullable(
            "st",
            DataType::Struct(Fields::from(vec![nullable(
                "_hoodie_record_key",
                DataType::Utf8,
            )])),
        ),
    ]);
    let got = arrow_to_avro_schema(&s, "t_record", "hoodie.t").unwrap();
    assert!(got.starts_with(
        r#"{"type":"record","name":"t_record","namespace":"hoodie.t","fields":[{"name":"_hoodie_commit_time","type":["null","string"],"doc":"","default":null},{"name":"ts","type":["null","long"],"default":null}"#
    ), "{got}");
    // Only the top-level meta fields are Hudi's: a nested field of that name is the user's.
    assert!(
        got.contains(r#"{"name":"_hoodie_record_key","type":["null","string"],"default":null}"#)
    );
}
