//! Decodes arbitrary bytes into a sequence of bitmap ops (offsets clustered
//! near byte, word and page edges) and checks every reply and the final
//! bytes against the naive model, with flushes and reopens in between. The
//! decoder and the check live in `bitsled_testkit::ops_check`, shared with
//! `tests/fuzz_replay_ops.rs`, which replays this target's corpus on stable.
#![no_main]

use libfuzzer_sys::fuzz_target;

use bitsled_testkit::ops_check;

fuzz_target!(|data: &[u8]| {
    ops_check::check(&ops_check::decode(data));
});
