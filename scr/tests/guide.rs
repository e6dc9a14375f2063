//! The Rust guide (docs/guide/rust.md) quotes the quick-start application
//! whole: the quote must stay the file that CI builds and runs
//! (ci/user/rust.sh), so a change to one without the other fails here.

#[test]
fn the_rust_guide_quotes_the_example_exactly() {
    let guide = include_str!("../../docs/guide/rust.md");
    let example = include_str!("../examples/checkpoint_restart.rs");
    let marker = "<!-- quoted from scr/examples/checkpoint_restart.rs";
    let at = guide.find(marker).expect("the guide marks its quote");
    let rest = &guide[at..];
    let start = rest
        .find("```rust\n")
        .expect("a rust block after the marker")
        + "```rust\n".len();
    let len = rest[start..].find("\n```\n").expect("the block ends") + 1;
    assert_eq!(
        &rest[start..start + len],
        example,
        "docs/guide/rust.md no longer quotes scr/examples/checkpoint_restart.rs as it is"
    );
}
