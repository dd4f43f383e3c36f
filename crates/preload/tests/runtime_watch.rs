//! The crates whose change builds the carried runtime again (`runtime::WATCHED`, from `cargo
//! metadata` in build.rs) are the runtime's path dependencies as its manifests give them:
//! read here from the Cargo.toml files themselves, not through cargo.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The workspace root (this crate is crates/preload).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// The value of `key = "..."` inside a line's text (a `{ ... }` table or a line of its own).
fn string_of(text: &str, key: &str) -> Option<String> {
    let mut rest = text;
    while let Some(i) = rest.find(key) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + key.len()..].trim_start();
        if before.is_none_or(|c| !c.is_alphanumeric() && c != '_' && c != '-')
            && let Some(v) = after.strip_prefix('=')
        {
            let v = v.trim_start().strip_prefix('"')?;
            return Some(v[..v.find('"')?].to_string());
        }
        rest = &rest[i + key.len()..];
    }
    None
}

/// What a dependency entry says: its own path, or that it takes the workspace's.
enum Source {
    Path(String),
    Workspace,
    Other,
}

fn source_of(text: &str) -> Source {
    if let Some(p) = string_of(text, "path") {
        Source::Path(p)
    } else if text.contains("workspace = true") || text.contains("workspace=true") {
        Source::Workspace
    } else {
        Source::Other
    }
}

/// The dependencies (name, source) of the sections of `manifest` that `section` accepts; a
/// `[section.NAME]` table is one entry.
fn entries(manifest: &str, section: impl Fn(&str) -> bool) -> Vec<(String, Source)> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    let mut table: Option<(String, String)> = None;
    let flush = |table: &mut Option<(String, String)>, out: &mut Vec<(String, Source)>| {
        if let Some((name, text)) = table.take() {
            out.push((name, source_of(&text)));
        }
    };
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap().trim();
        if line.starts_with('[') {
            flush(&mut table, &mut out);
            let name = line
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string();
            current = None;
            if section(&name) {
                current = Some(name);
            } else if let Some((head, dep)) = name.rsplit_once('.')
                && section(head)
            {
                table = Some((dep.to_string(), String::new()));
            }
            continue;
        }
        if let Some((_, text)) = &mut table {
            text.push_str(line);
            text.push(' ');
            continue;
        }
        if current.is_none() || line.is_empty() {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        // `name.workspace = true`, `name.path = "..."` or `name = { ... }`.
        let (name, text) = match key.split_once('.') {
            Some((name, field)) => (name, format!("{field} = {}", value.trim())),
            None => (key, value.to_string()),
        };
        out.push((name.trim_matches('"').to_string(), source_of(&text)));
    }
    flush(&mut table, &mut out);
    out
}

/// Whether a section holds dependencies that go into a build of the package (not its tests').
fn builds_with(section: &str) -> bool {
    let last = section.rsplit('.').next().unwrap_or(section);
    let target = section.starts_with("target.") || !section.contains('.');
    target && (last == "dependencies" || last == "build-dependencies")
}

#[test]
fn the_watched_crates_are_the_runtimes_path_dependencies() {
    let root = root();
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let shared = entries(&workspace, |s| s == "workspace.dependencies");
    assert!(!shared.is_empty(), "the workspace's dependencies were read");
    let mut found = BTreeSet::new();
    let mut todo = vec![root.join("crates/preload/runtime")];
    while let Some(dir) = todo.pop() {
        let dir = dir.canonicalize().unwrap();
        if !found.insert(dir.clone()) {
            continue;
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        for (name, source) in entries(&manifest, builds_with) {
            let path = match source {
                Source::Path(p) => dir.join(p),
                Source::Workspace => match shared.iter().find(|(n, _)| *n == name) {
                    Some((_, Source::Path(p))) => root.join(p),
                    Some(_) => continue,
                    None => panic!("{name}: not among the workspace's dependencies"),
                },
                Source::Other => continue,
            };
            todo.push(path);
        }
    }
    let from_manifests: Vec<String> = found
        .iter()
        .map(|d| {
            d.strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let watched: Vec<String> = perfaux_preload::runtime::WATCHED
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(watched, from_manifests);
    // The drivers run inside the traced program (the swtrace PMU): a change there is a
    // change of the runtime.
    assert!(watched.iter().any(|c| c == "crates/pmus"), "{watched:?}");
    assert!(watched.iter().any(|c| c == "crates/preload/runtime"));
    assert!(
        !watched.iter().any(|c| c == "crates/testutil"),
        "a dev-dependency"
    );
}
