//! A real OpenID provider for the OpenID Connect sign-in tests:
//! `end2end/oidc/provider.mjs` (oidc-provider under Node, installed by
//! `scripts/setup.sh test`) on loopback, and a person signing in through its
//! own login form over plain HTTP.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode, Url};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// How long the provider may take to say it listens (Node starting cold).
const START_WAIT: Duration = Duration::from_secs(30);

/// Redirects and pages one sign-in may take before it is called stuck.
const MAX_STEPS: usize = 16;

/// The checkout's `end2end/`: the provider's script and its `node_modules`.
fn end2end() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../end2end")
}

/// oidc-provider running on `127.0.0.1` until dropped (killed then; it also
/// exits by itself when its stdin, held here, closes).
pub struct OidcProvider {
    /// `http://127.0.0.1:PORT`, as the provider's discovery document says.
    pub issuer: String,
    #[expect(dead_code, reason = "held for kill_on_drop and to keep its stdin open")]
    child: Child,
}

impl OidcProvider {
    /// Starts the provider with `clients` as `(id, secret, redirect_uri)`.
    pub async fn start(clients: &[(&str, &str, &str)]) -> OidcProvider {
        Self::start_on(0, clients).await
    }

    /// As [`Self::start`], on `port` (0: any free one), for a relying
    /// party that must know the issuer before the provider starts.
    pub async fn start_on(port: u16, clients: &[(&str, &str, &str)]) -> OidcProvider {
        let package = end2end().join("node_modules/oidc-provider");
        assert!(
            package.is_dir(),
            "{} is missing: run scripts/setup.sh test (npm ci in end2end)",
            package.display()
        );
        let mut command = Command::new("node");
        command
            .arg(end2end().join("oidc/provider.mjs"))
            .arg("--port")
            .arg(port.to_string());
        for (id, secret, redirect_uri) in clients {
            command
                .arg("--client")
                .arg(format!("{id}:{secret}:{redirect_uri}"));
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node did not start (Debian's nodejs)");

        // Its stderr, read all along (a full pipe would stop it), is shown
        // with the test's output and kept for a failure's message.
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let kept = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("oidc-provider: {line}");
                let mut kept = kept.lock().expect("log lock");
                kept.push_str(&line);
                kept.push('\n');
            }
        });

        let stdout = child.stdout.take().expect("stdout is piped");
        let first = tokio::time::timeout(START_WAIT, BufReader::new(stdout).lines().next_line())
            .await
            .map_err(|_| format!("no line within {START_WAIT:?}"))
            .and_then(|line| line.map_err(|e| e.to_string()))
            .and_then(|line| line.ok_or_else(|| "stdout closed".to_string()));
        let issuer = first.and_then(|line| {
            serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|v| v["issuer"].as_str().map(str::to_string))
                .ok_or_else(|| format!("not the issuer line: {line}"))
        });
        match issuer {
            Ok(issuer) => OidcProvider { issuer, child },
            Err(why) => {
                // Whatever it said before dying (or while hanging).
                let _ = child.start_kill();
                let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                let log = log.lock().expect("log lock").clone();
                panic!("the OpenID provider did not start: {why}\nits stderr:\n{log}");
            }
        }
    }

    /// `{issuer}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.issuer)
    }
}

/// The cookies a browser would hold, by host and name (paths are ignored:
/// sending the provider a cookie on a path it did not set it for is harmless).
#[derive(Default)]
struct CookieJar(BTreeMap<(String, String), String>);

impl CookieJar {
    fn take(&mut self, url: &Url, response: &reqwest::Response) {
        let host = url.host_str().unwrap_or_default().to_string();
        for value in response.headers().get_all(SET_COOKIE) {
            let Some(cookie) = value
                .to_str()
                .ok()
                .and_then(|v| cookie::Cookie::parse(v.to_string()).ok())
            else {
                continue;
            };
            let key = (host.clone(), cookie.name().to_string());
            let expired = cookie
                .max_age()
                .is_some_and(|age| age <= time::Duration::ZERO)
                || cookie
                    .expires_datetime()
                    .is_some_and(|at| at <= time::OffsetDateTime::now_utc());
            if expired || cookie.value().is_empty() {
                self.0.remove(&key);
            } else {
                self.0.insert(key, cookie.value().to_string());
            }
        }
    }

    fn header(&self, url: &Url) -> Option<String> {
        let host = url.host_str().unwrap_or_default();
        let pairs: Vec<String> = self
            .0
            .iter()
            .filter(|((h, _), _)| h == host)
            .map(|((_, name), value)| format!("{name}={value}"))
            .collect();
        (!pairs.is_empty()).then(|| pairs.join("; "))
    }
}

