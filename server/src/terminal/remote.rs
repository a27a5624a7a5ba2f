//! A runcell server at a URL, through the notebook's NDJSON API
//! (`/api/sessions…`): the same sessions a browser of the same owner sees.
//!
//! The client holds an owner cookie like a browser does, kept per server in
//! the client's directory, and signs in with an API key (`POST /login`)
//! when the server's pages ask for one. Whatever the server sends is read
//! with bounds: a line of a turn is at most [`MAX_LINE_BYTES`], a
//! downloaded file at most [`MAX_DOWNLOAD_BYTES`].

use std::time::Duration;

use app::protocol::ServerMessage;
use async_trait::async_trait;
use bytes::{Buf, BytesMut};
use futures::StreamExt;
use parking_lot::Mutex;
use reqwest::header::{ACCEPT, CONTENT_TYPE, COOKIE, HeaderMap, SET_COOKIE};
use reqwest::{RequestBuilder, Response, StatusCode};
use serde::Deserialize;

use super::engine::{Backend, ClientError, FileSummary, Frame, TurnStream, Uploaded};
use super::identity::Identities;
use runcell_protocol::OwnerId;

/// The longest line of a turn read (an event with an image in it).
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// The largest file `/download` takes.
pub const MAX_DOWNLOAD_BYTES: usize = 256 * 1024 * 1024;
/// The largest JSON answer read (a list of files, a share link).
const MAX_JSON_BYTES: usize = 4 * 1024 * 1024;
/// How long a request that is not a turn or a file may take.
const SHORT: Duration = Duration::from_secs(60);
/// How long an upload or a download may take.
const LONG: Duration = Duration::from_secs(600);

const OWNER_COOKIE: &str = "runcell_owner";
const SIGNIN_COOKIE: &str = "runcell_signin";

pub struct Remote {
    base: String,
    http: reqwest::Client,
    identities: Identities,
    owner: Mutex<Option<OwnerId>>,
    signin: Mutex<Option<String>>,
    key: Option<String>,
}

