//! GPU thread axes in TIR: the tags `blockIdx.{x,y,z}` and `threadIdx.{x,y,z}`, and the
//! `thread_extent` attribute (`AttrStmt(var, "thread_extent", extent, body)`) that launches a
//! thread axis over `body`, as TVM's `ScheduleOps` emits it.
//!
//! The attribute's node is the thread variable itself; its name is its tag (schedules make one
//! variable per tag and function), which is how passes and code generators tell the axes apart.

use crate::expr::Var;
use crate::stmt::AttrStmtObj;

/// The attribute key that binds a thread axis (TVM's `attr::thread_extent`).
pub const THREAD_EXTENT: &str = "thread_extent";

/// Whether a thread axis indexes blocks (work-groups) or threads within one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ThreadRank {
    /// `blockIdx.*`: the work-group (`get_group_id` in OpenCL).
    Block,
    /// `threadIdx.*`: the thread within its block (`get_local_id` in OpenCL).
    Thread,
}

/// A parsed thread tag: its rank and dimension (0 = x, 1 = y, 2 = z).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadTag {
    /// Block or thread index.
    pub rank: ThreadRank,
    /// The dimension: 0, 1 or 2.
    pub dim: usize,
}

impl ThreadTag {
    /// Parses `blockIdx.x` ... `threadIdx.z`; anything else (including `vthread`) is `None`.
    pub fn parse(tag: &str) -> Option<ThreadTag> {
        let (rank, axis) = tag.split_once('.')?;
        let rank = match rank {
            "blockIdx" => ThreadRank::Block,
            "threadIdx" => ThreadRank::Thread,
            _ => return None,
        };
        let dim = match axis {
            "x" => 0,
            "y" => 1,
            "z" => 2,
            _ => return None,
        };
        Some(ThreadTag { rank, dim })
    }

    /// The tag's text (`blockIdx.x`, ...).
    pub fn name(&self) -> String {
        let rank = match self.rank {
            ThreadRank::Block => "blockIdx",
            ThreadRank::Thread => "threadIdx",
        };
        format!("{rank}.{}", ["x", "y", "z"][self.dim.min(2)])
    }
}

/// The thread variable and tag an attribute launches, when it is a `thread_extent` attribute
/// about a variable named by a valid tag.
pub fn thread_extent_of(a: &AttrStmtObj) -> Option<(Var, ThreadTag)> {
    if &*a.attr_key != THREAD_EXTENT {
        return None;
    }
    let v = a.node.try_as::<Var>().ok()?;
    let tag = ThreadTag::parse(v.name())?;
    Some((v, tag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_parse() {
        let t = ThreadTag::parse("threadIdx.y").unwrap();
        assert_eq!((t.rank, t.dim), (ThreadRank::Thread, 1));
        assert_eq!(t.name(), "threadIdx.y");
        assert!(ThreadTag::parse("vthread").is_none());
        assert!(ThreadTag::parse("blockIdx.w").is_none());
    }
}
