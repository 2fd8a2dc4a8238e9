//! The brand's accent colour: read from `#rrggbb` or `#rgb`, refused when
//! text in it would not read on the page's white background, and the CSS
//! that gives it to the page's light colour scheme.

/// WCAG 2.x's minimum contrast for normal text (success criterion 1.4.3,
/// level AA): the accent colours links and the focus ring on white.
pub const MIN_CONTRAST: f64 = 4.5;

/// The page's light background.
const WHITE: [u8; 3] = [0xff, 0xff, 0xff];
/// The near-black the page's light scheme writes text in
/// (`src/verifier/page/verifier.css`, `--fg`).
const NEAR_BLACK: [u8; 3] = [0x1b, 0x1f, 0x24];

/// A colour whose contrast on white is at least [`MIN_CONTRAST`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accent {
    rgb: [u8; 3],
}

impl Accent {
    /// `#rrggbb` or `#rgb` (hexadecimal, either case), when its contrast on
    /// white is enough; else why not, saying the ratio it has.
    pub fn parse(raw: &str) -> Result<Accent, String> {
        let not_a_colour = || match raw.chars().count() {
            n if n <= 16 => format!("`{raw}` is not a colour written #rrggbb or #rgb"),
            _ => "is not a colour written #rrggbb or #rgb".to_string(),
        };
        let digits = raw.strip_prefix('#').ok_or_else(not_a_colour)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(not_a_colour());
        }
        let channel = |hex: &str| u8::from_str_radix(hex, 16).map_err(|_| not_a_colour());
        let rgb = match digits.len() {
            6 => [
                channel(&digits[0..2])?,
                channel(&digits[2..4])?,
                channel(&digits[4..6])?,
            ],
            3 => [
                channel(&digits[0..1])? * 0x11,
                channel(&digits[1..2])? * 0x11,
                channel(&digits[2..3])? * 0x11,
            ],
            _ => return Err(not_a_colour()),
        };
        let accent = Accent { rgb };
        let ratio = accent.contrast_on_white();
        if ratio < MIN_CONTRAST {
            return Err(format!(
                "{} has a contrast of {}:1 on the page's white background; at least {MIN_CONTRAST}:1 is needed for its links and buttons to read (WCAG 2.x, 1.4.3): choose a darker shade",
                accent.hex(),
                shown_ratio(ratio)
            ));
        }
        Ok(accent)
    }

    /// `#rrggbb`, lower case.
    pub fn hex(&self) -> String {
        let [r, g, b] = self.rgb;
        format!("#{r:02x}{g:02x}{b:02x}")
    }

    /// The red, green and blue channels.
    pub fn rgb(&self) -> [u8; 3] {
        self.rgb
    }

    /// Its WCAG 2.x contrast ratio against white, from 1 to 21.
    pub fn contrast_on_white(&self) -> f64 {
        contrast(luminance(self.rgb), luminance(WHITE))
    }

    /// The colour of text on the accent (a button's label): white or the
    /// page's near-black, whichever contrasts more. With the accent held
    /// to 4.5:1 against white, that is white, but the choice is the rule,
    /// not the assumption.
    pub fn foreground(&self) -> &'static str {
        let on = luminance(self.rgb);
        if contrast(on, luminance(WHITE)) >= contrast(on, luminance(NEAR_BLACK)) {
            "#ffffff"
        } else {
            "#1b1f24"
        }
    }

    /// The CSS that gives the page the accent, for the light colour
    /// scheme only: the page's dark scheme sets its own light accent on a
    /// dark background, which a colour chosen to read on white would not.
    pub fn stylesheet(&self) -> String {
        format!(
            "@media (prefers-color-scheme: light) {{\n  :root {{\n    --accent: {};\n    --accent-fg: {};\n  }}\n}}\n",
            self.hex(),
            self.foreground()
        )
    }
}

/// WCAG 2.x relative luminance of an sRGB colour.
fn luminance(rgb: [u8; 3]) -> f64 {
    let linear = |channel: u8| {
        let c = f64::from(channel) / 255.0;
        if c <= 0.03928 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let [r, g, b] = rgb.map(linear);
    0.2126 * r + 0.7152 * g + 0.0722 * b
}

/// WCAG 2.x contrast ratio of two relative luminances.
fn contrast(a: f64, b: f64) -> f64 {
    (a.max(b) + 0.05) / (a.min(b) + 0.05)
}

/// A refused ratio to two decimals, never rounded up to the minimum: a
/// refusal saying "4.50:1" would contradict itself.
fn shown_ratio(ratio: f64) -> String {
    let rounded = (ratio * 100.0).round() / 100.0;
    let shown = if ratio < MIN_CONTRAST {
        rounded.min(MIN_CONTRAST - 0.01)
    } else {
        rounded
    };
    format!("{shown:.2}")
}
