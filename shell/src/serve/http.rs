//! Just enough HTTP/1.1 for one browser on this machine: a request is read whole (its line,
//! headers and a body of at most `MAX_BODY`), one response is written and the connection
//! closed. Query strings are percent-decoded here; anything malformed is answered 400 with
//! what was wrong, and nothing a client sends can make the server stop.

use std::collections::HashMap;

use std::io::{Read, Write};
use std::net::TcpStream;

/// Largest head (request line and headers) read.
const MAX_HEAD: usize = 64 << 10;
/// Largest body read (a SQL query).
const MAX_BODY: usize = 1 << 20;

/// One request.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub body: String,
}

impl Request {
    /// Query parameter `name`, if given.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query.get(name).map(String::as_str)
    }
}

/// One response: a status, a content type and a body.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: std::sync::Arc<Vec<u8>>,
}

impl Response {
    pub fn json(body: std::sync::Arc<Vec<u8>>) -> Self {
        Response { status: 200, content_type: "application/json", body }
    }

    /// An error as JSON `{"error": message}` (the page shows the message).
    pub fn error(status: u16, message: &str) -> Self {
        let body = serde_json::json!({ "error": message }).to_string().into_bytes();
        Response { status, content_type: "application/json", body: std::sync::Arc::new(body) }
    }

    pub fn page(html: String) -> Self {
        Response { status: 200, content_type: "text/html; charset=utf-8", body: std::sync::Arc::new(html.into_bytes()) }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        408 => "Request Timeout",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

/// Read one request from `stream`; Err is the response to send instead (a malformed request).
pub fn read_request(stream: &mut TcpStream) -> Result<Option<Request>, Response> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buf.len() > MAX_HEAD {
            return Err(Response::error(413, "the request's headers are longer than 64 KiB"));
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => return Err(Response::error(400, "the request ended before its headers did")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) if buf.is_empty() => return Ok(None),
            Err(e) => return Err(Response::error(408, &format!("the request's headers did not arrive: {e}"))),
        }
    };
    let head = std::str::from_utf8(&buf[..head_end])
        .map_err(|_| Response::error(400, "the request's headers are not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let line = lines.next().unwrap_or_default();
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Response::error(400, &format!("expected 'METHOD /path HTTP/1.1', got '{line}'")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(Response::error(400, &format!("expected HTTP/1.x, got '{version}'")));
    }
    let mut length = 0usize;
    for header in lines {
        if let Some((name, value)) = header.split_once(':')
            && name.trim().eq_ignore_ascii_case("content-length")
        {
            length = value
                .trim()
                .parse()
                .map_err(|_| Response::error(400, &format!("Content-Length is not a number: '{}'", value.trim())))?;
        }
    }
    if length > MAX_BODY {
        return Err(Response::error(413, "the request's body is longer than 1 MiB"));
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; (length - body.len()).min(64 << 10)];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Err(Response::error(400, "the request ended before its body did")),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(length);
    let body = String::from_utf8(body).map_err(|_| Response::error(400, "the request's body is not UTF-8"))?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut params = HashMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        params.insert(decode(k)?, decode(v)?);
    }
    Ok(Some(Request { method: method.to_string(), path: decode(path)?, query: params, body }))
}

/// Percent-decoding of a URL component ('+' is a space).
fn decode(text: &str) -> Result<String, Response> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = text.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
                let Some(b) = hex else {
                    return Err(Response::error(400, &format!("a bad escape in the URL at byte {i} of '{text}'")));
                };
                out.push(b);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| Response::error(400, &format!("the URL component '{text}' is not UTF-8")))
}

/// Write `response` and close.
pub fn write_response(stream: &mut TcpStream, response: &Response) {
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    // A client that went away is not an error of the server's.
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&response.body);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_percent_decoded_and_bad_escapes_named() {
        assert_eq!(decode("a%20b+c%2Fd").unwrap(), "a b c/d");
        let e = decode("x%2").unwrap_err();
        assert_eq!(e.status, 400);
        assert!(String::from_utf8_lossy(&e.body).contains("bad escape"), "{:?}", e.body);
    }
}
