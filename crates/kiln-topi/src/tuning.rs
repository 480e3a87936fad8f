//! Tuning: schedule choices measured on the CPU instead of taken from the heuristics.
//!
//! A schedule decision that a heuristic makes (which kernel computes a 1x1 convolution, the
//! register tile of a convolution or a matrix product) is a *knob*: the schedule asks
//! [`knob`] with the workload's key (the operation and its shapes, [`workload_key`]) and the
//! knob's name, and uses the answer when there is one. Answers come from a [`Scope`] made
//! active for one build: tuning records (`kiln compile --tuning-records`), or while tuning
//! (`kiln tune`), one candidate configuration for every workload of a one-layer build, whose
//! keys the scope collects. Without a scope, or for a workload it does not know, every
//! schedule takes its heuristic.
//!
//! One scope is active at a time in the process: [`Scope::enter`] waits for the previous one
//! to end, so builds under different records do not see each other's answers.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Knob values by name.
pub type Config = BTreeMap<String, i64>;

/// The knobs a build asked: workload key -> knob name -> its choices.
pub type Asked = BTreeMap<String, BTreeMap<String, Vec<i64>>>;

/// What a build asks of the tuning records.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Configurations by workload key.
    pub records: BTreeMap<String, Config>,
    /// The configuration of every workload not in `records` (tuning one layer).
    pub candidate: Option<Config>,
    /// The knobs asked during the build: workload key -> knob name -> its choices.
    pub asked: Asked,
}

static ACTIVE: Mutex<Option<Scope>> = Mutex::new(None);
static TURN: Mutex<()> = Mutex::new(());

/// The active scope for as long as it lives; dropping it ends the scope.
pub struct Active {
    _turn: MutexGuard<'static, ()>,
}

impl Scope {
    /// Makes this scope the one builds consult until the returned guard is dropped (waiting
    /// for a scope active in another thread to end).
    pub fn enter(self) -> Active {
        let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
        *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = Some(self);
        Active { _turn: turn }
    }
}

impl Active {
    /// The knobs the build asked so far: workload key -> knob name -> its choices.
    pub fn asked(&self) -> Asked {
        ACTIVE
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|s| s.asked.clone())
            .unwrap_or_default()
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// The value of knob `name` for workload `key` in the active scope, if it has one among
/// `choices` (the values the schedule can take; the question and the choices are noted for
/// [`Active::asked`]).
pub fn knob(key: &str, name: &str, choices: &[i64]) -> Option<i64> {
    let mut active = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
    let scope = active.as_mut()?;
    scope
        .asked
        .entry(key.to_string())
        .or_default()
        .insert(name.to_string(), choices.to_vec());
    let v = match scope.records.get(key) {
        Some(c) => c.get(name).copied(),
        None => scope.candidate.as_ref().and_then(|c| c.get(name).copied()),
    };
    v.filter(|v| choices.contains(v))
}

/// The key of a workload: its kind (`conv2d_nchwc`, `dense`, ...), then each shape, joined so
/// that equal layers have equal keys.
pub fn workload_key(kind: &str, shapes: &[&[i64]]) -> String {
    let mut k = kind.to_string();
    for s in shapes {
        k.push(':');
        let dims: Vec<String> = s.iter().map(i64::to_string).collect();
        k.push_str(&dims.join("x"));
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_answer_inside_a_scope_only_and_note_the_question() {
        let key = workload_key("conv2d", &[&[1, 3, 8, 8], &[4, 3, 1, 1]]);
        assert_eq!(key, "conv2d:1x3x8x8:4x3x1x1");
        let mut records = BTreeMap::new();
        records.insert(key.clone(), Config::from([("cols".to_string(), 4)]));
        let scope = Scope {
            records,
            candidate: Some(Config::from([("cols".to_string(), 2)])),
            ..Scope::default()
        }
        .enter();
        let choices = [1, 2, 4];
        assert_eq!(knob(&key, "cols", &choices), Some(4));
        assert_eq!(
            knob("other", "cols", &choices),
            Some(2),
            "the candidate answers the rest"
        );
        assert_eq!(
            knob("other", "cols", &[1, 3]),
            None,
            "not one of the choices"
        );
        assert_eq!(knob(&key, "blocks", &[1, 2]), None);
        assert_eq!(scope.asked()[&key]["blocks"], vec![1, 2]);
        drop(scope);
        assert_eq!(knob(&key, "cols", &choices), None);
    }
}
