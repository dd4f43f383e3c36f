//! PERF_RECORD_TEXT_POKE: `{ hdr; u64 addr; u16 old_len; u16 new_len;
//! u8 bytes[old_len + new_len]; padding; sample_id }`: kernel text changed at
//! `addr`. The padding aligns the record to 8 (`perf_event_text_poke()`:
//! `pad = ALIGN(tot, sizeof(u64)) - tot`).

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::consts::PERF_RECORD_TEXT_POKE;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_TEXT_POKE: kernel text at `addr` was replaced.
pub struct TextPokeRecord<'a> {
    /// `header.misc`.
    pub misc: u16,
    /// The address of the changed text.
    pub addr: u64,
    /// At most `u16::MAX` bytes each (the length fields are u16).
    pub old_bytes: RawData<'a>,
    /// The bytes after the change (`new_len` of them).
    pub new_bytes: RawData<'a>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> TextPokeRecord<'a> {
    /// Decodes a PERF_RECORD_TEXT_POKE body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_TEXT_POKE, body, info, e)?;
        let addr = r.u64("addr")?;
        let old_len = r.u16("old_len")?;
        let new_len = r.u16("new_len")?;
        Ok(Self {
            misc,
            addr,
            old_bytes: r.bytes(old_len.into(), "old bytes")?,
            new_bytes: r.bytes(new_len.into(), "new bytes")?,
            sample_id,
        })
    }

    /// `old_len + new_len` plus their two u16 length fields, before padding.
    fn tot(&self) -> usize {
        4 + self.old_bytes.len() + self.new_bytes.len()
    }
}

impl EncodeRecord for TextPokeRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_TEXT_POKE
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        8 + self.tot().next_multiple_of(8) + info.sample_id_len(PERF_RECORD_TEXT_POKE)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.addr));
        sink.put(&e.u16_bytes(self.old_bytes.len() as u16));
        sink.put(&e.u16_bytes(self.new_bytes.len() as u16));
        self.old_bytes.write_to(sink);
        self.new_bytes.write_to(sink);
        sink.put_zeros(self.tot().next_multiple_of(8) - self.tot());
        write_trailer(PERF_RECORD_TEXT_POKE, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        // A 5-byte call replaced by a 5-byte nop: 4 + 10 = 14, padded to 16.
        let old = [0xe8, 1, 2, 3, 4];
        let new = [0x0f, 0x1f, 0x44, 0, 0];
        let rec = TextPokeRecord {
            misc: 0,
            addr: 0xffff_ffff_8100_0000,
            old_bytes: RawData::Single(&old),
            new_bytes: RawData::Single(&new),
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(0xffff_ffff_8100_0000)
            .u16(5)
            .u16(5)
            .bytes(&old)
            .bytes(&new)
            .zeros(2)
            .sid()
            .with_header(PERF_RECORD_TEXT_POKE, 0);
        check_layout(&Record::TextPoke(rec), &sid_info(), &want);
    }
}
