//! PERF_RECORD_CALLCHAIN_DEFERRED (v6.19): `{ hdr; u64 cookie; u64 nr;
//! u64 ips[nr]; sample_id }`: a user callchain unwound at return to user
//! space, matched to samples by `cookie`.

use super::{EncodeRecord, split_trailer, write_trailer};
use crate::array::Array;
use crate::consts::PERF_RECORD_CALLCHAIN_DEFERRED;
use crate::endian::Endianness;
use crate::error::ParseError;
use crate::parse_info::RecordParseInfo;
use crate::raw::RawData;
use crate::sample_id::SampleId;
use crate::sink::ByteSink;

#[derive(Debug, Clone, Copy, PartialEq, Default)]
/// PERF_RECORD_CALLCHAIN_DEFERRED: the user callchain of the samples that
/// carry `cookie` after `PERF_CONTEXT_USER_DEFERRED`.
pub struct CallchainDeferredRecord<'a> {
    /// `header.misc`.
    pub misc: u16,
    /// The cookie the deferred samples carry.
    pub cookie: u64,
    /// `ips[nr]`: the user callchain, starting with `PERF_CONTEXT_USER`.
    pub ips: Array<'a, u64>,
    /// The `sample_id` trailer (`attr.sample_id_all`).
    pub sample_id: SampleId,
}

impl<'a> CallchainDeferredRecord<'a> {
    /// Decodes a PERF_RECORD_CALLCHAIN_DEFERRED body (the bytes after the header) in byte order
    /// `e`; `misc` is the header's, and `info` lays out the `sample_id` trailer.
    pub fn parse(
        misc: u16,
        body: RawData<'a>,
        info: &RecordParseInfo,
        e: Endianness,
    ) -> Result<Self, ParseError> {
        let (mut r, sample_id) = split_trailer(PERF_RECORD_CALLCHAIN_DEFERRED, body, info, e)?;
        let cookie = r.u64("cookie")?;
        let nr = r.u64("nr")?;
        Ok(Self {
            misc,
            cookie,
            ips: Array::parse(&mut r, nr, (), "ips")?,
            sample_id,
        })
    }
}

impl EncodeRecord for CallchainDeferredRecord<'_> {
    fn record_type(&self) -> u32 {
        PERF_RECORD_CALLCHAIN_DEFERRED
    }
    fn misc(&self) -> u16 {
        self.misc
    }
    fn body_len(&self, info: &RecordParseInfo) -> usize {
        16 + self.ips.encoded_len(()) + info.sample_id_len(PERF_RECORD_CALLCHAIN_DEFERRED)
    }
    fn write_body<S: ByteSink + ?Sized>(
        &self,
        info: &RecordParseInfo,
        e: Endianness,
        sink: &mut S,
    ) {
        sink.put(&e.u64_bytes(self.cookie));
        sink.put(&e.u64_bytes(self.ips.len() as u64));
        self.ips.write((), e, sink);
        write_trailer(
            PERF_RECORD_CALLCHAIN_DEFERRED,
            &self.sample_id,
            info,
            e,
            sink,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consts::PERF_CONTEXT_USER;
    use crate::records::Record;
    use crate::records::testutil::*;

    #[test]
    fn layout() {
        let ips = [PERF_CONTEXT_USER, 0x401000, 0x401234];
        let rec = CallchainDeferredRecord {
            misc: 0,
            cookie: 0xc00c1e,
            ips: Array::Items(&ips),
            sample_id: sid(),
        };
        let want = Le::new()
            .u64(0xc00c1e)
            .u64(3)
            .u64(PERF_CONTEXT_USER)
            .u64(0x401000)
            .u64(0x401234)
            .sid()
            .with_header(PERF_RECORD_CALLCHAIN_DEFERRED, 0);
        check_layout(&Record::CallchainDeferred(rec), &sid_info(), &want);
    }
}
