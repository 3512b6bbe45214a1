//! The protocol buffer messages of an event file, encoded and decoded by
//! hand: the few fields csam writes need no code generator.
//!
//! ```text
//! message Event   { double wall_time = 1; int64 step = 2;
//!                   oneof what { string file_version = 3; Summary summary = 5; ... } }
//! message Summary { repeated Value value = 1; }
//! message Value   { string tag = 1; oneof value { float simple_value = 2; ... } }
//! ```
//!
//! (TensorFlow's `core/util/event.proto` and `core/framework/summary.proto`.)
//! Encoding follows proto3: `step` 0 is left out, `simple_value`, a member
//! of a oneof, is always written. Decoding skips fields it does not know, as
//! every protocol buffer reader does.

/// Protocol buffer wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LENGTH_DELIMITED: u8 = 2;
const FIXED32: u8 = 5;

/// One scalar of a summary: TensorBoard plots `value` against the event's
/// step under `tag`.
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// The plot's name; `/` groups plots (`val/ece`).
    pub tag: String,
    /// The value (TensorBoard stores scalars as 32-bit floats).
    pub value: f32,
}

/// What an event carries.
#[derive(Debug, Clone, PartialEq)]
pub enum What {
    /// The format version, the first event of every file (`brain.Event:2`).
    FileVersion(String),
    /// Scalars at the event's step.
    Summary(Vec<Scalar>),
}

/// One event: a record of an event file.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub wall_time: f64,
    /// The x coordinate of the event's scalars.
    pub step: i64,
    /// Its content.
    pub what: What,
}

/// The version string of the event format TensorBoard reads.
pub const FILE_VERSION: &str = "brain.Event:2";

/// Bytes that are not an event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed event: {0}")]
pub struct ProtoError(&'static str);

impl Event {
    /// The first event of a file, written at `wall_time`.
    pub fn file_version(wall_time: f64) -> Event {
        Event {
            wall_time,
            step: 0,
            what: What::FileVersion(FILE_VERSION.to_string()),
        }
    }

    /// The scalars of the event (none for the version event).
    pub fn scalars(&self) -> &[Scalar] {
        match &self.what {
            What::Summary(scalars) => scalars,
            What::FileVersion(_) => &[],
        }
    }

    /// The event's protocol buffer bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_key(&mut out, 1, FIXED64);
        out.extend_from_slice(&self.wall_time.to_le_bytes());
        if self.step != 0 {
            put_key(&mut out, 2, VARINT);
            // int64 is the two's complement as an unsigned varint.
            put_varint(&mut out, self.step as u64);
        }
        match &self.what {
            What::FileVersion(version) => put_bytes(&mut out, 3, version.as_bytes()),
            What::Summary(scalars) => {
                let mut summary = Vec::new();
                for scalar in scalars {
                    let mut value = Vec::new();
                    put_bytes(&mut value, 1, scalar.tag.as_bytes());
                    put_key(&mut value, 2, FIXED32);
                    value.extend_from_slice(&scalar.value.to_le_bytes());
                    put_bytes(&mut summary, 1, &value);
                }
                put_bytes(&mut out, 5, &summary);
            }
        }
        out
    }

    /// Reads an event from its protocol buffer bytes. An event with neither
    /// a version nor a summary decodes as an empty summary.
    pub fn decode(bytes: &[u8]) -> Result<Event, ProtoError> {
        let mut event = Event {
            wall_time: 0.0,
            step: 0,
            what: What::Summary(Vec::new()),
        };
        let mut reader = Reader(bytes);
        while let Some((field, wire)) = reader.key()? {
            match (field, wire) {
                (1, FIXED64) => event.wall_time = f64::from_le_bytes(reader.fixed()?),
                (2, VARINT) => event.step = reader.varint()? as i64,
                (3, LENGTH_DELIMITED) => event.what = What::FileVersion(reader.text()?),
                (5, LENGTH_DELIMITED) => event.what = What::Summary(summary(reader.bytes()?)?),
                _ => reader.skip(wire)?,
            }
        }
        Ok(event)
    }
}

fn summary(bytes: &[u8]) -> Result<Vec<Scalar>, ProtoError> {
    let mut scalars = Vec::new();
    let mut reader = Reader(bytes);
    while let Some((field, wire)) = reader.key()? {
        match (field, wire) {
            (1, LENGTH_DELIMITED) => scalars.push(value(reader.bytes()?)?),
            _ => reader.skip(wire)?,
        }
    }
    Ok(scalars)
}

