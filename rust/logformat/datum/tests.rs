//! Codec tests: Arrow → Avro → Arrow round trips over every supported type, with the encoded
//! datums cross-checked by the independent `apache-avro` crate in both directions.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::types::Value as AV;
use arrow_array::builder::{
    Int32Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder, StructBuilder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Date32Array, Decimal128Array, FixedSizeBinaryArray,
    Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    TimestampMicrosecondArray, TimestampMillisecondArray,
};
use arrow_schema::{DataType, Field, Schema as ArrowSchema};

use super::arrow::record_to_arrow_schema;
use super::decode::RecordDecoder;
use super::encode::RecordEncoder;
use super::schema::Schema;

const ALL_TYPES: &str = r#"{"type":"record","name":"rt","namespace":"hoodie.rt","fields":[
 {"name":"b","type":["null","boolean"],"default":null},
 {"name":"i","type":["null","int"],"default":null},
 {"name":"l","type":"long"},
 {"name":"f","type":["null","float"],"default":null},
 {"name":"d","type":["double","null"]},
 {"name":"s","type":["null","string"],"default":null},
 {"name":"by","type":["null","bytes"],"default":null},
 {"name":"dt","type":["null",{"type":"int","logicalType":"date"}],"default":null},
 {"name":"tsu","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null},
 {"name":"tsm","type":["null",{"type":"long","logicalType":"timestamp-millis"}],"default":null},
 {"name":"decf","type":["null",{"type":"fixed","name":"decf","size":8,"logicalType":"decimal","precision":10,"scale":2}],"default":null},
 {"name":"decb","type":["null",{"type":"bytes","logicalType":"decimal","precision":20,"scale":4}],"default":null},
 {"name":"arr","type":["null",{"type":"array","items":["null","long"]}],"default":null},
 {"name":"rec","type":["null",{"type":"record","name":"inner","fields":[
    {"name":"x","type":"int"},{"name":"y","type":["null","string"],"default":null}]}],"default":null},
 {"name":"m","type":["null",{"type":"map","values":["null","double"]}],"default":null},
 {"name":"e","type":["null",{"type":"enum","name":"color","symbols":["RED","GREEN","BLUE"]}],"default":null},
 {"name":"fx","type":{"type":"fixed","name":"fx4","size":4}},
 {"name":"nested","type":{"type":"array","items":{"type":"record","name":"item","fields":[
    {"name":"k","type":"string"},{"name":"v","type":{"type":"array","items":"int"}}]}}}
]}"#;

