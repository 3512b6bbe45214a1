//! Serde through `Display` / `FromStr`: a typed value written as the text a
//! user types (`cifar10:/data/cifar`), parsed (and so checked) when read.

use std::fmt::Display;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serializer};

/// Writes `value` as its text.
pub fn serialize<T: Display, S: Serializer>(value: &T, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(value)
}

/// Parses the text.
pub fn deserialize<'de, T, D>(deserializer: D) -> Result<T, D::Error>
where
    T: FromStr,
    T::Err: Display,
    D: Deserializer<'de>,
{
    let text = String::deserialize(deserializer)?;
    text.parse().map_err(serde::de::Error::custom)
}

/// `FromStr` (case-insensitive) and `Display` of unit enums through their
/// serde names, so the command line, configs and results spell them alike.
macro_rules! serde_enum_text {
    ($($ty:ty),*) => {$(
        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(text: &str) -> Result<Self, String> {
                <$ty as serde::Deserialize>::deserialize(
                    serde::de::value::StrDeserializer::<serde::de::value::Error>::new(
                        &text.to_ascii_lowercase(),
                    ),
                )
                .map_err(|e| e.to_string())
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                // Invariant: unit variants always serialise to a string.
                let value = serde_json::to_value(self).expect("unit enum serialises");
                f.write_str(value.as_str().unwrap_or_default())
            }
        }
    )*};
}
pub(crate) use serde_enum_text;
