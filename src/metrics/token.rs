//! The token series: one set per service account, labelled with its
//! `client_id` and `organization` always, a single account included, so
//! that a dashboard written for one sidecar reads a sidecar of many
//! accounts the same way, and two accounts of one client (two files of
//! the directory naming one `client_id`) are two sets of series
//! (docs/accounts.md "Metrics"). Their count is bounded by the accounts:
//! an account's series go when it does.
//!
//! Two accounts have one pair of labels only while one replaces the other
//! (a file renamed, or two files exchanging their contents): the old
//! account lives on until the requests holding it end. Those series are
//! then shared, and removed with the last account holding them, so that
//! the old account's end never takes the new one's series away.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry,
};

/// Token requests take tens of milliseconds to a few seconds.
const TOKEN_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

/// Whose token series: an account's client and organization.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AccountLabels {
    pub client_id: String,
    pub organization: String,
}

impl AccountLabels {
    pub fn new(client_id: impl Into<String>, organization: impl Into<String>) -> AccountLabels {
        AccountLabels {
            client_id: client_id.into(),
            organization: organization.into(),
        }
    }

    fn values(&self) -> [&str; 2] {
        [&self.client_id, &self.organization]
    }

    fn with_outcome<'a>(&'a self, outcome: &'a str) -> [&'a str; 3] {
        [&self.client_id, &self.organization, outcome]
    }
}

/// What the accounts of one pair of labels hold in the exposition.
#[derive(Debug, Default)]
struct Held {
    /// [`AccountSeries`] of these labels alive.
    accounts: usize,
    /// Of those, the ones showing their expiry.
    showing_expiry: usize,
    outcomes: Vec<&'static str>,
    duration: bool,
}

/// `lanyard_token_requests_total`, `lanyard_token_request_duration_seconds`
/// and `lanyard_token_expiry_timestamp_seconds`, by `client_id` and
/// `organization`.
#[derive(Debug, Clone)]
pub struct TokenMetrics {
    pub requests: IntCounterVec,
    pub duration: HistogramVec,
    pub expiry: GaugeVec,
    held: Arc<Mutex<HashMap<AccountLabels, Held>>>,
}

