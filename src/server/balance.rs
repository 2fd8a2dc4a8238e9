//! The accept loops of one listener, one per proxy thread, sharing its
//! connection limit and keeping their numbers of connections even.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::clients::{ClientSlot, PerClient};
use super::socket::StdStream;
use super::{Limits, Peer, Stream};

/// As many bytes of HTTP/2 request headers as the connection limit's worth
/// of full HTTP/1.1 request heads: so HTTP/2 can hold no more header
/// memory than HTTP/1.1 can (docs/proxy.md "Limits"), while thousands of streams
/// with ordinary small headers fit.
fn header_budget(limits: &Limits) -> usize {
    limits
        .max_connections
        .saturating_mul(limits.max_header_bytes)
        .min(Semaphore::MAX_PERMITS)
}

/// One accept loop's part in a group that serves one listener from
/// several threads: the group's members share the listener's connection
/// limit and keep their threads' numbers of connections even.
///
/// Threads woken together by a new connection race to accept it, and the
/// one with the least to do wins, so the connections of a burst pile up
/// on whichever thread was idle at that instant. In the benchmark one
/// thread held twice the other's connections, and a request cost a fifth
/// more CPU at 256 connections than with them even (bench/run.sh). So a
/// thread that accepts a connection while another serves fewer hands it
/// over.
pub struct Member {
    index: usize,
    pub(super) group: Arc<Group>,
    pub(super) inbox: mpsc::UnboundedReceiver<Handed>,
}

pub(super) struct Group {
    pub(super) slots: Arc<Semaphore>,
    /// Each client's connections, when the listener caps them.
    pub(super) clients: Option<Arc<PerClient>>,
    /// Header bytes of the HTTP/2 requests in flight across the group's
    /// connections, one permit a byte.
    pub(super) header_bytes: Arc<Semaphore>,
    /// HTTP/2 answers being sent across the group's connections
    /// (`Limits::max_streams`).
    pub(super) streams: Arc<Semaphore>,
    /// Connections each member serves, counting those handed to it and
    /// not yet picked up.
    open: Box<[AtomicUsize]>,
    inboxes: Box<[mpsc::UnboundedSender<Handed>]>,
}

/// A connection accepted by one member for another to serve.
pub(super) struct Handed {
    stream: StdStream,
    peer: Peer,
    held: Held,
    counted: Counted,
}

/// What a connection holds of its listener's limits, until dropped: a slot
/// under the connection limit, and one in its client's count when the
/// listener caps clients.
#[expect(
    dead_code,
    reason = "each field is held for its Drop, which gives the place back"
)]
pub(super) struct Held {
    pub(super) slot: OwnedSemaphorePermit,
    pub(super) client: Option<ClientSlot>,
}

/// One connection in its member's count, until dropped.
pub(super) struct Counted {
    group: Arc<Group>,
    index: usize,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.group.open[self.index].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Member {
    /// The members of a group of `members` accept loops, one for each,
    /// sharing `limits`' connection slots, per-client counts and header
    /// budget.
    pub fn group(limits: &Limits, members: usize) -> Vec<Member> {
        let (inboxes, receivers): (Vec<_>, Vec<_>) = (0..members.max(1))
            .map(|_| mpsc::unbounded_channel())
            .unzip();
        let group = Arc::new(Group {
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            clients: limits
                .per_client
                .as_ref()
                .map(|cap| PerClient::new(cap.max_connections)),
            header_bytes: Arc::new(Semaphore::new(header_budget(limits))),
            streams: Arc::new(Semaphore::new(
                limits.max_streams.min(Semaphore::MAX_PERMITS),
            )),
            open: inboxes.iter().map(|_| AtomicUsize::new(0)).collect(),
            inboxes: inboxes.into(),
        });
        receivers
            .into_iter()
            .enumerate()
            .map(|(index, inbox)| Member {
                index,
                group: group.clone(),
                inbox,
            })
            .collect()
    }

    /// The member of an accept loop that serves its listener alone.
    pub fn alone(limits: &Limits) -> Member {
        let mut members = Member::group(limits, 1);
        members
            .pop()
            .unwrap_or_else(|| unreachable!("a group of one"))
    }

    pub(super) fn count(&self, index: usize) -> Counted {
        self.group.open[index].fetch_add(1, Ordering::Relaxed);
        Counted {
            group: self.group.clone(),
            index,
        }
    }

    /// The member serving the fewest connections, if it serves fewer than
    /// this one.
    fn less_busy(&self) -> Option<usize> {
        let open = |index: usize| self.group.open[index].load(Ordering::Relaxed);
        let least = (0..self.group.open.len()).min_by_key(|&index| open(index))?;
        (open(least) < open(self.index)).then_some(least)
    }

    /// Counts a connection accepted here, and hands it to a less busy
    /// member if there is one; gives it back when it stays here.
    pub(super) fn place(&self, stream: Stream, peer: Peer, held: Held) -> Option<Taken> {
        let Some(other) = self.less_busy() else {
            return Some(Taken {
                stream,
                peer,
                counted: self.count(self.index),
                held,
            });
        };
        // Leaving this thread's reactor is a system call that cannot fail
        // for an open socket; should it, the connection is lost either way.
        let stream = match StdStream::of(stream) {
            Ok(stream) => stream,
            Err(err) => {
                tracing::warn!(error = %err, %peer, "cannot hand a connection to another proxy thread");
                return None;
            }
        };
        // Counted at once: the next connection, accepted before the other
        // thread picks this one up, must see it.
        let handed = Handed {
            stream,
            peer,
            held,
            counted: self.count(other),
        };
        match self.group.inboxes[other].send(handed) {
            Ok(()) => None,
            // That thread has stopped accepting (it closes its inbox as it
            // stops): this one serves the connection itself.
            Err(mpsc::error::SendError(handed)) => {
                let counted = self.count(self.index);
                match handed.stream.into_tokio() {
                    Ok(stream) => Some(Taken {
                        stream,
                        peer,
                        counted,
                        held: handed.held,
                    }),
                    Err(err) => {
                        tracing::warn!(error = %err, %peer, "cannot take back a connection another proxy thread refused");
                        None
                    }
                }
            }
        }
    }
}

/// A connection to serve, with its place in the counts and the limits.
pub(super) struct Taken {
    pub(super) stream: Stream,
    pub(super) peer: Peer,
    pub(super) counted: Counted,
    pub(super) held: Held,
}

/// A connection another thread handed over, registered with this one.
pub(super) fn take(handed: Handed) -> Option<Taken> {
    match handed.stream.into_tokio() {
        Ok(stream) => Some(Taken {
            stream,
            peer: handed.peer,
            counted: handed.counted,
            held: handed.held,
        }),
        Err(err) => {
            tracing::warn!(error = %err, peer = %handed.peer, "cannot take a connection from another proxy thread");
            None
        }
    }
}
