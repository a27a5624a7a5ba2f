//! Byte budgets: what one kernel connection, and all the connections of one
//! key together, may make the server hold. A connection's queued cells (their
//! code) and its frames not yet written to the socket are charged to its
//! budget and to its key's; a [`Charge`] gives its bytes back when dropped
//! (the cell has run, the frame is written), so what is charged is what is
//! held, and a charge that does not fit is refused rather than held.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

const MIB: usize = 1024 * 1024;

/// A charge that would take a connection or its key past its budget.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "this connection holds its most of {limit_mib} MiB in queued cells and unsent messages (jupyter.connection_budget_mib)"
    )]
    Connection { limit_mib: usize },
    #[error(
        "this key's kernel connections hold their most of {limit_mib} MiB in queued cells and unsent messages (jupyter.key_budget_mib)"
    )]
    Key { limit_mib: usize },
}

impl BudgetError {
    /// The setting that bounds it.
    pub fn setting(&self) -> &'static str {
        match self {
            Self::Connection { .. } => "jupyter.connection_budget_mib",
            Self::Key { .. } => "jupyter.key_budget_mib",
        }
    }
}

/// How much of a budget a kind of charge may fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// All of it: frames on their way out.
    Whole,
    /// Half: queued cells, so that their replies always have room.
    Half,
}

impl Share {
    fn of(self, limit: usize) -> usize {
        match self {
            Self::Whole => limit,
            Self::Half => limit / 2,
        }
    }
}

/// Bytes held against a limit.
#[derive(Debug)]
struct Pool {
    limit: usize,
    used: AtomicUsize,
}

impl Pool {
    fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
        }
    }

    fn take(&self, bytes: usize, share: Share) -> bool {
        let most = share.of(self.limit);
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&after| after <= most)
            })
            .is_ok()
    }

    fn give(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// The budgets of every key with a connection open.
#[derive(Debug)]
pub struct Budgets {
    connection_bytes: usize,
    key_bytes: usize,
    keys: Mutex<HashMap<String, Weak<Pool>>>,
}

impl Budgets {
    pub fn new(connection_mib: usize, key_mib: usize) -> Self {
        Self {
            connection_bytes: connection_mib.saturating_mul(MIB),
            key_bytes: key_mib.saturating_mul(MIB),
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// A new connection's budget, within its key's (which lives as long as
    /// one of the key's connections or charges does).
    pub fn connection(&self, key_id: &str) -> Arc<ConnectionBudget> {
        let mut keys = self.keys.lock();
        let key = match keys.get(key_id).and_then(Weak::upgrade) {
            Some(key) => key,
            None => {
                keys.retain(|_, pool| pool.strong_count() > 0);
                let key = Arc::new(Pool::new(self.key_bytes));
                keys.insert(key_id.to_string(), Arc::downgrade(&key));
                key
            }
        };
        Arc::new(ConnectionBudget {
            own: Pool::new(self.connection_bytes),
            key,
        })
    }
}

/// One connection's budget.
#[derive(Debug)]
pub struct ConnectionBudget {
    own: Pool,
    key: Arc<Pool>,
}

impl ConnectionBudget {
    /// Takes `bytes` from the connection's budget and its key's, up to
    /// `share` of each, or neither.
    pub fn charge(self: &Arc<Self>, bytes: usize, share: Share) -> Result<Charge, BudgetError> {
        if !self.own.take(bytes, share) {
            return Err(BudgetError::Connection {
                limit_mib: self.own.limit / MIB,
            });
        }
        if !self.key.take(bytes, share) {
            self.own.give(bytes);
            return Err(BudgetError::Key {
                limit_mib: self.key.limit / MIB,
            });
        }
        Ok(Charge {
            budget: Arc::clone(self),
            bytes,
        })
    }

    /// Bytes the connection holds now.
    pub fn used(&self) -> usize {
        self.own.used.load(Ordering::Acquire)
    }
}

/// Bytes held; given back when dropped.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<ConnectionBudget>,
    bytes: usize,
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.own.give(self.bytes);
        self.budget.key.give(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_fits_both_budgets_or_takes_nothing_and_is_given_back_when_dropped() {
        let budgets = Budgets::new(2, 3);
        let first = budgets.connection("k");
        let second = budgets.connection("k");
        let other = budgets.connection("other");

        let held = first.charge(2 * MIB, Share::Whole).expect("fits");
        assert_eq!(
            first.charge(1, Share::Whole).err(),
            Some(BudgetError::Connection { limit_mib: 2 })
        );
        // The key has 1 MiB left: the second connection gets it, no more.
        let more = second.charge(MIB, Share::Whole).expect("fits the key");
        assert_eq!(
            second.charge(1, Share::Whole).err(),
            Some(BudgetError::Key { limit_mib: 3 })
        );
        assert_eq!(second.used(), MIB, "a refused charge takes nothing");
        // Another key's budget is its own.
        let _theirs = other.charge(2 * MIB, Share::Whole).expect("another key");

        drop(held);
        assert_eq!(first.used(), 0);
        assert!(second.charge(MIB, Share::Whole).is_ok());
        drop(more);
    }

    #[test]
    fn cells_fill_only_half_a_budget() {
        let budget = Budgets::new(2, 8).connection("k");
        let cells = budget.charge(MIB, Share::Half).expect("half");
        assert!(budget.charge(1, Share::Half).is_err());
        let frame = budget
            .charge(MIB, Share::Whole)
            .expect("frames have the rest");
        drop((cells, frame));
    }

    #[test]
    fn a_keys_budget_is_forgotten_when_its_last_connection_goes() {
        let budgets = Budgets::new(1, 1);
        let one = budgets.connection("k");
        let _held = one.charge(MIB, Share::Whole).expect("fits");
        drop(one);
        // The charge keeps the key's budget alive: a new connection shares it.
        let two = budgets.connection("k");
        assert!(two.charge(1, Share::Whole).is_err());
        drop((_held, two));
        let three = budgets.connection("k");
        assert!(three.charge(MIB, Share::Whole).is_ok());
    }
}
