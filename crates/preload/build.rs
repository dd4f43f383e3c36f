//! Builds the preload runtime (crates/preload/runtime, a cdylib) so that this crate carries it
//! (`include_bytes!` in src/runtime.rs) and a tool built on it needs no install step: `cargo
//! install --path crates/cli` gives a perfaux that traces programs. Cargo cannot depend on a
//! cdylib's artifact on stable, so this runs cargo on the runtime package, in a target
//! directory of its own under OUT_DIR (no lock shared with the outer build).
//!
//! Nor does cargo know that this build reads the runtime's sources: the build runs again when
//! a file of any workspace crate the runtime is built from changes. That list comes from the
//! runtime's own dependency graph (`cargo metadata`), not from a list kept by hand, which
//! missed a crate before; it is written to OUT_DIR as `watched.rs` (`runtime::WATCHED`), where
//! a test compares it with the manifests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The runtime's package.
const RUNTIME_PACKAGE: &str = "perfaux-preload-runtime";

/// The runtime's own flags. On x86-64, its thread-locals are reached through TLS descriptors
/// (`-enable-tlsdesc`): a shared object's default, the general-dynamic model, calls
/// `__tls_get_addr` at every access (four a traced call, a sixth of the hook path), while a
/// descriptor of a library loaded at startup (LD_PRELOAD) resolves to a static-TLS offset, one
/// load through `_dl_tlsdesc_return`. (Stable rustc has no `-Z tls-model=initial-exec`.) An
/// LLVM that does not know the option ([`llvm_takes`]) gets the build without it.
const TLSDESC: &str = "-Cllvm-args=-enable-tlsdesc";

/// Code alignment for the hooks (x86-64): functions at 64 bytes and jump targets at 32, so
/// that the few hundred instructions a traced call runs sit in whole fetch and uop-cache
/// lines. The hot path's speed moved by a tenth with unrelated code changes before (its
/// layout); aligned, the periodic timing mode ran 6 % faster on the Intel host
/// (BENCHMARKS-JOURNAL.md, 2026-11-25). The library grows by about a sixth.
const ALIGN: [&str; 2] = [
    "-Cllvm-args=-align-all-functions=6",
    "-Cllvm-args=-align-all-nofallthru-blocks=5",
];

/// Whether rustc's LLVM takes `flag`: an empty library compiled to an object with it (LLVM
/// parses its options when it generates code, and fails on one it does not know).
fn llvm_takes(flag: &str, out: &std::path::Path) -> bool {
    use std::io::Write;
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let child = Command::new(rustc)
        .args([
            "--crate-name",
            "llvm_option_probe",
            "--crate-type",
            "lib",
            "--emit",
            "obj",
            "-o",
        ])
        .arg(out.join("llvm_option_probe.o"))
        .arg(flag)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    let wrote = child
        .stdin
        .take()
        .is_some_and(|mut i| i.write_all(b"pub fn f() {}\n").is_ok());
    child.wait().is_ok_and(|s| s.success()) && wrote
}

