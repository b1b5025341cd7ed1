#!/usr/bin/env node
// Make real npm lock libraries fail for real and keep what they log.
//
// Usage: node node_locks.js LIBRARY REDIS_URL OUT.log OUT.expected
//
// A worker process takes a lock with a 1 s TTL; this driver SIGSTOPs it past the TTL,
// another holder takes the key over, and the worker is SIGCONTed: its renewal and its
// release then fail the way the library makes them fail, and the worker logs that the way
// Node services do (console with the bare error object, pino JSON with `err.stack`, winston
// text with the stack). Then it tries to acquire the lock the other holder keeps. A success
// line comes first. Each logged record's first and last line and what it means are written
// to OUT.expected, from what the scenario did (not from lockwatch).
// Run by scripts/library-fixtures.sh, which installs the pinned libraries.
'use strict';

const fs = require('fs');
const { fork } = require('child_process');

const KEY = 'payout:lock:batch-7';
const TTL = 1000;
const [lib, url, logPath, expectedPath, role] = process.argv.slice(2);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Expect {
  constructor() {
    this.rows = [];
  }
  lines() {
    return fs.readFileSync(logPath).toString('latin1').split('\n').length - 1;
  }
  // Run `action`, which logs the record (and, before `begin`, others that must be ignored).
  async record(what, namespace, op, outcome, action) {
    this.first = this.lines() + 1;
    await action();
    await sleep(50); // asynchronous loggers
    const last = this.lines();
    if (last < this.first) throw new Error(`${what}: nothing was logged`);
    this.rows.push([this.first, last, namespace, op, outcome, what]);
  }
  begin() {
    this.first = this.lines() + 1;
  }
  write() {
    const head = 'first\tlast\tnamespace\top\toutcome\twhat\n';
    fs.writeFileSync(expectedPath, head + this.rows.map((r) => r.join('\t') + '\n').join(''));
  }
}

// Ask the driver to stop this process past the TTL and let another holder take the key;
// resolves once the process runs again.
function stall() {
  return new Promise((resolve) => {
    process.once('message', resolve);
    process.send('stall');
  });
}

async function withRedlock(ex, Redis) {
  // redlock 5: failures logged as bare error objects on the console.
  const { default: Redlock } = require('redlock');
  const redis = new Redis(url);
  const rl = new Redlock([redis], { retryCount: 3, retryDelay: 100 });
  const ok = await rl.acquire([KEY], 30000);
  await ex.record('success', '-', '-', 'ignored', () => console.log('payout lock acquired for batch-7'));
  await ok.release();
  const lock = await rl.acquire([KEY], TTL);
  await stall();
  await ex.record('extend after the lock expired and was taken (bare error object)', 'unknown', 'renew',
    'not_owned', () => lock.extend(5000).catch((err) => console.error(err)));
  await ex.record('release after the lock expired and was taken (bare error object)', 'unknown', 'release',
    'not_owned', () => lock.release().catch((err) => console.error(err)));
  await ex.record('acquire while another worker holds it', 'payout', 'acquire', 'busy',
    () => rl.acquire([KEY], 30000).catch((err) => console.error('failed to acquire payout lock', err)));
  redis.disconnect();
}

async function withSesamecareRedlock(ex, Redis) {
  // @sesamecare-oss/redlock: pino JSON lines, the error serialized with its stack.
  const { Redlock } = require('@sesamecare-oss/redlock');
  const pino = require('pino');
  const log = pino({ base: { service: 'payouts' } }, pino.destination({ dest: 1, sync: true }));
  const redis = new Redis(url);
  const rl = new Redlock([redis], { retryCount: 3, retryDelay: 100 });
  const ok = await rl.acquire([KEY], 30000);
  await ex.record('success', '-', '-', 'ignored', () => log.info({ resource: KEY }, 'payout lock acquired'));
  await ok.release();
  const lock = await rl.acquire([KEY], TTL);
  await stall();
  await ex.record('extend after the lock expired and was taken', 'payout', 'renew', 'not_owned',
    () => lock.extend(5000).catch((err) => log.error({ err, resource: KEY }, 'lock extend failed')));
  await ex.record('release after the lock expired and was taken', 'payout', 'release', 'not_owned',
    () => lock.release().catch((err) => log.error({ err, resource: KEY }, 'lock release failed')));
  await ex.record('acquire while another worker holds it', 'payout', 'acquire', 'busy',
    () => rl.acquire([KEY], 30000).catch((err) => log.warn({ err, resource: KEY }, 'could not acquire lock')));
  redis.disconnect();
}

