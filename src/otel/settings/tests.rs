//! The `OTEL_*` variables, table by table: what turns tracing on, what
//! keeps it off quietly, and what keeps it off with a warning that names
//! the variable and never its secret value.

use std::collections::HashMap;

use super::*;

fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const AT: (&str, &str) = (ENDPOINT, "http://collector:4318");

fn on(pairs: &[(&str, &str)]) -> OtelSettings {
    match read(&env(pairs)) {
        Reading::On(settings) => *settings,
        other => panic!("{pairs:?}: expected tracing on, got {other:?}"),
    }
}

fn warnings(pairs: &[(&str, &str)]) -> Vec<String> {
    match read(&env(pairs)) {
        Reading::Invalid(warnings) => warnings,
        other => panic!("{pairs:?}: expected warnings, got {other:?}"),
    }
}

#[test]
fn tracing_is_off_without_an_endpoint_or_when_disabled() {
    let off: &[&[(&str, &str)]] = &[
        &[],
        &[(ENDPOINT, "")],
        &[(SERVICE_NAME, "app"), (SAMPLER, "always_on")],
        &[AT, (SDK_DISABLED, "true")],
        &[AT, (SDK_DISABLED, "TRUE")],
        &[AT, (TRACES_EXPORTER, "none")],
        // Disabled wins over anything else being wrong.
        &[AT, (SDK_DISABLED, "true"), (PROTOCOL, "grpc")],
    ];
    for pairs in off {
        assert!(matches!(read(&env(pairs)), Reading::Off), "{pairs:?}");
    }
}

#[test]
fn defaults_are_the_specifications() {
    let settings = on(&[AT]);
    assert_eq!(settings.endpoint, "http://collector:4318/v1/traces");
    assert!(settings.headers.is_empty());
    assert_eq!(settings.certificate, None);
    assert_eq!(settings.timeout, Duration::from_secs(10));
    assert!(!settings.gzip);
    assert_eq!(settings.service_name, "lanyard");
    assert!(settings.resource.is_empty());
    assert_eq!(settings.sampler, SamplerChoice::ParentBasedAlwaysOn);
    assert_eq!(settings.batch, BatchOptions::default());
    assert_eq!(settings.batch.max_queue, 2048);
    assert_eq!(settings.batch.schedule_delay, Duration::from_secs(5));
}

#[test]
fn the_endpoint_gets_the_traces_path_and_the_traces_endpoint_is_taken_as_given() {
    let table = [
        (
            &[(ENDPOINT, "http://c:4318")][..],
            "http://c:4318/v1/traces",
        ),
        (&[(ENDPOINT, "http://c:4318/")], "http://c:4318/v1/traces"),
        (&[(ENDPOINT, "https://c/otlp/")], "https://c/otlp/v1/traces"),
        (&[(TRACES_ENDPOINT, "https://c/custom")], "https://c/custom"),
        (
            &[(ENDPOINT, "http://a:4318"), (TRACES_ENDPOINT, "http://b/t")],
            "http://b/t",
        ),
    ];
    for (pairs, expected) in table {
        assert_eq!(on(pairs).endpoint, expected, "{pairs:?}");
    }
}

#[test]
fn signal_specific_variables_win_over_the_general_ones() {
    let settings = on(&[
        AT,
        (TIMEOUT, "2000"),
        (TRACES_TIMEOUT, "500"),
        (HEADERS, "a=1"),
        (TRACES_HEADERS, "b=2"),
        (CERTIFICATE, "/all.pem"),
        (TRACES_CERTIFICATE, "/traces.pem"),
        (COMPRESSION, "none"),
        (TRACES_COMPRESSION, "gzip"),
        (PROTOCOL, "grpc"),
        (TRACES_PROTOCOL, "http/protobuf"),
    ]);
    assert_eq!(settings.timeout, Duration::from_millis(500));
    let names: Vec<&str> = settings.headers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["b"]);
    assert_eq!(
        settings.certificate,
        Some((TRACES_CERTIFICATE, PathBuf::from("/traces.pem")))
    );
    assert!(settings.gzip);
}

