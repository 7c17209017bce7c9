//! LCS against a real redis-server: for fixed and seeded random pairs of
//! strings (small alphabets, so the strings share long and short runs),
//! every form of the command (plain, LEN, IDX with and without
//! MINMATCHLEN and WITHMATCHLEN, the option errors, a missing key, a key of
//! another type) must give the same RESP2 bytes from bitsled as from
//! Redis. Skips with a notice without redis-server, unless
//! `BITSLED_REQUIRE_REDIS=1`.

use bitsled::Config;
use bitsled_redis::command::execute;
use bitsled_testkit::{redis_server, wire};
use rand::{Rng, SeedableRng};

fn args(words: &[&[u8]]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.to_vec()).collect()
}

#[test]
fn lcs_replies_like_redis() {
    let Some(server) = redis_server::start() else { return };
    let mut redis = wire::Client::connect(server.port);
    let mut call = |a: &[Vec<u8>]| redis.call(a);
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1c5);
    let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (b"ohmytext".to_vec(), b"mynewtext".to_vec()),
        (Vec::new(), b"abc".to_vec()),
        (b"abc".to_vec(), b"abc".to_vec()),
        (b"abc".to_vec(), b"xyz".to_vec()),
        (b"\x00\xff\x00".to_vec(), b"\xff\x00".to_vec()),
    ];
    for _ in 0..60 {
        let alphabet = rng.gen_range(2..5u8);
        let word = |rng: &mut rand::rngs::StdRng| -> Vec<u8> {
            (0..rng.gen_range(0..40)).map(|_| b'a' + rng.gen_range(0..alphabet)).collect()
        };
        pairs.push((word(&mut rng), word(&mut rng)));
    }
    let forms: &[&[&[u8]]] = &[
        &[],
        &[b"LEN"],
        &[b"IDX"],
        &[b"idx", b"WITHMATCHLEN"],
        &[b"IDX", b"MINMATCHLEN", b"2"],
        &[b"IDX", b"MINMATCHLEN", b"3", b"WITHMATCHLEN"],
        &[b"IDX", b"MINMATCHLEN", b"-5"],
        &[b"LEN", b"IDX"],
        &[b"IDX", b"MINMATCHLEN"],
        &[b"IDX", b"MINMATCHLEN", b"x"],
        &[b"FOO"],
        &[b"WITHMATCHLEN"],
        &[b"MINMATCHLEN", b"1"],
    ];
    let mut compared = 0;
    for (a, b) in &pairs {
        for (key, value) in [(b"k1", a), (b"k2", b)] {
            let set = args(&[b"SET", key, value]);
            assert_eq!(call(&set), execute(&db, &set).to_resp());
        }
        for form in forms {
            for keys in [[&b"k1"[..], b"k2"], [b"k2", b"k1"], [b"k1", b"missing"]] {
                let mut cmd = args(&[b"LCS", keys[0], keys[1]]);
                cmd.extend(form.iter().map(|w| w.to_vec()));
                let want = call(&cmd);
                let got = execute(&db, &cmd).to_resp();
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want),
                    "{:?}",
                    cmd.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect::<Vec<_>>()
                );
                compared += 1;
            }
        }
    }
    // A key of another type: Redis's is a list, bitsled's a Bloom filter;
    // both are refused with the same text.
    assert_eq!(call(&args(&[b"RPUSH", b"other", b"x"])), b":1\r\n");
    assert!(execute(&db, &args(&[b"BF.ADD", b"other", b"x"])).to_resp().starts_with(b":"));
    let cmd = args(&[b"LCS", b"k1", b"other"]);
    assert_eq!(String::from_utf8_lossy(&execute(&db, &cmd).to_resp()), String::from_utf8_lossy(&call(&cmd)));
    // A table past proto-max-bulk-len (12,001^2 cells of 4 bytes) is
    // refused before it is built.
    for key in [&b"big1"[..], b"big2"] {
        let set = args(&[b"SET", key, &[b'q'; 12_000]]);
        assert_eq!(call(&set), execute(&db, &set).to_resp());
    }
    let cmd = args(&[b"LCS", b"big1", b"big2", b"LEN"]);
    let want = call(&cmd);
    assert!(want.starts_with(b"-ERR Insufficient memory"), "{}", String::from_utf8_lossy(&want));
    assert_eq!(String::from_utf8_lossy(&execute(&db, &cmd).to_resp()), String::from_utf8_lossy(&want));
    assert!(compared > 2000);
}
