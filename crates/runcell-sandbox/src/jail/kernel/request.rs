//! The questions a front end asks a kernel without running anything
//! (completion, inspection, whether code is complete, history): sent on the
//! kernel's shell socket, the reply passed on as the JSON it is, bounded.

use std::time::Duration;

use jupyter_protocol::{
    CompleteRequest, HistoryRequest, InspectRequest, IsCompleteRequest, JupyterMessageContent,
};

use super::super::wire::WireError;
use super::{JailKernel, dropped, internal};
use crate::{HistoryAccess, KernelRequest, MAX_KERNEL_REPLY_BYTES, SandboxError};

/// How long a kernel gets to answer a request that runs no code
/// (completion, inspection…) once it was sent.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
impl JailKernel {
    /// Asks the kernel a question that runs no code and gives its reply's
    /// content, a JSON object of at most [`MAX_KERNEL_REPLY_BYTES`]. Replies
    /// to earlier requests still on the socket are read past. A reply
    /// that is not the kind asked for, too big or unreadable is refused;
    /// a broken wire is remembered, so the next execution replaces the
    /// kernel.
    pub async fn request(
        &mut self,
        request: KernelRequest,
    ) -> Result<serde_json::Map<String, serde_json::Value>, SandboxError> {
        if let Some(broken) = &self.broken {
            return Err(internal("the kernel broke the wire protocol", broken));
        }
        let reply_type = request.msg_type().replace("_request", "_reply");
        let message = self.message(request_content(request));
        let id = message.header.msg_id.clone();
        self.send_shell(&message)
            .await
            .map_err(|e| internal("cannot reach the kernel", &e))?;
        let reply = tokio::time::timeout(REQUEST_TIMEOUT, async {
            loop {
                match self.shell.read_raw().await {
                    Ok(reply) if reply.parent_header.as_ref().is_some_and(|h| h.msg_id == id) => {
                        break Ok(reply);
                    }
                    Ok(_) => {}
                    // Too big to keep: read past, and refused.
                    Err(e) if let Some(bytes) = dropped(&e) => {
                        break Err(internal(
                            "the kernel's reply is too big",
                            &format!("{bytes} bytes"),
                        ));
                    }
                    // Read whole but not the JSON of its type: the wire is
                    // still in step, only this reply is refused.
                    Err(e @ WireError::Json { .. }) => {
                        break Err(internal("the kernel's reply is unreadable", &e));
                    }
                    Err(e) => {
                        let error = internal("the kernel's wire broke", &e);
                        self.broke(e);
                        break Err(error);
                    }
                }
            }
        })
        .await
        .map_err(|_| internal("the kernel did not answer", &"timed out"))??;
        if reply.header.msg_type != reply_type {
            return Err(internal(
                "the kernel answered with another message",
                &reply.header.msg_type,
            ));
        }
        reply_object(reply.content, reply.content_bytes)
    }
}

/// The message a [`KernelRequest`] is sent as.
fn request_content(request: KernelRequest) -> JupyterMessageContent {
    match request {
        KernelRequest::Complete { code, cursor_pos } => CompleteRequest { code, cursor_pos }.into(),
        KernelRequest::Inspect {
            code,
            cursor_pos,
            detail_level,
        } => InspectRequest {
            code,
            cursor_pos,
            detail_level: Some(detail_level.min(1).into()),
        }
        .into(),
        KernelRequest::IsComplete { code } => IsCompleteRequest { code }.into(),
        KernelRequest::History(query) => {
            let (output, raw) = (query.output, query.raw);
            match query.access {
                HistoryAccess::Tail { n } => HistoryRequest::Tail { n, output, raw },
                HistoryAccess::Range {
                    session,
                    start,
                    stop,
                } => HistoryRequest::Range {
                    session,
                    start,
                    stop,
                    output,
                    raw,
                },
                HistoryAccess::Search { pattern, unique, n } => HistoryRequest::Search {
                    pattern,
                    unique,
                    output,
                    raw,
                    n,
                },
            }
            .into()
        }
    }
}

/// A reply's content, `bytes` long as it came, as the JSON object passed
/// on, within [`MAX_KERNEL_REPLY_BYTES`].
fn reply_object(
    content: serde_json::Value,
    bytes: usize,
) -> Result<serde_json::Map<String, serde_json::Value>, SandboxError> {
    if bytes > MAX_KERNEL_REPLY_BYTES {
        return Err(internal(
            "the kernel's reply is too big",
            &format!("{bytes} bytes, more than {MAX_KERNEL_REPLY_BYTES}"),
        ));
    }
    match content {
        serde_json::Value::Object(object) => Ok(object),
        _ => Err(internal("the kernel's reply", &"not a JSON object")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_is_passed_on_only_as_a_bounded_object() {
        let object = serde_json::json!({"status": "ok", "history": [[1, 2, ["a", null]]]});
        assert_eq!(
            reply_object(object.clone(), 40).map(serde_json::Value::Object),
            Ok(object.clone())
        );
        assert_eq!(
            reply_object(object, MAX_KERNEL_REPLY_BYTES + 1).map_err(|e| e.to_string()),
            Err(format!(
                "the sandbox failed: the kernel's reply is too big: {} bytes, more than {MAX_KERNEL_REPLY_BYTES}",
                MAX_KERNEL_REPLY_BYTES + 1
            ))
        );
        for not_object in [
            serde_json::json!([1]),
            serde_json::json!("ok"),
            serde_json::Value::Null,
        ] {
            assert_eq!(
                reply_object(not_object, 4).map_err(|e| e.to_string()),
                Err("the sandbox failed: the kernel's reply: not a JSON object".to_string())
            );
        }
    }
}
