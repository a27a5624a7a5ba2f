//! The document's title.
//!
//! leptos_meta writes a `<Title>`'s text into the server's HTML as it is,
//! without escaping, and a session's title is whatever its first question,
//! a rename or an imported notebook's heading said. So every title of a page
//! goes through [`PageTitle`], which escapes it for the server's HTML and
//! hands it as plain text to the browser's `document.title`.

use leptos::prelude::*;
use leptos_meta::Title;

/// The page's `<title>`, safe whatever `text` holds.
#[component]
pub fn PageTitle(#[prop(into)] text: Signal<String>) -> impl IntoView {
    view! { <Title text=move || text.with(|text| for_document(text))/> }
}

/// `text` as the title's sink needs it: escaped HTML in the server's
/// document, plain text in the browser (which sets `document.title`).
fn for_document(text: &str) -> String {
    #[cfg(feature = "ssr")]
    {
        crate::render::markdown::escape(text)
    }
    #[cfg(not(feature = "ssr"))]
    {
        text.to_string()
    }
}

#[cfg(all(test, feature = "ssr"))]
mod tests {
    use super::*;

    #[test]
    fn a_title_cannot_close_its_element() {
        let hostile = "</title><script>eval(decodeURI(location.hash.slice(1)))</script>";
        let written = for_document(hostile);
        assert!(!written.contains('<'), "{written}");
        assert!(!written.contains('>'), "{written}");
        assert_eq!(
            written,
            "&lt;/title&gt;&lt;script&gt;eval(decodeURI(location.hash.slice(1)))&lt;/script&gt;"
        );
    }
}
