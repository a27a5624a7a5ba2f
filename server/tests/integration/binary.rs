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

#[test]
fn serve_answers_and_stops_cleanly_on_sigterm() {
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(RUNCELL)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .env("RUNCELL_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "runcell exited early"
        );
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.trim().to_string();
        }
    };

    let health = std::net::TcpStream::connect(&addr)
        .and_then(|mut stream| {
            use std::io::{Read, Write};
            stream.write_all(b"GET /healthz HTTP/1.0\r\n\r\n")?;
            let mut reply = String::new();
            stream.read_to_string(&mut reply)?;
            Ok(reply)
        })
        .unwrap();
    assert!(health.starts_with("HTTP/1.0 200"), "{health}");

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "runcell did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    assert!(data.path().is_dir());
}

#[test]
fn no_secret_of_the_server_reaches_the_jail() {
    let data = tempfile::tempdir().unwrap();
    let canary = format!("canary-{}", uuid::Uuid::new_v4().simple());
    let mut child = Command::new(RUNCELL)
        .args(["serve", "--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .env("RUNCELL_LOG", "info")
        .env("RUNCELL_SANDBOX__POOL_SIZE", "0")
        .env("OPENAI_API_KEY", &canary)
        .env("E2B_API_KEY", &canary)
        .env("RUNCELL_TEST_SECRET", &canary)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "runcell exited early"
        );
        if let Some(rest) = line.split("listening on http://").nth(1) {
            break rest.trim().to_string();
        }
    };
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
        "POST /v1/code_interpreter/run HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let reply = std::net::TcpStream::connect(&addr)
        .and_then(|mut stream| {
            use std::io::{Read, Write};
            stream.write_all(request.as_bytes())?;
            let mut reply = String::new();
            stream.read_to_string(&mut reply)?;
            Ok(reply)
        })
        .unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    assert!(reply.starts_with("HTTP/1.0 200"), "{reply}");
    assert!(
        reply.contains("HOME"),
        "the jail's environment was not read: {reply}"
    );
    assert!(!reply.contains(&canary), "a secret reached the jail");
}
