//! Each request keeps its reactive state to itself across `.await`s.
//!
//! Leptos keeps the current reactive owner, and the arena its signals live
//! in (`sandboxed-arenas`, which leptos_integration_utils turns on), in
//! thread-locals. A page's render sets them when it starts
//! (`Owner::new_root` makes the page's root owner current and leaves it
//! so), and leptos_axum reads them again after awaiting: the page's
//! `<title>` is read in leptos_meta's `inject_meta_context` after a
//! `tick().await`. Meanwhile the worker thread has polled other requests,
//! which set theirs. Seen under load: a session page's title looked up in
//! another page's arena, where it either read that page's signal (another
//! session's title) or found nothing and panicked ("already disposed"),
//! dropping the connection; and a file or a server function answered
//! inside `Owner::new()` became a child of another request's page and found
//! its contexts (its `ResponseOptions`, whose headers it took).
//!
//! [`own_reactive_scope`] makes the owner part of the request's task: each
//! poll of the request begins with the owner its previous poll left
//! current (none at first, so nothing it makes is another request's child)
//! and leaves none current behind it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use futures::future::BoxFuture;
use leptos::prelude::Owner;

/// Middleware: runs the rest of the request in its own reactive scope.
pub async fn own_reactive_scope(request: Request, next: Next) -> Response {
    Scoped {
        owner: None,
        inner: Box::pin(next.run(request)),
    }
    .await
}

/// A request's future with the reactive owner it has made current.
struct Scoped {
    owner: Option<Owner>,
    inner: BoxFuture<'static, Response>,
}

impl Future for Scoped {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response> {
        let this = &mut *self;
        // `set` makes the owner's arena current too.
        match &this.owner {
            Some(owner) => owner.set(),
            None => clear_owner(),
        }
        let polled = this.inner.as_mut().poll(cx);
        this.owner = Owner::current();
        clear_owner();
        polled
    }
}

fn clear_owner() {
    if let Some(owner) = Owner::current() {
        owner.unset();
    }
}

#[cfg(test)]
mod tests {
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use leptos::prelude::{provide_context, use_context};
    use tower::ServiceExt;

    use super::*;

    /// What a request's handler found: its own context after an await, and
    /// none of another's before it made its own.
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    struct Mine(u32);

    async fn handler(mine: u32) -> String {
        let stranger = use_context::<Mine>();
        let owner = Owner::new_root(None);
        provide_context(Mine(mine));
        // Another request runs on this thread meanwhile.
        tokio::task::yield_now().await;
        let found = use_context::<Mine>();
        drop(owner);
        format!("{stranger:?} {found:?}")
    }

    #[tokio::test]
    async fn a_request_sees_only_its_own_owner_across_awaits() {
        let app = Router::new()
            .route("/1", get(|| handler(1)))
            .route("/2", get(|| handler(2)))
            .layer(axum::middleware::from_fn(own_reactive_scope));
        let ask = |path: &'static str| {
            let app = app.clone();
            async move {
                let request = Request::get(path).body(Body::empty()).expect("a request");
                let response = app.oneshot(request).await.expect("a response");
                let body = axum::body::to_bytes(response.into_body(), 1024)
                    .await
                    .expect("a body");
                String::from_utf8(body.to_vec()).expect("text")
            }
        };
        let (one, two) = tokio::join!(ask("/1"), ask("/2"));
        assert_eq!(one, "None Some(Mine(1))");
        assert_eq!(two, "None Some(Mine(2))");
    }
}
