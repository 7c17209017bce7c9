//! INCRBYFLOAT's arithmetic, as Redis does it on x86-64: values are C
//! `long double`s (the x87 80-bit format: a 64-bit mantissa, exponents
//! from -16382 to 16383, subnormals below), parsed with `strtold`, added
//! with round-to-nearest-even, and printed with `%.17Lf` and the trailing
//! zeros removed. Binary64 arithmetic would give other digits (10.5 + 0.1
//! prints as 10.6 in Redis, 10.59999999999999964 in binary64), so the
//! format is emulated exactly here with big integers.

use num_bigint::BigUint;
use num_traits::{One, Zero};

/// Bits of the mantissa.
const MANTISSA_BITS: u64 = 64;
/// Exponent of the mantissa's lowest bit for the largest finite values:
/// the top bit of a 64-bit mantissa then has weight 2^16383.
const MAX_LOW_EXP: i64 = 16383 - 63;
/// Exponent of the mantissa's lowest bit for subnormals (and the smallest
/// normal values): 2^-16445 is the smallest positive value.
const MIN_LOW_EXP: i64 = -16382 - 63;
/// Redis refuses a float argument this long or longer
/// (`MAX_LONG_DOUBLE_CHARS`).
const MAX_CHARS: usize = 5 * 1024;
/// Exponents beyond this overflow or underflow whatever the digits
/// (inputs are at most `MAX_CHARS` long).
const EXP_CLAMP: i64 = 100_000;

/// A finite long double: `(-1)^neg * mantissa * 2^exp`, the mantissa below
/// 2^64 (zero for zero).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LongDouble {
    neg: bool,
    mantissa: u64,
    exp: i64,
}

/// What rounding an exact value gives.
#[derive(Debug, PartialEq, Eq)]
enum Rounded {
    Finite(LongDouble),
    /// Too large: infinity (`strtold` then reports ERANGE).
    Overflow,
    /// A non-zero value too small: zero (ERANGE).
    Underflow,
}

/// Rounds the exact positive value `num / den * 2^exp2` (`den` > 0) to a
/// long double, to nearest with ties to even.
fn round(neg: bool, num: &BigUint, den: &BigUint, exp2: i64) -> Rounded {
    if num.is_zero() {
        return Rounded::Finite(LongDouble { neg, mantissa: 0, exp: 0 });
    }
    // Choose the exponent `e` of the mantissa's lowest bit so that
    // num / den * 2^(exp2 - e) has 64 bits before the point (or fewer for
    // subnormals), then round that quotient to an integer.
    let magnitude = i64::try_from(num.bits()).unwrap_or(i64::MAX) - i64::try_from(den.bits()).unwrap_or(0) + exp2;
    // The value lies in [2^(magnitude-1), 2^(magnitude+1)).
    let mut e = (magnitude - i64::try_from(MANTISSA_BITS).unwrap_or(64)).max(MIN_LOW_EXP);
    loop {
        let shift = exp2 - e;
        let (n, d) = if shift >= 0 {
            (num << u64::try_from(shift).unwrap_or(0), den.clone())
        } else {
            (num.clone(), den << u64::try_from(-shift).unwrap_or(0))
        };
        let q = &n / &d;
        let r = &n - &q * &d;
        if q.bits() > MANTISSA_BITS {
            // The estimate was one bit short.
            e += 1;
            continue;
        }
        let twice = &r << 1u32;
        let round_up = twice > d || (twice == d && q.bit(0));
        let mut q = q + u32::from(round_up);
        let mut e_final = e;
        if q.bits() > MANTISSA_BITS {
            q >>= 1u32;
            e_final += 1;
        }
        if e_final > MAX_LOW_EXP {
            return Rounded::Overflow;
        }
        let mantissa = q.to_u64_digits().first().copied().unwrap_or(0);
        if mantissa == 0 {
            return Rounded::Underflow;
        }
        return Rounded::Finite(LongDouble { neg, mantissa, exp: e_final });
    }
}

/// Parses `s` as Redis's `string2ld` does: `strtold` on the whole text
/// (decimal or hexadecimal, `inf`/`infinity` in any case, an optional
/// sign), refusing a leading blank, anything left over, NaN, an overflow
/// and a non-zero value that underflows to zero. `None`: not a valid float.
/// An infinity parses (Redis then refuses the sum).
pub(crate) fn parse(s: &[u8]) -> Option<Result<LongDouble, Infinite>> {
    if s.is_empty() || s.len() >= MAX_CHARS || s[0].is_ascii_whitespace() || s[0] == b'\x0b' {
        return None;
    }
    let (neg, body) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    if lower == b"inf" || lower == b"infinity" {
        return Some(Err(Infinite));
    }
    let rounded = if lower.starts_with(b"0x") { parse_hex(neg, &body[2..])? } else { parse_decimal(neg, body)? };
    match rounded {
        Rounded::Finite(v) => Some(Ok(v)),
        Rounded::Overflow | Rounded::Underflow => None,
    }
}

