//! A crafted trace of nothing but ENTERs (two bytes an open call) does not
//! grow the readers' memory with the file: `script --call-trace`
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
    let chunk = big.data_offset as usize..(big.data_offset + big.size) as usize;
    let data = &bytes[chunk.clone()];
    let at = (0..data.len())
        .find(|&i| data[i..].starts_with(&SYNC_MAGIC) && parse_sync(&data[i..]).is_ok())
        .expect("a SYNC in the chunk");
    let from = chunk.start + at + parse_sync(&data[at..]).unwrap().1;
    let calls = (chunk.end - from) / 2;
    // A second file with only the first half of them: the view's state for
    // either is what the cap on open calls keeps, not what the file has.
    let half = calls / 2;
    assert!(
        half > 32 * MAX_FRAMES,
        "{calls} ENTERs, far more than the decoder keeps"
    );
    let halved = dir.path().join("half.data");
    let crafted = dir.path().join("crafted.data");
    for (n, path) in [(half, &halved), (calls, &crafted)] {
        for c in bytes[from..from + 2 * n].chunks_exact_mut(2) {
            c.copy_from_slice(&[0x81, 0x01]);
        }
        std::fs::write(path, &bytes).unwrap();
    }
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
    // The report keeps a call-tree node per call path besides the frames:
    // with the cap, at most MAX_FRAMES of them for the crafted path, however
    // many ENTERs the file has. Twice the open calls may not cost more.
    let mut out = Seen::default();
    let used = peak(|| report(&crafted, &ViewArgs::default(), &mut out).unwrap());
    assert!(out.lines > 5, "{} report lines", out.lines);
    let used_half = peak(|| {
        report(&halved, &ViewArgs::default(), &mut Seen::default()).unwrap();
    });
    assert!(
        used <= used_half + 64 * 1024,
        "report: {used} bytes at once for {calls} open calls, {used_half} for {half}, \
         {base_report} intact"
    );
}
