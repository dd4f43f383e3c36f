//! `perfaux record` (the README's main job) run by an ordinary user: perfaux-core charges the
//! rings as the kernel charges perf buffers (perf_event_mlock_kb a CPU, then RLIMIT_MEMLOCK),
//! and the default 4 MiB rings of the workload's threads are more than such a user may have;
//! record sizes them down, says so, and records. As root the user is uid 65534, through
//! `setpriv`; not root, every other test already runs as an ordinary user.

mod common;

use common::{path_str, perfaux, tempdir};

#[test]
fn an_ordinary_user_records_the_workload_with_rings_that_fit_their_limits() {
    let d = tempdir();
    let Some(mut cmd) = common::perfaux_as_ordinary_user(d.path()) else {
        return;
    };
    let data = d.path().join("user.data");
    let out = cmd
        .args(["record", "--requests", "50", "-o", path_str(&data)])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // The trace of every worker is in the file.
    let calls = perfaux(&["script", "--call-trace", "-i", path_str(&data)]);
    assert!(calls.ok(), "{}", calls.stderr);
    let workers: std::collections::BTreeSet<&str> = calls
        .stdout
        .lines()
        .filter(|l| l.contains("serve_request"))
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(workers.len(), 3, "{stderr}\n{}", calls.stdout);
    // Where the limits bound, record said what it chose.
    let limits = perfaux_core::MlockLimits::current(perfaux_core::page_size() as u64);
    let pages = 3 * (1 + 2 * ((4 << 20) / perfaux_core::page_size() as u64));
    if limits.user_lock_limit.saturating_add(limits.lock_limit) < pages {
        assert!(stderr.contains("the rings are sized"), "{stderr}");
    }
}
