//! Library calls (uftrace's default with `-P`): the calls an object makes through its PLT,
//! each of which jumps through a GOT slot (an `R_X86_64_JUMP_SLOT` relocation) the loader
//! fills with the library function's address. The runtime points each slot at a stub that
//! enters the call (named by the library's function) and goes on to the function.
//!
//! Some functions are never hooked, because a call through the stub changes what they do:
//! those that return twice or read their own return address (the setjmp family, vfork,
//! getcontext; dlopen and dlsym, which search from their caller's object; the unwinder's
//! entries and `backtrace`, which walk the stack from their return address), and the loader's
//! own (`__tls_get_addr`).

use iced_x86::{Code, Decoder, DecoderOptions, Register};
use object::{
    Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags, RelocationTarget,
};

/// A PLT call's GOT slot: its link-time address, the function's name, and the PLT entry that
/// jumps through it (the address a call names: the recorder names it after the function, as
/// uftrace does, where the library's own symbol for it may be another alias, or none for an
/// IFUNC's implementation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpSlot {
    pub got: u64,
    pub name: String,
    pub plt: Option<u64>,
}

/// The functions whose calls are never hooked (see the module doc).
const NEVER: &[&str] = &[
    "setjmp",
    "_setjmp",
    "__setjmp",
    "sigsetjmp",
    "__sigsetjmp",
    "savectx",
    "vfork",
    "__vfork",
    "getcontext",
    "swapcontext",
    "setcontext",
    "dlopen",
    "dlmopen",
    "dlsym",
    "dlvsym",
    "__tls_get_addr",
    "__libc_start_main",
    "backtrace",
];

/// Whether calls to `name` are never hooked: those of [`NEVER`], and the unwinder's entries
/// (`_Unwind_Resume` goes on unwinding from its caller, found by its return address).
pub fn never_hooked(name: &str) -> bool {
    NEVER.contains(&name) || name.starts_with("_Unwind_")
}

/// The PLT's GOT slots of `data` (an ELF file), those never hooked left out.
pub fn jump_slots(data: &[u8]) -> Result<Vec<JumpSlot>, object::Error> {
    let mut slots = all_jump_slots(&object::File::parse(data)?);
    slots.retain(|s| !never_hooked(&s.name));
    Ok(slots)
}

/// Every PLT entry of `file` with a slot: (entry address, name), for naming calls.
pub fn plt_names(file: &object::File<'_>) -> Vec<(u64, String)> {
    all_jump_slots(file)
        .into_iter()
        .filter_map(|s| Some((s.plt?, s.name)))
        .collect()
}

/// The PLT entries of `file`: each entry's address and the GOT slot its `jmp [rip + slot]`
/// reads (`.plt` without IBT: `jmp; push; jmp`; with IBT, `.plt.sec`: `endbr64; bnd jmp`).
fn plt_entries(file: &object::File<'_>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for sec in file.sections() {
        let name = sec.name().unwrap_or("");
        if name != ".plt" && name != ".plt.sec" {
            continue;
        }
        let Ok(bytes) = sec.data() else { continue };
        for (k, entry) in bytes.chunks(16).enumerate() {
            let ip = sec.address() + 16 * k as u64;
            let jump = Decoder::with_ip(64, entry, ip, DecoderOptions::NONE)
                .into_iter()
                .take(3)
                .find(|i| i.code() == Code::Jmp_rm64 && i.memory_base() == Register::RIP);
            if let Some(j) = jump {
                out.push((ip, j.ip_rel_memory_address()));
            }
        }
    }
    out
}

fn all_jump_slots(file: &object::File<'_>) -> Vec<JumpSlot> {
    let (Some(relocs), Some(syms)) = (file.dynamic_relocations(), file.dynamic_symbol_table())
    else {
        return Vec::new();
    };
    let entries = plt_entries(file);
    let mut out = Vec::new();
    for (got, r) in relocs {
        let RelocationFlags::Elf { r_type } = r.flags() else {
            continue;
        };
        let RelocationTarget::Symbol(index) = r.target() else {
            continue;
        };
        if r_type != object::elf::R_X86_64_JUMP_SLOT {
            continue;
        }
        let Some(name) = syms.symbol_by_index(index).ok().and_then(|s| s.name().ok()) else {
            continue;
        };
        out.push(JumpSlot {
            got,
            name: name.to_string(),
            plt: entries.iter().find(|e| e.1 == got).map(|e| e.0),
        });
    }
    out
}

