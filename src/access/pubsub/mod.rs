//! The watcher's subscriptions, read by lockwatch itself rather than by the `redis` crate
//! (which decodes every message into owned values and hands each over a channel): one
//! connection per primary (`conn`: TCP, TLS with the target's CA and client certificate,
//! or a unix socket; `AUTH` or `HELLO 3`), a task that reads it into a bounded buffer,
//! answers `PSUBSCRIBE` / `PUNSUBSCRIBE` / `PING` in order, and hands the messages on as
//! chunks of whole frames, which their reader parses in place (`frame`).

mod conn;
mod frame;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, mpsc, oneshot};

pub use conn::connect;
use frame::Frame;
pub use frame::FrameError;

/// Bytes read from the socket at a time, at most.
const READ_SIZE: usize = 64 * 1024;
/// The largest frame accepted (a key and a pattern of a few KiB are far below).
const MAX_FRAME: usize = 1024 * 1024;
/// Bytes read but not yet taken by the watcher: beyond this the socket is not read until
/// it catches up (Redis then buffers, and closes a subscriber past its own limit).
const MAX_QUEUED: usize = 32 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum PubSubError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("TLS: {0}")]
    Tls(String),
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// An error reply, as `CODE: text`.
    #[error("{0}")]
    Refused(String),
    #[error("a frame of more than {MAX_FRAME} bytes")]
    TooLarge,
    #[error("connecting timed out")]
    Timeout,
    #[error("the subscription's connection is closed")]
    Closed,
}

/// One message published to a channel matching a pattern of the subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub pattern: &'a [u8],
    pub channel: &'a [u8],
    pub payload: &'a [u8],
}

/// Whole frames as read from the socket, holding at least one message, and where each
/// message's parts lie in them (found as the task parsed them: not parsed again).
pub struct Chunk {
    bytes: Bytes,
    spans: Vec<Spans>,
}

/// A message's pattern, channel and payload: (offset, length) in its chunk.
type Spans = [(u32, u32); 3];

impl Chunk {
    /// Its messages, in order (the replies among its frames were the task's).
    pub fn messages(&self) -> impl Iterator<Item = Message<'_>> {
        let part = |(at, n): (u32, u32)| self.bytes.get(at as usize..(at + n) as usize).unwrap_or_default();
        self.spans.iter().map(move |&[p, c, m]| Message {
            pattern: part(p),
            channel: part(c),
            payload: part(m),
        })
    }

    /// The memory it holds, frames and spans (what the task's bound on queued bytes counts).
    fn len(&self) -> usize {
        self.bytes.len() + self.spans.len() * std::mem::size_of::<Spans>()
    }
}

/// Where `part` lies in `base`, which holds it.
fn span(base: &[u8], part: &[u8]) -> (u32, u32) {
    let at = (part.as_ptr() as usize).saturating_sub(base.as_ptr() as usize);
    (at as u32, part.len() as u32)
}

/// What a request waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Subscription(&'static [u8]),
    Pong,
}

struct Request {
    command: Vec<u8>,
    expect: Expect,
    done: oneshot::Sender<Result<(), PubSubError>>,
}

/// A request and its answer, given once the messages read before the answer are handed on.
type Answered = (Request, Result<(), PubSubError>);

/// The commands of a subscription; cheap to clone.
#[derive(Clone)]
pub struct Sink(mpsc::UnboundedSender<Request>);

impl Sink {
    /// Subscribe to `pattern`, once the server confirmed it.
    pub async fn psubscribe(&self, pattern: &[u8]) -> Result<(), PubSubError> {
        let command = conn::command(&[b"PSUBSCRIBE", pattern]);
        self.ask(command, Expect::Subscription(b"psubscribe")).await
    }

    /// Unsubscribe from `pattern`, once the server confirmed it.
    pub async fn punsubscribe(&self, pattern: &[u8]) -> Result<(), PubSubError> {
        let command = conn::command(&[b"PUNSUBSCRIBE", pattern]);
        self.ask(command, Expect::Subscription(b"punsubscribe")).await
    }

    /// `PING`: answered once every message the server sent before is read.
    pub async fn ping(&self) -> Result<(), PubSubError> {
        self.ask(conn::command(&[b"PING"]), Expect::Pong).await
    }

    async fn ask(&self, command: Vec<u8>, expect: Expect) -> Result<(), PubSubError> {
        let (done, answer) = oneshot::channel();
        self.0
            .send(Request { command, expect, done })
            .map_err(|_| PubSubError::Closed)?;
        answer.await.map_err(|_| PubSubError::Closed)?
    }
}

