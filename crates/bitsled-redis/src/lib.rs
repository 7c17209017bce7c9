//! The Redis command layer and RESP server over [`bitsled`]: argument
//! parsing, dispatch and replies with Redis 7's semantics and error texts
//! (`command`), redis-cli's input syntax and output format (`command::cli_syntax`,
//! `command::format`), and a Redis-protocol server (`server`). Everything
//! here goes through `bitsled`'s public API.
#![deny(missing_docs, unsafe_code)]

pub mod cluster;
pub mod command;
pub mod replication;
pub mod server;
