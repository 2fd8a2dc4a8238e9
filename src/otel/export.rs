//! Spans out of the request path: a bounded queue in front of the OTLP
//! exporter, drained in batches by one thread of its own, so that a slow
//! or unreachable collector costs a request nothing but a `try_send` that
//! fails; every span that never reaches the collector is counted in
//! `lanyard_otel_spans_dropped_total`.
//!
//! This stands in for the SDK's `BatchSpanProcessor`, with its
//! `OTEL_BSP_*` settings and batching, for two reasons: that processor
//! keeps its drop count to itself (it only logs it at shutdown), and it
//! runs the exporter on a thread with no tokio runtime, where lanyard's
//! hyper client (its TLS roots, `LANYARD_CA_FILE`) cannot run. A gate
//! counting in front of it would have had to mirror its queue from the
//! outside; owning the queue makes the count exact.
//!
//! Counted as dropped: a span that finds the queue full (the collector is
//! slower than the spans come), and the spans of an export that failed or
//! timed out (the exporter already retried within its timeout), and of
//! one still queued when the exit's bound ran out.

use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use prometheus::IntCounter;
use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, MissedTickBehavior};

use super::settings::BatchOptions;
use crate::throttle::{self, Throttle};

/// The span processor: the queue's sending end and the export thread's
/// controls.
#[derive(Debug)]
pub struct BoundedProcessor {
    queue: mpsc::Sender<SpanData>,
    dropped: IntCounter,
    thread: Mutex<Option<Thread>>,
}

/// The export thread: told to stop with the time it has left, and telling
/// when it has.
#[derive(Debug)]
struct Thread {
    stop: oneshot::Sender<Duration>,
    stopped: std::sync::mpsc::Receiver<()>,
    handle: JoinHandle<()>,
}

impl BoundedProcessor {
    /// Starts the export thread, its own current-thread runtime running
    /// `exporter`.
    pub fn start<E: SpanExporter + 'static>(
        exporter: E,
        options: BatchOptions,
        dropped: IntCounter,
    ) -> std::io::Result<BoundedProcessor> {
        let (queue, queued) = mpsc::channel(options.max_queue);
        let (stop, stopping) = oneshot::channel();
        let (done, stopped) = std::sync::mpsc::channel();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let exporting = Exporting {
            exporter,
            queued,
            batch: Vec::with_capacity(options.max_batch),
            options,
            dropped: dropped.clone(),
            failures: Throttle::new(throttle::EVERY_MINUTE),
        };
        let handle = std::thread::Builder::new()
            .name("lanyard-otel".into())
            .spawn(move || {
                runtime.block_on(exporting.run(stopping));
                let _ = done.send(());
            })?;
        Ok(BoundedProcessor {
            queue,
            dropped,
            thread: Mutex::new(Some(Thread {
                stop,
                stopped,
                handle,
            })),
        })
    }
}

impl SpanProcessor for BoundedProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    /// On the request's own thread: never waits.
    fn on_end(&self, span: SpanData) {
        // A span recorded but not sampled is not exported (the SDK's own
        // processors do the same).
        if !span.span_context.is_sampled() {
            return;
        }
        if self.queue.try_send(span).is_err() {
            self.dropped.inc();
        }
    }

    /// Nothing asks for a flush but the exit, which is
    /// [`Self::shutdown_with_timeout`].
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    /// Exports what is queued within `timeout`, then stops the thread;
    /// returns by then whatever the collector does.
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(thread) = thread else {
            return Err(OTelSdkError::AlreadyShutdown);
        };
        let _ = thread.stop.send(timeout);
        // The thread bounds its last exports by `timeout` itself; the
        // margin covers handing the batch over. Past it the thread is left
        // to the process's exit.
        match thread
            .stopped
            .recv_timeout(timeout + Duration::from_millis(200))
        {
            Ok(()) => {
                let _ = thread.handle.join();
                Ok(())
            }
            Err(_) => Err(OTelSdkError::Timeout(timeout)),
        }
    }
}

/// The export thread's state: the queue's receiving end and the batch
/// being filled.
struct Exporting<E> {
    exporter: E,
    queued: mpsc::Receiver<SpanData>,
    batch: Vec<SpanData>,
    options: BatchOptions,
    dropped: IntCounter,
    /// Failed exports, logged at most once a minute: a collector down for
    /// an hour must not become a line per batch.
    failures: Throttle,
}

