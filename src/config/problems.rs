//! The settings' problems, one printable line each.

/// Problems found in the settings; each line names the setting and source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .lines.join("\n"))]
pub struct ConfigError {
    lines: Vec<String>,
    /// Something the settings name did not answer (a key's HSM): not the
    /// settings' fault, and a later try may succeed, so the exit code is
    /// 1, not 2 (docs/commands.md), and a supervisor restarts lanyard.
    unanswered: bool,
}

impl ConfigError {
    /// Collects problem lines, escaping control characters and the
    /// characters that reorder or break text: a line quotes values as
    /// given, and a line break, terminal escape or bidirectional override
    /// in one would split the problem or disguise it on stderr.
    pub fn new(lines: Vec<String>) -> Self {
        let lines = lines
            .into_iter()
            .map(|line| {
                let mut shown = String::with_capacity(line.len());
                for c in line.chars() {
                    if c.is_control() || reorders_text(c) {
                        shown.extend(c.escape_default());
                    } else {
                        shown.push(c);
                    }
                }
                shown
            })
            .collect();
        ConfigError {
            lines,
            unanswered: false,
        }
    }

    /// Marks the problems as including something that did not answer.
    pub fn unanswered_if(mut self, unanswered: bool) -> Self {
        self.unanswered |= unanswered;
        self
    }

    pub fn is_unanswered(&self) -> bool {
        self.unanswered
    }

    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    pub fn into_lines(self) -> Vec<String> {
        self.lines
    }
}

/// Bidirectional embeddings, overrides and isolates, and the Unicode line
/// and paragraph separators.
fn reorders_text(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}
