//! Work in progress: see docs/ARCHITECTURE.md.
