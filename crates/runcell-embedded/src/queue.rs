//! The embedded model's waiting room. There is one model thread, so
//! requests wait for it here: bounded (in all, per requester, and for the
//! anonymous pages together, which may fill at most half), fair (the
//! worker alternates between known requesters and anonymous ones, and goes
//! round the requesters of each in turn, so a flood from one of them waits
//! behind itself, not in front of everyone), and forgetful of requests
//! whose requester has gone (a dropped stream: a stopped turn, a deleted
//! session, a closed API call), which are dropped unrun and stop counting.

use std::collections::VecDeque;

use parking_lot::{Condvar, Mutex};

use runcell_llm::Requester;

/// A request waiting in the queue.
pub(crate) trait Waiting {
    /// Whether whoever asked for it has gone (nothing would read the answer).
    fn departed(&self) -> bool;
}

/// How many requests may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueLimits {
    /// In all (the one running is not counted).
    pub(crate) total: usize,
    /// Of one requester.
    pub(crate) per_requester: usize,
}

impl Default for QueueLimits {
    fn default() -> Self {
        Self {
            total: 32,
            per_requester: 4,
        }
    }
}

impl QueueLimits {
    /// The anonymous pages' requests, together: half the queue (at least
    /// one), so the rest always has room for keys and signed-in people.
    fn anonymous(&self) -> usize {
        (self.total / 2).max(1)
    }
}

/// Why a request was not queued.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum QueueError {
    #[error("the embedded model is busy: {0} requests are waiting for it; try again shortly")]
    Full(usize),
    #[error(
        "the embedded model is busy: {0} requests from anonymous pages are waiting for it, the most they may queue together; sign in, or try again shortly"
    )]
    AnonymousFull(usize),
    #[error(
        "{0} of your requests are waiting for the embedded model already; try again when one is answered"
    )]
    RequesterFull(usize),
    #[error("the model thread has stopped")]
    Closed,
}

struct Lane<T> {
    requester: Requester,
    jobs: VecDeque<T>,
}

struct State<T> {
    known: VecDeque<Lane<T>>,
    anonymous: VecDeque<Lane<T>>,
    /// Whose turn the next request is when both kinds wait.
    anonymous_next: bool,
    closed: bool,
}

fn count<T>(lanes: &VecDeque<Lane<T>>) -> usize {
    lanes.iter().map(|l| l.jobs.len()).sum()
}

fn prune<T: Waiting>(lanes: &mut VecDeque<Lane<T>>) {
    for lane in lanes.iter_mut() {
        lane.jobs.retain(|job| !job.departed());
    }
    lanes.retain(|lane| !lane.jobs.is_empty());
}

impl<T: Waiting> State<T> {
    /// The next request to run, going round as the module says; departed
    /// ones are dropped on the way.
    fn take(&mut self) -> Option<T> {
        loop {
            let anonymous = match (self.known.is_empty(), self.anonymous.is_empty()) {
                (true, true) => return None,
                (true, false) => true,
                (false, true) => false,
                (false, false) => self.anonymous_next,
            };
            self.anonymous_next = !anonymous;
            let lanes = if anonymous {
                &mut self.anonymous
            } else {
                &mut self.known
            };
            let mut lane = lanes.pop_front()?;
            let job = lane.jobs.pop_front();
            if !lane.jobs.is_empty() {
                lanes.push_back(lane);
            }
            match job {
                Some(job) if !job.departed() => return Some(job),
                _ => {}
            }
        }
    }
}

/// Requests for the model thread: pushed from the async side, taken
/// (blocking) by the thread.
pub(crate) struct FairQueue<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
    limits: QueueLimits,
}

impl<T: Waiting> FairQueue<T> {
    pub(crate) fn new(limits: QueueLimits) -> Self {
        Self {
            state: Mutex::new(State {
                known: VecDeque::new(),
                anonymous: VecDeque::new(),
                anonymous_next: false,
                closed: false,
            }),
            ready: Condvar::new(),
            limits: QueueLimits {
                total: limits.total.max(1),
                per_requester: limits.per_requester.max(1),
            },
        }
    }

    /// Queues `job` for `requester`, or says why not.
    pub(crate) fn push(&self, requester: Requester, job: T) -> Result<(), QueueError> {
        let mut state = self.state.lock();
        if state.closed {
            return Err(QueueError::Closed);
        }
        prune(&mut state.known);
        prune(&mut state.anonymous);
        let total = count(&state.known) + count(&state.anonymous);
        if total >= self.limits.total {
            return Err(QueueError::Full(total));
        }
        let anonymous = requester.is_anonymous();
        if anonymous {
            let waiting = count(&state.anonymous);
            if waiting >= self.limits.anonymous() {
                return Err(QueueError::AnonymousFull(waiting));
            }
        }
        let lanes = if anonymous {
            &mut state.anonymous
        } else {
            &mut state.known
        };
        match lanes.iter_mut().find(|l| l.requester == requester) {
            Some(lane) if lane.jobs.len() >= self.limits.per_requester => {
                return Err(QueueError::RequesterFull(lane.jobs.len()));
            }
            Some(lane) => lane.jobs.push_back(job),
            None => lanes.push_back(Lane {
                requester,
                jobs: VecDeque::from([job]),
            }),
        }
        drop(state);
        self.ready.notify_one();
        Ok(())
    }

