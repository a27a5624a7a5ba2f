//! The prompt cache's slots: conversations the model has read, copied out
//! of the KV cache so that another can use it and come back to them.
//!
//! Each slot belongs to a [`Scope`] (a notebook session, or one requester)
//! and knows how many of its leading tokens are the server's own (the
//! system prompt): any request may reuse that part, only its own scope the
//! rest, so that how fast a prompt is read tells nobody what another person
//! asked. A scope holds one slot (its latest conversation); slots are
//! evicted least recently used first, the server's own prefixes last, to
//! keep the copies within a memory budget.

use crate::decoder::KvSnapshot;

/// Whose reading a slot holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// The server's own prefix alone (a system prompt): shared by all.
    Server,
    /// One conversation's or one requester's.
    Private(String),
}

/// A conversation read: its tokens, and what the KV cache held for them.
pub(crate) struct Slot {
    pub(crate) scope: Scope,
    pub(crate) tokens: Vec<u32>,
    /// Leading tokens that are the server's own: anyone may reuse them.
    pub(crate) shared: usize,
    pub(crate) snapshot: KvSnapshot,
    used: u64,
}

/// How many leading tokens of `prompt` a requester of `scope` may take from
/// a reading of `tokens` by `owner` whose first `shared` are the server's,
/// short of the whole prompt (its last token is computed again, for the
/// logits of what comes next). A reading nobody owns (an anonymous
/// request's) is shared as far as the server's part goes, like any other.
pub(crate) fn reusable(
    owner: Option<&Scope>,
    tokens: &[u32],
    shared: usize,
    scope: Option<&Scope>,
    prompt: &[u32],
) -> usize {
    let common = tokens
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count();
    let whole = owner == Some(&Scope::Server) || (owner.is_some() && owner == scope);
    let allowed = if whole { common } else { common.min(shared) };
    allowed.min(prompt.len().saturating_sub(1))
}

/// A reading to keep in a slot: whose, its tokens, how many of them are
/// the server's own, and what the KV cache held for them.
pub(crate) struct Kept {
    pub(crate) scope: Scope,
    pub(crate) tokens: Vec<u32>,
    pub(crate) shared: usize,
    pub(crate) snapshot: KvSnapshot,
}

/// The slots, within a memory budget.
pub(crate) struct Slots {
    slots: Vec<Slot>,
    budget_bytes: usize,
    clock: u64,
}