/// The messages of a subscription, in chunks; ends when its connection does.
pub struct Messages {
    chunks: mpsc::UnboundedReceiver<Chunk>,
    queued: Arc<Queued>,
}

/// Bytes handed on and not yet taken, and the wake-up of a task waiting for room.
#[derive(Default)]
struct Queued {
    bytes: AtomicUsize,
    room: Notify,
}

impl futures_util::Stream for Messages {
    type Item = Chunk;
    fn poll_next(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Chunk>> {
        let polled = self.chunks.poll_recv(cx);
        if let Poll::Ready(Some(c)) = &polled {
            let before = self.queued.bytes.fetch_sub(c.len(), Ordering::AcqRel);
            if before >= MAX_QUEUED && before - c.len() < MAX_QUEUED {
                self.queued.room.notify_one();
            }
        }
        polled
    }
}

/// Start the task that reads `io` (subscribed to nothing yet) with what its handshake left
/// in `buf`.
fn start(io: conn::Io, buf: BytesMut) -> (Sink, Messages) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (out, chunks) = mpsc::unbounded_channel();
    let queued = Arc::new(Queued::default());
    tokio::spawn(drive(io, buf, rx, out, queued.clone()));
    (Sink(tx), Messages { chunks, queued })
}

/// The connection's task: requests written, frames read and parsed, replies to their
/// requests (in order), messages on to `out`. Ends on a closed or broken connection, on
/// garbage, or when `out` is dropped; every waiting request then fails.
async fn drive(
    mut io: conn::Io,
    mut buf: BytesMut,
    mut requests: mpsc::UnboundedReceiver<Request>,
    out: mpsc::UnboundedSender<Chunk>,
    queued: Arc<Queued>,
) {
    let mut waiting: VecDeque<Request> = VecDeque::new();
    let mut answered: Vec<Answered> = Vec::new();
    let mut asking = true;
    let why = loop {
        let (chunk, failed) = match take(&mut buf, &mut waiting, &mut answered) {
            Ok(chunk) => (chunk, None),
            Err(e) => (None, Some(e)),
        };
        if let Some(chunk) = chunk {
            queued.bytes.fetch_add(chunk.len(), Ordering::AcqRel);
            if out.send(chunk).is_err() {
                break PubSubError::Closed;
            }
        }
        // After the messages before them: a `PING` answered means they are handed on.
        for (r, answer) in answered.drain(..) {
            let _ = r.done.send(answer);
        }
        if let Some(e) = failed {
            break e;
        }
        if buf.len() > MAX_FRAME {
            break PubSubError::TooLarge;
        }
        // A request waiting for its reply (a `PING` the session awaits without draining
        // the queue) keeps the socket read up to twice the bound, or its reply would wait
        // behind a queue that only the session itself can drain.
        let limit = if waiting.is_empty() { MAX_QUEUED } else { 2 * MAX_QUEUED };
        let room = queued.bytes.load(Ordering::Acquire) < limit;
        buf.reserve(READ_SIZE);
        tokio::select! {
            biased;
            asked = requests.recv(), if asking => match asked {
                Some(r) => {
                    // Flushed: a TLS stream may hold written bytes until then.
                    if let Err(e) = write(&mut io, &r.command).await {
                        let _ = r.done.send(Err(e.into()));
                        break PubSubError::Closed;
                    }
                    waiting.push_back(r);
                }
                None => asking = false,
            },
            _ = queued.room.notified(), if !room => {}
            read = io.read_buf(&mut buf), if room => match read {
                Ok(0) => break PubSubError::Closed,
                Ok(_) => {}
                Err(e) => break e.into(),
            },
            _ = out.closed() => break PubSubError::Closed,
        }
    };
    tracing::debug!(error = %why, "pub/sub connection ended");
    for r in waiting.drain(..) {
        let _ = r.done.send(Err(PubSubError::Closed));
    }
}

/// Write `bytes` and flush them out.
async fn write(io: &mut conn::Io, bytes: &[u8]) -> std::io::Result<()> {
    io.write_all(bytes).await?;
    io.flush().await
}

