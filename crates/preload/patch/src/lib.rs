//! Dynamic patching of function entries, for `perfaux record -P` on binaries built without
//! instrumentation (uftrace's `-P`): [`pattern`] says which functions a recording names,
//! [`functions`] lists an ELF object's functions, and [`relocate`] decides whether each
//! one's first instructions can move to a stub and encodes that stub (iced-x86).
//!
//! Pure: no memory is mapped or written here. The runtime preloaded into the program
//! (perfaux-preload-runtime's `patch` module) places the stubs and writes the jumps; the
//! recorder uses the same code to say, before the program runs, what `-P` would patch and
//! why it refuses the rest.

pub mod functions;
pub mod pattern;
pub mod plt;
pub mod relocate;
pub mod verdicts;

pub use functions::{FileCode, Function, demangle, functions};
pub use pattern::{MatchKind, PatchSpec, PatternError};
pub use relocate::{Cells, Plan, ReadData, Refusal, encode_stub, patched_bytes, plan, plan_window};
pub use verdicts::Verdicts;

/// What patching the object in the file `data` (at `path`) would do, before it is loaded.
pub fn plan_file(
    data: &[u8],
    spec: &PatchSpec,
    path: &str,
    is_main: bool,
) -> Result<ObjectPlan, object::Error> {
    let funcs = functions(data)?;
    let code = FileCode::new(data)?;
    Ok(plan_object(
        &funcs,
        spec,
        path,
        is_main,
        0,
        |a, n| code.code(a, n),
        &|a| code.word(a),
    ))
}

/// What patching one object would do.
#[derive(Debug, Default)]
pub struct ObjectPlan {
    /// The functions that can be patched.
    pub plans: Vec<Plan>,
    /// Their sizes (by the symbol tables), in the order of `plans`.
    pub sizes: Vec<u64>,
    /// The functions named but refused: their first name (demangled) and why.
    pub refused: Vec<(String, Refusal)>,
}

/// Plans the functions of the object at `path` (`is_main`: the executable) that `spec` names,
/// loaded `bias` bytes above their link-time addresses (the plans' addresses are the loaded
/// ones); `code(addr, size)` gives a function's bytes at its loaded address (`None`:
/// unreadable, which refuses it as undecodable), and `data` the object's words (its jump
/// tables).
pub fn plan_object<'a>(
    funcs: &[Function],
    spec: &PatchSpec,
    path: &str,
    is_main: bool,
    bias: u64,
    mut code: impl FnMut(u64, u64) -> Option<&'a [u8]>,
    data: ReadData<'_>,
) -> ObjectPlan {
    let mut out = ObjectPlan::default();
    if !spec.wants_object(path, is_main) {
        return out;
    }
    let every = spec.takes_every_function(path, is_main);
    for (k, f) in funcs.iter().enumerate() {
        let names: Vec<String> = if every {
            Vec::new()
        } else {
            f.names.iter().map(|n| demangle(n)).collect()
        };
        if !every && !spec.matches(&names, path, is_main) {
            continue;
        }
        let at = f.addr.wrapping_add(bias);
        let next = funcs.get(k + 1).map(|n| n.addr.wrapping_add(bias));
        let result = match code(at, f.size) {
            Some(bytes) => plan(at, bytes, data).and_then(|p| {
                let window = p.entry..p.patch_at + p.patch_len as u64;
                if let Some(n) = next.filter(|n| window.contains(n)) {
                    return Err(Refusal::FunctionInside { at: n });
                }
                for &(part, size) in &f.cold {
                    let part = part.wrapping_add(bias);
                    let into = code(part, size)
                        .is_none_or(|c| relocate::branches_into(c, part, window.clone()));
                    if into {
                        return Err(Refusal::ColdPartBranch { part });
                    }
                }
                Ok(p)
            }),
            None => Err(Refusal::Undecodable { offset: 0 }),
        };
        match result {
            Ok(p) => {
                out.plans.push(p);
                out.sizes.push(f.size);
            }
            Err(why) => {
                let name = names
                    .first()
                    .cloned()
                    .unwrap_or_else(|| demangle(&f.names[0]));
                out.refused.push((name, why));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: u64 = 0x1000;
    /// push rbx; mov ebx, edi; mov eax, edi; pop rbx; ret
    const BODY: [u8; 8] = [0x53, 0x89, 0xfb, 0x89, 0xf8, 0x5b, 0xc3, 0xcc];
    /// At 0x2000: jmp F + 3 (rel32), into BODY's first bytes.
    const COLD_BACK: [u8; 5] = [0xe9, 0xfe, 0xef, 0xff, 0xff];

    fn function(addr: u64, size: u64, name: &str, cold: Vec<(u64, u64)>) -> Function {
        Function {
            addr,
            size,
            names: vec![name.into()],
            cold,
        }
    }

    fn every() -> PatchSpec {
        PatchSpec::parse(&[".".into()], &[], MatchKind::Regex).unwrap()
    }

    fn code_at(a: u64, n: u64) -> Option<&'static [u8]> {
        match a {
            F => Some(&BODY[..n as usize]),
            0x2000 => Some(&COLD_BACK[..n as usize]),
            _ => None,
        }
    }

    #[test]
    fn an_out_of_line_part_that_jumps_into_the_first_bytes_refuses_its_function() {
        let funcs = [function(F, 8, "f", vec![(0x2000, 5)])];
        let p = plan_object(&funcs, &every(), "/p", true, 0, code_at, &|_| None);
        assert!(p.plans.is_empty());
        assert_eq!(
            p.refused,
            [("f".to_string(), Refusal::ColdPartBranch { part: 0x2000 })]
        );
        let alone = [function(F, 8, "f", vec![])];
        let p = plan_object(&alone, &every(), "/p", true, 0, code_at, &|_| None);
        assert_eq!(p.plans.len(), 1, "without the part: patched");
    }

    #[test]
    fn a_symbol_inside_the_first_bytes_refuses_the_function_it_is_in() {
        let funcs = [function(F, 8, "f", vec![]), function(F + 3, 5, "g", vec![])];
        let p = plan_object(&funcs, &every(), "/p", true, 0, code_at, &|_| None);
        assert_eq!(
            p.refused[0],
            ("f".to_string(), Refusal::FunctionInside { at: F + 3 })
        );
    }
}
