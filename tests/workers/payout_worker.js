#!/usr/bin/env node
// A payout worker on npm redlock, for the freeze tests (tests/freeze_workers.rs).
//
// Usage: node payout_worker.js --behavior raise|swallow|plain-del --url REDIS_URL --name NAME
//                              --ttl SECONDS --job SECONDS --log FILE [--jobs N]
// (redlock 5.0.0-beta.2 and ioredis 6.0.0 from NODE_PATH; `--library redlock` is accepted too.)
//
// It loops (forever, or N jobs): takes the lock `lock:payout:batch-7`, blocking until it has
// it; does the job (steps of 100 ms of work, so a stop of the process delays the work and does
// not do it); records the payout with `RPUSH payouts:done NAME:<job#>`; releases; pauses 200 ms.
//
// raise and swallow use `redlock.using([key], ttlMs, {automaticExtensionThreshold: ttlMs / 2},
// async (signal) => …)`: redlock extends the lock itself when half the TTL is left, and aborts
// `signal` with the error when it cannot. The Redlock instance retries 3 times (100 ms apart);
// an acquire that fails (the other worker holds the lock) is tried again by our loop. Not with
// retryCount -1: redlock dates a lock's expiration from the start of `acquire`, retries
// included, so a lock obtained after waiting longer than TTL - threshold is born expired and
// `using` aborts it at its first extension, 0 ms later, while the key is still ours.
// - raise: checks `signal.aborted` at every step and throws `signal.error`, as redlock's README
//   says; both that error and the one `using` rejects with are logged.
// - swallow: ignores `signal.aborted`, finishes and pays; `using`'s rejection is caught and
//   dropped.
// - plain-del: `redlock.acquire` and a timer of our own calling `lock.extend(ttlMs)` at the same
//   threshold (its failures dropped), then `DEL lock:payout:batch-7` instead of `lock.release()`.
//
// What redlock does, seen by running this under SIGSTOP past the TTL and SIGCONT after the other
// worker took the key: on SIGCONT the extension timer fires; `extend` sees its own expiration
// time passed and throws `ExecutionError("Cannot extend an already-expired lock.")` without
// sending anything to Redis; `using` sets it as `signal.error` and aborts the signal. Then
// `using`'s `finally` releases: the release script finds another value, redlock retries it
// (retryCount 3) and throws `ExecutionError("The operation was unable to achieve a quorum during
// its retry window.")`, which replaces the routine's error: `using` rejects with the release's
// error, not with `signal.error`. The other worker's key is left alone. Logged (raise): the
// extension error (from the routine) and the release's quorum error (from `using`'s rejection).
// Swallow logs nothing about the lock; plain-del's DEL removes the other worker's key silently.
// A job stopped in its last step can finish before the extension timer runs after the SIGCONT
// (both timers are due at once): it is then paid even by raise. Stop it earlier in the job.
//
// Logs: one JSON object per line, as pino writes them (`level`, `time`, `pid`, `msg`), with
// `"key": "lock:payout:batch-7"` and, for failures, `err` with the error's type, message and
// stack; an info line at acquire and at release. `lockwatch classify` reads raise's two records
// as `renew`/`not_owned` ("already expired") and `release`/`not_owned` (a quorum failure),
// namespace by the key, and every other line as ignored.
// Stdout, one line per state change: `acquired <pid> <token>` (raise, swallow: the key's value
// read with GET right after acquiring, as `using` does not hand the Lock, and so `lock.value`, to
// the routine; plain-del: `lock.value`), `released <pid>`, `lost <pid>` (the worker saw that
// redlock lost the lock).
'use strict';

const fs = require('fs');
const Redis = require('ioredis');
const { default: Redlock } = require('redlock');

const KEY = 'lock:payout:batch-7';
const STEP = 100;

function parse(argv) {
  const a = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) usage(`bad argument ${argv[i]}`);
    a[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['behavior', 'url', 'name', 'ttl', 'job', 'log']) if (!a[k]) usage(`--${k} is missing`);
  if (!['raise', 'swallow', 'plain-del'].includes(a.behavior)) usage(`unknown --behavior ${a.behavior}`);
  if (a.library && a.library !== 'redlock') usage(`unknown --library ${a.library}`);
  return a;
}

