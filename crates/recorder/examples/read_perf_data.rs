//! Reading a perf.data with perfaux-perfdata: its events, a count of its
//! records by type, and perfaux's trace section if it has one.
//!
//! cargo run -p perfaux-recorder --example read_perf_data -- perf.data

use std::collections::BTreeMap;

use perfaux_perfdata::PerfDataReader;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "perf.data".into());
    let mut reader = PerfDataReader::open(&path)?;
    for ev in &reader.metadata().attrs {
        println!(
            "event {:?}: type {}, {} ids",
            ev.name,
            ev.attr.type_,
            ev.ids.len()
        );
    }
    let mut by_type = BTreeMap::new();
    while let Some(rec) = reader.next_record()? {
        *by_type.entry(rec.header.type_).or_insert(0u64) += 1;
    }
    for (t, n) in &by_type {
        println!("record type {t}: {n}");
    }
    // The trace section is read in place, a chunk header at a time.
    if let Some(section) = reader.trace_section() {
        for c in section?.chunks() {
            let c = c?;
            println!(
                "{} chunk: thread {}, {} bytes, flags {:#x}",
                c.header.kind.name(),
                c.header.tid,
                c.size,
                c.header.flags
            );
        }
    }
    Ok(())
}
