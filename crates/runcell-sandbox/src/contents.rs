//! What a file write puts in a file: bytes already held, or a file on the
//! server's disk (an upload spooled as it arrived), copied from there a
//! piece at a time and never held whole.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

/// How much of a spooled file is read at once when it is copied or sent.
const PIECE: usize = 64 * 1024;

/// The contents of a file to write. Cheap to clone: a spooled file is
/// shared, not copied, and removed once the last clone is gone.
#[derive(Clone, Debug)]
pub enum Contents {
    /// Bytes in memory (what code or the server made itself).
    Bytes(Bytes),
    /// A file on the server's disk.
    Spooled(Arc<SpooledFile>),
}

/// A file on the server's disk holding what a client sent, removed when
/// dropped; it may hold a place (an upload slot) for as long as it lives.
#[derive(Debug)]
pub struct SpooledFile {
    path: tempfile::TempPath,
    len: u64,
    _place: Option<Arc<tokio::sync::OwnedSemaphorePermit>>,
}

impl SpooledFile {
    /// `path`'s `len` bytes, removed when this is dropped, holding `place`
    /// until then.
    pub fn new(
        path: tempfile::TempPath,
        len: u64,
        place: Option<Arc<tokio::sync::OwnedSemaphorePermit>>,
    ) -> Self {
        Self {
            path,
            len,
            _place: place,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl From<Vec<u8>> for Contents {
    fn from(bytes: Vec<u8>) -> Self {
        Self::Bytes(bytes.into())
    }
}

impl From<&'static [u8]> for Contents {
    fn from(bytes: &'static [u8]) -> Self {
        Self::Bytes(Bytes::from_static(bytes))
    }
}

impl From<SpooledFile> for Contents {
    fn from(file: SpooledFile) -> Self {
        Self::Spooled(Arc::new(file))
    }
}

impl Contents {
    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Self::Bytes(bytes) => bytes.len() as u64,
            Self::Spooled(file) => file.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies it into `to`, a piece at a time (blocking: call it off the
    /// async threads).
    pub fn copy_into(&self, to: &mut impl Write) -> std::io::Result<()> {
        match self {
            Self::Bytes(bytes) => to.write_all(bytes),
            Self::Spooled(file) => {
                let from = std::fs::File::open(file.path())?;
                let mut from = from.take(file.len);
                let mut piece = vec![0u8; PIECE];
                loop {
                    let n = from.read(&mut piece)?;
                    if n == 0 {
                        return Ok(());
                    }
                    to.write_all(&piece[..n])?;
                }
            }
        }
    }

    /// All of it in memory: only for what must travel whole (to another
    /// node), and never more than the size a caller already allowed.
    pub async fn to_bytes(&self) -> std::io::Result<Bytes> {
        match self {
            Self::Bytes(bytes) => Ok(bytes.clone()),
            Self::Spooled(file) => Ok(tokio::fs::read(file.path()).await?.into()),
        }
    }

    /// A stream of its pieces, for a request body sent on (E2B's upload).
    pub fn stream(&self) -> futures::stream::BoxStream<'static, std::io::Result<Bytes>> {
        use futures::StreamExt;
        match self {
            Self::Bytes(bytes) => {
                futures::stream::once(futures::future::ready(Ok(bytes.clone()))).boxed()
            }
            Self::Spooled(file) => {
                let file = Arc::clone(file);
                futures::stream::unfold(
                    (None::<tokio::fs::File>, file, false),
                    |(open, file, done)| async move {
                        use tokio::io::AsyncReadExt;
                        if done {
                            return None;
                        }
                        let mut from = match open {
                            Some(from) => from,
                            None => match tokio::fs::File::open(file.path()).await {
                                Ok(from) => from,
                                Err(e) => return Some((Err(e), (None, file, true))),
                            },
                        };
                        let mut piece = vec![0u8; PIECE];
                        match from.read(&mut piece).await {
                            Ok(0) => None,
                            Ok(n) => {
                                piece.truncate(n);
                                Some((Ok(Bytes::from(piece)), (Some(from), file, false)))
                            }
                            Err(e) => Some((Err(e), (None, file, true))),
                        }
                    },
                )
                .boxed()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    fn spooled(bytes: &[u8]) -> Contents {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(bytes).unwrap();
        SpooledFile::new(file.into_temp_path(), bytes.len() as u64, None).into()
    }

    #[tokio::test]
    async fn spooled_contents_read_like_bytes_and_vanish_when_dropped() {
        let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for contents in [Contents::from(big.clone()), spooled(&big)] {
            assert_eq!(contents.len(), big.len() as u64);
            let mut copied = Vec::new();
            contents.copy_into(&mut copied).unwrap();
            assert_eq!(copied, big);
            assert_eq!(contents.to_bytes().await.unwrap(), big);
            let streamed: Vec<u8> = contents
                .stream()
                .map(|piece| piece.unwrap().to_vec())
                .concat()
                .await;
            assert_eq!(streamed, big);
        }
        let contents = spooled(b"gone");
        let Contents::Spooled(file) = &contents else {
            unreachable!()
        };
        let path = file.path().to_path_buf();
        let clone = contents.clone();
        drop(contents);
        assert!(path.exists(), "a clone still holds it");
        drop(clone);
        assert!(!path.exists());
    }
}