#[test]
fn headers_are_decoded_for_the_exporter_and_never_shown() {
    let settings = on(&[AT, (HEADERS, "api-key=s3cr3t%20key, X-Tenant = t1 ,,")]);
    let headers: Vec<(&str, &str)> = settings
        .headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.expose()))
        .collect();
    assert_eq!(headers, [("api-key", "s3cr3t key"), ("x-tenant", "t1")]);
    assert!(!format!("{settings:?}").contains("s3cr3t"));
}

#[test]
fn resource_attributes_are_decoded_and_the_service_name_chosen() {
    let settings = on(&[
        AT,
        (
            RESOURCE_ATTRIBUTES,
            "deployment.environment.name=prod,team=a%2Cb,service.name=from-resource",
        ),
    ]);
    assert_eq!(settings.service_name, "from-resource");
    assert_eq!(
        settings.resource,
        [
            (
                "deployment.environment.name".to_string(),
                "prod".to_string()
            ),
            ("team".to_string(), "a,b".to_string()),
        ]
    );
    let named = on(&[
        AT,
        (SERVICE_NAME, "billing-sidecar"),
        (RESOURCE_ATTRIBUTES, "service.name=ignored"),
    ]);
    assert_eq!(named.service_name, "billing-sidecar");
}

#[test]
fn samplers_are_the_specifications() {
    let table = [
        ("always_on", None, SamplerChoice::AlwaysOn),
        ("always_off", None, SamplerChoice::AlwaysOff),
        (
            "traceidratio",
            Some("0.25"),
            SamplerChoice::TraceIdRatio(0.25),
        ),
        ("traceidratio", None, SamplerChoice::TraceIdRatio(1.0)),
        (
            "parentbased_always_on",
            None,
            SamplerChoice::ParentBasedAlwaysOn,
        ),
        (
            "parentbased_always_off",
            Some("0.5"),
            SamplerChoice::ParentBasedAlwaysOff,
        ),
        (
            "parentbased_traceidratio",
            Some("0"),
            SamplerChoice::ParentBasedTraceIdRatio(0.0),
        ),
        ("ALWAYS_ON", None, SamplerChoice::AlwaysOn),
    ];
    for (name, arg, expected) in table {
        let mut pairs = vec![AT, (SAMPLER, name)];
        pairs.extend(arg.map(|arg| (SAMPLER_ARG, arg)));
        assert_eq!(on(&pairs).sampler, expected, "{name} {arg:?}");
    }
}

#[test]
fn batch_options_are_read_and_the_batch_never_exceeds_the_queue() {
    let settings = on(&[
        AT,
        (BSP_SCHEDULE_DELAY, "100"),
        (BSP_EXPORT_TIMEOUT, "2000"),
        (BSP_MAX_QUEUE_SIZE, "4"),
        (BSP_MAX_EXPORT_BATCH_SIZE, "512"),
    ]);
    assert_eq!(
        settings.batch,
        BatchOptions {
            schedule_delay: Duration::from_millis(100),
            export_timeout: Duration::from_secs(2),
            max_queue: 4,
            max_batch: 4,
        }
    );
}

