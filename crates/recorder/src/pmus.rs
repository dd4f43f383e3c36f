//! The PMU types the recorder needs to know about, in one place: the
//! drivers live in perfaux-pmus, outside the core, as the kernel's do.

use perfaux_core::PmuCaps;
pub use perfaux_pmus::{PROBE_TYPE, SWTRACE_TYPE, UEVENT_AUX_TYPE, UEVENT_TYPE};

/// Registers the drivers (idempotent): the recorder opens their events.
pub fn register() {
    perfaux_pmus::register();
}

/// Resolves a perfaux probe name to the config of a [`PROBE_TYPE`] event.
pub fn resolve_probe(name: &str) -> u64 {
    perfaux_pmus::probe::resolve_probe(name)
}

/// The capabilities of the PMU registered under `type_`, the drivers
/// registered first; none for a type no PMU has.
fn capabilities(type_: u32) -> PmuCaps {
    register();
    perfaux_core::pmu_capabilities(type_).unwrap_or_default()
}

/// Whether events of PMU `type_` have an AUX area: the PMU has `setup_aux`
/// ([`PmuCaps::AUX`]), as the kernel's `has_aux(event)` asks.
pub fn has_aux(type_: u32) -> bool {
    capabilities(type_).contains(PmuCaps::AUX)
}

/// Whether the AUX area of PMU `type_` holds uevents, not trace packets
/// ([`PmuCaps::AUX_UEVENT_LOG`]).
pub fn is_uevent_log(type_: u32) -> bool {
    capabilities(type_).contains(PmuCaps::AUX | PmuCaps::AUX_UEVENT_LOG)
}

/// The probe table that names the trace's probes, for the trace section.
pub fn probe_table() -> Vec<u8> {
    perfaux_swtrace::probe_table().to_bytes()
}
