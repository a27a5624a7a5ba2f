//! What a person's API keys hold, counted against the person: the sandbox
//! sessions their keys open (`/v1`, Jupyter, E2B, MCP) and their notebooks'
//! kernels together stay within the person's `live_kernels`. The code API
//! asks the accounts how much room a person has left ([`PersonRoom`]); the
//! accounts ask the code API how many sessions a person's keys hold
//! ([`KeySessions`]). Both are set once at start.

use std::collections::{HashMap, HashSet};

use parking_lot::Mutex;

/// How many more sandbox sessions a person's keys may open.
#[async_trait::async_trait]
pub trait PersonRoom: Send + Sync {
    /// The person `user_id`'s `live_kernels` less what their notebooks
    /// hold here, and that limit; `(0, 0)` for no such person or a
    /// disabled one.
    async fn room_for_keys(&self, user_id: &str) -> (usize, u32);
}

/// How many sandbox sessions a person's keys hold.
pub trait KeySessions: Send + Sync {
    fn held_by_person(&self, user_id: &str) -> usize;
}

/// Which keys each person has used here (to count what they hold); at
/// most `auth.keys_per_person` live keys each, so small.
#[derive(Default)]
pub struct KeysOfPeople {
    keys: Mutex<HashMap<String, HashSet<String>>>,
}

/// People remembered at most; past it the map starts over (a key is noted
/// again on its next session).
const MAX_PEOPLE: usize = 100_000;

impl KeysOfPeople {
    /// Notes that `key` is `user`'s.
    pub fn note(&self, user: &str, key: &str) {
        let mut keys = self.keys.lock();
        if keys.len() >= MAX_PEOPLE && !keys.contains_key(user) {
            keys.clear();
        }
        keys.entry(user.to_string())
            .or_default()
            .insert(key.to_string());
    }

    /// The keys of `user`'s noted here.
    pub fn of(&self, user: &str) -> Vec<String> {
        self.keys
            .lock()
            .get(user)
            .map(|keys| keys.iter().cloned().collect())
            .unwrap_or_default()
    }
}
