//! The feature sections of a file (or the HEADER_FEATURE records of a pipe):
//! raw bytes per feature, and parsed forms of the common ones on demand.

use crate::error::Result;
use crate::feature::Feature;
use crate::feature_data::{
    AuxtraceIndexEntry, BuildIdEntry, ClockData, CompressedInfo, EventDesc, GroupDesc, NrCpus,
    SectionCursor, parse_auxtrace_index, parse_build_ids, parse_clock_data, parse_cmdline,
    parse_compressed, parse_event_desc, parse_group_desc, parse_nrcpus, parse_pmu_mappings,
    parse_string,
};
use crate::header::FileSection;
use perfaux_abi::Endianness;
use std::collections::BTreeMap;

/// One feature's bytes and where they were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureSection {
    /// File offset of the first byte (the section, or the record's data).
    pub offset: u64,
    /// The section's bytes, as the file holds them.
    pub data: Vec<u8>,
}

/// Every feature a file carries, keyed by feature number.
#[derive(Debug, Clone)]
pub struct FeatureSections {
    endian: Endianness,
    sections: BTreeMap<Feature, FeatureSection>,
    /// Sections the reader located but did not read (perfaux's trace
    /// section, which can be most of the file): their place in the file.
    located: BTreeMap<Feature, FileSection>,
}

impl FeatureSections {
    pub(crate) fn new(endian: Endianness) -> Self {
        Self {
            endian,
            sections: BTreeMap::new(),
            located: BTreeMap::new(),
        }
    }

    pub(crate) fn locate(&mut self, f: Feature, at: FileSection) {
        self.located.insert(f, at);
    }

    pub(crate) fn insert(&mut self, f: Feature, offset: u64, data: Vec<u8>) {
        self.sections.insert(f, FeatureSection { offset, data });
    }

