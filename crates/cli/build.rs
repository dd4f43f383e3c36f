//! Builds the preload runtime (crates/preload/runtime, a cdylib) so that `perfaux record --
//! ./prog` carries it in the binary (`include_bytes!` in record/program.rs) and needs no install
//! step: `cargo install --path crates/cli` gives a perfaux that traces programs. Cargo cannot
//! depend on a cdylib's artifact on stable, so this runs cargo on the runtime package, in a
//! target directory of its own under OUT_DIR (no lock shared with the outer build).

use std::path::PathBuf;
use std::process::Command;

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
/// (crates/preload/BENCHMARKS.md). The library grows by about a sixth.
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

fn main() {
    let manifest =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = manifest.join("../..");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    for d in [
        "Cargo.lock",
        "crates/preload",
        "crates/core/src",
        "crates/swtrace/src",
        "crates/ring/src",
        "crates/abi/src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(d).display());
    }
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
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
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
}
