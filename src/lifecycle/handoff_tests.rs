use super::*;
use crate::access::cluster::SLOTS;

/// An event of key `lw:lock:<n>` (its slot is `slot(key)`) from `node`.
fn ev(node: usize, n: u32, event: &str) -> Event {
    Event {
        node,
        ns: 0,
        fence: false,
        key: format!("lw:lock:{n}").into_bytes().into(),
        event: crate::dense::Key::new(event.as_bytes()),
    }
}

fn names(events: &[(Event, i64)]) -> Vec<String> {
    events
        .iter()
        .map(|(e, _)| {
            format!(
                "{}:{}",
                String::from_utf8_lossy(&e.key),
                String::from_utf8_lossy(&e.event)
            )
        })
        .collect()
}

/// An import of every slot from primary 0 to primary 1, placed by a first foreign event.
fn import(imports: &mut Imports) -> u64 {
    assert_eq!(imports.foreign(ev(1, 1, "set"), 0), Placed::Unplaced { first: true });
    assert_eq!(
        imports.foreign(ev(1, 1, "expire"), 0),
        Placed::Unplaced { first: false }
    );
    let follow = imports
        .place(1, Some(vec![vec![(0, SLOTS as u16 - 1)]]), |_| Some(0), 0)
        .follow;
    assert_eq!(follow.len(), 1);
    assert_eq!(
        (follow[0].source, follow[0].ranges.clone()),
        (0, vec![(0, SLOTS as u16 - 1)])
    );
    follow[0].id
}

#[test]
fn copies_before_a_copied_marker_and_the_source_s_events_after_it_count_nothing() {
    let mut im = Imports::default();
    let id = import(&mut im);
    // The source takes marker 1, then releases key 1 and acquires key 2.
    assert_eq!(im.marked(0, id, 1, 1), None);
    im.source_event(0, b"lw:lock:1");
    im.source_event(0, b"lw:lock:2");
    im.source_event(0, b"lw:lock:2");
    // The target copies: the snapshot (waiting), marker 1, then the release.
    assert_eq!(im.foreign(ev(1, 1, "set"), 2), Placed::Pending);
    assert_eq!(im.marked(1, id, 1, 2), None, "not flipped yet");
    assert_eq!(im.foreign(ev(1, 1, "del"), 3), Placed::Pending);
    // The source gives the slots up; read to there, the import resolves.
    assert_eq!(im.flipped(id, 4), Some(0));
    let r = im.source_read(id, 5).unwrap();
    assert!(r.count.is_empty(), "the release was a copy: {:?}", names(&r.count));
    assert_eq!(r.ranges, [(0, SLOTS as u16 - 1)]);
    // Key 2's two copies are still to come, then its own events count.
    assert!(im.copy_due(1, b"lw:lock:2", 6) && im.copy_due(1, b"lw:lock:2", 6));
    assert!(!im.copy_due(1, b"lw:lock:2", 6));
}

#[test]
fn the_copies_due_count_from_the_last_marker_copied() {
    let mut im = Imports::default();
    let id = import(&mut im);
    assert_eq!(im.marked(0, id, 1, 1), None);
    assert_eq!(im.marked(0, id, 2, 1), None);
    im.source_event(0, b"lw:lock:1"); // after marker 2
    assert_eq!(im.marked(1, id, 1, 2), None);
    assert_eq!(im.flipped(id, 3), Some(0));
    // Marker 1 was copied, 2 not yet: the source's events after 1 are still to be copied.
    let r = im.source_read(id, 3).unwrap();
    assert!(r.count.is_empty());
    assert_eq!(im.marked(1, id, 2, 4), None, "over");
    assert!(im.copy_due(1, b"lw:lock:1", 5) && !im.copy_due(1, b"lw:lock:1", 5));
}

#[test]
fn after_the_last_copied_marker_the_first_events_are_copies_and_the_rest_count() {
    let mut im = Imports::default();
    let id = import(&mut im);
    im.marked(0, id, 1, 1);
    im.marked(1, id, 1, 1);
    im.source_event(0, b"lw:lock:1"); // the source's release, copied below
    assert_eq!(im.foreign(ev(1, 1, "del"), 2), Placed::Pending);
    assert_eq!(im.foreign(ev(1, 1, "set"), 3), Placed::Pending, "the target's own");
    assert_eq!(im.foreign(ev(1, 3, "set"), 3), Placed::Pending, "the target's own");
    im.flipped(id, 4);
    let r = im.source_read(id, 4).unwrap();
    assert_eq!(names(&r.count), ["lw:lock:1:set", "lw:lock:3:set"]);
}

#[test]
fn an_import_over_before_its_first_marker_and_a_key_by_key_one() {
    let mut im = Imports::default();
    let id = import(&mut im);
    assert_eq!(im.flipped(id, 1), Some(0));
    let r = im.source_read(id, 1).unwrap();
    assert!(r.count.is_empty(), "no marker taken: what came is dropped");
    let id = import(&mut im);
    assert_eq!(names(&im.legacy(id)), ["lw:lock:1:set", "lw:lock:1:expire"]);
    assert!(matches!(im.foreign(ev(1, 1, "restore"), 2), Placed::Count(_)));
    assert_eq!(im.settle(1, &[slot(b"lw:lock:1")]), [slot(b"lw:lock:1")]);
    assert_eq!(
        im.foreign(ev(1, 1, "set"), 3),
        Placed::Unplaced { first: true },
        "done with it"
    );
}

