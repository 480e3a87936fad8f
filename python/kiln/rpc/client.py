"""Client sessions (:func:`connect`) and tracker sessions (:func:`connect_tracker`)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from .. import core
from ..device import DEVICE_TYPES

if TYPE_CHECKING:
    from ..device import Device
    from ..function import Function
    from ..module import Module

#: Added, times (session index + 1), to the device type of a remote device (as TVM does).
RPC_SESS_MASK = 128


def _call(name: str, *args: Any) -> Any:
    return core.call_global(name, *args)


class RPCSession:
    """A session with an RPC server; made by :func:`connect`.

    Its functions are the server's globals (:meth:`get_function`); :meth:`load_module`
    returns modules whose functions run remotely; :meth:`cpu` / :meth:`device` return remote
    devices on which ``kiln.empty`` / ``kiln.tensor`` allocate and ``.numpy()`` copies back.
    """

    def __init__(self, sess: Module) -> None:
        self._sess = sess
        self._remote_funcs: dict[str, Function] = {}

    @property
    def module(self) -> Module:
        """The session as a :class:`kiln.Module` (kind ``"rpc"``)."""
        return self._sess

    def get_function(self, name: str) -> Function:
        """The remote global function ``name``; ``AttributeError`` when the server lacks it."""
        return self._sess.get_function(name)

    def _remote(self, name: str) -> Function:
        if name not in self._remote_funcs:
            self._remote_funcs[name] = self.get_function(name)
        return self._remote_funcs[name]

    def device(self, dev_type: int | str, dev_id: int = 0) -> Device:
        """The remote device ``dev_type`` (a name such as ``"cpu"`` or a DLPack code)."""
        if isinstance(dev_type, str):
            name, _, index = dev_type.partition(":")
            dev_type = DEVICE_TYPES[name]
            if index:
                dev_id = int(index)
        return _call("rpc.RemoteDevice", self._sess, int(dev_type), int(dev_id))

    def cpu(self, dev_id: int = 0) -> Device:
        """The remote CPU ``dev_id``."""
        return self.device(1, dev_id)

    def upload(self, data: str | os.PathLike[str] | bytes | bytearray, target: str | None = None) -> None:
        """Upload a file (a path) or bytes (then ``target`` is required) into the session
        folder; names with ``/`` or ``..`` are refused by Kiln's server."""
        if isinstance(data, (bytes, bytearray)):
            if not target:
                raise ValueError("target must be given when uploading bytes")
            blob = bytes(data)
        else:
            with open(data, "rb") as f:
                blob = f.read()
            target = target or os.path.basename(os.fspath(data))
        self._remote("tvm.rpc.server.upload")(target, blob)

    def download(self, path: str) -> bytes:
        """The bytes of the file ``path`` of the session folder."""
        return bytes(self._remote("tvm.rpc.server.download")(path))

    def remove(self, path: str) -> None:
        """Remove the file ``path`` of the session folder."""
        self._remote("tvm.rpc.server.remove")(path)

    def listdir(self, path: str = ".") -> str:
        """Names in the session folder, comma separated (as TVM)."""
        return self._remote("tvm.rpc.server.listdir")(path)

    def load_module(self, path: str) -> Module:
        """Load the uploaded library ``path`` on the server; returns a remote :class:`kiln.Module`."""
        return _call("rpc.LoadRemoteModule", self._sess, path)

    def system_lib(self) -> Module:
        """The server's system library module."""
        return self.get_function("ffi.SystemLib")()

    def close(self) -> None:
        """End the session (also done when the session object goes)."""
        _call("rpc.SessionClose", self._sess)

    def __enter__(self) -> RPCSession:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(url: str, port: int, key: str = "", session_timeout: float = 0) -> RPCSession:
    """Connect to the RPC server at ``url:port`` with ``key``; returns an :class:`RPCSession`."""
    if session_timeout:
        key = "%s -timeout=%s" % (key, session_timeout)
    return RPCSession(_call("rpc.Connect", url, int(port), key))


class TrackerSession:
    """A tracker: :meth:`summary` of its servers and queues, :meth:`request` of a server."""

    def __init__(self, addr: tuple[str, int]) -> None:
        self._addr = "%s:%d" % (addr[0], addr[1])

    def summary(self) -> dict[str, Any]:
        """``{"queue_info": {...}, "server_info": [...]}``, as TVM's tracker reports it."""
        return json.loads(_call("rpc.TrackerSummary", self._addr))

    def request(self, key: str, priority: int = 1, session_timeout: float = 0) -> RPCSession:
        """A session with a free server registered under ``key``."""
        return RPCSession(_call("rpc.ConnectTracker", self._addr, key))


def connect_tracker(url: str, port: int) -> TrackerSession:
    """Connect to the tracker at ``url:port``."""
    return TrackerSession((url, int(port)))
