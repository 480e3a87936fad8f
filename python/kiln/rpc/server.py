"""Servers and trackers: in this process (through the library) or as a ``kiln`` subprocess."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any, Sequence

from .. import core

_LISTEN = re.compile(r"listening on .*:(\d+)")


def find_cli() -> str:
    """Path of the ``kiln`` command: ``KILN_CLI``, next to the loaded library, then ``PATH``."""
    env = os.environ.get("KILN_CLI")
    if env:
        return env
    from .._lib import LIB_PATH

    cand = os.path.join(os.path.dirname(LIB_PATH), "kiln")
    if os.path.isfile(cand):
        return cand
    found = shutil.which("kiln")
    if found:
        return found
    raise FileNotFoundError("cannot find the kiln command (set KILN_CLI)")


def _spawn(args: Sequence[str]) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None  # stdout=PIPE
    line = proc.stdout.readline()
    m = _LISTEN.search(line)
    if not m:
        proc.kill()
        raise RuntimeError("kiln did not start: %r" % line)
    return proc, int(m.group(1))


class _Service:
    """What servers and trackers share: an in-process module or a ``kiln`` subprocess, stopped
    by :meth:`terminate`, by leaving a ``with`` block or when collected."""

    _proc: subprocess.Popen[str] | None = None
    _mod: Any = None
    host: str
    port: int

    def terminate(self) -> None:
        """Stop the service."""
        if self._mod is not None:
            self._mod.get_function("stop")()
            self._mod = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.terminate()

    def __del__(self) -> None:
        try:
            self.terminate()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


class Server(_Service):
    """An RPC server on ``host`` (127.0.0.1 by default), first free port of
    ``[port, port_end)`` (``port=0``: any free port), clients must present ``key``.

    In this process by default; ``use_subprocess=True`` runs ``kiln rpc server`` instead.
    Each connection is served in its own thread with its own temporary folder.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 9090,
        port_end: int = 9199,
        key: str = "",
        workdir: str | os.PathLike[str] | None = None,
        tracker_addr: tuple[str, int] | None = None,
        use_subprocess: bool = False,
    ) -> None:
        self.host = host
        self._proc = self._mod = None
        tracker = "%s:%d" % (tracker_addr[0], tracker_addr[1]) if tracker_addr else ""
        if use_subprocess:
            args = [find_cli(), "rpc", "server", "--host", host, "--port", str(port),
                    "--port-end", str(port_end), "--key", key]
            if workdir:
                args += ["--workdir", os.fspath(workdir)]
            if tracker:
                args += ["--tracker", tracker]
            self._proc, self.port = _spawn(args)
        else:
            self._mod = core.call_global("rpc.ServerStart", host, port, port_end, key,
                                         os.fspath(workdir) if workdir else "", tracker)
            self.port = self._mod.get_function("port")()

    @property
    def active_sessions(self) -> int | None:
        """Sessions being served now (in-process servers only)."""
        return self._mod.get_function("active_sessions")() if self._mod else None


class Tracker(_Service):
    """An RPC tracker (TVM's protocol), in this process or as ``kiln rpc tracker``."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 9190, port_end: int = 9199, use_subprocess: bool = False
    ) -> None:
        self.host = host
        self._proc = self._mod = None
        if use_subprocess:
            self._proc, self.port = _spawn([find_cli(), "rpc", "tracker", "--host", host,
                                            "--port", str(port), "--port-end", str(port_end)])
        else:
            self._mod = core.call_global("rpc.TrackerStart", host, port, port_end)
            self.port = self._mod.get_function("port")()

