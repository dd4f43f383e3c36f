//! examples/axum_service.rs does what its documentation says: of its requests, the one slow
//! report takes exactly one snapshot, which holds the request's spans and a uevent saying it
//! was slow, and perf 6.1 reads the file.

mod common;

// The test runs the example's `run`; its `main` stays unused.
#[allow(dead_code)]
#[path = "../examples/axum_service.rs"]
mod service;

use perfaux_tracing::{SNAPSHOT, SPAN_FIELDS};

/// The target of the example's spans here: the test's own module path.
const TARGET: &str = concat!(module_path!(), "::service");

const REQUESTS: usize = 24;

fn span(name: &str) -> String {
    format!("{TARGET}::{name}")
}

#[test]
fn the_slow_request_takes_one_snapshot_that_holds_it_and_perf_reads_the_file() {
    let _turn = common::ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("service.data");
    let ran = service::run(
        &file,
        service::Mode::Itself(REQUESTS),
        &service::subscriber(),
    )
    .unwrap();
    assert_eq!(ran.statuses, [200; REQUESTS]);
    assert_eq!((ran.snapshots, ran.suppressed), (1, 0), "{ran:?}");
    assert_eq!(ran.lost, 0, "{ran:?}");
    assert_eq!(common::snapshots(&file), 1);

    let seen = common::read(&file);
    let said = seen.payloads(SNAPSHOT);
    assert_eq!(said.len(), 1, "{said:?}");
    let busy_us: u128 = said[0]
        .strip_prefix(&format!("reason=slow span={} busy_us=", span("render")))
        .unwrap_or_else(|| panic!("{}", said[0]))
        .parse()
        .unwrap();
    assert!(busy_us >= service::SLOW.as_micros(), "{busy_us} us");

    // The slow request: its handler's span and the render that made it slow, with their
    // fields, and the render's call returned (the snapshot is taken as it returns).
    let rows = format!("rows={}", service::SLOW_ROWS);
    let fields = seen.payloads(SPAN_FIELDS);
    assert!(
        fields.contains(&format!("span=report {rows}").as_str()),
        "{fields:?}"
    );
    assert!(
        fields.contains(&format!("span=render {rows}").as_str()),
        "{fields:?}"
    );
    assert!(
        seen.exits.get(&span("render")) >= Some(&1),
        "{:?}",
        seen.exits
    );
    // The requests before it, with their nested spans and events.
    for name in ["item", "fetch", "decode"] {
        assert!(
            seen.enters.contains_key(&span(name)),
            "{name}: {:?}",
            seen.enters
        );
    }
    assert!(
        seen.payloads(perfaux_tracing::EVENT)
            .iter()
            .any(|e| e.contains("message=\"decoded\"")),
        "the decode step's event"
    );

    perfaux_testutil::require_oracle!("perf");
    common::perf_script(&file, dir.path());
}
