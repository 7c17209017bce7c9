//! Builds two pages from a recipe and checks every operation in every
//! representation against a word-array model, including encode/decode round
//! trips. See `bitsled::testing::check_page_roundtrip`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bitsled::testing::check_page_roundtrip(data);
});
