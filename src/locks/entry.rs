//! What the lock table remembers of one lock, packed in 24 bytes beside its key (the size
//! that decides the table's memory): the owner hash, then two words holding its times (40-bit
//! signed milliseconds on the sampler clock, ±17 years around its start: clamped beyond), the
//! pass that last read it (24 bits, kept within [`PASS_WINDOW`] of the current one by
//! [`LockEntry::pin`]), its event count, its flags and which of its namespace's learnt TTLs
//! its own last read after a renewal found (its TTL class, 3 bits).

use std::fmt;

/// `LockEntry::flags`: a read of owner and TTL is asked for or in flight after an event (a
/// renewal's TTL is then that read's, not an estimate).
pub(super) const READING: u8 = 1;
/// `LockEntry::flags`: a `set` came whose owner was not read (budget spent, or the read
/// failed): the next read that finds another owner is a handoff, not a missed event.
pub(super) const OWNER_UNSURE: u8 = 2;
/// `LockEntry::flags`: the last event was a renewal whose TTL was taken, not read (an owner
/// read asked one event before still answers for the lock).
pub(super) const ESTIMATED: u8 = 4;
/// `LockEntry::flags`: a `set` of the lock came and no `expire` after it yet: unless one
/// comes before its owner read answers, the TTL is read (a `SET` without `PX` removed it).
pub(super) const AWAIT_TTL: u8 = 8;
/// `LockEntry::flags`: announced by an event, owner and TTL not read yet.
pub(super) const UNREAD: u8 = 16;
/// The flag byte's bits that are flags; the three above them hold the lock's TTL class.
const FLAG_BITS: u8 = 0b1_1111;
/// Where the TTL class sits in the flag byte, and its bits there (classes 0 to 7).
const CLASS_SHIFT: u32 = 5;
const CLASS_BITS: u8 = 0b111;

/// `LockEntry::expires_ms` of a key without expiry.
pub(super) const NO_EXPIRY: i64 = i64::MAX;

/// The range of a stored time: 40-bit two's complement milliseconds.
const TIME_MAX: i64 = (1 << 39) - 1;
const TIME_MIN: i64 = -(1 << 39);
/// The stored pass number's bits: a pass is told from the current one as long as fewer
/// than 2^24 passes lie between them.
const PASS_MASK: u32 = (1 << 24) - 1;
/// How far back a stored pass is kept exact: the table pins older ones here every
/// `PASS_WINDOW` passes ([`LockEntry::pin`]), so none is ever 2^24 behind; an entry not read
/// for longer (a walk failing for days) reads as read `PASS_WINDOW` passes ago.
pub(super) const PASS_WINDOW: u32 = 1 << 22;
/// The time's shift in its word, and the bits below it (event count and flags, or the pass).
const LOW: u32 = 24;
const BELOW_TIME: u64 = (1 << LOW) - 1;
/// The event count's bits in `held`.
const SEQ_BITS: u64 = 0xFFFF << 8;

/// What is remembered of one lock.
#[derive(Clone)]
pub struct LockEntry {
    /// Seeded (per-process random) hash of the owner token: comparable, not reversible offline.
    pub owner: u64,
    /// Since when the current owner holds it, at the latest (40 bits) | event count (16) |
    /// TTL class (3) | flags (5).
    held: u64,
    /// When it expires, from the last PTTL read (40 bits; `TIME_MAX`: no expiry) | the pass
    /// that last read it (24).
    read: u64,
}

fn time(ms: i64) -> u64 {
    (ms.clamp(TIME_MIN, TIME_MAX) as u64) << LOW
}

fn ms(word: u64) -> i64 {
    (word as i64) >> LOW
}

impl LockEntry {
    /// A lock owned by `owner` (0 when `UNREAD`) since `since_ms`, expiring at `expires_ms`
    /// (`NO_EXPIRY`: never), read by `pass`, no event counted yet.
    pub(super) fn new(owner: u64, since_ms: i64, expires_ms: i64, pass: u32, flags: u8) -> Self {
        let mut e = LockEntry {
            owner,
            held: time(since_ms) | u64::from(flags),
            read: 0,
        };
        e.set_expires_ms(expires_ms);
        e.set_pass(pass);
        e
    }

