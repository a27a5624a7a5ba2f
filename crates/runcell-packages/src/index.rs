//! What the index decides: the policy, a project's files (cached, fetched,
//! or the stale copy), and a file handed to an account (cached or
//! downloaded, checked, counted). No HTTP types here: `http` maps the
//! results.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use runcell_core::metrics;
use tokio::sync::OwnedSemaphorePermit;

use crate::PackageIndex;
use crate::account::{Account, Notice, Reservation};
use crate::config::Mode;
use crate::name;
use crate::page::{self, FileEntry, Page};
use crate::upstream::FetchError;

const MIB: u64 = 1024 * 1024;

/// Why a page or a file was not served.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Nothing by that name here (404), said plainly.
    NotFound(String),
    /// Not a normalised valid project name, or not a file name this index serves (404).
    BadName(String),
    /// The policy or a cap refused it (403); `metric` is the refusal's reason label.
    Refused {
        project: String,
        reason: String,
        metric: &'static str,
    },
    /// Upstream failed or sent a file that is not the one listed (502).
    Upstream {
        project: String,
        reason: String,
        metric: &'static str,
    },
}

/// A file ready to be sent: a blob in the cache.
#[derive(Debug)]
pub(crate) struct Served {
    pub path: PathBuf,
    pub bytes: u64,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn refused(project: &str, reason: String, metric: &'static str) -> Failure {
    Failure::Refused {
        project: project.to_string(),
        reason,
        metric,
    }
}

impl PackageIndex {
    /// Reports a failure once: a log line, a metric, and a notice to the account.
    fn report(account: &Account, failure: Failure) -> Failure {
        match &failure {
            Failure::NotFound(_) => {}
            Failure::BadName(why) => {
                tracing::debug!(account = account.label(), why, "package request refused");
                metrics::package_refused("name");
            }
            Failure::Refused {
                project,
                reason,
                metric,
            }
            | Failure::Upstream {
                project,
                reason,
                metric,
            } => {
                tracing::info!(
                    account = account.label(),
                    project,
                    reason,
                    "package request refused"
                );
                metrics::package_refused(metric);
                account.notify(Notice::Refused {
                    project: project.clone(),
                    reason: reason.clone(),
                });
            }
        }
        failure
    }

    /// Whether the policy lets `project` (normalised) be served.
    pub(crate) fn check_policy(&self, project: &str) -> Result<(), Failure> {
        if self.config.mode == Mode::Off {
            return Err(refused(
                project,
                "runcell's package index is off (packages.mode = \"off\")".into(),
                "policy",
            ));
        }
        if self.deny.contains(project) {
            let reason =
                format!("runcell's package policy does not allow '{project}' (packages.deny)");
            return Err(refused(project, reason, "policy"));
        }
        if self.config.mode == Mode::Allowlist && !self.allow.contains(project) {
            let reason = format!(
                "runcell's package policy allows only listed projects, and '{project}' is not one (packages.allow)"
            );
            return Err(refused(project, reason, "policy"));
        }
        Ok(())
    }

    /// The files of `project` a jail may see: its page, shared, and the
    /// indices of the files listed (wheels, and sdists if allowed; offline
    /// only those whose blob is cached). The account asked for it.
    pub(crate) async fn project_files(
        &self,
        account: &Account,
        project: &str,
    ) -> Result<(Arc<Page>, Vec<usize>), Failure> {
        let files = async {
            if !name::is_project_name(project) || name::normalize(project) != project {
                return Err(Failure::BadName(format!(
                    "'{}' is not a normalised project name; ask for /simple/{}/",
                    project.escape_debug(),
                    name::normalize(project).escape_debug()
                )));
            }
            self.check_policy(project)?;
            let page = self.page(account, project).await?;
            let listed = (0..page.files.len())
                .filter(|i| self.lists(&page.files[*i]))
                .collect();
            account.asked_for(project);
            Ok((page, listed))
        };
        files
            .await
            .map_err(|failure| Self::report(account, failure))
    }

    /// Permits for one upstream fetch of `account`'s: its own first, then
    /// one of all sessions'. Waits while either has none free.
    async fn fetch_permits(
        &self,
        account: &Account,
    ) -> Result<(OwnedSemaphorePermit, OwnedSemaphorePermit), FetchError> {
        let closed = |_| FetchError::Failed("the index is shutting down".into());
        let mine = account
            .fetches(self.config.max_session_fetches as usize)
            .acquire_owned()
            .await
            .map_err(closed)?;
        let all = Arc::clone(&self.fetches)
            .acquire_owned()
            .await
            .map_err(closed)?;
        Ok((mine, all))
    }

