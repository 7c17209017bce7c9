//! Arbitrary bytes as a stored HyperLogLog value, then PFADD, PFCOUNT
//! (twice: the second from the cache), the union estimate and PFMERGE:
//! each must return Ok or Err and never panic, and a valid sketch must
//! take the model's registers. See `bitsled::testing::check_hll_value`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bitsled::testing::check_hll_value(data);
});
