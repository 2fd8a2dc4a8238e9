//! What a URI says about the token besides its label, and about the
//! library (RFC 7512 §2.3), as `p11tool --list-token-urls` and `p11-kit`
//! print them: each attribute given must match what the module shows, so
//! a URI copied from those tools names the token it named there. Pure.

/// The token's attributes a URI may give besides its label.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenAttributes {
    /// `manufacturer`: the token's `manufacturerID`.
    pub manufacturer: Option<String>,
    /// `model`: the token's `model`.
    pub model: Option<String>,
    /// `serial`: the token's `serialNumber`.
    pub serial: Option<String>,
    /// `slot-id`: the `CK_SLOT_ID` of the slot the token is in.
    pub slot_id: Option<u64>,
}

/// A token as the module shows it (`C_GetTokenInfo`, padding trimmed).
#[derive(Debug, Clone, Copy)]
pub struct TokenSeen<'a> {
    pub label: &'a str,
    pub manufacturer: &'a str,
    pub model: &'a str,
    pub serial: &'a str,
    pub slot_id: u64,
}

impl TokenAttributes {
    /// Each attribute's URI name and the value asked for, if any.
    fn wanted(&self) -> [(&'static str, Option<String>); 4] {
        [
            ("manufacturer", self.manufacturer.clone()),
            ("model", self.model.clone()),
            ("serial", self.serial.clone()),
            ("slot-id", self.slot_id.map(|id| id.to_string())),
        ]
    }

    /// The same attributes, as `seen` has them, in the same order.
    fn seen(seen: &TokenSeen) -> [String; 4] {
        [
            seen.manufacturer.to_string(),
            seen.model.to_string(),
            seen.serial.to_string(),
            seen.slot_id.to_string(),
        ]
    }

    /// Whether `seen` has every attribute given (its label aside).
    pub fn matches(&self, seen: &TokenSeen) -> bool {
        self.wanted()
            .into_iter()
            .zip(Self::seen(seen))
            .all(|((_, wanted), seen)| wanted.is_none_or(|wanted| wanted == seen))
    }

    /// The attributes given, for a message: ``, serial `42`, slot-id `0` ``.
    pub fn describe(&self) -> String {
        self.wanted()
            .into_iter()
            .filter_map(|(name, wanted)| Some(format!(", {name} `{}`", wanted?)))
            .collect()
    }

    /// What `seen` has of the attributes given, for the list of tokens
    /// present: `` (serial `43`)``; nothing when none is given.
    pub fn describe_seen(&self, seen: &TokenSeen) -> String {
        let shown: Vec<String> = self
            .wanted()
            .into_iter()
            .zip(Self::seen(seen))
            .filter(|((_, wanted), _)| wanted.is_some())
            .map(|((name, _), seen)| format!("{name} `{seen}`"))
            .collect();
        if shown.is_empty() {
            return String::new();
        }
        format!(" ({})", shown.join(", "))
    }
}

/// The library's attributes a URI may give (`C_GetInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LibraryAttributes {
    /// `library-manufacturer`: `manufacturerID`.
    pub manufacturer: Option<String>,
    /// `library-description`: `libraryDescription`.
    pub description: Option<String>,
    /// `library-version`: `libraryVersion`, major and minor.
    pub version: Option<(u8, u8)>,
}

/// The library as it describes itself.
#[derive(Debug, Clone, Copy)]
pub struct LibrarySeen<'a> {
    pub manufacturer: &'a str,
    pub description: &'a str,
    pub version: (u8, u8),
}

impl LibraryAttributes {
    /// Whether the URI gives any, so that the library need not be asked.
    pub fn given(&self) -> bool {
        *self != LibraryAttributes::default()
    }

    /// The first attribute `seen` does not match, for a message:
    /// ``library-manufacturer is `SoftHSM`, the URI says `Thales` ``.
    pub fn mismatch(&self, seen: &LibrarySeen) -> Option<String> {
        let version = |(major, minor): (u8, u8)| format!("{major}.{minor}");
        let pairs = [
            (
                "library-manufacturer",
                self.manufacturer.clone(),
                seen.manufacturer.to_string(),
            ),
            (
                "library-description",
                self.description.clone(),
                seen.description.to_string(),
            ),
            (
                "library-version",
                self.version.map(version),
                version(seen.version),
            ),
        ];
        pairs.into_iter().find_map(|(name, wanted, seen)| {
            let wanted = wanted.filter(|wanted| *wanted != seen)?;
            Some(format!("its {name} is `{seen}`, the URI says `{wanted}`"))
        })
    }
}

/// `library-version`: `major[.minor]` in decimal (RFC 7512 §2.3), the
/// minor 0 when left out.
pub fn parse_version(value: &str) -> Option<(u8, u8)> {
    let (major, minor) = value.split_once('.').unwrap_or((value, "0"));
    let number = |part: &str| {
        (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
    };
    Some((number(major)?, number(minor)?))
}

/// `slot-id`: a `CK_SLOT_ID` in decimal.
pub fn parse_slot_id(value: &str) -> Option<u64> {
    (!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()))
        .then(|| value.parse().ok())
        .flatten()
}
