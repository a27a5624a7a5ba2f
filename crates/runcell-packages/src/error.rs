//! What can keep the index from starting.

use std::path::PathBuf;

/// Why a [`crate::PackageIndex`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PackagesError {
    /// The cache directory (or one of its parts) could not be made or read.
    #[error("the package cache at {path} cannot be used: {source}")]
    Cache {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The upstream index URL is not an absolute http(s) URL.
    #[error("the upstream package index URL {0:?} is not an http or https URL")]
    UpstreamUrl(String),
    /// `packages.ca_file` could not be read as PEM certificates.
    #[error("the certificates for the upstream package index cannot be read: {0}")]
    Certificates(String),
    /// The HTTP client for upstream could not be built (no TLS roots, say).
    #[error("the HTTP client for the upstream package index could not be built: {0}")]
    Client(#[from] reqwest::Error),
}
