//! What members of a set lost, and which losses a scheme can rebuild (the
//! check at the start of `scr_reddesc_recover()`). Pure functions: every
//! member computes the same verdict from the same `lost` vector without
//! communicating.

use crate::scheme::CopyType;

/// What one member of a set lost, as found at restart (a file missing, of
/// the wrong size, or failing its CRC32): its own application files, the
/// redundancy data it holds for others, or both.
///
/// PARTNER keeps the two apart: a member holds copies of its left
/// neighbour's files, so a damaged own file does not cost the copies it
/// holds, and a damaged copy does not cost its own files. XOR and RS compute
/// a member's parity from everything, so for them any loss is a whole loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct MemberLoss {
    /// Some of the member's own application files are missing or damaged.
    pub own: bool,
    /// Some of the redundancy data it holds is missing or damaged (PARTNER:
    /// the copies of its left neighbour's files; XOR/RS: its parity file).
    pub held: bool,
}

impl MemberLoss {
    /// Nothing lost.
    pub const NONE: MemberLoss = MemberLoss {
        own: false,
        held: false,
    };
    /// Only its own application files.
    pub const OWN: MemberLoss = MemberLoss {
        own: true,
        held: false,
    };
    /// Only the redundancy data it holds.
    pub const HELD: MemberLoss = MemberLoss {
        own: false,
        held: true,
    };
    /// Everything: a lost node, a missing rank, a rank with no record.
    pub const ALL: MemberLoss = MemberLoss {
        own: true,
        held: true,
    };

    /// [`MemberLoss::ALL`] when `lost`, else [`MemberLoss::NONE`] (a member
    /// that is there or not at all).
    pub const fn whole(lost: bool) -> MemberLoss {
        if lost {
            MemberLoss::ALL
        } else {
            MemberLoss::NONE
        }
    }

    /// Whether anything was lost.
    pub const fn any(self) -> bool {
        self.own || self.held
    }

    /// What either loss lost.
    pub const fn union(self, other: MemberLoss) -> MemberLoss {
        MemberLoss {
            own: self.own || other.own,
            held: self.held || other.held,
        }
    }

    /// Whether both its own files and what it holds were lost.
    pub const fn is_whole(self) -> bool {
        self.own && self.held
    }

    /// How `scheme` sees this loss: PARTNER as it is; the others rebuild a
    /// member whole, so any loss is [`MemberLoss::ALL`].
    pub const fn as_seen_by(self, scheme: CopyType) -> MemberLoss {
        match scheme {
            CopyType::Partner => self,
            _ => MemberLoss::whole(self.any()),
        }
    }
}

/// The group rank holding the PARTNER copies of `member`'s files in a set
/// of `n` (its right neighbour; `n` ≥ 1).
pub const fn partner_holder(member: usize, n: usize) -> usize {
    (member + 1) % n
}

/// Parity members per member of a coded set: 1 for XOR, `set_failures`
/// for RS, 0 for SINGLE and PARTNER (which keep no parity).
pub const fn parity_count(scheme: CopyType, set_failures: usize) -> usize {
    match scheme {
        CopyType::Xor => 1,
        CopyType::Rs => set_failures,
        CopyType::Single | CopyType::Partner => 0,
    }
}

/// The members of a set whose lost data `scheme` cannot rebuild, ascending
/// (empty: the set is recoverable; the check at the start of
/// `scr_reddesc_recover()`). SINGLE rebuilds nothing; PARTNER restores a
/// member's own files iff the member holding their copies
/// ([`partner_holder`]) did not lose what it holds, and re-creates copies a
/// member lost from their owner (whose own files are then intact, or the
/// owner itself is listed); XOR rebuilds one lost member, RS any
/// `set_failures` (SET_FAILURES, read for RS only) — for them a member that
/// lost anything is lost whole.
pub fn unrecoverable_members(
    scheme: CopyType,
    set_failures: usize,
    lost: &[MemberLoss],
) -> Vec<usize> {
    let n = lost.len();
    let any: Vec<usize> = (0..n).filter(|&i| lost[i].any()).collect();
    if any.is_empty() {
        return any;
    }
    let k = parity_count(scheme, set_failures);
    let tolerated = match scheme {
        CopyType::Single => false,
        CopyType::Partner => {
            if n < 2 {
                false
            } else {
                return (0..n)
                    .filter(|&i| lost[i].own && lost[partner_holder(i, n)].held)
                    .collect();
            }
        }
        CopyType::Xor => n >= 2 && any.len() <= k,
        CopyType::Rs => n > k && n <= 256 && any.len() <= k,
    };
    if tolerated {
        Vec::new()
    } else {
        any
    }
}

/// Whether a set whose members lost `lost[i]` can be rebuilt: no member is
/// in [`unrecoverable_members`].
pub fn recoverable(scheme: CopyType, set_failures: usize, lost: &[MemberLoss]) -> bool {
    unrecoverable_members(scheme, set_failures, lost).is_empty()
}
