//! Redis echoes an unknown command's name and arguments in its error reply
//! byte for byte (CR and LF become spaces, a NUL ends an argument); bitsled
//! must send the same bytes, also for bytes that are not UTF-8.
//!
//! Found by `tests/differential.rs`: bitsled built the text with
//! `String::from_utf8_lossy`, so each invalid byte became U+FFFD
//! (`EF BF BD`) and the reply differed from Redis 7.0.15's. Error replies
//! are bytes now.

use bitsled_redis::command::execute;

#[test]
fn unknown_command_error_echoes_raw_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(dir.path()).unwrap();
    let args = vec![b"foo".to_vec(), b"k".to_vec(), b"a\xffb".to_vec()];
    // Exactly what redis-server 7.0.15 replies to `foo k "a\xffb"`.
    let redis = b"-ERR unknown command 'foo', with args beginning with: 'k' 'a\xffb' \r\n".to_vec();
    let got = execute(&db, &args).to_resp();
    assert_eq!(got.escape_ascii().to_string(), redis.escape_ascii().to_string());
    // The same for the command name itself.
    let args = vec![b"f\xc3o".to_vec()];
    let redis = b"-ERR unknown command 'f\xc3o', with args beginning with: \r\n".to_vec();
    assert_eq!(execute(&db, &args).to_resp().escape_ascii().to_string(), redis.escape_ascii().to_string());
}
