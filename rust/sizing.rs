//! Record-size sampling: the average in-memory size of incoming records, which the bucket
//! assigner divides into file-size limits when no commit stats exist yet (DESIGN §3.1, §3.4).
//!
//! Only about one row in `every` is measured, at a deterministic stride (rows 0, every,
//! 2*every, ...), so the estimate is cheap enough to run on every incoming batch and repeatable.
//! The per-row size model, in bytes:
//! * null value: 1 (a null struct/list counts 1, whatever its children hold);
//! * fixed width: the byte width (boolean 1, int32 4, decimal128 16, fixed_size_binary(n) n, ...);
//! * variable width (string, binary, their large and view forms): value length + 4 for the offset;
//! * list / large list / map: 4 for the offset + the sizes of its elements (map entries are
//!   key + value); fixed-size list: the sizes of its elements;
//! * struct: the sum of its fields; dictionary: the size of the referenced value;
//! * run-end encoded: the size of the run's value; union: 1 for the type id + the chosen child.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type};
use arrow_array::types::{UInt64Type, UInt8Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;

use crate::error::{Error, Result};

/// Default sampling stride: one record in a hundred.
pub const DEFAULT_SAMPLE_EVERY: usize = 100;

/// Estimates the average record size (bytes) of `batch` from rows `0, every, 2*every, ...`.
/// Returns `(average, sampled_rows)`; an empty batch gives `(0.0, 0)`, any other batch samples at
/// least one row. `every` must be at least 1.
pub fn estimate_record_size(batch: &RecordBatch, every: usize) -> Result<(f64, u64)> {
    if every == 0 {
        return Err(Error::InvalidArgument(
            "sampling stride `every` must be at least 1".into(),
        ));
    }
    let rows = batch.num_rows();
    if rows == 0 {
        return Ok((0.0, 0));
    }
    let mut total: u64 = 0;
    let mut sampled: u64 = 0;
    for row in (0..rows).step_by(every) {
        for column in batch.columns() {
            total += value_size(column.as_ref(), row);
        }
        sampled += 1;
    }
    Ok((total as f64 / sampled as f64, sampled))
}

/// Size of the value at `i` under the model in the module docs.
fn value_size(array: &dyn Array, i: usize) -> u64 {
    if array.is_null(i) {
        return 1;
    }
    match array.data_type() {
        DataType::Null => 1,
        DataType::Boolean => 1,
        DataType::FixedSizeBinary(n) => *n as u64,
        DataType::Utf8 => array.as_string::<i32>().value(i).len() as u64 + 4,
        DataType::LargeUtf8 => array.as_string::<i64>().value(i).len() as u64 + 4,
        DataType::Utf8View => array.as_string_view().value(i).len() as u64 + 4,
        DataType::Binary => array.as_binary::<i32>().value(i).len() as u64 + 4,
        DataType::LargeBinary => array.as_binary::<i64>().value(i).len() as u64 + 4,
        DataType::BinaryView => array.as_binary_view().value(i).len() as u64 + 4,
        DataType::List(_) => 4 + children_size(array.as_list::<i32>().value(i).as_ref()),
        DataType::LargeList(_) => 4 + children_size(array.as_list::<i64>().value(i).as_ref()),
        DataType::ListView(_) => 4 + children_size(array.as_list_view::<i32>().value(i).as_ref()),
        DataType::LargeListView(_) => {
            4 + children_size(array.as_list_view::<i64>().value(i).as_ref())
        }
        DataType::FixedSizeList(_, _) => {
            children_size(array.as_fixed_size_list().value(i).as_ref())
        }
        DataType::Map(_, _) => 4 + children_size(&array.as_map().value(i)),
        DataType::Struct(_) => array
            .as_struct()
            .columns()
            .iter()
            .map(|c| value_size(c.as_ref(), i))
            .sum(),
        DataType::Dictionary(key, _) => match dictionary_key(array, key, i) {
            Some((values, k)) => value_size(values.as_ref(), k),
            None => 1,
        },
        DataType::RunEndEncoded(_, _) => run_end_value_size(array, i),
        DataType::Union(_, _) => {
            let u = array.as_union();
            let child = u.child(u.type_id(i));
            1 + value_size(child.as_ref(), u.value_offset(i))
        }
        other => other.primitive_width().map_or(8, |w| w as u64),
    }
}

/// Sum of the sizes of every row of a list's element slice (or a map's entries).
fn children_size(values: &dyn Array) -> u64 {
    (0..values.len()).map(|j| value_size(values, j)).sum()
}

/// The values array and the key at `i` of a dictionary array.
fn dictionary_key(array: &dyn Array, key: &DataType, i: usize) -> Option<(ArrayRef, usize)> {
    macro_rules! key_at {
        ($t:ty) => {{
            let d = array.as_dictionary::<$t>();
            Some((d.values().clone(), usize::try_from(d.keys().value(i)).ok()?))
        }};
    }
    match key {
        DataType::Int8 => key_at!(Int8Type),
        DataType::Int16 => key_at!(Int16Type),
        DataType::Int32 => key_at!(Int32Type),
        DataType::Int64 => key_at!(Int64Type),
        DataType::UInt8 => key_at!(UInt8Type),
        DataType::UInt16 => key_at!(UInt16Type),
        DataType::UInt32 => key_at!(UInt32Type),
        DataType::UInt64 => key_at!(UInt64Type),
        _ => None,
    }
}

/// Size of the value of the run covering logical row `i`.
fn run_end_value_size(array: &dyn Array, i: usize) -> u64 {
    macro_rules! run_value {
        ($t:ty) => {{
            let r = array.as_run::<$t>();
            let physical = r.get_physical_index(i);
            value_size(r.values().as_ref(), physical)
        }};
    }
    match array.data_type() {
        DataType::RunEndEncoded(ends, _) => match ends.data_type() {
            DataType::Int16 => run_value!(Int16Type),
            DataType::Int32 => run_value!(Int32Type),
            DataType::Int64 => run_value!(Int64Type),
            _ => 8,
        },
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::{Int32Builder, ListBuilder, MapBuilder, StringBuilder};
    use arrow_array::{
        BooleanArray, DictionaryArray, FixedSizeBinaryArray, Int16Array, Int32Array, Int64Array,
        LargeStringArray, StringArray, StringViewArray, StructArray,
    };
    use arrow_schema::{Field, Fields};
    use std::sync::Arc;

    fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(columns).unwrap()
    }

    #[test]
    fn flat_columns_every_row() {
        let b = batch(vec![
            (
                "i",
                Arc::new(Int32Array::from(vec![Some(1), None, Some(3)])) as ArrayRef,
            ),
            ("l", Arc::new(Int64Array::from(vec![1, 2, 3]))),
            (
                "s",
                Arc::new(StringArray::from(vec![Some("ab"), Some(""), None])),
            ),
            (
                "ls",
                Arc::new(LargeStringArray::from(vec!["abcd", "x", "yz"])),
            ),
            (
                "v",
                Arc::new(StringViewArray::from(vec![
                    "a string longer than twelve",
                    "",
                    "q",
                ])),
            ),
            ("b", Arc::new(BooleanArray::from(vec![true, false, true]))),
            (
                "f",
                Arc::new(
                    FixedSizeBinaryArray::try_from_iter([b"abc", b"def", b"ghi"].into_iter())
                        .unwrap(),
                ),
            ),
        ]);
        // row 0: 4 + 8 + (2+4) + (4+4) + (27+4) + 1 + 3 = 61
        // row 1: 1 + 8 + (0+4) + (1+4) + (0+4) + 1 + 3 = 26
        // row 2: 4 + 8 + 1     + (2+4) + (1+4) + 1 + 3 = 28
        let (avg, n) = estimate_record_size(&b, 1).unwrap();
        assert_eq!(n, 3);
        assert_eq!(avg, (61.0 + 26.0 + 28.0) / 3.0);
    }

    #[test]
    fn nested_columns() {
        let mut list = ListBuilder::new(Int32Builder::new());
        list.append_value([Some(1), None, Some(3)]);
        list.append_null();
        list.append_value([]);
        let list = list.finish();

        let strukt = StructArray::new(
            Fields::from(vec![
                Field::new("a", DataType::Int16, true),
                Field::new("b", DataType::Utf8, true),
            ]),
            vec![
                Arc::new(Int16Array::from(vec![1, 2, 3])) as ArrayRef,
                Arc::new(StringArray::from(vec![Some("xyz"), None, Some("")])),
            ],
            Some(vec![true, true, false].into()),
        );

        let mut map = MapBuilder::new(None, StringBuilder::new(), Int32Builder::new());
        map.keys().append_value("k1");
        map.values().append_value(7);
        map.keys().append_value("key2");
        map.values().append_null();
        map.append(true).unwrap();
        map.append(false).unwrap();
        map.keys().append_value("");
        map.values().append_value(0);
        map.append(true).unwrap();
        let map = map.finish();

        let dict: DictionaryArray<Int32Type> =
            vec![Some("hello"), Some("hi"), None].into_iter().collect();

        let b = batch(vec![
            ("list", Arc::new(list) as ArrayRef),
            ("struct", Arc::new(strukt)),
            ("map", Arc::new(map)),
            ("dict", Arc::new(dict)),
        ]);
        // list:   [1,null,3] -> 4 + 4+1+4 = 13 | null -> 1 | [] -> 4
        // struct: {1,"xyz"} -> 2 + 7 = 9 | {2,null} -> 2 + 1 = 3 | null -> 1
        // map:    {k1:7, key2:null} -> 4 + (6+4) + (8+1) = 23 | null -> 1 | {"":0} -> 4 + (4+4) = 12
        // dict:   "hello" -> 9 | "hi" -> 6 | null -> 1
        // rows: 13+9+23+9 = 54, 1+3+1+6 = 11, 4+1+12+1 = 18
        let (avg, n) = estimate_record_size(&b, 1).unwrap();
        assert_eq!(n, 3);
        assert_eq!(avg, (54.0 + 11.0 + 18.0) / 3.0);
        // Stride 2 samples rows 0 and 2.
        assert_eq!(
            estimate_record_size(&b, 2).unwrap(),
            ((54.0 + 18.0) / 2.0, 2)
        );
    }

    #[test]
    fn stride_is_deterministic_and_samples_at_least_one() {
        // Row r holds a string of r % 7 characters, so each sampled row is distinguishable.
        let strings: Vec<String> = (0..250).map(|r| "x".repeat(r % 7)).collect();
        let b = batch(vec![(
            "s",
            Arc::new(StringArray::from(strings)) as ArrayRef,
        )]);
        // Rows 0, 100, 200: lengths 0, 2, 4 -> sizes 4, 6, 8.
        assert_eq!(estimate_record_size(&b, 100).unwrap(), (6.0, 3));
        // Stride longer than the batch: row 0 only.
        assert_eq!(estimate_record_size(&b, 1000).unwrap(), (4.0, 1));
        assert_eq!(estimate_record_size(&b.slice(0, 0), 100).unwrap(), (0.0, 0));
        // A sliced batch measures its own rows: rows 3 and 103 of the original (3 and 5 chars).
        assert_eq!(
            estimate_record_size(&b.slice(3, 150), 100).unwrap(),
            (8.0, 2)
        );
        assert!(matches!(
            estimate_record_size(&b, 0),
            Err(Error::InvalidArgument(_))
        ));
    }
}
