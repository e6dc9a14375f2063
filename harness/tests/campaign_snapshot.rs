//! The quick campaign's outcome table is a snapshot: any change of
//! behaviour (a scenario that now rebuilds instead of restarting from cache,
//! a new loss) shows in review as a change of
//! `snapshots/campaign_snapshot__quick_campaign_outcomes.snap`.
//!
//! The table comes from a campaign's JSON result: `SCR_HARNESS_QUICK_JSON`
//! (what `ci/tests.d/campaign.sh` sets after running `scr-harness campaign
//! --quick`), else the committed `results/campaign-quick.json`, so the
//! committed results and the snapshot cannot drift apart either.

use std::path::PathBuf;

use harness::campaign::Report;

fn quick_json() -> PathBuf {
    std::env::var_os("SCR_HARNESS_QUICK_JSON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/campaign-quick.json")
        })
}

#[test]
fn quick_campaign_outcomes() {
    let path = quick_json();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run `scr-harness campaign --quick` (ci/tests.d/campaign.sh) first",
            path.display()
        )
    });
    let report: Report = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not a campaign report: {e}", path.display()));
    assert_eq!(report.campaign, "quick", "{}", path.display());
    let counts = report.counts();
    assert!(counts.run > 0, "{}: no scenario ran", path.display());
    assert_eq!(
        (counts.silent, counts.hang),
        (0, 0),
        "{}: SILENT CORRUPTION or HANG",
        path.display()
    );
    insta::assert_snapshot!("quick_campaign_outcomes", report.outcome_table());
}
