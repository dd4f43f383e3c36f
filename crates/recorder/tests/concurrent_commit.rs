//! Two recordings into one output path that end together: both survive, the later under the
//! name and the earlier as `<output>.old`, as perf's rename keeps them.

use std::io::Write;
use std::sync::{Arc, Barrier};

use perfaux_recorder::output::FileOutput;

#[test]
fn two_commits_into_one_path_keep_both_recordings() {
    for round in 0..300 {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("same.data");
        std::fs::write(&out, b"previous").unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = [b"first".as_slice(), b"second".as_slice()]
            .into_iter()
            .map(|body| {
                let (o, mut f) = FileOutput::create(&out).unwrap();
                f.write_all(body).unwrap();
                let barrier = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    barrier.wait();
                    o.commit(f).map_err(|e| e.chain())
                })
            })
            .collect();
        for h in handles {
            if let Err(e) = h.join().unwrap() {
                panic!("round {round}: {e}");
            }
        }
        let mut kept = [
            std::fs::read(&out).unwrap(),
            std::fs::read(d.path().join("same.data.old")).unwrap(),
        ];
        kept.sort();
        assert_eq!(
            kept,
            [b"first".to_vec(), b"second".to_vec()],
            "round {round}"
        );
    }
}
