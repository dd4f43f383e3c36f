//! [`AttrBuilder`]: the `perf_event_attr` a test, a bench or a tool starts
//! from, the way perf's `evsel` starts from `perf_event_attr__init`-like
//! defaults, so that no caller keeps its own copy of them.

use super::{AttrFlags, AuxAction, PerfEventAttr};
use crate::consts::PERF_ATTR_SIZE_VER8;

/// Builds a [`PerfEventAttr`]: `size` is `PERF_ATTR_SIZE_VER8` and the
/// event starts disabled (`attr.disabled`), as perf opens its events and
/// enables them once all are set up.
///
/// ```
/// use perfaux_abi::attr::{AttrBuilder, AttrFlags};
/// let a = AttrBuilder::new(1, 9).sample_period(10).build();
/// assert_eq!((a.type_, a.config, a.sample_period), (1, 9, 10));
/// assert!(a.flags.contains(AttrFlags::DISABLED));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct AttrBuilder(PerfEventAttr);

impl AttrBuilder {
    /// An attr for PMU `type_` with `config`, disabled, VER8-sized.
    pub fn new(type_: u32, config: u64) -> Self {
        Self(PerfEventAttr {
            type_,
            size: PERF_ATTR_SIZE_VER8,
            config,
            flags: AttrFlags::DISABLED,
            ..Default::default()
        })
    }

    /// Adds `flags` to `attr.flags`.
    pub fn flags(mut self, flags: AttrFlags) -> Self {
        self.0.flags |= flags;
        self
    }

    /// Removes `flags` from `attr.flags` (e.g. `DISABLED`).
    pub fn clear_flags(mut self, flags: AttrFlags) -> Self {
        self.0.flags &= !flags;
        self
    }

    /// `attr.sample_period`: a sampling event.
    pub fn sample_period(mut self, period: u64) -> Self {
        self.0.flags &= !AttrFlags::FREQ;
        self.0.sample_period = period;
        self
    }

    /// `attr.sample_freq` with `attr.freq`: a frequency sampling event.
    pub fn sample_freq(mut self, freq: u64) -> Self {
        self.0.flags |= AttrFlags::FREQ;
        self.0.set_sample_freq(freq);
        self
    }

    /// `attr.sample_type`.
    pub fn sample_type(mut self, sample_type: u64) -> Self {
        self.0.sample_type = sample_type;
        self
    }

    /// `attr.read_format`.
    pub fn read_format(mut self, read_format: u64) -> Self {
        self.0.read_format = read_format;
        self
    }

    /// `attr.config1`.
    pub fn config1(mut self, config1: u64) -> Self {
        self.0.config1 = config1;
        self
    }

    /// `attr.aux_sample_size`: the sampler copies this much trace.
    pub fn aux_sample_size(mut self, size: u32) -> Self {
        self.0.aux_sample_size = size;
        self
    }

    /// `attr.aux_action`.
    pub fn aux_action(mut self, action: AuxAction) -> Self {
        self.0.aux_action = action;
        self
    }

    /// The attr.
    pub fn build(self) -> PerfEventAttr {
        self.0
    }
}

impl PerfEventAttr {
    /// [`AttrBuilder::new`]`(type_, config)`.
    pub fn builder(type_: u32, config: u64) -> AttrBuilder {
        AttrBuilder::new(type_, config)
    }
}
