"""What every section of `make bench` shares: the run context (commands whose exit code is
always checked, processes stopped at the section's end, this build and the base's binary,
hyperfine and criterion), and the facts a result carries about the machine and the build.
Reading /metrics and /proc is `probe.py`'s; the sections measure, `render.py` writes.
"""
import json
import os
import platform
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETUP = "scripts/setup.sh bench (make bench runs it)"


class BenchError(Exception):
    """A section that cannot measure: names the section, the command and its stderr's tail."""


def say(*words):
    print("bench:", *words, file=sys.stderr, flush=True)


def tail(text, lines=15):
    return "\n".join(text.rstrip().splitlines()[-lines:])


def require(binary, package):
    """Fails naming how to install `binary` when it is not on PATH (never skips)."""
    for d in os.environ.get("PATH", "").split(os.pathsep) + ["/usr/sbin", "/sbin"]:
        if os.access(os.path.join(d, binary), os.X_OK):
            return os.path.join(d, binary)
    raise BenchError(f"{binary} is missing: run {SETUP}, which installs Debian's {package}")


class Context:
    """One run: the options, a private work directory, the binaries, the current section."""

    def __init__(self, quick=False, build=True, work=None):
        self.quick, self.build, self.root = quick, build, ROOT
        self.work = work or tempfile.mkdtemp(prefix="lockwatch-bench-")
        self.section = "setup"
        self.procs = []
        self.used_base = None
        self.logs = {}
        self.new_bin = os.path.join(ROOT, "target/release/lockwatch")
        self.base_rev = os.environ.get("LOCKWATCH_BENCH_BASE", "f2bf837")

    # -- sizes ------------------------------------------------------------------------------
    def size(self, full, quick):
        """`full` in a real run, `quick` under --quick."""
        return quick if self.quick else full

    def path(self, name):
        return os.path.join(self.work, name)

    def fail(self, message):
        raise BenchError(f"{self.section}: {message}")

    # -- commands ---------------------------------------------------------------------------
    def run(self, cmd, *, env=None, stdin=None, stream=False):
        """Runs `cmd` to its end and returns its stdout; a non-zero exit raises BenchError.
        `stdin`: bytes, or an iterable of byte chunks written as they come. `stream`: its
        stderr is shown as it goes (builds), and its tail kept for the error."""
        full_env = {**os.environ, **(env or {})}
        with tempfile.TemporaryFile(dir=self.work) as out:
            p = self._popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=out, stderr=subprocess.PIPE, env=full_env, cwd=ROOT)
            kept = []
            reader = threading.Thread(target=_read_err, args=(p.stderr, kept, stream), daemon=True)
            reader.start()
            try:
                if stdin is not None:
                    for chunk in [stdin] if isinstance(stdin, bytes) else stdin:
                        p.stdin.write(chunk)
                    p.stdin.close()
                rc = p.wait()
            except BrokenPipeError:
                rc = p.wait()
            reader.join()
            out.seek(0)
            stdout = out.read().decode(errors="replace")
        self.last_stderr = "".join(kept)
        if rc != 0:
            self.fail(f"`{shlex.join(map(str, cmd))}` failed ({rc}):\n{tail(self.last_stderr) or '(no stderr)'}")
        return stdout

    def spawn(self, cmd, name, *, env=None, new_session=False):
        """Starts a background process, stopped at the section's end; its output goes to
        WORK/name.log, whose tail is shown when it dies early."""
        log = open(self.path(f"{name}.log"), "wb")
        try:
            p = self._popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})}, cwd=ROOT, start_new_session=new_session)
        finally:
            log.close()
        p.name, p.cmd = name, cmd
        self.procs.append(p)
        return p

    def _popen(self, cmd, **kw):
        try:
            return subprocess.Popen(cmd, **kw)
        except FileNotFoundError:
            self.fail(f"`{cmd[0]}` was not found on PATH (scripts/setup.sh bench installs what the sections call)")

    def check_alive(self):
        for p in self.procs:
            if p.poll() is not None:
                with open(self.path(f"{p.name}.log"), errors="replace") as f:
                    log = tail(f.read())
                self.fail(f"{p.name} (`{shlex.join(map(str, p.cmd))}`) exited with {p.returncode}:\n{log}")

    def stop(self, p):
        """Stops one process started by spawn (SIGTERM, then SIGKILL after 10 s)."""
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(reversed(self.procs)):
            self.stop(p)

    def wait_for(self, what, check, timeout, every=0.1):
        """Calls `check` every `every` s until it returns a true value, which is returned;
        fails when `timeout` s pass or a process of the section dies meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                self.fail(f"{what}: not within {timeout} s")
            time.sleep(every)

    # -- the builds -------------------------------------------------------------------------
    def build_new(self, *extra):
        """This tree's release binary (and `extra` targets such as `--example gen_log`),
        unless --no-build: then they must exist already."""
        if self.build:
            self.run(["cargo", "build", "--release", "--locked", "--bin", "lockwatch", *extra], stream=True)
        wanted = [self.new_bin] + [os.path.join(ROOT, "target/release/examples", e)
                                   for flag, e in zip(extra[::2], extra[1::2]) if flag == "--example"]
        for path in wanted:
            if not os.access(path, os.X_OK):
                self.fail(f"{path} is missing (--no-build): `cargo build --release --locked {' '.join(extra)}`")

    def base_bin(self, rev):
        """The release binary of revision `rev`, built once from `git archive` into
        target/bench-base/REV (kept between runs)."""
        self.used_base = rev
        out = os.path.join(ROOT, "target/bench-base", rev)
        binary = os.path.join(out, "release/lockwatch")
        if not os.access(binary, os.X_OK):
            say(f"building {rev} (the base) from git archive…")
            src = self.path(f"base-{rev}")
            os.makedirs(src, exist_ok=True)
            self.run(["git", "archive", "-o", self.path(f"base-{rev}.tar"), rev])
            self.run(["tar", "-x", "-f", self.path(f"base-{rev}.tar"), "-C", src])
            self.run(["cargo", "build", "--release", "--locked", "--bin", "lockwatch",
                      "--manifest-path", os.path.join(src, "Cargo.toml")],
                     env={"LOCKWATCH_GIT_COMMIT": rev, "CARGO_TARGET_DIR": out}, stream=True)
        return binary

    # -- measuring tools --------------------------------------------------------------------
    def hyperfine(self, commands, *, warmup, runs):
        """`commands`: [(name, shell command)]. Returns name -> hyperfine's figures (seconds)."""
        export = self.path(f"hyperfine-{self.section}-{len(os.listdir(self.work))}.json")
        cmd = ["hyperfine", "--warmup", str(warmup), "--runs", str(runs), "--export-json", export]
        for name, command in commands:
            cmd += ["-n", name, command]
        self.run(cmd, stream=True)
        with open(export) as f:
            results = json.load(f)["results"]
        return {r["command"]: {k: r[k] for k in ("mean", "min", "max", "median", "stddev", "times")}
                for r in results}

    def criterion(self, bench, *, env=None, no_run=False):
        """`cargo bench --bench BENCH` in target/bench-criterion (the release binary under
        test stays as it is); returns its stderr. Under --quick: short times, no LTO."""
        env = {"CARGO_TARGET_DIR": self.criterion_dir(), **self.bench_profile(), **(env or {})}
        cmd = ["cargo", "bench", "--locked", "--bench", bench]
        if no_run:
            self.run(cmd + ["--no-run"], env=env, stream=True)
            return ""
        args = ["--noplot"] + (["--warm-up-time", "0.5", "--measurement-time", "1", "--sample-size", "10"]
                               if self.quick else [])
        self.run(cmd + ["--"] + args, env=env, stream=True)
        return self.last_stderr

    def bench_profile(self):
        """Under --quick the bench profile builds fast (no LTO): its figures are never docs'."""
        return {"CARGO_PROFILE_BENCH_LTO": "false", "CARGO_PROFILE_BENCH_CODEGEN_UNITS": "16",
                "CARGO_PROFILE_BENCH_INCREMENTAL": "true"} if self.quick else {}

    def criterion_dir(self):
        return os.path.join(ROOT, "target/bench-criterion")

    def criterion_mean_s(self, group, name):
        path = os.path.join(self.criterion_dir(), "criterion", group, name, "new/estimates.json")
        try:
            with open(path) as f:
                return json.load(f)["mean"]["point_estimate"] / 1e9
        except (OSError, KeyError, ValueError) as e:
            self.fail(f"criterion's estimate {path}: {e}")


