//! The C ABI (SPEC 7; README "C API"): the only place with `extern "C"` and `unsafe`.
//!
//! A thin layer over [`crate::source::MinibatchSource`], one module per C object family:
//! [`config`] (`ctf_config`), [`reader`] (`ctf_reader`), [`minibatch`] (`ctf_minibatch` and
//! its views), [`dlpack`] (zero-copy tensors) and [`status`] (`ctf_status`, messages,
//! version); `plumbing` holds the private pointer checks and the panic boundary. build.rs
//! turns these items into `include/ctf_reader.h` with cbindgen.
//!
//! Conventions (as rustls-ffi): opaque handles made by `_new`-like functions and released
//! by `_free`, where NULL is a no-op; every fallible function returns a [`status::ctf_status`]
//! and writes its out-parameters only on success; NULL arguments give
//! `CTF_STATUS_NULL_ARGUMENT`; every export catches panics. Names follow C, not Rust.
#![allow(non_camel_case_types)]

pub mod config;
pub mod dlpack;
pub mod minibatch;
mod plumbing;
pub mod reader;
pub mod status;
