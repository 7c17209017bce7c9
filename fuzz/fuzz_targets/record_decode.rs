//! Decodes arbitrary bytes as a metadata bucket, a keyspace catalog,
//! metadata and page delta records, a replication frame and a follower
//! position:
//! must never panic, and whatever decodes must round trip. See
//! `bitsled::testing::check_record_decode`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bitsled::testing::check_record_decode(data);
});