    /// Since when (ms on the sampler clock) the current owner holds it, at the latest.
    pub fn since_ms(&self) -> i64 {
        ms(self.held)
    }

    pub(super) fn set_since_ms(&mut self, since_ms: i64) {
        self.held = time(since_ms) | (self.held & BELOW_TIME);
    }

    /// When (sampler clock, ms) the lock expires, from the last PTTL read; `NO_EXPIRY` for
    /// a key without one. An expiry more than 17 years ahead is kept as 17 years.
    pub(super) fn expires_ms(&self) -> i64 {
        match ms(self.read) {
            TIME_MAX => NO_EXPIRY,
            t => t,
        }
    }

    pub(super) fn set_expires_ms(&mut self, expires_ms: i64) {
        let t = if expires_ms == NO_EXPIRY {
            TIME_MAX
        } else {
            expires_ms.min(TIME_MAX - 1)
        };
        self.read = time(t) | (self.read & BELOW_TIME);
    }

    /// The pass that last read the key, given the pass `now` (no later than `now`).
    pub(super) fn pass_at(&self, now: u32) -> u32 {
        let stored = (self.read as u32) & PASS_MASK;
        now.wrapping_sub(now.wrapping_sub(stored) & PASS_MASK)
    }

    pub(super) fn set_pass(&mut self, pass: u32) {
        self.read = (self.read & !u64::from(PASS_MASK)) | u64::from(pass & PASS_MASK);
    }

    /// At pass `now`: a pass read more than `PASS_WINDOW` ago is put at `PASS_WINDOW` ago.
    pub(super) fn pin(&mut self, now: u32) {
        if now.wrapping_sub(self.pass_at(now)) > PASS_WINDOW {
            self.set_pass(now.wrapping_sub(PASS_WINDOW));
        }
    }

    /// Events seen for the key (wrapping): a read answered after an event may be stale.
    pub(super) fn seq(&self) -> u16 {
        (self.held >> 8) as u16
    }

    /// Count one more event; returns the new count.
    pub(super) fn bump_seq(&mut self) -> u16 {
        let seq = self.seq().wrapping_add(1);
        self.held = (self.held & !SEQ_BITS) | (u64::from(seq) << 8);
        seq
    }

    /// `READING`, `OWNER_UNSURE`, `ESTIMATED`, `AWAIT_TTL`, `UNREAD`.
    pub(super) fn flags(&self) -> u8 {
        self.held as u8 & FLAG_BITS
    }

    /// Sets the flags; the TTL class stays.
    pub(super) fn set_flags(&mut self, flags: u8) {
        self.held = (self.held & !u64::from(FLAG_BITS)) | u64::from(flags & FLAG_BITS);
    }

    /// Which of the namespace's learnt TTLs this lock's own last read after a renewal found
    /// (1 to 7; 0: none known): what a renewal of it is taken to set again.
    pub(super) fn ttl_class(&self) -> u8 {
        (self.held as u8) >> CLASS_SHIFT
    }

    pub(super) fn set_ttl_class(&mut self, class: u8) {
        let byte = (self.held as u8 & FLAG_BITS) | ((class & CLASS_BITS) << CLASS_SHIFT);
        self.held = (self.held & !0xFF) | u64::from(byte);
    }

    /// Whether the owner and TTL are still to be read (an entry announced by an event).
    pub(super) fn unread(&self) -> bool {
        self.flags() & UNREAD != 0
    }

    /// Whether the owner and TTL have been read (an entry announced by an event
    /// waits for its read).
    pub fn known(&self) -> bool {
        !self.unread()
    }

    /// Whether a read asked for at event count `seq` still answers for the lock: asked at
    /// this count, or one before when the event since was a renewal whose TTL was taken (it
    /// leaves the owner as it was).
    pub(super) fn answered_by(&self, seq: u16) -> bool {
        let now = self.seq();
        now == seq || (self.flags() & ESTIMATED != 0 && now.wrapping_sub(1) == seq)
    }

