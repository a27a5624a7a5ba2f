//! The Jupyter wire format over a [`zmtp::Connection`]: a message is
//! `[identities…, "<IDS|MSG>", signature, header, parent_header, metadata,
//! content, buffers…]`, signed with HMAC-SHA256 over the four JSON parts
//! (the key from the connection file). Every message read is verified (in
//! constant time) before its JSON is parsed; anything else is a
//! [`WireError`] and the kernel is replaced.

use std::path::Path;

use bytes::Bytes;
use hmac::{Hmac, Mac};
use jupyter_protocol::{Header, JupyterMessage, JupyterMessageContent};
use sha2_010::Sha256;

use super::zmtp::{self, SocketType, ZmtpError};

const DELIMITER: &[u8] = b"<IDS|MSG>";
/// The length of an HMAC-SHA256 signature in hex.
const SIGNATURE_HEX: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error(transparent)]
    Zmtp(#[from] ZmtpError),
    #[error("a message without the <IDS|MSG> delimiter")]
    NoDelimiter,
    #[error("a message with {0} parts after the delimiter (at least 5 are needed)")]
    MissingParts(usize),
    #[error("a message with a bad signature")]
    BadSignature,
    #[error("a message with bad JSON in its {part}: {source}")]
    Json {
        part: &'static str,
        source: serde_json::Error,
    },
    #[error("cannot encode a message: {0}")]
    Encode(serde_json::Error),
}

/// Signs and verifies with the connection's key.
#[derive(Clone)]
pub struct Signer {
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signer(..)")
    }
}

impl Signer {
    pub fn new(key: &[u8]) -> Self {
        // HMAC takes keys of any length; this cannot fail.
        let mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        Self { mac }
    }

    fn mac_of(&self, parts: &[&[u8]]) -> Hmac<Sha256> {
        let mut mac = self.mac.clone();
        for part in parts {
            mac.update(part);
        }
        mac
    }

    /// The signature of the four JSON parts, in hex.
    pub fn sign(&self, parts: &[&[u8]]) -> String {
        hex::encode(self.mac_of(parts).finalize().into_bytes())
    }

    /// Checks a hex signature of the four JSON parts, in constant time.
    pub fn verify(&self, parts: &[&[u8]], signature: &[u8]) -> Result<(), WireError> {
        let mut expected = [0u8; SIGNATURE_HEX / 2];
        if signature.len() != SIGNATURE_HEX
            || hex::decode_to_slice(signature, &mut expected).is_err()
        {
            return Err(WireError::BadSignature);
        }
        self.mac_of(parts)
            .verify_slice(&expected)
            .map_err(|_| WireError::BadSignature)
    }
}

/// A message as frames, signed.
pub fn encode(message: &JupyterMessage, signer: &Signer) -> Result<Vec<Vec<u8>>, WireError> {
    fn json(value: &impl serde::Serialize) -> Result<Vec<u8>, WireError> {
        serde_json::to_vec(value).map_err(WireError::Encode)
    }
    let header = json(&message.header)?;
    let parent = match &message.parent_header {
        Some(parent) => json(parent)?,
        None => b"{}".to_vec(),
    };
    let metadata = json(&message.metadata)?;
    let content = json(&message.content)?;
    let signature = signer.sign(&[&header, &parent, &metadata, &content]);
    let mut frames: Vec<Vec<u8>> = message.zmq_identities.iter().map(|i| i.to_vec()).collect();
    frames.extend([
        DELIMITER.to_vec(),
        signature.into_bytes(),
        header,
        parent,
        metadata,
        content,
    ]);
    frames.extend(message.buffers.iter().map(|b| b.to_vec()));
    Ok(frames)
}

/// A message whose content is kept as the JSON the kernel sent, not read
/// into its type: a reply passed on as the kernel gave it.
#[derive(Debug)]
pub struct RawMessage {
    pub header: Header,
    pub parent_header: Option<Header>,
    pub content: serde_json::Value,
    /// The content's size as it came, in bytes.
    pub content_bytes: usize,
}

