//! Figures by address: a page (the owner's or a share link's) names each
//! PNG a program showed by a URL instead of carrying its bytes, so that the
//! page holds each figure once, as a link, and neither its markup nor its
//! hydration state repeats the base64. The bytes are served from the
//! session's events, to whoever may read the session.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use runcell_protocol::{EventBody, Output, SessionEvent};

use super::{NotebookError, Notebooks};
use runcell_protocol::{OwnerId, SessionId, ShareToken};

/// The image type served by address.
const PNG: &str = "image/png";

/// `events` as a page shows them: each PNG result an [`Output::Image`] at
/// `{base}/{seq}.png`, with its text form (for its alt text).
pub fn by_address(events: Vec<SessionEvent>, base: &str) -> Vec<SessionEvent> {
    events
        .into_iter()
        .map(|mut event| {
            let seq = event.seq;
            if let EventBody::CellOutput { output, .. } = &mut event.event
                && let Output::Rich { data, .. } = output
                && data.contains_key(PNG)
            {
                let (width, height) = data
                    .get(PNG)
                    .and_then(|b64| runcell_protocol::render::png::png_size(b64))
                    .unzip();
                *output = Output::Image {
                    url: format!("{base}/{seq}.png"),
                    text: data.get("text/plain").cloned().unwrap_or_default(),
                    width,
                    height,
                };
            }
            event
        })
        .collect()
}

/// The bytes of the PNG the event `seq` holds, if it holds one.
fn png_at(events: &[SessionEvent], seq: u64) -> Option<Vec<u8>> {
    events
        .iter()
        .find(|e| e.seq == seq)
        .and_then(|e| match &e.event {
            EventBody::CellOutput {
                output: Output::Rich { data, .. },
                ..
            } => data.get(PNG).and_then(|b64| {
                let cleaned: String = b64.split_whitespace().collect();
                BASE64.decode(cleaned).ok()
            }),
            _ => None,
        })
}

/// `{seq}.png` → `seq`.
pub fn parse_figure_name(name: &str) -> Option<u64> {
    name.strip_suffix(".png")?.parse().ok()
}

impl Notebooks {
    /// The PNG at event `seq` of `owner`'s session `id`.
    pub async fn figure(
        &self,
        owner: OwnerId,
        id: SessionId,
        seq: u64,
    ) -> Result<Vec<u8>, NotebookError> {
        let channel = self.open_owned(owner, id).await?;
        png_at(&channel.log().events_after(seq.saturating_sub(1)), seq)
            .ok_or_else(|| NotebookError::not_found(&format!("figure {seq}")))
    }

    /// The PNG at event `seq` of what the link `token` shows (never one
    /// after the link's end).
    pub async fn shared_figure(
        &self,
        token: &ShareToken,
        seq: u64,
    ) -> Result<Vec<u8>, NotebookError> {
        let (_, events) = self
            .hub
            .shared_events(token)
            .await?
            .ok_or(NotebookError::LinkGone)?;
        png_at(&events, seq).ok_or_else(|| NotebookError::not_found(&format!("figure {seq}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runcell_protocol::CellId;

    fn output(seq: u64, data: &[(&str, &str)]) -> SessionEvent {
        SessionEvent {
            seq,
            ts_ms: 0,
            event: EventBody::CellOutput {
                cell_id: CellId(3),
                output: Output::Rich {
                    data: data
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                    main: false,
                    metadata: String::new(),
                    display_id: None,
                },
            },
        }
    }

    #[test]
    fn a_png_is_named_by_address_and_nothing_else_changes() {
        let png = BASE64.encode(b"\x89PNG fake");
        let events = vec![
            output(
                4,
                &[
                    ("image/png", &png),
                    ("text/plain", "<Figure size 640x480 with 1 Axes>"),
                ],
            ),
            output(5, &[("text/plain", "42")]),
        ];
        let shown = by_address(events.clone(), "/sessions/abc/figures");
        match &shown[0].event {
            EventBody::CellOutput { output, .. } => assert_eq!(
                output,
                &Output::Image {
                    url: "/sessions/abc/figures/4.png".into(),
                    text: "<Figure size 640x480 with 1 Axes>".into(),
                    // Not a PNG's header: no size.
                    width: None,
                    height: None,
                }
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(shown[1], events[1]);
        assert!(
            !format!("{shown:?}").contains(&png),
            "no bytes left in the page's events"
        );
        assert_eq!(png_at(&events, 4).as_deref(), Some(&b"\x89PNG fake"[..]));
    }

    #[test]
    fn only_a_png_event_answers() {
        let events = vec![
            output(4, &[("image/png", "not base64!")]),
            output(5, &[("text/plain", "42")]),
        ];
        assert_eq!(png_at(&events, 4), None);
        assert_eq!(png_at(&events, 5), None);
        assert_eq!(png_at(&events, 6), None);
        assert_eq!(parse_figure_name("12.png"), Some(12));
        for bad in ["12", "x.png", "-1.png", "12.png.png", "../1.png", ""] {
            assert_eq!(parse_figure_name(bad), None, "{bad}");
        }
    }
}
