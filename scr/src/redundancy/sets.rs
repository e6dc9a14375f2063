//! Choosing redundancy sets and partners across failure groups, as
//! `scr_reddesc_create_xor()` / `scr_reddesc_create_partner()` and
//! `scr_set_partners()` do, as a pure function of each rank's failure group.
//!
//! # Rule
//! Ranks are listed group by group (groups in order of their lowest rank,
//! ranks increasing within a group) and dealt round-robin into `m` sets, so a
//! group's ranks land in distinct sets whenever the group has at most `m`
//! ranks. `m` is as large as SET_SIZE allows (sets of SET_SIZE to
//! 2·SET_SIZE − 1 members, like SCR), raised up to the size of the largest
//! group when that is needed to keep one rank per group in each set — but
//! never so far that a set drops below `min_members` (2 for XOR, k + 1 for
//! RS: a smaller set protects nothing). With 4 nodes of 16 ranks and
//! SET_SIZE 8 this gives 16 sets of 4 ranks on 4 nodes, as SCR's split by
//! rank-on-node does. Passing `min_members = set_size` instead insists on
//! SET_SIZE and accepts shared groups.
//!
//! Whenever a set must hold several ranks of one group, [`SetPlan`] says so
//! (`max_shared`), so the caller can warn (XOR then cannot survive the loss
//! of that group; RS with SET_FAILURES = k can if at most k share it) or
//! refuse.

use std::collections::BTreeMap;

use super::RedundancyError;

/// Sets chosen for one redundancy descriptor: which world ranks form each
/// set, in ring order (the GROUP_ID / GROUP_RANK / GROUP_SIZE fields of the
/// redundancy descriptor hash, and the group communicator's order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetPlan {
    /// World ranks of each set in set-rank order (increasing world rank);
    /// sets ordered by their lowest rank.
    pub sets: Vec<Vec<usize>>,
    /// For each world rank: (set index, rank within the set).
    pub assignment: Vec<(usize, usize)>,
    /// For each set: the most ranks of it that share one failure group
    /// (1 = every member in its own group).
    pub max_shared: Vec<usize>,
}

impl SetPlan {
    /// SCR's id of a set: its lowest world rank (the `<groupid>` in
    /// `<grank+1>_of_<gsize>_in_<groupid>.xor`).
    pub fn set_id(&self, set: usize) -> Option<usize> {
        self.sets.get(set).and_then(|s| s.first().copied())
    }

    /// World rank of `rank`'s left neighbour in its set's ring (lhs_rank_world).
    pub fn left(&self, rank: usize) -> Option<usize> {
        let &(set, pos) = self.assignment.get(rank)?;
        let members = &self.sets[set];
        Some(members[(pos + members.len() - 1) % members.len()])
    }

    /// World rank of `rank`'s right neighbour in its set's ring (rhs_rank_world).
    pub fn right(&self, rank: usize) -> Option<usize> {
        let &(set, pos) = self.assignment.get(rank)?;
        let members = &self.sets[set];
        Some(members[(pos + 1) % members.len()])
    }

    /// Whether every set survives the loss of any one whole failure group
    /// when the scheme tolerates `failures` lost members per set (XOR: 1,
    /// RS: SET_FAILURES).
    pub fn survives_group_loss(&self, failures: usize) -> bool {
        self.max_shared.iter().all(|&shared| shared <= failures)
    }

    /// The sets (by index) holding more than one rank of some failure group.
    pub fn sets_sharing_a_group(&self) -> impl Iterator<Item = usize> + '_ {
        self.max_shared
            .iter()
            .enumerate()
            .filter(|(_, &shared)| shared > 1)
            .map(|(set, _)| set)
    }
}

/// Ranks grouped by failure group: groups in order of their lowest rank,
/// ranks increasing inside each.
fn ranks_by_group<G: Ord>(groups: &[G]) -> Vec<Vec<usize>> {
    let mut by_group: BTreeMap<&G, Vec<usize>> = BTreeMap::new();
    for (rank, group) in groups.iter().enumerate() {
        by_group.entry(group).or_default().push(rank);
    }
    let mut lists: Vec<Vec<usize>> = by_group.into_values().collect();
    lists.sort_by_key(|ranks| ranks[0]);
    lists
}