    /// The next request, waiting for one; `None` once the queue is closed
    /// and every request queued before is taken.
    pub(crate) fn pop(&self) -> Option<T> {
        let mut state = self.state.lock();
        loop {
            if let Some(job) = state.take() {
                return Some(job);
            }
            if state.closed {
                return None;
            }
            self.ready.wait(&mut state);
        }
    }

    /// No more requests: the thread finishes those queued, then stops.
    pub(crate) fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_all();
    }

    /// Requests waiting now (departed ones included until they are seen).
    pub(crate) fn len(&self) -> usize {
        let state = self.state.lock();
        count(&state.known) + count(&state.anonymous)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[derive(Clone, Debug)]
    struct Job {
        name: &'static str,
        gone: Arc<AtomicBool>,
    }

    impl Job {
        fn new(name: &'static str) -> Self {
            Self {
                name,
                gone: Arc::new(AtomicBool::new(false)),
            }
        }
    }

    impl Waiting for Job {
        fn departed(&self) -> bool {
            self.gone.load(Ordering::Relaxed)
        }
    }

    fn known(name: &str) -> Requester {
        Requester::Known(name.into())
    }

    fn anonymous(name: &str) -> Requester {
        Requester::Anonymous(name.into())
    }

    fn drain(queue: &FairQueue<Job>) -> Vec<&'static str> {
        queue.close();
        std::iter::from_fn(|| queue.pop()).map(|j| j.name).collect()
    }

    #[test]
    fn a_flood_from_one_requester_waits_behind_itself() {
        let queue = FairQueue::new(QueueLimits {
            total: 32,
            per_requester: 8,
        });
        for name in ["a1", "a2", "a3", "a4"] {
            queue.push(known("a"), Job::new(name)).unwrap();
        }
        queue.push(known("b"), Job::new("b1")).unwrap();
        queue.push(known("c"), Job::new("c1")).unwrap();
        assert_eq!(drain(&queue), ["a1", "b1", "c1", "a2", "a3", "a4"]);
    }

    #[test]
    fn known_and_anonymous_requesters_take_turns() {
        let queue = FairQueue::new(QueueLimits::default());
        for (i, name) in ["x1", "x2", "x3"].into_iter().enumerate() {
            let address = ["10.0.0.1", "10.0.0.2", "10.0.0.3"][i];
            queue.push(anonymous(address), Job::new(name)).unwrap();
        }
        queue.push(known("key"), Job::new("k1")).unwrap();
        queue.push(known("key"), Job::new("k2")).unwrap();
        // The anonymous pages came first, yet the key's requests alternate
        // with theirs rather than waiting behind all of them.
        assert_eq!(drain(&queue), ["k1", "x1", "k2", "x2", "x3"]);
    }

    #[test]
    fn the_queue_is_bounded_in_all_per_requester_and_for_anonymous_pages() {
        let queue = FairQueue::new(QueueLimits {
            total: 6,
            per_requester: 2,
        });
        queue.push(known("a"), Job::new("a1")).unwrap();
        queue.push(known("a"), Job::new("a2")).unwrap();
        assert_eq!(
            queue.push(known("a"), Job::new("a3")),
            Err(QueueError::RequesterFull(2))
        );
        queue.push(anonymous("1"), Job::new("x1")).unwrap();
        queue.push(anonymous("2"), Job::new("x2")).unwrap();
        queue.push(anonymous("3"), Job::new("x3")).unwrap();
        // Half the queue is the anonymous pages' most.
        assert_eq!(
            queue.push(anonymous("4"), Job::new("x4")),
            Err(QueueError::AnonymousFull(3))
        );
        queue.push(known("b"), Job::new("b1")).unwrap();
        assert_eq!(
            queue.push(known("c"), Job::new("c1")),
            Err(QueueError::Full(6))
        );
        assert_eq!(queue.len(), 6);
    }

    #[test]
    fn a_departed_requesters_jobs_are_dropped_unrun_and_free_their_places() {
        let queue = FairQueue::new(QueueLimits {
            total: 2,
            per_requester: 2,
        });
        let left = Job::new("left");
        queue.push(known("a"), left.clone()).unwrap();
        queue.push(known("a"), Job::new("stays")).unwrap();
        assert_eq!(
            queue.push(known("b"), Job::new("b1")),
            Err(QueueError::Full(2))
        );
        left.gone.store(true, Ordering::Relaxed);
        queue.push(known("b"), Job::new("b1")).unwrap();
        assert_eq!(drain(&queue), ["stays", "b1"]);
    }

    #[test]
    fn a_closed_queue_gives_what_it_held_then_nothing_and_takes_no_more() {
        let queue: Arc<FairQueue<Job>> = Arc::new(FairQueue::new(QueueLimits::default()));
        let worker = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || {
                std::iter::from_fn(|| queue.pop())
                    .map(|j| j.name)
                    .collect::<Vec<_>>()
            })
        };
        queue.push(known("a"), Job::new("a1")).unwrap();
        queue.close();
        assert_eq!(
            queue.push(known("a"), Job::new("a2")),
            Err(QueueError::Closed)
        );
        assert_eq!(worker.join().unwrap(), ["a1"]);
    }
}
