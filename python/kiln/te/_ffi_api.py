"""The ``te.*`` global functions as module attributes (TVM's ``te._ffi_api``).

Empty when the loaded runtime library has no tensor expressions (e.g. TVM-FFI's own library).
"""

from ..registry import init_ffi_api

init_ffi_api("te", __name__)
