//! Settings with a closed set of words (`notifications`, `format`, `start_at`, `multiline`): each is an
//! enum deriving clap's `ValueEnum`, so its words are written once and both the config file
//! (through `Cx::choice`) and the command line (through clap) accept exactly those words.

use clap::ValueEnum;

use super::raw::S;
use super::{ConfigError, Cx};

/// Declares a choice enum: `Debug`, `Copy`, `Eq`, `Default` (mark one variant `#[default]`)
/// and `clap::ValueEnum`, each variant with its one word, and `as_str` returning that word.
macro_rules! choice_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
        pub enum $name {
            $($(#[$vm])* #[value(name = $s)] $v),+
        }

        impl $name {
            /// The word for this choice, as the config file and the command line write it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$v => $s),+
                }
            }
        }
    };
}
pub(super) use choice_enum;

/// The words of a choice, in declaration order: "auto, json, logfmt, text".
fn words<T: ValueEnum>() -> String {
    T::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|p| p.get_name().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Cx<'_> {
    /// The choice `v` names, or `T`'s default when the key is absent; an unknown word is an
    /// error listing the allowed ones.
    pub(super) fn choice<T: ValueEnum + Default>(&self, v: Option<&S<String>>, key: &str) -> Result<T, ConfigError> {
        let Some(v) = v else { return Ok(T::default()) };
        T::from_str(v.get_ref(), false).map_err(|_| {
            self.err(
                Some(&v.span()),
                key,
                format!("`{}` is not one of {}", v.get_ref(), words::<T>()),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{LogFormat, Multiline, Notifications, StartAt};
    use super::*;

    /// `as_str` and the word clap and the config accept are the same, for every variant.
    fn round_trips<T: ValueEnum + Copy + PartialEq + std::fmt::Debug>(as_str: fn(T) -> &'static str) {
        for v in T::value_variants() {
            assert_eq!(T::from_str(as_str(*v), false), Ok(*v));
        }
    }

    #[test]
    fn words_are_the_value_enum_names() {
        round_trips(Notifications::as_str);
        round_trips(LogFormat::as_str);
        round_trips(StartAt::as_str);
        round_trips(Multiline::as_str);
        assert_eq!(words::<Multiline>(), "auto, off");
        assert_eq!(words::<Notifications>(), "auto, require, off, configure");
        assert_eq!(words::<LogFormat>(), "auto, json, logfmt, text");
        assert_eq!(words::<StartAt>(), "end, beginning");
        assert_eq!(Notifications::default(), Notifications::Auto);
        assert_eq!(LogFormat::default(), LogFormat::Auto);
        assert_eq!(StartAt::default(), StartAt::End);
    }
}
