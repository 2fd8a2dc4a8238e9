//! The exporter's HTTP client: lanyard's own outbound connector (hyper,
//! rustls with the system roots and `LANYARD_CA_FILE`), with the
//! collector's `OTEL_EXPORTER_OTLP_CERTIFICATE` added to the roots, so
//! that tracing brings no second HTTP stack and no second TLS library.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use opentelemetry_http::{HttpClient, HttpError};

use crate::outbound::{self, Connector};

/// A collector's answer is a small protobuf message; more is not read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Sends the exporter's requests, each bounded by the OTLP timeout.
#[derive(Debug, Clone)]
pub struct CollectorClient {
    client: Client<Connector, Full<Bytes>>,
    timeout: Duration,
}

impl CollectorClient {
    /// A client trusting the system roots, `LANYARD_CA_FILE` (`ca_file`)
    /// and `certificate`, the collector's bundle; the message says which
    /// bundle is unusable.
    pub fn new(
        ca_file: Option<&Path>,
        certificate: Option<(&str, &Path)>,
        timeout: Duration,
    ) -> Result<CollectorClient, String> {
        let mut roots = outbound::roots(ca_file)?;
        if let Some((variable, path)) = certificate {
            // Only a regular file: opening a FIFO would block start-up.
            if !std::fs::metadata(path).is_ok_and(|meta| meta.is_file()) {
                return Err(format!(
                    "{variable} ({}) is not a readable file",
                    path.display()
                ));
            }
            let certs = outbound::ca_certificates(path)
                .map_err(|why| format!("{variable} ({}) {why}", path.display()))?;
            for cert in certs {
                roots.add(cert).map_err(|err| {
                    format!(
                        "{variable} ({}): a certificate is not usable: {err}",
                        path.display()
                    )
                })?;
            }
        }
        let tls = outbound::client_config(roots)?;
        Ok(CollectorClient {
            client: outbound::client(outbound::connector(tls)),
            timeout,
        })
    }
}

#[async_trait]
impl HttpClient for CollectorClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let exchange = async {
            let response = self.client.request(request.map(Full::new)).await?;
            let (parts, body) = response.into_parts();
            let body = crate::collect::collect(body, MAX_ANSWER_BYTES).await?;
            Ok::<_, HttpError>(Response::from_parts(parts, body))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| HttpError::from("the collector did not answer in time"))?
    }
}
