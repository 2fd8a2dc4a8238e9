//! The fenced blocks of a Markdown page, and what each block's info string
//! asks of the runner (docs/tests.md, "Documentation that runs").

/// Languages whose blocks are commands: run unless marked otherwise.
const SHELLS: [&str; 3] = ["sh", "bash", "shell"];

/// One fenced block, where it is and what it holds.
#[derive(Debug, Clone)]
pub struct Block {
    /// The page, as a path relative to the repository, for messages.
    pub file: String,
    /// The 1-based line of the opening fence.
    pub line: usize,
    pub info: String,
    pub text: String,
}

/// What the runner does with a block.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Not a command (`text`, `json`, …): nothing to run.
    NotShell,
    /// Run to its end in the page's shell session.
    Run,
    /// Run in the background until `probe` answers; it lives until the
    /// page ends. `outputs`: placeholders later blocks read from its
    /// output, each `(NAME, label)`.
    Server {
        probe: String,
        outputs: Vec<(String, String)>,
    },
    /// Each `docker run` of lanyard's image run as the image would run
    /// the binary, until `probe` answers.
    Docker { probe: String },
    /// Not run, for the reason given.
    NoRun(String),
}

impl Block {
    /// Where the block is, as editors and CI annotations read it.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// The block's plan, or why its info string is not one.
    pub fn plan(&self) -> Result<Plan, String> {
        let mut words = self.info.split_whitespace();
        let Some(lang) = words.next() else {
            return Err("a block with no info string: mark it `text` if it is \
                        output or a diagram, `sh` if it is commands"
                .into());
        };
        if !SHELLS.contains(&lang) {
            return Ok(Plan::NotShell);
        }
        let rest: Vec<&str> = words.collect();
        match rest.first().copied() {
            None => Ok(Plan::Run),
            Some("no-run") => match rest[1..].join(" ") {
                reason if reason.is_empty() => Err("`no-run` without a reason".into()),
                reason => Ok(Plan::NoRun(reason)),
            },
            Some("server") => {
                let (probe, outputs) = attributes(&rest[1..])?;
                Ok(Plan::Server { probe, outputs })
            }
            Some("docker") => match attributes(&rest[1..])? {
                (probe, outputs) if outputs.is_empty() => Ok(Plan::Docker { probe }),
                _ => Err("`docker` takes `probe=` alone".into()),
            },
            Some(other) => Err(format!(
                "unknown marker `{other}` (run, `no-run REASON`, `server probe=URL`, \
                 `docker probe=URL`)"
            )),
        }
    }
}

/// `probe=URL` and `NAME=label` attributes: the probe, and the
/// placeholders read from a server's output.
fn attributes(words: &[&str]) -> Result<(String, Vec<(String, String)>), String> {
    let mut probe = None;
    let mut outputs = Vec::new();
    for word in words {
        match word.split_once('=') {
            Some(("probe", url)) => probe = Some(url.to_string()),
            Some((name, label)) if name.chars().all(|c| c.is_ascii_uppercase()) => {
                outputs.push((name.to_string(), label.to_string()));
            }
            _ => return Err(format!("unknown attribute `{word}`")),
        }
    }
    let probe = probe.ok_or("a server without `probe=URL`")?;
    Ok((probe, outputs))
}

/// Every fenced block of `markdown` (fences of three backticks, indented
/// or not), named as `file`.
pub fn blocks(file: &str, markdown: &str) -> Result<Vec<Block>, String> {
    let mut found = Vec::new();
    let mut lines = markdown.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let Some(info) = line.trim_start().strip_prefix("```") else {
            continue;
        };
        // Blocks inside list items are indented by their fence's indent.
        let fence_indent = line.len() - line.trim_start().len();
        let mut text = String::new();
        let closed = lines.by_ref().any(|(_, line)| {
            let end = line.trim() == "```";
            if !end {
                let spaces = line.len() - line.trim_start_matches(' ').len();
                text.push_str(&line[spaces.min(fence_indent)..]);
                text.push('\n');
            }
            end
        });
        if !closed {
            return Err(format!("{file}:{}: a fence never closed", index + 1));
        }
        found.push(Block {
            file: file.to_string(),
            line: index + 1,
            info: info.trim().to_string(),
            text,
        });
    }
    Ok(found)
}