    fn lists(&self, file: &FileEntry) -> bool {
        (file.wheel || self.config.sdists)
            && (!self.config.offline || self.cache.has_blob(&file.sha256))
    }

    /// `project`'s page: the cached copy while fresh (or offline), else
    /// upstream's (fetched within `account`'s and everyone's fetch
    /// permits), else the stale copy.
    async fn page(&self, account: &Account, project: &str) -> Result<Arc<Page>, Failure> {
        let cached = self.cache.read_page(project).await;
        if self.config.offline {
            return cached.ok_or_else(|| {
                Failure::NotFound(format!(
                    "'{project}' is not in runcell's offline package cache (packages.offline)"
                ))
            });
        }
        let fresh = |page: &Page| now().saturating_sub(page.fetched_at) < self.config.page_ttl_secs;
        if let Some(page) = cached.as_ref().filter(|p| fresh(p)) {
            return Ok(Arc::clone(page));
        }
        let _one_fetch = self.cache.lock(format!("page/{project}")).await;
        let cached = self.cache.read_page(project).await.or(cached);
        if let Some(page) = cached.as_ref().filter(|p| fresh(p)) {
            return Ok(Arc::clone(page));
        }
        let fetched = match self.fetch_permits(account).await {
            Ok(_permits) => match self.upstream.page(project).await {
                Ok(fetched) => {
                    page::parse_upstream(project, &fetched.url, &fetched.body, fetched.json)
                        .ok_or_else(|| FetchError::Failed("upstream's page did not parse".into()))
                }
                Err(err) => Err(err),
            },
            Err(err) => Err(err),
        };
        match fetched {
            Ok(files) => {
                let page = Page {
                    fetched_at: now(),
                    files,
                };
                match self.cache.write_page(project, page.clone()).await {
                    Ok(shared) => Ok(shared),
                    Err(err) => {
                        tracing::warn!(%err, project, "a package page could not be cached");
                        Ok(Arc::new(page))
                    }
                }
            }
            Err(FetchError::NotFound) => Err(Failure::NotFound(format!(
                "no project named '{project}' in the package index"
            ))),
            Err(err) => match cached {
                Some(stale) => {
                    tracing::warn!(project, ?err, "upstream failed; serving the cached page");
                    Ok(stale)
                }
                None => Err(Failure::Upstream {
                    project: project.to_string(),
                    reason: format!(
                        "runcell could not fetch '{project}' from its package index upstream ({})",
                        describe(&err)
                    ),
                    metric: "upstream",
                }),
            },
        }
    }

    /// The file `filename` with `sha256`, for `account`: checked against
    /// the policy, the page and the caps, from the cache or downloaded,
    /// and counted as served.
    pub(crate) async fn file(
        &self,
        account: &Account,
        sha256: &str,
        filename: &str,
    ) -> Result<Served, Failure> {
        let served = self.file_inner(account, sha256, filename).await;
        served.map_err(|failure| Self::report(account, failure))
    }

