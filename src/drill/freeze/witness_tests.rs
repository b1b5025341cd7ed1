//! The witness against a real server: this test process plays the frozen worker (its own
//! sockets are found in `/proc`), `redis-cli` processes play another holder and busy
//! traffic on other keys.

use std::process::{Child, Command as Process, Stdio};
use std::time::Duration;

use super::*;
use crate::access::child::RedisChild;
use crate::config::Config;
use crate::drill::freeze::reader::{keys_of, script_of};
use crate::drill::freeze::seen::Command;

const KEY: &str = "lock:w:batch";

fn cli(port: u16, args: &[&str]) -> Child {
    Process::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("redis-cli (Debian package redis-tools): {e}"))
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server, a client of this process (the worker) with a connection opened before the
/// witness started, and the witness on namespace `lock:w:*`, this process taken as frozen.
async fn watched() -> (RedisChild, redis::Client, redis::aio::MultiplexedConnection, Witness) {
    let r = RedisChild::start(None, &[]).unwrap_or_else(|e| panic!("{e}"));
    let text = format!(
        "[[target]]\nname = \"s\"\nurl = \"{}\"\n[[namespace]]\nname = \"w\"\npattern = \"lock:w:*\"\nttl = \"3s\"\n",
        r.url()
    );
    let config = Config::from_toml(&text, "t.toml", std::path::Path::new("."), &Default::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let me = Frozen::Pid(std::process::id() as i32);
    let client = redis::Client::open(r.url()).unwrap_or_else(|e| panic!("{e}"));
    let conn = client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let w = Witness::start(&config.targets[0], config.namespaces[0].pattern.clone(), &me).await;
    (r, client, conn, w)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_the_worker_sends_on_the_key_is_seen_and_tied() {
    // The worker's connection from before the freeze.
    let (r, client, mut pooled, w) = watched().await;
    let me = Frozen::Pid(std::process::id() as i32);
    // Busy traffic on other keys, a command every 2 ms from another process.
    let _busy = Killed(cli(r.port(), &["-r", "100000", "-i", "0.002", "INCR", "noise:n"]));
    w.enter(Phase::Frozen);
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.enter(Phase::Thawed);
    // A pipeline, a transaction, a script by KEYS and one naming the key itself, on the
    // connection from before; and a connection opened after the thaw.
    let _: () = redis::pipe()
        .cmd("INCR")
        .arg("noise:w")
        .ignore()
        .cmd("SET")
        .arg(KEY)
        .arg("t1")
        .arg("NX")
        .arg("PX")
        .arg(5000)
        .ignore()
        .cmd("PEXPIRE")
        .arg(KEY)
        .arg(5000)
        .ignore()
        .query_async(&mut pooled)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _: () = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("noise:x")
        .arg(1)
        .ignore()
        .cmd("DEL")
        .arg(KEY)
        .ignore()
        .query_async(&mut pooled)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _: i64 = redis::cmd("EVAL")
        .arg("return redis.call('del', KEYS[1])")
        .arg(1)
        .arg(KEY)
        .query_async(&mut pooled)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _: i64 = redis::cmd("EVAL")
        .arg(format!(
            "return redis.call('exists', '{KEY}') + redis.call('unlink', '{KEY}')"
        ))
        .arg(0)
        .query_async(&mut pooled)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut fresh = client
        .get_multiplexed_async_connection()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let _: Option<String> = redis::cmd("GETDEL")
        .arg(KEY)
        .query_async(&mut fresh)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // Another holder's command on the key, from a connection of another process.
    let mut other = Process::new("redis-cli")
        .arg("-p")
        .arg(r.port().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("redis-cli (Debian package redis-tools): {e}"));
    if let Some(stdin) = other.stdin.as_mut() {
        use std::io::Write;
        let _ = writeln!(stdin, "SET {KEY} theirs PX 5000");
    }
    let _other = Killed(other);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = w.finish(&me).await;
    assert!(
        seen.ran && seen.unsure.is_empty(),
        "{:?} {:?}",
        seen.unavailable,
        seen.unsure
    );
    let mine: Vec<&str> = seen
        .commands
        .iter()
        .filter(|c| c.by_worker())
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        mine,
        [
            "SET NX",
            "PEXPIRE",
            "DEL",
            "EVAL",
            "EVAL>del",
            "EVAL>exists",
            "EVAL>unlink",
            "GETDEL"
        ],
        "{:#?}",
        seen.commands
    );
    let theirs: Vec<&Command> = seen.commands.iter().filter(|c| !c.by_worker()).collect();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(theirs[0].name, "SET (no NX)");
    assert!(seen.commands.iter().all(|c| c.key == KEY));
    // Both of the worker's connections were tied from /proc, the fresh one included.
    assert_eq!(seen.worker_addrs.len(), 2, "{:?}", seen.worker_addrs);
    assert!(seen.worker_addrs.iter().all(|(_, how)| how.contains("/proc")));
    // A script's own calls carry the script they belong to.
    let scripts: Vec<Option<u64>> = seen
        .commands
        .iter()
        .filter(|c| c.name.starts_with("EVAL"))
        .map(|c| c.script)
        .collect();
    assert!(
        scripts.iter().all(Option::is_some) && scripts[0] == scripts[1] && scripts[1] != scripts[2],
        "{scripts:?}"
    );
}

#[test]
fn a_script_s_keys_are_its_keys_argument_not_its_body() {
    let args: Vec<Vec<u8>> = ["EVAL", "lock:w:1 as text", "1", "lock:w:2", "lock:w:3"]
        .iter()
        .map(|a| a.as_bytes().to_vec())
        .collect();
    let keys: Vec<&[u8]> = keys_of("EVAL", &args).collect();
    assert_eq!(keys, [b"lock:w:2".as_slice()]);
    let del: Vec<Vec<u8>> = ["DEL", "a", "lock:w:2"].iter().map(|a| a.as_bytes().to_vec()).collect();
    assert_eq!(keys_of("DEL", &del).count(), 2);
    assert_eq!(script_of("EVALSHA", &args), script_of("EVALSHA", &args));
    assert_eq!(script_of("GET", &args), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_before_it_could_be_tied_leaves_the_witness_unsure() {
    let (r, _client, mut mine, w) = watched().await;
    let me = Frozen::Pid(std::process::id() as i32);
    w.enter(Phase::Frozen);
    // While the worker is frozen a one-shot client is not its; after the thaw it may be.
    let mut before = Killed(cli(r.port(), &["SET", KEY, "a", "PX", "5000"]));
    let _ = before.0.wait();
    w.enter(Phase::Thawed);
    let _: Option<String> = redis::cmd("GET")
        .arg(KEY)
        .query_async(&mut mine)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut one_shot = Killed(cli(r.port(), &["DEL", KEY]));
    let _ = one_shot.0.wait();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen = w.finish(&me).await;
    assert_eq!(seen.unsure.len(), 1, "{:?}", seen.unsure);
    assert!(
        seen.unsure[0].contains("gone before they could be tied"),
        "{:?}",
        seen.unsure
    );
}
