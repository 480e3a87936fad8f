//! Kiln's RPC, wire-compatible with Apache TVM 0.27's (protocol "0.8.0"): a Kiln client talks
//! to a TVM server and a TVM client to a Kiln server.
//!
//! - [`protocol`]: magic words, packet and tracker codes; [`codec`]: the wire format of values,
//!   tensors and packets (checked decoding); [`transport`]: handshake and framing.
//! - [`server`]: [`Server`] serves each connection in its own thread and folder; everything a
//!   client names is looked up in its session's tables.
//! - [`client`]: [`connect`] gives a [`Session`]: remote globals, upload, `load_module`, remote
//!   devices (session index in the device type, as TVM), tensors and time evaluators.
//! - [`tracker`]: TVM's tracker protocol, server and client side.
//!
//! Uploading a library to a server and loading it runs its code there: only serve clients you
//! trust.

pub mod client;
pub mod codec;
mod globals;
pub mod protocol;
pub mod server;
pub mod tracker;
pub mod transport;

pub use client::{connect, Session};
pub use server::{Server, ServerConfig};
pub use tracker::Tracker;

/// Makes sure this crate (and the global functions it registers) is linked in.
#[doc(hidden)]
pub fn link_globals() -> *const () {
    connect as *const ()
}