/// Frames as a message with its content's JSON as it is, once their
/// signature is verified.
pub fn decode_raw(frames: Vec<Bytes>, signer: &Signer) -> Result<RawMessage, WireError> {
    let parts = verified(frames, signer)?;
    let json = |part: &'static str| move |source| WireError::Json { part, source };
    Ok(RawMessage {
        header: serde_json::from_slice(&parts.header).map_err(json("header"))?,
        parent_header: parent_header(&parts.parent)?,
        content: serde_json::from_slice(&parts.content).map_err(json("content"))?,
        content_bytes: parts.content.len(),
    })
}

/// A message's parts after the delimiter, its signature verified.
struct Parts {
    identities: Vec<Bytes>,
    header: Bytes,
    parent: Bytes,
    metadata: Bytes,
    content: Bytes,
    buffers: Vec<Bytes>,
}

fn verified(mut frames: Vec<Bytes>, signer: &Signer) -> Result<Parts, WireError> {
    let delimiter = frames
        .iter()
        .position(|f| &f[..] == DELIMITER)
        .ok_or(WireError::NoDelimiter)?;
    let after = frames.len() - delimiter - 1;
    if after < 5 {
        return Err(WireError::MissingParts(after));
    }
    let mut rest = frames.split_off(delimiter);
    let identities = frames;
    let buffers = rest.split_off(6);
    let [_, signature, header, parent, metadata, content] = <[Bytes; 6]>::try_from(rest)
        .map_err(|rest| WireError::MissingParts(rest.len().saturating_sub(1)))?;
    signer.verify(&[&header, &parent, &metadata, &content], &signature)?;
    Ok(Parts {
        identities,
        header,
        parent,
        metadata,
        content,
        buffers,
    })
}

fn parent_header(parent: &[u8]) -> Result<Option<Header>, WireError> {
    let json = |part: &'static str| move |source| WireError::Json { part, source };
    let parent: serde_json::Value =
        serde_json::from_slice(parent).map_err(json("parent header"))?;
    Ok(match parent {
        serde_json::Value::Object(map) if map.is_empty() => None,
        serde_json::Value::Null => None,
        other => Some(serde_json::from_value::<Header>(other).map_err(json("parent header"))?),
    })
}

/// Frames as a message, once their signature is verified.
pub fn decode(frames: Vec<Bytes>, signer: &Signer) -> Result<JupyterMessage, WireError> {
    let Parts {
        identities,
        header,
        parent,
        metadata,
        content,
        buffers,
    } = verified(frames, signer)?;
    let json = |part: &'static str| move |source| WireError::Json { part, source };
    let header: Header = serde_json::from_slice(&header).map_err(json("header"))?;
    let parent_header = parent_header(&parent)?;
    let metadata = serde_json::from_slice(&metadata).map_err(json("metadata"))?;
    let content: serde_json::Value = serde_json::from_slice(&content).map_err(json("content"))?;
    let content = JupyterMessageContent::from_type_and_content(&header.msg_type, content)
        .map_err(json("content"))?;
    Ok(JupyterMessage {
        zmq_identities: identities,
        header,
        parent_header,
        metadata,
        content,
        buffers,
        channel: None,
    })
}

/// One of a kernel's channels: a ZMTP connection that speaks Jupyter.
#[derive(Debug)]
pub struct SocketChannel {
    connection: zmtp::Connection,
    signer: Signer,
}

impl SocketChannel {
    /// Connects to the kernel socket at `path` (served by `peer_uid`).
    pub async fn connect(
        path: &Path,
        kind: SocketType,
        identity: Option<&[u8]>,
        peer_uid: u32,
        signer: Signer,
    ) -> Result<Self, WireError> {
        let mut connection = zmtp::Connection::connect(path, kind, identity, peer_uid).await?;
        if kind == SocketType::Sub {
            connection.subscribe(b"").await?;
        }
        Ok(Self { connection, signer })
    }

    pub async fn send(&mut self, message: &JupyterMessage) -> Result<(), WireError> {
        let frames = encode(message, &self.signer)?;
        let frames: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        Ok(self.connection.send(&frames).await?)
    }

    /// The next message, verified and parsed. Cancel-safe.
    pub async fn read(&mut self) -> Result<JupyterMessage, WireError> {
        let frames = self.connection.recv().await?;
        decode(frames, &self.signer)
    }