#[test]
fn each_bad_value_is_one_warning_naming_its_variable_and_tracing_stays_off() {
    let table: &[(&[(&str, &str)], &str)] = &[
        (&[AT, (PROTOCOL, "grpc")], PROTOCOL),
        (&[AT, (TRACES_PROTOCOL, "http/json")], TRACES_PROTOCOL),
        (&[AT, (HEADERS, "no-equals-sign")], HEADERS),
        (&[AT, (HEADERS, "bad header=x")], HEADERS),
        (&[AT, (TRACES_HEADERS, "k=%zz")], TRACES_HEADERS),
        (&[(ENDPOINT, "collector:4318")], ENDPOINT),
        (&[(ENDPOINT, "ftp://collector")], ENDPOINT),
        (&[(ENDPOINT, "http://c/?tenant=1")], ENDPOINT),
        (&[(TRACES_ENDPOINT, "not a url")], TRACES_ENDPOINT),
        (&[AT, (TIMEOUT, "10s")], TIMEOUT),
        (&[AT, (TRACES_TIMEOUT, "0")], TRACES_TIMEOUT),
        (&[AT, (COMPRESSION, "zstd")], COMPRESSION),
        (&[AT, (RESOURCE_ATTRIBUTES, "novalue")], RESOURCE_ATTRIBUTES),
        (&[AT, (SAMPLER, "xray")], SAMPLER),
        (
            &[AT, (SAMPLER, "traceidratio"), (SAMPLER_ARG, "2")],
            SAMPLER_ARG,
        ),
        (
            &[AT, (SAMPLER, "traceidratio"), (SAMPLER_ARG, "half")],
            SAMPLER_ARG,
        ),
        (&[AT, (PROPAGATORS, "b3")], PROPAGATORS),
        (&[AT, (PROPAGATORS, "baggage")], PROPAGATORS),
        (&[AT, (SDK_DISABLED, "yes")], SDK_DISABLED),
        (&[AT, (TRACES_EXPORTER, "zipkin")], TRACES_EXPORTER),
        (&[AT, (BSP_MAX_QUEUE_SIZE, "0")], BSP_MAX_QUEUE_SIZE),
        (&[AT, (BSP_MAX_QUEUE_SIZE, "99999999")], BSP_MAX_QUEUE_SIZE),
        (&[AT, (BSP_SCHEDULE_DELAY, "-1")], BSP_SCHEDULE_DELAY),
        (
            &[AT, ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k.pem")],
            "OTEL_EXPORTER_OTLP_CLIENT_KEY",
        ),
    ];
    for (pairs, variable) in table {
        let warnings = warnings(pairs);
        assert_eq!(warnings.len(), 1, "{pairs:?}: {warnings:?}");
        assert!(
            warnings[0].starts_with(&format!("{variable} ")),
            "{warnings:?}"
        );
        assert!(
            warnings[0].ends_with("OpenTelemetry tracing is off"),
            "{warnings:?}"
        );
    }
}

#[test]
fn values_that_may_hold_secrets_are_never_repeated() {
    let table: &[&[(&str, &str)]] = &[
        &[AT, (HEADERS, "authorization=Bearer s3cr3t%0A")],
        &[AT, (TRACES_HEADERS, "s3cr3t")],
        &[(ENDPOINT, "http://user:s3cr3t@collector:4318")],
        &[(TRACES_ENDPOINT, "s3cr3t")],
        &[AT, (RESOURCE_ATTRIBUTES, "s3cr3t")],
    ];
    for pairs in table {
        for warning in warnings(pairs) {
            assert!(!warning.contains("s3cr3t"), "{warning}");
        }
    }
}

#[test]
fn every_problem_is_reported_at_once() {
    let warnings = warnings(&[AT, (PROTOCOL, "grpc"), (SAMPLER, "nope"), (TIMEOUT, "x")]);
    assert_eq!(warnings.len(), 3, "{warnings:?}");
}

/// The environment of a process whose variables are not UTF-8.
struct NotUnicodeEnv;

impl Env for NotUnicodeEnv {
    fn var(&self, name: &str) -> Result<Option<String>, crate::config::NotUnicode> {
        match name {
            ENDPOINT => Ok(Some("http://c:4318".into())),
            SERVICE_NAME => Err(crate::config::NotUnicode),
            _ => Ok(None),
        }
    }
}

#[test]
fn a_variable_that_is_not_utf8_is_a_warning() {
    match read(&NotUnicodeEnv) {
        Reading::Invalid(warnings) => {
            assert_eq!(
                warnings,
                ["OTEL_SERVICE_NAME is not valid UTF-8; OpenTelemetry tracing is off"]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn percent_decoding_takes_utf8_and_refuses_broken_escapes() {
    assert_eq!(percent_decode("a%20b+c").unwrap(), "a b+c");
    assert_eq!(percent_decode("%C3%A9").unwrap(), "é");
    for bad in ["%", "%2", "%zz", "%C3"] {
        assert!(percent_decode(bad).is_err(), "{bad}");
    }
}
