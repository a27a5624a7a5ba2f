//! One owner in a browser and a terminal. The page hands out a one-time
//! code (`POST /terminal`); `runcell chat --join CODE` spends it
//! (`POST /api/owner/join`) and from then on the terminal is the browser's
//! owner: its sessions show in the browser's sidebar and the browser's in
//! the terminal. The sessions the terminal had are moved to that owner, so
//! that nothing it made is lost.
//!
//! A code is 128 random bits, lasts [`CODE_TTL_MS`], works once, and lives
//! in this node's memory only (on several nodes, join through the node that
//! made it).

use std::collections::HashMap;

use parking_lot::Mutex;
use rand::Rng;

use super::{NotebookError, Notebooks};
use runcell_protocol::OwnerId;

/// How long a code can be used.
pub const CODE_TTL_MS: u64 = 10 * 60 * 1000;
/// The most codes kept at once (the oldest go first).
const MAX_CODES: usize = 10_000;

/// What a join did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Joined {
    pub owner: OwnerId,
    /// The joiner's sessions that moved to `owner`.
    pub moved: u64,
}

/// The codes handed out and not yet spent.
#[derive(Default)]
pub struct Handovers {
    codes: Mutex<HashMap<String, (OwnerId, u64)>>,
}

impl Handovers {
    /// A new code that makes its bearer `owner`, valid from `now_ms`.
    fn offer(&self, owner: OwnerId, now_ms: u64) -> String {
        let bytes: [u8; 16] = rand::rng().random();
        let code = hex::encode(bytes);
        let mut codes = self.codes.lock();
        // Lapsed codes go, and so does the owner's previous one: one live
        // code per owner.
        codes.retain(|_, (of, made)| *of != owner && now_ms.saturating_sub(*made) < CODE_TTL_MS);
        while codes.len() >= MAX_CODES {
            let oldest = codes
                .iter()
                .min_by_key(|(_, (_, made))| *made)
                .map(|(code, _)| code.clone());
            match oldest {
                Some(code) => codes.remove(&code),
                None => break,
            };
        }
        codes.insert(code.clone(), (owner, now_ms));
        code
    }

    /// The owner `code` names, if it is live; it cannot be used again.
    fn take(&self, code: &str, now_ms: u64) -> Option<OwnerId> {
        let (owner, made) = self.codes.lock().remove(code.trim())?;
        (now_ms.saturating_sub(made) < CODE_TTL_MS).then_some(owner)
    }
}

impl Notebooks {
    /// A one-time code that makes a terminal `owner` (see the module).
    pub fn offer_handover(&self, owner: OwnerId) -> String {
        self.handovers.offer(owner, runcell_core::clock::now_ms())
    }

    /// A person signed in: the sessions this browser made before, as
    /// `anonymous`, become theirs (`owner`'s); how many moved.
    pub async fn adopt(&self, anonymous: OwnerId, owner: OwnerId) -> Result<u64, NotebookError> {
        if anonymous == owner {
            return Ok(0);
        }
        let moved = self.hub.move_owner(anonymous, owner).await?;
        if moved > 0 {
            tracing::info!(
                moved,
                "a browser's sessions moved to the person who signed in"
            );
        }
        Ok(moved)
    }

    /// Stops `owner`'s turns and closes their kernels, on the sessions this
    /// node holds (a disabled account: every node does the same for its
    /// own); how many sessions had something stopped.
    pub async fn close_owner(&self, owner: OwnerId) -> usize {
        let mut closed = 0;
        for channel in self.hub.in_memory_of(owner) {
            if channel.remote_holder().is_some() {
                continue;
            }
            self.runner.stop(&channel);
            self.kernels().reset(channel.id()).await;
            closed += 1;
        }
        closed
    }

    /// The live kernels `owner`'s notebooks hold on this node.
    pub fn kernels_of(&self, owner: OwnerId) -> usize {
        self.kernels().held_by(owner)
    }

    /// `joiner` becomes the owner `code` names: the joiner's sessions move
    /// to that owner.
    pub async fn join(&self, joiner: OwnerId, code: &str) -> Result<Joined, NotebookError> {
        let owner = self
            .handovers
            .take(code, runcell_core::clock::now_ms())
            .ok_or(NotebookError::HandoverGone)?;
        let moved = if owner == joiner {
            0
        } else {
            self.hub.move_owner(joiner, owner).await?
        };
        tracing::info!(moved, "a terminal joined a browser's owner");
        Ok(Joined { owner, moved })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once_and_not_after_it_lapsed() {
        let handovers = Handovers::default();
        let owner = OwnerId::random();
        let code = handovers.offer(owner, 1_000);
        assert_eq!(code.len(), 32);
        assert_eq!(handovers.take("nope", 1_001), None);
        assert_eq!(handovers.take(&code, 1_001), Some(owner));
        assert_eq!(handovers.take(&code, 1_002), None, "once only");
        let late = handovers.offer(owner, 1_000);
        assert_eq!(handovers.take(&late, 1_000 + CODE_TTL_MS), None);
    }

    #[test]
    fn an_owner_has_one_live_code() {
        let handovers = Handovers::default();
        let owner = OwnerId::random();
        let first = handovers.offer(owner, 0);
        let second = handovers.offer(owner, 1);
        assert_eq!(handovers.take(&first, 2), None);
        assert_eq!(handovers.take(&second, 2), Some(owner));
    }

    #[test]
    fn codes_are_bounded() {
        let handovers = Handovers::default();
        let first = handovers.offer(OwnerId::random(), 0);
        for i in 0..MAX_CODES {
            handovers.offer(OwnerId::random(), 1 + i as u64);
        }
        assert!(handovers.codes.lock().len() <= MAX_CODES);
        assert_eq!(handovers.take(&first, 2), None, "the oldest went first");
    }
}