/// Three rows: typical values, nulls wherever allowed, and edge values.
fn all_types_batch() -> RecordBatch {
    let schema = Arc::new(record_to_arrow_schema(&Schema::parse(ALL_TYPES).unwrap()).unwrap());
    let field = |name: &str| schema.field_with_name(name).unwrap().clone();

    let mut arr =
        ListBuilder::new(Int64Builder::new()).with_field(match field("arr").data_type() {
            DataType::List(f) => f.clone(),
            _ => unreachable!(),
        });
    arr.values().append_value(1);
    arr.values().append_null();
    arr.values().append_value(-3);
    arr.append(true);
    arr.append(false);
    arr.append(true); // empty list

    let DataType::Struct(rec_fields) = field("rec").data_type().clone() else {
        unreachable!()
    };
    let mut rec = StructBuilder::from_fields(rec_fields, 3);
    for (x, y, valid) in [
        (7, Some("why"), true),
        (0, None, false),
        (i32::MIN, None, true),
    ] {
        rec.field_builder::<Int32Builder>(0)
            .unwrap()
            .append_value(x);
        rec.field_builder::<StringBuilder>(1)
            .unwrap()
            .append_option(y);
        rec.append(valid);
    }

    let DataType::Map(entries, _) = field("m").data_type().clone() else {
        unreachable!()
    };
    let DataType::Struct(kv) = entries.data_type().clone() else {
        unreachable!()
    };
    let mut m = MapBuilder::new(
        None,
        StringBuilder::new(),
        arrow_array::builder::Float64Builder::new(),
    )
    .with_keys_field(kv[0].clone())
    .with_values_field(kv[1].clone());
    m.keys().append_value("a");
    m.values().append_value(1.5);
    m.keys().append_value("b");
    m.values().append_null();
    m.append(true).unwrap();
    m.append(false).unwrap();
    m.append(true).unwrap();

    let DataType::List(item_field) = field("nested").data_type().clone() else {
        unreachable!()
    };
    let DataType::Struct(item_fields) = item_field.data_type().clone() else {
        unreachable!()
    };
    let DataType::List(v_field) = item_fields[1].data_type().clone() else {
        unreachable!()
    };
    let item_builder = StructBuilder::new(
        item_fields.clone(),
        vec![
            Box::new(StringBuilder::new()),
            Box::new(ListBuilder::new(Int32Builder::new()).with_field(v_field)),
        ],
    );
    let mut nested = ListBuilder::new(item_builder).with_field(item_field);
    for (k, vs) in [("p", vec![1, 2]), ("q", vec![])] {
        let s = nested.values();
        s.field_builder::<StringBuilder>(0).unwrap().append_value(k);
        let l = s.field_builder::<ListBuilder<Int32Builder>>(1).unwrap();
        for v in vs {
            l.values().append_value(v);
        }
        l.append(true);
        s.append(true);
    }
    nested.append(true);
    nested.append(true); // empty
    nested.append(true); // empty

    let columns: Vec<ArrayRef> = vec![
        Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
        Arc::new(Int32Array::from(vec![Some(42), None, Some(i32::MIN)])),
        Arc::new(Int64Array::from(vec![1, 0, i64::MAX])),
        Arc::new(Float32Array::from(vec![
            Some(1.25),
            None,
            Some(f32::NEG_INFINITY),
        ])),
        Arc::new(Float64Array::from(vec![Some(29.1), None, Some(-0.0)])),
        Arc::new(StringArray::from(vec![Some("héllo"), None, Some("")])),
        Arc::new(BinaryArray::from(vec![
            Some(&b"\x00\xff"[..]),
            None,
            Some(&b""[..]),
        ])),
        Arc::new(Date32Array::from(vec![Some(19_000), None, Some(-1)])),
        Arc::new(
            TimestampMicrosecondArray::from(vec![Some(1_695_159_649_088_000), None, Some(-1)])
                .with_timezone("UTC"),
        ),
        Arc::new(
            TimestampMillisecondArray::from(vec![Some(1_695_159_649_088), None, Some(0)])
                .with_timezone("UTC"),
        ),
        Arc::new(
            Decimal128Array::from(vec![Some(12_345), None, Some(-9_999_999_999)])
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(
            Decimal128Array::from(vec![Some(-1), None, Some(99_999_999_999_999_999_999)])
                .with_precision_and_scale(20, 4)
                .unwrap(),
        ),
        Arc::new(arr.finish()),
        Arc::new(rec.finish()),
        Arc::new(m.finish()),
        Arc::new(StringArray::from(vec![Some("GREEN"), None, Some("BLUE")])),
        Arc::new(
            FixedSizeBinaryArray::try_from_iter(
                vec![b"abcd", b"\0\0\0\0", b"\xff\xfe\xfd\xfc"].into_iter(),
            )
            .unwrap(),
        ),
        Arc::new(nested.finish()),
    ];
    RecordBatch::try_new(schema, columns).unwrap()
}

fn encode_rows(schema: &Schema, batch: &RecordBatch) -> Vec<Vec<u8>> {
    let enc = RecordEncoder::new(schema, batch).unwrap();
    (0..batch.num_rows())
        .map(|row| {
            let mut out = Vec::new();
            enc.write_row(row, &mut out).unwrap();
            out
        })
        .collect()
}

fn decode_rows(writer: &Schema, reader: Option<&Schema>, rows: &[Vec<u8>]) -> RecordBatch {
    let arrow = Arc::new(record_to_arrow_schema(reader.unwrap_or(writer)).unwrap());
    let mut dec = RecordDecoder::new(writer, reader, arrow).unwrap();
    for r in rows {
        dec.decode(r).unwrap();
    }
    dec.finish().unwrap()
}

#[test]
fn every_type_round_trips_through_avro() {
    let schema = Schema::parse(ALL_TYPES).unwrap();
    let batch = all_types_batch();
    let rows = encode_rows(&schema, &batch);
    let back = decode_rows(&schema, None, &rows);
    assert_eq!(back, batch);
    // A sliced batch encodes only its rows, from the right offsets.
    let sliced = batch.slice(1, 2);
    let back = decode_rows(&schema, None, &encode_rows(&schema, &sliced));
    assert_eq!(back, sliced);
}

fn field<'a>(record: &'a AV, name: &str) -> &'a AV {
    let AV::Record(fields) = record else {
        panic!("not a record: {record:?}")
    };
    &fields.iter().find(|(n, _)| n == name).unwrap().1
}

