//! Arbitrary bytes as a serialized Roaring bitmap (32-bit portable format
//! and 64-bit treemap), as `Db::import_roaring` reads them: never a panic,
//! only `Ok` or an `InvalidArgument` error; a 32-bit bitmap accepted is the
//! one the `roaring` crate reads. See `bitsled::testing::check_roaring_parse`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bitsled::testing::check_roaring_parse(data);
});
