//! A session page's data and the kernels list, read by hand as the frames
//! are: the page reads them as it hydrates (the route's resource) and from
//! `GET /api/kernels`, and serde's generated readers for them were the
//! bundle's largest part of serde after the frames'.

use serde_json::Value;

use super::{
    Read, Unreadable, flag, list, optional, optional_text, required, session_events, text, u64_of,
    usize_of,
};
use crate::SandboxKind;
use crate::page::{
    AccountMenu, KernelInUse, KernelsInUse, ModelChoices, SessionPageData, SessionSummary,
};

/// A session page's data, as serde writes [`SessionPageData`].
pub fn session_page_data(v: &Value) -> Read<SessionPageData> {
    Ok(SessionPageData {
        session_id: text(v, "session_id")?,
        title: text(v, "title")?,
        events: session_events(required(v, "events")?)?,
        models: model_choices(required(v, "models")?)?,
        backends: match optional(v, "backends") {
            Some(_) => list(v, "backends")?
                .iter()
                .map(|b| sandbox_kind(b, "backends"))
                .collect::<Read<_>>()?,
            None => Vec::new(),
        },
        backend: optional(v, "backend")
            .map(|b| sandbox_kind(b, "backend"))
            .transpose()?,
        pyodide_url: optional_text(v, "pyodide_url")?,
        upload_limit: match optional(v, "upload_limit") {
            Some(_) => u64_of(v, "upload_limit")?,
            None => 0,
        },
        share_path: optional_text(v, "share_path")?,
        share_files: flag(v, "share_files")?,
        sessions: list(v, "sessions")?
            .iter()
            .map(|s| {
                Ok(SessionSummary {
                    id: text(s, "id")?,
                    title: text(s, "title")?,
                    updated_ms: u64_of(s, "updated_ms")?,
                })
            })
            .collect::<Read<_>>()?,
        account: match optional(v, "account") {
            Some(a) => AccountMenu {
                name: optional_text(a, "name")?,
                admin: flag(a, "admin")?,
                sign_in: flag(a, "sign_in")?,
            },
            None => AccountMenu::default(),
        },
    })
}

/// `GET /api/kernels`, as serde writes [`KernelsInUse`].
pub fn kernels_in_use(v: &Value) -> Read<KernelsInUse> {
    Ok(KernelsInUse {
        kernels: list(v, "kernels")?
            .iter()
            .map(|k| {
                Ok(KernelInUse {
                    session_id: text(k, "session_id")?,
                    title: text(k, "title")?,
                    url: text(k, "url")?,
                    backend: sandbox_kind(required(k, "backend")?, "backend")?,
                    backend_label: text(k, "backend_label")?,
                    running: flag(k, "running")?,
                    idle_ms: u64_of(k, "idle_ms")?,
                })
            })
            .collect::<Read<_>>()?,
        cap: usize_of(v, "cap")?,
    })
}

fn model_choices(v: &Value) -> Read<ModelChoices> {
    Ok(ModelChoices {
        backend: text(v, "backend")?,
        default_model: text(v, "default_model")?,
        models: super::strings(v, "models")?,
        problem: optional_text(v, "problem")?,
    })
}

fn sandbox_kind(v: &Value, key: &'static str) -> Read<SandboxKind> {
    v.as_str()
        .and_then(|name| name.parse().ok())
        .ok_or(Unreadable(key))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{CellId, CellKind, EventBody, SessionEvent};

    fn full() -> SessionPageData {
        SessionPageData {
            session_id: "0b0e4f6e-1c1d-4a57-9d4e-5bb2a7b0f001".into(),
            title: "plot the primes".into(),
            events: SessionEvent::numbered(
                vec![
                    EventBody::UserMessage {
                        cell_id: CellId(1),
                        text: "plot the primes".into(),
                        markup: Some("<p>plot the primes</p>\n".into()),
                    },
                    EventBody::CellStarted {
                        cell_id: CellId(2),
                        cell_kind: CellKind::Code,
                        language: Some("python".into()),
                        attempt: Some(1),
                        source: None,
                    },
                ],
                1,
            ),
            models: ModelChoices {
                backend: "embedded".into(),
                default_model: "qwen".into(),
                models: vec!["qwen".into(), "other".into()],
                problem: Some("the model file is missing".into()),
            },
            backends: vec![SandboxKind::Jail, SandboxKind::E2b, SandboxKind::Browser],
            backend: Some(SandboxKind::Browser),
            pyodide_url: Some("/pyodide/abc/".into()),
            upload_limit: 26_214_400,
            share_path: Some("/s/abc".into()),
            share_files: true,
            sessions: vec![SessionSummary {
                id: "s1".into(),
                title: "an older one".into(),
                updated_ms: 1_765_000_000_000,
            }],
            account: AccountMenu {
                name: Some("Ada".into()),
                admin: true,
                sign_in: true,
            },
        }
    }

    #[test]
    fn a_page_data_serde_wrote_reads_back_the_same() {
        let data = full();
        let written = serde_json::to_value(&data).unwrap_or_default();
        assert_eq!(session_page_data(&written), Ok(data));
    }

    #[test]
    fn a_page_data_with_only_what_serde_requires_reads_as_serde_reads_it() {
        let least = json!({
            "session_id": "s",
            "title": "",
            "events": [],
            "models": {"backend": "openai", "default_model": "m", "models": [], "problem": null},
            "sessions": [],
            "backend": null,
            "share_path": null,
        });
        let by_serde = serde_json::from_value::<SessionPageData>(least.clone()).ok();
        assert!(by_serde.is_some());
        assert_eq!(session_page_data(&least).ok(), by_serde);
    }

    #[test]
    fn a_broken_page_data_is_refused_by_both() {
        let written = serde_json::to_value(full()).unwrap_or_default();
        for (key, bad, field) in [
            ("backend", json!("moon"), "backend"),
            ("backends", json!(["jail", 3]), "backends"),
            ("upload_limit", json!(-1), "upload_limit"),
            ("share_files", json!("yes"), "share_files"),
            ("sessions", json!({}), "sessions"),
            ("events", json!([{"seq": -1}]), "seq"),
        ] {
            let mut broken = written.clone();
            broken[key] = bad;
            assert_eq!(session_page_data(&broken), Err(Unreadable(field)), "{key}");
            assert!(
                serde_json::from_value::<SessionPageData>(broken).is_err(),
                "{key}"
            );
        }
        assert_eq!(session_page_data(&json!([])), Err(Unreadable("session_id")));
    }

    #[test]
    fn the_kernels_list_reads_back_the_same_and_broken_ones_are_refused() {
        let list = KernelsInUse {
            kernels: vec![KernelInUse {
                session_id: "s".into(),
                title: "t".into(),
                url: "/sessions/s".into(),
                backend: SandboxKind::Jail,
                backend_label: "Local sandbox".into(),
                running: true,
                idle_ms: 0,
            }],
            cap: 4,
        };
        let written = serde_json::to_value(&list).unwrap_or_default();
        assert_eq!(kernels_in_use(&written), Ok(list));
        let mut broken = written;
        broken["kernels"][0]["backend"] = json!("moon");
        assert_eq!(kernels_in_use(&broken), Err(Unreadable("backend")));
        assert!(serde_json::from_value::<KernelsInUse>(broken).is_err());
        assert_eq!(
            kernels_in_use(&json!({"kernels": []})),
            Err(Unreadable("cap"))
        );
    }
}
