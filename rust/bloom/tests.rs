//! Spec vectors (HUDI_FORMAT §11) and robustness of the bloom module.

use super::*;
use arrow_array::{Array, LargeStringArray, StringArray, StringViewArray};

const FIXTURE_KEY: &str = "3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[test]
fn sizing_spec_vectors() {
    assert_eq!(
        sizing(60_000, 0.000_000_001).unwrap(),
        BloomSizing {
            bit_size: 2_587_966,
            num_hashes: 30
        }
    );
    assert_eq!(
        sizing(2, 0.01).unwrap(),
        BloomSizing {
            bit_size: 20,
            num_hashes: 7
        }
    );
    let f = BloomFilter::with_defaults(BloomFilterType::DynamicV0);
    assert_eq!((f.vector_size(), f.num_hashes()), (2_587_966, 30));
}

#[test]
fn sizing_rejects_bad_arguments() {
    for (n, fpp) in [
        (0, 0.01),
        (-5, 0.01),
        (10, 0.0),
        (10, 1.0),
        (10, f64::NAN),
        (10, -0.5),
    ] {
        assert!(
            matches!(sizing(n, fpp), Err(Error::InvalidArgument(_))),
            "{n} {fpp}"
        );
    }
    assert!(matches!(
        sizing(i32::MAX, 1e-300),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        BloomFilter::dynamic_v0(10, 0.1, -1),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn simple_spec_vector() {
    let mut f = BloomFilter::simple(2, 0.01).unwrap();
    f.add(b"key1");
    f.add(b"key2");
    assert_eq!(f.to_footer(), "/////wAAAAcBAAAAFHggDQ==");
    assert!(f.might_contain(b"key1") && f.might_contain(b"key2"));
    let back = BloomFilter::from_footer("/////wAAAAcBAAAAFHggDQ==", None).unwrap();
    assert_eq!(back.filter_type(), BloomFilterType::Simple);
    assert_eq!(back.serialize(), f.serialize());
}

#[test]
fn dynamic_spec_vector() {
    let mut f = BloomFilter::dynamic_v0(2, 0.01, 4).unwrap();
    for k in ["a", "b", "c", "d", "e"] {
        f.add(k.as_bytes());
    }
    let expected = "/////wAAAAcBAAAAFAAAAAIAAAADAAAAAv////8AAAAHAQAAABS99A7/////AAAABwEAAAAUTvcC";
    assert_eq!(f.to_footer(), expected);
    let BloomFilter::DynamicV0(d) = &f else {
        unreachable!()
    };
    assert_eq!((d.num_rows(), d.current_nb_record()), (2, 3));
    let back = BloomFilter::from_footer(expected, Some("DYNAMIC_V0")).unwrap();
    assert_eq!(back.to_footer(), expected);
    for k in ["a", "b", "c", "d", "e"] {
        assert!(back.might_contain(k.as_bytes()));
    }
}

#[test]
fn dynamic_fixture_prefix_and_length() {
    // §11: the chennai base file of v6_trips_8i3d holds these two keys.
    let mut f = BloomFilter::with_defaults(BloomFilterType::DynamicV0);
    f.add(FIXTURE_KEY.as_bytes());
    f.add(b"c8abbe79-8d89-47ea-b4ce-4d224bae5bfa");
    let footer = f.to_footer();
    assert_eq!(footer.len(), 431_380);
    assert_eq!(f.serialize().len(), 323_534);
    assert!(footer.starts_with("/////wAAAB4BACd9PgAA6mAAAAACAAAAAf////8AAAAeAQAnfT4AAAAA"));
}

/// Row assignment after the bound, derived by hand from Java's `getActiveStandardBF`: with nr=2
/// and maxEntries=4, keys go a,b -> row 0; c,d -> row 1; e (switch) -> row 0; then round-robin
/// from index 0: f -> row 0, g -> row 1, h -> row 0.
#[test]
fn dynamic_round_robin_after_bound() {
    let mut f = BloomFilter::dynamic_v0(2, 0.01, 4).unwrap();
    for k in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        f.add(k.as_bytes());
    }
    let mut row0 = BloomFilter::simple(2, 0.01).unwrap();
    for k in ["a", "b", "e", "f", "h"] {
        row0.add(k.as_bytes());
    }
    let mut row1 = BloomFilter::simple(2, 0.01).unwrap();
    for k in ["c", "d", "g"] {
        row1.add(k.as_bytes());
    }
    let mut expected = Vec::new();
    expected.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 7, 1, 0, 0, 0, 20]);
    expected.extend_from_slice(&2i32.to_be_bytes());
    expected.extend_from_slice(&6i32.to_be_bytes()); // currentNbRecord keeps counting
    expected.extend_from_slice(&2i32.to_be_bytes());
    expected.extend_from_slice(&row0.serialize());
    expected.extend_from_slice(&row1.serialize());
    assert_eq!(f.serialize(), expected);
}

