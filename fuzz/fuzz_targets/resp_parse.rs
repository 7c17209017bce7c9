//! Arbitrary bytes as a RESP request stream: the server's request parser
//! never panics, delivering the bytes in chunks changes nothing, and every
//! parsed request survives re-encoding. The check lives in the library
//! (`bitsled_redis::server::resp::check_parse`), so `tests/server_resp_replay.rs`
//! replays the corpus on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bitsled_redis::server::resp::check_parse(data);
});
