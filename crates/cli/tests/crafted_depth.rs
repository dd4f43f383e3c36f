//! A crafted trace of nothing but ENTERs (two bytes an open call) does not
//! grow the readers' memory with the file (issue 11): `script --call-trace`
//! and `report` keep a bounded frame stack, the call trace says where the
//! ids of outer calls were forgotten.

mod common;

use std::io::{self, Write};

use common::{record, tempdir};
use perfaux::progress::Progress;
use perfaux::report::{ViewArgs, report};
use perfaux::script::script;
use perfaux_swtrace::decode::MAX_FRAMES;
use perfaux_swtrace::format::{SYNC_MAGIC, parse_sync};
use perfaux_testutil::CountingAlloc;

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

/// An output that keeps only what the test asks of it.
#[derive(Default)]
struct Seen {
    lines: u64,
    notes: Vec<String>,
}

impl Write for Seen {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        for l in buf.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            self.lines += 1;
            let l = String::from_utf8_lossy(l);
            if l.contains("lost the ids of") && self.notes.len() < 8 {
                self.notes.push(l.into_owned());
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn peak(f: impl FnOnce()) -> usize {
    let level = CountingAlloc::reset_peak();
    f();
    CountingAlloc::peak_since(level)
}

#[test]
fn a_trace_of_only_enters_is_read_in_bounded_memory_and_says_what_it_forgot() {
    let dir = tempdir();
    let (f, _) = record(dir.path(), "deep.data", &["--requests", "20000"]);
    // The largest chunk: after its first SYNC, every byte becomes ENTERs of
    // probe 1, one tick apart.
    let reader = perfaux_perfdata::PerfDataReader::open(&f).unwrap();
    let section = reader.trace_section().expect("trace section").unwrap();
    let big = section
        .chunks()
        .map(Result::unwrap)
        .max_by_key(|c| c.size)
        .unwrap();
    drop(section);
    drop(reader);
    let mut bytes = std::fs::read(&f).unwrap();
    let data = &mut bytes[big.data_offset as usize..(big.data_offset + big.size) as usize];
    let at = (0..data.len())
        .find(|&i| data[i..].starts_with(&SYNC_MAGIC) && parse_sync(&data[i..]).is_ok())
        .expect("a SYNC in the chunk");
    let from = at + parse_sync(&data[at..]).unwrap().1;
    let calls = (data.len() - from) / 2;
    for c in data[from..from + 2 * calls].chunks_exact_mut(2) {
        c.copy_from_slice(&[0x81, 0x01]);
    }
    assert!(
        calls > 64 * MAX_FRAMES,
        "{calls} ENTERs, far more than the decoder keeps"
    );
    let crafted = dir.path().join("crafted.data");
    std::fs::write(&crafted, &bytes).unwrap();
    drop(bytes);
    // Without the cap the frame stack alone is 8 bytes an open call: the
    // crafted file may cost no more than a quarter of that over the intact.
    let extra = calls * 8 / 4;
    let base_script = peak(|| {
        script(&f, true, &mut Seen::default(), &mut Progress::quiet()).unwrap();
    });
    let base_report = peak(|| {
        report(&f, &ViewArgs::default(), &mut Seen::default()).unwrap();
    });

    let mut out = Seen::default();
    let used = peak(|| {
        script(&crafted, true, &mut out, &mut Progress::quiet()).unwrap();
    });
    assert!(out.lines as usize > calls, "{} lines", out.lines);
    assert!(
        used < base_script + extra,
        "script --call-trace: {used} bytes at once for {calls} open calls, {base_script} intact"
    );
    assert!(
        !out.notes.is_empty(),
        "the call trace says ids were forgotten"
    );
    assert!(
        out.notes[0].contains(&format!("more than {MAX_FRAMES} open")),
        "{}",
        out.notes[0]
    );
    let mut out = Seen::default();
    let used = peak(|| report(&crafted, &ViewArgs::default(), &mut out).unwrap());
    assert!(out.lines > 5, "{} report lines", out.lines);
    assert!(
        used < base_report + extra,
        "report: {used} bytes at once for {calls} open calls, {base_report} intact"
    );
}