/// A deserialized dynamic filter does not know maxEntries (Java does not serialize it), so once
/// its active row is full it goes round-robin over the rows it has instead of growing.
#[test]
fn deserialized_dynamic_does_not_grow() {
    let mut f = BloomFilter::dynamic_v0(2, 0.01, 100).unwrap();
    f.add(b"a");
    f.add(b"b");
    let mut back = BloomFilter::deserialize(&f.serialize(), BloomFilterType::DynamicV0).unwrap();
    back.add(b"c");
    let BloomFilter::DynamicV0(d) = &back else {
        unreachable!()
    };
    assert_eq!(d.num_rows(), 1);
    f.add(b"c");
    let BloomFilter::DynamicV0(d) = &f else {
        unreachable!()
    };
    assert_eq!(d.num_rows(), 2);
}

#[test]
fn footer_round_trip_and_unpadded_base64() {
    let mut f = BloomFilter::simple(3, 0.05).unwrap();
    f.add(b"x");
    let footer = f.to_footer();
    let unpadded = footer.trim_end_matches('=');
    assert_ne!(
        unpadded.len(),
        footer.len(),
        "vector chosen to need padding"
    );
    assert_eq!(
        BloomFilter::from_footer(unpadded, None)
            .unwrap()
            .to_footer(),
        footer
    );
    assert!(matches!(
        BloomFilter::from_footer("not base64!", None),
        Err(Error::Corrupt(_))
    ));
    assert!(matches!(
        BloomFilter::from_footer(&footer, Some("BOGUS")),
        Err(Error::Unsupported(_))
    ));
}

#[test]
fn stray_bits_past_vector_size_are_dropped() {
    // vectorSize 20 -> 3 bytes; the top nibble of the last byte is outside the vector.
    let mut bytes = unb64("/////wAAAAcBAAAAFHggDQ==");
    let last = bytes.len() - 1;
    bytes[last] |= 0xf0;
    let f = BloomFilter::deserialize(&bytes, BloomFilterType::Simple).unwrap();
    assert_eq!(b64(&f.serialize()), "/////wAAAAcBAAAAFHggDQ==");
}

#[test]
fn jenkins_filters_are_unsupported() {
    // Legacy layout: nbHash 3, vectorSize 16, 2 bytes of bits.
    let legacy = [0, 0, 0, 3, 0, 0, 0, 16, 0xab, 0xcd];
    assert!(matches!(
        BloomFilter::deserialize(&legacy, BloomFilterType::Simple),
        Err(Error::Unsupported(_))
    ));
    // Versioned header with hashType 0 (Jenkins).
    let mut versioned = unb64("/////wAAAAcBAAAAFHggDQ==");
    versioned[8] = 0;
    assert!(matches!(
        BloomFilter::deserialize(&versioned, BloomFilterType::Simple),
        Err(Error::Unsupported(_))
    ));
    // The same legacy filter with a trailing byte is corrupt, not unsupported.
    let mut trailing = legacy.to_vec();
    trailing.push(0);
    assert!(matches!(
        BloomFilter::deserialize(&trailing, BloomFilterType::Simple),
        Err(Error::Corrupt(_))
    ));
}