impl<E: SpanExporter> Exporting<E> {
    /// Batches spans as they come and exports a batch when it is full or
    /// the schedule delay has passed, until told to stop; then flushes
    /// within the bound it was told.
    async fn run(mut self, mut stop: oneshot::Receiver<Duration>) {
        let mut tick = tokio::time::interval(self.options.schedule_delay);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let deadline = loop {
            let due = tokio::select! {
                biased;
                bound = &mut stop => break Instant::now() + bound.unwrap_or(Duration::ZERO),
                span = self.queued.recv() => match span {
                    Some(span) => {
                        self.batch.push(span);
                        self.batch.len() >= self.options.max_batch
                    }
                    // Every sender gone: the processor was dropped unasked.
                    None => break Instant::now(),
                },
                _ = tick.tick() => !self.batch.is_empty(),
            };
            if due && let Some(deadline) = self.export_or_stop(&mut stop).await {
                break deadline;
            }
        };
        self.flush(deadline).await;
        let _ = self.exporter.shutdown_with_timeout(Duration::ZERO);
    }

    /// Exports the batch within the export timeout; should the stop come
    /// meanwhile, the export in flight gets what the exit's bound leaves,
    /// and the deadline is returned.
    async fn export_or_stop(&mut self, stop: &mut oneshot::Receiver<Duration>) -> Option<Instant> {
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(self.options.max_batch));
        let spans = batch.len() as u64;
        let limit = self.options.export_timeout;
        let export = tokio::time::timeout(limit, self.exporter.export(batch));
        tokio::pin!(export);
        let (result, stopped) = tokio::select! {
            biased;
            result = &mut export => (result, None),
            bound = stop => {
                let deadline = Instant::now() + bound.unwrap_or(Duration::ZERO);
                let result = tokio::time::timeout_at(deadline, export).await.unwrap_or_else(Err);
                (result, Some(deadline))
            }
        };
        self.settle(result, spans, limit);
        stopped
    }

    /// The exit: every span still queued exported by `deadline`, or
    /// counted as dropped.
    async fn flush(&mut self, deadline: Instant) {
        // Spans that end from now on find the queue closed, and are
        // counted by `on_end`.
        self.queued.close();
        while let Ok(span) = self.queued.try_recv() {
            self.batch.push(span);
            if self.batch.len() >= self.options.max_batch {
                self.export(deadline.saturating_duration_since(Instant::now()))
                    .await;
            }
        }
        if !self.batch.is_empty() {
            self.export(deadline.saturating_duration_since(Instant::now()))
                .await;
        }
    }

    /// Exports the batch within `limit`; its spans are counted as dropped
    /// if that fails.
    async fn export(&mut self, limit: Duration) {
        let batch = std::mem::replace(&mut self.batch, Vec::with_capacity(self.options.max_batch));
        let spans = batch.len() as u64;
        let result = tokio::time::timeout(limit, self.exporter.export(batch)).await;
        self.settle(result, spans, limit);
    }

    /// Counts an export's spans as dropped, and logs (at most once a
    /// minute), unless it succeeded.
    fn settle(
        &self,
        result: Result<OTelSdkResult, tokio::time::error::Elapsed>,
        spans: u64,
        limit: Duration,
    ) {
        let why = match result {
            Ok(Ok(())) => return,
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!("no answer within {} ms", limit.as_millis()),
        };
        self.dropped.inc_by(spans);
        if let Some(held_back) = self.failures.due(Instant::now()) {
            tracing::warn!(
                error = %why,
                spans,
                held_back,
                "spans could not be exported to the OpenTelemetry collector; counted in lanyard_otel_spans_dropped_total, logged at most once a minute"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use opentelemetry::trace::{Tracer, TracerProvider};
    use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
    use tokio::sync::Semaphore;

    use super::*;

    /// An exporter that takes a batch only when the test hands it a
    /// permit, or fails every batch.
    #[derive(Debug, Clone)]
    struct Collector {
        permits: Arc<Semaphore>,
        exported: Arc<AtomicUsize>,
        fail: bool,
        batches: std::sync::mpsc::Sender<usize>,
    }

    impl SpanExporter for Collector {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            let _ = self.batches.send(batch.len());
            let permit = self.permits.acquire().await;
            permit.expect("not closed").forget();
            if self.fail {
                return Err(OTelSdkError::InternalFailure("refused".into()));
            }
            self.exported.fetch_add(batch.len(), Ordering::SeqCst);
            Ok(())
        }
    }

    struct Setup {
        provider: SdkTracerProvider,
        collector: Collector,
        batches: std::sync::mpsc::Receiver<usize>,
        dropped: IntCounter,
    }

    fn setup(options: BatchOptions, fail: bool, sampler: Sampler) -> Setup {
        let (batches_tx, batches) = std::sync::mpsc::channel();
        let collector = Collector {
            permits: Arc::new(Semaphore::new(0)),
            exported: Arc::new(AtomicUsize::new(0)),
            fail,
            batches: batches_tx,
        };
        let dropped = IntCounter::new("dropped", "test").unwrap();
        let processor =
            BoundedProcessor::start(collector.clone(), options, dropped.clone()).unwrap();
        let provider = SdkTracerProvider::builder()
            .with_sampler(sampler)
            .with_span_processor(processor)
            .build();
        Setup {
            provider,
            collector,
            batches,
            dropped,
        }
    }

    fn end_spans(provider: &SdkTracerProvider, n: usize) {
        let tracer = provider.tracer("test");
        for _ in 0..n {
            drop(tracer.start("span"));
        }
    }

    const WAIT: Duration = Duration::from_secs(10);

    #[test]
    fn spans_beyond_the_queue_are_dropped_and_counted_while_the_collector_is_stuck() {
        let options = BatchOptions {
            max_queue: 2,
            max_batch: 1,
            ..BatchOptions::default()
        };
        let s = setup(options, false, Sampler::AlwaysOn);
        end_spans(&s.provider, 1);
        // The first span is with the exporter, which waits for a permit.
        assert_eq!(s.batches.recv_timeout(WAIT), Ok(1));
        end_spans(&s.provider, 5);
        // Two wait in the queue; three found it full.
        assert_eq!(s.dropped.get(), 3);
        s.collector.permits.add_permits(3);
        s.provider.shutdown_with_timeout(WAIT).unwrap();
        assert_eq!(s.collector.exported.load(Ordering::SeqCst), 3);
        assert_eq!(s.dropped.get(), 3);
    }

    #[test]
    fn the_exit_exports_what_is_queued() {
        let s = setup(BatchOptions::default(), false, Sampler::AlwaysOn);
        end_spans(&s.provider, 3);
        s.collector.permits.add_permits(1);
        // The schedule delay (5 s) has not passed: only the exit sends them.
        s.provider.shutdown_with_timeout(WAIT).unwrap();
        assert_eq!(s.batches.try_recv(), Ok(3));
        assert_eq!(s.collector.exported.load(Ordering::SeqCst), 3);
        assert_eq!(s.dropped.get(), 0);
    }

    #[test]
    fn the_exit_is_bounded_when_the_collector_never_answers() {
        let s = setup(BatchOptions::default(), false, Sampler::AlwaysOn);
        end_spans(&s.provider, 4);
        let bound = Duration::from_millis(100);
        let started = std::time::SystemTime::now();
        // The thread gives up on the batch at the bound and counts it.
        s.provider.shutdown_with_timeout(bound).unwrap();
        let took = started.elapsed().unwrap();
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(s.dropped.get(), 4);
    }

    /// An export already in flight when the exit comes (the collector
    /// stuck on a full batch) gets the exit's bound, not its own timeout:
    /// the exit is as short, and what is still queued is counted too.
    #[test]
    fn the_exit_is_bounded_with_an_export_in_flight() {
        let options = BatchOptions {
            max_batch: 2,
            ..BatchOptions::default()
        };
        let s = setup(options, false, Sampler::AlwaysOn);
        end_spans(&s.provider, 3);
        assert_eq!(s.batches.recv_timeout(WAIT), Ok(2));
        let started = std::time::SystemTime::now();
        s.provider
            .shutdown_with_timeout(Duration::from_millis(100))
            .unwrap();
        let took = started.elapsed().unwrap();
        assert!(took < Duration::from_secs(2), "{took:?}");
        assert_eq!(s.dropped.get(), 3);
    }

    #[test]
    fn a_failed_export_counts_its_spans() {
        let options = BatchOptions {
            max_batch: 2,
            ..BatchOptions::default()
        };
        let s = setup(options, true, Sampler::AlwaysOn);
        s.collector.permits.add_permits(10);
        end_spans(&s.provider, 2);
        assert_eq!(s.batches.recv_timeout(WAIT), Ok(2));
        s.provider.shutdown_with_timeout(WAIT).unwrap();
        assert_eq!(s.dropped.get(), 2);
    }

    #[test]
    fn unsampled_spans_are_not_queued() {
        let s = setup(BatchOptions::default(), false, Sampler::AlwaysOff);
        end_spans(&s.provider, 3);
        s.provider.shutdown_with_timeout(WAIT).unwrap();
        assert!(s.batches.try_recv().is_err());
        assert_eq!(s.dropped.get(), 0);
    }
}
