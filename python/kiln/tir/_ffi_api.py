"""The ``tir.*`` global functions as module attributes (TVM's ``tir._ffi_api``).

Empty when the loaded runtime library has no tensor IR (e.g. TVM-FFI's own library).
"""

from ..registry import init_ffi_api

init_ffi_api("tir", __name__)