/// The directories (relative to the workspace root, sorted) of the workspace packages the
/// runtime is built from: the runtime's package and every package reached from it over
/// normal and build dependencies given by path (dev-dependencies do not go into it).
/// `--no-deps` lists the workspace's packages with the paths of their path dependencies
/// without resolving (or downloading) the registry's.
fn runtime_crates(cargo: &std::ffi::OsStr, root: &Path) -> Vec<String> {
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata's output is JSON");
    let workspace_root = PathBuf::from(meta["workspace_root"].as_str().expect("workspace_root"));
    let packages = meta["packages"].as_array().expect("packages");
    let dir_of = |p: &serde_json::Value| -> PathBuf {
        let manifest = Path::new(p["manifest_path"].as_str().expect("manifest_path"));
        manifest
            .parent()
            .expect("a manifest's directory")
            .to_path_buf()
    };
    let start = packages
        .iter()
        .find(|p| p["name"] == RUNTIME_PACKAGE)
        .map(dir_of)
        .unwrap_or_else(|| panic!("no package {RUNTIME_PACKAGE} in the workspace"));
    let mut seen = vec![start.clone()];
    let mut todo = vec![start];
    while let Some(dir) = todo.pop() {
        let package = packages
            .iter()
            .find(|p| dir_of(p) == dir)
            .unwrap_or_else(|| {
                panic!(
                    "{}: a path dependency of the runtime that is not a workspace package",
                    dir.display()
                )
            });
        for d in package["dependencies"].as_array().expect("dependencies") {
            let Some(path) = d["path"].as_str() else {
                continue;
            };
            if d["kind"] == "dev" {
                continue;
            }
            let path = PathBuf::from(path);
            if !seen.contains(&path) {
                seen.push(path.clone());
                todo.push(path);
            }
        }
    }
    let mut rel: Vec<String> = seen
        .iter()
        .map(|d| {
            d.strip_prefix(&workspace_root)
                .unwrap_or_else(|_| panic!("{}: outside the workspace", d.display()))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    rel.sort();
    rel
}

/// Says to cargo what the runtime's build reads, and writes the list of crates for
/// `runtime::WATCHED`.
fn watch(cargo: &std::ffi::OsStr, root: &Path, out: &Path) {
    let crates = runtime_crates(cargo, root);
    // The workspace's manifest carries the shared dependency versions and profiles.
    for f in ["Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    for c in &crates {
        let dir = root.join(c);
        for f in ["src", "Cargo.toml", "build.rs"] {
            // A path that does not exist would make cargo run this script at every build.
            if dir.join(f).exists() {
                println!("cargo:rerun-if-changed={}", dir.join(f).display());
            }
        }
    }
    let list: Vec<String> = crates.iter().map(|c| format!("{c:?}")).collect();
    std::fs::write(out.join("watched.rs"), format!("&[{}]\n", list.join(", ")))
        .expect("writing watched.rs");
}

fn main() {
    let manifest =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    watch(&cargo, &root, &out);
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let target_dir = out.join("preload-target");
    let x86_64 = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "x86_64");
    let tlsdesc = x86_64 && llvm_takes(TLSDESC, &out);
    if x86_64 && !tlsdesc {
        println!(
            "cargo:warning=the preload runtime is built without TLS descriptors ({TLSDESC} not \
             available): its hooks call __tls_get_addr"
        );
    }
    let mut flags: Vec<&str> = Vec::new();
    if tlsdesc {
        flags.push(TLSDESC);
    }
    if x86_64 && ALIGN.iter().all(|f| llvm_takes(f, &out)) {
        flags.extend(ALIGN);
    }
    let mut cmd = Command::new(cargo);
    // No standard input of the outer build's: cargo probes rustc with `rustc -`, which reads
    // it as a source file (and caches a failed probe in the target directory).
    cmd.stdin(std::process::Stdio::null());
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["-p", "perfaux-preload-runtime", "--locked", "--target-dir"])
        .arg(&target_dir)
        // The outer build's settings for this package are not the runtime's (the user's
        // RUSTFLAGS and build.rustflags are, and the runtime's own are added to them).
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        // Carried in every perfaux binary: without its debug info (symbols stay).
        .env("CARGO_PROFILE_DEV_STRIP", "debuginfo")
        .env("CARGO_PROFILE_RELEASE_STRIP", "debuginfo");
    if !flags.is_empty() {
        match std::env::var("RUSTFLAGS") {
            // RUSTFLAGS replaces the configuration's rustflags: the options go with it.
            Ok(f) => {
                cmd.env("RUSTFLAGS", format!("{f} {}", flags.join(" ")));
            }
            // A --config array is appended to the configuration files' build.rustflags.
            Err(_) => {
                let quoted: Vec<String> = flags.iter().map(|f| format!("\"{f}\"")).collect();
                cmd.arg("--config")
                    .arg(format!("build.rustflags=[{}]", quoted.join(",")));
            }
        }
    }
    if release {
        cmd.arg("--release");
    }
    let built_ok = cmd
        .status()
        .expect("running cargo for the preload runtime")
        .success();
    assert!(built_ok, "building perfaux-preload-runtime failed");
    let built = target_dir
        .join(if release { "release" } else { "debug" })
        .join("libperfaux_runtime.so");
    std::fs::copy(&built, out.join("libperfaux_runtime.so")).expect("copying the preload runtime");
    // The copy's FNV-1a hash names the file a recording keeps it in (runtime.rs), computed here
    // once instead of at every recording's start.
    let bytes = std::fs::read(out.join("libperfaux_runtime.so")).expect("reading the runtime");
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    std::fs::write(out.join("runtime_hash.rs"), format!("{hash:#018x}\n"))
        .expect("writing runtime_hash.rs");
}
