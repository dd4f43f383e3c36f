//! PERF_RECORD_KSYMBOL: `{ hdr; u64 addr; u32 len; u16 ksym_type; u16 flags;
//! char name[]; sample_id }`, the name NUL-terminated and padded to 8
//! (ksym_type: PERF_RECORD_KSYMBOL_TYPE_BPF 1, _OOL 2; flags: UNREGISTER 1).

use super::{EncodeRecord, cstr_len, split_trailer, write_cstr, write_trailer};
use crate::consts::PERF_RECORD_KSYMBOL;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_KSYMBOL: a kernel symbol was registered or unregistered.
pub struct KsymbolRecord<'a> {
    /// `header.misc`.
    pub misc: u16,
    /// The symbol's start address.
    pub addr: u64,
    /// The symbol's length in bytes.
    pub len: u32,
    /// `PERF_RECORD_KSYMBOL_TYPE_BPF` (1) or `_OOL` (2, out-of-line code).
    pub ksym_type: u16,
    /// `PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER` (1) when the symbol goes away.
    pub flags: u16,
    /// Without its NUL and padding.
    pub name: RawData<'a>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> KsymbolRecord<'a> {
    /// Decodes a PERF_RECORD_KSYMBOL body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_KSYMBOL, body, info, e)?;
        Ok(Self {
            misc,
            addr: r.u64("addr")?,
            len: r.u32("len")?,
            ksym_type: r.u16("ksym_type")?,
            flags: r.u16("flags")?,
            name: r.rest().until_nul(),
            sample_id,
        })
    }
}

impl EncodeRecord for KsymbolRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_KSYMBOL
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        16 + cstr_len(&self.name) + info.sample_id_len(PERF_RECORD_KSYMBOL)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.addr));
        sink.put(&e.u32_bytes(self.len));
        sink.put(&e.u16_bytes(self.ksym_type));
        sink.put(&e.u16_bytes(self.flags));
        write_cstr(&self.name, sink);
        write_trailer(PERF_RECORD_KSYMBOL, &self.sample_id, info, e, sink);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let rec = KsymbolRecord {
            misc: 0,
            addr: 0xffff_ffff_c000_0000,
            len: 256,
            ksym_type: 1,
            flags: 0,
            name: RawData::Single(b"bpf_prog_6deef7357e7b4530"),
            sample_id: sid(),
        };
        // 25 name bytes + NUL = 26, padded to 32.
        let want = Le::new()
            .u64(0xffff_ffff_c000_0000)
            .u32(256)
            .u16(1)
            .u16(0)
            .bytes(b"bpf_prog_6deef7357e7b4530")
            .zeros(7)
            .sid()
            .with_header(PERF_RECORD_KSYMBOL, 0);
        check_layout(&Record::Ksymbol(rec), &sid_info(), &want);
    }
}
