//! Compile-fail tests (trybuild): misuse the types reject.
//!
//! * `untraceable_field`: a field whose type does not implement `Trace`; the
//!   error points at the field's type and says how to fix it.
//! * `generic_object`: `#[derive(Object)]` on a generic type.
//! * `unknown_attribute`: unknown `#[object(...)]` options on a type and on a
//!   field, and `skip` on a type.
//! * `union`: unions cannot be traced.
//! * `listener_reenters_heap`: a delete listener that tries to collect; a
//!   listener gets no heap and cannot borrow one.
//! * `assume_without_unsafe`: `AnyObj::assume` outside `unsafe` (typed
//!   resolves trust the class; `Heap::downcast` is the checked way).
//! * `foreign_handle_impl`: `Handle` is sealed, so no outside type can claim
//!   a `Target` its handle does not name.
//! * `shared_lock_field`: a traced `Arc<Mutex<Vec<AnyObj>>>` field; code
//!   outside the heap could move its handles while the collector traces, so
//!   it is refused, with a message pointing to a lock owned by the object
//!   or a `Referencer`.
//! * `borrow_across_collect`: a `&T` from `heap.get` held across
//!   `heap.collect()`; the borrow checker makes every collection a safe point.
//!
//! `StrongObj`, `Obj`, `Weak` and `AnyObj` are `Send + Sync` on purpose
//! (`gc_control.rs` checks that), so there is no compile-fail case for them.
//! Regenerate the expected output with `TRYBUILD=overwrite`.
//!
//! Ignored by a plain `cargo test --workspace`: trybuild compiles its cases
//! in a project of its own, which on a fresh checkout first checks every
//! dependency and dev-dependency again (about two minutes on two cores).
//! CI runs it in its own step, and so can you:
//!
//! ```text
//! cargo test -p coreobject --test ui -- --ignored
//! ```
//!
//! (Miri never runs it: trybuild runs cargo and rustc as processes.)

#[test]
#[ignore = "compile-fail cases, slow on a fresh checkout: cargo test -p coreobject --test ui -- --ignored"]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