fn union(v: &AV) -> (u32, &AV) {
    match v {
        AV::Union(i, inner) => (*i, inner),
        other => panic!("not a union: {other:?}"),
    }
}

#[test]
fn encoded_datums_read_back_with_apache_avro() {
    let schema = Schema::parse(ALL_TYPES).unwrap();
    let theirs = apache_avro::Schema::parse_str(ALL_TYPES).unwrap();
    let rows = encode_rows(&schema, &all_types_batch());
    let values: Vec<AV> = rows
        .iter()
        .map(|r| {
            let mut slice = r.as_slice();
            let v = apache_avro::from_avro_datum(&theirs, &mut slice, None).unwrap();
            assert!(slice.is_empty(), "datum fully consumed");
            v
        })
        .collect();
    let r0 = &values[0];
    assert_eq!(union(field(r0, "b")), (1, &AV::Boolean(true)));
    assert_eq!(union(field(r0, "i")), (1, &AV::Int(42)));
    assert_eq!(field(r0, "l"), &AV::Long(1));
    assert_eq!(union(field(r0, "f")), (1, &AV::Float(1.25)));
    // ["double","null"]: the value is branch 0.
    assert_eq!(union(field(r0, "d")), (0, &AV::Double(29.1)));
    assert_eq!(union(field(r0, "s")), (1, &AV::String("héllo".into())));
    assert_eq!(union(field(r0, "by")), (1, &AV::Bytes(vec![0, 0xff])));
    assert_eq!(union(field(r0, "dt")), (1, &AV::Date(19_000)));
    assert_eq!(
        union(field(r0, "tsu")),
        (1, &AV::TimestampMicros(1_695_159_649_088_000))
    );
    assert_eq!(
        union(field(r0, "tsm")),
        (1, &AV::TimestampMillis(1_695_159_649_088))
    );
    let AV::Decimal(d) = union(field(r0, "decf")).1 else {
        panic!()
    };
    // 123.45 as an 8-byte big-endian fixed.
    assert_eq!(
        Vec::<u8>::try_from(d).unwrap(),
        12_345i64.to_be_bytes().to_vec()
    );
    let AV::Decimal(d) = union(field(r0, "decb")).1 else {
        panic!()
    };
    assert_eq!(Vec::<u8>::try_from(d).unwrap(), vec![0xff]);
    assert_eq!(
        union(field(r0, "arr")).1,
        &AV::Array(vec![
            AV::Union(1, Box::new(AV::Long(1))),
            AV::Union(0, Box::new(AV::Null)),
            AV::Union(1, Box::new(AV::Long(-3))),
        ])
    );
    let rec = union(field(r0, "rec")).1;
    assert_eq!(field(rec, "x"), &AV::Int(7));
    assert_eq!(union(field(rec, "y")), (1, &AV::String("why".into())));
    let AV::Map(m) = union(field(r0, "m")).1 else {
        panic!()
    };
    assert_eq!(m.get("a"), Some(&AV::Union(1, Box::new(AV::Double(1.5)))));
    assert_eq!(m.get("b"), Some(&AV::Union(0, Box::new(AV::Null))));
    assert_eq!(union(field(r0, "e")), (1, &AV::Enum(1, "GREEN".into())));
    assert_eq!(field(r0, "fx"), &AV::Fixed(4, b"abcd".to_vec()));
    let AV::Array(items) = field(r0, "nested") else {
        panic!()
    };
    assert_eq!(field(&items[0], "k"), &AV::String("p".into()));
    assert_eq!(
        field(&items[0], "v"),
        &AV::Array(vec![AV::Int(1), AV::Int(2)])
    );
    // Row 1 is null wherever the schema allows.
    let r1 = &values[1];
    for name in [
        "b", "i", "f", "s", "by", "dt", "tsu", "decf", "arr", "rec", "m", "e",
    ] {
        assert_eq!(union(field(r1, name)), (0, &AV::Null), "{name}");
    }
    assert_eq!(union(field(r1, "d")), (1, &AV::Null));
}

