//! The names the wire's variants travel by, one list per enum.
//!
//! serde's derives spell them for the server; the page reads them by hand
//! ([`crate::reader`]) and matches on the lists here, so that a new
//! variant cannot be left out of either:
//! - [`named!`] gives an enum of names only (`CellKind`, `ErrorCode`...)
//!   its [`Named::ALL`] and [`Named::name`] from one list, and `name` is a
//!   match over that list with no `_` arm: a variant missing from the list
//!   does not compile.
//! - [`kinds!`] gives a tagged enum (`EventBody`, `Output`,
//!   `ServerMessage`) a fieldless twin of its kinds (`EventKind`...), named
//!   by their tags, and `kind()`, a match with no `_` arm: a variant of the
//!   tagged enum does not compile until it has a kind, and the reader's
//!   `match` on the kinds (no `_` arm either) until it reads it.
//!
//! The reader's tests hold every list to serde's own (the names its
//! derived `Deserialize` expects, in order) and have samples of every kind.

use super::{
    CellKind, CellStatus, ErrorCode, EventBody, KernelCap, KernelLoss, Output, ServerMessage,
    TurnKind, TurnStatus,
};

/// An enum the wire writes as names: its variants, and what each is called.
pub trait Named: Copy + Eq + 'static {
    /// Every variant, in the order declared.
    const ALL: &'static [Self];

    /// The name serde writes for the variant.
    fn name(self) -> &'static str;

    /// The variant called exactly `name`.
    fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == name)
    }
}

/// `impl Named for $ty` from one list of `Variant => "name"`.
macro_rules! named {
    ($ty:ident { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $crate::wire::Named for $ty {
            const ALL: &'static [Self] = &[$(Self::$variant),+];

            fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name),+
                }
            }
        }
    };
}

/// `$kinds`, the kinds of the tagged enum `$ty` (a fieldless enum of the
/// same variants, named by their tags), and `$ty::kind`.
macro_rules! kinds {
    (
        $(#[$meta:meta])*
        $vis:vis enum $kinds:ident for $ty:ident {
            $($variant:ident => $name:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $kinds {
            $($variant),+
        }

        $crate::wire::named!($kinds { $($variant => $name),+ });

        impl $ty {
            /// Which kind this is: serde tags it with the kind's name.
            $vis fn kind(&self) -> $kinds {
                match self {
                    $(Self::$variant { .. } => $kinds::$variant),+
                }
            }
        }
    };
}

pub(crate) use {kinds, named};

kinds! {
    /// The kinds of [`EventBody`], by their `kind` tags.
    pub enum EventKind for EventBody {
        TurnStarted => "turn_started",
        BranchSelected => "branch_selected",
        KernelRestored => "kernel_restored",
        UserMessage => "user_message",
        CellStarted => "cell_started",
        CellDelta => "cell_delta",
        CellReset => "cell_reset",
        CellOutput => "cell_output",
        CellCleared => "cell_cleared",
        DisplayUpdated => "display_updated",
        CellNote => "cell_note",
        CellFinished => "cell_finished",
        TurnFinished => "turn_finished",
        KernelLost => "kernel_lost",
        KernelRefused => "kernel_refused",
    }
}

kinds! {
    /// The kinds of [`Output`], by their `type` tags.
    pub enum OutputKind for Output {
        Stdout => "stdout",
        Stderr => "stderr",
        Rich => "rich",
        Table => "table",
        Image => "image",
        File => "file",
        Package => "package",
        Error => "error",
    }
}

kinds! {
    /// The kinds of [`ServerMessage`], by their `type` tags.
    pub enum ServerMessageKind for ServerMessage {
        Welcome => "welcome",
        Event => "event",
        Error => "error",
        BrowserRun => "browser_run",
        BrowserStop => "browser_stop",
    }
}

named!(CellKind {
    User => "user",
    Code => "code",
    Result => "result",
    Explanation => "explanation",
});

named!(TurnKind {
    Ask => "ask",
    Run => "run",
    Rerun => "rerun",
});

named!(KernelLoss {
    ServerRestart => "server_restart",
    Fork => "fork",
    ForkWithoutFiles => "fork_without_files",
    Import => "import",
});

named!(KernelCap {
    Owner => "owner",
    Server => "server",
    Anonymous => "anonymous",
    Client => "client",
});

named!(TurnStatus {
    Ok => "ok",
    Error => "error",
    Cancelled => "cancelled",
});

named!(CellStatus {
    Streaming => "streaming",
    Ok => "ok",
    Error => "error",
    Cancelled => "cancelled",
});

named!(ErrorCode {
    BadFrame => "bad_frame",
    EmptyMessage => "empty_message",
    MessageTooLong => "message_too_long",
    Busy => "busy",
    InvalidCode => "invalid_code",
    UnknownTurn => "unknown_turn",
    Unavailable => "unavailable",
});