function usage(why) {
  process.stderr.write(`${why}\nusage: payout_worker.js --behavior raise|swallow|plain-del --url URL --name NAME ` +
    '--ttl SECONDS --job SECONDS --log FILE [--jobs N]\n');
  process.exit(2);
}

const args = parse(process.argv.slice(2));
const ttlMs = Math.round(Number(args.ttl) * 1000);
const steps = Math.max(1, Math.round((Number(args.job) * 1000) / STEP));
const threshold = Math.floor(ttlMs / 2);
const logFd = fs.openSync(args.log, 'a');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const say = (...what) => process.stdout.write(`${what.join(' ')}\n`);

// pino's line shape: numeric level, epoch ms, pid, hostname, msg; errors under `err`.
function log(level, msg, fields = {}) {
  const levels = { info: 30, warn: 40, error: 50 };
  const rec = { level: levels[level], time: Date.now(), pid: process.pid, hostname: require('os').hostname(),
    key: KEY, ...fields, msg };
  if (fields.err instanceof Error) {
    rec.err = { type: fields.err.name, message: fields.err.message, stack: fields.err.stack };
  }
  fs.writeSync(logFd, `${JSON.stringify(rec)}\n`);
}

async function usingJob(redlock, redis, n) {
  let started = false;
  let thrown;
  let lost = false;
  const lose = () => {
    if (!lost) say('lost', process.pid);
    lost = true;
  };
  for (;;) {
    try {
      await redlock.using([KEY], ttlMs, { automaticExtensionThreshold: threshold }, async (signal) => {
        started = true;
        say('acquired', process.pid, await redis.get(KEY));
        log('info', 'payout lock acquired', { job: n });
        signal.addEventListener('abort', lose);
        for (let i = 0; i < steps; i++) {
          await sleep(STEP);
          if (args.behavior === 'raise' && signal.aborted) {
            log('error', 'payout lock extension failed, job abandoned', { job: n, err: signal.error });
            thrown = signal.error;
            throw signal.error;
          }
        }
        await redis.rpush('payouts:done', `${args.name}:${n}`);
      });
      say('released', process.pid);
      log('info', 'payout lock released', { job: n });
      return;
    } catch (err) {
      // Not acquired within the retries (the other worker holds it): try again.
      if (!started) continue;
      lose();
      // `using` rejects with the release's error when the release failed, else with ours.
      if (args.behavior === 'raise' && err !== thrown) log('error', 'payout lock release failed', { job: n, err });
      return;
    }
  }
}

async function plainDelJob(redlock, redis, n) {
  let lock;
  for (;;) {
    try {
      lock = await redlock.acquire([KEY], ttlMs);
      break;
    } catch (err) {
      // Held by the other worker: try again.
    }
  }
  say('acquired', process.pid, lock.value);
  log('info', 'payout lock acquired', { job: n });
  let timer;
  const extend = () => {
    timer = setTimeout(async () => {
      try {
        lock = await lock.extend(ttlMs);
        extend();
      } catch (err) {
        say('lost', process.pid);
      }
    }, lock.expiration - Date.now() - threshold);
  };
  extend();
  for (let i = 0; i < steps; i++) await sleep(STEP);
  await redis.rpush('payouts:done', `${args.name}:${n}`);
  clearTimeout(timer);
  await redis.del(KEY);
  say('released', process.pid);
  log('info', 'payout lock released', { job: n });
}

async function main() {
  const redis = new Redis(args.url);
  const redlock = new Redlock([redis], { retryCount: 3, retryDelay: 100, retryJitter: 50 });
  const jobs = args.jobs === undefined ? Infinity : Number(args.jobs);
  for (let n = 1; n <= jobs; n++) {
    await (args.behavior === 'plain-del' ? plainDelJob : usingJob)(redlock, redis, n);
    await sleep(200);
  }
  redis.disconnect();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
