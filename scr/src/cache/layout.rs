//! Where the ranks of a job run, and their XOR/RS sets over nodes, from
//! local information and splits (issue 17, "metadata at scale").
//!
//! Every rank used to allgather every rank's node name and build the whole
//! set plan ([`build_sets`]): O(P) bytes, allocations and work per rank at
//! SCR_Init. Here a rank learns only what concerns it:
//!
//! - its node communicator: a split by a hash of the node name, then (only
//!   if two names share a hash) a split by the name's place among the few
//!   names of that communicator, so a collision never merges two nodes;
//! - the number of nodes and the largest node (two allreduces);
//! - its position in `build_sets`' order (nodes by their lowest rank, ranks
//!   increasing within a node): a prefix sum of node sizes over the node
//!   leaders (log2(nodes) sendrecv rounds) plus its rank on its node;
//! - its set: the residue of that position, as `build_sets` deals ranks
//!   round-robin, turned into the set communicator by one split; its
//!   members by one allgather over the set.
//!
//! The result is exactly the set `build_sets` gives for failure groups =
//! node names (checked against it by the tests below), so redundancy
//! descriptors and file names do not change.
//!
//! [`build_sets`]: crate::redundancy::sets::build_sets

use crate::comm::{Comm, CommError, ReduceOp};
use crate::error::{DescriptorError, ScrResult};
use crate::storage::dirs::NodeIdentity;

use super::SetPlace;

/// This process's node as the job sees it.
pub(super) struct NodeLayout {
    /// The processes on this node, in world-rank order.
    pub node_comm: Box<dyn Comm>,
    /// Distinct nodes in the job.
    pub count: usize,
    /// Processes on the most crowded node.
    pub largest: usize,
}

impl NodeLayout {
    /// Collective over `world`: O(log P) work per rank, O(ranks per node)
    /// bytes.
    pub fn learn(world: &dyn Comm, node: &NodeIdentity) -> ScrResult<NodeLayout> {
        let name = node.name.as_bytes();
        // A non-negative color, as MPI_Comm_split requires.
        let color = crc32fast::hash(name) & 0x7fff_ffff;
        let hashed = world
            .split(Some(color), world.rank() as i64)?
            .ok_or(DescriptorError::NodeComm)?;
        let names = hashed.allgather_bytes(name)?;
        let mut distinct: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let node_comm = if distinct.len() == 1 {
            hashed
        } else {
            // Two node names with one hash: tell them apart. Every member
            // of `hashed` saw the same names, so all take this branch.
            let index = distinct.binary_search(&name).unwrap_or(0);
            hashed
                .split(Some(index as u32), hashed.rank() as i64)?
                .ok_or(DescriptorError::NodeComm)?
        };
        let mut leaders = [i64::from(node_comm.rank() == 0)];
        world.allreduce_i64(&mut leaders, ReduceOp::Sum)?;
        let mut largest = [node_comm.size() as i64];
        world.allreduce_i64(&mut largest, ReduceOp::Max)?;
        Ok(NodeLayout {
            node_comm,
            count: usize::try_from(leaders[0]).unwrap_or(0),
            largest: usize::try_from(largest[0]).unwrap_or(0),
        })
    }
}

/// Every world rank's node name, for what still needs them all (PARTNER's
/// plan and its node tags). Collective over `world`: O(P) per rank.
pub(super) fn all_node_names(world: &dyn Comm, node: &NodeIdentity) -> ScrResult<Vec<String>> {
    Ok(world
        .allgather_bytes(node.name.as_bytes())?
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect())
}

/// This process's set of an XOR or RS descriptor whose failure groups are
/// the nodes, and the set's communicator (members in world-rank order):
/// what `build_sets(node names, set_size, min_members)` assigns it.
/// Collective over `world`.
/// `node_comm` and `largest` are [`NodeLayout`]'s.
pub(super) fn node_set(
    world: &dyn Comm,
    node_comm: &dyn Comm,
    largest: usize,
    set_size: usize,
    min_members: usize,
) -> ScrResult<(SetPlace, Box<dyn Comm>)> {
    let total = world.size();
    let position = node_offset(world, node_comm)? + node_comm.rank();
    let count = set_count(total, largest, set_size, min_members);
    let set = position % count;
    let comm = world
        .split(Some(set as u32), world.rank() as i64)?
        .ok_or(DescriptorError::NodeComm)?;
    let members = comm
        .allgather_bytes(&(world.rank() as i64).to_be_bytes())?
        .iter()
        .map(|b| be_u64(b, "set member").map(|v| v as i64))
        .collect::<Result<Vec<i64>, CommError>>()?;
    let place = SetPlace {
        group_id: members.first().copied().unwrap_or(world.rank() as i64),
        members,
        group_rank: comm.rank() as u64,
        groups: count as u64,
    };
    Ok((place, comm))
}

