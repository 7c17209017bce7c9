//! A naive reference model of Redis string and bitmap semantics: every key
//! is a plain `Vec<u8>`. Not a stable API; tests and fuzz targets compare
//! [`crate::Db`] against it.

use std::collections::BTreeMap;

use crate::{BitOp, Span, Unit};

/// Keys to byte strings, with Redis's semantics implemented the obvious way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Model {
    /// The keys and their bytes.
    pub keys: BTreeMap<Vec<u8>, Vec<u8>>,
}

fn bit_of(v: &[u8], off: u64) -> bool {
    usize::try_from(off / 8).ok().and_then(|i| v.get(i)).is_some_and(|b| b & (0x80 >> (off % 8)) != 0)
}

/// Redis's normalisation: negative from the end, clamp to `0 ..= total-1`.
fn redis_range(mut start: i128, mut end: i128, total: i128) -> Option<(i128, i128)> {
    if start < 0 {
        start += total;
    }
    if end < 0 {
        end += total;
    }
    if start < 0 {
        start = 0;
    }
    if end < 0 {
        end = 0;
    }
    if end >= total {
        end = total - 1;
    }
    (start <= end).then_some((start, end))
}

impl Model {
    /// SETBIT.
    pub fn setbit(&mut self, key: &[u8], off: u64, value: bool) -> bool {
        let v = self.keys.entry(key.to_vec()).or_default();
        let i = usize::try_from(off / 8).expect("model offsets fit in memory");
        if v.len() <= i {
            v.resize(i + 1, 0);
        }
        let mask = 0x80u8 >> (off % 8);
        let old = v[i] & mask != 0;
        if value {
            v[i] |= mask;
        } else {
            v[i] &= !mask;
        }
        old
    }

    /// GETBIT.
    pub fn getbit(&self, key: &[u8], off: u64) -> bool {
        self.keys.get(key).is_some_and(|v| bit_of(v, off))
    }

    /// BITCOUNT.
    pub fn bitcount(&self, key: &[u8], span: Option<Span>) -> u64 {
        let Some(v) = self.keys.get(key) else { return 0 };
        let bits = v.len() as u64 * 8;
        let (first, last) = match span {
            None => (0, i128::from(bits) - 1),
            Some(s) => {
                let total = match s.unit {
                    Unit::Byte => v.len() as i128,
                    Unit::Bit => i128::from(bits),
                };
                if s.start < 0 && s.end < 0 && s.start > s.end {
                    return 0;
                }
                let Some((a, b)) = redis_range(s.start.into(), s.end.into(), total) else { return 0 };
                match s.unit {
                    Unit::Byte => (a * 8, b * 8 + 7),
                    Unit::Bit => (a, b),
                }
            }
        };
        (first.max(0)..=last).filter(|&o| bit_of(v, o as u64)).count() as u64
    }

    /// BITPOS.
    pub fn bitpos(&self, key: &[u8], bit: bool, start: Option<i64>, end: Option<i64>, unit: Unit) -> i64 {
        let Some(v) = self.keys.get(key) else { return if bit { -1 } else { 0 } };
        let len = v.len() as i128;
        let (range, end_given) = match start {
            None => (redis_range(0, len - 1, len).map(|(a, b)| (a * 8, b * 8 + 7)), false),
            Some(s) => {
                let total = if unit == Unit::Bit { len * 8 } else { len };
                let e = end.map_or(total - 1, i128::from);
                let r = redis_range(s.into(), e, total);
                let r = match unit {
                    Unit::Byte => r.map(|(a, b)| (a * 8, b * 8 + 7)),
                    Unit::Bit => r,
                };
                (r, end.is_some())
            }
        };
        let Some((first, last)) = range else { return -1 };
        for o in first..=last {
            if bit_of(v, o as u64) == bit {
                return o as i64;
            }
        }
        if bit || end_given {
            -1
        } else {
            (last + 1) as i64
        }
    }