def _read_err(pipe, kept, stream):
    for line in iter(pipe.readline, b""):
        text = line.decode(errors="replace")
        kept.append(text)
        if stream:
            sys.stderr.write(text)
            sys.stderr.flush()
    pipe.close()


# -- ports and the private redis-server --------------------------------------------------------
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def wait_port(ctx, port, what, polls=200):
    """Waits (polls of 50 ms) until something listens on `port`; fails if a process of the
    section dies first."""
    ctx.wait_for(f"{what} listening on {port}", lambda: port_open(port), polls * 0.05, every=0.05)


def redis_server(ctx, name="redis", *extra):
    """A private redis-server on a free port (no persistence), answering; returns (port, proc)."""
    require("redis-server", "redis-server")
    port = free_port()
    p = ctx.spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--dir", ctx.work, "--logfile", ctx.path(f"{name}-server.log"), "--daemonize", "no", *extra], name)
    wait_port(ctx, port, name)
    return port, p


def redis_cli(ctx, port, *args, db=None):
    return ctx.run(["redis-cli", "-p", str(port), *(["-n", str(db)] if db is not None else []), *map(str, args)]).strip()


def redis_load(ctx, port, line, n, start=0, db=None):
    """Sends `line % (i, i)` for i in [start, start + n) through `redis-cli --pipe`; fails
    unless every command was answered without an error."""
    def chunks():
        for a in range(start, start + n, 100_000):
            yield "".join(line % (i, i) for i in range(a, min(start + n, a + 100_000))).encode()
    out = ctx.run(["redis-cli", "-p", str(port), *(["-n", str(db)] if db is not None else []), "--pipe"], stdin=chunks())
    if f"errors: 0, replies: {n}" not in out:
        ctx.fail(f"redis-cli --pipe of {n} commands: {tail(out, 3)}")


# -- what a result says about where it was measured ------------------------------------------
def machine():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(next(l for l in f if l.startswith("MemTotal:")).split()[1])
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": mem_kib * 1024,
            "kernel": platform.release(), "load_1m_at_start": os.getloadavg()[0]}


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def version(binary):
    """`lockwatch --version` of a binary, which names the commit it was built from."""
    return subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout.strip()


def build_info(ctx):
    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
            "binary": version(ctx.new_bin)}


def base_info(rev, binary):
    return {"revision": rev, "commit": git("rev-parse", f"{rev}^{{commit}}"), "binary": version(binary)}


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