    /// The features present (read or located), in bit order.
    pub fn features(&self) -> impl Iterator<Item = Feature> + '_ {
        let mut all: Vec<Feature> = self
            .sections
            .keys()
            .chain(self.located.keys())
            .copied()
            .collect();
        all.sort();
        all.into_iter()
    }

    /// Whether the file has feature `f` (read or located).
    pub fn contains(&self, f: Feature) -> bool {
        self.sections.contains_key(&f) || self.located.contains_key(&f)
    }

    /// Where a section the reader located without reading it lies in the
    /// file (file mode: perfaux's trace section, feature
    /// [`crate::trace_section::PERFAUX_FEATURE_BIT`]); its bytes are read on
    /// demand ([`crate::trace_section::TraceSection`]). `None` for a
    /// section that was read ([`Self::raw`]) or is absent.
    pub fn location(&self, f: Feature) -> Option<FileSection> {
        self.located.get(&f).copied()
    }

    /// A feature's raw bytes, in the file's byte order.
    pub fn raw(&self, f: Feature) -> Option<&FeatureSection> {
        self.sections.get(&f)
    }

    /// Removes a feature and hands its bytes over (no copy): for a large
    /// section that a consumer parses once, so that the metadata it keeps
    /// (and clones) does not hold it too.
    pub fn take(&mut self, f: Feature) -> Option<FeatureSection> {
        self.sections.remove(&f)
    }

    fn with<T>(
        &self,
        f: Feature,
        what: &'static str,
        parse: impl FnOnce(&mut SectionCursor<'_>) -> Result<T>,
    ) -> Option<Result<T>> {
        let s = self.sections.get(&f)?;
        Some(parse(&mut SectionCursor::new(
            &s.data,
            self.endian,
            s.offset,
            what,
        )))
    }

    /// `HEADER_HOSTNAME`, if present.
    pub fn hostname(&self) -> Option<Result<String>> {
        self.with(Feature::HOSTNAME, "HOSTNAME", parse_string)
    }
    /// `HEADER_OSRELEASE`, if present.
    pub fn osrelease(&self) -> Option<Result<String>> {
        self.with(Feature::OSRELEASE, "OSRELEASE", parse_string)
    }
    /// `HEADER_VERSION`, if present.
    pub fn version(&self) -> Option<Result<String>> {
        self.with(Feature::VERSION, "VERSION", parse_string)
    }
    /// `HEADER_ARCH`, if present.
    pub fn arch(&self) -> Option<Result<String>> {
        self.with(Feature::ARCH, "ARCH", parse_string)
    }
    /// `HEADER_CPUDESC`, if present.
    pub fn cpudesc(&self) -> Option<Result<String>> {
        self.with(Feature::CPUDESC, "CPUDESC", parse_string)
    }
    /// `HEADER_CPUID`, if present.
    pub fn cpuid(&self) -> Option<Result<String>> {
        self.with(Feature::CPUID, "CPUID", parse_string)
    }
    /// `HEADER_NRCPUS`, if present.
    pub fn nrcpus(&self) -> Option<Result<NrCpus>> {
        self.with(Feature::NRCPUS, "NRCPUS", parse_nrcpus)
    }
    /// `HEADER_TOTAL_MEM` in kB, as /proc/meminfo's MemTotal.
    pub fn total_mem(&self) -> Option<Result<u64>> {
        self.with(Feature::TOTAL_MEM, "TOTAL_MEM", |c| c.u64())
    }
    /// `HEADER_CMDLINE`: the recording command's words, if present.
    pub fn cmdline(&self) -> Option<Result<Vec<String>>> {
        self.with(Feature::CMDLINE, "CMDLINE", parse_cmdline)
    }
    /// Event names and ids per attr (in attr order).
    pub fn event_desc(&self) -> Option<Result<Vec<EventDesc>>> {
        self.with(Feature::EVENT_DESC, "EVENT_DESC", parse_event_desc)
    }
    /// `HEADER_CLOCKID`: the resolution of the clock in ns.
    pub fn clockid_res_ns(&self) -> Option<Result<u64>> {
        self.with(Feature::CLOCKID, "CLOCKID", |c| c.u64())
    }
    /// `HEADER_CLOCK_DATA`, if present.
    pub fn clock_data(&self) -> Option<Result<ClockData>> {
        self.with(Feature::CLOCK_DATA, "CLOCK_DATA", parse_clock_data)
    }
    /// `HEADER_BUILD_ID`: the build ids of the files the recording touched.
    pub fn build_ids(&self) -> Option<Result<Vec<BuildIdEntry>>> {
        self.with(Feature::BUILD_ID, "BUILD_ID", parse_build_ids)
    }
    /// The index of AUXTRACE records (file mode).
    pub fn auxtrace_index(&self) -> Option<Result<Vec<AuxtraceIndexEntry>>> {
        self.with(Feature::AUXTRACE, "AUXTRACE", parse_auxtrace_index)
    }
    /// `HEADER_COMPRESSED`, if present.
    pub fn compressed(&self) -> Option<Result<CompressedInfo>> {
        self.with(Feature::COMPRESSED, "COMPRESSED", parse_compressed)
    }
    /// `HEADER_GROUP_DESC`, if present.
    pub fn group_desc(&self) -> Option<Result<Vec<GroupDesc>>> {
        self.with(Feature::GROUP_DESC, "GROUP_DESC", parse_group_desc)
    }
    /// `(pmu type, pmu name)` pairs.
    pub fn pmu_mappings(&self) -> Option<Result<Vec<(u32, String)>>> {
        self.with(Feature::PMU_MAPPINGS, "PMU_MAPPINGS", parse_pmu_mappings)
    }
    /// `HEADER_SAMPLE_TIME`: first and last sample time.
    pub fn sample_time(&self) -> Option<Result<(u64, u64)>> {
        self.with(Feature::SAMPLE_TIME, "SAMPLE_TIME", |c| {
            Ok((c.u64()?, c.u64()?))
        })
    }
}