/// The whole frames at the start of `buf`: replies answer their requests (into
/// `answered`), and the bytes go on as a chunk when they hold a message.
fn take(
    buf: &mut BytesMut,
    waiting: &mut VecDeque<Request>,
    answered: &mut Vec<Answered>,
) -> Result<Option<Chunk>, PubSubError> {
    let mut at = 0;
    let mut spans = Vec::new();
    while let Some((f, n)) = frame::parse(&buf[at..])? {
        at += n;
        let answer = match f {
            Frame::PMessage {
                pattern,
                channel,
                payload,
            } => {
                spans.push([span(buf, pattern), span(buf, channel), span(buf, payload)]);
                continue;
            }
            Frame::Subscription { kind, .. } => {
                matches!(waiting.front(), Some(r) if r.expect == Expect::Subscription(kind_of(kind))).then_some(Ok(()))
            }
            Frame::Pong => matches!(waiting.front(), Some(r) if r.expect == Expect::Pong).then_some(Ok(())),
            Frame::Error(text) => (!waiting.is_empty()).then(|| Err(PubSubError::Refused(refusal(text)))),
            Frame::Message | Frame::Simple(_) | Frame::Other => None,
        };
        if let Some(answer) = answer
            && let Some(r) = waiting.pop_front()
        {
            answered.push((r, answer));
        }
    }
    if at == 0 {
        return Ok(None);
    }
    let bytes = buf.split_to(at).freeze();
    Ok((!spans.is_empty()).then_some(Chunk { bytes, spans }))
}

/// An error reply as the `redis` crate shows one: `CODE: text`.
pub(super) fn refusal(text: &[u8]) -> String {
    let text = String::from_utf8_lossy(text);
    match text.split_once(' ') {
        Some((code, rest)) if code.bytes().all(|b| b.is_ascii_uppercase()) => format!("{code}: {rest}"),
        _ => text.into_owned(),
    }
}

/// The confirmation kinds a request can wait for (anything else matches none).
fn kind_of(kind: &[u8]) -> &'static [u8] {
    if kind.eq_ignore_ascii_case(b"psubscribe") {
        b"psubscribe"
    } else if kind.eq_ignore_ascii_case(b"punsubscribe") {
        b"punsubscribe"
    } else {
        b""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_yields_its_messages_and_skips_replies() {
        let bytes = b"*4\r\n$8\r\npmessage\r\n$1\r\np\r\n$1\r\nc\r\n$3\r\nset\r\n+PONG\r\n>4\r\n$8\r\npmessage\r\n$1\r\np\r\n$1\r\nd\r\n$3\r\ndel\r\n";
        let mut buf = BytesMut::from(&bytes[..]);
        let chunk = take(&mut buf, &mut VecDeque::new(), &mut Vec::new())
            .ok()
            .flatten()
            .expect("a chunk");
        assert!(buf.is_empty());
        let got: Vec<(&[u8], &[u8])> = chunk.messages().map(|m| (m.channel, m.payload)).collect();
        assert_eq!(got, vec![(&b"c"[..], &b"set"[..]), (&b"d"[..], &b"del"[..])]);
    }

    #[test]
    fn replies_answer_their_requests_in_order() {
        let mut waiting = VecDeque::new();
        let mut answers = Vec::new();
        for expect in [Expect::Subscription(b"psubscribe"), Expect::Pong, Expect::Pong] {
            let (done, rx) = oneshot::channel();
            waiting.push_back(Request {
                command: Vec::new(),
                expect,
                done,
            });
            answers.push(rx);
        }
        let mut buf = BytesMut::from(
            &b"*3\r\n$10\r\npsubscribe\r\n$1\r\np\r\n:1\r\n*4\r\n$8\r\npmessage\r\n$1\r\np\r\n$1\r\nc\r\n$3\r\nset\r\n+PONG\r\n-ERR no\r\n*4\r\n$8\r\npmess"[..],
        );
        let mut answered = Vec::new();
        let chunk = take(&mut buf, &mut waiting, &mut answered).unwrap().unwrap();
        assert_eq!(chunk.messages().count(), 1);
        assert_eq!(&buf[..], b"*4\r\n$8\r\npmess", "the partial frame stays");
        assert!(waiting.is_empty());
        assert!(
            answers.iter_mut().all(|rx| rx.try_recv().is_err()),
            "answered after the chunk is handed on"
        );
        for (r, answer) in answered.drain(..) {
            let _ = r.done.send(answer);
        }
        let mut answers = answers.into_iter().map(|mut rx| rx.try_recv().unwrap());
        assert!(answers.next().unwrap().is_ok());
        assert!(answers.next().unwrap().is_ok());
        assert!(matches!(answers.next().unwrap(), Err(PubSubError::Refused(text)) if text == "ERR: no"));
        // Garbage ends it with an error.
        let mut bad = BytesMut::from(&b"?\r\n"[..]);
        assert!(take(&mut bad, &mut waiting, &mut answered).is_err());
    }
}
