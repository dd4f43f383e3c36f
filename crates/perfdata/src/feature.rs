//! Feature numbers (`HEADER_*` of tools/perf/util/header.h) and the 256-bit
//! `adds_features` bitmap of the file header.

use perfaux_abi::Endianness;

/// A feature number: a bit of `adds_features`, or a `HEADER_FEATURE`
/// record's `feat_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Feature(pub u32);

impl Feature {
    /// `HEADER_TRACING_DATA`: the tracepoint formats (tracefs) the recording used.
    pub const TRACING_DATA: Self = Self(1);
    /// `HEADER_BUILD_ID`: build ids of the DSOs samples hit.
    pub const BUILD_ID: Self = Self(2);
    /// `HEADER_HOSTNAME`: `uname -n` of the recording machine.
    pub const HOSTNAME: Self = Self(3);
    /// `HEADER_OSRELEASE`: `uname -r`.
    pub const OSRELEASE: Self = Self(4);
    /// `HEADER_VERSION`: the perf (here perfaux) version that wrote the file.
    pub const VERSION: Self = Self(5);
    /// `HEADER_ARCH`: `uname -m`.
    pub const ARCH: Self = Self(6);
    /// `HEADER_NRCPUS`: CPUs online and available.
    pub const NRCPUS: Self = Self(7);
    /// `HEADER_CPUDESC`: the CPU model string.
    pub const CPUDESC: Self = Self(8);
    /// `HEADER_CPUID`: the CPU vendor, family, model and stepping.
    pub const CPUID: Self = Self(9);
    /// `HEADER_TOTAL_MEM`: memory size in KiB.
    pub const TOTAL_MEM: Self = Self(10);
    /// `HEADER_CMDLINE`: the recording command's argv.
    pub const CMDLINE: Self = Self(11);
    /// `HEADER_EVENT_DESC`: each attr with its name and ids.
    pub const EVENT_DESC: Self = Self(12);
    /// `HEADER_CPU_TOPOLOGY`: core and thread siblings.
    pub const CPU_TOPOLOGY: Self = Self(13);
    /// `HEADER_NUMA_TOPOLOGY`: NUMA nodes, their memory and CPUs.
    pub const NUMA_TOPOLOGY: Self = Self(14);
    /// `HEADER_BRANCH_STACK`: the recording sampled branch stacks (no body).
    pub const BRANCH_STACK: Self = Self(15);
    /// `HEADER_PMU_MAPPINGS`: PMU type numbers and names.
    pub const PMU_MAPPINGS: Self = Self(16);
    /// `HEADER_GROUP_DESC`: event groups (leader index, member count, name).
    pub const GROUP_DESC: Self = Self(17);
    /// `HEADER_AUXTRACE`: the index of AUXTRACE records (file offset and size of each).
    pub const AUXTRACE: Self = Self(18);
    /// `HEADER_STAT`: the file was written by `perf stat record` (no body).
    pub const STAT: Self = Self(19);
    /// `HEADER_CACHE`: the CPU cache hierarchy.
    pub const CACHE: Self = Self(20);
    /// `HEADER_SAMPLE_TIME`: the first and last sample times.
    pub const SAMPLE_TIME: Self = Self(21);
    /// `HEADER_MEM_TOPOLOGY`: memory blocks and their nodes.
    pub const MEM_TOPOLOGY: Self = Self(22);
    /// `HEADER_CLOCKID`: the event clock's resolution (ns per tick).
    pub const CLOCKID: Self = Self(23);
    /// `HEADER_DIR_FORMAT`: the directory format's version (perf record --threads).
    pub const DIR_FORMAT: Self = Self(24);
    /// `HEADER_BPF_PROG_INFO`: the BPF programs loaded during the recording.
    pub const BPF_PROG_INFO: Self = Self(25);
    /// `HEADER_BPF_BTF`: the BTF of those programs.
    pub const BPF_BTF: Self = Self(26);
    /// `HEADER_COMPRESSED`: the compression of COMPRESSED records (zstd, level).
    pub const COMPRESSED: Self = Self(27);
    /// `HEADER_CPU_PMU_CAPS`: the CPU PMU's capabilities.
    pub const CPU_PMU_CAPS: Self = Self(28);
    /// `HEADER_CLOCK_DATA`: a reference pair of the event clock and wall-clock time.
    pub const CLOCK_DATA: Self = Self(29);
    /// `HEADER_HYBRID_TOPOLOGY`: the CPUs of each hybrid PMU.
    pub const HYBRID_TOPOLOGY: Self = Self(30);
    /// `HEADER_PMU_CAPS`: every PMU's capabilities.
    pub const PMU_CAPS: Self = Self(31);
    /// simpleperf numbers its own features from 128 (`FEAT_SIMPLEPERF_START`).
    pub const SIMPLEPERF_START: Self = Self(128);

