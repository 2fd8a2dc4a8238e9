//! What a text the page shows a person as who asks or why (a client's
//! `client_name`, the brand file's name, purpose and labels) may not
//! hold: characters that are invisible, reorder the text around them, or
//! control a terminal, any of which can make one name look like another
//! (Unicode Technical Report #36, "Unicode Security Considerations").

/// Whether `c` is a control character (Unicode category Cc), a format
/// character (Cf: the bidirectional embeddings, overrides, isolates and
/// marks, the zero-width space, joiners, the word joiner, the byte order
/// mark, the invisible operators and the tag characters), a line or
/// paragraph separator, or one of the fillers and default-ignorable marks
/// that draw nothing (the Hangul fillers, U+034F, U+17B4/U+17B5).
pub fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{0600}'..='\u{0605}'
                | '\u{061C}'
                | '\u{06DD}'
                | '\u{070F}'
                | '\u{0890}'..='\u{0891}'
                | '\u{08E2}'
                | '\u{115F}'..='\u{1160}'
                | '\u{17B4}'..='\u{17B5}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{110BD}'
                | '\u{110CD}'
                | '\u{13430}'..='\u{1343F}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bidi_controls_invisible_characters_fillers_and_controls_are_hidden() {
        for c in [
            '\u{202A}',
            '\u{202B}',
            '\u{202C}',
            '\u{202D}',
            '\u{202E}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200E}',
            '\u{200F}',
            '\u{061C}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{00AD}',
            '\u{E0041}',
            '\u{115F}',
            '\u{1160}',
            '\u{3164}',
            '\u{FFA0}',
            '\u{0000}',
            '\u{001B}',
            '\u{007F}',
            '\u{0085}',
            '\u{2028}',
            '\u{2029}',
        ] {
            assert!(is_hidden(c), "U+{:04X}", c as u32);
        }
        for c in "Acme Bank, Zürich – Über 18 ☂ محمد 東京 ÿ".chars() {
            assert!(!is_hidden(c), "U+{:04X}", c as u32);
        }
    }
}
