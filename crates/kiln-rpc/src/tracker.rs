//! The tracker (TVM's `tvm.rpc.tracker` protocol): servers offer themselves under a key,
//! clients ask for a free server by key. Messages are `i32` length + JSON, after an exchange
//! of the tracker magic word.

use crate::protocol::{tracker_code as tc, RPC_TRACKER_MAGIC};
use crate::server::Shared;
use crate::transport::{bind, read_i32, AcceptThread};
use kiln_ffi::sync::RecoverPoison;
use kiln_ffi::{Error, Result};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Largest tracker message accepted (as TVM's tracker).
pub const MAX_TRACKER_MSG_BYTES: usize = 1 << 20;

fn err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::runtime_error(format!("RPC tracker {what}: {e}"))
}

/// Sends one JSON message.
pub fn send_json(s: &mut impl Write, v: &Value) -> Result<()> {
    let text = v.to_string();
    let mut b = (text.len() as i32).to_le_bytes().to_vec();
    b.extend_from_slice(text.as_bytes());
    s.write_all(&b).map_err(|e| err("send", e))
}

/// Receives one JSON message.
pub fn recv_json(s: &mut impl Read) -> Result<Value> {
    let n = read_i32(s, "tracker message length")?;
    let n = usize::try_from(n)
        .ok()
        .filter(|&n| n > 0 && n <= MAX_TRACKER_MSG_BYTES)
        .ok_or_else(|| Error::value_error(format!("bad tracker message length {n}")))?;
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).map_err(|e| err("receive", e))?;
    serde_json::from_slice(&b).map_err(|e| Error::value_error(format!("tracker JSON: {e}")))
}

/// Opens a tracker connection (magic exchanged).
pub fn connect_tracker(addr: &str) -> Result<TcpStream> {
    let mut s = TcpStream::connect(addr).map_err(|e| err(&format!("connect {addr}"), e))?;
    s.write_all(&RPC_TRACKER_MAGIC.to_le_bytes())
        .map_err(|e| err("send", e))?;
    if read_i32(&mut s, "tracker magic")? != RPC_TRACKER_MAGIC {
        return Err(Error::runtime_error(format!(
            "{addr} is not an RPC tracker"
        )));
    }
    Ok(s)
}

/// The tracker's summary: `{"queue_info": {...}, "server_info": [...]}`.
pub fn summary(addr: &str) -> Result<Value> {
    let mut s = connect_tracker(addr)?;
    send_json(&mut s, &json!([tc::SUMMARY]))?;
    let v = recv_json(&mut s)?;
    match v.get(0).and_then(Value::as_i64) {
        Some(tc::SUCCESS) => Ok(v[1].clone()),
        _ => Err(Error::runtime_error(format!("tracker answered {v}"))),
    }
}

/// Asks the tracker for a free server under `key`: `(host, port, match_key)`.
pub fn request(addr: &str, key: &str, priority: i64) -> Result<(String, u16, String)> {
    let mut s = connect_tracker(addr)?;
    send_json(&mut s, &json!([tc::REQUEST, key, "", priority]))?;
    let v = recv_json(&mut s)?;
    let bad = || Error::runtime_error(format!("tracker answered {v}"));
    if v.get(0).and_then(Value::as_i64) != Some(tc::SUCCESS) {
        return Err(bad());
    }
    let r = &v[1];
    Ok((
        r[0].as_str().ok_or_else(bad)?.to_string(),
        r[1].as_u64().ok_or_else(bad)? as u16,
        r[2].as_str().ok_or_else(bad)?.to_string(),
    ))
}

