//! Bounds on the answers that walk the lock tables (`/api/v1/locks`, its history, the
//! status page): at most [`RUNNING`] at once, [`WAITING`] more queued; past that a 503 at
//! once, so a flood of listings can neither pile up memory nor hold connections waiting.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Views computed at once (one per core of a small host).
pub(crate) const RUNNING: usize = 2;
/// Views waiting for their turn, beyond those running.
pub(crate) const WAITING: usize = 6;

/// The two semaphores: admission (running + waiting) and running.
#[derive(Clone)]
pub(crate) struct Gate {
    admitted: Arc<Semaphore>,
    running: Arc<Semaphore>,
}

/// Held while a view is computed and answered.
pub(crate) struct Pass {
    _admitted: OwnedSemaphorePermit,
    _running: OwnedSemaphorePermit,
}

/// Too many views asked at once.
#[derive(Debug)]
pub(crate) struct Busy;

impl IntoResponse for Busy {
    fn into_response(self) -> Response {
        let mut r = (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("busy: {RUNNING} lock listings or status pages are being computed and {WAITING} wait; retry in a second\n"),
        )
            .into_response();
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        r
    }
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            admitted: Arc::new(Semaphore::new(RUNNING + WAITING)),
            running: Arc::new(Semaphore::new(RUNNING)),
        }
    }
}

impl Gate {
    /// Wait for a turn, or `Busy` when the queue is full.
    pub(crate) async fn enter(&self) -> Result<Pass, Busy> {
        let admitted = self.admitted.clone().try_acquire_owned().map_err(|_| Busy)?;
        let running = self.running.clone().acquire_owned().await.map_err(|_| Busy)?;
        Ok(Pass {
            _admitted: admitted,
            _running: running,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_queue_the_answer_is_busy_at_once() {
        let gate = Gate::default();
        let mut held = Vec::new();
        for _ in 0..RUNNING {
            held.push(gate.enter().await.unwrap());
        }
        // The next ones wait (admitted), up to WAITING of them.
        let mut waiting = Vec::new();
        for _ in 0..WAITING {
            let g = gate.clone();
            waiting.push(tokio::spawn(async move { g.enter().await.map(|_| ()) }));
        }
        tokio::task::yield_now().await;
        while gate.admitted.available_permits() > 0 {
            tokio::task::yield_now().await;
        }
        assert!(gate.enter().await.is_err());
        drop(held);
        for w in waiting {
            assert!(w.await.unwrap().is_ok());
        }
        assert!(gate.enter().await.is_ok());
    }
}
