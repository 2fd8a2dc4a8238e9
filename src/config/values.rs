//! The value types of settings and their readers: how text becomes
//! durations, counts, sizes, addresses, rates and keys, and [`Shown`], how
//! values become text again. The URLs lanyard sends the token to are read
//! by [`TargetUrl::parse`]. A reader's error is a reason that may quote the
//! value; the loader prefixes the setting and where the value came from.
//!
//! The lowest module of `config`: it imports nothing from the modules that
//! declare and load settings. A reader with a bound is handed the bound by
//! the declaration that uses it (`settings.rs`).

use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

use crate::target::TargetUrl;

/// A value as a user would type it, for `--help` and docs/settings.md.
pub trait Shown {
    fn shown(&self) -> String;
}

impl Shown for Duration {
    fn shown(&self) -> String {
        humantime::format_duration(*self).to_string()
    }
}

impl Shown for SocketAddr {
    fn shown(&self) -> String {
        self.to_string()
    }
}

impl Shown for bool {
    fn shown(&self) -> String {
        self.to_string()
    }
}

impl Shown for usize {
    fn shown(&self) -> String {
        self.to_string()
    }
}

impl Shown for String {
    fn shown(&self) -> String {
        self.clone()
    }
}

impl Shown for PathBuf {
    fn shown(&self) -> String {
        self.display().to_string()
    }
}

impl Shown for TargetUrl {
    fn shown(&self) -> String {
        self.to_string()
    }
}

/// A size in bytes, shown in KiB or MiB when it is a whole number of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub usize);

impl Shown for ByteSize {
    fn shown(&self) -> String {
        match self.0 {
            n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}MiB", n >> 20),
            n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}KiB", n >> 10),
            n => n.to_string(),
        }
    }
}

/// Log line encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

impl LogFormat {
    /// What applies when `LANYARD_LOG_FORMAT` is unset: text when stderr is
    /// a terminal (a person running the demo reads it), JSON otherwise (a
    /// container's log, a pipe, a file: what collectors parse).
    pub fn for_stderr(given: Option<LogFormat>) -> LogFormat {
        use std::io::IsTerminal as _;
        given.unwrap_or(match std::io::stderr().is_terminal() {
            true => LogFormat::Text,
            false => LogFormat::Json,
        })
    }
}

impl Shown for LogFormat {
    fn shown(&self) -> String {
        match self {
            LogFormat::Json => "json",
            LogFormat::Text => "text",
        }
        .to_string()
    }
}

pub(super) fn read_text(raw: &str) -> Result<String, String> {
    Ok(raw.to_string())
}

pub(super) fn read_path(raw: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(raw))
}

pub(super) fn read_bool(raw: &str) -> Result<bool, String> {
    match raw.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("`{raw}` is not a boolean (use true or false)")),
    }
}

pub(super) fn read_addr(raw: &str) -> Result<SocketAddr, String> {
    raw.parse().map_err(|_| {
        format!("`{raw}` is not an address with a port (like 127.0.0.1:8080 or [::1]:8080)")
    })
}

/// Where the proxy listens: a TCP address, or a Unix socket's path
/// (`unix:/path`), whose file permissions decide who may connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl Shown for ListenAddr {
    fn shown(&self) -> String {
        match self {
            ListenAddr::Tcp(addr) => addr.to_string(),
            ListenAddr::Unix(path) => format!("unix:{}", path.display()),
        }
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown())
    }
}

/// The longest path a Unix socket address holds (`sun_path`, less its
/// terminating zero, on Linux).
const MAX_SOCKET_PATH: usize = 107;
/// What the private directory lanyard binds in first adds to the socket's
/// directory (`/.lanyard-bind.<random>/s`, `process::unix`, whose tests check
/// the two agree): that path must fit a socket address too.
pub const SOCKET_STAGING_ROOM: usize = 24;

pub(super) fn read_listen(raw: &str) -> Result<ListenAddr, String> {
    let Some(path) = raw.strip_prefix("unix:") else {
        return raw.parse().map(ListenAddr::Tcp).map_err(|_| {
            format!(
                "`{raw}` is not an address with a port (like 127.0.0.1:8080) or a Unix socket (like unix:/run/lanyard/lanyard.sock)"
            )
        });
    };
    if !path.starts_with('/') {
        return Err(format!(
            "`{raw}`: a Unix socket's path must be absolute (like unix:/run/lanyard/lanyard.sock)"
        ));
    }
    let dir = path.rfind('/').map_or(0, |slash| slash);
    if path.len() > MAX_SOCKET_PATH
        || dir + SOCKET_STAGING_ROOM > MAX_SOCKET_PATH
        || path.ends_with('/')
    {
        return Err(format!(
            "`{raw}`: a Unix socket's path must name a file and hold at most {MAX_SOCKET_PATH} bytes, its directory at most {} (lanyard binds in a private directory there first)",
            MAX_SOCKET_PATH - SOCKET_STAGING_ROOM
        ));
    }
    Ok(ListenAddr::Unix(PathBuf::from(path)))
}

/// A Unix socket's permission bits (`LANYARD_LISTEN_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileMode(pub u32);

