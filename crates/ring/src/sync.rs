//! The atomics the head/tail protocol uses, from `std` or, when the crate is
//! built with `RUSTFLAGS="--cfg loom"`, from loom, so that the model check in
//! `tests/loom.rs` explores the same [`crate::protocol`] code the producer
//! runs.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU64, Ordering};
