//! Serial numbers: why a handle can never reach the wrong object.
//!
//! A serial is 32 bits: a 10-bit **heap tag** over a 22-bit **generation**.
//!
//! * Every live heap holds a distinct tag (1..=1023; 0 is never used, so a
//!   serial is never zero). A handle whose tag is not this heap's is foreign.
//! * A slot's generation starts at the tag's *floor* and is bumped each time
//!   the slot is freed. When it reaches the heap's limit the slot is
//!   **retired**: never handed out again. Generations therefore never wrap.
//! * When a heap is dropped its tag returns to the pool with a new floor, one
//!   past the highest generation that heap issued. The next heap with the same
//!   tag starts above every serial the old one handed out, so old handles stay
//!   foreign. A tag whose floor runs out of room is retired for the process.
//!   When no free tag has room for a heap's full generation width, it takes
//!   the free tag with the most room and its slots simply retire sooner.
//!
//! The generation width is a per-heap setting
//! ([`HeapConfig::generation_bits`](crate::HeapConfig::generation_bits)),
//! so tests can exhaust a slot in a few reuses.

use parking_lot::Mutex;

/// Bits of the serial that hold the heap tag.
pub const TAG_BITS: u32 = 10;
/// Bits of the serial that hold the generation.
pub const GENERATION_BITS: u32 = 32 - TAG_BITS;
/// The largest generation a serial can carry.
pub const MAX_GENERATION: u32 = (1 << GENERATION_BITS) - 1;
const MAX_TAG: u32 = (1 << TAG_BITS) - 1;

/// The heap tag of a serial.
#[inline]
pub const fn tag(serial: u32) -> u32 {
    serial >> GENERATION_BITS
}

/// The generation of a serial.
#[inline]
pub const fn generation(serial: u32) -> u32 {
    serial & MAX_GENERATION
}

#[inline]
pub(crate) const fn make(tag: u32, generation: u32) -> u32 {
    (tag << GENERATION_BITS) | generation
}

/// A heap's claim on a tag: the generations it may hand out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TagLease {
    pub(crate) tag: u32,
    /// First generation of every fresh slot.
    pub(crate) floor: u32,
    /// A slot whose generation reaches this is retired when freed.
    pub(crate) limit: u32,
    /// The tag goes back to the pool with at least this floor (the floor it
    /// had, for a tag an exact restore took back below it).
    pub(crate) keep_floor: u32,
}

struct Registry {
    /// Per tag: `None` while a heap holds it, else the floor for the next one.
    /// Index 0 is unused.
    floors: Vec<Option<u32>>,
    /// Round-robin cursor, so tags are spread before they are reused.
    next: usize,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    floors: Vec::new(),
    next: 1,
});

/// The most heaps that can be alive at once.
pub(crate) const LIVE_LIMIT: u32 = MAX_TAG;

/// Claims a free tag with room for `2^bits` generations per slot.
/// `None` when every tag is held by a live heap (or retired).
pub(crate) fn acquire(bits: u32) -> Option<TagLease> {
    let span = if bits >= GENERATION_BITS {
        MAX_GENERATION
    } else {
        (1u32 << bits) - 1
    };
    let mut reg = REGISTRY.lock();
    if reg.floors.is_empty() {
        reg.floors = vec![Some(0); MAX_TAG as usize + 1];
        reg.floors[0] = None;
    }
    let n = reg.floors.len();
    for step in 0..n {
        let t = 1 + (reg.next - 1 + step) % (n - 1);
        if let Some(floor) = reg.floors[t] {
            // Full-width heaps need a fresh tag; narrower ones fit above the floor.
            if floor
                .checked_add(span)
                .is_some_and(|end| end <= MAX_GENERATION)
            {
                reg.floors[t] = None;
                reg.next = t % (n - 1) + 1;
                return Some(TagLease {
                    tag: t as u32,
                    floor,
                    limit: floor + span,
                    keep_floor: 0,
                });
            }
        }
    }
    // No free tag has room for the whole span (full-width heaps need floor 0,
    // which every tag loses once a heap with it issues a handle): take the
    // free tag with the most room left. Its slots retire sooner; they never wrap.
    let roomiest = (1..n)
        .filter_map(|t| reg.floors[t].map(|floor| (floor, t)))
        .filter(|&(floor, _)| floor < MAX_GENERATION)
        .min();
    if let Some((floor, t)) = roomiest {
        reg.floors[t] = None;
        reg.next = t % (n - 1) + 1;
        return Some(TagLease {
            tag: t as u32,
            floor,
            limit: floor.saturating_add(span).min(MAX_GENERATION),
            keep_floor: 0,
        });
    }
    None
}

/// Claims `tag` itself, if no live heap holds it, with the given floor and
/// limit: an exact restore continues the saved heap's serials, so it takes
/// that heap's generations back whatever floor the tag has moved to since.
pub(crate) fn acquire_tag(tag: u32, floor: u32, limit: u32) -> Option<TagLease> {
    if tag == 0 || tag > MAX_TAG || floor > limit || limit > MAX_GENERATION {
        return None;
    }
    let mut reg = REGISTRY.lock();
    if reg.floors.is_empty() {
        reg.floors = vec![Some(0); MAX_TAG as usize + 1];
        reg.floors[0] = None;
    }
    let keep_floor = reg.floors[tag as usize].take()?;
    Some(TagLease {
        tag,
        floor,
        limit,
        keep_floor,
    })
}

/// Returns a tag; `highest` is the highest generation the heap issued, or
/// `None` if it issued none.
pub(crate) fn release(lease: TagLease, highest: Option<u32>) {
    let next_floor = match highest {
        Some(g) => g.saturating_add(1),
        None => lease.floor,
    }
    .max(lease.keep_floor);
    let mut reg = REGISTRY.lock();
    // A floor at MAX_GENERATION leaves no room: the tag is retired for good.
    reg.floors[lease.tag as usize] = (next_floor < MAX_GENERATION).then_some(next_floor);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_round_trips() {
        let s = make(5, 77);
        assert_eq!(tag(s), 5);
        assert_eq!(generation(s), 77);
        assert_eq!(make(MAX_TAG, MAX_GENERATION), u32::MAX);
    }

    #[test]
    fn released_tag_floor_moves_past_issued_generations() {
        let a = acquire(4).unwrap();
        assert_eq!(a.limit - a.floor, 15);
        release(a, Some(a.floor + 9));
        // Walk the tags until we get the same one back; its floor must be higher.
        let mut held = Vec::new();
        loop {
            let b = acquire(4).unwrap();
            if b.tag == a.tag {
                assert!(
                    b.floor >= a.floor + 10,
                    "floor {} not past {}",
                    b.floor,
                    a.floor + 9
                );
                held.push(b);
                break;
            }
            held.push(b);
        }
        for l in held {
            release(l, None);
        }
    }
}
