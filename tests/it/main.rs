//! lanyard's integration tests, one binary: each module drives the real
//! thing over real sockets (docs/tests.md says what each proves). One binary
//! rather than one per file, so that `tests/it/support` and lanyard itself
//! are linked once (docs/tests.md, "Build time").

mod support;

mod accounts;
mod brand;
mod browser;
mod chunked_answers;
mod cli;
mod cli_startup;
mod credential_sources;
mod demo;
mod docs;
mod docs_run;
mod fair_share;
mod frames;
mod framing_differential;
mod hostile;
mod hsm;
mod interop_oidc_provider;
mod kernel_buffers;
mod listeners;
mod log_format;
mod memory;
mod mock_api;
mod oidc;
mod oidc_browser_app;
mod oidc_interop;
mod oidc_languages;
mod oidc_native;
mod oidc_page;
mod oidc_replicas;
mod oidc_rules;
mod oidc_subjects;
mod oidc_token;
mod oidc_userinfo;
mod one_byte_frames;
mod otel;
mod pool;
mod process;
mod properties;
mod proxy;
mod proxy_edges;
mod readiness;
mod refresher;
mod request_bodies;
mod requests;
mod rotation;
mod slow_clients;
mod streaming;
mod tls;
mod token_exchange;
mod token_faults;
mod token_lifetime;
mod unix_socket;
mod upstream_cap;
mod upstream_faults;
mod verifier;
mod verifier_internet;
mod verifier_listener;
mod verifier_replicas;