impl Slots {
    pub(crate) fn new(budget_bytes: usize) -> Self {
        Self {
            slots: Vec::new(),
            budget_bytes,
            clock: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The memory the slots hold.
    pub(crate) fn bytes(&self) -> usize {
        self.slots.iter().map(|s| s.snapshot.bytes()).sum()
    }

    /// The slot a requester of `scope` may reuse most of for `prompt`, and
    /// how many tokens that is.
    fn best(&self, scope: Option<&Scope>, prompt: &[u32]) -> Option<(usize, usize)> {
        self.slots
            .iter()
            .enumerate()
            .map(|(i, slot)| {
                (
                    i,
                    reusable(Some(&slot.scope), &slot.tokens, slot.shared, scope, prompt),
                )
            })
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(i, n)| (n, self.slots[i].used))
    }

    /// A switch of the KV cache to a request of `scope` for `prompt`:
    /// keeps `leaving` first (the reading the cache held, another
    /// conversation's, about to be cut), then picks the slot the request
    /// may reuse most of, if that is at least `at_least` tokens, marked as
    /// just used; with how many tokens that is (never more than the slot
    /// holds, and all of them `prompt`'s own).
    ///
    /// One step, in this order: keeping a reading may replace or evict
    /// slots, so a slot picked before it could be another's by then.
    pub(crate) fn switch(
        &mut self,
        leaving: Option<Kept>,
        scope: Option<&Scope>,
        prompt: &[u32],
        at_least: usize,
    ) -> Option<(&Slot, usize)> {
        if let Some(kept) = leaving {
            self.store(kept.scope, kept.tokens, kept.shared, kept.snapshot);
        }
        let (index, n) = self.best(scope, prompt).filter(|&(_, n)| n >= at_least)?;
        self.clock += 1;
        let slot = self.slots.get_mut(index)?;
        slot.used = self.clock;
        Some((slot, n))
    }

    /// Whether a slot of the server's own holds exactly `tokens`.
    pub(crate) fn has_server_prefix(&self, tokens: &[u32]) -> bool {
        self.slots
            .iter()
            .any(|s| s.scope == Scope::Server && s.tokens == tokens)
    }

    /// Keeps `snapshot` of `tokens` as `scope`'s slot (replacing the one it
    /// had), then evicts the least recently used slots, private ones first,
    /// until the slots fit the budget. A snapshot larger than the whole
    /// budget is not kept.
    pub(crate) fn store(
        &mut self,
        scope: Scope,
        tokens: Vec<u32>,
        shared: usize,
        snapshot: KvSnapshot,
    ) {
        if snapshot.bytes() > self.budget_bytes || tokens.is_empty() {
            return;
        }
        self.clock += 1;
        if scope != Scope::Server {
            self.slots.retain(|s| s.scope != scope);
        }
        self.slots.push(Slot {
            scope,
            tokens,
            shared,
            snapshot,
            used: self.clock,
        });
        while self.bytes() > self.budget_bytes {
            let victim = self
                .slots
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| (s.scope == Scope::Server, s.used))
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    self.slots.swap_remove(i);
                }
                None => break,
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn private(name: &str) -> Scope {
        Scope::Private(name.into())
    }

    #[test]
    fn a_reading_is_reused_whole_by_its_owner_and_up_to_the_server_part_by_others() {
        let alice = private("alice");
        let bob = private("bob");
        // System prompt [1, 2, 3], then Alice's question [7, 7].
        let read = [1, 2, 3, 7, 7, 9];
        // (the reading's owner, who asks, the prompt, tokens reused)
        type Case<'a> = (Option<&'a Scope>, Option<&'a Scope>, &'a [u32], usize);
        let cases: &[Case] = &[
            // Alice, following up: everything she shares with it.
            (Some(&alice), Some(&alice), &[1, 2, 3, 7, 7, 9, 4], 6),
            // Bob asking the same question as Alice: only the system
            // prompt, so that his wait tells him nothing of her question.
            (Some(&alice), Some(&bob), &[1, 2, 3, 7, 7, 9, 4], 3),
            // An anonymous request, and a reading nobody owns.
            (Some(&alice), None, &[1, 2, 3, 7, 7], 3),
            (None, None, &[1, 2, 3, 7, 7, 9, 4], 3),
            (None, Some(&alice), &[1, 2, 3, 7, 7, 9, 4], 3),
            // The server's own prefix: anyone.
            (Some(&Scope::Server), Some(&bob), &[1, 2, 3, 7, 7, 9, 4], 6),
            // Diverging early, and never the whole prompt.
            (Some(&alice), Some(&alice), &[1, 5], 1),
            (Some(&alice), Some(&alice), &[1, 2, 3], 2),
            (Some(&alice), Some(&alice), &[], 0),
        ];
        for &(owner, scope, prompt, want) in cases {
            assert_eq!(
                reusable(owner, &read, 3, scope, prompt),
                want,
                "{owner:?} read, {scope:?} asks {prompt:?}"
            );
        }
    }