impl TokenMetrics {
    pub(super) fn register(registry: &Registry) -> Result<TokenMetrics, prometheus::Error> {
        let metrics = TokenMetrics {
            requests: IntCounterVec::new(
                Opts::new(
                    "lanyard_token_requests_total",
                    "Token requests made to the token endpoint, by account and outcome.",
                ),
                &["client_id", "organization", "outcome"],
            )?,
            duration: HistogramVec::new(
                HistogramOpts::new(
                    "lanyard_token_request_duration_seconds",
                    "Time taken by token requests, successful or not, by account.",
                )
                .buckets(TOKEN_BUCKETS.to_vec()),
                &["client_id", "organization"],
            )?,
            expiry: GaugeVec::new(
                Opts::new(
                    "lanyard_token_expiry_timestamp_seconds",
                    "Unix time at which the account's held token is retired (0 before its first token).",
                ),
                &["client_id", "organization"],
            )?,
            held: Arc::default(),
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
    pub fn account(&self, labels: AccountLabels, on_demand: bool) -> AccountSeries {
        self.holding(&labels, |held| held.accounts += 1);
        let mut series = AccountSeries {
            labels,
            metrics: self.clone(),
            duration: None,
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

    fn holding<T>(&self, labels: &AccountLabels, f: impl FnOnce(&mut Held) -> T) -> T {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        f(held.entry(labels.clone()).or_default())
    }
}

/// One account's token series, removed from the exposition when dropped
/// (the account removed, or its credentials now another client's or
/// organization's), unless another account of the same labels still
/// holds them.
#[derive(Debug)]
pub struct AccountSeries {
    labels: AccountLabels,
    metrics: TokenMetrics,
    duration: Option<Histogram>,
    expiry: Option<Gauge>,
    /// The outcomes counted, to remove with the rest.
    outcomes: Vec<&'static str>,
}

impl AccountSeries {
    pub fn labels(&self) -> &AccountLabels {
        &self.labels
    }

    /// Counts a token request's outcome.
    pub fn outcome(&mut self, outcome: &'static str) {
        // The first outcome shows `success` too, at 0 if need be.
        self.count_none("success");
        self.count_none(outcome);
        self.metrics
            .requests
            .with_label_values(&self.labels.with_outcome(outcome))
            .inc();
    }

    fn count_none(&mut self, outcome: &'static str) {
        if !self.outcomes.contains(&outcome) {
            self.outcomes.push(outcome);
            self.metrics.holding(&self.labels, |held| {
                if !held.outcomes.contains(&outcome) {
                    held.outcomes.push(outcome);
                }
            });
            self.metrics
                .requests
                .with_label_values(&self.labels.with_outcome(outcome));
        }
    }

    pub fn observe_duration(&mut self, seconds: f64) {
        self.duration().observe(seconds);
    }

    fn duration(&mut self) -> &Histogram {
        if self.duration.is_none() {
            self.metrics
                .holding(&self.labels, |held| held.duration = true);
        }
        let (vec, labels) = (&self.metrics.duration, &self.labels);
        self.duration
            .get_or_insert_with(|| vec.with_label_values(&labels.values()))
    }

    /// The held token's retirement, as unix seconds.
    pub fn set_expiry(&mut self, unix_seconds: f64) {
        self.expiry_gauge().set(unix_seconds);
    }

    /// An idle account's token is let lapse: its expiry is no longer
    /// shown, so that it raises no alert about a token no one needs.
    pub fn hide_expiry(&mut self) {
        if self.expiry.take().is_some() {
            self.stop_showing_expiry();
        }
    }

    fn stop_showing_expiry(&self) {
        let last = self.metrics.holding(&self.labels, |held| {
            held.showing_expiry = held.showing_expiry.saturating_sub(1);
            held.showing_expiry == 0
        });
        if last {
            let _ = self
                .metrics
                .expiry
                .remove_label_values(&self.labels.values());
        }
    }

    fn expiry_gauge(&mut self) -> &Gauge {
        if self.expiry.is_none() {
            self.metrics
                .holding(&self.labels, |held| held.showing_expiry += 1);
        }
        let (vec, labels) = (&self.metrics.expiry, &self.labels);
        self.expiry
            .get_or_insert_with(|| vec.with_label_values(&labels.values()))
    }
}

impl Drop for AccountSeries {
    fn drop(&mut self) {
        if self.expiry.is_some() {
            self.stop_showing_expiry();
        }
        let mut all = self
            .metrics
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(held) = all.get_mut(&self.labels) else {
            return;
        };
        held.accounts = held.accounts.saturating_sub(1);
        if held.accounts > 0 {
            return;
        }
        let Some(held) = all.remove(&self.labels) else {
            return;
        };
        let metrics = &self.metrics;
        for outcome in held.outcomes {
            let _ = metrics
                .requests
                .remove_label_values(&self.labels.with_outcome(outcome));
        }
        if held.duration {
            let _ = metrics.duration.remove_label_values(&self.labels.values());
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

    fn labels(client_id: &str, organization: &str) -> AccountLabels {
        AccountLabels::new(client_id, organization)
    }

    #[test]
    fn a_kept_account_shows_its_series_at_once_and_loses_them_when_dropped() {
        let registry = Registry::new();
        let metrics = TokenMetrics::register(&registry).unwrap();
        let mut series = metrics.account(labels("sa-a", "org-A"), false);
        let text = exposition(&registry);
        let account = r#"client_id="sa-a",organization="org-A""#;
        assert!(text.contains(&format!(
            "lanyard_token_requests_total{{{account},outcome=\"success\"}} 0"
        )));
        assert!(text.contains(&format!(
            "lanyard_token_expiry_timestamp_seconds{{{account}}} 0"
        )));
        assert!(text.contains(&format!(
            "lanyard_token_request_duration_seconds_count{{{account}}} 0"
        )));
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
        let mut series = metrics.account(labels("sa-b", "org-B"), true);
        assert!(!exposition(&registry).contains("sa-b"));
        series.observe_duration(0.01);
        series.outcome("success");
        series.set_expiry(1_900_000_000.0);
        let text = exposition(&registry);
        assert!(text.contains(
            r#"lanyard_token_requests_total{client_id="sa-b",organization="org-B",outcome="success"} 1"#
        ));
        assert!(text.contains(
            r#"lanyard_token_expiry_timestamp_seconds{client_id="sa-b",organization="org-B"} 1900000000"#
        ));
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

    #[test]
    fn two_accounts_of_one_client_have_their_own_series_and_lose_only_their_own() {
        let registry = Registry::new();
        let metrics = TokenMetrics::register(&registry).unwrap();
        let mut a = metrics.account(labels("sa-shared", "org-A"), true);
        let mut b = metrics.account(labels("sa-shared", "org-B"), true);
        a.outcome("success");
        a.set_expiry(1_900_000_000.0);
        b.outcome("timeout");
        b.set_expiry(1_900_000_100.0);
        let text = exposition(&registry);
        for line in [
            r#"lanyard_token_requests_total{client_id="sa-shared",organization="org-A",outcome="success"} 1"#,
            r#"lanyard_token_requests_total{client_id="sa-shared",organization="org-B",outcome="timeout"} 1"#,
            r#"lanyard_token_expiry_timestamp_seconds{client_id="sa-shared",organization="org-A"} 1900000000"#,
            r#"lanyard_token_expiry_timestamp_seconds{client_id="sa-shared",organization="org-B"} 1900000100"#,
        ] {
            assert!(text.contains(line), "no `{line}` in:\n{text}");
        }
        drop(a);
        let text = exposition(&registry);
        assert!(!text.contains("org-A"), "{text}");
        assert!(
            text.contains(
                r#"lanyard_token_expiry_timestamp_seconds{client_id="sa-shared",organization="org-B"} 1900000100"#
            ),
            "{text}"
        );
    }

    /// A file renamed, or two files exchanging their contents: the new
    /// account shows its series before the old one's last request ends.
    #[test]
    fn an_account_replaced_by_one_of_the_same_labels_keeps_the_series_while_either_lives() {
        let registry = Registry::new();
        let metrics = TokenMetrics::register(&registry).unwrap();
        let mut old = metrics.account(labels("sa-a", "org-A"), true);
        old.outcome("success");
        old.set_expiry(1_900_000_000.0);
        let mut new = metrics.account(labels("sa-a", "org-A"), true);
        new.observe_duration(0.01);
        new.outcome("success");
        new.set_expiry(1_900_000_100.0);
        drop(old);
        let text = exposition(&registry);
        for line in [
            r#"lanyard_token_requests_total{client_id="sa-a",organization="org-A",outcome="success"} 2"#,
            r#"lanyard_token_expiry_timestamp_seconds{client_id="sa-a",organization="org-A"} 1900000100"#,
            r#"lanyard_token_request_duration_seconds_count{client_id="sa-a",organization="org-A"} 1"#,
        ] {
            assert!(text.contains(line), "no `{line}` in:\n{text}");
        }
        new.set_expiry(1_900_000_200.0);
        assert!(exposition(&registry).contains("1900000200"));
        drop(new);
        assert!(
            !exposition(&registry).contains("sa-a"),
            "{}",
            exposition(&registry)
        );
    }
}
