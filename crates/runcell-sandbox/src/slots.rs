//! The sandbox slots of one backend: how many sessions may be live at once,
//! and how many of those anonymous pages may hold. A slot is reserved before
//! the await that starts a kernel, so that opens at once cannot all pass the
//! cap; the [`Slot`] gives it back when it is dropped (the open failed, or
//! the session it became was closed).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

/// Who a slot is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Claim {
    /// An API key's, or a signed-in person's notebook: only the cap of all
    /// slots applies.
    Known,
    /// A notebook of an anonymous owner (no key, not signed in), from
    /// `client` when its address is known: these share one budget.
    Anonymous { client: Option<IpAddr> },
}

/// How the slots are shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotSettings {
    /// Slots in all.
    pub total: usize,
    /// Slots anonymous owners may hold together.
    pub anonymous: usize,
    /// Slots the anonymous owners of one client address may hold together.
    pub per_client: usize,
}

impl SlotSettings {
    /// `total` slots, of which anonymous owners may hold `percent` (at
    /// least one), at most `per_client` from one address.
    pub fn shared(total: usize, percent: u8, per_client: usize) -> Self {
        let anonymous = (total.saturating_mul(usize::from(percent.min(100))) / 100).max(1);
        Self {
            total,
            anonymous,
            per_client: per_client.max(1),
        }
    }

    /// Every slot for anyone (tests, library users without pages).
    pub fn open(total: usize) -> Self {
        Self {
            total,
            anonymous: total,
            per_client: total,
        }
    }
}

/// Why no slot was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SlotError {
    #[error("{0} sandbox sessions are open already; close one first")]
    Full(usize),
    #[error(
        "the {0} sandbox sessions open to anonymous pages are all in use; sign in or use an API key, or try again later"
    )]
    AnonymousFull(usize),
    #[error(
        "pages from your address hold {0} sandbox sessions, the most anonymous pages may, and none of yours is idle; close one under “Kernels in use” in the sessions list, sign in or use an API key, or try again when one closes"
    )]
    ClientFull(usize),
}

#[derive(Debug, Default)]
struct Taken {
    total: usize,
    anonymous: usize,
    by_client: HashMap<IpAddr, usize>,
}

#[derive(Debug)]
pub struct Slots {
    settings: SlotSettings,
    taken: Mutex<Taken>,
}

impl Slots {
    pub fn new(settings: SlotSettings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            taken: Mutex::new(Taken::default()),
        })
    }

    /// Reserves a slot for `claim`, checked and counted at once.
    pub fn reserve(self: &Arc<Self>, claim: Claim) -> Result<Slot, SlotError> {
        let mut taken = self.taken.lock();
        if taken.total >= self.settings.total {
            return Err(SlotError::Full(self.settings.total));
        }
        if let Claim::Anonymous { client } = claim {
            if taken.anonymous >= self.settings.anonymous {
                return Err(SlotError::AnonymousFull(self.settings.anonymous));
            }
            if let Some(client) = client {
                let held = taken.by_client.entry(client).or_insert(0);
                if *held >= self.settings.per_client {
                    return Err(SlotError::ClientFull(self.settings.per_client));
                }
                *held += 1;
            }
            taken.anonymous += 1;
        }
        taken.total += 1;
        Ok(Slot {
            slots: Arc::clone(self),
            claim,
        })
    }

    /// Slots held now.
    pub fn taken(&self) -> usize {
        self.taken.lock().total
    }

    fn release(&self, claim: Claim) {
        let mut taken = self.taken.lock();
        taken.total = taken.total.saturating_sub(1);
        if let Claim::Anonymous { client } = claim {
            taken.anonymous = taken.anonymous.saturating_sub(1);
            if let Some(client) = client
                && let Some(held) = taken.by_client.get_mut(&client)
            {
                *held = held.saturating_sub(1);
                if *held == 0 {
                    taken.by_client.remove(&client);
                }
            }
        }
    }
}

/// One reserved slot, given back on drop.
#[derive(Debug)]
pub struct Slot {
    slots: Arc<Slots>,
    claim: Claim,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.release(self.claim);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(last: u8) -> Claim {
        Claim::Anonymous {
            client: Some(IpAddr::from([203, 0, 113, last])),
        }
    }

    #[test]
    fn anonymous_owners_share_a_part_and_each_address_a_few() {
        let slots = Slots::new(SlotSettings::shared(4, 50, 1));
        let first = slots.reserve(from(1)).expect("a first anonymous slot");
        assert_eq!(
            slots.reserve(from(1)).unwrap_err(),
            SlotError::ClientFull(1)
        );
        let second = slots.reserve(from(2)).expect("another address");
        assert_eq!(
            slots.reserve(from(3)).unwrap_err(),
            SlotError::AnonymousFull(2)
        );
        let keys = [
            slots.reserve(Claim::Known).expect("a key's"),
            slots.reserve(Claim::Known).expect("a key's"),
        ];
        assert_eq!(slots.reserve(Claim::Known).unwrap_err(), SlotError::Full(4));
        drop(first);
        let third = slots.reserve(from(1)).expect("its slot came back");
        assert_eq!(slots.reserve(Claim::Known).unwrap_err(), SlotError::Full(4));
        drop(keys);
        assert_eq!(slots.taken(), 2);
        drop((third, second));
        assert_eq!(slots.taken(), 0);
        assert!(slots.taken.lock().by_client.is_empty());
    }
}