#[test]
fn overdue_imports_end_with_their_events_dropped() {
    let mut im = Imports::default();
    let id = import(&mut im);
    im.marked(0, id, 1, 1);
    im.flipped(id, 10);
    assert!(im.overdue(10 + MARKER_LATE_MS - 1).is_empty());
    let r = im.overdue(10 + MARKER_LATE_MS);
    assert_eq!(r.len(), 1);
    assert!(r[0].count.is_empty());
    let id = import(&mut im);
    assert!(im.overdue(IMPORT_IDLE_MS - 1).is_empty());
    assert_eq!(im.overdue(IMPORT_IDLE_MS)[0].id, id);
}

#[test]
fn an_unlisted_import_follows_each_slot_alone_and_an_unmarked_one_drops() {
    let mut im = Imports::default();
    assert_eq!(im.foreign(ev(1, 1, "set"), 0), Placed::Unplaced { first: true });
    let follow = im.place(1, None, |_| Some(0), 0).follow;
    let s = slot(b"lw:lock:1");
    assert_eq!(follow[0].ranges, [(s, s)]);
    im.unmarked(follow[0].id);
    assert_eq!(im.foreign(ev(1, 1, "del"), 1), Placed::Dropped);
}

#[test]
fn a_slot_given_to_a_primary_whose_events_of_it_wait_counts_from_it_once_they_are_placed() {
    // Primary 1's first events of the slot wait for its list of imports when the layout
    // gives it the slot (the churn of a key-by-key resharding, on a slow machine).
    let s = slot(b"lw:lock:1");
    let mut im = Imports::default();
    assert_eq!(im.foreign(ev(1, 1, "set"), 0), Placed::Unplaced { first: true });
    assert!(
        im.settle(1, &[s, s + 1]).eq(&[s + 1]),
        "the other slot counts from 1 now"
    );
    assert!(im.ready().is_empty());
    // Placed as an import from the slot's primary so far, not from 1 itself.
    let follow = im.place(1, None, |_| Some(0), 1).follow;
    assert_eq!((follow[0].source, follow[0].ranges.clone()), (0, vec![(s, s)]));
    assert_eq!(im.foreign(ev(1, 1, "del"), 2), Placed::Pending, "behind the set");
    assert!(im.ready().is_empty(), "the import is not over");
    // The source answers ASK: key by key, the events count, and so does the slot from 1.
    assert_eq!(names(&im.legacy(follow[0].id)), ["lw:lock:1:set", "lw:lock:1:del"]);
    assert_eq!(im.ready(), [(1, vec![s])]);
    assert_eq!(
        im.foreign(ev(1, 1, "set"), 3),
        Placed::Unplaced { first: true },
        "done with it"
    );
}

#[test]
fn events_of_a_slot_their_primary_serves_by_the_time_they_are_placed_count() {
    let mut im = Imports::default();
    assert_eq!(im.foreign(ev(1, 1, "set"), 0), Placed::Unplaced { first: true });
    assert_eq!(im.foreign(ev(1, 1, "expire"), 0), Placed::Unplaced { first: false });
    let placing = im.place(1, None, |_| Some(1), 1);
    assert!(placing.follow.is_empty(), "no import of a primary from itself");
    assert_eq!(names(&placing.count), ["lw:lock:1:set", "lw:lock:1:expire"]);
}

#[test]
fn a_slot_its_target_lists_no_import_of_is_moved_key_by_key_and_its_events_count() {
    // A target that lists its imports (none on a server without atomic migration): what
    // it sent for a slot not among them (a `MIGRATE`'s restore, writes sent with `ASK`)
    // counts at once, and so does what it sends next; no marker is written.
    let mut im = Imports::default();
    assert_eq!(im.foreign(ev(1, 1, "restore"), 2), Placed::Unplaced { first: true });
    assert_eq!(im.foreign(ev(1, 1, "set"), 2), Placed::Unplaced { first: false });
    let placing = im.place(1, Some(vec![vec![(9000, 9999)]]), |_| Some(0), 2);
    assert!(placing.follow.is_empty(), "no marker for a key-by-key migration");
    assert_eq!(names(&placing.count), ["lw:lock:1:restore", "lw:lock:1:set"]);
    assert!(matches!(im.foreign(ev(1, 1, "del"), 3), Placed::Count(_)));
    assert_eq!(im.settle(1, &[slot(b"lw:lock:1")]), [slot(b"lw:lock:1")]);
    // Asked and not answered: each slot followed alone by markers.
    assert_eq!(im.foreign(ev(1, 1, "set"), 4), Placed::Unplaced { first: true });
    assert_eq!(im.place(1, None, |_| Some(0), 4).follow.len(), 1);
}