    /// perf's name for the feature (`feat_ops[].name`), or simpleperf's.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 32] = [
            "RESERVED",
            "TRACING_DATA",
            "BUILD_ID",
            "HOSTNAME",
            "OSRELEASE",
            "VERSION",
            "ARCH",
            "NRCPUS",
            "CPUDESC",
            "CPUID",
            "TOTAL_MEM",
            "CMDLINE",
            "EVENT_DESC",
            "CPU_TOPOLOGY",
            "NUMA_TOPOLOGY",
            "BRANCH_STACK",
            "PMU_MAPPINGS",
            "GROUP_DESC",
            "AUXTRACE",
            "STAT",
            "CACHE",
            "SAMPLE_TIME",
            "MEM_TOPOLOGY",
            "CLOCKID",
            "DIR_FORMAT",
            "BPF_PROG_INFO",
            "BPF_BTF",
            "COMPRESSED",
            "CPU_PMU_CAPS",
            "CLOCK_DATA",
            "HYBRID_TOPOLOGY",
            "PMU_CAPS",
        ];
        const SIMPLEPERF: [&str; 8] = [
            "simpleperf FILE",
            "simpleperf META_INFO",
            "simpleperf DEBUG_UNWIND",
            "simpleperf DEBUG_UNWIND_FILE",
            "simpleperf FILE2",
            "simpleperf ETM_BRANCH_LIST",
            "simpleperf INIT_MAP",
            "simpleperf unknown",
        ];
        match self.0 {
            n @ 0..=31 => NAMES[n as usize],
            n @ 128..=134 => SIMPLEPERF[(n - 128) as usize],
            // perfaux's own trace section (the cli's PERFAUX_FEATURE_BIT).
            250 => "perfaux trace",
            128.. => SIMPLEPERF[7],
            _ => "unknown",
        }
    }
}

/// `adds_features`: `DECLARE_BITMAP(adds_features, HEADER_FEAT_BITS = 256)`
/// stored as four u64 words in the file's byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureSet(pub [u64; 4]);

impl FeatureSet {
    /// Bits in the bitmap (`HEADER_FEAT_BITS`).
    pub const BITS: u32 = 256;

    /// Whether feature `f` is set.
    pub fn contains(&self, f: Feature) -> bool {
        f.0 < Self::BITS && self.0[(f.0 / 64) as usize] >> (f.0 % 64) & 1 == 1
    }

    /// Sets feature `f` (numbers past [`Self::BITS`] are ignored).
    pub fn insert(&mut self, f: Feature) {
        if f.0 < Self::BITS {
            self.0[(f.0 / 64) as usize] |= 1 << (f.0 % 64);
        }
    }

    /// The set features in bit order, the order of the section table.
    pub fn iter(&self) -> impl Iterator<Item = Feature> + '_ {
        (0..Self::BITS).map(Feature).filter(|&f| self.contains(f))
    }

    /// How many features are set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether no feature is set.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    pub(crate) fn parse(b: &[u8; 32], e: Endianness) -> Self {
        let mut w = [0u64; 4];
        for (i, word) in w.iter_mut().enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i * 8..i * 8 + 8]);
            *word = e.u64(a);
        }
        Self(w)
    }

    pub(crate) fn to_bytes(self, e: Endianness) -> [u8; 32] {
        let mut b = [0u8; 32];
        for (i, word) in self.0.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&e.u64_bytes(*word));
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_iterate_in_bit_order_across_words() {
        let mut s = FeatureSet::default();
        for f in [
            Feature(200),
            Feature::HOSTNAME,
            Feature(64),
            Feature::AUXTRACE,
        ] {
            s.insert(f);
        }
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            [Feature(3), Feature(18), Feature(64), Feature(200)]
        );
        assert_eq!(s.len(), 4);
        s.insert(Feature(999));
        assert_eq!(s.len(), 4, "bits past 255 do not exist");
        let b = s.to_bytes(Endianness::Big);
        assert_eq!(FeatureSet::parse(&b, Endianness::Big), s);
        assert_eq!(Feature(129).name(), "simpleperf META_INFO");
        assert_eq!(Feature(250).name(), "perfaux trace");
    }
}
