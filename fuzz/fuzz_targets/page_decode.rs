//! Decodes arbitrary bytes as a stored page: must never panic, and whatever
//! decodes must round trip. See `bitsled::testing::check_page_decode`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bitsled::testing::check_page_decode(data);
});
