//! On a share link's page: the files its link offers, and where they
//! download.

use leptos::prelude::*;

use crate::api::{FileItem, query_value};

/// The files a share link offers (their paths), under the link's own route.
#[derive(Clone, Debug)]
pub struct ShareLinkOffer {
    /// `/s/{token}/files`
    pub base: String,
    pub paths: Vec<String>,
}

impl ShareLinkOffer {
    /// What the link `token` offers: `files`.
    pub fn new(token: &str, files: &[FileItem]) -> Self {
        Self {
            base: format!("/s/{token}/files"),
            paths: files.iter().map(|f| f.path.clone()).collect(),
        }
    }

    /// Where `path` downloads, if the link offers it.
    pub fn href(&self, path: &str) -> Option<String> {
        self.paths
            .iter()
            .any(|p| p == path)
            .then(|| format!("{}?path={}", self.base, query_value(path)))
    }
}

/// Makes `offer` what the page's file links may point to.
pub fn provide_share_link_offer(offer: ShareLinkOffer) {
    provide_context(offer);
}

/// What the share link offers, on a share link's page; `None` elsewhere.
pub fn use_share_link_offer() -> Option<ShareLinkOffer> {
    use_context::<ShareLinkOffer>()
}
