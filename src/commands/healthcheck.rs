//! `lanyard healthcheck`: asks a running lanyard's `/readyz` and prints
//! one line (the image's `HEALTHCHECK`: it has no shell or curl).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, header};
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::config::{self, AdminConfig};

/// Longer than any answer `/readyz` takes, shorter than the 30 s Docker
/// allows a health check by default.
const HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// What `lanyard healthcheck` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub ready: bool,
    /// One line for the operator: why it is or is not ready.
    pub summary: String,
}

/// `lanyard healthcheck`: asks the running sidecar's `/readyz`. It lives
/// in the binary because the container image has no shell and no curl.
pub async fn healthcheck(config: &AdminConfig) -> Health {
    let addr = reachable(config.listen);
    let answer = tokio::time::timeout(HEALTHCHECK_TIMEOUT, get_readyz(addr)).await;
    let (status, body) = match answer {
        Ok(Ok(answer)) => answer,
        Ok(Err(why)) => {
            return Health {
                ready: false,
                summary: why,
            };
        }
        Err(_) => {
            return Health {
                ready: false,
                summary: format!(
                    "the admin listener at {addr} did not answer within {} s",
                    HEALTHCHECK_TIMEOUT.as_secs()
                ),
            };
        }
    };
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let summary = match status {
        StatusCode::OK => match json["token_expires_in_s"].as_u64() {
            Some(secs) => format!("ready: the token expires in {secs} s"),
            None => "ready".to_string(),
        },
        StatusCode::SERVICE_UNAVAILABLE => {
            let reason = json["reason"].as_str().unwrap_or("no reason given");
            match json["last_error"].as_str() {
                Some(error) => format!("not ready: {reason} (last error: {error})"),
                None => format!("not ready: {reason}"),
            }
        }
        other => format!(
            "http://{addr}/readyz answered HTTP {}; is LANYARD_ADMIN_LISTEN the sidecar's?",
            other.as_u16()
        ),
    };
    Health {
        ready: status == StatusCode::OK,
        summary,
    }
}

/// An admin listener on every interface is reached on loopback.
fn reachable(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

async fn get_readyz(addr: SocketAddr) -> Result<(StatusCode, Bytes), String> {
    let unreachable = |why: String| format!("cannot reach the admin listener at {addr}: {why}");
    let stream = TcpStream::connect(addr).await.map_err(|err| {
        unreachable(match err.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                "nothing listens there (is lanyard running, with this LANYARD_ADMIN_LISTEN?)"
                    .to_string()
            }
            _ => config::io_reason(&err),
        })
    })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|err| unreachable(err.to_string()))?;
    tokio::spawn(connection);
    let request = Request::get("/readyz")
        .header(header::HOST, addr.to_string())
        .header(header::USER_AGENT, crate::outbound::USER_AGENT)
        .body(Empty::<Bytes>::new())
        .map_err(|err| unreachable(err.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|err| unreachable(err.to_string()))?;
    let status = response.status();
    // `/readyz` answers a few hundred bytes; anything far larger is not it.
    let body = crate::collect::collect(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admin_listener_on_every_interface_is_probed_on_loopback() {
        let probe = |listen: &str| reachable(listen.parse().unwrap()).to_string();
        assert_eq!(probe("0.0.0.0:9090"), "127.0.0.1:9090");
        assert_eq!(probe("[::]:9090"), "[::1]:9090");
        assert_eq!(probe("10.1.2.3:9191"), "10.1.2.3:9191");
    }
}
