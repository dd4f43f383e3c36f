//! Hooks (the core's software events and aux_action triggers), the probe table, and the
//! naming macros.

use std::cell::RefCell;
use std::sync::Once;

use perfaux_swtrace::decode::{Event, decode};
use perfaux_swtrace::{
    AuxRegion, HookError, HookTarget, Probe, ProbeEvent, ProbeId, ProbeTable, WriterConfig, lookup,
    probe_by_id, probe_table, set_hook, set_hook_handler, writer,
};

thread_local! {
    static LOG: RefCell<Vec<(String, ProbeEvent)>> = const { RefCell::new(Vec::new()) };
}

static REENTER: Probe = Probe::new("hk_reenter");

fn handler(id: ProbeId, event: ProbeEvent) {
    let name = probe_by_id(id).map_or("?", |p| p.name());
    LOG.with(|l| l.borrow_mut().push((name.to_owned(), event)));
    match (name, event) {
        // aux_action=pause / aux_action=resume triggers.
        ("hk_pause_trigger", ProbeEvent::Enter) => {
            writer::pause();
        }
        ("hk_resume_trigger", ProbeEvent::Enter) => {
            writer::resume();
        }
        // A handler that runs instrumented code must not recurse into itself.
        ("hk_reenter", ProbeEvent::Enter) => {
            let _g = REENTER.enter();
        }
        _ => {}
    }
}

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| set_hook_handler(handler).unwrap());
}

fn take_log() -> Vec<(String, ProbeEvent)> {
    LOG.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

#[test]
fn handler_is_set_once() {
    setup();
    assert_eq!(set_hook_handler(handler), Err(HookError::HandlerAlreadySet));
}

static LATE: Probe = Probe::new("hk_late");

#[test]
fn hook_by_name_before_the_probe_first_runs() {
    setup();
    // The core opens an event on a probe that has not run yet: remembered by name.
    assert_eq!(set_hook(HookTarget::Name("hk_late"), true), Ok(0));
    assert!(lookup("hk_late").is_empty());
    {
        let _g = LATE.enter();
    }
    let id = lookup("hk_late");
    assert_eq!(id.len(), 1);
    assert_eq!(
        take_log(),
        [
            ("hk_late".to_owned(), ProbeEvent::Enter),
            ("hk_late".to_owned(), ProbeEvent::Exit)
        ]
    );
    // Hooks count: id + name subscriptions; off by name leaves the id one.
    assert_eq!(set_hook(HookTarget::Id(id[0]), true), Ok(1));
    assert_eq!(set_hook(HookTarget::Name("hk_late"), false), Ok(1));
    {
        let _g = LATE.enter();
    }
    assert_eq!(take_log().len(), 2);
    assert_eq!(set_hook(HookTarget::Id(id[0]), false), Ok(1));
    {
        let _g = LATE.enter();
    }
    assert!(take_log().is_empty(), "no hook left");
    assert!(matches!(
        set_hook(HookTarget::Id(id[0]), false),
        Err(HookError::NotHooked(_))
    ));
    assert!(matches!(
        set_hook(HookTarget::Name("hk_late"), false),
        Err(HookError::NotHooked(_))
    ));
    assert_eq!(
        set_hook(HookTarget::Id(ProbeId(u32::MAX)), true),
        Err(HookError::UnknownId(ProbeId(u32::MAX)))
    );
}

static HOOK_A: Probe = Probe::new("hk_a");
static HOOK_X: Probe = Probe::new("hk_x");
static HOOK_Y: Probe = Probe::new("hk_y");
static PAUSE_T: Probe = Probe::new("hk_pause_trigger");
static RESUME_T: Probe = Probe::new("hk_resume_trigger");

#[test]
fn hooks_drive_pause_and_resume_like_aux_action() {
    setup();
    set_hook(HookTarget::Name("hk_pause_trigger"), true).unwrap();
    set_hook(HookTarget::Name("hk_resume_trigger"), true).unwrap();
    let ids: Vec<u32> = [&HOOK_A, &HOOK_X, &HOOK_Y, &PAUSE_T, &RESUME_T]
        .iter()
        .map(|p| p.id().unwrap().0)
        .collect();
    let (a, y, r) = (ids[0], ids[2], ids[4]);
    let mut aux = vec![0u8; 4096];
    // SAFETY: `aux` outlives the writer, uninstalled below.
    let region = unsafe { AuxRegion::new(aux.as_mut_ptr(), 4096) }.unwrap();
    writer::install(WriterConfig::full_trace(region, None)).unwrap();
    {
        let _ga = HOOK_A.enter();
        {
            // The hook runs before ENTER is written: a pause trigger's own call is not traced.
            let _gp = PAUSE_T.enter();
        }
        {
            let _gx = HOOK_X.enter();
        }
        {
            // ... and a resume trigger's is.
            let _gr = RESUME_T.enter();
        }
        let _gy = HOOK_Y.enter();
    }
    let end = writer::uninstall().unwrap().aux_head as usize;
    take_log();
    let got: Vec<String> = decode(&aux[..end])
        .iter()
        .map(|e| match e {
            Event::Enter { id, depth, .. } => format!("enter {id}@{depth}"),
            Event::Exit { id, depth, .. } => format!("exit {}@{depth}", id.unwrap_or(0)),
            Event::Sync { depth, .. } => format!("sync {depth}"),
            Event::Paused { .. } => "paused".into(),
            Event::Resumed { .. } => "resumed".into(),
            Event::Stopped { .. } => "stopped".into(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        got,
        [
            "sync 0".to_string(),
            format!("enter {a}@0"),
            "paused".into(),
            "sync 1".into(),
            "resumed".into(),
            format!("enter {r}@1"),
            format!("exit {r}@1"),
            format!("enter {y}@1"),
            format!("exit {y}@1"),
            format!("exit {a}@0"),
            "stopped".into(),
        ]
    );
    set_hook(HookTarget::Name("hk_pause_trigger"), false).unwrap();
    set_hook(HookTarget::Name("hk_resume_trigger"), false).unwrap();
}

#[test]
fn hooks_work_without_a_writer_and_do_not_recurse() {
    setup();
    set_hook(HookTarget::Name("hk_reenter"), true).unwrap();
    {
        let _g = REENTER.enter();
    }
    // The handler entered REENTER again: that inner entry did not call the handler.
    assert_eq!(
        take_log(),
        [
            ("hk_reenter".to_owned(), ProbeEvent::Enter),
            ("hk_reenter".to_owned(), ProbeEvent::Exit)
        ]
    );
    set_hook(HookTarget::Name("hk_reenter"), false).unwrap();
}

static RACE: Probe = Probe::new("hk_race");

#[test]
fn concurrent_first_entries_register_once() {
    let barrier = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                barrier.wait();
                let _g = RACE.enter();
            });
        }
    });
    assert_eq!(lookup("hk_race").len(), 1);
    let id = RACE.id().unwrap();
    assert_eq!(lookup("hk_race"), [id]);
}