impl Shown for FileMode {
    fn shown(&self) -> String {
        format!("{:04o}", self.0)
    }
}

/// Octal permission bits, never any for other users: whoever can connect
/// to the socket acts as the service account.
pub(super) fn read_file_mode(raw: &str) -> Result<FileMode, String> {
    let digits = raw.strip_prefix("0o").unwrap_or(raw);
    let mode = match u32::from_str_radix(digits, 8) {
        Ok(mode) if mode <= 0o777 && !digits.is_empty() => mode,
        _ => {
            return Err(format!(
                "`{raw}` is not a permission mode (octal, like 0660 or 0600)"
            ));
        }
    };
    if mode & 0o007 != 0 {
        return Err(format!(
            "`{raw}` lets other users connect, and whoever connects acts as the service account; use 0660 or narrower"
        ));
    }
    Ok(FileMode(mode))
}

pub(super) fn read_port(raw: &str) -> Result<u16, String> {
    match raw.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!("`{raw}` is not a port number (1 to 65535)")),
        Ok(port) => Ok(port),
    }
}

/// `WALLET_BASE_URL`: an absolute URL the page links to. Its scheme may be
/// a wallet's own (`openid4vp:`, `haip:`) as well as `https:`, but never one
/// that runs or embeds content where a link lands (docs/verifier.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalletBaseUrl(String);

/// Schemes a browser runs or renders in place rather than navigating to.
const UNSAFE_LINK_SCHEMES: &[&str] = &["javascript", "data", "vbscript", "file", "blob"];

/// Longer than any wallet's base URL; the link it makes goes in a QR code.
const MAX_WALLET_BASE_URL: usize = 512;

impl WalletBaseUrl {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let Some((scheme, rest)) = raw.split_once(':') else {
            return Err(format!(
                "`{raw}` is not an absolute URL (like https://wallet.example/authorize)"
            ));
        };
        let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !scheme_ok || rest.is_empty() {
            return Err(format!(
                "`{raw}` is not an absolute URL (like https://wallet.example/authorize)"
            ));
        }
        if UNSAFE_LINK_SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "the scheme `{scheme}:` is not a link to a wallet (use https: or the wallet's own scheme)"
            ));
        }
        if raw.len() > MAX_WALLET_BASE_URL {
            return Err(format!(
                "is {} bytes long; at most {MAX_WALLET_BASE_URL} are allowed",
                raw.len()
            ));
        }
        if raw.contains('#') || raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "`{raw}` holds a fragment, a space or a control character"
            ));
        }
        Ok(WalletBaseUrl(raw.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Shown for WalletBaseUrl {
    fn shown(&self) -> String {
        self.0.clone()
    }
}

/// A rate with its burst: `COUNT/DURATION` (`10/1m`, `50/5s`): up to
/// COUNT at once, then one every DURATION / COUNT (a GCRA quota).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub burst: std::num::NonZeroU32,
    pub per: Duration,
}

/// More than any verifier's visitors; a rate beyond is no limit.
const MAX_RATE_COUNT: u32 = 1_000_000;

impl Rate {
    pub fn parse(raw: &str) -> Result<Rate, String> {
        let usage = || format!("`{raw}` is not a rate: give COUNT/DURATION, like 10/1m or 50/5s");
        let (count, per) = raw.split_once('/').ok_or_else(usage)?;
        let count: u32 = count.trim().parse().map_err(|_| usage())?;
        let burst = std::num::NonZeroU32::new(count)
            .filter(|n| n.get() <= MAX_RATE_COUNT)
            .ok_or_else(|| format!("the count of `{raw}` must be 1 to {MAX_RATE_COUNT}"))?;
        let per = parse_duration(per)?;
        if per.is_zero() {
            return Err(format!("the duration of `{raw}` must be more than 0"));
        }
        Ok(Rate { burst, per })
    }

    /// How often one more is let through once the burst is spent.
    pub fn period(&self) -> Duration {
        self.per / self.burst.get()
    }

    /// As many a second, once the burst is spent.
    pub fn per_second(&self) -> f64 {
        f64::from(self.burst.get()) / self.per.as_secs_f64()
    }
}

impl Shown for Rate {
    fn shown(&self) -> String {
        format!("{}/{}", self.burst, self.per.shown())
    }
}

/// `LANYARD_VERIFIER_SESSION_KEY`: the key that binds browsers to their
/// verification sessions on every replica, and the one before it while a
/// rotation rolls out (docs/verifier.md "Running many"). A secret: its
/// `Debug` and `Shown` say nothing of it, and no reason quotes it.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    pub current: Vec<u8>,
    pub previous: Option<Vec<u8>>,
}

/// Fewer bytes than this are not a key worth binding sessions with:
/// 256 bits, as the HMAC and AES-256 keys it is stretched into.
pub const MIN_SESSION_KEY_BYTES: usize = 32;

