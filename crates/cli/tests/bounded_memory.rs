//! The readers' memory is bounded whatever the file's size: on a
//! recording whose trace section is several times [`BOUND`], the library
//! functions the `perfaux` subcommands run (`script --call-trace`, `report`,
//! `export -F chrome`, `export -F firefox`, `report -D`) never have more
//! than [`BOUND`] bytes allocated at once, counted by a counting global
//! allocator. Before the section was read in place, each held all of it
//! (and script a copy more); the Firefox export held its whole profile.
//! Plain `perfaux script` on a file with no FINISHED_ROUND (perf's rule
//! alone would queue every line to the end) holds at most its queue's budget.

mod common;

use std::io::{self, Write};
use std::path::Path;

use common::{record, tempdir};
use perfaux::export::{ExportArgs, Format, export};
use perfaux::progress::Progress;
use perfaux::report::{ViewArgs, report};
use perfaux::script::script;
use perfaux::view_input::with_recording;
use perfaux_perfdata::trace_section::PERFAUX_FEATURE_BIT;
use perfaux_perfdata::{Feature, PerfDataReader};
use perfaux_testutil::CountingAlloc;
use perfaux_view::firefox::FirefoxProfile;
use perfaux_view::{Filter, walk};

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

/// The most bytes a reader may have allocated at once.
const BOUND: usize = 16 << 20;

