use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A kernel's greeting: ZMTP 3.1, NULL, as a server.
fn peer_greeting() -> Vec<u8> {
    let mut g = greeting().to_vec();
    g[11] = 1;
    g[32] = 1;
    g
}

fn command(name: &[u8], body: &[u8]) -> Vec<u8> {
    let mut b = vec![name.len() as u8];
    b.extend_from_slice(name);
    b.extend_from_slice(body);
    let mut out = Vec::new();
    put_frame(&mut out, FLAG_COMMAND, &[&b]);
    out
}

fn peer_ready(socket_type: &[u8]) -> Vec<u8> {
    let mut body = vec![11];
    body.extend_from_slice(b"Socket-Type");
    body.extend_from_slice(&(socket_type.len() as u32).to_be_bytes());
    body.extend_from_slice(socket_type);
    command(b"READY", &body)
}

fn message(frames: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let more = if i + 1 < frames.len() { FLAG_MORE } else { 0 };
        put_frame(&mut out, more, &[*f]);
    }
    out
}

/// A frame header declaring `len` bytes (long form), and no body.
fn long_header(flags: u8, len: u64) -> Vec<u8> {
    let mut out = vec![flags | FLAG_LONG];
    out.extend_from_slice(&len.to_be_bytes());
    out
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// Everything the decoder makes of `bytes`, fed in one go.
fn decode_all(bytes: &[u8]) -> (Vec<Item>, Option<ZmtpError>) {
    let mut decoder = Decoder::default();
    decoder.buffer().extend_from_slice(bytes);
    let mut items = Vec::new();
    loop {
        match decoder.decode() {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return (items, None),
            Err(e) => return (items, Some(e)),
        }
    }
}

#[test]
fn the_decoder_takes_what_a_kernel_sends_and_refuses_the_rest() {
    let hello = cat(&[peer_greeting(), peer_ready(b"ROUTER")]);
    type Check = fn(&[Item], Option<&ZmtpError>) -> bool;
    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        (
            "greeting, READY, a message",
            cat(&[
                hello.clone(),
                message(&[b"<IDS|MSG>", b"sig", &[b'x'; 300]]),
            ]),
            |items, e| {
                e.is_none()
                    && items.len() == 3
                    && matches!(&items[2], Item::Message(f) if f.len() == 3 && f[2].len() == 300)
            },
        ),
        (
            "a frame of 2^44 bytes",
            cat(&[hello.clone(), long_header(0, 1 << 44)]),
            |_, e| matches!(e, Some(ZmtpError::FrameTooLarge { len }) if *len == 1 << 44),
        ),
        (
            "a frame of u64::MAX bytes",
            cat(&[hello.clone(), long_header(FLAG_MORE, u64::MAX)]),
            |_, e| matches!(e, Some(ZmtpError::FrameTooLarge { .. })),
        ),
        (
            "one byte over the frame limit is read past, then the next message kept",
            {
                let mut bytes = hello.clone();
                bytes.extend(long_header(0, MAX_FRAME_BYTES as u64 + 1));
                bytes.extend(vec![7u8; MAX_FRAME_BYTES + 1]);
                bytes.extend(message(&[b"next"]));
                bytes
            },
            |items, e| {
                e.is_none()
                    && matches!(&items[2], Item::Dropped { bytes } if *bytes == MAX_FRAME_BYTES as u64 + 1)
                    && matches!(&items[3], Item::Message(f) if f[0][..] == b"next"[..])
            },
        ),
        (
            "a frame beyond what is read past",
            cat(&[hello.clone(), long_header(0, MAX_SKIPPED_BYTES + 1)]),
            |_, e| matches!(e, Some(ZmtpError::FrameTooLarge { .. })),
        ),
        (
            "too many frames",
            cat(&[hello.clone(), message(&vec![&b"f"[..]; MAX_FRAMES + 1])]),
            |_, e| matches!(e, Some(ZmtpError::TooManyFrames)),
        ),
        (
            "a message over the total limit is read past whole",
            {
                let mut bytes = hello.clone();
                bytes.extend([FLAG_MORE, 3]);
                bytes.extend(b"hdr");
                bytes.extend(long_header(FLAG_MORE, MAX_FRAME_BYTES as u64));
                bytes.extend(vec![0u8; MAX_FRAME_BYTES]);
                bytes.extend(long_header(FLAG_MORE, MAX_FRAME_BYTES as u64));
                bytes.extend(vec![0u8; MAX_FRAME_BYTES]);
                bytes.extend([0, 4]);
                bytes.extend(b"tail");
                bytes
            },
            |items, e| {
                e.is_none()
                    && items.len() == 3
                    && matches!(&items[2], Item::Dropped { bytes } if *bytes == 3 + 2 * MAX_FRAME_BYTES as u64 + 4)
            },
        ),
        (
            "a message declaring more in all than is read past",
            {
                let mut bytes = hello.clone();
                bytes.extend(long_header(FLAG_MORE, MAX_FRAME_BYTES as u64 + 1));
                bytes.extend(vec![0u8; MAX_FRAME_BYTES + 1]);
                bytes.extend(long_header(0, MAX_SKIPPED_BYTES));
                bytes
            },
            |_, e| matches!(e, Some(ZmtpError::MessageTooLarge)),
        ),
        (
            "a command inside a message being read past",
            {
                let mut bytes = hello.clone();
                bytes.extend(long_header(FLAG_MORE, MAX_FRAME_BYTES as u64 + 1));
                bytes.extend(vec![0u8; MAX_FRAME_BYTES + 1]);
                bytes.extend(command(b"PING", b""));
                bytes
            },
            |_, e| matches!(e, Some(ZmtpError::Command(_))),
        ),
        (
            "an oversized command",
            cat(&[hello.clone(), long_header(FLAG_COMMAND, 1 << 20)]),
            |_, e| matches!(e, Some(ZmtpError::CommandTooLarge { .. })),
        ),
        (
            "a command with the MORE flag",
            cat(&[hello.clone(), vec![FLAG_COMMAND | FLAG_MORE, 0]]),
            |_, e| matches!(e, Some(ZmtpError::Flags(_))),
        ),
        (
            "reserved flag bits",
            cat(&[hello.clone(), vec![0x80, 0]]),
            |_, e| matches!(e, Some(ZmtpError::Flags(0x80))),
        ),
        (
            "a command inside a message",
            cat(&[hello.clone(), vec![FLAG_MORE, 0], command(b"PING", b"")]),
            |_, e| matches!(e, Some(ZmtpError::Command(_))),
        ),
        (
            "an empty command",
            cat(&[hello.clone(), vec![FLAG_COMMAND, 0]]),
            |_, e| matches!(e, Some(ZmtpError::Command(_))),
        ),
        (
            "a command name longer than its body",
            cat(&[hello.clone(), vec![FLAG_COMMAND, 2, 9, b'x']]),
            |_, e| matches!(e, Some(ZmtpError::Command(_))),
        ),
        (
            "truncated: half a frame waits for more",
            cat(&[hello, vec![0, 10, b'a', b'b']]),
            |items, e| e.is_none() && items.len() == 2,
        ),
        (
            "not ZMTP at all",
            b"HTTP/1.1 200 OK\r\n".to_vec(),
            |_, e| matches!(e, Some(ZmtpError::Greeting(_))),
        ),
        (
            "ZMTP 2",
            {
                let mut g = peer_greeting();
                g[10] = 2;
                g
            },
            |_, e| matches!(e, Some(ZmtpError::Version(2, _))),
        ),
        (
            "the CURVE mechanism",
            {
                let mut g = peer_greeting();
                g[12..17].copy_from_slice(b"CURVE");
                g
            },
            |_, e| matches!(e, Some(ZmtpError::Mechanism(m)) if m == "CURVE"),
        ),
        (
            "NULL followed by junk",
            {
                let mut g = peer_greeting();
                g[20] = b'!';
                g
            },
            |_, e| matches!(e, Some(ZmtpError::Mechanism(_))),
        ),
    ];
    for (name, bytes, check) in cases {
        let (items, error) = decode_all(&bytes);
        assert!(check(&items, error.as_ref()), "{name}: {items:?} {error:?}");
    }
}