    /// BITOP; returns the result length.
    pub fn bitop(&mut self, op: BitOp, dest: &[u8], sources: &[&[u8]]) -> u64 {
        let vals: Vec<Vec<u8>> = sources.iter().map(|s| self.keys.get(*s).cloned().unwrap_or_default()).collect();
        let len = vals.iter().map(Vec::len).max().unwrap_or(0);
        let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
        let mut out = vec![0u8; len];
        for (i, o) in out.iter_mut().enumerate() {
            let b: Vec<u8> = vals.iter().map(|v| byte(v, i)).collect();
            let rest_or = b[1..].iter().fold(0u8, |a, x| a | x);
            *o = match op {
                BitOp::And => b.iter().fold(0xff, |a, x| a & x),
                BitOp::Or => b.iter().fold(0, |a, x| a | x),
                BitOp::Xor => b.iter().fold(0, |a, x| a ^ x),
                BitOp::Not => !b[0],
                BitOp::Diff => b[0] & !rest_or,
                BitOp::Diff1 => !b[0] & rest_or,
                BitOp::AndOr => b[0] & rest_or,
                BitOp::One => {
                    let mut r = 0u8;
                    for bit in 0..8 {
                        let n = b.iter().filter(|x| *x & (1 << bit) != 0).count();
                        if n == 1 {
                            r |= 1 << bit;
                        }
                    }
                    r
                }
            };
        }
        if len == 0 {
            self.keys.remove(dest);
        } else {
            self.keys.insert(dest.to_vec(), out);
        }
        len as u64
    }

    /// GET.
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.keys.get(key).cloned()
    }

    /// SET.
    pub fn set(&mut self, key: &[u8], value: &[u8]) {
        self.keys.insert(key.to_vec(), value.to_vec());
    }

    /// DEL of one key.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        self.keys.remove(key).is_some()
    }

    /// STRLEN.
    pub fn strlen(&self, key: &[u8]) -> u64 {
        self.keys.get(key).map_or(0, |v| v.len() as u64)
    }

    /// Offsets of set bits of `key`, ascending.
    pub fn ones(&self, key: &[u8]) -> Vec<u64> {
        let Some(v) = self.keys.get(key) else { return Vec::new() };
        (0..v.len() as u64 * 8).filter(|&o| bit_of(v, o)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spot checks of the model against answers documented by Redis.
    #[test]
    fn model_matches_redis_documentation() {
        let mut m = Model::default();
        m.set(b"mykey", b"foobar");
        assert_eq!(m.bitcount(b"mykey", None), 26);
        assert_eq!(m.bitcount(b"mykey", Some(Span::bytes(0, 0))), 4);
        assert_eq!(m.bitcount(b"mykey", Some(Span::bytes(1, 1))), 6);
        assert_eq!(m.bitcount(b"mykey", Some(Span::bytes(1, 1))), 6);
        assert_eq!(m.bitcount(b"mykey", Some(Span::bits(5, 30))), 17);
        m.set(b"k", b"\xff\xf0\x00");
        assert_eq!(m.bitpos(b"k", false, None, None, Unit::Byte), 12);
        m.set(b"k", b"\x00\xff\xf0");
        assert_eq!(m.bitpos(b"k", true, Some(0), None, Unit::Byte), 8);
        assert_eq!(m.bitpos(b"k", true, Some(2), None, Unit::Byte), 16);
        assert_eq!(m.bitpos(b"k", true, Some(2), Some(-1), Unit::Byte), 16);
        assert_eq!(m.bitpos(b"k", true, Some(7), Some(15), Unit::Bit), 8);
        assert_eq!(m.bitpos(b"k", true, Some(7), Some(-3), Unit::Bit), 8);
        m.set(b"k", b"\x00\x00\x00");
        assert_eq!(m.bitpos(b"k", true, None, None, Unit::Byte), -1);
        m.set(b"k", b"\xff\xff\xff");
        assert_eq!(m.bitpos(b"k", false, None, None, Unit::Byte), 24);
        assert_eq!(m.bitpos(b"k", false, Some(0), Some(-1), Unit::Byte), -1);
        assert_eq!(m.bitpos(b"missing", false, None, None, Unit::Byte), 0);
        assert_eq!(m.bitpos(b"missing", true, None, None, Unit::Byte), -1);
        assert!(!m.setbit(b"s", 7, true));
        assert_eq!(m.get(b"s"), Some(vec![1]));
    }
}