/// Divides ranks `0..groups.len()` into sets; `groups[rank]` is the rank's
/// failure group (node name, switch, power supply: SCR_GROUP). `set_size` is
/// SET_SIZE; `min_members` the smallest set the scheme can use (see the
/// module documentation for the rule). Deterministic: the same input always
/// gives the same plan.
pub fn build_sets<G: Ord>(
    groups: &[G],
    set_size: usize,
    min_members: usize,
) -> Result<SetPlan, RedundancyError> {
    if set_size == 0 || min_members == 0 {
        return Err(RedundancyError::ZeroSetSize);
    }
    let min_members = min_members.min(set_size);
    let total = groups.len();
    let lists = ranks_by_group(groups);
    let largest_group = lists.iter().map(Vec::len).max().unwrap_or(0);
    let by_size = (total / set_size).max(1);
    let by_min = (total / min_members).max(1);
    let m = by_size.max(largest_group.min(by_min));
    assert!(m >= 1 && (total < min_members || total / m >= min_members));

    let mut sets: Vec<Vec<usize>> = vec![Vec::new(); m.min(total.max(1))];
    let count = sets.len();
    for (position, &rank) in lists.iter().flatten().enumerate() {
        sets[position % count].push(rank);
    }
    sets.retain(|s| !s.is_empty());
    for set in &mut sets {
        set.sort_unstable();
    }
    sets.sort_by_key(|s| s[0]);

    let mut assignment = vec![(0, 0); total];
    let mut max_shared = Vec::with_capacity(sets.len());
    for (index, set) in sets.iter().enumerate() {
        let mut per_group: BTreeMap<&G, usize> = BTreeMap::new();
        for (pos, &rank) in set.iter().enumerate() {
            assignment[rank] = (index, pos);
            *per_group.entry(&groups[rank]).or_default() += 1;
        }
        max_shared.push(per_group.into_values().max().unwrap_or(0));
    }
    assert_eq!(sets.iter().map(Vec::len).sum::<usize>(), total);
    Ok(SetPlan {
        sets,
        assignment,
        max_shared,
    })
}

/// Partners for the PARTNER scheme: each rank copies its files to the rank
/// `hop_distance` places to its right (HOP_DISTANCE) in a ring of ranks from
/// distinct failure groups, and stores the copy of the rank as far to its
/// left (`scr_reddesc_create_partner()`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartnerPlan {
    /// The rings (one rank per failure group where possible): SCR's split of
    /// scr_comm_world by rank on node.
    pub sets: SetPlan,
    /// For each rank: the rank whose files it stores (lhs_rank_world).
    pub lhs: Vec<usize>,
    /// For each rank: the rank storing its files (rhs_rank_world).
    pub rhs: Vec<usize>,
    /// Ranks whose copy lands in their own failure group (or on
    /// themselves): their data does not survive the loss of that group.
    pub same_group: Vec<usize>,
}