/// Text table of a summary, in the layout of TVM's `text_summary`.
pub fn text_summary(v: &Value) -> String {
    let mut out = String::from("Server List\n------------------------------\nserver-address           key\n------------------------------\n");
    let empty = Vec::new();
    let servers = v["server_info"].as_array().unwrap_or(&empty);
    for s in servers {
        let addr = s["addr"].as_array().map_or(String::new(), |a| {
            a.iter()
                .map(|x| x.as_str().map_or(x.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(":")
        });
        out += &format!("{addr:21}    {}\n", s["key"].as_str().unwrap_or(""));
    }
    out += "------------------------------\n\nQueue Status\n";
    if let Some(q) = v["queue_info"].as_object() {
        out += "key   free  pending\n";
        for (k, e) in q {
            out += &format!("{k}   {}  {}\n", e["free"], e["pending"]);
        }
    }
    out
}

/// A server registered with a tracker: keeps one free offer there (a new match key whenever
/// the last one was handed out), as TVM's server does.
pub(crate) fn register_server(shared: Arc<Shared>, tracker: String) {
    std::thread::spawn(move || {
        let mut n: u64 = 0;
        while !shared.stop.load(Ordering::SeqCst) {
            if let Err(e) = offer_loop(&shared, &tracker, &mut n) {
                eprintln!("kiln rpc: tracker {tracker}: {}", e.message());
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
}

fn offer_loop(shared: &Shared, tracker: &str, n: &mut u64) -> Result<()> {
    let mut s = connect_tracker(tracker)?;
    let key = &shared.config.key;
    let port = shared.port;
    let info = json!({"key": format!("server:{key}"), "addr": [shared.config.custom_addr, port]});
    send_json(&mut s, &json!([tc::UPDATE_INFO, info]))?;
    recv_json(&mut s)?;
    let mut current = String::new();
    while !shared.stop.load(Ordering::SeqCst) {
        let pending = if current.is_empty() {
            Vec::new()
        } else {
            send_json(&mut s, &json!([tc::GET_PENDING_MATCHKEYS]))?;
            recv_json(&mut s)?.as_array().cloned().unwrap_or_default()
        };
        if current.is_empty() || !pending.iter().any(|p| p.as_str() == Some(&current)) {
            *n += 1;
            current = format!("{key}:{}.{}", std::process::id(), n);
            {
                let mut keys = shared.match_keys.lock().recover();
                keys.push_back(current.clone());
                while keys.len() > 64 {
                    keys.pop_front();
                }
            }
            send_json(
                &mut s,
                &json!([tc::PUT, key, [port, current], shared.config.custom_addr]),
            )?;
            recv_json(&mut s)?;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}

/// One offer: (connection id, host, port, match key).
type Offer = (u64, String, u16, String);

#[derive(Default)]
struct Queue {
    free: Vec<Offer>,
    waiting: Vec<(i64, u64, u64)>, // (priority, order, connection id)
}

#[derive(Default)]
struct State {
    queues: BTreeMap<String, Queue>,
    conns: HashMap<u64, Conn>,
    order: u64,
}

struct Conn {
    writer: Arc<Mutex<TcpStream>>,
    info: Value,
    pending: HashSet<String>,
}

/// A running tracker.
pub struct Tracker {
    accept: AcceptThread,
}

impl Tracker {
    /// Binds the first free port of `[port, port_end)` (0: any) on `host` and starts.
    pub fn start(host: &str, port: u16, port_end: u16) -> Result<Tracker> {
        let listener = bind(host, port, port_end)?;
        let addr = listener.local_addr().map_err(|e| err("address", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State::default()));
        let st = stop.clone();
        let accept = AcceptThread::spawn("kiln-rpc-tracker", addr, stop, move || {
            let ids = AtomicU64::new(1);
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = conn else { continue };
                let id = ids.fetch_add(1, Ordering::SeqCst);
                let state = state.clone();
                std::thread::spawn(move || {
                    let _ = serve_tracker_conn(stream, id, &state);
                    drop_conn(&state, id);
                });
            }
        })?;
        Ok(Tracker { accept })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.accept.addr().port()
    }

    /// Stops accepting.
    pub fn stop(&mut self) {
        self.accept.stop();
    }

    /// Blocks until the tracker stops.
    pub fn wait(mut self) {
        self.accept.wait();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().recover()
}

fn drop_conn(state: &Mutex<State>, id: u64) {
    let mut st = lock(state);
    st.conns.remove(&id);
    for q in st.queues.values_mut() {
        q.free.retain(|o| o.0 != id);
        q.waiting.retain(|w| w.2 != id);
    }
}

/// Hands free offers to waiting requests of `key`, highest priority first, then in order.
fn schedule(st: &mut State, key: &str) {
    loop {
        let Some(q) = st.queues.get_mut(key) else {
            return;
        };
        if q.free.is_empty() || q.waiting.is_empty() {
            return;
        }
        q.waiting.sort_by_key(|w| (-w.0, w.1));
        let (_, _, who) = q.waiting.remove(0);
        let offer = q.free.remove(0);
        let Some(c) = st.conns.get(&who) else {
            if let Some(q) = st.queues.get_mut(key) {
                q.free.insert(0, offer);
            }
            continue;
        };
        let reply = json!([tc::SUCCESS, [offer.1, offer.2, offer.3]]);
        let sent = send_json(&mut *c.writer.lock().recover(), &reply);
        if sent.is_ok() {
            if let Some(owner) = st.conns.get_mut(&offer.0) {
                owner.pending.remove(&offer.3);
            }
        } else if let Some(q) = st.queues.get_mut(key) {
            q.free.insert(0, offer);
        }
    }
}

fn serve_tracker_conn(mut stream: TcpStream, id: u64, state: &Mutex<State>) -> Result<()> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| err("socket", e))?;
    if read_i32(&mut stream, "tracker magic")? != RPC_TRACKER_MAGIC {
        return Err(Error::value_error("not a tracker client"));
    }
    stream
        .set_read_timeout(None)
        .map_err(|e| err("socket", e))?;
    stream
        .write_all(&RPC_TRACKER_MAGIC.to_le_bytes())
        .map_err(|e| err("send", e))?;
    let writer = Arc::new(Mutex::new(
        stream.try_clone().map_err(|e| err("socket", e))?,
    ));
    let addr = stream
        .peer_addr()
        .map(|a| a.ip().to_string())
        .unwrap_or_default();
    lock(state).conns.insert(
        id,
        Conn {
            writer: writer.clone(),
            info: json!({}),
            pending: HashSet::new(),
        },
    );
    let reply = |v: Value| send_json(&mut *writer.lock().recover(), &v);
    loop {
        let msg = recv_json(&mut stream)?;
        let code = msg
            .get(0)
            .and_then(Value::as_i64)
            .ok_or_else(|| Error::value_error("no code"))?;
        match code {
            tc::PING => reply(json!(tc::SUCCESS))?,
            tc::PUT => {
                let key = msg[1].as_str().unwrap_or("").to_string();
                let port = msg[2][0].as_u64().unwrap_or(0) as u16;
                let mkey = msg[2][1].as_str().unwrap_or("").to_string();
                let host = msg
                    .get(3)
                    .and_then(Value::as_str)
                    .map_or(addr.clone(), str::to_string);
                let mut st = lock(state);
                if let Some(c) = st.conns.get_mut(&id) {
                    c.pending.insert(mkey.clone());
                }
                st.queues
                    .entry(key.clone())
                    .or_default()
                    .free
                    .push((id, host, port, mkey));
                reply(json!(tc::SUCCESS))?;
                schedule(&mut st, &key);
            }
            tc::REQUEST => {
                let key = msg[1].as_str().unwrap_or("").to_string();
                let priority = msg.get(3).and_then(Value::as_i64).unwrap_or(1);
                let mut st = lock(state);
                st.order += 1;
                let order = st.order;
                st.queues
                    .entry(key.clone())
                    .or_default()
                    .waiting
                    .push((priority, order, id));
                schedule(&mut st, &key);
            }
            tc::GET_PENDING_MATCHKEYS => {
                let keys: Vec<String> = lock(state)
                    .conns
                    .get(&id)
                    .map(|c| c.pending.iter().cloned().collect())
                    .unwrap_or_default();
                reply(json!(keys))?;
            }
            tc::UPDATE_INFO => {
                let mut info = msg[1].clone();
                if info["addr"][0].is_null() {
                    info["addr"][0] = json!(addr);
                }
                if let Some(c) = lock(state).conns.get_mut(&id) {
                    c.info = info;
                }
                reply(json!(tc::SUCCESS))?;
            }
            tc::SUMMARY => {
                let st = lock(state);
                let queues: serde_json::Map<String, Value> = st
                    .queues
                    .iter()
                    .map(|(k, q)| {
                        (
                            k.clone(),
                            json!({"free": q.free.len(), "pending": q.waiting.len()}),
                        )
                    })
                    .collect();
                let servers: Vec<Value> = st
                    .conns
                    .values()
                    .filter(|c| {
                        c.info["key"]
                            .as_str()
                            .is_some_and(|k| k.starts_with("server"))
                    })
                    .map(|c| c.info.clone())
                    .collect();
                drop(st);
                reply(json!([tc::SUCCESS, {"queue_info": queues, "server_info": servers}]))?;
            }
            tc::STOP => reply(json!(tc::FAIL))?,
            other => return Err(Error::value_error(format!("unknown tracker code {other}"))),
        }
    }
}

/// Requests a server for `key` from the tracker at `addr` and connects to it.
pub fn connect_via_tracker(addr: &str, key: &str) -> Result<crate::Session> {
    let (host, port, mkey) = request(addr, key, 1)?;
    crate::connect(&host, port, &mkey)
}
