//! The text of a float as Rust's `{:?}` writes it (`1.0`, `0.1`, `1e16`, `-2.5e-7`, `NaN`), for
//! [`repr_value`](crate::reflection::repr_value).
//!
//! On Unix it is built without core's float formatting, which is about 15 KB of the deployable
//! library (Grisu and Dragon4, for both shortest and fixed-precision output, with their tables):
//! the C library's `printf` gives the exact decimal digits of the number, and `strtod` tells
//! which shortened digit strings read back as the same number; the choice among them follows
//! Rust's. Elsewhere it is `format!("{x:?}")`.

/// `format!("{x:?}")` for an `f64`.
#[cfg(not(unix))]
pub(crate) fn debug_f64(x: f64) -> String {
    format!("{x:?}")
}

/// `format!("{x:?}")` for an `f64`.
#[cfg(unix)]
pub(crate) fn debug_f64(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    let mut out = String::with_capacity(24);
    if x.is_sign_negative() {
        out.push('-');
    }
    let abs = x.abs();
    if abs.is_infinite() {
        out.push_str("inf");
        return out;
    }
    if abs == 0.0 {
        out.push_str("0.0");
        return out;
    }
    // The value is 0.DIGITS x 10^exp.
    let (digits, exp) = shortest_digits(abs);
    let digits = std::str::from_utf8(&digits).unwrap_or("0");
    let n = digits.len() as i32;
    if !(1e-4..1e16).contains(&abs) {
        // As `{:e}`: one digit, the rest after a point, then the exponent.
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push_str(&(exp - 1).to_string());
    } else if exp <= 0 {
        out.push_str("0.");
        for _ in 0..-exp {
            out.push('0');
        }
        out.push_str(digits);
    } else if exp < n {
        out.push_str(&digits[..exp as usize]);
        out.push('.');
        out.push_str(&digits[exp as usize..]);
    } else {
        out.push_str(digits);
        for _ in 0..exp - n {
            out.push('0');
        }
        out.push_str(".0");
    }
    out
}

#[cfg(unix)]
extern "C" {
    fn snprintf(
        buf: *mut std::ffi::c_char,
        size: usize,
        format: *const std::ffi::c_char,
        ...
    ) -> std::ffi::c_int;
    fn strtod(text: *const std::ffi::c_char, end: *mut *mut std::ffi::c_char) -> f64;
}

/// The shortest decimal digits `d` (no leading or trailing zeros) and exponent `e` with
/// `0.d x 10^e` reading back as `x` (finite, positive); among equally short ones the closest to
/// `x`, the upper one on a tie. That is the rule of Rust's Grisu/Dragon4 shortest mode: for the
/// first length at which the digits of `x` cut off there, or one unit above, read back, take the
/// one that reads back, or the nearer when both do.
#[cfg(unix)]
fn shortest_digits(x: f64) -> (Vec<u8>, i32) {
    // The exact decimal value of `x`: a double has at most 767 significant digits.
    let (exact, exp) = rounded_digits(x, 800);
    for n in 1..=17 {
        let down = exact[..n].to_vec();
        let (up, up_exp) = next_up(&down, exp);
        let down_ok = reads_back(&down, exp, x);
        let up_ok = reads_back(&up, up_exp, x);
        if !down_ok && !up_ok {
            continue;
        }
        // How the cut-off digits compare with half a unit in the last kept place.
        let rest = &exact[n..];
        let rest_vs_half = match rest
            .first()
            .map_or(std::cmp::Ordering::Less, |d| d.cmp(&b'5'))
        {
            std::cmp::Ordering::Equal if rest[1..].iter().any(|&d| d != b'0') => {
                std::cmp::Ordering::Greater
            }
            other => other,
        };
        return if up_ok && (!down_ok || rest_vs_half != std::cmp::Ordering::Less) {
            (trim_zeros(up), up_exp)
        } else {
            (trim_zeros(down), exp)
        };
    }
    // Unreachable: 17 significant digits always read back.
    (trim_zeros(exact[..17].to_vec()), exp)
}