#[test]
fn ready_properties_are_checked_against_the_body() {
    assert_eq!(
        ready_properties(b"\x0bSocket-Type\x00\x00\x00\x03PUB").unwrap(),
        vec![(&b"Socket-Type"[..], &b"PUB"[..])]
    );
    for bad in [
        &b"\x0bSocket"[..],
        b"\x0bSocket-Type\x00\x00",
        b"\x0bSocket-Type\xff\xff\xff\xffPUB",
    ] {
        assert!(ready_properties(bad).is_err(), "{bad:?}");
    }
}

proptest! {
    /// Whatever a peer sends, in whatever pieces: no panic, and the buffer
    /// stays within its cap.
    #[test]
    fn any_bytes_in_any_pieces_are_safe(
        prefix in prop_oneof![Just(Vec::new()), Just(cat(&[peer_greeting(), peer_ready(b"ROUTER")]))],
        bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        cuts in proptest::collection::vec(1usize..700, 1..16),
        long_frames in proptest::collection::vec(any::<u64>(), 0..3),
    ) {
        let mut stream = prefix;
        stream.extend_from_slice(&bytes);
        for len in long_frames {
            stream.extend(long_header(0, len));
            stream.extend_from_slice(&bytes);
        }
        let mut decoder = Decoder::default();
        let mut rest = &stream[..];
        let mut cut = cuts.iter().cycle();
        'feed: while !rest.is_empty() {
            let n = (*cut.next().unwrap_or(&1)).min(rest.len()).min(decoder.room());
            prop_assert!(n > 0, "the decoder has no room");
            decoder.buffer().extend_from_slice(&rest[..n]);
            rest = &rest[n..];
            prop_assert!(decoder.buffered() <= BUFFER_CAP);
            loop {
                match decoder.decode() {
                    Ok(Some(Item::Message(frames))) => {
                        prop_assert!(frames.len() <= MAX_FRAMES);
                        prop_assert!(frames.iter().map(Bytes::len).sum::<usize>() <= MAX_MESSAGE_BYTES);
                    }
                    Ok(Some(Item::Command(c))) => prop_assert!(c.body.len() <= MAX_COMMAND_BYTES),
                    Ok(Some(Item::Dropped { bytes })) => prop_assert!(bytes <= MAX_SKIPPED_BYTES),
                    Ok(Some(Item::Greeting)) => {}
                    Ok(None) => break,
                    Err(_) => break 'feed,
                }
            }
        }
    }
}

