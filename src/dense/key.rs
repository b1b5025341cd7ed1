//! A key's bytes as a map keeps them: up to [`INLINE`] bytes inside the 24-byte value itself
//! (no allocation, no pointer to follow when a lookup compares it), longer ones boxed. The
//! variant says the length, so no byte is spent on it.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

/// The longest key kept inline.
pub const INLINE: usize = 23;

macro_rules! repr {
    ($($v:ident $n:literal),*) => {
        /// One variant per inline length; `Long` only past [`INLINE`] bytes.
        #[derive(Clone)]
        enum Repr {
            Long(Box<[u8]>),
            $($v([u8; $n]),)*
        }

        impl Repr {
            fn of(b: &[u8]) -> Repr {
                match b.len() {
                    $($n => match <[u8; $n]>::try_from(b) {
                        Ok(a) => Repr::$v(a),
                        Err(_) => Repr::Long(b.into()),
                    },)*
                    _ => Repr::Long(b.into()),
                }
            }

            fn bytes(&self) -> &[u8] {
                match self {
                    Repr::Long(b) => b,
                    $(Repr::$v(a) => a,)*
                }
            }
        }
    };
}

repr!(
    I0 0, I1 1, I2 2, I3 3, I4 4, I5 5, I6 6, I7 7, I8 8, I9 9, I10 10, I11 11, I12 12, I13 13,
    I14 14, I15 15, I16 16, I17 17, I18 18, I19 19, I20 20, I21 21, I22 22, I23 23
);

/// A key's exact bytes; hashes, compares and borrows as the `[u8]` it holds.
#[derive(Clone)]
pub struct Key(Repr);

const _: () = assert!(std::mem::size_of::<Key>() == 24);

impl Key {
    pub fn new(bytes: &[u8]) -> Key {
        Key(Repr::of(bytes))
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl Deref for Key {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl Borrow<[u8]> for Key {
    fn borrow(&self) -> &[u8] {
        self.0.bytes()
    }
}

impl From<Box<[u8]>> for Key {
    fn from(b: Box<[u8]>) -> Key {
        if b.len() > INLINE {
            Key(Repr::Long(b))
        } else {
            Key::new(&b)
        }
    }
}

impl From<Vec<u8>> for Key {
    fn from(v: Vec<u8>) -> Key {
        Key::from(v.into_boxed_slice())
    }
}

impl From<&Key> for Box<[u8]> {
    fn from(k: &Key) -> Box<[u8]> {
        k.as_bytes().into()
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

impl<const N: usize> PartialEq<&[u8; N]> for Key {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.as_bytes() == &other[..]
    }
}

impl Hash for Key {
    /// As `[u8]` hashes, so a lookup by `&[u8]` finds it.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn every_length_keeps_its_bytes_and_hashes_as_a_slice() {
        let s = foldhash::fast::FixedState::default();
        for n in 0..=64usize {
            let b: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
            let k = Key::new(&b);
            assert_eq!(k.as_bytes(), &b[..]);
            assert_eq!(s.hash_one(&k), s.hash_one(&b[..]), "length {n}");
            assert_eq!(Key::from(b.clone()), k);
            assert_eq!(matches!(k.0, Repr::Long(_)), n > INLINE, "length {n}");
        }
        assert_ne!(Key::new(b"lock:a"), Key::new(b"lock:b"));
        assert_ne!(Key::new(b"lock:a"), Key::new(b"lock:a\0"));
    }
}
