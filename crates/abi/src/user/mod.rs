//! The perf tool's own record types (64..86): they exist only in perf.data
//! and a perf pipe, never in a kernel ring.
