//! [`UserStore`](crate::users::UserStore) on both databases: the statements are `sql.rs`'s.

/// [`UserStore`] for a store whose statements are all in `sql.rs`: the
/// same for SQLite and PostgreSQL.
macro_rules! user_store_on_sql {
    ($store:ty) => {
        #[async_trait::async_trait]
        impl $crate::users::UserStore for $store {
            async fn sign_in_user(
                &self,
                identity: &$crate::users::Identity,
                owner: runcell_protocol::OwnerId,
                listed: bool,
                now_ms: u64,
            ) -> Result<$crate::users::SignedInUser, $crate::StoreError> {
                $crate::sql::sign_in_user(self, identity, owner, listed, now_ms).await
            }

            async fn user(
                &self,
                id: &str,
            ) -> Result<Option<$crate::users::UserRecord>, $crate::StoreError> {
                $crate::sql::user(self, id).await
            }

            async fn users(&self) -> Result<Vec<$crate::users::UserRecord>, $crate::StoreError> {
                $crate::sql::users(self).await
            }

            async fn disabled_users(
                &self,
            ) -> Result<Vec<(String, runcell_protocol::OwnerId)>, $crate::StoreError> {
                $crate::sql::disabled_users(self).await
            }

            async fn set_role(
                &self,
                id: &str,
                role: $crate::users::Role,
            ) -> Result<bool, $crate::StoreError> {
                $crate::sql::set_user_column(
                    self,
                    id,
                    $crate::sql::UserColumn::Role,
                    $crate::sql::Param::Text(role.as_str().to_string()),
                )
                .await
            }

            async fn set_limits(
                &self,
                id: &str,
                limits: &$crate::users::LimitOverrides,
            ) -> Result<bool, $crate::StoreError> {
                let json = serde_json::to_string(limits)
                    .map_err(|e| $crate::StoreError::Database(sqlx::Error::Encode(e.into())))?;
                $crate::sql::set_user_column(
                    self,
                    id,
                    $crate::sql::UserColumn::Limits,
                    $crate::sql::Param::Text(json),
                )
                .await
            }

            async fn set_disabled(
                &self,
                id: &str,
                disabled_ms: Option<u64>,
            ) -> Result<bool, $crate::StoreError> {
                let value = match disabled_ms {
                    Some(at) => $crate::sql::Param::Int($crate::rows::ms(at)),
                    None => $crate::sql::Param::MaybeInt(None),
                };
                $crate::sql::set_user_column(self, id, $crate::sql::UserColumn::Disabled, value)
                    .await
            }

            async fn touch_user(&self, id: &str, now_ms: u64) -> Result<(), $crate::StoreError> {
                $crate::sql::touch_user(self, id, now_ms).await
            }

            async fn add_usage(
                &self,
                id: &str,
                runs: u64,
                model_ms: u64,
                day: u64,
            ) -> Result<(), $crate::StoreError> {
                $crate::sql::add_usage(self, id, runs, model_ms, day).await
            }

            async fn revoke_keys_of(
                &self,
                user_id: &str,
                now_ms: u64,
            ) -> Result<u64, $crate::StoreError> {
                $crate::sql::revoke_keys_of(self, user_id, now_ms).await
            }

            async fn audit(
                &self,
                entry: &$crate::users::AuditEntry,
            ) -> Result<(), $crate::StoreError> {
                $crate::sql::audit(self, entry).await
            }

            async fn audit_log(
                &self,
                before: Option<i64>,
                limit: u32,
            ) -> Result<Vec<$crate::users::AuditEntry>, $crate::StoreError> {
                $crate::sql::audit_log(self, before, limit).await
            }
        }
    };
}

user_store_on_sql!(super::SqliteStore);
user_store_on_sql!(super::PostgresStore);