#[test]
fn datums_written_by_apache_avro_decode() {
    let theirs = apache_avro::Schema::parse_str(ALL_TYPES).unwrap();
    let record = AV::Record(vec![
        ("b".into(), AV::Union(1, Box::new(AV::Boolean(false)))),
        ("i".into(), AV::Union(1, Box::new(AV::Int(-5)))),
        ("l".into(), AV::Long(1 << 40)),
        ("f".into(), AV::Union(0, Box::new(AV::Null))),
        ("d".into(), AV::Union(0, Box::new(AV::Double(2.5)))),
        ("s".into(), AV::Union(1, Box::new(AV::String("x".into())))),
        ("by".into(), AV::Union(0, Box::new(AV::Null))),
        ("dt".into(), AV::Union(1, Box::new(AV::Date(3)))),
        (
            "tsu".into(),
            AV::Union(1, Box::new(AV::TimestampMicros(-7))),
        ),
        ("tsm".into(), AV::Union(0, Box::new(AV::Null))),
        (
            "decf".into(),
            AV::Union(1, Box::new(AV::Decimal((-250i64).to_be_bytes().into()))),
        ),
        (
            "decb".into(),
            AV::Union(1, Box::new(AV::Decimal(vec![0x01, 0x00].into()))),
        ),
        (
            "arr".into(),
            AV::Union(
                1,
                Box::new(AV::Array(vec![AV::Union(1, Box::new(AV::Long(9)))])),
            ),
        ),
        (
            "rec".into(),
            AV::Union(
                1,
                Box::new(AV::Record(vec![
                    ("x".into(), AV::Int(1)),
                    ("y".into(), AV::Union(0, Box::new(AV::Null))),
                ])),
            ),
        ),
        (
            "m".into(),
            AV::Union(
                1,
                Box::new(AV::Map(HashMap::from([(
                    "k".to_string(),
                    AV::Union(1, Box::new(AV::Double(0.5))),
                )]))),
            ),
        ),
        (
            "e".into(),
            AV::Union(1, Box::new(AV::Enum(2, "BLUE".into()))),
        ),
        ("fx".into(), AV::Fixed(4, vec![1, 2, 3, 4])),
        (
            "nested".into(),
            AV::Array(vec![AV::Record(vec![
                ("k".into(), AV::String("z".into())),
                ("v".into(), AV::Array(vec![AV::Int(-1)])),
            ])]),
        ),
    ]);
    let bytes = apache_avro::to_avro_datum(&theirs, record).unwrap();
    let ours = Schema::parse(ALL_TYPES).unwrap();
    let batch = decode_rows(&ours, None, &[bytes]);
    let col = |n: &str| batch.column_by_name(n).unwrap().clone();
    assert!(!col("b").as_boolean().value(0));
    assert_eq!(col("i").as_primitive::<Int32Type>().value(0), -5);
    assert_eq!(col("l").as_primitive::<Int64Type>().value(0), 1 << 40);
    assert!(col("f").is_null(0));
    assert_eq!(col("s").as_string::<i32>().value(0), "x");
    assert_eq!(
        col("dt")
            .as_primitive::<arrow_array::types::Date32Type>()
            .value(0),
        3
    );
    assert_eq!(
        col("tsu")
            .as_primitive::<arrow_array::types::TimestampMicrosecondType>()
            .value(0),
        -7
    );
    assert_eq!(
        col("decf")
            .as_primitive::<arrow_array::types::Decimal128Type>()
            .value(0),
        -250
    );
    assert_eq!(
        col("decb")
            .as_primitive::<arrow_array::types::Decimal128Type>()
            .value(0),
        256
    );
    let arr = col("arr");
    let arr = arr.as_list::<i32>();
    assert_eq!(
        arr.value(0).as_primitive::<Int64Type>().values().to_vec(),
        vec![9]
    );
    assert_eq!(col("e").as_string::<i32>().value(0), "BLUE");
    assert_eq!(col("fx").as_fixed_size_binary().value(0), &[1, 2, 3, 4]);
    let m = col("m");
    let m = m.as_map();
    assert_eq!(m.keys().as_string::<i32>().value(0), "k");
}

