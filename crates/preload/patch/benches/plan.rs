//! What patching costs, less the writes to memory: planning every function of a large binary
//! (`-P .`: its symbol tables read, each name matched, each function's first instructions
//! decoded, the whole function scanned for branches back into them), as the recorder does
//! before the program starts; and what the runtime does at the program's start with that plan
//! (each function's first instructions decoded again at their loaded address, each stub
//! encoded). The binary is the toolchain's own cargo (about 40,000 functions), found
//! through `rustc --print sysroot`; without it nothing is measured (said on stderr).

use std::path::PathBuf;
use std::process::Command;

use criterion::{Criterion, criterion_group, criterion_main};
use perfaux_patch::{Cells, FileCode, MatchKind, PatchSpec, encode_stub, plan_file, plan_window};

fn cargo_binary() -> Option<PathBuf> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let root = String::from_utf8(out.stdout).ok()?;
    let p = PathBuf::from(root.trim()).join("bin/cargo");
    p.is_file().then_some(p)
}

fn bench(c: &mut Criterion) {
    let Some(path) = cargo_binary() else {
        eprintln!("skipped: plan (no toolchain cargo binary)");
        return;
    };
    let data = std::fs::read(&path).unwrap();
    let name = path.to_string_lossy().into_owned();
    let every = PatchSpec::parse(&[".".into()], &[], MatchKind::Regex).unwrap();
    let named = PatchSpec::parse(&["^cargo::".into()], &[], MatchKind::Regex).unwrap();
    let plan = plan_file(&data, &every, &name, true).unwrap();
    eprintln!(
        "plan: {}: {} functions, {} patchable",
        path.display(),
        plan.plans.len() + plan.refused.len(),
        plan.plans.len()
    );
    let mut g = c.benchmark_group("patch_at_load");
    g.sample_size(10);
    g.bench_function("plan_every_function", |b| {
        b.iter(|| plan_file(&data, &every, &name, true).unwrap())
    });
    g.bench_function("plan_by_regex_on_demangled_names", |b| {
        b.iter(|| plan_file(&data, &named, &name, true).unwrap())
    });
    let cells = Cells {
        function: 0x7000_0000,
        common_entry: 0x7000_0008,
    };
    // What the runtime does at the program's start when the recorder hands it this plan: each
    // named function's first instructions decoded and its stub encoded (the writes left out).
    let code = FileCode::new(&data).unwrap();
    let given: Vec<(u64, u64)> = plan
        .plans
        .iter()
        .map(|p| p.entry)
        .zip(plan.sizes.clone())
        .collect();
    g.bench_function("runtime_windows_and_stubs_from_the_recorders_plan", |b| {
        b.iter(|| {
            let mut at = 0x7000_1000u64;
            for &(addr, size) in &given {
                let p = plan_window(addr, code.code(addr, size).unwrap()).unwrap();
                at += encode_stub(&p, at, cells).unwrap().len() as u64;
            }
            at
        })
    });
    g.bench_function("encode_every_stub", |b| {
        b.iter(|| {
            let mut at = 0x7000_1000u64;
            for p in &plan.plans {
                at += encode_stub(p, at, cells).unwrap().len() as u64;
            }
            at
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