    /// Milliseconds left at `now_ms` (-1: no expiry; 0 once past due), from the last read.
    pub fn pttl_at(&self, now_ms: i64) -> i64 {
        match self.expires_ms() {
            NO_EXPIRY => -1,
            at => (at - now_ms).max(0),
        }
    }
}

impl fmt::Debug for LockEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockEntry")
            .field("owner", &self.owner)
            .field("since_ms", &self.since_ms())
            .field("expires_ms", &self.expires_ms())
            .field("pass_low_bits", &((self.read as u32) & PASS_MASK))
            .field("seq", &self.seq())
            .field("flags", &self.flags())
            .field("ttl_class", &self.ttl_class())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_their_values_apart() {
        assert_eq!(std::mem::size_of::<LockEntry>(), 24);
        let mut e = LockEntry::new(7, -30_000, 90_000, 5, UNREAD | READING);
        assert_eq!(
            (e.owner, e.since_ms(), e.expires_ms(), e.pass_at(5)),
            (7, -30_000, 90_000, 5)
        );
        assert_eq!((e.seq(), e.flags()), (0, UNREAD | READING));
        assert!(e.unread() && !e.known());
        for _ in 0..70_000 {
            e.bump_seq();
        }
        assert_eq!(e.seq(), (70_000u32 % 65_536) as u16);
        e.set_flags(AWAIT_TTL);
        e.set_since_ms(123_456_789_012);
        e.set_expires_ms(NO_EXPIRY);
        e.set_pass(u32::MAX);
        assert_eq!(e.since_ms(), 123_456_789_012);
        assert_eq!(e.expires_ms(), NO_EXPIRY);
        assert_eq!(e.pttl_at(0), -1);
        assert_eq!((e.seq(), e.flags()), ((70_000u32 % 65_536) as u16, AWAIT_TTL));
        e.set_ttl_class(7);
        e.set_flags(READING | UNREAD);
        assert_eq!(
            (e.ttl_class(), e.flags()),
            (7, READING | UNREAD),
            "flags leave the class"
        );
        e.set_ttl_class(3);
        assert_eq!(
            (e.ttl_class(), e.flags(), e.seq()),
            (3, READING | UNREAD, (70_000u32 % 65_536) as u16)
        );
        assert_eq!(e.pass_at(u32::MAX), u32::MAX);
        // Pass numbers wrap: read at u32::MAX, two passes later it is still that pass.
        assert_eq!(e.pass_at(1), u32::MAX);
        assert_eq!(1u32.wrapping_sub(e.pass_at(1)), 2);
    }

    #[test]
    fn times_out_of_range_are_clamped_not_wrapped() {
        let year_ms: i64 = 365 * 24 * 3_600_000;
        let e = LockEntry::new(1, i64::MIN, 40 * year_ms, 0, 0);
        assert_eq!(e.since_ms(), TIME_MIN);
        // An expiry 40 years ahead is kept as 17 years ahead, still an expiry.
        assert_eq!(e.expires_ms(), TIME_MAX - 1);
        assert!(e.pttl_at(0) > 17 * year_ms);
        let e = LockEntry::new(1, 0, -5, 0, 0);
        assert_eq!(e.pttl_at(1_000), 0);
    }

    #[test]
    fn pass_is_the_latest_with_its_low_bits() {
        let mut e = LockEntry::new(1, 0, 0, 0, 0);
        e.set_pass(40_000_000);
        assert_eq!(e.pass_at(40_000_000), 40_000_000);
        assert_eq!(e.pass_at(40_000_010), 40_000_000);
        assert_eq!(e.pass_at(40_000_000 + PASS_MASK), 40_000_000);
        // Pinned at most PASS_WINDOW back, it never reaches the 2^24 that would alias it.
        e.pin(40_000_000 + PASS_WINDOW);
        assert_eq!(e.pass_at(40_000_000 + PASS_WINDOW), 40_000_000);
        e.pin(40_000_000 + 3 * PASS_WINDOW);
        assert_eq!(e.pass_at(40_000_000 + 3 * PASS_WINDOW), 40_000_000 + 2 * PASS_WINDOW);
        assert_eq!(e.pass_at(40_000_000 + 4 * PASS_WINDOW), 40_000_000 + 2 * PASS_WINDOW);
    }
}
