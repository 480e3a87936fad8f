//! A small JSON reader and string writer for graph JSON. The deployable runtime does not link a
//! JSON library (see the crate's `Cargo.toml`), and graph JSON needs only the plain grammar.
//!
//! Numbers keep their text, so integers are read exactly. Nesting is limited to
//! [`MAX_DEPTH`] levels, so hostile input cannot overflow the stack. Errors are `ValueError`s that
//! give the line, column and byte offset.

use kiln_ffi::{Error, Result};

/// Deepest nesting of arrays and objects accepted.
pub const MAX_DEPTH: usize = 128;

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number, as written.
    Number(String),
    /// A string, unescaped.
    String(String),
    /// An array.
    Array(Vec<Json>),
    /// An object; keys in document order (a repeated key keeps both entries).
    Object(Vec<(String, Json)>),
}

impl Json {
    /// What kind of value this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Number(_) => "a number",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }

    /// The value of `key` when this is an object that has it (the first one).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The integer this number holds (no fraction, no exponent), when it fits an `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Json::Number(text) => text.parse().ok(),
            _ => None,
        }
    }

    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items, when this is an array.
    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Parses one JSON document (surrounding white space allowed, nothing else after it).
pub fn parse(text: &str) -> Result<Json> {
    let mut p = Parser {
        text: text.as_bytes(),
        pos: 0,
    };
    p.skip_ws();
    let value = p.value(0)?;
    p.skip_ws();
    if p.pos != p.text.len() {
        return Err(p.error("unexpected text after the JSON value"));
    }
    Ok(value)
}

struct Parser<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> Error {
        let at = self.pos.min(self.text.len());
        let before = &self.text[..at];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = at
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        Error::value_error(format!(
            "invalid JSON at line {line}, column {column} (byte offset {at}): {what}"
        ))
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect_word(&mut self, word: &str, value: Json) -> Result<Json> {
        if self.text[self.pos..].starts_with(word.as_bytes()) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.error("expected a value"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Json> {
        match self.peek() {
            None => Err(self.error("unexpected end of input, expected a value")),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b't') => self.expect_word("true", Json::Bool(true)),
            Some(b'f') => self.expect_word("false", Json::Bool(false)),
            Some(b'n') => self.expect_word("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.error("expected a value")),
        }
    }

    fn enter(&self, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(self.error(&format!("nesting deeper than {MAX_DEPTH} levels")));
        }
        Ok(())
    }

    fn array(&mut self, depth: usize) -> Result<Json> {
        self.enter(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth)?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                None => return Err(self.error("unexpected end of input inside an array")),
                Some(_) => return Err(self.error("expected `,` or `]` in an array")),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Json> {
        self.enter(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(items));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.error("expected a string key in an object"));
            }
            let key = self.string()?;
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.error("expected `:` after an object key"));
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth)?;
            items.push((key, value));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Object(items));
                }
                None => return Err(self.error("unexpected end of input inside an object")),
                Some(_) => return Err(self.error("expected `,` or `}` in an object")),
            }
        }
    }

    fn number(&mut self) -> Result<Json> {
        let start = self.pos;
        let digits = |p: &mut Self| {
            let from = p.pos;
            while matches!(p.peek(), Some(b'0'..=b'9')) {
                p.pos += 1;
            }
            p.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                digits(self);
            }
            _ => return Err(self.error("expected a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if digits(self) == 0 {
                return Err(self.error("expected a digit after `.`"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if digits(self) == 0 {
                return Err(self.error("expected a digit in the exponent"));
            }
        }
        // The bytes are ASCII digits and signs.
        let text = String::from_utf8_lossy(&self.text[start..self.pos]).into_owned();
        Ok(Json::Number(text))
    }

    fn hex4(&mut self) -> Result<u32> {
        let Some(hex) = self.text.get(self.pos..self.pos + 4) else {
            return Err(self.error("truncated `\\u` escape"));
        };
        let s = std::str::from_utf8(hex).map_err(|_| self.error("bad `\\u` escape"))?;
        let v = u32::from_str_radix(s, 16).map_err(|_| self.error("bad `\\u` escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String> {
        self.pos += 1; // the opening quote
        let mut out: Vec<u8> = Vec::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(self.error("unterminated string"));
            };
            match b {
                b'"' => {
                    self.pos += 1;
                    // Only whole UTF-8 sequences of the (valid) input and escapes went in.
                    return String::from_utf8(out).map_err(|_| self.error("invalid UTF-8"));
                }
                b'\\' => {
                    self.pos += 1;
                    let Some(e) = self.peek() else {
                        return Err(self.error("unterminated escape"));
                    };
                    self.pos += 1;
                    let c = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => {
                            self.pos -= 1;
                            return Err(self.error("unknown escape in a string"));
                        }
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
                0..=0x1f => return Err(self.error("control character in a string")),
                _ => {
                    out.push(b);
                    self.pos += 1;
                }
            }
        }
    }

    fn unicode_escape(&mut self) -> Result<char> {
        let hi = self.hex4()?;
        let code = if (0xD800..0xDC00).contains(&hi) {
            if !self.text[self.pos..].starts_with(b"\\u") {
                return Err(self.error("unpaired surrogate in a `\\u` escape"));
            }
            self.pos += 2;
            let lo = self.hex4()?;
            if !(0xDC00..0xE000).contains(&lo) {
                return Err(self.error("unpaired surrogate in a `\\u` escape"));
            }
            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
        } else {
            hi
        };
        char::from_u32(code).ok_or_else(|| self.error("invalid code point in a `\\u` escape"))
    }
}

/// Appends `s` to `out` as a JSON string literal (quoted and escaped).
pub fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_grammar() {
        let v = parse(r#" {"a": [1, -2.5e3, true, false, null], "b": "x\"\u00e9\ud83d\ude00\n"} "#)
            .unwrap();
        let a = v.get("a").unwrap().as_array().unwrap();
        assert_eq!(a[0].as_i64(), Some(1));
        assert_eq!(a[1], Json::Number("-2.5e3".into()));
        assert_eq!(a[1].as_i64(), None);
        assert_eq!(a[2], Json::Bool(true));
        assert_eq!(a[4], Json::Null);
        assert_eq!(v.get("b").unwrap().as_str(), Some("x\"é😀\n"));
        assert_eq!(parse("[]").unwrap(), Json::Array(vec![]));
        assert_eq!(parse("{}").unwrap(), Json::Object(vec![]));
    }

    #[test]
    fn errors_give_line_column_and_offset() {
        let e = parse("{\n  \"a\": [1, 2,]\n}").unwrap_err();
        assert_eq!(e.kind(), "ValueError");
        assert!(e.message().contains("line 2, column 14"), "{}", e.message());
        assert!(e.message().contains("byte offset 15"), "{}", e.message());
        for bad in [
            "",
            "{",
            "[1 2]",
            "{\"a\" 1}",
            "\"abc",
            "01",
            "1.",
            "-",
            "tru",
            "[1] x",
            "\"\\x\"",
            "\"\\ud800\"",
            "{1: 2}",
            "\"a\u{1}\"",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_overflow() {
        let deep = "[".repeat(100_000);
        let e = parse(&deep).unwrap_err();
        assert!(e.message().contains("nesting"), "{}", e.message());
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn strings_round_trip() {
        let s = "q\"b\\n\nt\tc\u{1}é";
        let mut out = String::new();
        write_string(&mut out, s);
        assert_eq!(parse(&out).unwrap().as_str(), Some(s));
    }
}