/// An infinite operand: the sum is not finite.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Infinite;

/// Digits (in `radix`) of `s` up to the first other byte: their value and
/// how many there were.
fn digits(s: &[u8], radix: u32) -> (BigUint, usize) {
    let n = s.iter().take_while(|c| char::from(**c).is_digit(radix)).count();
    let v = if n == 0 { BigUint::zero() } else { BigUint::parse_bytes(&s[..n], radix).unwrap_or_default() };
    (v, n)
}

/// A decimal exponent (after `e` or `p`): sign and digits, clamped.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, d) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if d.is_empty() || !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: i64 = 0;
    for &c in d {
        v = (v * 10 + i64::from(c - b'0')).min(EXP_CLAMP);
    }
    Some(if neg { -v } else { v })
}

/// The parts of `int[.frac][<marker>exp]` with digits in `radix`: the
/// integer digits, the fraction digits and how many there are, and the
/// exponent; `None` without any digit or with anything else after them.
fn split_number(s: &[u8], radix: u32, markers: [u8; 2]) -> Option<(BigUint, BigUint, usize, i64)> {
    let (int, n_int) = digits(s, radix);
    let mut rest = &s[n_int..];
    let (mut frac, mut n_frac) = (BigUint::zero(), 0);
    if let Some(after) = rest.strip_prefix(b".") {
        (frac, n_frac) = digits(after, radix);
        rest = &after[n_frac..];
    }
    if n_int + n_frac == 0 {
        return None;
    }
    let exp = match rest {
        [] => 0,
        [m, e @ ..] if markers.contains(m) => exponent(e)?,
        _ => return None,
    };
    Some((int, frac, n_frac, exp))
}

fn parse_decimal(neg: bool, s: &[u8]) -> Option<Rounded> {
    let (int, frac, n_frac, exp10) = split_number(s, 10, *b"eE")?;
    let scale = BigUint::from(10u32).pow(u32::try_from(n_frac).ok()?);
    let mantissa = int * &scale + frac;
    let exp10 = exp10 - i64::try_from(n_frac).ok()?;
    if mantissa.is_zero() {
        return Some(Rounded::Finite(LongDouble { neg, mantissa: 0, exp: 0 }));
    }
    if exp10 > EXP_CLAMP / 10 {
        return Some(Rounded::Overflow);
    }
    if exp10 < -EXP_CLAMP / 10 {
        return Some(Rounded::Underflow);
    }
    let p = BigUint::from(10u32).pow(u32::try_from(exp10.unsigned_abs()).ok()?);
    Some(if exp10 >= 0 { round(neg, &(mantissa * p), &BigUint::one(), 0) } else { round(neg, &mantissa, &p, 0) })
}

fn parse_hex(neg: bool, s: &[u8]) -> Option<Rounded> {
    let (int, frac, n_frac, exp2) = split_number(s, 16, *b"pP")?;
    let mantissa = (int << (4 * n_frac)) + frac;
    let exp2 = exp2 - 4 * i64::try_from(n_frac).ok()?;
    Some(round(neg, &mantissa, &BigUint::one(), exp2))
}

impl LongDouble {
    /// The signed integer `mantissa * 2^(exp - base)` for `base <= exp`.
    fn scaled(&self, base: i64) -> (bool, BigUint) {
        (self.neg, BigUint::from(self.mantissa) << u64::try_from(self.exp - base).unwrap_or(0))
    }

    /// `self + other`, rounded; `None` if the sum is not finite.
    pub(crate) fn add(&self, other: &LongDouble) -> Option<LongDouble> {
        let base = self.exp.min(other.exp);
        let (an, a) = self.scaled(base);
        let (bn, b) = other.scaled(base);
        let (neg, sum) = if an == bn {
            (an, a + b)
        } else if a >= b {
            (an, a - b)
        } else {
            (bn, b - a)
        };
        match round(neg, &sum, &BigUint::one(), base) {
            Rounded::Finite(v) => Some(v),
            // A sum of finite values cannot underflow to zero unless it is
            // zero (exact), which `round` returns as finite.
            Rounded::Overflow | Rounded::Underflow => None,
        }
    }

