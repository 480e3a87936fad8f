//! GPU thread axes for schedules (TVM's `te.thread_axis` and `Stage.bind`): a loop bound to
//! `blockIdx.x` or `threadIdx.x` is not a loop any more; lowering launches the thread axis
//! over its body (`AttrStmt(thread, "thread_extent", extent, body)`) and reads the loop
//! variable from the thread index.

use crate::tensor::{iter_type, IterVar};
use kiln_ffi::{DataType, Error, Result};
use kiln_tir::thread_axis::ThreadTag;
use kiln_tir::Var;

/// A thread axis for [`crate::Stage::bind`]: an iteration variable of thread-index type whose
/// variable is named by `tag` (`blockIdx.x|y|z`, `threadIdx.x|y|z`). Virtual threads
/// (`vthread`) and other tags are refused.
///
/// ```
/// let tx = kiln_te::thread_axis("threadIdx.x").unwrap();
/// assert_eq!(tx.thread_tag(), "threadIdx.x");
/// assert!(kiln_te::thread_axis("vthread").is_err());
/// ```
pub fn thread_axis(tag: &str) -> Result<IterVar> {
    if ThreadTag::parse(tag).is_none() {
        let hint = if tag.starts_with("vthread") || tag == "cthread" {
            " (virtual threads are not supported)"
        } else {
            ""
        };
        return Err(Error::value_error(format!(
            "thread_axis: unknown thread tag `{tag}`{hint}; Kiln knows blockIdx.x, blockIdx.y, \
             blockIdx.z, threadIdx.x, threadIdx.y and threadIdx.z"
        )));
    }
    Ok(IterVar::with_tag(
        None,
        Var::new(tag, DataType::int(32)),
        iter_type::THREAD_INDEX,
        tag,
    ))
}

/// The parsed tag of a thread axis made by [`thread_axis`] (or `te.IterVar` with a tag), or an
/// error naming what is wrong with it.
pub(crate) fn thread_tag_of(thread: &IterVar) -> Result<ThreadTag> {
    if thread.iter_type() != iter_type::THREAD_INDEX {
        return Err(Error::value_error(format!(
            "bind: `{}` is not a thread axis (make one with te.thread_axis(\"threadIdx.x\"))",
            thread.name()
        )));
    }
    ThreadTag::parse(thread.thread_tag()).ok_or_else(|| {
        Error::value_error(format!(
            "bind: thread axis `{}` has the unknown tag `{}` (Kiln knows blockIdx.x|y|z and \
             threadIdx.x|y|z)",
            thread.name(),
            thread.thread_tag()
        ))
    })
}
