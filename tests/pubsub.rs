//! The watcher's own subscription reader (`access::pubsub`) against a real redis-server:
//! every message published arrives once, in order, whole (binary channels, large payloads,
//! a burst read in many chunks), in RESP2 and RESP3; `PING` answers after the messages
//! published before it; `AUTH` with a user and password; a refused `PSUBSCRIBE` is a
//! refusal; a wrong password is refused at connect; `PUNSUBSCRIBE` stops the messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures_util::StreamExt;
use lockwatch::access::child::RedisChild;
use lockwatch::access::pubsub::{self, Messages, PubSubError, Sink};
use lockwatch::config::TargetTls;
use redis::IntoConnectionInfo;

const LIMIT: Duration = Duration::from_secs(5);

async fn subscriber(url: &str) -> Result<(Sink, Messages), PubSubError> {
    let info = url.into_connection_info().unwrap();
    pubsub::connect(&info, &TargetTls::default(), LIMIT).await
}

async fn publisher(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Messages until `n` are in (pattern, channel, payload), within a few seconds.
async fn collect(messages: &mut Messages, n: usize) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while out.len() < n {
        let chunk = tokio::time::timeout_at(deadline, messages.next())
            .await
            .expect("messages within 20 s")
            .expect("the stream goes on");
        for m in chunk.messages() {
            out.push((m.pattern.to_vec(), m.channel.to_vec(), m.payload.to_vec()));
        }
    }
    out
}

async fn publish(conn: &mut redis::aio::MultiplexedConnection, channel: &[u8], payload: &[u8]) {
    let _: i64 = redis::cmd("PUBLISH")
        .arg(channel)
        .arg(payload)
        .query_async(conn)
        .await
        .unwrap();
}

async fn messages_arrive_whole_and_in_order(protocol: &str) {
    let server = RedisChild::start(None, &[]).unwrap();
    let url = format!("{}{protocol}", server.url());
    let (sink, mut messages) = subscriber(&url).await.unwrap();
    sink.psubscribe(b"lock:*").await.unwrap();
    sink.psubscribe(b"other:*").await.unwrap();
    let mut conn = publisher(&server.url()).await;
    // Binary and CRLF in channel and payload, an empty payload, a 300 KiB one.
    let big = vec![b'x'; 300 * 1024];
    publish(&mut conn, b"lock:\r\n\x00\xff", b"set").await;
    publish(&mut conn, b"other:1", b"").await;
    publish(&mut conn, b"lock:2", &big).await;
    let got = collect(&mut messages, 3).await;
    assert_eq!(
        got[0],
        (b"lock:*".to_vec(), b"lock:\r\n\x00\xff".to_vec(), b"set".to_vec())
    );
    assert_eq!(got[1], (b"other:*".to_vec(), b"other:1".to_vec(), Vec::new()));
    assert_eq!(got[2].2.len(), big.len());
    // A burst, pipelined: read in many chunks, split anywhere; each once, in order.
    let n = 20_000;
    let mut pipe = redis::pipe();
    for i in 0..n {
        pipe.cmd("PUBLISH").arg(format!("lock:{i}")).arg("expire").ignore();
    }
    let _: () = pipe.query_async(&mut conn).await.unwrap();
    // The PING is answered after every message published before it is handed on.
    sink.ping().await.unwrap();
    let mut seen = 0;
    while let Some(Some(chunk)) = messages.now_or_never_ok() {
        for m in chunk.messages() {
            assert_eq!(m.channel, format!("lock:{seen}").as_bytes());
            seen += 1;
        }
    }
    assert_eq!(seen, n, "every message before the PING was handed on before its answer");
    // Unsubscribed: nothing more from that pattern.
    sink.punsubscribe(b"lock:*").await.unwrap();
    publish(&mut conn, b"lock:after", b"del").await;
    publish(&mut conn, b"other:after", b"del").await;
    let got = collect(&mut messages, 1).await;
    assert_eq!(got[0].1, b"other:after");
}

/// `next()` without waiting: `Some(item)` when one is there.
trait NowOrNever: futures_util::Stream + Unpin {
    fn now_or_never_ok(&mut self) -> Option<Option<Self::Item>> {
        futures_util::FutureExt::now_or_never(tokio::task::coop::unconstrained(self.next()))
    }
}
impl<S: futures_util::Stream + Unpin> NowOrNever for S {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp2_messages_arrive_whole_and_in_order() {
    messages_arrive_whole_and_in_order("").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resp3_messages_arrive_whole_and_in_order() {
    messages_arrive_whole_and_in_order("?protocol=resp3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_passwords_and_refusals() {
    let server = RedisChild::start(None, &["--requirepass", "secret"]).unwrap();
    let port = server.port();
    let admin = format!("redis://:secret@127.0.0.1:{port}/0");
    let mut conn = publisher(&admin).await;
    let _: () = redis::cmd("ACL")
        .arg(&[
            "SETUSER",
            "watcher",
            "on",
            ">pw",
            "resetchannels",
            "&lock:*",
            "+@pubsub",
            "+@connection",
        ])
        .query_async(&mut conn)
        .await
        .unwrap();
    for protocol in ["", "?protocol=resp3"] {
        let url = format!("redis://watcher:pw@127.0.0.1:{port}/0{protocol}");
        let (sink, mut messages) = subscriber(&url).await.unwrap();
        sink.psubscribe(b"lock:*").await.unwrap();
        match sink.psubscribe(b"secret:*").await {
            Err(PubSubError::Refused(text)) => assert!(text.starts_with("NOPERM"), "{text}"),
            other => panic!("PSUBSCRIBE of a channel the ACL denies: {other:?}"),
        }
        sink.ping().await.unwrap();
        publish(&mut conn, b"lock:1", b"set").await;
        assert_eq!(collect(&mut messages, 1).await[0].1, b"lock:1");
        let wrong = format!("redis://watcher:nope@127.0.0.1:{port}/0{protocol}");
        match subscriber(&wrong).await {
            Err(PubSubError::Refused(text)) => assert!(text.contains("WRONGPASS"), "{text}"),
            Err(e) => panic!("a wrong password: {e}"),
            Ok(_) => panic!("a wrong password was accepted"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_ends_with_its_server() {
    let mut server = RedisChild::start(None, &[]).unwrap();
    let (sink, mut messages) = subscriber(&server.url()).await.unwrap();
    sink.psubscribe(b"lock:*").await.unwrap();
    server.stop();
    let end = tokio::time::timeout(LIMIT, messages.next())
        .await
        .expect("the end within 5 s");
    assert!(end.is_none());
    assert!(sink.ping().await.is_err());
}
