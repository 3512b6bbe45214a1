//! The header of a `.npy` file: a Python dict literal such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }`.
//!
//! Parsed by a small strict recursive-descent reader (strings, `True` /
//! `False`, integers, tuples and lists), never by evaluating anything. Exactly
//! the three keys NumPy writes are accepted.

/// Byte order of multi-byte elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

/// The element kinds this reader decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Float,
    Signed,
    Unsigned,
    Bool,
}

/// A decoded `descr` entry: `<f4`, `>f8`, `|i1`, `|b1`, ...
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dtype {
    pub kind: Kind,
    /// Bytes per element.
    pub size: usize,
    pub order: ByteOrder,
}

impl Dtype {
    /// Parses a NumPy type string. Supported: `f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1`
    /// with byte order `<`, `>`, `|` (single-byte types) or `=` (native).
    pub fn parse(descr: &str) -> Result<Self, String> {
        let mut chars = descr.chars();
        let order = match chars.next() {
            Some('<') => ByteOrder::Little,
            Some('>') => ByteOrder::Big,
            Some('=') if cfg!(target_endian = "big") => ByteOrder::Big,
            Some('=') | Some('|') => ByteOrder::Little,
            _ => return Err(format!("dtype '{descr}' has no byte-order character")),
        };
        let code = &descr[1..];
        let (kind, size) = match code {
            "f2" => (Kind::Float, 2),
            "f4" => (Kind::Float, 4),
            "f8" => (Kind::Float, 8),
            "i1" => (Kind::Signed, 1),
            "i2" => (Kind::Signed, 2),
            "i4" => (Kind::Signed, 4),
            "i8" => (Kind::Signed, 8),
            "u1" => (Kind::Unsigned, 1),
            "u2" => (Kind::Unsigned, 2),
            "u4" => (Kind::Unsigned, 4),
            "u8" => (Kind::Unsigned, 8),
            "b1" => (Kind::Bool, 1),
            _ => {
                return Err(format!(
                    "unsupported dtype '{descr}'; supported: float16/32/64, int8..int64, \
                     uint8..uint64, bool (convert with .astype(numpy.float32))"
                ))
            }
        };
        if descr.starts_with('|') && size != 1 {
            return Err(format!(
                "dtype '{descr}' is multi-byte but has no byte order"
            ));
        }
        Ok(Dtype { kind, size, order })
    }
}

impl std::fmt::Display for Dtype {
    /// The NumPy type string: `<f4`, `>i8`, `|u1` (no byte order for one byte).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let order = match (self.size, self.order) {
            (1, _) => '|',
            (_, ByteOrder::Little) => '<',
            (_, ByteOrder::Big) => '>',
        };
        let kind = match self.kind {
            Kind::Float => 'f',
            Kind::Signed => 'i',
            Kind::Unsigned => 'u',
            Kind::Bool => 'b',
        };
        write!(f, "{order}{kind}{}", self.size)
    }
}

/// The three fields of a `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub dtype: Dtype,
    pub fortran_order: bool,
    pub shape: Vec<usize>,
}

/// One value of the header's dict literal.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(String),
    Bool(bool),
    Int(u64),
    Sequence(Vec<Value>),
}

impl Header {
    /// Parses the header text (without the magic prefix and length).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parser = Parser {
            bytes: text.as_bytes(),
            pos: 0,
        };
        let entries = parser.dict()?;
        parser.skip_space();
        if parser.pos != parser.bytes.len() {
            return Err(format!(
                "unexpected text after the header dict at header byte {}",
                parser.pos
            ));
        }
        let mut descr = None;
        let mut fortran_order = None;
        let mut shape = None;
        for (key, value) in entries {
            let slot_taken = match (key.as_str(), value) {
                ("descr", Value::Str(s)) => descr.replace(Dtype::parse(&s)?).is_some(),
                ("descr", _) => {
                    return Err(
                        "structured dtypes (descr that is not a string) are not supported".into(),
                    )
                }
                ("fortran_order", Value::Bool(b)) => fortran_order.replace(b).is_some(),
                ("shape", Value::Sequence(dims)) => shape.replace(dims_of(dims)?).is_some(),
                ("fortran_order" | "shape", v) => {
                    return Err(format!("header key '{key}' has an invalid value {v:?}"))
                }
                _ => return Err(format!("unexpected header key '{key}'")),
            };
            if slot_taken {
                return Err(format!("header key '{key}' appears twice"));
            }
        }
        Ok(Header {
            dtype: descr.ok_or("header has no 'descr'")?,
            fortran_order: fortran_order.ok_or("header has no 'fortran_order'")?,
            shape: shape.ok_or("header has no 'shape'")?,
        })
    }
}

