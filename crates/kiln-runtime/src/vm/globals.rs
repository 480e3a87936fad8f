//! The VM's global functions: its factory's loader.

use super::factory::VmFactory;
use kiln_ffi::{register_global_packed, Any, AnyView, Error, Result};

register_global_packed!(
    "ffi.Module.load_from_bytes.VMFactory",
    |args: &[AnyView<'_>]| -> Result<Any> {
        let bytes = args
            .first()
            .and_then(|a| a.bytes_bytes())
            .ok_or_else(|| Error::type_error("ffi.Module.load_from_bytes.VMFactory takes bytes"))?;
        Ok(VmFactory::load_from_bytes(bytes)?.into())
    }
);
