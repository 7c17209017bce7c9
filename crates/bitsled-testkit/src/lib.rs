//! Test support shared by bitsled's test suites (the library's, the
//! command layer's and the command-line tool's) and its fuzz targets. Not
//! published and not an API: each module is what the tests need, no more.
//!
//! - [`redis_server`]: a private `redis-server` on a free loopback port, and
//!   what a test does when there is none;
//! - [`ops_check`]: random bitmap operations decoded from bytes and checked
//!   against the naive model, with flushes and reopens (the `ops_model`
//!   fuzz target and the model tests);
//! - [`fault_check`]: the same operations over a store that fails on
//!   command (the `fault_model` fuzz target), and what a reopen must find;
//! - [`sled_damage`]: a store whose sled files are damaged the way a torn
//!   segment damages them;
//! - [`wire`]: reading a server's replies off a socket.

pub mod fault_check;
pub mod ops_check;
pub mod redis_server;
pub mod sled_damage;
pub mod wire;
