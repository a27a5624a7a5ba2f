//! The upstream index, asked over HTTP(S): project pages (bounded) and
//! files (streamed to disk, hashed, bounded). Redirects are followed only
//! within one scheme and host, three at most.

use std::time::Duration;

use reqwest::Url;
use sha2_010::{Digest, Sha256};
use tempfile::TempPath;
use tokio::io::AsyncWriteExt;

use crate::error::PackagesError;
use crate::page::UPSTREAM_ACCEPT;

/// The largest project page read.
const MAX_PAGE_BYTES: u64 = 32 * 1024 * 1024;
/// How long a page may take, and how long a download may go without a byte.
const TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const MAX_REDIRECTS: usize = 3;

/// Why a page or a file could not be had.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// Upstream answered 404.
    NotFound,
    /// The file is larger than the cap (its length, as far as it was read).
    TooLarge(u64),
    /// The file would take the session past its budget (its length, as far
    /// as it was read).
    OverBudget(u64),
    /// The file's sha256 is not the one listed.
    Mismatch(String),
    /// Anything else (network, status, a redirect elsewhere, the disk), said plainly.
    Failed(String),
}

/// A page as upstream sent it.
pub(crate) struct FetchedPage {
    /// Where it came from, after redirects: relative file URLs resolve against it.
    pub url: Url,
    pub body: Vec<u8>,
    pub json: bool,
}

pub(crate) struct Upstream {
    client: reqwest::Client,
    base: Url,
}

impl Upstream {
    /// `index_url`: the simple index's root (`/` appended if missing).
    pub fn new(
        index_url: &str,
        certificates: Vec<reqwest::Certificate>,
    ) -> Result<Self, PackagesError> {
        let with_slash = if index_url.ends_with('/') {
            index_url.to_string()
        } else {
            format!("{index_url}/")
        };
        let base = Url::parse(&with_slash)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some())
            .ok_or_else(|| PackagesError::UpstreamUrl(index_url.to_string()))?;
        let mut builder = reqwest::Client::builder();
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
        let client = builder
            .user_agent(concat!("runcell-packages/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                let same_origin = attempt.previous().first().is_some_and(|first| {
                    let next = attempt.url();
                    first.scheme() == next.scheme()
                        && first.host_str() == next.host_str()
                        && first.port_or_known_default() == next.port_or_known_default()
                });
                if attempt.previous().len() > MAX_REDIRECTS {
                    attempt.error("more than three redirects")
                } else if !same_origin {
                    attempt.error("a redirect to another host or scheme")
                } else {
                    attempt.follow()
                }
            }))
            .build()?;
        Ok(Self { client, base })
    }

    /// `project`'s page (a valid normalised name), JSON asked first.
    pub async fn page(&self, project: &str) -> Result<FetchedPage, FetchError> {
        let url = self
            .base
            .join(&format!("{project}/"))
            .map_err(|err| FetchError::Failed(err.to_string()))?;
        let mut response = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, UPSTREAM_ACCEPT)
            .timeout(TIMEOUT)
            .send()
            .await
            .map_err(|err| failed(&err))?;
        check_status(&response)?;
        let kind = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let json = kind.starts_with(crate::page::JSON_TYPE);
        if !json && !kind.contains("html") {
            return Err(FetchError::Failed(format!(
                "the page came as {kind:?}, not HTML or JSON"
            )));
        }
        let url = response.url().clone();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|err| failed(&err))? {
            if body.len() as u64 + chunk.len() as u64 > MAX_PAGE_BYTES {
                return Err(FetchError::Failed("the page is over 32 MiB".into()));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(FetchedPage { url, body, json })
    }

    /// Downloads `url` into `file` (at `temp`), at most `cap` bytes, and
    /// checks its sha256 against `sha256`; the finished file and its length.
    /// `within_budget` is asked for the length so far (the announced one
    /// first, then after each chunk) and stops the download when it says no.
    pub async fn download(
        &self,
        url: &str,
        cap: u64,
        sha256: &str,
        (mut file, temp): (tokio::fs::File, TempPath),
        within_budget: &mut (dyn FnMut(u64) -> bool + Send),
    ) -> Result<(TempPath, u64), FetchError> {
        let mut response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|err| failed(&err))?;
        check_status(&response)?;
        if let Some(length) = response.content_length() {
            if length > cap {
                return Err(FetchError::TooLarge(length));
            }
            if !within_budget(length) {
                return Err(FetchError::OverBudget(length));
            }
        }
        let mut hasher = Sha256::new();
        let mut length = 0_u64;
        while let Some(chunk) = response.chunk().await.map_err(|err| failed(&err))? {
            length += chunk.len() as u64;
            if length > cap {
                return Err(FetchError::TooLarge(length));
            }
            if !within_budget(length) {
                return Err(FetchError::OverBudget(length));
            }
            hasher.update(&chunk);
            file.write_all(&chunk)
                .await
                .map_err(|err| FetchError::Failed(format!("the cache: {err}")))?;
        }
        file.flush()
            .await
            .map_err(|err| FetchError::Failed(format!("the cache: {err}")))?;
        let got = hex::encode(hasher.finalize());
        if got != sha256 {
            return Err(FetchError::Mismatch(got));
        }
        Ok((temp, length))
    }
}

fn check_status(response: &reqwest::Response) -> Result<(), FetchError> {
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        Err(FetchError::NotFound)
    } else if !status.is_success() {
        Err(FetchError::Failed(format!("upstream answered {status}")))
    } else {
        Ok(())
    }
}

/// A request's failure said plainly, with its causes (a redirect's refusal is one).
fn failed(err: &reqwest::Error) -> FetchError {
    let mut text = if err.is_timeout() {
        "upstream took too long".to_string()
    } else if err.is_redirect() {
        "upstream redirected".to_string()
    } else {
        "upstream could not be reached".to_string()
    };
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    FetchError::Failed(text)
}
