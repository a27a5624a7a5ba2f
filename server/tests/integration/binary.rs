//! The `runcell` binary as users and scripts start it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNCELL: &str = env!("CARGO_BIN_EXE_runcell");

fn runcell(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(RUNCELL);
    command
        .args(args)
        .env_remove("RUNCELL_ADDR")
        .env_remove("RUNCELL_LOG");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().unwrap()
}

/// `runcell serve` on an ephemeral port with `env`; the child and its address.
fn serve(data: &std::path::Path, env: &[(&str, &str)]) -> (std::process::Child, String) {
    let mut command = Command::new(RUNCELL);
    command
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .env("RUNCELL_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    // Waited on by `stop`, which every caller ends with.
    #[expect(
        clippy::zombie_processes,
        reason = "the test stops the child with `stop`"
    )]
    let mut child = command.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "runcell exited early"
        );
        if let Some(rest) = line.split("listening on http://").nth(1) {
            return (child, rest.trim().to_string());
        }
    }
}

/// One HTTP/1.0 exchange; gives up (fails) rather than wait forever.
fn http10(addr: &str, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

/// SIGTERM, then the exit status; a server that does not stop within 20 s is
/// killed and the test fails.
fn stop(child: &mut std::process::Child) -> std::process::ExitStatus {
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("runcell did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn config_prints_the_effective_settings() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().to_str().unwrap();
    std::fs::write(data.path().join("runcell.toml"), "log = \"debug\"\n").unwrap();
    let out = runcell(
        &["config", "--data-dir", dir],
        &[("RUNCELL_ADDR", "127.0.0.1:4321")],
    );
    assert!(out.status.success(), "{out:?}");
    let printed: toml::Value = toml::from_str(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert_eq!(printed["addr"].as_str(), Some("127.0.0.1:4321"));
    assert_eq!(printed["log"].as_str(), Some("debug"));
    assert_eq!(printed["data_dir"].as_str(), Some(dir));
}

#[test]
fn invalid_settings_stop_start_up_naming_the_setting() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().to_str().unwrap();
    let out = runcell(
        &["serve", "--data-dir", dir],
        &[("RUNCELL_ADDR", "localhost:nope")],
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`addr`") && err.contains("RUNCELL_ADDR"),
        "{err}"
    );

    let out = runcell(&["serve", "--addr", "not-an-address"], &[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--addr"));
}

/// `runcell keys create`: the key is the last line of stdout.
fn make_key(data: &std::path::Path, name: &str) -> String {
    let data = data.to_str().unwrap();
    let out = runcell(&["keys", "create", "--name", name, "--data-dir", data], &[]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout.lines().last().unwrap().to_string()
}

#[test]
fn keys_are_made_listed_and_revoked_from_the_command_line() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().to_str().unwrap();
    let key = make_key(data.path(), "ci");
    assert!(key.starts_with("rc_") && key.len() == 46, "{key}");
    let again = runcell(&["keys", "create", "--name", "ci", "--data-dir", dir], &[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already named `ci`"));

    let (mut child, addr) = serve(data.path(), &[("RUNCELL_SANDBOX__POOL_SIZE", "0")]);
    let exchange = |key: &str| {
        let body = serde_json::json!({ "api_key": key }).to_string();
        http10(
            &addr,
            format!(
                "POST /v1/auth/token HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
    };
    let reply = exchange(&key);
    assert!(reply.starts_with("HTTP/1.0 200"), "{reply}");
    let token: serde_json::Value =
        serde_json::from_str(reply.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let token = token["access_token"].as_str().unwrap().to_string();
    let list = |token: &str| {
        http10(
            &addr,
            format!(
                "GET /v1/code_interpreter/sessions HTTP/1.0\r\nAuthorization: Bearer {token}\r\n\r\n"
            )
            .as_bytes(),
        )
    };
    assert!(list(&token).starts_with("HTTP/1.0 200"));

    let listed = runcell(&["keys", "list", "--data-dir", dir], &[]);
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert!(listed.contains("ci") && listed.contains("live"), "{listed}");
    assert!(!listed.contains(&key), "a key is shown once only");
    let revoked = runcell(&["keys", "revoke", "ci", "--data-dir", dir], &[]);
    assert!(revoked.status.success(), "{revoked:?}");

    // A running server refuses the revoked key's token at once.
    assert!(list(&token).starts_with("HTTP/1.0 401"), "{}", list(&token));
    assert!(exchange(&key).starts_with("HTTP/1.0 401"));
    assert!(stop(&mut child).success());
    let missing = runcell(&["keys", "revoke", "ci", "--data-dir", dir], &[]);
    assert!(!missing.status.success());
}

#[test]
fn serve_answers_and_stops_cleanly_on_sigterm() {
    let data = tempfile::tempdir().unwrap();
    let (mut child, addr) = serve(data.path(), &[]);

    let health = http10(&addr, b"GET /healthz HTTP/1.0\r\n\r\n");
    assert!(health.starts_with("HTTP/1.0 200"), "{health}");
    let status = stop(&mut child);
    assert!(status.success(), "{status:?}");
    assert!(data.path().is_dir());
}

#[test]
fn no_secret_of_the_server_reaches_the_jail() {
    let data = tempfile::tempdir().unwrap();
    let canary = format!("canary-{}", uuid::Uuid::new_v4().simple());
    let (mut child, addr) = serve(
        data.path(),
        &[
            ("RUNCELL_SANDBOX__POOL_SIZE", "0"),
            ("OPENAI_API_KEY", &canary),
            ("E2B_API_KEY", &canary),
            ("RUNCELL_TEST_SECRET", &canary),
            (
                "RUNCELL_AUTH__JWT_SECRET",
                &format!("{canary}-long-enough-for-a-secret"),
            ),
        ],
    );
    let key = make_key(data.path(), "jail-test");
    let code = r#"
import os, glob
seen = [repr(dict(os.environ))]
for path in glob.glob("/proc/*/environ") + glob.glob("/proc/*/cmdline"):
    try:
        seen.append(open(path, "rb").read().decode(errors="replace"))
    except OSError:
        pass
print("\n".join(seen))
"#;
    let body = serde_json::json!({"code": code, "language": "python"}).to_string();
    let request = format!(
        "POST /v1/code_interpreter/run HTTP/1.0\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let reply = http10(&addr, request.as_bytes());
    assert!(stop(&mut child).success());
    assert!(reply.starts_with("HTTP/1.0 200"), "{reply}");
    assert!(
        reply.contains("HOME"),
        "the jail's environment was not read: {reply}"
    );
    assert!(!reply.contains(&canary), "a secret reached the jail");
}