impl Remote {
    /// Connects to the server at `url`: checks that it answers, and signs
    /// in when a key is given.
    pub async fn connect(
        url: &str,
        key: Option<String>,
        identities: Identities,
    ) -> Result<Self, ClientError> {
        let base = url.trim().trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::Local(format!(
                "--url must be an http:// or https:// address, not '{base}'"
            )));
        }
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ClientError::Local(e.to_string()))?;
        let owner = identities.owner(&base);
        let remote = Self {
            base,
            http,
            identities,
            owner: Mutex::new(owner),
            signin: Mutex::new(None),
            key: key.filter(|k| !k.trim().is_empty()),
        };
        let health = remote
            .http
            .get(remote.url("/healthz"))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| remote.unreachable(&e))?;
        if !health.status().is_success() {
            return Err(ClientError::Unreachable {
                url: remote.base.clone(),
                reason: format!("it answered {} to /healthz", health.status()),
            });
        }
        if remote.key.is_some() {
            remote.sign_in().await?;
        }
        Ok(remote)
    }

    /// Spends a browser's hand-over code: from now on this client is that
    /// browser's owner (its own sessions moved there by the server). The
    /// owner id it had is kept beside, under "<url> (before join)".
    /// Answers how many sessions moved.
    pub async fn join(&self, code: &str) -> Result<u64, ClientError> {
        #[derive(Deserialize)]
        struct Joined {
            owner: String,
            #[serde(default)]
            moved: u64,
        }
        let before = *self.owner.lock();
        let body = serde_json::json!({ "code": code.trim() });
        let response = self
            .send(|| {
                self.http
                    .post(self.url("/api/owner/join"))
                    .json(&body)
                    .timeout(SHORT)
            })
            .await?;
        let joined: Joined = self.json(response).await?;
        let owner: OwnerId = joined
            .owner
            .parse()
            .map_err(|_| ClientError::Protocol("the joined owner is not an owner id".into()))?;
        if let Some(before) = before.filter(|b| *b != owner) {
            self.identities
                .remember(&format!("{} (before join)", self.base), before)?;
        }
        *self.owner.lock() = Some(owner);
        self.identities.remember(&self.base, owner)?;
        Ok(joined.moved)
    }

    /// How many sessions (with a turn) this client's owner has here.
    pub async fn session_count(&self) -> Result<usize, ClientError> {
        #[derive(Deserialize)]
        struct Listed {
            sessions: Vec<serde_json::Value>,
        }
        let response = self
            .send(|| self.http.get(self.url("/api/sessions")).timeout(SHORT))
            .await?;
        let listed: Listed = self.json(response).await?;
        Ok(listed.sessions.len())
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn unreachable(&self, error: &reqwest::Error) -> ClientError {
        let mut reason = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(inner) = source {
            reason = inner.to_string();
            source = inner.source();
        }
        ClientError::Unreachable {
            url: self.base.clone(),
            reason,
        }
    }

    /// `POST /login` with the key; keeps the sign-in cookie it answers with.
    async fn sign_in(&self) -> Result<(), ClientError> {
        let Some(key) = &self.key else {
            return Err(ClientError::NeedsKey);
        };
        let response = self
            .http
            .post(self.url("/login"))
            .form(&[("api_key", key.as_str()), ("next", "/")])
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        match cookie_from(response.headers(), SIGNIN_COOKIE) {
            Some(token) if status.is_redirection() && !token.is_empty() => {
                *self.signin.lock() = Some(token);
                Ok(())
            }
            _ if status == StatusCode::UNAUTHORIZED => Err(ClientError::KeyRefused(
                "it is not a live key of this server".into(),
            )),
            _ => Err(ClientError::KeyRefused(format!(
                "signing in answered {status}"
            ))),
        }
    }

    fn with_cookies(&self, request: RequestBuilder) -> RequestBuilder {
        let mut cookies = Vec::new();
        if let Some(owner) = *self.owner.lock() {
            cookies.push(format!("{OWNER_COOKIE}={owner}"));
        }
        if let Some(token) = self.signin.lock().as_ref() {
            cookies.push(format!("{SIGNIN_COOKIE}={token}"));
        }
        if cookies.is_empty() {
            request
        } else {
            request.header(COOKIE, cookies.join("; "))
        }
    }

    /// Sends a request with the client's cookies; keeps an owner cookie the
    /// server made; turns an error answer into [`ClientError::Refused`].
    async fn send(&self, build: impl Fn() -> RequestBuilder) -> Result<Response, ClientError> {
        let mut signed_in_again = false;
        loop {
            let response = self
                .with_cookies(build())
                .send()
                .await
                .map_err(|e| self.unreachable(&e))?;
            if let Some(owner) = cookie_from(response.headers(), OWNER_COOKIE)
                .and_then(|value| value.parse::<OwnerId>().ok())
            {
                let mut kept = self.owner.lock();
                if kept.is_none() {
                    *kept = Some(owner);
                    if let Err(e) = self.identities.remember(&self.base, owner) {
                        tracing::warn!(error = %e, "cannot keep the owner id");
                    }
                }
            }
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            if status == StatusCode::UNAUTHORIZED {
                // A sign-in lasts hours; a long chat signs in again once.
                if self.key.is_some() && !signed_in_again {
                    signed_in_again = true;
                    self.sign_in().await?;
                    continue;
                }
                return Err(if self.key.is_some() {
                    ClientError::KeyRefused("the sign-in was not accepted".into())
                } else {
                    ClientError::NeedsKey
                });
            }
            return Err(refusal(response).await);
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        response: Response,
    ) -> Result<T, ClientError> {
        let bytes = read_bounded(response, MAX_JSON_BYTES).await?;
        serde_json::from_slice(&bytes).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    async fn turn(&self, path: String, body: serde_json::Value) -> Result<TurnStream, ClientError> {
        let response = self
            .send(|| {
                self.http
                    .post(self.url(&path))
                    .header(ACCEPT, "application/x-ndjson")
                    .json(&body)
            })
            .await?;
        Ok(turn_lines(response))
    }
}

/// The value of cookie `name` among `Set-Cookie` headers.
fn cookie_from(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| cookie::Cookie::parse(v.to_string()).ok())
        .find(|c| c.name() == name)
        .map(|c| c.value().to_string())
}

/// An error answer: the API's `{"error": {"code", "message"}}`, or its
/// status.
async fn refusal(response: Response) -> ClientError {
    #[derive(Deserialize)]
    struct Body {
        error: Inner,
    }
    #[derive(Deserialize)]
    struct Inner {
        #[serde(default)]
        code: String,
        message: String,
    }
    let status = response.status();
    let bytes = read_bounded(response, 64 * 1024).await.unwrap_or_default();
    match serde_json::from_slice::<Body>(&bytes) {
        Ok(body) => ClientError::Refused {
            status: status.as_u16(),
            code: body.error.code,
            message: super::look::clean(&body.error.message),
        },
        Err(_) => ClientError::Refused {
            status: status.as_u16(),
            code: String::new(),
            message: format!("the server answered {status}"),
        },
    }
}

/// A body of at most `max` bytes.
async fn read_bounded(response: Response, max: usize) -> Result<Vec<u8>, ClientError> {
    if response
        .content_length()
        .is_some_and(|len| len > u64::try_from(max).unwrap_or(u64::MAX))
    {
        return Err(ClientError::Protocol(format!("an answer over {max} bytes")));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| ClientError::Protocol(e.to_string()))?;
        if body.len() + chunk.len() > max {
            return Err(ClientError::Protocol(format!("an answer over {max} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A streamed NDJSON answer as frames: one event a line, each line at most
/// [`MAX_LINE_BYTES`]; an error line ends the stream with its error.
fn turn_lines(response: Response) -> TurnStream {
    lines_of(response.bytes_stream(), MAX_LINE_BYTES)
        .filter_map(|line| async move {
            match line {
                Err(e) => Some(Err(e)),
                Ok(line) => match serde_json::from_str::<ServerMessage>(&line) {
                    Ok(ServerMessage::Event(event)) => Some(Ok(Frame { line, event })),
                    Ok(ServerMessage::Error { code, message }) => Some(Err(ClientError::Refused {
                        status: 200,
                        code: serde_json::to_value(code)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default(),
                        message: super::look::clean(&message),
                    })),
                    Ok(_) => None,
                    Err(e) => Some(Err(ClientError::Protocol(format!(
                        "a line that is not an event: {e}"
                    )))),
                },
            }
        })
        .boxed()
}

/// The lines of a byte stream (without their `\n` or `\r\n`; blank ones
/// skipped; a last line without `\n` kept), each at most `max` bytes: a
/// longer one, or a broken stream, ends it with an error. Each byte is
/// looked at once, however the stream is cut.
fn lines_of<S, E>(bytes: S, max: usize) -> impl futures::Stream<Item = Result<String, ClientError>>
where
    S: futures::Stream<Item = Result<bytes::Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    struct State<S> {
        bytes: S,
        buffer: BytesMut,
        /// Bytes of `buffer` known to hold no line break.
        scanned: usize,
        done: bool,
    }
    let state = State {
        bytes,
        buffer: BytesMut::new(),
        scanned: 0,
        done: false,
    };
    futures::stream::unfold(state, move |mut state| async move {
        loop {
            if state.done {
                return None;
            }
            if let Some(at) = state.buffer[state.scanned..]
                .iter()
                .position(|&b| b == b'\n')
            {
                let end = state.scanned + at;
                let line = state.buffer.split_to(end + 1);
                state.scanned = 0;
                let text = String::from_utf8_lossy(&line[..end]);
                let text = text.strip_suffix('\r').unwrap_or(&text);
                if text.trim().is_empty() {
                    continue;
                }
                if text.len() > max {
                    state.done = true;
                    return Some((Err(too_long(max)), state));
                }
                return Some((Ok(text.to_string()), state));
            }
            state.scanned = state.buffer.len();
            if state.buffer.len() > max {
                state.done = true;
                return Some((Err(too_long(max)), state));
            }
            match state.bytes.next().await {
                Some(Ok(chunk)) => state.buffer.extend_from_slice(chunk.chunk()),
                Some(Err(e)) => {
                    state.done = true;
                    let error = ClientError::Protocol(format!("the turn's stream broke: {e}"));
                    return Some((Err(error), state));
                }
                None => {
                    state.done = true;
                    let rest = String::from_utf8_lossy(&state.buffer).into_owned();
                    state.buffer.clear();
                    let rest = rest.trim();
                    if rest.is_empty() {
                        return None;
                    }
                    return Some((Ok(rest.to_string()), state));
                }
            }
        }
    })
}

fn too_long(max: usize) -> ClientError {
    ClientError::Protocol(format!("a line over {max} bytes"))
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

#[derive(Deserialize)]
struct Files {
    files: Vec<FileSummary>,
}

#[derive(Deserialize)]
struct Link {
    url: String,
}

#[derive(Deserialize)]
struct Models {
    default_model: String,
}

#[async_trait]
impl Backend for Remote {
    fn describe(&self) -> String {
        self.base.clone()
    }

    async fn default_model(&self) -> Option<String> {
        let response = self
            .send(|| self.http.get(self.url("/api/models")).timeout(SHORT))
            .await
            .ok()?;
        let models: Models = self.json(response).await.ok()?;
        Some(models.default_model)
    }

    async fn new_session(&self) -> Result<String, ClientError> {
        let response = self
            .send(|| self.http.post(self.url("/api/sessions")).timeout(SHORT))
            .await?;
        let created: Created = self.json(response).await?;
        // Printed and put in paths: only a real session id is taken.
        let id: runcell_protocol::SessionId = created.id.parse().map_err(|_| {
            ClientError::Protocol("the new session's id is not a session id".into())
        })?;
        Ok(id.to_string())
    }

    async fn check_session(&self, id: &str) -> Result<(), ClientError> {
        let path = format!("/api/sessions/{}/events?after={}", segment(id), u64::MAX);
        self.send(|| self.http.get(self.url(&path)).timeout(SHORT))
            .await?;
        Ok(())
    }

    async fn ask(
        &self,
        id: &str,
        text: &str,
        model: Option<&str>,
    ) -> Result<TurnStream, ClientError> {
        let mut body = serde_json::json!({ "text": text });
        if let Some(model) = model {
            body["model"] = model.into();
        }
        self.turn(format!("/api/sessions/{}/ask", segment(id)), body)
            .await
    }

    async fn rerun(&self, id: &str) -> Result<TurnStream, ClientError> {
        let response = self
            .send(|| {
                self.http
                    .post(self.url(&format!("/api/sessions/{}/rerun", segment(id))))
                    .header(ACCEPT, "application/x-ndjson")
            })
            .await?;
        Ok(turn_lines(response))
    }

    async fn stop(&self, id: &str) -> Result<(), ClientError> {
        let path = format!("/api/sessions/{}/stop", segment(id));
        self.send(|| {
            self.http
                .post(self.url(&path))
                .timeout(Duration::from_secs(10))
        })
        .await?;
        Ok(())
    }

    async fn upload(
        &self,
        id: &str,
        name: &str,
        bytes: Vec<u8>,
        replace: bool,
    ) -> Result<Uploaded, ClientError> {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("path", name)
            .append_pair("overwrite", if replace { "true" } else { "false" })
            .finish();
        let path = format!("/api/sessions/{}/files?{query}", segment(id));
        let body = bytes::Bytes::from(bytes);
        match self
            .send(|| {
                self.http
                    .put(self.url(&path))
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .body(body.clone())
                    .timeout(LONG)
            })
            .await
        {
            Ok(response) => {
                let files: Files = self.json(response).await?;
                files
                    .files
                    .into_iter()
                    .next()
                    .map(Uploaded::Written)
                    .ok_or_else(|| ClientError::Protocol("the upload wrote no file".into()))
            }
            Err(ClientError::Refused { status: 409, .. }) => Ok(Uploaded::Exists),
            Err(e) => Err(e),
        }
    }

    async fn files(&self, id: &str) -> Result<Vec<FileSummary>, ClientError> {
        let path = format!("/api/sessions/{}/files", segment(id));
        let response = self
            .send(|| self.http.get(self.url(&path)).timeout(SHORT))
            .await?;
        let files: Files = self.json(response).await?;
        Ok(files.files)
    }

    async fn download(&self, id: &str, file: &str) -> Result<Vec<u8>, ClientError> {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("path", file)
            .finish();
        let path = format!("/api/sessions/{}/files?{query}", segment(id));
        let response = self
            .send(|| self.http.get(self.url(&path)).timeout(LONG))
            .await?;
        read_bounded(response, MAX_DOWNLOAD_BYTES).await
    }

    async fn share(&self, id: &str) -> Result<String, ClientError> {
        let path = format!("/api/sessions/{}/share", segment(id));
        let response = self
            .send(|| self.http.post(self.url(&path)).timeout(SHORT))
            .await?;
        let link: Link = self.json(response).await?;
        Ok(link.url)
    }

    fn page(&self, id: &str) -> Option<String> {
        Some(self.url(&format!("/sessions/{}", segment(id))))
    }

    async fn close(&self) {}
}

/// `id` as one path segment (a session id is hex and dashes; anything
/// else is escaped, and the server answers 404).
fn segment(id: &str) -> String {
    form_urlencoded::byte_serialize(id.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use proptest::prelude::*;

    use super::*;

    async fn split(pieces: Vec<Vec<u8>>, max: usize) -> Vec<Result<String, String>> {
        let stream = futures::stream::iter(
            pieces
                .into_iter()
                .map(|p| Ok::<_, std::io::Error>(bytes::Bytes::from(p))),
        );
        lines_of(stream, max)
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
            .await
    }

    fn run<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn lines_are_whole_whatever_the_cuts() {
        let text = b"{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}";
        let expected = vec![
            Ok("{\"a\":1}".to_string()),
            Ok("{\"b\":2}".to_string()),
            Ok("{\"c\":3}".to_string()),
        ];
        for cut in 0..text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(
                run(split(vec![a.to_vec(), b.to_vec()], 64)),
                expected,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn an_overlong_line_ends_the_stream_even_without_a_break() {
        let lines = run(split(
            vec![b"ok\n".to_vec(), vec![b'x'; 100], vec![b'x'; 100]],
            64,
        ));
        assert_eq!(lines[0], Ok("ok".to_string()));
        assert!(
            lines[1]
                .as_ref()
                .is_err_and(|e| e.contains("over 64 bytes"))
        );
        assert_eq!(lines.len(), 2);
        let lines = run(split(
            vec![[vec![b'y'; 65], b"\nz\n".to_vec()].concat()],
            64,
        ));
        assert_eq!(lines.len(), 1, "{lines:?}");
    }

    #[test]
    fn a_broken_stream_is_an_error() {
        let stream =
            futures::stream::iter(vec![Ok(bytes::Bytes::from_static(b"a\nb")), Err("reset")]);
        let lines: Vec<_> = run(lines_of(stream, 64).collect());
        assert_eq!(lines.len(), 2);
        assert!(
            lines[1]
                .as_ref()
                .is_err_and(|e| e.to_string().contains("reset"))
        );
    }

    proptest! {
        #[test]
        fn any_cutting_gives_the_same_lines(
            lines in proptest::collection::vec("[a-z{}:\"0-9]{1,20}", 1..8),
            cuts in proptest::collection::vec(0usize..200, 0..6),
        ) {
            let text = lines.join("\n") + "\n";
            let bytes = text.as_bytes();
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut from = 0;
            for point in points {
                pieces.push(bytes[from..point].to_vec());
                from = point;
            }
            pieces.push(bytes[from..].to_vec());
            let got = run(split(pieces, 64));
            let want: Vec<Result<String, String>> = lines.into_iter().map(Ok).collect();
            prop_assert_eq!(got, want);
        }
    }
}