/// The login form on a dev-interactions page: its action (absolute) and its
/// hidden fields.
fn login_form(page: &Url, html: &str) -> Option<(Url, Vec<(String, String)>)> {
    let document = scraper::Html::parse_document(html);
    let forms = scraper::Selector::parse("form").expect("selector");
    let login = scraper::Selector::parse(r#"input[name="login"]"#).expect("selector");
    let hidden = scraper::Selector::parse(r#"input[type="hidden"]"#).expect("selector");
    let form = document
        .select(&forms)
        .find(|form| form.select(&login).next().is_some())?;
    let action = page.join(form.value().attr("action").unwrap_or("")).ok()?;
    let fields = form
        .select(&hidden)
        .filter_map(|input| {
            let name = input.value().attr("name")?;
            Some((
                name.to_string(),
                input.value().attr("value").unwrap_or("").to_string(),
            ))
        })
        .collect();
    Some((action, fields))
}

/// Signs `login` in at the provider as a browser would, over plain HTTP:
/// GETs `authorize_url` (which names the client's `redirect_uri`), follows
/// redirects by hand with a cookie jar of its own (a fresh browser), fills
/// the dev-interactions login form (`login`, any `password`) and follows on
/// until the provider sends the browser back to the redirect URI. Returns
/// that URL, with its `code` and `state`.
///
/// `client` must not follow redirects itself (`redirect::Policy::none()`).
pub async fn sign_in_at(client: &reqwest::Client, authorize_url: &str, login: &str) -> String {
    let mut url = Url::parse(authorize_url).expect("the authorize URL parses");
    let redirect_uri = url
        .query_pairs()
        .find(|(k, _)| k == "redirect_uri")
        .map(|(_, v)| v.into_owned())
        .expect("the authorize URL has a redirect_uri");
    let mut jar = CookieJar::default();
    let mut method = Method::GET;
    let mut form: Option<Vec<(String, String)>> = None;
    let mut trail = Vec::new();
    for _ in 0..MAX_STEPS {
        trail.push(format!("{method} {url}"));
        let mut request = client.request(method.clone(), url.clone());
        if let Some(cookies) = jar.header(&url) {
            request = request.header(COOKIE, cookies);
        }
        if let Some(fields) = form.take() {
            request = request.form(&fields);
        }
        let response = request.send().await.expect("the provider answers");
        jar.take(&url, &response);
        let status = response.status();
        if status.is_redirection() {
            let location = response
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .expect("a redirect has a Location");
            let next = url.join(location).expect("the Location is a URL");
            if next.as_str().starts_with(&redirect_uri) {
                return next.into();
            }
            url = next;
            method = Method::GET;
            continue;
        }
        let body = response.text().await.unwrap_or_default();
        match (status, login_form(&url, &body)) {
            (StatusCode::OK, Some((action, mut fields))) => {
                fields.push(("login".into(), login.into()));
                fields.push(("password".into(), "any password".into()));
                url = action;
                method = Method::POST;
                form = Some(fields);
            }
            _ => panic!(
                "signing in stopped at {status} without a login form or a redirect\n\
                 steps: {trail:#?}\nbody: {body}"
            ),
        }
    }
    panic!("signing in took over {MAX_STEPS} steps: {trail:#?}");
}

/// The payload of a JWT, unverified.
fn jwt_payload(jwt: &str) -> Value {
    let payload = jwt.split('.').nth(1).expect("a JWT has a payload");
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).expect("base64url"))
        .expect("the payload is JSON")
}

#[tokio::test]
async fn the_test_provider_signs_a_person_in_with_pkce() {
    const ID: &str = "runcell-test";
    const SECRET: &str = "not-a-secret";
    const REDIRECT: &str = "http://127.0.0.1:9/auth/callback";
    let provider = OidcProvider::start(&[(ID, SECRET, REDIRECT)]).await;
    assert!(provider.issuer.starts_with("http://127.0.0.1:"));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    let discovery: Value = client
        .get(provider.url("/.well-known/openid-configuration"))
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(discovery["issuer"], provider.issuer.as_str());
    assert!(
        discovery["code_challenge_methods_supported"]
            .as_array()
            .unwrap()
            .contains(&"S256".into()),
        "{discovery}"
    );
    let authorization_endpoint = discovery["authorization_endpoint"].as_str().unwrap();
    let token_endpoint = discovery["token_endpoint"].as_str().unwrap();

    let verifier = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let state = uuid::Uuid::new_v4().simple().to_string();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let authorize = Url::parse_with_params(
        authorization_endpoint,
        [
            ("response_type", "code"),
            ("client_id", ID),
            ("redirect_uri", REDIRECT),
            ("scope", "openid email profile"),
            ("state", &state),
            ("nonce", &nonce),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
        ],
    )
    .unwrap();

    let back = Url::parse(&sign_in_at(&client, authorize.as_str(), "alice").await).unwrap();
    assert!(back.as_str().starts_with(REDIRECT), "{back}");
    let query: BTreeMap<String, String> = back.query_pairs().into_owned().collect();
    assert_eq!(query.get("state"), Some(&state), "{back}");
    let code = query.get("code").expect("a code").clone();

    let redeem = || {
        client
            .post(token_endpoint)
            .basic_auth(ID, Some(SECRET))
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("code_verifier", &verifier),
            ])
            .send()
    };
    let tokens = redeem().await.unwrap();
    assert_eq!(tokens.status(), StatusCode::OK);
    let tokens: Value = tokens.json().await.unwrap();
    let claims = jwt_payload(tokens["id_token"].as_str().expect("an id_token"));
    assert_eq!(claims["iss"], provider.issuer.as_str());
    assert_eq!(claims["aud"], ID);
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["email"], "alice@example.test");
    assert_eq!(claims["email_verified"], true);
    assert_eq!(claims["name"], "Alice");
    assert_eq!(claims["nonce"], nonce.as_str());

    // A code is good once.
    let again = redeem().await.unwrap();
    assert_eq!(again.status(), StatusCode::BAD_REQUEST);
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["error"], "invalid_grant", "{again}");
}
