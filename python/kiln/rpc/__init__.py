"""``kiln.rpc``: remote sessions, servers and trackers, wire-compatible with Apache TVM 0.27.

A session talks to a Kiln server (``kiln rpc server``, :class:`Server`) or to Apache TVM's
(``python -m tvm.exec.rpc_server``)::

    sess = kiln.rpc.connect("127.0.0.1", 9090)
    sess.upload("lib.so")
    mod = sess.load_module("lib.so")           # its functions run on the server
    dev = sess.cpu(0)                          # a remote device
    a = kiln.tensor(np.ones(4, "float32"), dev)
    b = kiln.empty((4,), "float32", dev)
    mod["add_one"](a, b)
    b.numpy()                                  # copied back
    mod.time_evaluator("add_one", dev, number=10)(a, b)

Uploading a library and loading it runs its code on the server: serve only clients you trust.
"""

from __future__ import annotations

from .client import RPCSession, TrackerSession, connect, connect_tracker
from .server import Server, Tracker, find_cli

__all__ = ["RPCSession", "TrackerSession", "connect", "connect_tracker", "Server", "Tracker", "find_cli"]