#[test]
fn reader_schema_resolution_fills_missing_fields_and_promotes() {
    let writer = Schema::parse(
        r#"{"type":"record","name":"r","fields":[
            {"name":"a","type":"int"},
            {"name":"gone","type":["null","string"],"default":null},
            {"name":"c","type":{"type":"enum","name":"E","symbols":["X","Y"]}},
            {"name":"s","type":"string"}]}"#,
    )
    .unwrap();
    let reader = Schema::parse(
        r#"{"type":"record","name":"r","fields":[
            {"name":"s","type":["null","bytes"],"default":null},
            {"name":"a","type":["null","long"],"default":null},
            {"name":"added","type":["null","string"],"default":null},
            {"name":"n","type":"int","default":7},
            {"name":"c","type":{"type":"enum","name":"E","symbols":["Y","Z"],"default":"Z"}}]}"#,
    )
    .unwrap();
    let wbatch = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("gone", DataType::Utf8, true),
            Field::new("c", DataType::Utf8, false),
            Field::new("s", DataType::Utf8, false),
        ])),
        vec![
            Arc::new(Int32Array::from(vec![1, -2])),
            Arc::new(StringArray::from(vec![Some("bye"), None])),
            Arc::new(StringArray::from(vec!["X", "Y"])),
            Arc::new(StringArray::from(vec!["s0", "s1"])),
        ],
    )
    .unwrap();
    let rows = encode_rows(&writer, &wbatch);
    let back = decode_rows(&writer, Some(&reader), &rows);
    let names: Vec<&String> = back
        .schema_ref()
        .fields()
        .iter()
        .map(|f| f.name())
        .collect();
    assert_eq!(names, ["s", "a", "added", "n", "c"]);
    assert_eq!(
        back.column(0).as_binary::<i32>().iter().collect::<Vec<_>>(),
        vec![Some(&b"s0"[..]), Some(&b"s1"[..])]
    );
    assert_eq!(
        back.column(1).as_primitive::<Int64Type>().values().to_vec(),
        vec![1, -2]
    );
    assert_eq!(back.column(2).null_count(), 2);
    assert_eq!(
        back.column(3).as_primitive::<Int32Type>().values().to_vec(),
        vec![7, 7]
    );
    // X is unknown to the reader → its default Z; Y matches.
    assert_eq!(
        back.column(4).as_string::<i32>().iter().collect::<Vec<_>>(),
        vec![Some("Z"), Some("Y")]
    );
}

#[test]
fn nulls_in_non_nullable_avro_fields_are_rejected() {
    let schema =
        Schema::parse(r#"{"type":"record","name":"r","fields":[{"name":"a","type":"long"}]}"#)
            .unwrap();
    let batch = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![Field::new(
            "a",
            DataType::Int64,
            true,
        )])),
        vec![Arc::new(Int64Array::from(vec![Some(1), None]))],
    )
    .unwrap();
    let enc = RecordEncoder::new(&schema, &batch).unwrap();
    let mut out = Vec::new();
    enc.write_row(0, &mut out).unwrap();
    assert!(enc.write_row(1, &mut out).is_err());
    // A column the schema does not name is an error rather than silently dropped.
    let extra = RecordBatch::try_new(
        Arc::new(ArrowSchema::new(vec![Field::new(
            "zzz",
            DataType::Int64,
            false,
        )])),
        vec![Arc::new(Int64Array::from(vec![1]))],
    )
    .unwrap();
    assert!(RecordEncoder::new(&schema, &extra).is_err());
}

#[test]
fn damaged_datums_are_errors_not_panics() {
    let schema = Schema::parse(ALL_TYPES).unwrap();
    let rows = encode_rows(&schema, &all_types_batch());
    let arrow = Arc::new(record_to_arrow_schema(&schema).unwrap());
    // Every truncation and every single-byte corruption of every row.
    for row in &rows {
        for cut in 0..row.len() {
            let mut dec = RecordDecoder::new(&schema, None, arrow.clone()).unwrap();
            assert!(
                dec.decode(&row[..cut]).is_err(),
                "truncated at {cut} decoded"
            );
        }
        for i in 0..row.len() {
            for x in [0x00, 0x7f, 0x80, 0xff] {
                let mut bad = row.clone();
                bad[i] = x;
                let mut dec = RecordDecoder::new(&schema, None, arrow.clone()).unwrap();
                if dec.decode(&bad).is_ok() {
                    // Whatever decoded must still be valid Arrow or a clean error.
                    let _ = dec.finish();
                }
            }
        }
    }
}