impl SessionKeys {
    /// `KEY` or `CURRENT,PREVIOUS`, each base64 (standard or URL-safe,
    /// padded or not) of [`MIN_SESSION_KEY_BYTES`] or more.
    pub fn parse(raw: &str) -> Result<SessionKeys, String> {
        let parts: Vec<&str> = raw.split(',').map(str::trim).collect();
        let key = |at: usize, name: &str| {
            decode_base64(parts[at])
                .filter(|bytes| bytes.len() >= MIN_SESSION_KEY_BYTES)
                .ok_or_else(|| {
                    format!(
                        "the {name} key is not base64 of {MIN_SESSION_KEY_BYTES} bytes or more (make one with `head -c 32 /dev/urandom | base64`)"
                    )
                })
        };
        match parts.len() {
            1 => Ok(SessionKeys {
                current: key(0, "session")?,
                previous: None,
            }),
            2 => Ok(SessionKeys {
                current: key(0, "current (first)")?,
                previous: Some(key(1, "previous (second)")?),
            }),
            n => Err(format!(
                "holds {n} comma-separated keys; give one, or two as `current,previous`"
            )),
        }
    }
}

pub(crate) fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys = 1 + usize::from(self.previous.is_some());
        write!(f, "SessionKeys({keys} keys, [redacted])")
    }
}

impl Shown for SessionKeys {
    fn shown(&self) -> String {
        "[redacted]".into()
    }
}

impl Shown for u16 {
    fn shown(&self) -> String {
        self.to_string()
    }
}

pub(super) fn read_log_format(raw: &str) -> Result<LogFormat, String> {
    match raw.to_ascii_lowercase().as_str() {
        "json" => Ok(LogFormat::Json),
        "text" => Ok(LogFormat::Text),
        _ => Err(format!("`{raw}` is not a log format (use json or text)")),
    }
}

/// A whole number of `what` within `allowed`.
pub(super) fn read_count(
    raw: &str,
    allowed: RangeInclusive<usize>,
    what: &str,
) -> Result<usize, String> {
    let (min, max) = (*allowed.start(), *allowed.end());
    match raw.trim().parse::<usize>() {
        Ok(n) if n < min => Err(format!("must be at least {min}")),
        Ok(n) if n > max => Err(format!("{n} is more than the {max} allowed")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{raw}` is not a whole number of {what}")),
    }
}

/// A byte count: plain bytes, or with a `KiB` or `MiB` suffix, within
/// `allowed` (whole KiB at each end, as the message shows them).
pub(super) fn read_byte_size(
    raw: &str,
    allowed: RangeInclusive<usize>,
) -> Result<ByteSize, String> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (digits, unit) = raw.split_at(split);
    let not_a_size = || format!("`{raw}` is not a size (use bytes, or a value like 64KiB)");
    let scale = match unit.trim() {
        "" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        _ => return Err(not_a_size()),
    };
    let bytes = digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(not_a_size)?;
    if !allowed.contains(&bytes) {
        return Err(format!(
            "{bytes} bytes is outside {} KiB to {} KiB",
            allowed.start() / 1024,
            allowed.end() / 1024
        ));
    }
    Ok(ByteSize(bytes))
}

/// The longest any duration setting may be: nothing lanyard waits for
/// takes longer, and deadlines computed from an unbounded value would
/// overflow.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Parses plain seconds (`30`) or humantime's grammar (`90s`, `5m`, `1h`,
/// `250ms`, `1h 30m`, `1.5s`), up to a day.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    match parse_any_duration(raw)? {
        d if d > MAX_DURATION => Err(format!(
            "`{}` is longer than a day, the most any duration may be",
            raw.trim()
        )),
        d => Ok(d),
    }
}

/// As [`parse_duration`], with no upper bound, for a setting that caps its
/// value itself (the assertion lifetime, docs/settings.md). Too large to
/// represent reads as [`Duration::MAX`], so a bound refuses it by name.
fn parse_any_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let not_a_duration =
        || format!("`{raw}` is not a duration (use seconds, or a value like 90s, 5m, 1h)");
    // humantime wants a unit; the settings have always taken bare seconds.
    if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(raw
            .parse::<u64>()
            .map_or(Duration::MAX, Duration::from_secs));
    }
    match humantime::parse_duration(raw) {
        Ok(duration) => Ok(duration),
        // Without a fraction, an overflow can only be magnitude; with one
        // it may be precision below a nanosecond, which is no duration.
        Err(humantime::DurationError::NumberOverflow) if !raw.contains('.') => Ok(Duration::MAX),
        Err(_) => Err(not_a_duration()),
    }
}

pub(super) fn read_duration(raw: &str) -> Result<Duration, String> {
    parse_duration(raw)
}

pub(super) fn read_positive_duration(raw: &str) -> Result<Duration, String> {
    match parse_duration(raw)? {
        d if d.is_zero() => Err("must be greater than zero".to_string()),
        d => Ok(d),
    }
}

/// The assertion lifetime: positive, unbounded here because the loader
/// caps it (`MAX_ASSERTION_TTL`) with a warning rather than refusing.
pub(super) fn read_lifetime(raw: &str) -> Result<Duration, String> {
    match parse_any_duration(raw)? {
        d if d.is_zero() => Err("must be greater than zero".to_string()),
        d => Ok(d),
    }
}