/// How many sets `build_sets` makes of `total` ranks whose largest failure
/// group has `largest` ranks (its rule, term for term; every set is
/// non-empty since the count never exceeds `total`).
fn set_count(total: usize, largest: usize, set_size: usize, min_members: usize) -> usize {
    let set_size = set_size.max(1);
    let min_members = min_members.min(total).min(set_size).max(1);
    let by_size = (total / set_size).max(1);
    let by_min = (total / min_members).max(1);
    let m = by_size.max(largest.min(by_min));
    m.min(total.max(1)).max(1)
}

/// Ranks on the nodes whose lowest rank is below this node's: a prefix sum
/// of node sizes over the node leaders, broadcast on the node.
fn node_offset(world: &dyn Comm, node_comm: &dyn Comm) -> ScrResult<usize> {
    let leader = node_comm.rank() == 0;
    let leaders = world.split(leader.then_some(0), world.rank() as i64)?;
    let mut offset = Vec::new();
    if let Some(l) = leaders.as_deref() {
        let own = node_comm.size() as u64;
        let inclusive = inclusive_scan(l, own)?;
        offset = inclusive.saturating_sub(own).to_be_bytes().to_vec();
    }
    node_comm.bcast_bytes(0, &mut offset)?;
    Ok(be_u64(&offset, "node offset")? as usize)
}

/// Inclusive prefix sum of `mine` over `comm` in rank order (Hillis and
/// Steele): log2(size) rounds, each one send to rank + d and one receive
/// from rank − d.
fn inclusive_scan(comm: &dyn Comm, mine: u64) -> Result<u64, CommError> {
    let (rank, size) = (comm.rank(), comm.size());
    let mut sum = mine;
    let mut buf = Vec::new();
    let mut d = 1;
    while d < size {
        let bytes = sum.to_be_bytes();
        let send = (rank + d < size).then_some((rank + d, &bytes[..]));
        let from = rank.checked_sub(d);
        comm.sendrecv_bytes(send, from, &mut buf)?;
        if from.is_some() {
            sum = sum.wrapping_add(be_u64(&buf, "scan partial")?);
        }
        d *= 2;
    }
    Ok(sum)
}

fn be_u64(b: &[u8], what: &str) -> Result<u64, CommError> {
    <[u8; 8]>::try_from(b)
        .map(u64::from_be_bytes)
        .map_err(|_| CommError::Mismatch {
            op: "set construction",
            detail: format!("{what}: {} bytes, expected 8", b.len()),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::thread::ThreadComm;
    use crate::redundancy::sets::build_sets;

    /// A job's placement: the node of each rank.
    type NodeOf = fn(usize) -> usize;

    /// The distributed set of every rank equals the whole plan's, for
    /// even and uneven nodes, nodes whose ranks interleave, and set sizes
    /// from 2 to 9 (XOR's min_members 2, RS's k + 1).
    #[test]
    fn node_sets_equal_the_whole_plan() {
        let layouts: [(usize, NodeOf); 7] = [
            (16, |r| r / 4),
            (13, |r| r / 3),
            (24, |r| r % 5),
            (10, |r| if r < 7 { 0 } else { r }),
            (9, |r| (r * 7) % 4),
            (1, |_| 0),
            (32, |r| r / 16),
        ];
        for (p, node_of) in &layouts {
            for set_size in 2..=9 {
                for min_members in [2, 3] {
                    let names: Vec<String> = (0..*p).map(|r| format!("n{}", node_of(r))).collect();
                    let plan = build_sets(&names, set_size, min_members.min(*p)).unwrap();
                    let got = ThreadComm::run(*p, |world| {
                        let node = NodeIdentity {
                            name: names[world.rank()].clone(),
                            root: None,
                        };
                        let layout = NodeLayout::learn(world, &node).unwrap();
                        let (place, comm) = node_set(
                            world,
                            layout.node_comm.as_ref(),
                            layout.largest,
                            set_size,
                            min_members,
                        )
                        .unwrap();
                        assert_eq!(comm.size(), place.members.len());
                        (
                            place.members,
                            place.group_id,
                            place.group_rank,
                            place.groups,
                            layout.count,
                        )
                    })
                    .unwrap();
                    let nodes = {
                        let mut n = names.clone();
                        n.sort();
                        n.dedup();
                        n.len()
                    };
                    for (rank, (members, id, grank, groups, count)) in got.into_iter().enumerate() {
                        let (set, pos) = plan.assignment[rank];
                        let want: Vec<i64> = plan.sets[set].iter().map(|&r| r as i64).collect();
                        let case =
                            format!("P={p} set_size={set_size} min={min_members} rank {rank}");
                        assert_eq!(members, want, "{case}");
                        assert_eq!(id, plan.set_id(set).unwrap() as i64, "{case}");
                        assert_eq!(grank, pos as u64, "{case}");
                        assert_eq!(groups, plan.sets.len() as u64, "{case}");
                        assert_eq!(count, nodes, "{case}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_scan_sums_in_rank_order() {
        for p in [1, 2, 3, 7, 8, 33] {
            let got =
                ThreadComm::run(p, |c| inclusive_scan(c, c.rank() as u64 + 1).unwrap()).unwrap();
            let want: Vec<u64> = (1..=p as u64).map(|r| r * (r + 1) / 2).collect();
            assert_eq!(got, want, "P={p}");
        }
    }
}
