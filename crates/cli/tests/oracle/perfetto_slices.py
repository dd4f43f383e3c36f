"""Decodes a Perfetto trace with the official protos (PyPI `perfetto`) and
prints the slices per thread and name (`slice TID NAME COUNT`), the instants
per name, the uevent payloads, the thread and track names, and the slices of
the named tracks (`named_slice COUNT TOTAL_NS NAME @ TRACK`), the flows through
call slices (`flow ID NAME SLICES THREADS`), and each instant's `fields.*` arguments
(`fields NAME<TAB>key=value<TAB>...`, the fields of a `key=value` uevent); asserts that
every track's events follow its descriptor and that every call slice ends
after it begins. Exit 3 when the package is absent."""
import collections
import sys

try:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError:
    sys.exit(3)

trace = pb.Trace()
with open(sys.argv[1], "rb") as f:
    trace.ParseFromString(f.read())

tracks = {}
thread_of = {}
stacks = collections.defaultdict(list)
names = collections.Counter()
# Slices of the named (non-thread) tracks: (track name, slice name) -> [count, total ns].
named = collections.defaultdict(lambda: [0, 0])
instants = collections.Counter()
payloads = set()
# Flow id -> slice names, and the threads they are on.
flows = collections.defaultdict(list)
flow_threads = collections.defaultdict(set)
fields = []
for p in trace.packet:
    if p.HasField("track_descriptor"):
        d = p.track_descriptor
        tracks[d.uuid] = d
        if d.HasField("thread"):
            thread_of[d.uuid] = d.thread.tid
        continue
    if not p.HasField("track_event"):
        continue
    e = p.track_event
    assert e.track_uuid in tracks, "event before its track descriptor"
    if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
        stacks[e.track_uuid].append((e.name, p.timestamp))
        if e.track_uuid in thread_of:
            names[(thread_of[e.track_uuid], e.name)] += 1
            for f in e.flow_ids:
                flows[f].append(e.name)
                flow_threads[f].add(thread_of[e.track_uuid])
    elif e.type == pb.TrackEvent.TYPE_SLICE_END:
        name, begin = stacks[e.track_uuid].pop()
        assert p.timestamp >= begin, (name, begin, p.timestamp)
        if e.track_uuid not in thread_of and tracks[e.track_uuid].name:
            n = named[(tracks[e.track_uuid].name, name)]
            n[0] += 1
            n[1] += p.timestamp - begin
    elif e.type == pb.TrackEvent.TYPE_INSTANT:
        args = {a.name: (a.string_value or a.uint_value) for a in e.debug_annotations}
        instants[e.name] += 1
        if "payload" in args:
            payloads.add(args["payload"])
        kv = [f"{k[len('fields.'):]}={v}" for k, v in args.items() if k.startswith("fields.")]
        if kv:
            fields.append("\t".join([e.name] + kv))

# A pause window still open at the end of the trace stays open (Perfetto
# draws it to the end); calls are always closed.
assert all(not s for u, s in stacks.items() if u in thread_of), "unclosed call slices"
for (tid, name), n in sorted(names.items()):
    print(f"slice {tid} {name} {n}")
for name, n in sorted(instants.items()):
    print(f"instant {name} {n}")
for p in sorted(payloads):
    print(f"payload {p}")
for d in tracks.values():
    if d.HasField("thread"):
        print(f"thread {d.thread.tid} {d.thread.thread_name}")
    elif d.name:
        print(f"track {d.name}")
for f, slices in sorted(flows.items()):
    assert len(set(slices)) == 1, ("a flow through slices of several names", f, slices)
    print(f"flow {f} {slices[0]} {len(slices)} {len(flow_threads[f])}")
for f in fields:
    print(f"fields {f}")
for (track, name), (n, total) in sorted(named.items()):
    print(f"named_slice {n} {total} {name} @ {track}")
