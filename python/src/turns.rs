//! One object's calls served whole and in the order they ask (`cuqr.QR`'s single and batched
//! states): each call draws a ticket and runs when it is served; a call that must wait does
//! so with the interpreter lock released; a call made from inside another call of the same
//! thread, and an object poisoned by a panic, are Python errors.

use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::{self, ThreadId};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// The turns of the calls: tickets drawn and served, and the thread whose turn it is.
#[derive(Default)]
struct Turns {
    next: u64,
    serving: u64,
    /// The thread whose turn it is, while a call runs (to refuse a re-entrant call).
    holder: Option<ThreadId>,
}

/// A value whose calls take turns (see the module documentation).
pub struct Serialised<T> {
    /// Only the call whose turn it is locks it, so the lock is never contended; a panic
    /// inside a call poisons it.
    value: Mutex<T>,
    turns: Mutex<Turns>,
    /// Signalled at the end of every turn.
    turn_over: Condvar,
    /// What the value is, for the errors ("factorisation", "batched factorisation").
    what: &'static str,
}

/// The value held by one call (its turn, and the value locked).
pub struct Held<'a, T> {
    /// Some until dropped.
    guard: Option<MutexGuard<'a, T>>,
    owner: &'a Serialised<T>,
}

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.guard.as_ref().expect("held until dropped")
    }
}

impl<T> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.guard.as_mut().expect("held until dropped")
    }
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        // unlock the value before the next turn begins
        self.guard = None;
        self.owner.end_turn();
    }
}

impl<T> Serialised<T> {
    /// `value`, named `what` in the errors.
    pub fn new(value: T, what: &'static str) -> Self {
        Self {
            value: Mutex::new(value),
            turns: Mutex::new(Turns::default()),
            turn_over: Condvar::new(),
            what,
        }
    }

    fn turns(&self) -> MutexGuard<'_, Turns> {
        // no code that can panic runs while it is locked
        self.turns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn end_turn(&self) {
        let mut t = self.turns();
        t.holder = None;
        t.serving = t.serving.wrapping_add(1);
        drop(t);
        self.turn_over.notify_all();
    }

    /// The value held for one call, in the order the calls ask.
    ///
    /// # Errors
    /// A `RuntimeError` for a call from inside another of this thread's calls, or once a
    /// panic inside a call has poisoned the value.
    pub fn lock(&self, py: Python<'_>) -> PyResult<Held<'_, T>>
    where
        T: Send,
    {
        let me = thread::current().id();
        let mut t = self.turns();
        if t.holder == Some(me) {
            return Err(PyRuntimeError::new_err(format!(
                "this {} is already in use by this thread: a call on it was made from inside \
                 another of its calls",
                self.what
            )));
        }
        let ticket = t.next;
        t.next = t.next.wrapping_add(1);
        if t.serving == ticket {
            t.holder = Some(me);
            drop(t);
        } else {
            drop(t);
            py.detach(|| {
                let mut t = self.turns();
                while t.serving != ticket {
                    t = self
                        .turn_over
                        .wait(t)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                t.holder = Some(me);
            });
        }
        match self.value.try_lock() {
            Ok(guard) => Ok(Held {
                guard: Some(guard),
                owner: self,
            }),
            Err(e) => {
                self.end_turn();
                Err(PyRuntimeError::new_err(match e {
                    TryLockError::Poisoned(_) => format!(
                        "this {} is unusable: an earlier call on it failed inside cuqr (a \
                         panic, which is a bug); build a new one",
                        self.what
                    ),
                    TryLockError::WouldBlock => format!("this {} is locked out of turn", self.what),
                }))
            }
        }
    }
}
