//! The pages, one file each: the route component loads the page's data
//! (a server function in `crate::api`), an error boundary shows why it
//! could not, and the page body provides the page's state
//! (`crate::contexts`) to the components under it.

mod home;
mod not_found;
mod session;
mod share_link;

pub use home::HomePage;
pub use not_found::NotFound;
pub use session::{SessionPage, SessionView};
pub use share_link::{ShareLinkPage, ShareLinkView};

/// Which page a path is, as the server's routes (leptos_router's, in
/// `App`) match it: the browser picks the page it hydrates with this, so
/// the bundle carries no router.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/`
    Home,
    /// `/sessions/{id}`
    Session,
    /// `/s/{token}` (its page loads no bundle)
    ShareLink,
    NotFound,
}

impl Route {
    pub fn of(path: &str) -> Route {
        if path.is_empty() || path == "/" {
            return Route::Home;
        }
        let rest = path.strip_prefix('/').unwrap_or(path);
        // One trailing slash matches as the path without it.
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        match rest.split('/').collect::<Vec<_>>()[..] {
            ["sessions", id] if !id.is_empty() => Route::Session,
            ["s", token] if !token.is_empty() => Route::ShareLink,
            _ => Route::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Route;

    #[test]
    fn a_path_is_the_page_the_server_routes_it_to() {
        // Each as the server's routes answered it (status and heading).
        for (path, route) in [
            ("/", Route::Home),
            (
                "/sessions/00000000-0000-0000-0000-000000000000",
                Route::Session,
            ),
            (
                "/sessions/00000000-0000-0000-0000-000000000000/",
                Route::Session,
            ),
            ("/sessions/not-an-id", Route::Session),
            ("/s/abc", Route::ShareLink),
            ("/sessions", Route::NotFound),
            ("/sessions/", Route::NotFound),
            ("/sessions/abc/x", Route::NotFound),
            ("//", Route::NotFound),
            ("/nothing", Route::NotFound),
        ] {
            assert_eq!(Route::of(path), route, "{path}");
        }
    }
}
