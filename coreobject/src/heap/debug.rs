//! Debugging and reports: reference chains and memory.

use crate::gc::debug::{MemoryReport, RefChain, Reports};
use crate::handle::AnyObj;

use super::Heap;

impl Heap {
    pub(super) fn reports(&self) -> Reports<'_> {
        if self.gc.config().outer_keeps_inners {
            self.ensure_inners();
        }
        Reports {
            array: &self.array,
            names: &self.names,
            referencers: &self.referencers,
            inners: self.gc.config().outer_keeps_inners.then_some(&self.inners),
            clusters: &self.clusters,
        }
    }

    /// The shortest reference chains from a root to `target`: why it is
    /// alive (Unreal's `obj refs`). Returns up to `max` chains, all of the
    /// shortest length; empty if nothing keeps the object alive.
    ///
    /// ```
    /// use coreobject::{Heap, Obj, Object};
    /// #[derive(Object, Default)]
    /// struct World { levels: Vec<Obj<Level>> }
    /// #[derive(Object, Default)]
    /// struct Level { actors: Vec<Obj<Hero>> }
    /// #[derive(Object, Default)]
    /// struct Hero;
    ///
    /// let mut heap = Heap::new();
    /// let hero = heap.spawn(Hero).name("Hero").create().unwrap();
    /// let level = heap.create(Level { actors: vec![hero] });
    /// let world = heap.spawn(World { levels: vec![level] }).name("World").root().create().unwrap();
    /// let chains = heap.reference_chains(hero, 4);
    /// assert_eq!(chains[0].to_string(), format!("(rooted) World.levels[0] -> Level_{}.actors[0] -> Hero", level.index()));
    /// ```
    pub fn reference_chains(&self, target: impl Into<AnyObj>, max: usize) -> Vec<RefChain> {
        self.reports().reference_chains(target, max)
    }

    /// Memory per class and for the heap's own structures (Unreal's
    /// `memreport`).
    ///
    /// ```
    /// # use coreobject::{Heap, Object};
    /// #[derive(Object, Default)]
    /// struct Mesh { verts: [f32; 30] }
    /// let heap = Heap::new();
    /// heap.create(Mesh::default());
    /// let r = heap.memory_report();
    /// assert_eq!(r.classes[0].class, "Mesh");
    /// assert!(r.classes[0].bytes >= 120);
    /// println!("{r}");
    /// ```
    pub fn memory_report(&self) -> MemoryReport {
        let collector = self.gc.memory_bytes() + self.inners.lock().allocated_bytes();
        self.reports()
            .memory_report(collector, self.listeners_allocated_size())
    }
}
