//! `runcell keys create|list|revoke`.

use std::fmt::Write as _;
use std::process::ExitCode;

use super::KeysCommand;
use runcell_server::auth::{AuthError, create_key};
use runcell_server::config::Config;
use runcell_store::{AuditEntry, Database, KeyStore, StoreError, UserStore};

#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("there is no live key named `{0}` (see `runcell keys list`)")]
    NoSuchKey(String),
}

/// `runcell keys …`: prints what the command did, or why it could not.
pub async fn run(command: &KeysCommand) -> ExitCode {
    let config = match command.settings().load() {
        Ok(config) => config,
        Err(code) => return code,
    };
    match against_database(command, &config).await {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("runcell: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the command against the configured database (the data dir's, or
/// PostgreSQL's); what to print.
async fn against_database(command: &KeysCommand, config: &Config) -> Result<String, KeysError> {
    std::fs::create_dir_all(&config.data_dir).map_err(|e| StoreError::Open {
        path: runcell_server::config::display_path(&config.data_dir),
        source: sqlx::Error::Io(e),
    })?;
    let database = Database::open(config.database_url.expose(), &config.data_dir).await?;
    let result = execute(command, database.keys().as_ref(), database.users().as_ref()).await;
    database.close().await;
    result
}

/// Writes what the command line did to the audit log (the server's own
/// hand: no person); a log that cannot be written is said, not fatal.
async fn audit(log: &dyn UserStore, action: &str, subject: &str, detail: String) {
    let entry = AuditEntry {
        id: 0,
        at_ms: runcell_core::clock::now_ms(),
        actor: None,
        action: action.into(),
        subject: Some(subject.into()),
        detail,
    };
    if let Err(err) = log.audit(&entry).await {
        tracing::warn!(%err, "cannot write to the audit log");
    }
}

async fn execute(
    command: &KeysCommand,
    store: &dyn KeyStore,
    log: &dyn UserStore,
) -> Result<String, KeysError> {
    match command {
        KeysCommand::Create { name, .. } => {
            let (key, record) = create_key(store, name).await?;
            audit(
                log,
                "key_created",
                &record.id,
                format!("the command line made the API key {}", record.name),
            )
            .await;
            Ok(format!(
                "Made API key `{}` (id {}). It is shown this once; keep it now:\n{}\n",
                record.name,
                record.id,
                key.as_str()
            ))
        }
        KeysCommand::List { .. } => Ok(table(&store.keys().await?)),
        KeysCommand::Revoke { name, .. } => {
            if store
                .revoke_key(name, runcell_core::clock::now_ms())
                .await?
            {
                audit(
                    log,
                    "key_revoked",
                    name,
                    format!("the command line revoked the API key {name}"),
                )
                .await;
                Ok(format!("Revoked `{name}`: its tokens no longer work.\n"))
            } else {
                Err(KeysError::NoSuchKey(name.clone()))
            }
        }
    }
}

fn when(ms: Option<u64>) -> String {
    ms.map_or_else(
        || "-".to_string(),
        |ms| {
            let secs = i64::try_from(ms / 1000).unwrap_or(i64::MAX);
            time::OffsetDateTime::from_unix_timestamp(secs).map_or_else(
                |_| ms.to_string(),
                |t| {
                    format!(
                        "{:04}-{:02}-{:02} {:02}:{:02}",
                        t.year(),
                        u8::from(t.month()),
                        t.day(),
                        t.hour(),
                        t.minute()
                    )
                },
            )
        },
    )
}

fn table(keys: &[runcell_store::KeyRecord]) -> String {
    if keys.is_empty() {
        return "No API keys yet: make one with `runcell keys create --name NAME`.\n".into();
    }
    let width = keys.iter().map(|k| k.name.len()).max().unwrap_or(4).max(4);
    let mut out = format!(
        "{:width$}  {:10}  {:16}  {:16}  STATUS\n",
        "NAME", "KEY", "CREATED (UTC)", "LAST USED (UTC)"
    );
    for key in keys {
        let status = if key.is_live() {
            "live".to_string()
        } else {
            format!("revoked {}", when(key.revoked_ms))
        };
        let _ = writeln!(
            out,
            "{:width$}  {:10}  {:16}  {:16}  {status}",
            key.name,
            format!("{}…", key.prefix),
            when(Some(key.created_ms)),
            when(key.last_used_ms),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::Settings;
    use runcell_store::SqliteStore;

    fn settings() -> Settings {
        Settings {
            addr: None,
            data_dir: None,
            database_url: None,
        }
    }

    #[tokio::test]
    async fn create_list_revoke() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open_in(dir.path()).await.expect("store");
        let made = execute(
            &KeysCommand::Create {
                name: "ci".into(),
                settings: settings(),
            },
            &store,
            &store,
        )
        .await
        .expect("made");
        let key = made.lines().last().expect("a last line");
        assert!(runcell_server::auth::ApiKey::parse(key).is_some(), "{made}");
        let listed = execute(
            &KeysCommand::List {
                settings: settings(),
            },
            &store,
            &store,
        )
        .await
        .expect("listed");
        assert!(listed.contains("ci") && listed.contains("live"), "{listed}");
        assert!(!listed.contains(key), "the list never shows a key");
        execute(
            &KeysCommand::Revoke {
                name: "ci".into(),
                settings: settings(),
            },
            &store,
            &store,
        )
        .await
        .expect("revoked");
        let again = execute(
            &KeysCommand::Revoke {
                name: "ci".into(),
                settings: settings(),
            },
            &store,
            &store,
        )
        .await;
        assert!(matches!(again, Err(KeysError::NoSuchKey(_))));
        let listed = execute(
            &KeysCommand::List {
                settings: settings(),
            },
            &store,
            &store,
        )
        .await
        .expect("listed");
        assert!(listed.contains("revoked"), "{listed}");
        let log = store.audit_log(None, 10).await.expect("the audit log");
        assert_eq!(
            log.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
            ["key_revoked", "key_created"]
        );
        assert!(log.iter().all(|e| e.actor.is_none()));
    }
}
