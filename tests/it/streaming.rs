//! Large bodies stream through the proxy with bounded memory. Alone in its
//! own test binary, so the process's peak RSS reflects this test only.

use crate::support;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use support::sidecar;
use support::upstream::ChunkBody;

/// Peak resident set size of this process so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test]
async fn large_upload_and_download_stream_without_buffering() {
    const SIZE: u64 = 64 * 1024 * 1024;
    let (_upstream, running) = sidecar::echoing(&[]).await;
    // Warm the connection pools, so the baseline holds their buffers.
    let warm = sidecar::get(&format!("{}/warm", running.proxy)).await;
    assert_eq!(warm.status, StatusCode::OK);
    let before = peak_rss();

    // With a Content-Length (over the 64 KiB replay limit) and chunked.
    for sized in [true, false] {
        let request = Request::post(format!("{}/upload", running.proxy))
            .body(ChunkBody::new(SIZE, sized))
            .unwrap();
        let response = sidecar::client_for::<ChunkBody>()
            .request(request)
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, Bytes::from(SIZE.to_string()));
    }

    let request = Request::get(format!("{}/download?bytes={SIZE}", running.proxy))
        .body(sidecar::empty())
        .unwrap();
    let response = sidecar::client_for().request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut received = 0u64;
    while let Some(frame) = body.frame().await {
        received += frame
            .unwrap()
            .into_data()
            .map(|d| d.len() as u64)
            .unwrap_or(0);
    }
    assert_eq!(received, SIZE);

    let grown = peak_rss().saturating_sub(before);
    assert!(
        grown < 16 * 1024 * 1024,
        "peak memory grew by {} MiB moving 3 x 64 MiB",
        grown / (1024 * 1024)
    );
}
