//! The database the configuration names: SQLite in the data directory (the
//! default, one machine) or a PostgreSQL server (`database_url`, for several
//! nodes), opened once and handed out as the traits the rest of the server
//! uses.

use std::path::Path;
use std::sync::Arc;

use super::{
    KeyStore, PostgresStore, SqliteStore, Store, StoreError, UserStore, redact_database_url,
};

#[derive(Clone)]
pub enum Database {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PostgresStore>),
}

impl Database {
    /// PostgreSQL if `url` is set (`postgres://…` or `postgresql://…`),
    /// else `runcell.db` in `data_dir`.
    pub async fn open(url: &str, data_dir: &Path) -> Result<Self, StoreError> {
        let url = url.trim();
        if url.is_empty() {
            Ok(Self::Sqlite(Arc::new(
                SqliteStore::open_in(data_dir).await?,
            )))
        } else {
            Ok(Self::Postgres(Arc::new(PostgresStore::open(url).await?)))
        }
    }

    pub fn store(&self) -> Arc<dyn Store> {
        match self {
            Self::Sqlite(db) => db.clone(),
            Self::Postgres(db) => db.clone(),
        }
    }

    pub fn keys(&self) -> Arc<dyn KeyStore> {
        match self {
            Self::Sqlite(db) => db.clone(),
            Self::Postgres(db) => db.clone(),
        }
    }

    pub fn users(&self) -> Arc<dyn UserStore> {
        match self {
            Self::Sqlite(db) => db.clone(),
            Self::Postgres(db) => db.clone(),
        }
    }

    /// Where it is, for logs: the file, or the URL without its password.
    pub fn describe(&self, url: &str, data_dir: &Path) -> String {
        match self {
            Self::Sqlite(_) => runcell_core::display_path(&data_dir.join(super::DB_FILE)),
            Self::Postgres(_) => redact_database_url(url.trim()),
        }
    }

    /// Waits for every connection to finish and closes them.
    pub async fn close(&self) {
        match self {
            Self::Sqlite(db) => db.close().await,
            Self::Postgres(db) => db.close().await,
        }
    }
}
