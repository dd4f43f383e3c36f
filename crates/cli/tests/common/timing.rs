//! Shared by the clock-agreement tests (`time_agreement`, `sample_time_agreement`): the load
//! they record under, and the times `perfaux script` prints.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use super::PERFAUX;

/// Busy loops spinning on the machine's cores until dropped (4 made the trace clock go wrong).
pub struct BusyLoops {
    busy: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl BusyLoops {
    pub fn start(n: usize) -> BusyLoops {
        let busy = Arc::new(AtomicBool::new(true));
        let threads = (0..n)
            .map(|_| {
                let b = busy.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while b.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        BusyLoops { busy, threads }
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        self.busy.store(false, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// "7549.242413:" or "7549.242418397:" (a leading `~` marks an interpolated time) in ns.
pub fn time_ns(field: &str) -> Option<u64> {
    let t = field.trim_end_matches(':').trim_start_matches('~');
    let (s, frac) = t.split_once('.')?;
    let digits = frac.len() as u32;
    if digits > 9 {
        return None;
    }
    let frac: u64 = frac.parse().ok()?;
    Some(s.parse::<u64>().ok()? * 1_000_000_000 + frac * 10u64.pow(9 - digits))
}

/// What `perfaux ARGS -i DATA` prints; panics with its stderr when it fails.
pub fn perfaux_on(args: &[&str], data: &Path) -> String {
    let out = Command::new(PERFAUX)
        .args(args)
        .arg("-i")
        .arg(data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Per thread, the entry times of the functions `keep` accepts, in trace order, with their
/// names, from a `script --call-trace` text.
pub fn call_entries(calls: &str, keep: impl Fn(&str) -> bool) -> HashMap<u32, Vec<(&str, u64)>> {
    let mut m: HashMap<u32, Vec<(&str, u64)>> = HashMap::new();
    for l in calls.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let Some(&name) = f.last() else { continue };
        if f.len() < 5 || !keep(name) {
            continue;
        }
        let tid: u32 = f[1].parse().unwrap();
        let t = time_ns(f[3]).unwrap_or_else(|| panic!("time in {l:?}"));
        m.entry(tid).or_default().push((name, t));
    }
    m
}
