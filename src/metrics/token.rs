//! The token series: one set per service account, labelled with its
//! `client_id` always, a single account included, so that a dashboard
//! written for one sidecar reads a sidecar of many accounts the same way
//! (docs/accounts.md). Their count is bounded by the accounts: an
//! account's series go when it does.

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry,
};

/// Token requests take tens of milliseconds to a few seconds.
const TOKEN_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// `lanyard_token_requests_total`, `lanyard_token_request_duration_seconds`
/// and `lanyard_token_expiry_timestamp_seconds`, by `client_id`.
#[derive(Debug, Clone)]
pub struct TokenMetrics {
    pub requests: IntCounterVec,
    pub duration: HistogramVec,
    pub expiry: GaugeVec,
}

impl TokenMetrics {
    pub(super) fn register(registry: &Registry) -> Result<TokenMetrics, prometheus::Error> {
        let metrics = TokenMetrics {
            requests: IntCounterVec::new(
                Opts::new(
                    "lanyard_token_requests_total",
                    "Token requests made to the token endpoint, by account and outcome.",
                ),
                &["client_id", "outcome"],
            )?,
            duration: HistogramVec::new(
                HistogramOpts::new(
                    "lanyard_token_request_duration_seconds",
                    "Time taken by token requests, successful or not, by account.",
                )
                .buckets(TOKEN_BUCKETS.to_vec()),
                &["client_id"],
            )?,
            expiry: GaugeVec::new(
                Opts::new(
                    "lanyard_token_expiry_timestamp_seconds",
                    "Unix time at which the account's held token is retired (0 before its first token).",
                ),
                &["client_id"],
            )?,
        };
        registry.register(Box::new(metrics.requests.clone()))?;
        registry.register(Box::new(metrics.duration.clone()))?;
        registry.register(Box::new(metrics.expiry.clone()))?;
        Ok(metrics)
    }

    /// One account's series. `success`, the duration and the expiry are
    /// made now, so that they read 0 rather than being absent before the
    /// first token, unless `on_demand`: an account that fetches its first
    /// token when a request first needs it shows its series once it has
    /// made a token request, so that a directory of a thousand accounts
    /// few of which are used is not a thousand histograms, and an alert on
    /// a zero expiry means a token that should be there.
    pub fn account(&self, client_id: &str, on_demand: bool) -> AccountSeries {
        let mut series = AccountSeries {
            client_id: client_id.to_string(),
            requests: self.requests.clone(),
            duration: None,
            duration_vec: self.duration.clone(),
            expiry_vec: self.expiry.clone(),
            expiry: None,
            outcomes: Vec::new(),
        };
        if !on_demand {
            series.count_none("success");
            series.duration();
            series.expiry_gauge();
        }
        series
    }
}

/// One account's token series, removed from the exposition when dropped
/// (the account removed, or its credentials now another client's).
#[derive(Debug)]
pub struct AccountSeries {
    client_id: String,
    requests: IntCounterVec,
    duration: Option<Histogram>,
    duration_vec: HistogramVec,
    expiry_vec: GaugeVec,
    expiry: Option<Gauge>,
    /// The outcomes counted, to remove with the rest.
    outcomes: Vec<&'static str>,
}

impl AccountSeries {
    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Counts a token request's outcome.
    pub fn outcome(&mut self, outcome: &'static str) {
        // The first outcome shows `success` too, at 0 if need be.
        self.count_none("success");
        self.count_none(outcome);
        self.requests
            .with_label_values(&[self.client_id.as_str(), outcome])
            .inc();
    }

    fn count_none(&mut self, outcome: &'static str) {
        if !self.outcomes.contains(&outcome) {
            self.outcomes.push(outcome);
            self.requests
                .with_label_values(&[self.client_id.as_str(), outcome]);
        }
    }

    pub fn observe_duration(&mut self, seconds: f64) {
        self.duration().observe(seconds);
    }

    fn duration(&mut self) -> &Histogram {
        let (vec, client_id) = (&self.duration_vec, self.client_id.as_str());
        self.duration
            .get_or_insert_with(|| vec.with_label_values(&[client_id]))
    }

    /// The held token's retirement, as unix seconds.
    pub fn set_expiry(&mut self, unix_seconds: f64) {
        self.expiry_gauge().set(unix_seconds);
    }

    /// An idle account's token is let lapse: its expiry is no longer
    /// shown, so that it raises no alert about a token no one needs.
    pub fn hide_expiry(&mut self) {
        if self.expiry.take().is_some() {
            let _ = self
                .expiry_vec
                .remove_label_values(&[self.client_id.as_str()]);
        }
    }

    fn expiry_gauge(&mut self) -> &Gauge {
        let (vec, client_id) = (&self.expiry_vec, self.client_id.as_str());
        self.expiry
            .get_or_insert_with(|| vec.with_label_values(&[client_id]))
    }
}

impl Drop for AccountSeries {
    fn drop(&mut self) {
        let client_id = self.client_id.as_str();
        for outcome in &self.outcomes {
            let _ = self.requests.remove_label_values(&[client_id, outcome]);
        }
        if self.duration.is_some() {
            let _ = self.duration_vec.remove_label_values(&[client_id]);
        }
        if self.expiry.is_some() {
            let _ = self.expiry_vec.remove_label_values(&[client_id]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, TextEncoder};

    fn exposition(registry: &Registry) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&registry.gather(), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_kept_account_shows_its_series_at_once_and_loses_them_when_dropped() {
        let registry = Registry::new();
        let metrics = TokenMetrics::register(&registry).unwrap();
        let mut series = metrics.account("sa-a", false);
        let text = exposition(&registry);
        assert!(
            text.contains(r#"lanyard_token_requests_total{client_id="sa-a",outcome="success"} 0"#)
        );
        assert!(text.contains(r#"lanyard_token_expiry_timestamp_seconds{client_id="sa-a"} 0"#));
        assert!(
            text.contains(r#"lanyard_token_request_duration_seconds_count{client_id="sa-a"} 0"#)
        );
        series.outcome("timeout");
        drop(series);
        assert!(
            !exposition(&registry).contains("sa-a"),
            "{}",
            exposition(&registry)
        );
    }

    #[test]
    fn an_account_on_demand_shows_nothing_until_its_first_token_request() {
        let registry = Registry::new();
        let metrics = TokenMetrics::register(&registry).unwrap();
        let mut series = metrics.account("sa-b", true);
        assert!(!exposition(&registry).contains("sa-b"));
        series.observe_duration(0.01);
        series.outcome("success");
        series.set_expiry(1_900_000_000.0);
        let text = exposition(&registry);
        assert!(
            text.contains(r#"lanyard_token_requests_total{client_id="sa-b",outcome="success"} 1"#)
        );
        assert!(
            text.contains(r#"lanyard_token_expiry_timestamp_seconds{client_id="sa-b"} 1900000000"#)
        );
        series.hide_expiry();
        let text = exposition(&registry);
        assert!(
            !text.contains("lanyard_token_expiry_timestamp_seconds{"),
            "{text}"
        );
        assert!(
            text.contains(r#"outcome="success"} 1"#),
            "counts stay: {text}"
        );
    }
}