fn assert_corrupt(bytes: &[u8], ty: BloomFilterType) {
    match BloomFilter::deserialize(bytes, ty) {
        Err(Error::Corrupt(_)) => {}
        other => panic!(
            "{} bytes as {ty:?}: expected Corrupt, got {other:?}",
            bytes.len()
        ),
    }
}

#[test]
fn every_truncation_is_corrupt() {
    let mut simple = BloomFilter::simple(5, 0.1).unwrap();
    let mut dynamic = BloomFilter::dynamic_v0(2, 0.1, 6).unwrap();
    for k in ["k1", "k2", "k3", "k4", "k5"] {
        simple.add(k.as_bytes());
        dynamic.add(k.as_bytes());
    }
    for (f, ty) in [
        (simple, BloomFilterType::Simple),
        (dynamic, BloomFilterType::DynamicV0),
    ] {
        let bytes = f.serialize();
        for len in 0..bytes.len() {
            assert_corrupt(&bytes[..len], ty);
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_corrupt(&longer, ty);
        assert!(BloomFilter::deserialize(&bytes, ty).is_ok());
    }
    // The default-size filter: every length would be 10^11 byte copies, so sample them.
    let mut big = BloomFilter::with_defaults(BloomFilterType::DynamicV0);
    big.add(FIXTURE_KEY.as_bytes());
    let bytes = big.serialize();
    for len in (0..64)
        .chain((64..bytes.len()).step_by(4099))
        .chain(bytes.len() - 8..bytes.len())
    {
        assert_corrupt(&bytes[..len], BloomFilterType::DynamicV0);
    }
}

#[test]
fn random_bytes_are_corrupt() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        // splitmix64
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for round in 0..2000 {
        let len = (next() % 200) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Half the time keep a valid version marker so parsing gets past the first int.
        if round % 2 == 0 && len >= 4 {
            bytes[..4].copy_from_slice(&(-1i32).to_be_bytes());
        }
        assert_corrupt(&bytes, BloomFilterType::Simple);
        assert_corrupt(&bytes, BloomFilterType::DynamicV0);
    }
    // Header fields that would allocate gigabytes must fail on length, not allocate.
    let mut huge = Vec::new();
    huge.extend_from_slice(&(-1i32).to_be_bytes());
    huge.extend_from_slice(&30i32.to_be_bytes());
    huge.push(1);
    huge.extend_from_slice(&i32::MAX.to_be_bytes());
    huge.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff]);
    assert_corrupt(&huge, BloomFilterType::DynamicV0);
    assert_corrupt(&huge, BloomFilterType::Simple);
}

fn uuid_like(i: u64) -> String {
    let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (i << 7);
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        x >> 32,
        x & 0xffff,
        i % 4096,
        (x >> 20) % 4096,
        i
    )
}

#[test]
fn batch_probe_agrees_with_single_probe() {
    // Small rows so that absent keys hit false positives too, and several rows.
    let mut filters = vec![
        BloomFilter::simple(200, 0.05).unwrap(),
        BloomFilter::dynamic_v0(100, 0.05, 300).unwrap(),
    ];
    let mut long_key = "long".repeat(100);
    long_key.push('é');
    for f in &mut filters {
        for i in 0..450 {
            f.add(uuid_like(i).as_bytes());
        }
        f.add(long_key.as_bytes());
    }
    let mut keys: Vec<Option<String>> = (0..2000).map(|i| Some(uuid_like(i))).collect();
    keys.extend(
        ["", "a", "ab", "abc", "é", "日本"]
            .iter()
            .map(|s| Some(s.to_string())),
    );
    keys.push(Some(long_key.clone()));
    keys.push(None);
    keys.insert(3, None);
    let utf8 = StringArray::from(keys.clone());
    let large = LargeStringArray::from(keys.clone());
    let view = StringViewArray::from(keys.iter().map(|k| k.as_deref()).collect::<Vec<_>>());
    for f in &filters {
        let expected: Vec<Option<bool>> = keys
            .iter()
            .map(|k| k.as_ref().map(|k| f.might_contain(k.as_bytes())))
            .collect();
        assert!(expected.iter().filter(|e| **e == Some(true)).count() > 451);
        for arr in [&utf8 as &dyn Array, &large, &view] {
            let got = f.might_contain_array(arr).unwrap();
            assert_eq!(got.iter().collect::<Vec<_>>(), expected);
        }
        // A sliced input keeps row alignment.
        let sliced = utf8.slice(5, 100);
        let got = f.might_contain_array(&sliced).unwrap();
        assert_eq!(got.iter().collect::<Vec<_>>(), expected[5..105].to_vec());
    }
}

