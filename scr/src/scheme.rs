//! The redundancy scheme (`SCR_COPY_TYPE`, the `TYPE` of a redundancy
//! descriptor): the one enum every layer of the workspace names a scheme
//! with — configuration, persisted descriptors, the collective redundancy
//! code, the scavenge commands and the testbed's scenarios.
//!
//! The scheme carries no parameters. RS's parity count travels beside it as
//! the descriptor's `SET_FAILURES`, exactly as SCR stores the two (`TYPE`
//! and `SET_FAILURES` are separate keys), so the enum maps one-to-one onto
//! SCR's text and a descriptor never holds two copies of k that could
//! disagree.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A redundancy scheme (`SCR_COPY_*`; kvtree key `TYPE`). Ordered as SCR
/// lists them (and as result tables print them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CopyType {
    /// `SINGLE` (`SCR_COPY_SINGLE`): one copy, no redundancy; any lost
    /// member loses the dataset.
    Single,
    /// `PARTNER` (`SCR_COPY_PARTNER`): a full copy of each member's files on
    /// its right neighbour in the set.
    Partner,
    /// `XOR` (`SCR_COPY_XOR`): RAID-5-like parity across a set; survives one
    /// lost member per set.
    Xor,
    /// `RS`: Reed–Solomon across a set; survives any `SET_FAILURES` lost
    /// members per set.
    Rs,
}

impl CopyType {
    /// The four schemes, in SCR's (and the result tables') order.
    pub const ALL: [CopyType; 4] = [
        CopyType::Single,
        CopyType::Partner,
        CopyType::Xor,
        CopyType::Rs,
    ];

    /// The text SCR writes (`SINGLE`, `PARTNER`, `XOR`, `RS`).
    pub const fn as_str(self) -> &'static str {
        match self {
            CopyType::Single => "SINGLE",
            CopyType::Partner => "PARTNER",
            CopyType::Xor => "XOR",
            CopyType::Rs => "RS",
        }
    }

    /// Parse the text SCR writes, exactly (the `TYPE` of a stored
    /// descriptor: a reader accepts what SCR writes and nothing else).
    pub fn parse(s: &str) -> Option<CopyType> {
        CopyType::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Parse a scheme name as a person writes it, in any case (config files,
    /// `SCR_COPY_TYPE`, command lines). `FILE` is not a scheme.
    pub fn parse_ignore_case(s: &str) -> Option<CopyType> {
        CopyType::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s))
    }
}

impl fmt::Display for CopyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scheme name that is none of `SINGLE`, `PARTNER`, `XOR`, `RS`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scheme {value:?} (SINGLE, PARTNER, XOR, RS)")]
pub struct UnknownCopyType {
    /// The text given.
    pub value: String,
}

/// Case-insensitive and trimmed, for command lines and scenario files.
impl FromStr for CopyType {
    type Err = UnknownCopyType;

    fn from_str(s: &str) -> Result<CopyType, UnknownCopyType> {
        CopyType::parse_ignore_case(s.trim()).ok_or_else(|| UnknownCopyType {
            value: s.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_and_serde_uses_scr_text() {
        for c in CopyType::ALL {
            assert_eq!(CopyType::parse(c.as_str()), Some(c));
            assert_eq!(c.to_string(), c.as_str());
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.as_str()));
            assert_eq!(serde_json::from_str::<CopyType>(&json).unwrap(), c);
        }
    }

    #[test]
    fn stored_text_is_exact_but_people_may_use_any_case() {
        assert_eq!(CopyType::parse("xor"), None);
        assert_eq!(CopyType::parse("FILE"), None);
        assert_eq!(CopyType::parse_ignore_case("xor"), Some(CopyType::Xor));
        assert_eq!(" Partner ".parse::<CopyType>(), Ok(CopyType::Partner));
        let err = "RAID6".parse::<CopyType>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown scheme \"RAID6\" (SINGLE, PARTNER, XOR, RS)"
        );
    }

    #[test]
    fn order_is_scr_order() {
        let mut sorted = CopyType::ALL;
        sorted.sort();
        assert_eq!(sorted, CopyType::ALL);
    }
}
