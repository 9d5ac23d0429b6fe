//! Per-device caches keyed by type: the launchers and algorithms above the runtime keep
//! their launch facts and scratch buffers here (made by the first use, kept for later
//! ones) without the runtime naming their types.
#![forbid(unsafe_code)]

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A map from a cache type to its one value on this device.
#[derive(Default)]
pub struct Caches {
    map: Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>,
}

impl Caches {
    /// This device's `C`, made with `C::default()` on first use.
    pub fn get<C: Default + Send + 'static>(&self) -> Arc<Mutex<C>> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let slot = map
            .entry(TypeId::of::<Mutex<C>>())
            .or_insert_with(|| Arc::new(Mutex::new(C::default())));
        Arc::clone(slot)
            .downcast::<Mutex<C>>()
            .expect("the slot of a TypeId holds that type")
    }
}

impl core::fmt::Debug for Caches {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Caches")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_per_type() {
        let c = Caches::default();
        *c.get::<Vec<u32>>().lock().unwrap() = vec![1, 2];
        c.get::<Option<u8>>().lock().unwrap().replace(7);
        assert_eq!(*c.get::<Vec<u32>>().lock().unwrap(), vec![1, 2]);
        assert_eq!(*c.get::<Option<u8>>().lock().unwrap(), Some(7));
    }
}