    /// The next message, verified, its content's JSON as it came.
    /// Cancel-safe.
    pub async fn read_raw(&mut self) -> Result<RawMessage, WireError> {
        let frames = self.connection.recv().await?;
        decode_raw(frames, &self.signer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jupyter_protocol::{ExecuteRequest, KernelInfoRequest};

    fn signer() -> Signer {
        Signer::new(b"a key")
    }

    fn frames(message: &JupyterMessage) -> Vec<Bytes> {
        encode(message, &signer())
            .unwrap()
            .into_iter()
            .map(Bytes::from)
            .collect()
    }

    #[test]
    fn a_message_survives_encoding_and_decoding() {
        let request = JupyterMessage::new(ExecuteRequest::new("1 + 1".into()), None);
        let reply = JupyterMessage::new(KernelInfoRequest {}, Some(&request))
            .with_zmq_identities(vec![Bytes::from_static(b"peer")]);
        let decoded = decode(frames(&reply), &signer()).unwrap();
        assert_eq!(decoded.header.msg_id, reply.header.msg_id);
        assert_eq!(
            decoded.parent_header.as_ref().map(|h| h.msg_id.as_str()),
            Some(request.header.msg_id.as_str())
        );
        assert_eq!(decoded.zmq_identities, vec![Bytes::from_static(b"peer")]);
        assert_eq!(decoded.message_type(), "kernel_info_request");
        let decoded = decode(frames(&request), &signer()).unwrap();
        assert!(decoded.parent_header.is_none());
        match decoded.content {
            JupyterMessageContent::ExecuteRequest(r) => assert_eq!(r.code, "1 + 1"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_messages_are_refused() {
        let good = frames(&JupyterMessage::new(KernelInfoRequest {}, None));
        let tampered = |i: usize, with: &[u8]| {
            let mut f = good.clone();
            f[i] = Bytes::copy_from_slice(with);
            f
        };
        type Check = fn(&WireError) -> bool;
        let cases: Vec<(&str, Vec<Bytes>, Check)> = vec![
            ("no delimiter", good[1..].to_vec(), |e| {
                matches!(e, WireError::NoDelimiter)
            }),
            ("too few parts", good[..5].to_vec(), |e| {
                matches!(e, WireError::MissingParts(4))
            }),
            ("wrong signature", tampered(1, &[b'0'; 64]), |e| {
                matches!(e, WireError::BadSignature)
            }),
            ("short signature", tampered(1, b"abc"), |e| {
                matches!(e, WireError::BadSignature)
            }),
            ("not hex", tampered(1, &[b'z'; 64]), |e| {
                matches!(e, WireError::BadSignature)
            }),
            ("content changed", tampered(5, b"{\"x\": 1}"), |e| {
                matches!(e, WireError::BadSignature)
            }),
        ];
        for (name, frames, expect) in cases {
            let error = decode(frames, &signer()).expect_err(name);
            assert!(expect(&error), "{name}: {error:?}");
        }
        // Signed but not JSON: refused after the signature checks out.
        let parts: [&[u8]; 4] = [b"{", b"{}", b"{}", b"{}"];
        let signature = signer().sign(&parts);
        let mut f = vec![Bytes::from_static(DELIMITER), Bytes::from(signature)];
        f.extend(parts.iter().map(|p| Bytes::copy_from_slice(p)));
        let error = decode(f, &signer()).unwrap_err();
        assert!(
            matches!(error, WireError::Json { part: "header", .. }),
            "{error:?}"
        );
        // Another key's signature.
        let error = decode(good, &Signer::new(b"another key")).unwrap_err();
        assert!(matches!(error, WireError::BadSignature), "{error:?}");
    }

    #[test]
    fn signatures_match_jupyter_client() {
        // hmac.new(b"key", b"abcd", hashlib.sha256).hexdigest()
        let signature = Signer::new(b"key").sign(&[b"a", b"b", b"c", b"d"]);
        assert_eq!(
            signature,
            "2a31ec0ee8d878c9eece9fb0df79b3b90b2256240163aa5ee50d176d3d1121f8"
        );
        assert_eq!(signature.len(), 64);
    }
}
