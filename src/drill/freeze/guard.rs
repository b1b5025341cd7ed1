//! The thaw on every way out of the drill's own process: while [`Armed`] lives, the
//! target is thawed when it is dropped (an error returned, a task cancelled, a panic that
//! unwinds) and by a panic hook (a panic that aborts). Signals are the caller's: they
//! cancel the run, which thaws and drops the guard.

use std::sync::{Mutex, Once};

use super::freezer;
use super::target::Frozen;

/// What is frozen now, for the panic hook.
static ARMED: Mutex<Option<Frozen>> = Mutex::new(None);
static HOOK: Once = Once::new();

/// The target may be frozen while this lives.
#[derive(Debug)]
pub struct Armed(());

impl Armed {
    /// Before freezing `f`.
    pub fn arm(f: &Frozen) -> Armed {
        HOOK.call_once(|| {
            let before = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if let Ok(mut armed) = ARMED.try_lock()
                    && let Some(f) = armed.take()
                {
                    let said = match freezer::thaw(&f) {
                        Ok(()) => "thawed".to_string(),
                        Err(e) => format!("could not thaw it ({e}); thaw it by hand"),
                    };
                    eprintln!("lockwatch drill: panic while {} was frozen: {said}", f.spec());
                }
                before(info);
            }));
        });
        *ARMED.lock().unwrap_or_else(|p| p.into_inner()) = Some(f.clone());
        Armed(())
    }

    /// The drill thawed it itself.
    pub fn disarm(self) {
        ARMED.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        let armed = ARMED.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(f) = armed
            && let Err(e) = freezer::thaw(&f)
        {
            eprintln!("lockwatch drill: could not thaw {} ({e}); thaw it by hand", f.spec());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;
    use crate::drill::freeze::target::state_of;

    fn stopped(pid: i32) -> bool {
        matches!(state_of(pid), Some('T' | 't'))
    }

    #[test]
    fn an_armed_target_is_thawed_by_a_panic_and_by_a_drop_but_not_once_disarmed() {
        let mut child = Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        let pid = child.id() as i32;
        let f = Frozen::Pid(pid);
        let hit = std::panic::catch_unwind(|| {
            let _armed = Armed::arm(&f);
            freezer::freeze(&f).unwrap_or_else(|e| panic!("{e}"));
            assert!(stopped(pid));
            panic!("a bug while the worker is frozen");
        });
        assert!(hit.is_err());
        assert!(!stopped(pid), "a panic left the worker frozen");
        {
            let _armed = Armed::arm(&f);
            freezer::freeze(&f).unwrap_or_else(|e| panic!("{e}"));
        }
        assert!(!stopped(pid), "an early return left the worker frozen");
        let armed = Armed::arm(&f);
        freezer::freeze(&f).unwrap_or_else(|e| panic!("{e}"));
        armed.disarm();
        assert!(stopped(pid), "disarmed: the drill thaws it itself");
        freezer::thaw(&f).unwrap_or_else(|e| panic!("{e}"));
        let _ = child.kill();
        let _ = child.wait();
    }
}
