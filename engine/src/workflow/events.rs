//! The event log of one run: which component each step invoked, what was emitted, how loops ended.

use serde::Serialize;

use super::manifest::EmitMode;

/// Why a loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopExit {
    /// `continue_if` was false after an iteration.
    Condition,
    /// The bound was reached.
    MaxIterations,
    /// The token callback asked to stop.
    Callback,
}

/// One entry of the log.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum Event {
    /// A step invoked a component.
    Invoke {
        /// Step path, e.g. `steps[3].body[1]`.
        step: String,
        /// Iteration indices of the enclosing loops, outermost first.
        iteration: Vec<usize>,
        /// Component name.
        component: String,
        /// `native:<block>`, `graph`, or `replacement:<contract>`.
        implementation: String,
    },
    /// A step emitted a value.
    Emit {
        /// Step path.
        step: String,
        /// Iteration indices of the enclosing loops.
        iteration: Vec<usize>,
        /// Output or cell name.
        to: String,
        /// Append or replace.
        mode: EmitMode,
        /// Elements written.
        elements: usize,
    },
    /// A loop ended.
    LoopEnd {
        /// Step path.
        step: String,
        /// Iterations run.
        iterations: usize,
        /// Why it stopped.
        exit: LoopExit,
    },
}

/// The ordered events of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EventLog {
    /// Events in the order they happened.
    pub events: Vec<Event>,
}

impl EventLog {
    /// Component names invoked, in order.
    pub fn invoked(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Invoke { component, .. } => Some(component.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Component names invoked while the enclosing loops were at `iteration`
    /// (outermost first; `&[]` selects steps outside every loop).
    pub fn invoked_in(&self, iteration: &[usize]) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Invoke {
                    component,
                    iteration: it,
                    ..
                } if it == iteration => Some(component.as_str()),
                _ => None,
            })
            .collect()
    }

    /// How each loop ended, in order.
    pub fn loop_exits(&self) -> Vec<LoopExit> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::LoopEnd { exit, .. } => Some(*exit),
                _ => None,
            })
            .collect()
    }
}
