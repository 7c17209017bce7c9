//! Invariant: a database directory is used by one handle at a time; a second
//! open while the first lives is refused with an error (after a short wait),
//! and opening again right after the last handle is dropped succeeds with
//! the data intact.

use bitsled::{Config, Error};

#[test]
fn second_open_is_refused_and_reopen_after_drop_works() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
    db.setbit(b"k", 42, true).unwrap();
    let second = Config::new(dir.path()).open();
    assert!(matches!(second, Err(Error::Io(_))), "{second:?}");
    drop(db);
    for _ in 0..5 {
        let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
        assert!(db.getbit(b"k", 42).unwrap());
    }
}