/// The `precision + 1` significant digits of `x`, correctly rounded, as `0.d x 10^e` (trailing
/// zeros kept).
#[cfg(unix)]
fn rounded_digits(x: f64, precision: i32) -> (Vec<u8>, i32) {
    let mut buf = [0u8; 832];
    // SAFETY: the buffer holds `d.<precision digits>e-308` for precision up to 800, and
    // snprintf NUL-terminates within `size` in any case.
    let len = unsafe {
        snprintf(
            buf.as_mut_ptr() as *mut std::ffi::c_char,
            buf.len(),
            c"%.*e".as_ptr(),
            precision as std::ffi::c_int,
            x,
        )
    };
    let text = &buf[..(len.max(0) as usize).min(buf.len() - 1)];
    // `d<point>ddde±xx`; the point is whatever the locale says, so only digits are taken.
    let e = text.iter().position(|&b| b == b'e').unwrap_or(text.len());
    let digits: Vec<u8> = text[..e]
        .iter()
        .copied()
        .filter(u8::is_ascii_digit)
        .collect();
    let mut exp: i32 = 0;
    for &b in text.get(e + 1..).unwrap_or_default() {
        if b.is_ascii_digit() {
            exp = exp * 10 + i32::from(b - b'0');
        }
    }
    if text.get(e + 1) == Some(&b'-') {
        exp = -exp;
    }
    (digits, exp + 1)
}

/// Trailing zeros add nothing to `0.d`.
#[cfg(unix)]
fn trim_zeros(mut digits: Vec<u8>) -> Vec<u8> {
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    digits
}

/// The digits one unit in the last place above `0.d x 10^e`.
#[cfg(unix)]
fn next_up(digits: &[u8], exp: i32) -> (Vec<u8>, i32) {
    let mut up = digits.to_vec();
    for d in up.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return (up, exp);
        }
    }
    // All nines: 0.99 x 10^e + 0.01 x 10^e = 0.1 x 10^(e+1).
    (vec![b'1'], exp + 1)
}

/// True when `0.d x 10^e` reads back as `x`. The text has no decimal point (`123e-5`), so the
/// locale does not matter.
#[cfg(unix)]
fn reads_back(digits: &[u8], exp: i32, x: f64) -> bool {
    let mut text = digits.to_vec();
    text.push(b'e');
    text.extend_from_slice((exp - digits.len() as i32).to_string().as_bytes());
    text.push(0);
    // SAFETY: `text` is NUL-terminated.
    unsafe {
        strtod(
            text.as_ptr() as *const std::ffi::c_char,
            std::ptr::null_mut(),
        ) == x
    }
}

#[cfg(test)]
mod tests {
    use super::debug_f64;

    fn check(x: f64) {
        assert_eq!(debug_f64(x), format!("{x:?}"), "bits {:#018x}", x.to_bits());
    }

    #[test]
    fn matches_rust_debug_on_special_values() {
        for x in [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            0.2,
            0.3,
            0.5,
            1.5,
            -1.25,
            0.1 + 0.2,
            1.0 / 3.0,
            2.0 / 3.0,
            100.0,
            123456.789,
            1e-4,
            9.999999999999999e-5,
            1e-5,
            1e15,
            9999999999999998.0,
            1e16,
            1e17,
            1e21,
            1e22,
            1e23,
            1.7976931348623157e308,
            f64::MAX,
            f64::MIN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
            5e-324,
            f64::from_bits(0x000f_ffff_ffff_ffff), // the largest subnormal
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            std::f64::consts::PI,
            std::f64::consts::E,
            9007199254740993.0,
            4.35,
            0.3f32 as f64,
        ] {
            check(x);
        }
    }

    #[test]
    fn matches_rust_debug_on_powers_integers_and_random_bits() {
        // Every power of two, subnormal ones included, and its neighbours.
        for e in -1074i32..=1023 {
            let bits = if e < -1022 {
                1u64 << (e + 1074)
            } else {
                ((e + 1023) as u64) << 52
            };
            for b in [bits - 1, bits, bits + 1] {
                check(f64::from_bits(b));
                check(-f64::from_bits(b));
            }
        }
        for e in -330..=308 {
            check(format!("1e{e}").parse().unwrap());
            check(format!("5e{e}").parse().unwrap());
        }
        for i in 0..5000i64 {
            check(i as f64);
            check((i * 7919) as f64 / 1000.0);
        }
        // A fixed xorshift sequence of bit patterns, over the whole range.
        let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            check(f64::from_bits(s));
            check(f64::from_bits(s) as f32 as f64);
        }
    }
}
