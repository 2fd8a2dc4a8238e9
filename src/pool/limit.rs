//! The process-wide cap on upstream connections
//! (`LANYARD_MAX_UPSTREAM_CONNECTIONS`), shared by every proxy thread's
//! pool, and the bookkeeping that keeps one thread's connections from
//! starving another's requests.
//!
//! Each open connection holds one permit of a semaphore, from before it
//! dials until its connection task ends. A request that finds neither an
//! idle connection in its own pool nor a free permit waits for either
//! (`Pool::wait`), and counts itself in [`UpstreamLimit::waiting`] so that
//! other threads know a permit is wanted. Each pool's own waiters are
//! counted too; "waiting elsewhere" is the difference.
//!
//! The rule, so that permits held by connections pooled on one thread
//! reach requests waiting on another (`UpstreamLimit::wanted_elsewhere`):
//! an HTTP/1 connection with no exchange in progress is closed, not kept
//! idle, while requests wait elsewhere and either its pool has no waiter
//! of its own, or its pool holds more than an even share of the limit
//! (the limit over the number of pools). The first part frees what a quiet
//! thread holds; the second stops a thread under sustained load from
//! handing every permit from one of its requests to the next while
//! another thread's requests time out. The rule is applied
//!
//! - when a connection is given back (`Pool::release`);
//! - when a request stops waiting, to what is idle in its pool;
//! - by the task of each connection idle in another pool, woken when a
//!   request starts waiting where none did: the pools of quiet threads run
//!   no code of their own to notice. Only then, so that thousands of
//!   queued requests do not each scan every connection: while any request
//!   waits, the first two cases keep connections from going idle.
//!
//! A freed permit goes to the request waiting longest, whichever thread
//! it is on (tokio's semaphore is first come, first served). A quiet
//! thread may lose all its idle connections to one request waiting
//! elsewhere: they are cheap to open again, and only a process at its
//! limit sheds them. The shared HTTP/2 connection is not shed (hyper does
//! not tell whether it has streams open); a thread holds at most one for
//! long, so a limit of at least the number of proxy threads keeps it from
//! starving another.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Poll, Waker};

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

/// The process-wide cap on upstream connections, shared by every proxy
/// thread's pool: each open connection holds one of its permits.
#[derive(Clone)]
pub struct UpstreamLimit {
    permits: Arc<Semaphore>,
    state: Arc<LimitState>,
}

struct LimitState {
    max: usize,
    /// Requests, on any thread, waiting for a permit.
    waiting: AtomicUsize,
    /// Pools sharing the limit: one per proxy thread.
    pools: AtomicUsize,
    /// Every open HTTP/1 connection's task, to wake those idle when a
    /// request starts waiting. Locked as connections open and close, and
    /// when the first request starts waiting; never for a request that
    /// finds a connection.
    tasks: Mutex<Tasks>,
}

#[derive(Default)]
struct Tasks {
    next: u64,
    watched: HashMap<u64, Watched>,
}

/// An HTTP/1 connection as the limit sees it.
struct Watched {
    /// The counts of the pool it belongs to.
    pool: Arc<Counts>,
    /// Whether it sits idle in that pool.
    idle: Arc<AtomicBool>,
    /// Its connection's task.
    task: Waker,
}

impl UpstreamLimit {
    /// A cap of `max_connections` open connections.
    pub fn new(max_connections: usize) -> UpstreamLimit {
        UpstreamLimit {
            permits: Arc::new(Semaphore::new(max_connections)),
            state: Arc::new(LimitState {
                max: max_connections,
                waiting: AtomicUsize::new(0),
                pools: AtomicUsize::new(0),
                tasks: Mutex::new(Tasks::default()),
            }),
        }
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.state.max
    }

    /// Permits no connection holds: how many more connections may open now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// Connections open, or being opened, in every pool together.
    #[cfg(test)]
    pub fn in_use(&self) -> usize {
        self.max().saturating_sub(self.available())
    }

    /// Requests, on every thread, waiting for a connection.
    pub fn waiting(&self) -> usize {
        // SeqCst pairs with the idle mark's store: see `Pool::release`.
        self.state.waiting.load(Ordering::SeqCst)
    }

    /// Most connections one pool may keep from requests waiting on another
    /// thread.
    fn fair_share(&self) -> usize {
        let pools = self.state.pools.load(Ordering::Relaxed).max(1);
        (self.max() / pools).max(1)
    }

    /// Counts a new pool for [`UpstreamLimit::fair_share`].
    pub(super) fn join(&self) -> PoolCount {
        self.state.pools.fetch_add(1, Ordering::Relaxed);
        PoolCount {
            limit: self.clone(),
            counts: Arc::new(Counts::default()),
        }
    }

