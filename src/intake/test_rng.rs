//! A small deterministic generator (xorshift) for the intake's tests on generated input.

pub(crate) struct Xorshift(pub(crate) u64);

impl Xorshift {
    /// The next number below `n` (> 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}