/// The stub of a hooked slot at `at` (18 bytes): `push [rip → key]`, `call [rip → common]`,
/// `jmp [rip → target]`, where `key` is the cell holding the address the call is entered
/// under (its PLT entry's), `target` the cell holding the function's address and `common`
/// the cell of the runtime's common entry; `None` if a cell is out of reach.
pub fn slot_stub(at: u64, key: u64, target: u64, common: u64) -> Option<[u8; 18]> {
    let mut out = [0u8; 18];
    for (k, (opcode, cell)) in [(0x35u8, key), (0x15, common), (0x25, target)]
        .into_iter()
        .enumerate()
    {
        let next = at + 6 * (k as u64 + 1);
        let disp = i32::try_from(cell.wrapping_sub(next) as i64).ok()?;
        out[6 * k] = 0xff;
        out[6 * k + 1] = opcode;
        out[6 * k + 2..6 * k + 6].copy_from_slice(&disp.to_le_bytes());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_stub_pushes_calls_and_jumps_through_its_cells() {
        let at = 0x7000_1000;
        let stub = slot_stub(at, 0x7000_0018, 0x7000_0010, 0x7000_0000).unwrap();
        let d: Vec<_> = Decoder::with_ip(64, &stub, at, DecoderOptions::NONE)
            .into_iter()
            .collect();
        let got: Vec<(Code, u64)> = d
            .iter()
            .map(|i| (i.code(), i.ip_rel_memory_address()))
            .collect();
        assert_eq!(
            got,
            [
                (Code::Push_rm64, 0x7000_0018),
                (Code::Call_rm64, 0x7000_0000),
                (Code::Jmp_rm64, 0x7000_0010),
            ]
        );
        assert!(slot_stub(at + (3 << 30), 0x7000_0018, 0x7000_0010, 0x7000_0000).is_none());
    }

    #[test]
    fn a_c_programs_plt_slots_are_found_without_the_never_hooked() {
        perfaux_testutil::require_oracle!("gcc");
        let dir = std::env::temp_dir().join(format!("perfaux-plt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("p.c");
        std::fs::write(
            &src,
            "#include <setjmp.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
             jmp_buf b; int main(int c, char **v) { if (setjmp(b)) return 0; \
             char *p = malloc(c + 8); p[0] = v[0][0]; p[1] = 0; puts(p); free(p); \
             longjmp(b, 1); }\n",
        )
        .unwrap();
        let exe = dir.join("p");
        let st = std::process::Command::new("gcc")
            .args(["-O1", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .unwrap();
        assert!(st.success());
        let data = std::fs::read(&exe).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let slots = jump_slots(&data).unwrap();
        let names: Vec<&str> = slots.iter().map(|s| s.name.as_str()).collect();
        // Each hooked slot's PLT entry jumps through that very slot.
        let code = crate::FileCode::new(&data).unwrap();
        for s in &slots {
            let plt = s.plt.unwrap_or_else(|| panic!("{}: no PLT entry", s.name));
            let entry = code.code(plt, 16).unwrap();
            let jump = Decoder::with_ip(64, entry, plt, DecoderOptions::NONE)
                .into_iter()
                .find(|i| i.code() == Code::Jmp_rm64)
                .unwrap();
            assert_eq!(jump.ip_rel_memory_address(), s.got, "{}", s.name);
        }
        let named = plt_names(&object::File::parse(&*data).unwrap());
        assert!(
            named.iter().any(|(_, n)| n == "_setjmp"),
            "names cover every entry"
        );
        for f in ["puts", "malloc", "free", "longjmp"] {
            assert!(names.contains(&f), "{f} in {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("setjmp")), "{names:?}");
    }
}
