//! Integration tests: the real server on `127.0.0.1:0`, driven over HTTP and
//! WebSocket as a page would; and the real `runcell` binary.

mod binary;
mod support;
mod web;
mod websocket;