    /// `printf("%.17Lf")` with the trailing zeros (and a trailing point)
    /// removed, and `-0` printed as `0`: Redis's `LD_STR_HUMAN`.
    pub(crate) fn to_human(&self) -> String {
        // round(|value| * 10^17), ties to even, as glibc's printf rounds.
        let scale = BigUint::from(10u32).pow(17);
        let m = BigUint::from(self.mantissa) * scale;
        let fixed = if self.exp >= 0 {
            m << u64::try_from(self.exp).unwrap_or(0)
        } else {
            let shift = u64::try_from(-self.exp).unwrap_or(0);
            let q = &m >> shift;
            let r = &m - (&q << shift);
            let half = BigUint::one() << (shift - 1);
            if r > half || (r == half && q.bit(0)) {
                q + 1u32
            } else {
                q
            }
        };
        let digits = format!("{fixed:0>18}");
        let (int, frac) = digits.split_at(digits.len() - 17);
        let frac = frac.trim_end_matches('0');
        let mut out = String::with_capacity(digits.len() + 2);
        if self.neg && !(int == "0" && frac.is_empty()) {
            out.push('-');
        }
        out.push_str(int);
        if !frac.is_empty() {
            out.push('.');
            out.push_str(frac);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(s: &str) -> LongDouble {
        parse(s.as_bytes()).expect("valid").expect("finite")
    }

    /// (stored value, increment, Redis 7.0.15's reply on x86-64), from
    /// `SET k <value>` then `INCRBYFLOAT k <increment>`.
    const FROM_REDIS: &[(&str, &str, &str)] = &[
        ("10.5", "0.1", "10.6"),
        ("1.5", "1e400", "10000000000000000000281880683947586514586453433629052038625910693539685534008629862039363994848324160522094053927317616200295822777259255734023828976593340661017797447434546173917862448116674971723778943824391593338047470675026246684401359237513603830343735485505244955964979021825038280091068414947402456898653040951017512658092615827588920183472511643316591362664138176309734806343732497430221946880"),
        ("1e3", "1", "1001"),
        ("1.0", "0", "1"),
        ("3.0e1", "0", "30"),
        ("0x10", "0", "16"),
        ("5", "-5", "0"),
        ("0", "0.1", "0.1"),
        ("0.1", "1.7976931348623157e308", "179769313486231569995921046774104434048386446944329178485314420765176628523124396354701868608387085564428793419425520689308708363451136055357897278026477617073498977686288394835618163294045594434929537447290627480669417384648879122776218333598953852832103282504751611691208117720159985926376802466863339536384"),
    ];

    #[test]
    fn sums_print_as_redis_prints_them() {
        for (value, incr, want) in FROM_REDIS {
            let got = ld(value).add(&ld(incr)).expect("finite").to_human();
            assert_eq!(&got, want, "{value} + {incr}");
        }
    }

    /// `strtold`'s syntax as Redis filters it.
    #[test]
    fn parsing_follows_string2ld() {
        for ok in ["1", "+1.5", "-.5", "1.", "1e5", "1E-5", "0x1p3", "0X1.8P-1", "0x.8", "1e-4940", "0e-99999"] {
            assert!(matches!(parse(ok.as_bytes()), Some(Ok(_))), "{ok}");
        }
        for inf in ["inf", "-INF", "Infinity"] {
            assert_eq!(parse(inf.as_bytes()), Some(Err(Infinite)), "{inf}");
        }
        for bad in [
            "", " 1", "1 ", "\t1", "nan", "abc", ".", "1e", "1e+", "0x", "0x1p", "--1", "1e99999", "1e-99999",
            "infinit", "1,5",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse(&vec![b'1'; MAX_CHARS]), None, "too long");
    }

    /// The format's limits: 2^16383 * (2 - 2^-63) is the largest value,
    /// 2^-16445 the smallest.
    #[test]
    fn range_ends() {
        assert!(parse(b"1.18973149535723176502e4932").is_some_and(|r| r.is_ok()));
        assert_eq!(parse(b"1.19e4932"), None, "overflows");
        let tiny = ld("0x1p-16445");
        assert_eq!((tiny.mantissa, tiny.exp), (1, MIN_LOW_EXP));
        assert_eq!(parse(b"0x1p-16446"), None, "rounds to zero (a tie, to even)");
        let big = ld("0x1p16383");
        assert_eq!(big.add(&big), None, "2^16384 is infinite");
    }

    #[test]
    fn ties_round_to_even_when_printed() {
        // 2^-18 = 0.000003814697265625: the 18th decimal is an exact 5.
        assert_eq!(ld("0x1p-18").to_human(), "0.00000381469726562");
        assert_eq!(ld("0x3p-18").to_human(), "0.00001144409179688");
        assert_eq!(ld("-0").to_human(), "0");
        assert_eq!(ld("-1e-30").to_human(), "0");
    }
}
