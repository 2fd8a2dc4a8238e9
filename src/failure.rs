//! How a command failed, which decides the process's exit code
//! (docs/commands.md: 2 for bad settings or input, 1 for anything else).

use crate::config::ConfigError;

/// How a command failed, which decides the exit code.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Bad settings or credentials: exit 2, nothing started; 1 when
    /// something they name did not answer ([`ConfigError::is_unanswered`]).
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// Anything else: exit 1.
    #[error("{0}")]
    Runtime(String),
}

impl Failure {
    /// The process exit code (docs/commands.md).
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Config(err) if err.is_unanswered() => 1,
            Failure::Config(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }
}