    #[test]
    fn slots_keep_one_reading_a_scope_and_evict_the_least_recent_private_one_first() {
        // Each snapshot: 10 positions × 8 floats × 4 bytes × k and v = 640.
        let mut slots = Slots::new(2000);
        slots.store(Scope::Server, vec![1, 2], 2, KvSnapshot::zeros(10, 8));
        slots.store(private("a"), vec![1, 2, 3], 2, KvSnapshot::zeros(10, 8));
        slots.store(private("a"), vec![1, 2, 4], 2, KvSnapshot::zeros(10, 8));
        assert_eq!(slots.len(), 2, "a scope's newer reading replaces its older");
        slots.store(private("b"), vec![1, 2, 5], 2, KvSnapshot::zeros(10, 8));
        assert_eq!(slots.bytes(), 1920);
        // "a" is used again: "b" is now the least recent.
        let (a, n) = slots
            .switch(None, Some(&private("a")), &[1, 2, 4, 9], 1)
            .unwrap();
        assert_eq!((&a.scope, n), (&private("a"), 3));
        slots.store(private("c"), vec![1, 2, 6], 2, KvSnapshot::zeros(10, 8));
        assert_eq!(slots.len(), 3);
        assert!(
            slots
                .best(Some(&private("b")), &[1, 2, 5, 9])
                .is_some_and(|(_, n)| n == 2)
        );
        assert!(
            slots
                .best(Some(&private("a")), &[1, 2, 4, 9])
                .is_some_and(|(_, n)| n == 3)
        );
        assert!(slots.has_server_prefix(&[1, 2]));
        // Private slots go before the server's own, however recent.
        slots.store(private("d"), vec![1, 2, 7], 2, KvSnapshot::zeros(10, 8));
        slots.store(private("e"), vec![1, 2, 8], 2, KvSnapshot::zeros(10, 8));
        assert!(slots.has_server_prefix(&[1, 2]));
        assert_eq!(slots.len(), 3);
        // Larger than the whole budget: not kept.
        slots.store(private("f"), vec![9, 9], 0, KvSnapshot::zeros(100, 8));
        assert_eq!(slots.len(), 3);
        assert!(slots.best(Some(&private("f")), &[9, 9, 9]).is_none());
    }

    fn kept(scope: Scope, tokens: Vec<u32>) -> Kept {
        Kept {
            scope,
            tokens,
            shared: 2,
            snapshot: KvSnapshot::zeros(10, 8),
        }
    }

    #[test]
    fn a_switch_never_hands_one_conversation_anothers_reading() {
        // Room for three slots of 640 bytes: the server's and two others.
        let mut slots = Slots::new(2000);
        slots.store(Scope::Server, vec![1, 2], 2, KvSnapshot::zeros(10, 8));
        slots.store(
            private("alice"),
            vec![1, 2, 3, 3, 3],
            2,
            KvSnapshot::zeros(10, 8),
        );
        slots.store(
            private("bob"),
            vec![1, 2, 4, 4, 4],
            2,
            KvSnapshot::zeros(10, 8),
        );
        // The cache holds Carol's longer reading; Alice follows up. Keeping
        // Carol's evicts Alice's, the least recent (once, the slot picked
        // for Alice before Carol's was kept was Carol's by then: Alice's
        // answer read Carol's conversation).
        let carol = vec![1, 2, 5, 5, 5, 5, 5, 5];
        let (slot, n) = slots
            .switch(
                Some(kept(private("carol"), carol.clone())),
                Some(&private("alice")),
                &[1, 2, 3, 3, 3, 9],
                1,
            )
            .unwrap();
        // Only the server's part of a reading is Alice's to reuse now.
        assert_eq!((&slot.tokens[..n], n <= slot.shared), (&[1, 2][..], true));
        // Still there, Bob's own is his, whole; Carol's is hers.
        let (slot, n) = slots
            .switch(None, Some(&private("bob")), &[1, 2, 4, 4, 4, 9], 1)
            .unwrap();
        assert_eq!((&slot.scope, n), (&private("bob"), 5));
        let (slot, n) = slots
            .switch(
                None,
                Some(&private("carol")),
                &[1, 2, 5, 5, 5, 5, 5, 5, 9],
                1,
            )
            .unwrap();
        assert_eq!(
            (&slot.scope, &slot.tokens, n),
            (&private("carol"), &carol, 8)
        );
        // A newer reading of the same conversation replaces its slot; what
        // it hands back is the newer one.
        let (slot, n) = slots
            .switch(
                Some(kept(private("bob"), vec![1, 2, 4, 4, 4, 6])),
                Some(&private("bob")),
                &[1, 2, 4, 4, 4, 6, 9],
                1,
            )
            .unwrap();
        assert_eq!((&slot.tokens, n), (&vec![1, 2, 4, 4, 4, 6], 6));
        // Too little to gain: none.
        assert!(
            slots
                .switch(None, Some(&private("bob")), &[1, 2, 4, 4, 4, 6, 9], 7)
                .is_none()
        );
    }
}
