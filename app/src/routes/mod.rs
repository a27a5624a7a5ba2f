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