#[test]
fn batch_add_of_mixed_keys_matches_add() {
    // Lengths with and without tails, empty, and over the lane kernel's 128 bytes, in blocks that
    // span a row change and leave lanes unused.
    let keys: Vec<String> = (0..700)
        .map(|i| match i % 7 {
            0 => String::new(),
            1 => "k".repeat(i % 5),
            2 => format!("{}-{}", uuid_like(i as u64), "x".repeat(i % 4)),
            3 => "long".repeat(33 + i % 3),
            _ => uuid_like(i as u64),
        })
        .collect();
    for mut filter in [
        BloomFilter::dynamic_v0(90, 0.01, 500).unwrap(),
        BloomFilter::simple(700, 0.01).unwrap(),
    ] {
        let mut one_by_one = filter.clone();
        for k in &keys {
            one_by_one.add(k.as_bytes());
        }
        filter.add_array(&StringArray::from(keys.clone())).unwrap();
        assert_eq!(filter.serialize(), one_by_one.serialize());
    }
}

#[test]
fn add_array_matches_add_and_rejects_nulls() {
    let keys: Vec<String> = (0..300).map(uuid_like).collect();
    let mut one_by_one = BloomFilter::dynamic_v0(100, 0.01, 200).unwrap();
    for k in &keys {
        one_by_one.add(k.as_bytes());
    }
    let mut batched = BloomFilter::dynamic_v0(100, 0.01, 200).unwrap();
    batched.add_array(&StringArray::from(keys.clone())).unwrap();
    assert_eq!(batched.serialize(), one_by_one.serialize());

    let before = batched.serialize();
    let with_null = StringArray::from(vec![Some("new"), None]);
    assert!(matches!(
        batched.add_array(&with_null),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(batched.serialize(), before);
    let ints = arrow_array::Int32Array::from(vec![1, 2]);
    assert!(matches!(
        batched.add_array(&ints),
        Err(Error::Unsupported(_))
    ));
    assert!(matches!(
        batched.might_contain_array(&ints),
        Err(Error::Unsupported(_))
    ));

    let footer = footer_for_keys(
        &StringArray::from(vec!["key1", "key2"]),
        2,
        0.01,
        0,
        BloomFilterType::Simple,
    )
    .unwrap();
    assert_eq!(footer, "/////wAAAAcBAAAAFHggDQ==");
}

#[test]
fn an_absurd_hash_count_is_corrupt() {
    // Found by the bloom_footer fuzz target: 1.6 billion hash functions over 1897 bits, which
    // the first lookup would try to evaluate (and buffer).
    let footer = "/////2AAAB4BAAAAB2k=";
    for code in [None, Some("SIMPLE"), Some("DYNAMIC_V0")] {
        assert!(
            matches!(
                BloomFilter::from_footer(footer, code),
                Err(Error::Corrupt(_))
            ),
            "{code:?}"
        );
    }
    // Just past the bound, with a whole bit vector: still refused.
    let mut bytes = Vec::new();
    bytes.extend_from_slice(&(-1i32).to_be_bytes());
    bytes.extend_from_slice(&2049i32.to_be_bytes());
    bytes.push(1);
    bytes.extend_from_slice(&64i32.to_be_bytes());
    bytes.extend_from_slice(&[0u8; 8]);
    assert!(matches!(
        BloomFilter::deserialize(&bytes, BloomFilterType::Simple),
        Err(Error::Corrupt(_))
    ));
}
