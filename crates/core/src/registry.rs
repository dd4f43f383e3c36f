//! The PMU registry: `perf_pmu_register` and the type lookup of
//! `perf_init_event`.
//!
//! The core holds no driver: the PMUs register themselves (perfaux-pmus'
//! `register()`, the kernel's initcalls), with a fixed type
//! ([`perf_pmu_register_type`]) or a dynamic one ([`perf_pmu_register`]).
//!
//! Types follow the kernel: `PERF_TYPE_SOFTWARE` (1) is the fixed type of
//! the software events that match the kernel's (`task-clock`, `dummy`);
//! every other PMU gets a dynamic type counted up from
//! [`PMU_TYPE_DYNAMIC_BASE`], the way `/sys/bus/event_source/devices/*/type`
//! hands out numbers above `PERF_TYPE_MAX`. perfaux starts at 0x100 so its
//! in-process PMUs cannot be mistaken for a kernel PMU's small number in a
//! perf.data file that mixes both.

use std::sync::{Arc, OnceLock, RwLock};

use crate::error::{Error, Result};
use crate::pmu::{Pmu, PmuCaps};

/// The first dynamic PMU type.
pub const PMU_TYPE_DYNAMIC_BASE: u32 = 0x100;

struct Entry {
    type_: u32,
    pmu: Arc<dyn Pmu>,
}

struct Registry {
    pmus: RwLock<Vec<Entry>>,
}

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| Registry {
        pmus: RwLock::new(Vec::new()),
    })
}

/// Registers `pmu` under a new dynamic type and returns the type
/// (`perf_pmu_register(pmu, name, -1)`).
pub fn perf_pmu_register(pmu: Arc<dyn Pmu>) -> u32 {
    let r = registry();
    let mut v = r.pmus.write().unwrap_or_else(|e| e.into_inner());
    let type_ = v
        .iter()
        .map(|e| e.type_)
        .filter(|&t| t >= PMU_TYPE_DYNAMIC_BASE)
        .max()
        .map_or(PMU_TYPE_DYNAMIC_BASE, |t| t + 1);
    v.push(Entry { type_, pmu });
    type_
}

/// Registers `pmu` under the fixed type `type_` (`perf_pmu_register(pmu,
/// name, type)` with `type >= 0`: `PERF_TYPE_SOFTWARE` for the software
/// PMU, a number the driver publishes for the others).
///
/// EEXIST when `type_` or the PMU's name is already registered.
pub fn perf_pmu_register_type(pmu: Arc<dyn Pmu>, type_: u32) -> Result<u32> {
    let r = registry();
    let mut v = r.pmus.write().unwrap_or_else(|e| e.into_inner());
    if v.iter().any(|e| e.type_ == type_) {
        return Err(Error::new(
            perfaux_abi::errno::EEXIST,
            "perf_pmu_register: the type is taken",
        ));
    }
    if v.iter().any(|e| e.pmu.name() == pmu.name()) {
        return Err(Error::new(
            perfaux_abi::errno::EEXIST,
            "perf_pmu_register: the name is taken",
        ));
    }
    v.push(Entry { type_, pmu });
    Ok(type_)
}

/// The PMU registered under `type_`.
pub fn pmu_by_type(type_: u32) -> Option<Arc<dyn Pmu>> {
    let v = registry().pmus.read().unwrap_or_else(|e| e.into_inner());
    v.iter().find(|e| e.type_ == type_).map(|e| e.pmu.clone())
}

/// The capabilities of the PMU registered under `type_` (what
/// `/sys/bus/event_source/devices/<name>/caps` tells of a kernel PMU, and
/// whether it has `setup_aux`: [`PmuCaps::AUX`]).
pub fn pmu_capabilities(type_: u32) -> Option<PmuCaps> {
    pmu_by_type(type_).map(|p| p.capabilities())
}

/// The type of the PMU named `name` (what `/sys/bus/event_source/devices/
/// <name>/type` holds); "software" is `PERF_TYPE_SOFTWARE`.
pub fn pmu_type_by_name(name: &str) -> Option<u32> {
    let v = registry().pmus.read().unwrap_or_else(|e| e.into_inner());
    v.iter().find(|e| e.pmu.name() == name).map(|e| e.type_)
}

/// Every registered PMU as (type, name), in type order.
pub fn pmus() -> Vec<(u32, &'static str)> {
    let v = registry().pmus.read().unwrap_or_else(|e| e.into_inner());
    let mut out: Vec<_> = v.iter().map(|e| (e.type_, e.pmu.name())).collect();
    out.sort_unstable();
    out
}

/// All PMUs with their types, for the "try every PMU" path of
/// `perf_init_event`.
pub(crate) fn all() -> Vec<(u32, Arc<dyn Pmu>)> {
    let v = registry().pmus.read().unwrap_or_else(|e| e.into_inner());
    v.iter().map(|e| (e.type_, e.pmu.clone())).collect()
}
