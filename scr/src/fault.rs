//! Fault-injection points (the testbed's hooks inside the library).
//!
//! The library marks moments where a failure is interesting with
//! [`fault_point!`](crate::fault_point): `scr::fault_point!("flush.file.copied")?`,
//! or `scr::fault_point!("redundancy.encode", rank = r)?` when the caller knows
//! its rank (the thread communicator runs several ranks in one process). The
//! macro evaluates to `Result<(), Injected>`; `Injected` converts into an
//! `io::Error`, so I/O code propagates an injected error like a real one.
//!
//! **Without the cargo feature `fault-injection` (the default) the macro
//! expands to the constant `Ok(())`**: the point name is a literal that is
//! dropped, the rank expression is never evaluated, nothing is counted, no
//! symbol or string reaches the binary, and the runtime crate is not even a
//! dependency. `ci/tests.d/fault-points-free.sh` checks this on a release
//! build (strings, symbols, and identical machine code for a loop with and
//! without a point).
//!
//! With the feature, each point calls [`hit`], which hands the point to the
//! fault runtime, the `faultrt` crate: it reads the plan from
//! `SCR_FAULT_PLAN`, counts hits, kills ranks and nodes, co-times kills and
//! writes the fault log (the plan grammar and every action are documented
//! there and in docs/fault-injection.md). This module keeps only what the
//! library's code sees: the macro and the error an `error` fault returns.

use std::io;

/// The value of a disabled injection point; what the macro expands to
/// without the `fault-injection` feature.
pub const DISABLED: Result<(), Injected> = Ok(());

/// An injection point, compiled in only with the `fault-injection` feature.
///
/// `fault_point!("name")` or `fault_point!("name", rank = expr)`; evaluates to
/// `Result<(), Injected>`. See the [module documentation](crate::fault).
#[cfg(feature = "fault-injection")]
#[macro_export]
macro_rules! fault_point {
    ($point:literal $(,)?) => {
        $crate::fault::hit($point, ::core::option::Option::None)
    };
    ($point:literal, rank = $rank:expr $(,)?) => {
        $crate::fault::hit($point, ::core::option::Option::Some($rank))
    };
}

/// An injection point, compiled in only with the `fault-injection` feature.
///
/// Without the feature (this build) it is the constant `Ok(())`: the name is
/// dropped and the rank expression is not evaluated.
#[cfg(not(feature = "fault-injection"))]
#[macro_export]
macro_rules! fault_point {
    ($point:literal $(,)?) => {
        $crate::fault::DISABLED
    };
    ($point:literal, rank = $rank:expr $(,)?) => {{
        // Typechecks the rank expression (no unused-variable warnings in the
        // caller) without evaluating it: the closure is never called.
        let _ = || -> u32 { $rank };
        $crate::fault::DISABLED
    }};
}

/// The error an `error` fault makes its injection point return.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("injected fault at point {point} (hit {hit}): {}", io::Error::from_raw_os_error(self.errno))]
pub struct Injected {
    /// The injection point.
    pub point: &'static str,
    /// Which hit of the point fired.
    pub hit: u64,
    /// The errno injected (EIO, ENOSPC, EROFS or EACCES).
    pub errno: i32,
}

impl From<Injected> for io::Error {
    fn from(e: Injected) -> io::Error {
        io::Error::new(io::Error::from_raw_os_error(e.errno).kind(), e)
    }
}

/// The body of an enabled [`fault_point!`](crate::fault_point): the runtime
/// counts the hit and carries out the fault that fires; an `error` fault
/// comes back as plain data and becomes [`Injected`] here.
///
/// Never inlined: the point stays one call into the runtime, and
/// `fault-points-free.sh` finds this symbol in a build with the feature.
#[cfg(feature = "fault-injection")]
#[inline(never)]
pub fn hit(point: &'static str, rank: Option<u32>) -> Result<(), Injected> {
    faultrt::hit(point, rank).map_err(|e| Injected {
        point,
        hit: e.hit,
        errno: e.kind.errno(),
    })
}

/// `path` was just fsynced (the power-loss model of `faultrt::durable`
/// keeps a copy of it as synced). Without the feature: nothing.
#[cfg(feature = "fault-injection")]
pub fn synced(path: &std::path::Path) {
    faultrt::durable::synced(path)
}

/// `from` is about to be renamed over `to` (power-loss model).
#[cfg(feature = "fault-injection")]
pub fn renaming(from: &std::path::Path, to: &std::path::Path) {
    faultrt::durable::renaming(from, to)
}

/// Directory `path` was just fsynced (power-loss model).
#[cfg(feature = "fault-injection")]
pub fn dir_synced(path: &std::path::Path) {
    faultrt::durable::dir_synced(path)
}

/// Without the feature: nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn synced(_path: &std::path::Path) {}

/// Without the feature: nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn renaming(_from: &std::path::Path, _to: &std::path::Path) {}

/// Without the feature: nothing.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn dir_synced(_path: &std::path::Path) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injected_error_becomes_the_matching_io_error() {
        let e: io::Error = Injected {
            point: "p",
            hit: 2,
            errno: libc::ENOSPC,
        }
        .into();
        assert_eq!(e.kind(), io::ErrorKind::StorageFull);
        assert!(
            e.to_string().contains("injected fault at point p (hit 2)"),
            "{e}"
        );
    }

    #[test]
    fn disabled_or_empty_points_return_ok() {
        let r: u32 = 3;
        assert_eq!(crate::fault_point!("test.unnamed.point"), Ok(()));
        assert_eq!(crate::fault_point!("test.unnamed.point", rank = r), Ok(()));
    }

    #[cfg(feature = "fault-injection")]
    mod enabled {
        use super::super::*;

        #[test]
        fn global_point_without_plan_env_is_ok() {
            // The test process has no SCR_FAULT_PLAN naming this point.
            assert_eq!(crate::fault_point!("test.never.planned", rank = 0), Ok(()));
        }

        #[test]
        fn the_runtime_reads_the_node_variable_scr_reads() {
            // kill-node and @node: match on the variable that gives scr
            // its node identity; the two crates must agree on its name.
            assert_eq!(faultrt::ENV_NODE_NAME, crate::storage::dirs::ENV_NODE_NAME);
        }

        #[test]
        fn every_error_kind_becomes_its_errno() {
            for (kind, errno) in [
                (faultrt::ErrorKind::Eio, libc::EIO),
                (faultrt::ErrorKind::Enospc, libc::ENOSPC),
                (faultrt::ErrorKind::Erofs, libc::EROFS),
                (faultrt::ErrorKind::Eacces, libc::EACCES),
            ] {
                let e: io::Error = Injected {
                    point: "p",
                    hit: 1,
                    errno: kind.errno(),
                }
                .into();
                let inner = e.get_ref().and_then(|i| i.downcast_ref::<Injected>());
                assert_eq!(inner.map(|i| i.errno), Some(errno), "{kind:?}");
                assert_eq!(e.kind(), io::Error::from_raw_os_error(errno).kind());
            }
        }
    }
}
