//! Throwaway PostgreSQL databases for tests: a new database per test on the
//! server `RUNCELL_TEST_DATABASE_URL` names (`scripts/test.sh` starts one
//! with `scripts/pg-cluster.sh`), dropped when the test is done.

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::{Connection, PgConnection};

/// The variable naming the test server.
pub const URL_VAR: &str = "RUNCELL_TEST_DATABASE_URL";

/// A database of its own for one test.
pub struct ScratchDatabase {
    admin: String,
    name: String,
    /// Connects to the new database.
    pub url: String,
}

impl ScratchDatabase {
    /// A new, empty database; `None` (the test is skipped, and says so) when
    /// no server is configured, unless `RUNCELL_TEST_REQUIRE_PEERS=1`.
    pub async fn create(label: &str) -> Option<Self> {
        let Ok(admin) = std::env::var(URL_VAR) else {
            let required = std::env::var("RUNCELL_TEST_REQUIRE_PEERS").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "{URL_VAR} is not set and RUNCELL_TEST_REQUIRE_PEERS=1 \
                 (scripts/test.sh starts a PostgreSQL server with scripts/pg-cluster.sh)"
            );
            eprintln!("skipped: {URL_VAR} is not set (no PostgreSQL server to test against)");
            return None;
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let label: String = label
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(20)
            .collect::<String>()
            .to_ascii_lowercase();
        let name = format!("t_{label}_{nanos:x}_{:x}", rand::random::<u32>());
        let mut conn = PgConnection::connect(&admin)
            .await
            .expect("the test PostgreSQL server answers");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("a scratch database");
        conn.close().await.ok();
        let mut url = url::Url::parse(&admin).expect("a database URL");
        url.set_path(&format!("/{name}"));
        Some(Self {
            admin,
            name,
            url: url.to_string(),
        })
    }

    /// Drops the database (its connections too).
    pub async fn drop_now(self) {
        if let Ok(mut conn) = PgConnection::connect(&self.admin).await {
            let _ = sqlx::query(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ))
            .execute(&mut conn)
            .await;
            conn.close().await.ok();
        }
    }
}
