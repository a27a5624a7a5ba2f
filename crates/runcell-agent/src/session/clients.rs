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
    /// The address was one of this machine's own (before it became a key).
    loopback: bool,
    signed_in: bool,
    at: Instant,
}

#[derive(Debug, Default)]
pub struct Clients {
    seen: Mutex<HashMap<OwnerId, Seen>>,
    /// A single-person install: anonymous pages from this machine's own
    /// addresses (loopback) count as known, so only their owner's kernel cap
    /// (which closes the longest-idle kernel) holds them.
    loopback_known: bool,
}

impl Clients {
    /// Owners seen from loopback count as known when `single_person`.
    pub fn new(single_person: bool) -> Self {
        Self {
            seen: Mutex::default(),
            loopback_known: single_person,
        }
    }

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
                loopback: client.is_some_and(|ip| ip.to_canonical().is_loopback()),
                signed_in,
                at: now,
            },
        );
    }

    /// Whose a kernel of `owner`'s notebooks is, to the sandbox slots.
    pub fn claim_of(&self, owner: OwnerId) -> Claim {
        match self.seen.lock().get(&owner) {
            Some(seen) if seen.signed_in => Claim::Known,
            Some(seen) if self.loopback_known && seen.loopback => Claim::Known,
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

    #[test]
    fn a_single_person_install_counts_its_own_machines_pages_as_known() {
        let single = Clients::new(true);
        let shared = Clients::new(false);
        let (a, b, c) = (OwnerId::random(), OwnerId::random(), OwnerId::random());
        let v4 = IpAddr::from([127, 0, 0, 1]);
        let elsewhere = IpAddr::from([198, 51, 100, 7]);
        for clients in [&single, &shared] {
            clients.note(a, Some(v4), false);
            clients.note(b, Some("::1".parse().unwrap()), false);
            clients.note(c, Some(elsewhere), false);
        }
        assert_eq!(single.claim_of(a), Claim::Known);
        assert_eq!(single.claim_of(b), Claim::Known);
        assert_eq!(
            single.claim_of(c),
            Claim::Anonymous {
                client: Some(elsewhere)
            }
        );
        assert_eq!(shared.claim_of(a), Claim::Anonymous { client: Some(v4) });
        assert_eq!(
            shared.claim_of(b),
            Claim::Anonymous {
                client: Some("::".parse().unwrap())
            }
        );
    }
}
