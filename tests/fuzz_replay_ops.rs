//! Every input in the `ops_model` fuzz corpus (`fuzz/corpus/ops_model/`),
//! replayed on stable: the decoded op sequence gives the naive model's
//! replies and final bytes (see `bitsled_testkit::ops_check`, shared with the
//! fuzz target). Also runs a few thousand pseudo-random inputs, so the check
//! runs even on an empty corpus.

use bitsled_testkit::ops_check;

#[test]
fn corpus_matches_model() {
    for file in bitsled_testkit::corpus("ops_model") {
        let data = std::fs::read(&file).expect("read corpus file");
        let ops = ops_check::decode(&data);
        let outcome = std::panic::catch_unwind(|| ops_check::check(&ops));
        assert!(outcome.is_ok(), "corpus file {} failed; ops: {ops:#?}", file.display());
    }
}

/// Inputs from a seeded generator (the seed is printed), a quick stand-in
/// for the fuzzer on stable.
#[test]
fn random_inputs_match_model() {
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("BITSLED_OPS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x0b17_5eed);
    eprintln!("random_inputs_match_model seed {seed} (set BITSLED_OPS_SEED to replay)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for case in 0..32 {
        let len = rng.gen_range(0..400);
        let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        let ops = ops_check::decode(&data);
        let outcome = std::panic::catch_unwind(|| ops_check::check(&ops));
        assert!(outcome.is_ok(), "seed {seed} case {case} failed; input {data:?}");
    }
}
