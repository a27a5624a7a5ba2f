//! Request bodies that may be large (uploads, notebook imports) go to a file
//! under `<data_dir>/spool` as they arrive, never to memory: what a client
//! sends is bounded while it streams (413 at the first byte over), a body
//! that sends nothing for `http.body_idle_timeout_secs` is dropped (408),
//! and at most `http.uploads_in_flight` of them are received at once (429
//! with `Retry-After`). The file is removed when the last use of it is
//! dropped, and with it the place it held.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ApiError;
use crate::config::Config;
use runcell_sandbox::files::{Contents, SpooledFile};

/// What a spooled file's name begins with; files left by an earlier run
/// (killed mid-upload) are removed at start.
const PREFIX: &str = "body-";

/// Where large bodies wait, and how many may at once.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    places: Arc<Semaphore>,
    in_flight: usize,
    idle: Duration,
}

/// One request's right to spool: held by each file it spools, so that the
/// place is free again only once they are all gone.
#[derive(Clone, Debug)]
pub struct Place(Arc<OwnedSemaphorePermit>);

impl Spool {
    /// A spool in `<data_dir>/spool` for `in_flight` bodies at once, each
    /// cut after `idle` without a byte.
    pub fn new(data_dir: &Path, in_flight: usize, idle: Duration) -> Self {
        let dir = data_dir.join("spool");
        if let Err(err) = std::fs::create_dir_all(&dir) {
            tracing::warn!(%err, dir = %dir.display(), "the spool directory cannot be made");
        }
        if let Ok(left) = std::fs::read_dir(&dir) {
            for entry in left.flatten() {
                if entry.file_name().to_string_lossy().starts_with(PREFIX) {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Self {
            dir,
            places: Arc::new(Semaphore::new(in_flight)),
            in_flight,
            idle,
        }
    }

    pub fn of_config(config: &Config) -> Self {
        Self::new(
            &config.data_dir,
            config.http.uploads_in_flight,
            Duration::from_secs(config.http.body_idle_timeout_secs),
        )
    }

    /// A place for one request's body, or `Busy` (429, `Retry-After`)
    /// when `http.uploads_in_flight` are under way.
    pub fn place(&self) -> Result<Place, ApiError> {
        Arc::clone(&self.places)
            .try_acquire_owned()
            .map(|permit| Place(Arc::new(permit)))
            .map_err(|_| {
                ApiError::Busy(format!(
                    "{} uploads are under way; try again in a moment",
                    self.in_flight
                ))
            })
    }

    /// A request body into a file, at most `max` bytes.
    pub async fn body(&self, place: &Place, body: Body, max: u64) -> Result<Contents, ApiError> {
        self.take(place, body.into_data_stream(), max, |e| broke(&e))
            .await
    }

    /// A stream of pieces (a body, a form's field) into a file, at most
    /// `max` bytes: `TooLarge` as soon as it is more, `TimedOut` when no
    /// piece comes for the idle time, `broken` for the stream's own errors.
    pub async fn take<S, E>(
        &self,
        place: &Place,
        pieces: S,
        max: u64,
        broken: impl Fn(E) -> ApiError,
    ) -> Result<Contents, ApiError>
    where
        S: Stream<Item = Result<Bytes, E>>,
    {
        let (file, path) = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempfile_in(&self.dir)
            .map_err(|e| ApiError::Internal(format!("cannot spool a body: {e}")))?
            .into_parts();
        let mut file = tokio::fs::File::from_std(file);
        let mut len = 0u64;
        let mut pieces = std::pin::pin!(pieces);
        loop {
            let piece = match tokio::time::timeout(self.idle, pieces.next()).await {
                Err(_) => return Err(idle(self.idle)),
                Ok(None) => break,
                Ok(Some(piece)) => piece.map_err(&broken)?,
            };
            len += piece.len() as u64;
            if len > max {
                return Err(too_large(max));
            }
            file.write_all(&piece)
                .await
                .map_err(|e| ApiError::Unavailable(format!("the server's disk is full: {e}")))?;
        }
        file.flush()
            .await
            .map_err(|e| ApiError::Unavailable(format!("the server's disk is full: {e}")))?;
        Ok(SpooledFile::new(path, len, Some(Arc::clone(&place.0))).into())
    }
}

/// 413 for a body over `max` bytes.
pub fn too_large(max: u64) -> ApiError {
    ApiError::TooLarge(format!(
        "a file may be at most {} MiB",
        max.div_ceil(1024 * 1024)
    ))
}

fn idle(after: Duration) -> ApiError {
    ApiError::TimedOut(format!(
        "the body sent nothing for {} seconds",
        after.as_secs()
    ))
}

/// A body that broke off: its idle time ran out (the listener's own
/// timer), or the client went.
pub fn broke(error: &(dyn std::error::Error + 'static)) -> ApiError {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<tower_http::timeout::TimeoutError>() {
            return ApiError::TimedOut("the body stopped sending".into());
        }
        cause = e.source();
    }
    ApiError::BadRequest(format!("the body broke off: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spool(in_flight: usize) -> (tempfile::TempDir, Spool) {
        let dir = tempfile::tempdir().unwrap();
        let spool = Spool::new(dir.path(), in_flight, Duration::from_millis(200));
        (dir, spool)
    }

    fn spooled_files(dir: &Path) -> usize {
        std::fs::read_dir(dir.join("spool")).unwrap().count()
    }

    #[tokio::test]
    async fn a_body_goes_to_disk_up_to_its_bound_and_leaves_with_its_last_use() {
        let (dir, spool) = spool(2);
        let place = spool.place().unwrap();
        let body = Body::from_stream(futures::stream::iter(
            [vec![1u8; 6], vec![2u8; 4]].map(Ok::<_, std::io::Error>),
        ));
        let contents = spool.body(&place, body, 10).await.unwrap();
        assert_eq!(contents.len(), 10);
        assert!(matches!(contents, Contents::Spooled(_)));
        assert_eq!(contents.to_bytes().await.unwrap().len(), 10);
        assert_eq!(spooled_files(dir.path()), 1);
        let over = Body::from_stream(futures::stream::iter(
            [vec![1u8; 6], vec![2u8; 6]].map(Ok::<_, std::io::Error>),
        ));
        assert!(matches!(
            spool.body(&place, over, 10).await,
            Err(ApiError::TooLarge(_))
        ));
        assert_eq!(
            spooled_files(dir.path()),
            1,
            "a refused body leaves nothing"
        );
        drop(contents);
        assert_eq!(spooled_files(dir.path()), 0);
    }

    #[tokio::test]
    async fn places_are_few_and_freed_when_their_files_go() {
        let (_dir, spool) = spool(1);
        let place = spool.place().unwrap();
        assert!(matches!(spool.place(), Err(ApiError::Busy(_))));
        let contents = spool
            .body(&place, Body::from(vec![0u8; 3]), 10)
            .await
            .unwrap();
        drop(place);
        assert!(spool.place().is_err(), "its file still holds the place");
        drop(contents);
        assert!(spool.place().is_ok());
    }

    #[tokio::test]
    async fn a_body_that_stops_sending_is_dropped() {
        let (_dir, spool) = spool(1);
        let place = spool.place().unwrap();
        let stalled = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"ab"))])
            .chain(futures::stream::pending());
        let taken = spool.take(&place, stalled, 10, |e| broke(&e)).await;
        assert!(matches!(taken, Err(ApiError::TimedOut(_))), "{taken:?}");
    }
}