fn dims_of(values: Vec<Value>) -> Result<Vec<usize>, String> {
    values
        .into_iter()
        .map(|v| match v {
            Value::Int(d) => usize::try_from(d).map_err(|_| format!("dimension {d} is too large")),
            other => Err(format!(
                "shape entry {other:?} is not a non-negative integer"
            )),
        })
        .collect()
}

/// Nesting limit for tuples / lists: a real header needs 1.
const MAX_DEPTH: usize = 8;

struct Parser<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn skip_space(&mut self) {
        while self
            .bytes
            .get(self.pos)
            .is_some_and(u8::is_ascii_whitespace)
        {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.pos).copied()
    }

    fn expect(&mut self, wanted: u8) -> Result<(), String> {
        match self.peek() {
            Some(b) if b == wanted => {
                self.pos += 1;
                Ok(())
            }
            found => Err(self.unexpected(found, &format!("'{}'", wanted as char))),
        }
    }

    fn unexpected(&self, found: Option<u8>, wanted: &str) -> String {
        match found {
            Some(b) => format!(
                "header syntax: expected {wanted} at header byte {}, found '{}'",
                self.pos,
                b.escape_ascii()
            ),
            None => format!("header syntax: expected {wanted}, the header ended"),
        }
    }

    /// `{ key: value, ... }` with an optional trailing comma.
    fn dict(&mut self) -> Result<Vec<(String, Value)>, String> {
        self.expect(b'{')?;
        let mut entries = Vec::new();
        loop {
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(entries);
            }
            let key = match self.value(0)? {
                Value::Str(s) => s,
                other => return Err(format!("header key {other:?} is not a string")),
            };
            self.expect(b':')?;
            entries.push((key, self.value(0)?));
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                found => return Err(self.unexpected(found, "',' or '}'")),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, String> {
        match self.peek() {
            Some(quote @ (b'\'' | b'"')) => self.string(quote),
            Some(open @ (b'(' | b'[')) => {
                if depth >= MAX_DEPTH {
                    return Err("header nests too deeply".into());
                }
                self.sequence(if open == b'(' { b')' } else { b']' }, depth)
            }
            Some(b) if b.is_ascii_digit() => self.integer(),
            Some(b) if b.is_ascii_alphabetic() => self.word(),
            found => Err(self.unexpected(found, "a value")),
        }
    }

    fn string(&mut self, quote: u8) -> Result<Value, String> {
        let start = self.pos + 1;
        let len = self.bytes[start..]
            .iter()
            .position(|&b| b == quote)
            .ok_or("header syntax: unterminated string")?;
        let raw = &self.bytes[start..start + len];
        if raw.contains(&b'\\') {
            return Err("header strings with escapes are not supported".into());
        }
        self.pos = start + len + 1;
        // The slice lies between two ASCII quote bytes of a &str, so it is valid UTF-8.
        Ok(Value::Str(String::from_utf8_lossy(raw).into_owned()))
    }

    /// `(a, b, ...)` or `[a, b, ...]`, trailing comma allowed.
    fn sequence(&mut self, close: u8, depth: usize) -> Result<Value, String> {
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok(Value::Sequence(items));
            }
            items.push(self.value(depth + 1)?);
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b) if b == close => {}
                found => return Err(self.unexpected(found, "',' or the closing bracket")),
            }
        }
    }

    /// A non-negative decimal integer; Python 2 wrote `3L`.
    fn integer(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while self.bytes.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        let digits = &self.bytes[start..self.pos];
        if self.bytes.get(self.pos) == Some(&b'L') {
            self.pos += 1;
        }
        std::str::from_utf8(digits)
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Value::Int)
            .ok_or_else(|| format!("integer at header byte {start} is too large"))
    }

    fn word(&mut self) -> Result<Value, String> {
        let start = self.pos;
        while self
            .bytes
            .get(self.pos)
            .is_some_and(u8::is_ascii_alphanumeric)
        {
            self.pos += 1;
        }
        match &self.bytes[start..self.pos] {
            b"True" => Ok(Value::Bool(true)),
            b"False" => Ok(Value::Bool(false)),
            other => Err(format!(
                "header syntax: unexpected word '{}' at header byte {start}",
                other.escape_ascii()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_numpy_writes() {
        let h = Header::parse(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }          \n",
        )
        .unwrap();
        assert_eq!(
            h,
            Header {
                dtype: Dtype {
                    kind: Kind::Float,
                    size: 4,
                    order: ByteOrder::Little
                },
                fortran_order: false,
                shape: vec![3, 4],
            }
        );
    }

    #[test]
    fn parses_1d_scalar_python2_and_double_quotes() {
        let h =
            Header::parse(r#"{"shape": (5L,), "fortran_order": True, "descr": ">i8"}"#).unwrap();
        assert_eq!(h.shape, vec![5]);
        assert!(h.fortran_order);
        assert_eq!(h.dtype.order, ByteOrder::Big);
        assert_eq!(
            Header::parse("{'descr':'|u1','fortran_order':False,'shape':()}")
                .unwrap()
                .shape,
            Vec::<usize>::new()
        );
    }

    #[test]
    fn refuses_malformed_headers() {
        let cases = [
            ("", "expected '{'"),
            ("{'descr': '<f4', 'fortran_order': False}", "no 'shape'"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
                "unexpected header key",
            ),
            (
                "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
                "twice",
            ),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
                "structured",
            ),
            (
                "{'descr': '<c8', 'fortran_order': False, 'shape': (2,)}",
                "unsupported dtype",
            ),
            (
                "{'descr': '|f8', 'fortran_order': False, 'shape': (2,)}",
                "no byte order",
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
                "invalid value",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
                "expected a value",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
                "too large",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",
                "after the header",
            ),
            ("{'descr': '<f4, 'fortran_order': False}", "header syntax"),
            (
                "{'descr': '<f4', 'fortran_order': Nope, 'shape': (2,)}",
                "unexpected word",
            ),
            ("{'a': ((((((((((1))))))))))}", "nests too deeply"),
            ("{'descr': '<f\\4'}", "escapes"),
        ];
        for (text, wanted) in cases {
            let err = Header::parse(text).unwrap_err();
            assert!(err.contains(wanted), "{text:?}: {err:?} lacks {wanted:?}");
        }
    }

    #[test]
    fn dtype_table() {
        assert_eq!(Dtype::parse("|b1").unwrap().kind, Kind::Bool);
        assert_eq!(Dtype::parse("<u2").unwrap().size, 2);
        assert_eq!(Dtype::parse("<f2").unwrap().size, 2);
        assert!(Dtype::parse("<c8").unwrap_err().contains("unsupported"));
        assert!(Dtype::parse("<i3").unwrap_err().contains("unsupported"));
        assert!(Dtype::parse("f4").is_err());
        assert!(Dtype::parse("").is_err());
    }

    #[test]
    fn dtype_prints_as_numpy_writes_it() {
        for descr in [
            "<f2", "<f4", ">f8", "|i1", "<i2", ">u4", "<u8", "|u1", "|b1",
        ] {
            assert_eq!(Dtype::parse(descr).unwrap().to_string(), descr);
        }
        assert_eq!(Dtype::parse("<u1").unwrap().to_string(), "|u1");
    }
}
