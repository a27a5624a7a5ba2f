//! `load_home`: what the first screen says runs where.

use leptos::prelude::*;

use super::{HomeInfo, LoadError};

/// The model that answers and the sandbox that runs the code, by default.
#[server(prefix = "/api", endpoint = "load_home")]
pub async fn load_home() -> Result<HomeInfo, LoadError> {
    use super::ports::{ArcModelCatalog, ArcSandboxChoices};

    let models = use_context::<ArcModelCatalog>()
        .map(|catalog| catalog.choices())
        .unwrap_or_default();
    let backends = use_context::<ArcSandboxChoices>()
        .map(|sandboxes| sandboxes.backends())
        .unwrap_or_default();
    Ok(HomeInfo { models, backends })
}
