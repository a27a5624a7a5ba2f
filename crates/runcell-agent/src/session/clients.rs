//! Where each notebook owner was last seen from, and whether signed in: an
//! owner is only a cookie anyone can drop, so the sandbox slots anonymous
//! owners take are counted per client address and together (see
//! [`runcell_sandbox::slots`]), which this map lets the kernels find out.
//! Bounded: the owners seen longest ago are forgotten first, and a
//! forgotten owner counts as anonymous from an unknown address (the
//! anonymous share still holds it).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use runcell_protocol::OwnerId;
use runcell_sandbox::slots::Claim;

/// Owners remembered at most.
const REMEMBERED: usize = 100_000;

/// An owner unseen this long is forgotten first when the map is full.
const FORGET_AFTER: Duration = Duration::from_secs(30 * 60);

#[derive(Clone, Copy, Debug)]
struct Seen {
    client: Option<IpAddr>,
    signed_in: bool,
    at: Instant,
}

#[derive(Debug, Default)]
pub struct Clients {
    seen: Mutex<HashMap<OwnerId, Seen>>,
}

impl Clients {
    /// `owner` made a request from `client` (`None`: unknown), signed in
    /// or not.
    pub fn note(&self, owner: OwnerId, client: Option<IpAddr>, signed_in: bool) {
        let now = Instant::now();
        let mut seen = self.seen.lock();
        if seen.len() >= REMEMBERED && !seen.contains_key(&owner) {
            seen.retain(|_, s| now.duration_since(s.at) < FORGET_AFTER);
            if seen.len() >= REMEMBERED {
                // A flood of fresh owners: forget the anonymous ones
                // (they stay anonymous, from an unknown address).
                seen.retain(|_, s| s.signed_in);
            }
            if seen.len() >= REMEMBERED {
                seen.clear();
            }
        }
        seen.insert(
            owner,
            Seen {
                client: client.map(runcell_core::address_key),
                signed_in,
                at: now,
            },
        );
    }

    /// Whose a kernel of `owner`'s notebooks is, to the sandbox slots.
    pub fn claim_of(&self, owner: OwnerId) -> Claim {
        match self.seen.lock().get(&owner) {
            Some(seen) if seen.signed_in => Claim::Known,
            Some(seen) => Claim::Anonymous {
                client: seen.client,
            },
            None => Claim::Anonymous { client: None },
        }
    }

    /// Owners remembered now.
    pub fn len(&self) -> usize {
        self.seen.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_is_anonymous_from_its_address_unless_signed_in() {
        let clients = Clients::default();
        let (a, b, c) = (OwnerId::random(), OwnerId::random(), OwnerId::random());
        let here = IpAddr::from([198, 51, 100, 7]);
        clients.note(a, Some(here), false);
        clients.note(b, Some(here), true);
        assert_eq!(clients.claim_of(a), Claim::Anonymous { client: Some(here) });
        assert_eq!(clients.claim_of(b), Claim::Known);
        assert_eq!(clients.claim_of(c), Claim::Anonymous { client: None });
        // One IPv6 host's /64 is one client.
        let v6: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        clients.note(c, Some(v6), false);
        assert_eq!(
            clients.claim_of(c),
            Claim::Anonymous {
                client: Some("2001:db8:1:2::".parse().unwrap())
            }
        );
    }
}
