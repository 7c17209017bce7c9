//! Arbitrary bytes as one injected store fault (a failed batch or failing
//! syncs) and a sequence of bitmap ops: the handle must refuse writes after
//! the failure, and a reopen must find a state of the model from the last
//! acknowledged flush on. The decoder and the check live in
//! `bitsled_testkit::fault_check`, shared with `tests/fault_model.rs`,
//! which replays this target's corpus on stable.
#![no_main]

use bitsled_testkit::fault_check;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (fault, ops) = fault_check::decode(data);
    let _struck = fault_check::check(fault, &ops);
});
