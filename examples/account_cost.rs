//! The heap bytes a directory's account costs (docs/accounts.md, "Fleet
//! arithmetic"), counted by a counting global allocator rather than read
//! from RSS: per file loaded, per account built (its exchanger and
//! refresher), and per account once called (its first token).
//!
//! ```text
//! cargo run --example mock_service -- DIR --accounts N --expires-in 3600 &
//! cargo run --example account_cost -- DIR/accounts
//! ```
//!
//! The mock prints `accounts_dir=DIR/accounts` once it serves. Heap bytes
//! are what lanyard asked the allocator for; RSS adds the allocator's own
//! overhead and fragmentation, which `bench/accounts.sh` measures on a
//! release build.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use lanyard::accounts::{AccountRules, MAX_TOKEN_REQUESTS_IN_FLIGHT};
use lanyard::config::Source;
use lanyard::config::accounts::load_dir;
use lanyard::metrics::Metrics;
use lanyard::token::{ExchangeOptions, RefreshPolicy, SystemClock, TokenClient};
use tokio::sync::Semaphore;

/// Bytes allocated and not yet freed, by every thread.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: every call is passed to the system allocator unchanged; the
// counter only adds up the sizes it was asked for.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::SeqCst)
}

fn per(what: &str, bytes: isize, count: usize) {
    let each = bytes as f64 / count.max(1) as f64;
    println!(
        "{what}: {bytes} bytes, {each:.0} bytes ({:.2} KiB) each",
        each / 1024.0
    );
}

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: account_cost ACCOUNTS_DIR");
        return ExitCode::from(2);
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(measure(dir))
}

async fn measure(dir: PathBuf) -> ExitCode {
    let timeout = Duration::from_secs(10);
    let exchange = ExchangeOptions {
        assertion_ttl: Duration::from_secs(300),
        clock_skew: Duration::from_secs(30),
        rfc7523_fields: true,
        timeout,
    };
    let connector = lanyard::outbound::connector(
        lanyard::outbound::tls_config(None).expect("TLS configuration"),
    );
    let rules = AccountRules {
        client: Arc::new(TokenClient::new(
            exchange.clone(),
            connector,
            Arc::new(SystemClock),
        )),
        exchange,
        policy: RefreshPolicy::default(),
        rejection_wait: timeout,
        metrics: Metrics::unregistered(),
        permits: Arc::new(Semaphore::new(MAX_TOKEN_REQUESTS_IN_FLIGHT)),
    };
    let start = live();
    let files = match load_dir(&dir, &Source::Default, timeout) {
        Ok(files) => files,
        Err(problems) => {
            eprintln!("account_cost: {}", problems.join("; "));
            return ExitCode::FAILURE;
        }
    };
    let count = files.len();
    let loaded = live();
    per(
        "a file loaded (credentials, parsed key)",
        loaded - start,
        count,
    );
    let accounts: Vec<_> = files
        .into_iter()
        .map(|file| Arc::new(rules.directory_account(file)))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let built = live();
    per(
        "an account built (exchanger, refresher)",
        built - loaded,
        count,
    );
    let mut calls = tokio::task::JoinSet::new();
    let mut failed = 0;
    for account in &accounts {
        if calls.len() >= 16 {
            failed += usize::from(!matches!(calls.join_next().await, Some(Ok(true))));
        }
        let tokens = account.tokens().clone();
        calls.spawn(async move { tokens.get().await.is_ok() });
    }
    while let Some(done) = calls.join_next().await {
        failed += usize::from(!matches!(done, Ok(true)));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let called = live();
    per(
        "an account called once (its first token)",
        called - built,
        count,
    );
    per("in all, per account called", called - start, count);
    if failed > 0 {
        eprintln!("account_cost: {failed} of {count} accounts got no token");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
