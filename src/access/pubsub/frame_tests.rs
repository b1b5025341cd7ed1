use super::*;

fn bulk_of(s: &[u8]) -> Vec<u8> {
    [format!("${}\r\n", s.len()).as_bytes(), s, b"\r\n"].concat()
}

fn pmessage(push: bool, pattern: &[u8], channel: &[u8], payload: &[u8]) -> Vec<u8> {
    let head: &[u8] = if push { b">4\r\n" } else { b"*4\r\n" };
    [
        head.to_vec(),
        bulk_of(b"pmessage"),
        bulk_of(pattern),
        bulk_of(channel),
        bulk_of(payload),
    ]
    .concat()
}

/// Every frame of `buf`, parsed one after another.
fn all(buf: &[u8]) -> Result<Vec<Frame<'_>>, FrameError> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        match parse(&buf[at..])? {
            Some((f, n)) => {
                assert!(n > 0);
                out.push(f);
                at += n;
            }
            None => panic!("incomplete at {at}"),
        }
    }
    Ok(out)
}

/// Every prefix of `buf` shorter than its first frame is incomplete, never an error; the
/// whole is that frame.
fn every_split(buf: &[u8], want: Frame<'_>) {
    for cut in 0..buf.len() {
        assert_eq!(
            parse(&buf[..cut]),
            Ok(None),
            "cut at {cut} of {:?}",
            String::from_utf8_lossy(buf)
        );
    }
    assert_eq!(parse(buf), Ok(Some((want, buf.len()))));
}

#[test]
fn a_pmessage_in_resp2_and_resp3_is_three_slices_at_every_split() {
    for push in [false, true] {
        let m = pmessage(push, b"__keyspace@0__:lock:*", b"__keyspace@0__:lock:a\r\nb", b"set");
        every_split(
            &m,
            Frame::PMessage {
                pattern: b"__keyspace@0__:lock:*",
                channel: b"__keyspace@0__:lock:a\r\nb",
                payload: b"set",
            },
        );
    }
    // Empty parts are parts.
    let m = pmessage(false, b"", b"", b"");
    every_split(
        &m,
        Frame::PMessage {
            pattern: b"",
            channel: b"",
            payload: b"",
        },
    );
}

#[test]
fn confirmations_pongs_and_errors() {
    let sub = [
        b"*3\r\n".to_vec(),
        bulk_of(b"psubscribe"),
        bulk_of(b"lock:*"),
        b":1\r\n".to_vec(),
    ]
    .concat();
    every_split(
        &sub,
        Frame::Subscription {
            kind: b"psubscribe",
            name: Some(b"lock:*"),
            count: 1,
        },
    );
    let unsub = b">3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n";
    every_split(
        unsub,
        Frame::Subscription {
            kind: b"punsubscribe",
            name: None,
            count: 0,
        },
    );
    every_split(b"*2\r\n$4\r\npong\r\n$0\r\n\r\n", Frame::Pong);
    every_split(b"+PONG\r\n", Frame::Pong);
    every_split(b"+OK\r\n", Frame::Simple(b"OK"));
    every_split(b"-NOPERM no permissions\r\n", Frame::Error(b"NOPERM no permissions"));
    every_split(b"!9\r\nERR x\r\nyz\r\n", Frame::Error(b"ERR x\r\nyz"));
}

#[test]
fn other_frames_are_skipped_whole() {
    // HELLO 3's map, with a nested array.
    let hello = b"%3\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n$7\r\nmodules\r\n*0\r\n";
    every_split(hello, Frame::Other);
    every_split(b"*-1\r\n", Frame::Other);
    every_split(b"*0\r\n", Frame::Other);
    every_split(b"*2\r\n:1\r\n*1\r\n_\r\n", Frame::Other);
    every_split(b"|1\r\n+key\r\n+value\r\n", Frame::Other);
    every_split(b"=15\r\ntxt:Some string\r\n", Frame::Other);
    every_split(b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\np\r\n", Frame::Message);
    every_split(b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", Frame::Other);
    for scalar in [
        &b":12\r\n"[..],
        b"_\r\n",
        b",3.14\r\n",
        b"#t\r\n",
        b"(123456789012345678901\r\n",
        b"$-1\r\n",
    ] {
        every_split(scalar, Frame::Other);
    }
}

#[test]
fn frames_follow_each_other_in_one_buffer() {
    let mut buf = Vec::new();
    for i in 0..100u32 {
        buf.extend(pmessage(i % 2 == 0, b"p*", format!("p{i}").as_bytes(), b"del"));
        if i % 10 == 0 {
            buf.extend(b"+PONG\r\n");
        }
    }
    let frames = all(&buf).unwrap();
    assert_eq!(frames.len(), 110);
    let channels: Vec<&[u8]> = frames
        .iter()
        .filter_map(|f| match f {
            Frame::PMessage { channel, .. } => Some(*channel),
            _ => None,
        })
        .collect();
    assert_eq!(channels[99], b"p99");
}

#[test]
fn garbage_is_an_error() {
    let bad: &[&[u8]] = &[
        b"?what\r\n",
        b"*x\r\n",
        b"*4\r\n:x\r\n",
        b"*4\r\n$8\r\npmessage\r\n:1\r\n",
        b"*4\r\n$8\r\npmessage\r\n$-1\r\n$1\r\nc\r\n$1\r\np\r\n",
        b"$3\r\nabcd\r\n",
        b"$-\r\n",
        b"$99999999999999999999\r\n",
        b"+OK\n",
        b"\n",
        b"*3\r\n$10\r\npsubscribe\r\n$1\r\np\r\n$1\r\n1\r\n",
        b":1a\r\n",
        b"*1\r\n@\r\n",
    ];
    for b in bad {
        assert!(
            parse(b).is_err(),
            "{:?} parsed as {:?}",
            String::from_utf8_lossy(b),
            parse(b)
        );
    }
}

#[test]
fn deep_or_huge_claims_cost_nothing_until_their_bytes_come() {
    // 100,000 nested arrays: no recursion, so no stack to run out of.
    let deep = b"*1\r\n".repeat(100_000);
    assert_eq!(parse(&deep), Ok(None));
    let deep = [b"*1\r\n".repeat(100_000), b":1\r\n".to_vec()].concat();
    assert_eq!(parse(&deep), Ok(Some((Frame::Other, deep.len()))));
    // A length claimed, not sent: incomplete, nothing allocated for it.
    assert_eq!(parse(b"*999999999999999999\r\n:1\r\n"), Ok(None));
    assert_eq!(parse(b"$999999999999999999\r\nab"), Ok(None));
    // Claims that add up past any count are errors.
    let claims = b"%999999999999999999\r\n".repeat(12);
    assert!(parse(&[b"*1\r\n".as_slice(), &claims].concat()).is_err());
}

#[test]
fn random_bytes_never_panic() {
    // A fixed xorshift: the same bytes every run.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let alphabet = b"*>$:+-!%|~_,#(=\r\n0123456789-pmessagePONG";
    for _ in 0..20_000 {
        let len = (next() % 40) as usize;
        let buf: Vec<u8> = (0..len)
            .map(|_| alphabet[(next() % alphabet.len() as u64) as usize])
            .collect();
        let _ = parse(&buf);
        // And valid frames with a byte changed.
        let mut m = pmessage(next() % 2 == 0, b"lock:*", b"lock:1", b"expired");
        let i = (next() % m.len() as u64) as usize;
        m[i] = alphabet[(next() % alphabet.len() as u64) as usize];
        if let Ok(Some((_, n))) = parse(&m) {
            assert!(n <= m.len());
        }
    }
}
