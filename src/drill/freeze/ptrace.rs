//! A stop the kernel undoes: every thread of a process seized (`PTRACE_SEIZE`) and
//! interrupted (`PTRACE_INTERRUPT`) by one tracer thread. Detaching resumes them, and so does
//! the tracer's death, whatever kills it: the kernel detaches a dead tracer's tracees. A
//! [`Stop`] keeps its tracer on a thread of its own, since ptrace answers only the thread
//! that attached; dropping it resumes the process too.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::target::thread_state;

/// How long the threads get to stop, and to run again.
const SETTLE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, thiserror::Error)]
pub enum PtraceError {
    /// The kernel refused to attach (already traced, Yama's `ptrace_scope`, no `CAP_SYS_PTRACE`).
    #[error("ptrace refused to attach to thread {tid}: {errno}")]
    Refused { tid: i32, errno: Errno },
    #[error("process {0} is gone")]
    Gone(i32),
    #[error("thread {0} did not stop within 5 s")]
    Unstopped(i32),
    #[error("process {0} still shows a thread in tracing stop after 5 s")]
    Unresumed(i32),
    #[error("the tracer thread could not start or ended early: {0}")]
    Thread(String),
}

/// A process all of whose threads are held in a ptrace stop.
pub struct Stop {
    pid: i32,
    ask: Option<mpsc::Sender<mpsc::Sender<Result<(), PtraceError>>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stop {
    /// Stop every thread of `pid`; on an error nothing stays stopped.
    pub fn new(pid: i32) -> Result<Stop, PtraceError> {
        let (ready_tx, ready_rx) = mpsc::channel();
        let (ask, asked) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("lockwatch-tracer".into())
            .spawn(move || tracer(pid, &ready_tx, &asked))
            .map_err(|e| PtraceError::Thread(e.to_string()))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Stop {
                pid,
                ask: Some(ask),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(e) => Err(PtraceError::Thread(e.to_string())),
        }
    }

    /// Detach every thread and wait until none is in a tracing stop.
    pub fn release(mut self) -> Result<(), PtraceError> {
        let (tx, rx) = mpsc::channel();
        let sent = self.ask.take().map(|a| a.send(tx).is_ok()).unwrap_or(false);
        let said = match sent {
            true => rx.recv().map_err(|e| PtraceError::Thread(e.to_string())),
            false => Err(PtraceError::Thread("the tracer had ended".into())),
        };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The tracer's end detaches whatever it could not.
        match said {
            Ok(r) => r,
            Err(_) => resumed(self.pid),
        }
    }
}

impl Drop for Stop {
    fn drop(&mut self) {
        // Closing the channel ends the tracer, which detaches every thread.
        self.ask.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

type Ready = mpsc::Sender<Result<(), PtraceError>>;
type Asked = mpsc::Receiver<mpsc::Sender<Result<(), PtraceError>>>;

/// The tracer thread: stop, say so, wait to be asked (or dropped), detach.
fn tracer(pid: i32, ready: &Ready, asked: &Asked) {
    let mut held = BTreeMap::new();
    if let Err(e) = seize_all(pid, &mut held) {
        detach_all(&held);
        let _ = ready.send(Err(e));
        return;
    }
    let _ = ready.send(Ok(()));
    let reply = asked.recv();
    detach_all(&held);
    if let Ok(reply) = reply {
        let _ = reply.send(resumed(pid));
    }
}

/// Seize and interrupt each thread until a pass through `/proc/PID/task` finds none new (a
/// thread can start another only until it is stopped). `held`: each thread and the signal
/// it was stopped with, to be delivered again at the detach.
fn seize_all(pid: i32, held: &mut BTreeMap<i32, Option<Signal>>) -> Result<(), PtraceError> {
    let deadline = Instant::now() + SETTLE;
    loop {
        // A thread that exited (a zombie leader whose other threads run on) cannot be seized
        // and needs no stop.
        let new: Vec<i32> = tasks(pid)?
            .into_iter()
            .filter(|t| !held.contains_key(t) && thread_state(pid, *t) != Some('Z'))
            .collect();
        if new.is_empty() {
            return match held.is_empty() {
                true => Err(PtraceError::Gone(pid)),
                false => Ok(()),
            };
        }
        let mut seized = Vec::new();
        for tid in new {
            match ptrace::seize(Pid::from_raw(tid), ptrace::Options::empty()) {
                Ok(()) => {}
                Err(Errno::ESRCH) => continue,
                Err(errno) => return Err(PtraceError::Refused { tid, errno }),
            }
            held.insert(tid, None);
            match ptrace::interrupt(Pid::from_raw(tid)) {
                Ok(()) => seized.push(tid),
                Err(_) => {
                    held.remove(&tid);
                }
            }
        }
        for tid in seized {
            match wait_stopped(tid, deadline)? {
                Some(pending) => {
                    held.insert(tid, pending);
                }
                None => {
                    held.remove(&tid);
                }
            }
        }
    }
}

/// The thread's stop: `Some(signal)` when it stopped to deliver one, `Some(None)` at the
/// interrupt, `None` when it exited.
fn wait_stopped(tid: i32, deadline: Instant) -> Result<Option<Option<Signal>>, PtraceError> {
    loop {
        match waitpid(Pid::from_raw(tid), Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::PtraceEvent(..)) => return Ok(Some(None)),
            Ok(WaitStatus::Stopped(_, sig)) => return Ok(Some(Some(sig))),
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => return Ok(None),
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return Ok(None),
        }
        if Instant::now() > deadline {
            return Err(PtraceError::Unstopped(tid));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn detach_all(held: &BTreeMap<i32, Option<Signal>>) {
    for (tid, pending) in held {
        let _ = ptrace::detach(Pid::from_raw(*tid), *pending);
    }
}

/// The threads of `pid`.
fn tasks(pid: i32) -> Result<Vec<i32>, PtraceError> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|_| PtraceError::Gone(pid))?;
    Ok(dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
}

/// Wait until no thread of `pid` is in a tracing stop (a gone process is resumed).
pub fn resumed(pid: i32) -> Result<(), PtraceError> {
    let deadline = Instant::now() + SETTLE;
    loop {
        let traced = tasks(pid)
            .unwrap_or_default()
            .into_iter()
            .any(|t| thread_state(pid, t) == Some('t'));
        if !traced {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(PtraceError::Unresumed(pid));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether every thread of `pid` is in a tracing stop.
#[cfg(test)]
fn all_stopped(pid: i32) -> bool {
    let tids = tasks(pid).unwrap_or_default();
    !tids.is_empty() && tids.iter().all(|t| thread_state(pid, *t) == Some('t'))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// A process of several threads: python with three sleeping threads.
    fn threaded() -> std::process::Child {
        Command::new("python3")
            .args([
                "-c",
                "import threading,time\nfor _ in range(3): threading.Thread(target=time.sleep,args=(300,),daemon=True).start()\ntime.sleep(300)",
            ])
            .spawn()
            .unwrap_or_else(|e| panic!("python3: {e}"))
    }

    fn wait_threads(pid: i32, n: usize) {
        let started = Instant::now();
        while tasks(pid).map(|t| t.len()).unwrap_or(0) < n {
            assert!(started.elapsed() < Duration::from_secs(10), "no {n} threads");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn every_thread_stops_and_runs_again_when_released_or_dropped() {
        let mut child = threaded();
        let pid = child.id() as i32;
        wait_threads(pid, 4);
        let stop = Stop::new(pid).unwrap_or_else(|e| panic!("{e}"));
        assert!(all_stopped(pid), "not every thread is stopped");
        stop.release().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !tasks(pid)
                .unwrap_or_default()
                .iter()
                .any(|t| thread_state(pid, *t) == Some('t'))
        );
        {
            let _stop = Stop::new(pid).unwrap_or_else(|e| panic!("{e}"));
            assert!(all_stopped(pid));
        }
        resumed(pid).unwrap_or_else(|e| panic!("dropped, still stopped: {e}"));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_process_traced_already_is_refused_and_left_running() {
        let mut child = threaded();
        let pid = child.id() as i32;
        wait_threads(pid, 4);
        let first = Stop::new(pid).unwrap_or_else(|e| panic!("{e}"));
        // A second tracer (another thread) cannot attach: EPERM.
        let second = std::thread::spawn(move || Stop::new(pid).err());
        let refused = second.join().unwrap_or_else(|_| panic!("join"));
        assert!(matches!(refused, Some(PtraceError::Refused { .. })), "{refused:?}");
        first.release().unwrap_or_else(|e| panic!("{e}"));
        assert!(!all_stopped(pid));
        let _ = child.kill();
        let _ = child.wait();
    }
}
