//! [`CliError`]: everything that can go wrong, each with its own exit code
//! (docs/CLI.md, "Exit codes").

use std::path::PathBuf;

/// An error of the `cmv` command line. Every variant maps to one exit code
/// ([`CliError::exit_code`]); its message is one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An input file that does not exist or cannot be read (exit code 3).
    #[error("cannot read {path}: {source}; check the path and its permissions")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A file that is not a safetensors file, or a truncated one (exit code 4).
    #[error("{path} is not a valid safetensors file ({reason}){hint}")]
    NotSafetensors {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// A GGUF file that cannot be read (exit code 4).
    #[error("{path} is not a GGUF file this build reads: {reason}")]
    NotGguf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file written by `cmv compress` given where a model is expected (exit code 4).
    #[error(
        "{path} is already compressed by cmv: pass the original model (or `cmv decompress` it \
         first)"
    )]
    AlreadyCompressed {
        /// The file.
        path: PathBuf,
    },
    /// A compressed tensor whose container (or cmv metadata) is damaged or truncated (exit
    /// code 5).
    #[error(
        "tensor {tensor} in {path} is damaged: {reason}; recompress it from the original model"
    )]
    Damaged {
        /// The file.
        path: PathBuf,
        /// The tensor.
        tensor: String,
        /// What is wrong.
        reason: String,
    },
    /// A format name no format in the registry has (exit code 6).
    #[error("unknown format {name:?}: the formats are {known} (`cmv formats` lists them)")]
    UnknownFormat {
        /// The name asked for.
        name: String,
        /// The registered names.
        known: String,
    },
    /// A variant (encoder option set) the format does not have (exit code 6).
    #[error("format {format} has no variant {name:?}: its variants are {known}")]
    UnknownVariant {
        /// The format.
        format: &'static str,
        /// The name asked for.
        name: String,
        /// The format's variants.
        known: String,
    },
    /// A tensor named with `--tensor` that the file does not hold (exit code 7).
    #[error("{path} has no tensor {tensor:?}: `cmv inspect {path}` lists its tensors")]
    NoSuchTensor {
        /// The file.
        path: PathBuf,
        /// The tensor asked for.
        tensor: String,
    },
    /// A tensor named with `--tensor` (or any tensor, with `--strict`) that the format cannot
    /// take (exit code 7).
    #[error("tensor {tensor} cannot be compressed with {format}: {reason}")]
    CannotTake {
        /// The tensor.
        tensor: String,
        /// The format.
        format: &'static str,
        /// Why (the format's own message, or the dtype or shape rule).
        reason: String,
    },
    /// An output file that exists, without `--force` (exit code 8).
    #[error("{path} exists: pass --force to overwrite it, or choose another output")]
    OutputExists {
        /// The file.
        path: PathBuf,
    },
    /// An output file that cannot be written (exit code 9).
    #[error("cannot write {path}: {reason}; check the directory, its permissions and free space")]
    Write {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A `tokenizer.json` the embedding evaluation cannot use (exit code 11).
    #[error("{path} is not a BERT WordPiece tokenizer.json this build reads: {reason}")]
    Tokenizer {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A model that is not a BERT encoder the embedding evaluation can run (exit code 11).
    #[error(
        "{path} is not a BERT sentence encoder the embedding evaluation can run: {reason}; \
         drop --tokenizer to compare the weights only"
    )]
    NotBert {
        /// The file.
        path: PathBuf,
        /// What is missing or does not fit.
        reason: String,
    },
    /// A sentences file without a sentence (exit code 11).
    #[error("{path} holds no sentence: give one per line")]
    NoSentences {
        /// The file.
        path: PathBuf,
    },
    /// `cmv eval` on two files whose tensors do not correspond (exit code 10).
    #[error("{original} and {compressed} do not match: {reason}")]
    Mismatch {
        /// The original model.
        original: PathBuf,
        /// The compressed (or decompressed) model.
        compressed: PathBuf,
        /// What differs.
        reason: String,
    },
    /// A command line clap accepts but cmv cannot run (exit code 2).
    #[error("{reason}; see `cmv <command> --help`")]
    Usage {
        /// What is wrong.
        reason: String,
    },
    /// `cmv bench` without a usable GPU: no driver, no such device, or a build without GPU
    /// support (exit code 12).
    #[error("cmv bench needs an NVIDIA GPU: {reason}")]
    NoGpu {
        /// Why there is none.
        reason: String,
    },
    /// `cmv bench`: a product failed on the GPU or did not match its CPU reference (exit
    /// code 13).
    #[cfg_attr(not(feature = "gpu"), allow(dead_code))]
    #[error(
        "cmv bench failed at tensor {tensor}: {reason}; if it is reproducible, please report it \
         with the command line and `cmv inspect` of the file"
    )]
    GpuFailed {
        /// The tensor being measured (or `-` before the first one).
        tensor: String,
        /// What failed.
        reason: String,
    },
}

impl CliError {
    /// The process exit code of this error (docs/CLI.md). 1 is kept for internal errors (a
    /// bug), 2 is clap's for malformed command lines.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage { .. } => 2,
            CliError::Read { .. } => 3,
            CliError::NotSafetensors { .. }
            | CliError::NotGguf { .. }
            | CliError::AlreadyCompressed { .. } => 4,
            CliError::Damaged { .. } => 5,
            CliError::UnknownFormat { .. } | CliError::UnknownVariant { .. } => 6,
            CliError::NoSuchTensor { .. } | CliError::CannotTake { .. } => 7,
            CliError::OutputExists { .. } => 8,
            CliError::Write { .. } => 9,
            CliError::Mismatch { .. } => 10,
            CliError::Tokenizer { .. }
            | CliError::NotBert { .. }
            | CliError::NoSentences { .. } => 11,
            CliError::NoGpu { .. } => 12,
            CliError::GpuFailed { .. } => 13,
        }
    }
}

/// The result type of the CLI.
pub type Result<T, E = CliError> = std::result::Result<T, E>;
