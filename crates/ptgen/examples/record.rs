//! `cargo run -p perfaux-ptgen --example record -- OUT.data PROGRAM [ARGS...]`: records
//! PROGRAM single-stepped into OUT.data and prints what it saw.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, program, rest @ ..] = args.as_slice() else {
        eprintln!("usage: record OUT.data PROGRAM [ARGS...]");
        std::process::exit(2);
    };
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    let t = std::time::Instant::now();
    match perfaux_ptgen::record(program.as_ref(), &rest, out.as_ref()) {
        Ok(r) => {
            let el = t.elapsed();
            eprintln!(
                "pid {} exit {} instructions {} branches {} calls {} returns {} syscalls {} trace {} bytes, {} PSBs, {:.2?} ({:.2} us/insn)",
                r.pid,
                r.exit_code,
                r.instructions,
                r.branches.len(),
                r.calls,
                r.returns,
                r.syscalls,
                r.trace_bytes,
                r.psbs,
                el,
                el.as_secs_f64() * 1e6 / r.instructions.max(1) as f64
            );
            print!("{}", String::from_utf8_lossy(&r.stdout));
        }
        Err(e) => {
            eprintln!("ptgen: {e}");
            std::process::exit(1);
        }
    }
}