async function withRedisSemaphore(ex, Redis) {
  // redis-semaphore: winston text lines with the stack on the lines after.
  const { Mutex } = require('redis-semaphore');
  const winston = require('winston');
  const { combine, timestamp, errors, printf } = winston.format;
  const log = winston.createLogger({
    format: combine(errors({ stack: true }), timestamp(),
      printf(({ timestamp: t, level, message, stack }) => `${t} ${level}: ${message}${stack ? `\n${stack}` : ''}`)),
    transports: [new winston.transports.Console()],
  });
  const redis = new Redis(url);
  const ok = new Mutex(redis, KEY, { lockTimeout: 30000 });
  await ok.acquire();
  await ex.record('success', '-', '-', 'ignored', () => log.info('payout lock acquired for batch-7'));
  await ok.release();
  // The library refreshes the lock on a timer and calls onLockLost when a refresh fails.
  let lost;
  const lock = new Mutex(redis, KEY, {
    lockTimeout: TTL,
    refreshInterval: 300,
    onLockLost: (err) => {
      lost = err;
      log.error('payout lock lost while processing batch-7', err);
    },
  });
  await lock.acquire();
  await ex.record('refresh after the lock expired and was taken (onLockLost)', 'payout', 'renew', 'not_owned',
    async () => {
      await stall();
      await sleep(600);
    });
  if (!lost) throw new Error('onLockLost was not called');
  // Its release deletes the key only when the value is its own and reports nothing either way.
  await lock.release();
  const other = new Mutex(redis, KEY, { lockTimeout: 30000, acquireTimeout: 300 });
  await ex.record('acquire while another worker holds it', 'payout', 'acquire', 'timeout',
    () => other.acquire().catch((err) => log.warn('payout batch-7 skipped', err)));
  redis.disconnect();
}

// The scenario of each library, and the prefix it puts before the lock name in Redis.
const LIBRARIES = {
  redlock: [withRedlock, ''],
  '@sesamecare-oss/redlock': [withSesamecareRedlock, ''],
  'redis-semaphore': [withRedisSemaphore, 'mutex:'],
};

async function worker() {
  const Redis = require('ioredis');
  const ex = new Expect();
  await LIBRARIES[lib][0](ex, Redis);
  ex.write();
  process.disconnect();
}

async function driver() {
  const Redis = require('ioredis');
  const redis = new Redis(url);
  const key = LIBRARIES[lib][1] + KEY;
  await redis.del(key);
  const fd = fs.openSync(logPath, 'w');
  const child = fork(__filename, [lib, url, logPath, expectedPath, 'worker'], { stdio: ['ignore', fd, fd, 'ipc'] });
  child.on('message', async () => {
    process.kill(child.pid, 'SIGSTOP');
    await sleep(TTL + 500);
    let taken = false;
    for (let i = 0; i < 100 && !taken; i++) {
      taken = (await redis.set(key, 'another-worker', 'PX', 30000, 'NX')) === 'OK';
      if (!taken) await sleep(50);
    }
    if (!taken) throw new Error("the stalled worker's lock never expired");
    process.kill(child.pid, 'SIGCONT');
    child.send('go');
  });
  const code = await new Promise((resolve) => child.on('exit', resolve));
  redis.disconnect();
  if (code !== 0) {
    console.error(`${lib}: the worker failed (${code})`);
    process.exit(1);
  }
}

(role === 'worker' ? worker() : driver()).catch((e) => {
  console.error(e);
  process.exit(1);
});