fn named_by_trace_fn() -> &'static Probe {
    let _g = perfaux_swtrace::trace_fn!();
    // The probe the macro declared is the one registered under this function's path.
    let id = *lookup(concat!(module_path!(), "::named_by_trace_fn"))
        .first()
        .expect("registered");
    probe_by_id(id).unwrap()
}

perfaux_swtrace::traced! {
    /// A traced function.
    fn wrapped_whole(a: u32) -> u32 {
        if a == 0 {
            return 7;
        }
        a * 2
    }
}

#[test]
fn macros_name_probes_and_table_exports_them() {
    let p = named_by_trace_fn();
    assert!(p.file().ends_with("hooks.rs"));
    assert!(p.line() > 0);
    assert!(cfg!(not(target_arch = "x86_64")) || p.addr() != 0);
    assert_eq!(wrapped_whole(0), 7);
    assert_eq!(wrapped_whole(2), 4);
    let w = lookup(concat!(module_path!(), "::wrapped_whole"));
    assert_eq!(w.len(), 1);
    let table = probe_table();
    let info = table.get(p.id().unwrap().0).unwrap();
    assert_eq!(info.name, concat!(module_path!(), "::named_by_trace_fn"));
    assert_eq!(info.addr, p.addr() as u64);
    assert!(info.file.ends_with("hooks.rs"));
    assert_eq!(table.name(w[0].0), Some("hooks::wrapped_whole"));
    // The recorder's byte format round-trips.
    let back = ProbeTable::from_bytes(&table.to_bytes()).unwrap();
    assert_eq!(back, table);
}