fn value(bytes: &[u8]) -> Result<Scalar, ProtoError> {
    let (mut tag, mut value) = (String::new(), None);
    let mut reader = Reader(bytes);
    while let Some((field, wire)) = reader.key()? {
        match (field, wire) {
            (1, LENGTH_DELIMITED) => tag = reader.text()?,
            (2, FIXED32) => value = Some(f32::from_le_bytes(reader.fixed()?)),
            _ => reader.skip(wire)?,
        }
    }
    let value = value.ok_or(ProtoError("a summary value without a simple_value"))?;
    Ok(Scalar { tag, value })
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_key(out: &mut Vec<u8>, field: u32, wire: u8) {
    put_varint(out, u64::from(field) << 3 | u64::from(wire));
}

fn put_bytes(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    put_key(out, field, LENGTH_DELIMITED);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// The unread rest of a message.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        if n > self.0.len() {
            return Err(ProtoError("a field runs past the end of its message"));
        }
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(taken)
    }

    fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            n |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(n);
            }
        }
        Err(ProtoError("a varint longer than 10 bytes"))
    }

    /// The next field's number and wire type; None at the message's end.
    fn key(&mut self) -> Result<Option<(u64, u8)>, ProtoError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        Ok(Some((key >> 3, (key & 7) as u8)))
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let mut word = [0; N];
        word.copy_from_slice(self.take(N)?);
        Ok(word)
    }

    fn bytes(&mut self) -> Result<&'a [u8], ProtoError> {
        let n = usize::try_from(self.varint()?)
            .map_err(|_| ProtoError("a length beyond the address space"))?;
        self.take(n)
    }

    fn text(&mut self) -> Result<String, ProtoError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| ProtoError("a string not in UTF-8"))
    }

    fn skip(&mut self, wire: u8) -> Result<(), ProtoError> {
        match wire {
            VARINT => self.varint().map(drop),
            FIXED64 => self.take(8).map(drop),
            LENGTH_DELIMITED => self.bytes().map(drop),
            FIXED32 => self.take(4).map(drop),
            _ => Err(ProtoError("a wire type that proto3 does not write")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn scalar(tag: &str, value: f32) -> Scalar {
        Scalar {
            tag: tag.to_string(),
            value,
        }
    }

    /// The expected bytes are `event_pb2.Event(...).SerializeToString()` of
    /// the Python `tensorboard` package (its generated protobuf code), for
    /// the same fields.
    #[test]
    fn events_encode_to_the_bytes_of_the_reference_protobuf() {
        let cases = [
            (
                Event::file_version(1.5),
                "09000000000000f83f1a0d627261696e2e4576656e743a32",
            ),
            (
                Event {
                    wall_time: 1.5,
                    step: 3,
                    what: What::Summary(vec![scalar("val/ece", 0.25), scalar("lr", 0.0)]),
                },
                "09000000000000f83f10032a1b0a0e0a0776616c2f656365150000803e0a090a026c721500000000",
            ),
            (
                Event {
                    wall_time: 2.0,
                    step: -1,
                    what: What::Summary(vec![scalar("t", -1.0)]),
                },
                "09000000000000004010ffffffffffffffffff012a0a0a080a017415000080bf",
            ),
        ];
        for (event, expected) in cases {
            assert_eq!(event.encode(), hex(expected), "{event:?}");
            assert_eq!(Event::decode(&hex(expected)).unwrap(), event);
        }
    }

    #[test]
    fn unknown_fields_are_skipped_and_bad_bytes_refused() {
        // wall_time 2.0, step 300, then field 4 (a fixed32 of another kind).
        let mut bytes = hex("09000000000000004010ac02");
        bytes.extend([4 << 3 | FIXED32, 1, 2, 3, 4]);
        let event = Event::decode(&bytes).unwrap();
        assert_eq!((event.wall_time, event.step), (2.0, 300));
        assert_eq!(event.scalars(), &[]);
        for bad in [
            &bytes[..bytes.len() - 1],
            &[0x0a, 0x05, b'a'][..],
            &[0x0b][..],
        ] {
            assert!(Event::decode(bad).is_err(), "{bad:?}");
        }
        let no_value = hex("2a050a030a0174");
        assert_eq!(
            Event::decode(&no_value).unwrap_err().to_string(),
            "malformed event: a summary value without a simple_value"
        );
    }
}