/// Chooses PARTNER pairs for ranks with failure groups `groups` at
/// `hop_distance` (>= 1) along rings of ranks from distinct groups.
pub fn partner_plan<G: Ord>(
    groups: &[G],
    hop_distance: usize,
) -> Result<PartnerPlan, RedundancyError> {
    if hop_distance == 0 {
        return Err(RedundancyError::ZeroHopDistance);
    }
    // As large as the groups allow: one ring per "rank on node", like SCR.
    let sets = build_sets(groups, usize::MAX, 2)?;
    let total = groups.len();
    let mut lhs = vec![0; total];
    let mut rhs = vec![0; total];
    for set in &sets.sets {
        let len = set.len();
        let hop = hop_distance % len;
        for (pos, &rank) in set.iter().enumerate() {
            rhs[rank] = set[(pos + hop) % len];
            lhs[rank] = set[(pos + len - hop) % len];
        }
    }
    let same_group: Vec<usize> = (0..total)
        .filter(|&r| rhs[r] == r || groups[rhs[r]] == groups[r])
        .collect();
    assert!((0..total).all(|r| lhs[rhs[r]] == r), "lhs inverts rhs");
    Ok(PartnerPlan {
        sets,
        lhs,
        rhs,
        same_group,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Uneven layouts: up to 300 ranks over up to 40 groups of random sizes,
    /// ranks of a group not necessarily contiguous.
    fn layout() -> impl Strategy<Value = Vec<u32>> {
        (1usize..40).prop_flat_map(|groups| proptest::collection::vec(0..groups as u32, 1..300))
    }

    proptest! {
        #[test]
        fn every_rank_is_in_exactly_one_set_and_the_rule_holds(
            groups in layout(),
            set_size in 1usize..20,
            min_members in 1usize..6,
        ) {
            let plan = build_sets(&groups, set_size, min_members).expect("plan");
            let total = groups.len();
            let again = build_sets(&groups, set_size, min_members).expect("plan");
            prop_assert_eq!(&plan, &again, "deterministic");

            let mut seen = vec![0; total];
            for (index, set) in plan.sets.iter().enumerate() {
                prop_assert!(set.windows(2).all(|w| w[0] < w[1]), "ring order");
                for (pos, &rank) in set.iter().enumerate() {
                    seen[rank] += 1;
                    prop_assert_eq!(plan.assignment[rank], (index, pos));
                }
                let mut counts = BTreeMap::new();
                for &rank in set {
                    *counts.entry(groups[rank]).or_insert(0usize) += 1;
                }
                prop_assert_eq!(plan.max_shared[index], *counts.values().max().expect("nonempty"));
            }
            prop_assert!(seen.iter().all(|&n| n == 1), "each rank once");

            let sizes: Vec<usize> = plan.sets.iter().map(Vec::len).collect();
            let (lo, hi) = (*sizes.iter().min().expect("a set"), *sizes.iter().max().expect("a set"));
            prop_assert!(hi - lo <= 1, "balanced sizes {:?}", sizes);
            let floor = min_members.min(set_size);
            if total >= floor {
                prop_assert!(lo >= floor, "set of {} below minimum {}", lo, floor);
            } else {
                prop_assert_eq!(plan.sets.len(), 1, "all ranks together when too few");
            }
            let largest = {
                let mut c = BTreeMap::new();
                for g in &groups { *c.entry(g).or_insert(0usize) += 1; }
                *c.values().max().expect("a group")
            };
            if largest <= total / floor {
                prop_assert!(plan.survives_group_loss(1), "distinct groups were possible");
            }
            if plan.sets.len() == (total / set_size).max(1) && total >= set_size {
                prop_assert!(lo >= set_size, "full-size sets unless groups forced smaller ones");
            }
            prop_assert_eq!(plan.sets_sharing_a_group().count(), plan.max_shared.iter().filter(|&&s| s > 1).count());
        }

        #[test]
        fn partners_are_a_permutation_in_other_groups_when_possible(
            groups in layout(),
            hop in 1usize..4,
        ) {
            let plan = partner_plan(&groups, hop).expect("plan");
            let total = groups.len();
            let mut hit = vec![false; total];
            for r in 0..total {
                prop_assert!(!hit[plan.rhs[r]], "two ranks copy to {}", plan.rhs[r]);
                hit[plan.rhs[r]] = true;
                prop_assert_eq!(plan.lhs[plan.rhs[r]], r);
            }
            for r in 0..total {
                let shares = plan.rhs[r] == r || groups[plan.rhs[r]] == groups[r];
                prop_assert_eq!(plan.same_group.contains(&r), shares);
                let ring = plan.sets.sets[plan.sets.assignment[r].0].len();
                if plan.sets.survives_group_loss(1) && hop % ring != 0 {
                    prop_assert!(!shares, "rank {} copies into its own group", r);
                }
            }
        }
    }

    #[test]
    fn four_nodes_of_sixteen_ranks_give_sixteen_sets_across_nodes() {
        let groups: Vec<usize> = (0..64).map(|r| r / 16).collect();
        let plan = build_sets(&groups, 8, 2).expect("plan");
        assert_eq!(plan.sets.len(), 16);
        assert!(plan.survives_group_loss(1));
        assert_eq!(plan.sets[0], vec![0, 16, 32, 48]);
        assert_eq!(plan.set_id(1), Some(1));
        assert_eq!((plan.left(0), plan.right(0)), (Some(48), Some(16)));

        // Insisting on SET_SIZE keeps sets of 8 and reports the shared nodes.
        let strict = build_sets(&groups, 8, 8).expect("plan");
        assert_eq!(strict.sets.len(), 8);
        assert!(strict.sets.iter().all(|s| s.len() == 8));
        assert!(!strict.survives_group_loss(1));
        assert!(
            strict.survives_group_loss(2),
            "RS with k = 2 still survives a node"
        );
    }

    #[test]
    fn one_node_cannot_be_protected_and_says_so() {
        let groups = vec!["n0"; 4];
        let partners = partner_plan(&groups, 1).expect("plan");
        assert_eq!(partners.same_group, vec![0, 1, 2, 3]);
        // Rings of two (a ring of one protects nothing): 0↔2, 1↔3.
        assert_eq!(partners.rhs, vec![2, 3, 0, 1]);
        assert!(matches!(
            build_sets(&groups, 0, 2),
            Err(RedundancyError::ZeroSetSize)
        ));
        assert!(matches!(
            partner_plan(&groups, 0),
            Err(RedundancyError::ZeroHopDistance)
        ));
        assert_eq!(build_sets::<u8>(&[], 8, 2).expect("empty").sets.len(), 0);
    }
}