    async fn file_inner(
        &self,
        account: &Account,
        sha256: &str,
        filename: &str,
    ) -> Result<Served, Failure> {
        let parsed = name::parse_filename(filename)
            .filter(|_| name::is_safe_filename(filename) && page::is_sha256(sha256));
        let Some((project, version, _)) = parsed else {
            return Err(Failure::BadName(format!(
                "'{}' is not a file this index serves",
                filename.escape_debug()
            )));
        };
        self.check_policy(&project)?;
        let page = match self.cache.read_page(&project).await {
            Some(page) => page,
            None => self.page(account, &project).await?,
        };
        let not_listed = || {
            Failure::NotFound(format!(
                "'{filename}' with that sha256 is not listed for '{project}'"
            ))
        };
        let entry = page
            .files
            .iter()
            .find(|f| {
                f.sha256 == sha256 && f.filename == filename && (f.wheel || self.config.sdists)
            })
            .cloned()
            .ok_or_else(not_listed)?;
        drop(page);
        let (file_cap, session_cap) = (
            self.config.max_file_bytes(),
            self.config.max_session_bytes(),
        );
        let over_file = |bytes: u64| {
            let reason = format!(
                "'{filename}' is {} MiB, over packages.max_file_mib ({})",
                bytes.div_ceil(MIB),
                self.config.max_file_mib
            );
            refused(&project, reason, "size")
        };
        let over_session = |bytes: u64| {
            let reason = format!(
                "'{filename}' ({} MiB) would take this session past packages.max_session_mib ({}; {} MiB served or on its way so far)",
                bytes.div_ceil(MIB),
                self.config.max_session_mib,
                account.bytes_served().div_ceil(MIB)
            );
            refused(&project, reason, "session_size")
        };
        // The listed size is reserved before anything is fetched or sent; a
        // file of unknown size is reserved as it comes in.
        let listed = entry.size.unwrap_or(0);
        if listed > file_cap {
            return Err(over_file(listed));
        }
        let mut reserved = account
            .reserve(listed, session_cap)
            .ok_or_else(|| over_session(listed))?;
        let (path, cached) = self
            .blob(account, &project, &entry, file_cap, &mut reserved)
            .await
            .map_err(|err| match err {
                FetchError::TooLarge(bytes) => over_file(bytes),
                FetchError::OverBudget(bytes) => over_session(bytes),
                FetchError::NotFound if self.config.offline => Failure::NotFound(format!("'{filename}' is not in runcell's offline package cache (packages.offline)")),
                FetchError::Mismatch(got) => Failure::Upstream {
                    project: project.clone(),
                    reason: format!("'{filename}' from the package index upstream did not match its sha256 (listed {sha256}, got {got}); it was not installed"),
                    metric: "hash",
                },
                other => Failure::Upstream {
                    project: project.clone(),
                    reason: format!("runcell could not download '{filename}' from its package index upstream ({})", describe(&other)),
                    metric: "upstream",
                },
            })?;
        let bytes = tokio::fs::metadata(&path)
            .await
            .map(|m| m.len())
            .map_err(|err| {
                tracing::warn!(%err, path = %path.display(), "a cached package file vanished");
                not_listed()
            })?;
        if bytes > file_cap {
            return Err(over_file(bytes));
        }
        if !reserved.settle(bytes) {
            return Err(over_session(bytes));
        }
        reserved.keep();
        account.record(&project, &version);
        let source = if cached { "cache" } else { "upstream" };
        metrics::package_file_served(source, bytes);
        tracing::info!(
            account = account.label(),
            project,
            version,
            filename,
            bytes,
            source,
            "package file served"
        );
        account.notify(Notice::Served {
            project,
            version,
            filename: filename.to_string(),
            bytes,
            cached,
        });
        Ok(Served { path, bytes })
    }

    /// The blob for `entry`, and whether it was cached: one download per
    /// hash at a time (a second asker finds it done), within `account`'s
    /// and everyone's fetch permits, its bytes held in `reserved` as they
    /// come.
    async fn blob(
        &self,
        account: &Account,
        project: &str,
        entry: &FileEntry,
        cap: u64,
        reserved: &mut Reservation<'_>,
    ) -> Result<(PathBuf, bool), FetchError> {
        let path = self.cache.blob_path(&entry.sha256);
        if path.is_file() {
            self.cache.touch(&path);
            return Ok((path, true));
        }
        if self.config.offline {
            return Err(FetchError::NotFound);
        }
        let _one_download = self.cache.lock(format!("blob/{}", entry.sha256)).await;
        if path.is_file() {
            return Ok((path, true));
        }
        let _permits = self.fetch_permits(account).await?;
        let temp = self
            .cache
            .temp_file()
            .map_err(|err| FetchError::Failed(format!("the cache: {err}")))?;
        tracing::debug!(project, url = entry.url, "downloading a package file");
        let mut within_budget = |length: u64| reserved.grow_to(length);
        let (temp, _) = self
            .upstream
            .download(&entry.url, cap, &entry.sha256, temp, &mut within_budget)
            .await?;
        let path = self
            .cache
            .keep_blob(temp, &entry.sha256)
            .map_err(|err| FetchError::Failed(format!("the cache: {err}")))?;
        Ok((path, false))
    }
}

/// A fetch's failure as a clause for a person.
fn describe(err: &FetchError) -> String {
    match err {
        FetchError::NotFound => "it answered 404".into(),
        FetchError::TooLarge(bytes) => format!("it is over {} MiB", bytes / MIB),
        FetchError::OverBudget(bytes) => {
            format!(
                "it would take the session past its budget at {} MiB",
                bytes / MIB
            )
        }
        FetchError::Mismatch(_) => "its sha256 did not match".into(),
        FetchError::Failed(why) => why.clone(),
    }
}
