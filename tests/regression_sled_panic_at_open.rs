//! Invariant: sled files damaged so that sled 0.34 panics while opening
//! them (two segment headers with one sequence number) make `open` return
//! `Error::Corrupted` naming the directory and what to do, never a panic;
//! the directory is not left locked, so a second attempt gets the same
//! error rather than "in use".

use bitsled_testkit::sled_damage;

use bitsled::{Config, Error};

#[test]
fn sled_panic_at_open_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    sled_damage::fill(dir.path());
    sled_damage::duplicate_segment_header(dir.path());
    for attempt in 0..2 {
        let opened = std::panic::catch_unwind(|| Config::new(dir.path()).flush_interval(None).open());
        let Ok(result) = opened else { panic!("attempt {attempt}: opening damaged sled files panicked") };
        match result {
            Err(Error::Corrupted { key, page: None, reason }) => {
                assert_eq!(key, "<store>");
                assert!(reason.contains(&dir.path().display().to_string()), "names the directory: {reason}");
                assert!(reason.contains("backup") && reason.contains("bitsled verify"), "says what to do: {reason}");
                assert!(reason.contains("duplicate segment LSN"), "keeps sled's message: {reason}");
            }
            other => panic!("attempt {attempt}: {:?}", other.map(|_| "opened")),
        }
    }
}