    /// Whether a connection idle in the pool counted by `counts` should
    /// close so that its permit reaches a request waiting on another
    /// thread: the rule in the module doc.
    pub(super) fn wanted_elsewhere(&self, counts: &Counts) -> bool {
        let local = counts.waiters.load(Ordering::Relaxed);
        self.waiting() > local
            && (local == 0 || counts.open.load(Ordering::Relaxed) > self.fair_share())
    }

    /// Completes once `idle` marks its connection idle in the pool counted
    /// by `pool` while the rule wants it closed: the connection's task then
    /// drops the connection, and the permit with it.
    ///
    /// Only for the body of a connection's own task: the task's waker is
    /// registered once, as it starts, and not again at every poll as a
    /// future's contract asks. A spawned task's waker wakes it for as long
    /// as it lives, and registering again would take a lock shared by every
    /// thread each time the connection has something to do. Between
    /// wake-ups the check costs one atomic load.
    pub(super) async fn until_wanted_elsewhere(&self, pool: Arc<Counts>, idle: Arc<AtomicBool>) {
        let task = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        let watched = self.watch(Watched {
            pool,
            idle: idle.clone(),
            task,
        });
        std::future::poll_fn(|_| {
            // Marked idle before its pool looks for waiters, and waiters
            // counted before they wake anyone (`PoolCount::wait`): SeqCst
            // on both sides means one of the two sees the other.
            if idle.load(Ordering::SeqCst) && self.wanted_elsewhere(&watched.pool) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }

    fn watch(&self, watched: Watched) -> WatchedTask<'_> {
        let pool = watched.pool.clone();
        let mut tasks = self.lock_tasks();
        let id = tasks.next;
        tasks.next += 1;
        tasks.watched.insert(id, watched);
        WatchedTask {
            limit: self,
            id,
            pool,
        }
    }

    /// Wakes the task of every connection idle in a pool other than
    /// `waiting`'s, so that it closes if the rule says so.
    fn wake_idle_elsewhere(&self, waiting: &Arc<Counts>) {
        let tasks = self.lock_tasks();
        for watched in tasks.watched.values() {
            if !Arc::ptr_eq(&watched.pool, waiting) && watched.idle.load(Ordering::SeqCst) {
                watched.task.wake_by_ref();
            }
        }
    }

    fn lock_tasks(&self) -> std::sync::MutexGuard<'_, Tasks> {
        // The map is whole after any panic: each change is one call.
        self.state
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A connection's task known to the limit, until dropped with the task.
struct WatchedTask<'a> {
    limit: &'a UpstreamLimit,
    id: u64,
    pool: Arc<Counts>,
}

impl Drop for WatchedTask<'_> {
    fn drop(&mut self) {
        self.limit.lock_tasks().watched.remove(&self.id);
    }
}

/// A pool's share in the limit: its waiting requests and its open
/// connections, which the rule in the module doc weighs against the
/// other threads'. Dropped with its pool, it leaves the count of pools.
pub(super) struct PoolCount {
    limit: UpstreamLimit,
    counts: Arc<Counts>,
}

/// Shared with the pool's connection tasks, which may run on any thread
/// of the runtime that spawned them.
#[derive(Default)]
pub(super) struct Counts {
    waiters: AtomicUsize,
    open: AtomicUsize,
}

impl PoolCount {
    pub(super) fn limit(&self) -> &UpstreamLimit {
        &self.limit
    }

    /// A permit, if one is free; never waits.
    pub(super) fn try_acquire(&self) -> Option<Permit> {
        let permit = self.limit.permits.clone().try_acquire_owned().ok()?;
        Some(Permit::new(permit, self))
    }

    /// Waits for a permit, in turn with every other waiting request.
    pub(super) async fn acquire(&self) -> Result<Permit, AcquireError> {
        let permit = self.limit.permits.clone().acquire_owned().await?;
        Ok(Permit::new(permit, self))
    }

    /// [`UpstreamLimit::wanted_elsewhere`] for this pool.
    pub(super) fn wanted_elsewhere(&self) -> bool {
        self.limit.wanted_elsewhere(&self.counts)
    }

    /// Whether requests on this pool's thread wait for a connection; a
    /// request that arrives then queues behind them rather than taking the
    /// connection just given back for the first of them.
    pub(super) fn has_waiters(&self) -> bool {
        self.counts.waiters.load(Ordering::Relaxed) > 0
    }

    /// Counts a request as waiting until the returned guard is dropped.
    pub(super) fn wait(&self) -> Waiting<'_> {
        self.counts.waiters.fetch_add(1, Ordering::Relaxed);
        // Only the first waiter wakes idle connections elsewhere: while any
        // request waits, connections given back elsewhere close as they are
        // given back, so only those idle from before need waking.
        if self.limit.state.waiting.fetch_add(1, Ordering::SeqCst) == 0 {
            self.limit.wake_idle_elsewhere(&self.counts);
        }
        Waiting { pool: self }
    }
}

