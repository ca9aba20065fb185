//! The protocol-buffers wire format, written by hand for the few ONNX messages o2o writes.
//!
//! A message is a sequence of fields, each a key `field_number << 3 | wire_type` (a varint)
//! followed by its value: wire type 0 a varint (integers, enums), 2 a length-delimited run of
//! bytes (strings, bytes, nested messages, packed repeated numbers), 5 four little-endian bytes
//! (float). That is all an ONNX model needs, so o2o writes it in these few lines rather than
//! through `prost`, which would need `protoc` and `onnx.proto` at build time, or the message
//! structs written out by hand: either is larger than this writer, and o2o only writes.

/// A message under construction: fields are appended in the order written.
#[derive(Debug, Default, Clone)]
pub struct Message(Vec<u8>);

impl Message {
    /// An empty message.
    pub fn new() -> Self {
        Self::default()
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        varint(&mut self.0, (u64::from(field) << 3) | u64::from(wire_type));
    }

    /// An integer or enum field (wire type 0); negative numbers take ten bytes, as int64 does.
    pub fn int(mut self, field: u32, value: i64) -> Self {
        self.key(field, 0);
        varint(&mut self.0, value as u64);
        self
    }

    /// A float field (wire type 5).
    pub fn float(mut self, field: u32, value: f32) -> Self {
        self.key(field, 5);
        self.0.extend_from_slice(&value.to_le_bytes());
        self
    }

    /// A bytes field (wire type 2).
    pub fn bytes(mut self, field: u32, value: &[u8]) -> Self {
        self.key(field, 2);
        varint(&mut self.0, value.len() as u64);
        self.0.extend_from_slice(value);
        self
    }

    /// A string field.
    pub fn string(self, field: u32, value: &str) -> Self {
        self.bytes(field, value.as_bytes())
    }

    /// A nested message.
    pub fn message(self, field: u32, value: &Message) -> Self {
        self.bytes(field, &value.0)
    }

    /// A repeated integer field, packed (one length-delimited run of varints).
    pub fn packed_ints(self, field: u32, values: &[i64]) -> Self {
        let mut run = Vec::new();
        values.iter().for_each(|v| varint(&mut run, *v as u64));
        self.bytes(field, &run)
    }

    /// The encoded bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// Base-128 varint: seven bits a byte, least significant first, the high bit set on all but
/// the last byte.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples of the protocol-buffers encoding guide: 150 in field 1 is `08 96 01`, the
    /// string "testing" in field 2 is `12 07 74 65 73 74 69 6e 67`, a nested message wraps its
    /// bytes, −1 takes ten bytes, and a packed [3, 270, 86942] in field 4 is
    /// `22 06 03 8e 02 9e a7 05`.
    #[test]
    fn matches_the_wire_format() {
        assert_eq!(Message::new().int(1, 150).into_bytes(), [0x08, 0x96, 0x01]);
        let s = Message::new().string(2, "testing");
        assert_eq!(s.clone().into_bytes(), [0x12, 0x07, 0x74, 0x65, 0x73, 0x74, 0x69, 0x6e, 0x67]);
        let inner = Message::new().int(1, 150);
        assert_eq!(Message::new().message(3, &inner).into_bytes(), [0x1a, 0x03, 0x08, 0x96, 0x01]);
        let neg = Message::new().int(1, -1).into_bytes();
        assert_eq!(neg.len(), 11);
        assert_eq!(neg[1..10], [0xff; 9]);
        assert_eq!(neg[10], 0x01);
        assert_eq!(
            Message::new().packed_ints(4, &[3, 270, 86942]).into_bytes(),
            [0x22, 0x06, 0x03, 0x8e, 0x02, 0x9e, 0xa7, 0x05]
        );
        assert_eq!(Message::new().float(2, 1.0).into_bytes(), [0x15, 0x00, 0x00, 0x80, 0x3f]);
    }
}
