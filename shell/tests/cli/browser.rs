//! A headless Chromium driven through the Chrome DevTools protocol, for the pages that are
//! used interactively (`commdb serve`): Debian's `chromium` started with a remote-debugging
//! port, a page opened on it, and the protocol spoken over a WebSocket (a minimal client here:
//! text frames, masked from the client, continuation frames joined). Console errors and
//! uncaught exceptions are collected as the page runs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A running headless Chromium with one page open.
pub struct Browser {
    child: Child,
    socket: TcpStream,
    next_id: u64,
    /// Console errors and exceptions seen so far.
    pub errors: Vec<String>,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Chromium when installed, else None with the reason printed.
pub fn installed() -> bool {
    let ok = Command::new("chromium").arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if ok.is_ok_and(|s| s.success()) {
        true
    } else {
        println!("skipped: chromium is not installed (apt-get install chromium), the page is not driven");
        false
    }
}

/// The body of an HTTP request to Chromium's DevTools server (read up to its Content-Length:
/// the server keeps the connection open).
fn http_get(port: u16, path: &str, method: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect to chromium");
    write!(s, "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n").unwrap();
    let mut reader = BufReader::new(s);
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).unwrap();
    String::from_utf8(body).unwrap()
}

impl Browser {
    /// Start Chromium headless with a window of `width` x `height` and open `url`.
    pub fn open(url: &str, width: u32, height: u32) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new("chromium")
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-port=0",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start chromium");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let port = loop {
            let line = lines.next().expect("chromium said where it listens").unwrap();
            if let Some(rest) = line.split("ws://127.0.0.1:").nth(1) {
                break rest.split('/').next().unwrap().parse::<u16>().unwrap();
            }
        };
        // Keep reading its stderr so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let target: Value =
            serde_json::from_str(&http_get(port, &format!("/json/new?{url}"), "PUT")).expect("a new page");
        let ws = target["webSocketDebuggerUrl"].as_str().expect("the page's socket").to_string();
        let path = ws.split_once(&format!("127.0.0.1:{port}")).unwrap().1.to_string();
        let mut socket = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(
            socket,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: Y29tbWRiLXRlc3RzLWtleQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            socket.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        assert!(head.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&head));
        let mut b = Browser { child, socket, next_id: 0, errors: Vec::new(), _profile: profile };
        b.call("Runtime.enable", json!({}));
        b.call("Log.enable", json!({}));
        b.call("Page.enable", json!({}));
        b
    }

    fn send(&mut self, text: &str) {
        let payload = text.as_bytes();
        let mut frame = vec![0x81u8];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n < 65536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask = [0x37u8, 0xfa, 0x21, 0x3d];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.socket.write_all(&frame).unwrap();
    }

    fn receive(&mut self) -> Value {
        let mut message = Vec::new();
        loop {
            let mut h = [0u8; 2];
            self.socket.read_exact(&mut h).unwrap();
            let (fin, opcode) = (h[0] & 0x80 != 0, h[0] & 0x0f);
            let mut len = (h[1] & 0x7f) as u64;
            if len == 126 {
                let mut l = [0u8; 2];
                self.socket.read_exact(&mut l).unwrap();
                len = u16::from_be_bytes(l) as u64;
            } else if len == 127 {
                let mut l = [0u8; 8];
                self.socket.read_exact(&mut l).unwrap();
                len = u64::from_be_bytes(l);
            }
            let mut payload = vec![0u8; len as usize];
            self.socket.read_exact(&mut payload).unwrap();
            match opcode {
                0x8 => panic!("chromium closed the DevTools connection"),
                0x9 | 0xA => continue,
                _ => message.extend_from_slice(&payload),
            }
            if fin {
                return serde_json::from_slice(&message).expect("a DevTools message");
            }
        }
    }

    /// Call a DevTools method and wait for its result (events seen meanwhile are noted).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({ "id": id, "method": method, "params": params }).to_string());
        loop {
            let m = self.receive();
            if m["id"].as_u64() == Some(id) {
                assert!(m.get("error").is_none(), "{method}: {}", m["error"]);
                return m["result"].clone();
            }
            self.note(&m);
        }
    }

    fn note(&mut self, m: &Value) {
        match m["method"].as_str() {
            Some("Runtime.exceptionThrown") => self.errors.push(m["params"]["exceptionDetails"].to_string()),
            Some("Runtime.consoleAPICalled") if m["params"]["type"] == "error" => {
                self.errors.push(m["params"]["args"].to_string())
            }
            Some("Log.entryAdded") if m["params"]["entry"]["level"] == "error" => {
                self.errors.push(m["params"]["entry"]["text"].to_string())
            }
            _ => {}
        }
    }

    /// The value of a JavaScript expression (awaited when it is a promise).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call("Runtime.evaluate", json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }));
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Wait until `expression` is true, at most `secs` seconds.
    pub fn wait_for(&mut self, expression: &str, secs: u64) {
        let until = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < until {
            if self.eval(expression) == json!(true) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "waited {secs} s for {expression}; the page says {}",
            self.eval("JSON.stringify(commdbTimeline.state())")
        );
    }

    /// A mouse event at (x, y) of the page's viewport.
    pub fn mouse(&mut self, kind: &str, x: f64, y: f64, extra: Value) {
        let mut params = json!({ "type": kind, "x": x, "y": y, "button": "none" });
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        self.call("Input.dispatchMouseEvent", params);
    }

    /// The page as a PNG.
    pub fn screenshot(&mut self) -> Vec<u8> {
        let r = self.call("Page.captureScreenshot", json!({ "format": "png" }));
        base64(r["data"].as_str().unwrap())
    }
}

/// Standard base64 decoded.
fn base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let bytes: Vec<u8> = text.bytes().filter(|&c| c != b'=' && !c.is_ascii_whitespace()).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let v: Vec<u32> = chunk.iter().map(|&c| value(c) as u32).collect();
        let n = v.iter().fold(0u32, |acc, x| acc << 6 | x) << (6 * (4 - v.len()));
        out.extend_from_slice(&n.to_be_bytes()[1..v.len()]);
    }
    out
}

#[test]
fn base64_decodes() {
    assert_eq!(base64("aGVsbG8="), b"hello");
    assert_eq!(base64("aGk="), b"hi");
    assert_eq!(base64("YWJj"), b"abc");
}