/// An output that counts what it is given and keeps none of it.
#[derive(Default)]
struct Counted {
    bytes: u64,
    lines: u64,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes += buf.len() as u64;
        self.lines += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Runs `f` and returns the most bytes it had allocated at once (on this
/// thread: the readers run on the caller's).
/// One large recording at a time: two at once on a 2-core machine lose records to each other.
fn recording() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn peak(f: impl FnOnce()) -> usize {
    let level = CountingAlloc::reset_peak();
    f();
    CountingAlloc::peak_since(level)
}

fn trace_section_size(f: &Path) -> u64 {
    let reader = PerfDataReader::open(f).unwrap();
    let sec = reader
        .metadata()
        .features
        .location(Feature(PERFAUX_FEATURE_BIT))
        .expect("the trace section is located, not read");
    assert!(
        reader
            .metadata()
            .features
            .raw(Feature(PERFAUX_FEATURE_BIT))
            .is_none(),
        "the reader holds no copy of the trace section"
    );
    sec.size
}

#[test]
fn readers_hold_a_bounded_part_of_a_trace_section_larger_than_the_bound() {
    let dir = tempdir();
    // About 450 bytes of trace per request: a section of ~54 MB, with room for what a loaded
    // machine loses (16 MiB areas lose little: the section stays above twice the bound).
    let (f, _) = {
        let _one = recording();
        record(
            dir.path(),
            "big.data",
            &["--requests", "120000", "-m", ",16M"],
        )
    };
    let size = trace_section_size(&f);
    assert!(
        size > 2 * BOUND as u64,
        "the trace section ({size} bytes) is larger than twice the bound"
    );

    let mut out = Counted::default();
    let used = peak(|| script(&f, true, &mut out, &mut Progress::quiet()).unwrap());
    // Every call is a line: the whole trace was decoded.
    assert!(out.lines > 1_000_000, "{} call-trace lines", out.lines);
    assert!(
        used < BOUND,
        "script --call-trace: {used} bytes at once on a {size}-byte trace section"
    );
    eprintln!("script --call-trace: {used} bytes at most at once ({size}-byte trace section)");

    let mut out = Counted::default();
    let used = peak(|| report(&f, &ViewArgs::default(), &mut out).unwrap());
    assert!(out.lines > 5, "{} report lines", out.lines);
    assert!(
        used < BOUND,
        "report: {used} bytes at once on a {size}-byte trace section"
    );
    eprintln!("report: {used} bytes at most at once ({size}-byte trace section)");

    let json = dir.path().join("trace.json");
    let args = ExportArgs {
        input: f.clone(),
        format: Format::Chrome,
        output: Some(json.clone()),
        tid: Vec::new(),
        comm: Vec::new(),
        symfs: None,
    };
    let used = peak(|| {
        export(&args, &mut perfaux::progress::Progress::quiet()).unwrap();
    });
    let written = std::fs::metadata(&json).unwrap().len();
    assert!(
        written > size,
        "the export ({written} bytes) has every call"
    );
    assert!(
        used < BOUND,
        "export -F chrome: {used} bytes at once on a {size}-byte trace section"
    );
    eprintln!("export -F chrome: {used} bytes at most at once ({size}-byte trace section)");

    // The Firefox Profiler's JSON, as `export -F firefox` makes it (into
    // a counting output: the profile is about 90 bytes a call, more than a
    // GB here). Its growing columns are spooled to a temporary file, which
    // is not memory of the process.
    let mut out = Counted::default();
    let used = peak(|| {
        let mut p = FirefoxProfile::new("big.data");
        with_recording(&f, Filter::default(), None, |rec| {
            walk(rec, &mut p).map_err(|e| perfaux::error::CliError::file(&f, e))
        })
        .unwrap();
        p.write(&mut out).unwrap();
    });
    assert!(
        out.bytes > 2 * size,
        "the profile ({} bytes) has every call",
        out.bytes
    );
    assert!(
        used < BOUND,
        "export -F firefox: {used} bytes at once on a {size}-byte trace section"
    );
    eprintln!("export -F firefox: {used} bytes at most at once ({size}-byte trace section)");

    let mut out = Counted::default();
    let used = peak(|| {
        perfaux::dump::dump(&f, "big.data", &mut out, &mut Progress::quiet()).unwrap();
    });
    // The dump shows every trace byte in hex (16 a line).
    assert!(out.lines > size / 16, "{} dump lines", out.lines);
    assert!(
        used < BOUND,
        "report -D: {used} bytes at once on a {size}-byte trace section"
    );
    eprintln!("report -D: {used} bytes at most at once ({size}-byte trace section)");
}

/// The most bytes plain `perfaux script` may have allocated at once: its
/// time-ordering queue's budget (32 MiB of lines) and the reader's share.
const SCRIPT_BOUND: usize = 48 << 20;

#[test]
fn script_with_no_finished_round_holds_a_bounded_queue_and_prints_every_line() {
    use perfaux_abi::consts::{PERF_RECORD_FINISHED_INIT, PERF_RECORD_FINISHED_ROUND};

    let dir = tempdir();
    // ~500 bytes of script output a request: ~65 MB, above the bound. A loaded machine loses
    // records (CI printed 50 MB for the same run): a recording whose output is not above the
    // bound is made again twice as long, so the test always has what it needs.
    let mut requests = 130_000;
    let (f, intact) = loop {
        let (f, _) = {
            let _one = recording();
            record(
                dir.path(),
                "rounds.data",
                &["--requests", &requests.to_string(), "-m", ",16M"],
            )
        };
        let mut intact = Vec::new();
        script(&f, false, &mut intact, &mut Progress::quiet()).unwrap();
        if intact.len() > SCRIPT_BOUND || requests > 1_000_000 {
            break (f, intact);
        }
        requests *= 2;
    };

    // The same file with every FINISHED_ROUND made a FINISHED_INIT (same
    // size, no body): nothing tells the reader a round is over, so
    // perf's rule alone would hold every line to the end.
    let mut rounds = Vec::new();
    {
        let mut reader = PerfDataReader::open(&f).unwrap();
        while let Some(rec) = reader.next_record().unwrap() {
            if rec.header.type_ == PERF_RECORD_FINISHED_ROUND {
                rounds.push(rec.location.file_offset as usize);
            }
        }
    }
    // Rounds to take away (the recorder writes one at most every 100 ms).
    assert!(rounds.len() >= 2, "{} rounds", rounds.len());
    let mut bytes = std::fs::read(&f).unwrap();
    for at in &rounds {
        bytes[*at..*at + 4].copy_from_slice(&PERF_RECORD_FINISHED_INIT.to_ne_bytes());
    }
    let crafted = dir.path().join("no-rounds.data");
    std::fs::write(&crafted, &bytes).unwrap();
    drop(bytes);
    assert!(
        intact.len() > SCRIPT_BOUND,
        "the output ({} bytes) is larger than the bound (the queue held all of it before)",
        intact.len()
    );

    let mut out = Counted::default();
    let used = peak(|| script(&crafted, false, &mut out, &mut Progress::quiet()).unwrap());
    assert!(
        used < SCRIPT_BOUND,
        "script with no FINISHED_ROUND: {used} bytes at once for {} bytes of lines",
        intact.len()
    );
    assert_eq!(out.bytes, intact.len() as u64, "every line is printed");
    eprintln!(
        "script, no FINISHED_ROUND: {used} bytes at most at once ({} bytes of lines)",
        intact.len()
    );
}
