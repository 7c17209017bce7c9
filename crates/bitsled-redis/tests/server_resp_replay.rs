//! The RESP parser's fuzzing oracle (`bitsled_redis::server::resp::check_parse`)
//! holds on every input of the `resp_parse` fuzz corpus and on a few
//! hand-made ones: no panic, chunked delivery equals whole delivery, parsed
//! requests survive re-encoding.

use bitsled_redis::server::resp::check_parse;

#[test]
fn corpus_replays() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/resp_parse");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("fuzz/corpus/resp_parse") {
        let path = entry.expect("entry").path();
        check_parse(&std::fs::read(&path).expect("read input"));
        n += 1;
    }
    assert!(n >= 5, "only {n} corpus inputs");
}

#[test]
fn hand_made_inputs() {
    let inputs: &[&[u8]] = &[
        b"",
        b"\x01",
        b"\x0f*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n",
        b"\x00*1\r\n$536870913\r\n",
        b"\x07*1\r\n$-0\r\n",
        b"\x03*9223372036854775808\r\n",
        b"\x83*10\r\n$16385\r\n",
        b"\x02\r\n\r\n\n",
        b"\x04 \"\\x\" '\\'' \"\r\n",
        b"\x09*2\r\n$1\r\na\r\n$1\r\nb",
    ];
    for input in inputs {
        check_parse(input);
    }
}