impl Drop for PoolCount {
    fn drop(&mut self) {
        self.limit.state.pools.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One waiting request; see [`PoolCount::wait`].
pub(super) struct Waiting<'a> {
    pool: &'a PoolCount,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.pool.limit.state.waiting.fetch_sub(1, Ordering::SeqCst);
        self.pool.counts.waiters.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A permit for one connection, counted in its pool's open connections
/// until dropped: with the connection's task when the connection ends, or
/// at once should connecting fail.
pub(super) struct Permit {
    _permit: OwnedSemaphorePermit,
    counts: Arc<Counts>,
}

impl Permit {
    fn new(permit: OwnedSemaphorePermit, pool: &PoolCount) -> Permit {
        pool.counts.open.fetch_add(1, Ordering::Relaxed);
        Permit {
            _permit: permit,
            counts: pool.counts.clone(),
        }
    }

    /// The counts of the pool the connection belongs to, which its task
    /// weighs to decide to close.
    pub(super) fn counts(&self) -> Arc<Counts> {
        self.counts.clone()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.counts.open.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limit of `max` shared by `pools` pools.
    fn limit(max: usize, pools: usize) -> (UpstreamLimit, Vec<PoolCount>) {
        let limit = UpstreamLimit::new(max);
        let counts = (0..pools).map(|_| limit.join()).collect();
        (limit, counts)
    }

    #[test]
    fn permits_are_held_until_dropped_and_counted_per_pool() {
        let (limit, pools) = limit(2, 2);
        let first = pools[0].try_acquire().expect("a free permit");
        let second = pools[1].try_acquire().expect("a free permit");
        assert!(pools[0].try_acquire().is_none(), "the limit is reached");
        assert_eq!((limit.available(), limit.in_use()), (0, 2));
        assert_eq!(pools[0].counts.open.load(Ordering::Relaxed), 1);
        drop(first);
        assert_eq!(limit.available(), 1);
        assert_eq!(pools[0].counts.open.load(Ordering::Relaxed), 0);
        drop(second);
        assert_eq!(limit.available(), 2);
    }

    #[test]
    fn nothing_is_wanted_elsewhere_while_no_request_waits() {
        let (_limit, pools) = limit(2, 2);
        let _held = [pools[0].try_acquire(), pools[0].try_acquire()];
        assert!(!pools[0].wanted_elsewhere());
        assert!(!pools[1].wanted_elsewhere());
    }

    #[test]
    fn a_pool_without_waiters_gives_connections_up_to_a_request_waiting_elsewhere() {
        let (limit, pools) = limit(2, 2);
        let _held = [pools[0].try_acquire(), pools[0].try_acquire()];
        let waiting = pools[1].wait();
        assert_eq!(limit.waiting(), 1);
        assert!(pools[0].wanted_elsewhere(), "the quiet pool gives up");
        assert!(
            !pools[1].wanted_elsewhere(),
            "its own waiter is not elsewhere"
        );
        drop(waiting);
        assert_eq!(limit.waiting(), 0);
        assert!(!pools[0].wanted_elsewhere());
    }

    #[test]
    fn a_pool_within_its_share_keeps_connections_for_its_own_waiters() {
        let (_limit, pools) = limit(4, 2);
        let _held = [pools[0].try_acquire(), pools[0].try_acquire()];
        let _own = pools[0].wait();
        let _elsewhere = pools[1].wait();
        assert!(!pools[0].wanted_elsewhere(), "2 of 4 is an even share");
    }

    #[test]
    fn a_pool_over_its_share_gives_connections_up_even_with_waiters_of_its_own() {
        let (_limit, pools) = limit(4, 2);
        let _held = [(); 3].map(|()| pools[0].try_acquire());
        let _own = pools[0].wait();
        assert!(
            !pools[0].wanted_elsewhere(),
            "no request waits elsewhere yet"
        );
        let _elsewhere = pools[1].wait();
        assert!(pools[0].wanted_elsewhere(), "3 of 4 is over an even share");
    }

    #[test]
    fn a_pool_dropped_leaves_the_share_to_the_others() {
        let (limit, mut pools) = limit(4, 2);
        assert_eq!(limit.fair_share(), 2);
        pools.pop();
        assert_eq!(limit.fair_share(), 4);
        pools.pop();
        assert_eq!(limit.fair_share(), 4, "no pool: the whole limit");
        assert_eq!(UpstreamLimit::new(1).join().limit().fair_share(), 1);
    }
}