/// A fake kernel on a unix socket in a temp dir, doing `script` with the
/// accepted connection.
async fn hostile_peer<F, Fut>(script: F) -> (tempfile::TempDir, PathBuf)
where
    F: FnOnce(UnixStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k-1");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    tokio::spawn(async move {
        if let Ok((stream, _)) = listener.accept().await {
            script(stream).await;
        }
    });
    (dir, path)
}

fn own_uid() -> u32 {
    std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap())
}

#[tokio::test]
async fn a_peer_declaring_a_huge_frame_gets_an_error_at_once() {
    let (_dir, path) = hostile_peer(|mut stream| async move {
        let mut greeting = [0u8; 64];
        let _ = stream.read_exact(&mut greeting).await;
        let mut bytes = cat(&[peer_greeting(), peer_ready(b"ROUTER")]);
        bytes.extend(long_header(0, 1 << 44));
        let _ = stream.write_all(&bytes).await;
        // Stay connected: the client must not wait for the body.
        tokio::time::sleep(Duration::from_secs(30)).await;
    })
    .await;
    let mut connection =
        Connection::connect(&path, SocketType::Dealer, Some(&b"me"[..]), own_uid())
            .await
            .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(2), connection.recv())
        .await
        .expect("the client waited for a body it must refuse");
    assert!(
        matches!(result, Err(ZmtpError::FrameTooLarge { len }) if len == 1 << 44),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_client_talks_to_a_well_behaved_peer() {
    let (_dir, path) = hostile_peer(|mut stream| async move {
        let mut hello = [0u8; 64];
        stream.read_exact(&mut hello).await.unwrap();
        assert_eq!(&hello[..], &greeting()[..]);
        let ready = ready(SocketType::Sub, None);
        let mut theirs = vec![0u8; ready.len()];
        stream.read_exact(&mut theirs).await.unwrap();
        assert_eq!(theirs, ready);
        let mut bytes = cat(&[peer_greeting(), peer_ready(b"XPUB")]);
        bytes.extend(command(b"PING", b"\x00\x01"));
        bytes.extend(message(&[b"topic", b"<IDS|MSG>", &[b'y'; 1000]]));
        stream.write_all(&bytes).await.unwrap();
        let mut subscription = [0u8; 3];
        stream.read_exact(&mut subscription).await.unwrap();
        assert_eq!(subscription, [0, 1, 1]);
        let mut sent = [0u8; 2 + 3 + 9 + 300];
        stream.read_exact(&mut sent).await.unwrap();
        assert_eq!(&sent[..5], &[FLAG_MORE, 3, b'a', b'b', b'c']);
        assert_eq!(sent[5], FLAG_LONG);
    })
    .await;
    let mut connection = Connection::connect(&path, SocketType::Sub, None, own_uid())
        .await
        .unwrap();
    connection.subscribe(b"").await.unwrap();
    let frames = connection.recv().await.unwrap();
    assert_eq!(frames.len(), 3);
    assert_eq!(&frames[0][..], b"topic");
    assert_eq!(frames[2].len(), 1000);
    connection.send(&[b"abc", &[b'z'; 300]]).await.unwrap();
    // The peer hangs up after reading: a clean close between messages.
    assert!(matches!(connection.recv().await, Err(ZmtpError::Closed)));
}

#[tokio::test]
async fn peers_that_are_not_kernels_are_refused() {
    type Script = fn(Vec<u8>) -> Vec<u8>;
    type Check = fn(&ZmtpError) -> bool;
    let cases: Vec<(&str, Script, Check)> = vec![
        (
            "a PUB for a DEALER",
            |_| cat(&[peer_greeting(), peer_ready(b"PUB")]),
            |e| matches!(e, ZmtpError::Peer(_)),
        ),
        (
            "an ERROR instead of READY",
            |_| cat(&[peer_greeting(), command(b"ERROR", b"\x03bad")]),
            |e| matches!(e, ZmtpError::Refused(r) if r == "bad"),
        ),
        (
            "a message instead of READY",
            |_| cat(&[peer_greeting(), message(&[b"x"])]),
            |e| matches!(e, ZmtpError::Command(_)),
        ),
        (
            "a hang-up mid-greeting",
            |_| peer_greeting()[..20].to_vec(),
            |e| matches!(e, ZmtpError::Truncated),
        ),
    ];
    for (name, script, check) in cases {
        let (_dir, path) = hostile_peer(move |mut stream| async move {
            // All of the client's hello, so that closing sends no reset.
            let mut hello = vec![0u8; 64 + ready(SocketType::Dealer, Some(&b"me"[..])).len()];
            let _ = stream.read_exact(&mut hello).await;
            let _ = stream.write_all(&script(hello)).await;
        })
        .await;
        let result = tokio::time::timeout(
            Duration::from_secs(2),
            Connection::connect(&path, SocketType::Dealer, Some(&b"me"[..]), own_uid()),
        )
        .await
        .expect(name);
        match result {
            Ok(_) => panic!("{name}: connected"),
            Err(e) => assert!(check(&e), "{name}: {e:?}"),
        }
    }
    // A socket served by someone else is refused before a byte is sent.
    let (_dir, path) = hostile_peer(|_| async {}).await;
    let result = Connection::connect(&path, SocketType::Dealer, None, own_uid() + 1).await;
    assert!(matches!(result, Err(ZmtpError::Peer(_))), "{result:?}");
}

#[tokio::test]
async fn a_socket_bound_but_not_yet_listening_is_tried_again() {
    // A kernel's socket file exists from bind() on, and refuses until
    // listen(): a stale socket file refuses the same way.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k-1");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let late = path.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::fs::remove_file(&late).unwrap();
        let listener = tokio::net::UnixListener::bind(&late).unwrap();
        if let Ok((mut stream, _)) = listener.accept().await {
            let mut hello = vec![0u8; 64 + ready(SocketType::Dealer, None).len()];
            let _ = stream.read_exact(&mut hello).await;
            let _ = stream
                .write_all(&cat(&[peer_greeting(), peer_ready(b"ROUTER")]))
                .await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
    let connected = tokio::time::timeout(
        Duration::from_secs(5),
        Connection::connect(&path, SocketType::Dealer, None, own_uid()),
    )
    .await
    .expect("the connection was never made");
    assert!(connected.is_ok(), "{connected:?}");
}
