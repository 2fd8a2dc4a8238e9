//! What the accept loop listens on and serves: a TCP listener, or a Unix
//! socket whose file permissions decide who may connect (docs/proxy.md "Listening
//! on a Unix socket"); their connections, and the peer at the other end.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};

use socket2::SockRef;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio_util::either::Either;

/// Each accepted connection's kernel send buffer (`SO_SNDBUF`; Linux
/// doubles it for its bookkeeping). Left to itself, the kernel grows a TCP
/// socket's up to `net.ipv4.tcp_wmem`'s 4 MiB for a client that stops
/// reading, and a Unix socket's is 208 KiB: an answer's unread bytes sit
/// there, out of lanyard's RSS, but a cgroup v2 memory limit counts them
/// as lanyard's. Capped, a connection holds at most this twice over, and
/// the rest of an answer waits upstream, timed (docs/proxy.md "Limits").
/// An answer still leaves in writes of up to this size.
const SEND_BUFFER: usize = 32 * 1024;

/// A listener, registered with the runtime that accepts on it.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// A listener out of any runtime, to hand to another thread.
#[derive(Debug)]
pub enum StdListener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// One accepted connection; either kind reads and writes alike.
pub type Stream = Either<TcpStream, UnixStream>;

/// A connection out of any runtime, handed to another thread.
pub(super) enum StdStream {
    Tcp(std::net::TcpStream),
    Unix(std::os::unix::net::UnixStream),
}

/// Who is at the other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    Tcp(SocketAddr),
    /// A process on this host, through the Unix socket: it has no address,
    /// and the socket's permissions already said who it may be.
    Unix,
}

impl Peer {
    /// The address a per-client rule keys on. A Unix socket's peers are
    /// all local, as loopback's are, and count as one loopback client.
    pub fn ip(&self) -> IpAddr {
        match self {
            Peer::Tcp(addr) => addr.ip(),
            Peer::Unix => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Tcp(addr) => addr.fmt(f),
            Peer::Unix => f.write_str("unix socket"),
        }
    }
}

impl Listener {
    pub(super) async fn accept(&self) -> io::Result<(Stream, Peer)> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, addr) = listener.accept().await?;
                // Requests are small and latency-bound; Nagle only adds
                // delay.
                let _ = stream.set_nodelay(true);
                // Best effort, as Nagle's: a socket that refuses keeps the
                // kernel's size.
                let _ = SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER);
                Ok((Either::Left(stream), Peer::Tcp(addr)))
            }
            Listener::Unix(listener) => {
                let (stream, _) = listener.accept().await?;
                let _ = SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER);
                Ok((Either::Right(stream), Peer::Unix))
            }
        }
    }

    /// Out of this runtime, for a thread of its own.
    pub fn into_std(self) -> io::Result<StdListener> {
        match self {
            Listener::Tcp(listener) => listener.into_std().map(StdListener::Tcp),
            Listener::Unix(listener) => listener.into_std().map(StdListener::Unix),
        }
    }

    /// The TCP address, when it is a TCP listener.
    pub fn local_addr(&self) -> Option<io::Result<SocketAddr>> {
        match self {
            Listener::Tcp(listener) => Some(listener.local_addr()),
            Listener::Unix(_) => None,
        }
    }
}

impl StdListener {
    /// Another handle on the same listener, for another thread.
    pub fn try_clone(&self) -> io::Result<StdListener> {
        match self {
            StdListener::Tcp(listener) => listener.try_clone().map(StdListener::Tcp),
            StdListener::Unix(listener) => listener.try_clone().map(StdListener::Unix),
        }
    }

    /// Registered with the calling thread's runtime.
    pub fn into_tokio(self) -> io::Result<Listener> {
        match self {
            StdListener::Tcp(listener) => TcpListener::from_std(listener).map(Listener::Tcp),
            StdListener::Unix(listener) => UnixListener::from_std(listener).map(Listener::Unix),
        }
    }
}

impl StdStream {
    pub(super) fn of(stream: Stream) -> io::Result<StdStream> {
        match stream {
            Either::Left(stream) => stream.into_std().map(StdStream::Tcp),
            Either::Right(stream) => stream.into_std().map(StdStream::Unix),
        }
    }

    pub(super) fn into_tokio(self) -> io::Result<Stream> {
        match self {
            StdStream::Tcp(stream) => TcpStream::from_std(stream).map(Either::Left),
            StdStream::Unix(stream) => UnixStream::from_std(stream).map(Either::Right),
        }
    }
}
