"""The ``te.*`` global functions as module attributes (TVM's ``te._ffi_api``).

Empty when the loaded runtime library has no tensor expressions (e.g. TVM-FFI's own library).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..registry import init_ffi_api

init_ffi_api("te", __name__)

if TYPE_CHECKING:
    # The attributes are the runtime's globals, bound at import: to type checkers, any name.
    def __getattr__(name: str) -> Any: ...
