//! Values of Hudi's meta columns for newly written records (HUDI_FORMAT §5).

use arrow_array::builder::StringBuilder;
use arrow_array::StringArray;

/// `_hoodie_commit_seqno` of records `start..start + n` of one write task: `<prefix><index>`,
/// where the prefix is `<instant>_<task partition id>_`.
pub fn commit_seqnos(prefix: &str, start: u64, n: usize) -> StringArray {
    let end = start.saturating_add(n as u64);
    let digits = end.max(1).ilog10() as usize + 1;
    let mut builder = StringBuilder::with_capacity(n, n * (prefix.len() + digits));
    let mut value = String::with_capacity(prefix.len() + digits);
    value.push_str(prefix);
    let mut buf = [0u8; 20];
    for i in start..end {
        value.truncate(prefix.len());
        value.push_str(decimal(i, &mut buf));
        builder.append_value(&value);
    }
    builder.finish()
}

/// `x` in decimal, written into the end of `buf` (20 bytes hold any u64).
fn decimal(mut x: u64, buf: &mut [u8; 20]) -> &str {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    // Only ASCII digits were written.
    std::str::from_utf8(&buf[at..]).expect("ASCII digits")
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    #[test]
    fn seqnos_count_from_start() {
        let a = commit_seqnos("20240101000000000_3_", 0, 3);
        let got: Vec<&str> = (0..a.len()).map(|i| a.value(i)).collect();
        assert_eq!(
            got,
            [
                "20240101000000000_3_0",
                "20240101000000000_3_1",
                "20240101000000000_3_2"
            ]
        );
        let b = commit_seqnos("x_", 99, 2);
        assert_eq!((b.value(0), b.value(1)), ("x_99", "x_100"));
        assert_eq!(commit_seqnos("x_", 0, 0).len(), 0);
        assert_eq!(
            commit_seqnos("x_", u64::MAX - 1, 1).value(0),
            format!("x_{}", u64::MAX - 1)
        );
    }
}
