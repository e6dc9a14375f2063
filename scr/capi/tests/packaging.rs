//! The Spack recipe (packaging/spack/package.py) read without Spack: it
//! parses as Python, defines `class Scr`, names scr.h's SCR_VERSION among
//! its versions, depends on MPI, Rust and CMake, and installs with
//! ci/install (the one install script; ci/tests.d/user-install.sh runs it).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// scr.h's SCR_VERSION without its "v": "3.1.0".
fn header_version() -> String {
    let path = repo().join("scr/capi/include/scr.h");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("#define SCR_VERSION \"v"))
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{}: no #define SCR_VERSION \"v...\"", path.display()))
        .to_string()
}

/// What Python's own parser finds in the recipe, one fact a line:
/// `class NAME(BASE)`, `version VERSION`, `depends_on SPEC`, and
/// `call FUNCTION ARG...` for calls inside `install`.
const FACTS: &str = r#"
import ast, sys
tree = ast.parse(open(sys.argv[1]).read(), sys.argv[1])
def const(node):
    return node.value if isinstance(node, ast.Constant) else None
for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
    print("class", cls.name + "(" + ",".join(ast.unparse(b) for b in cls.bases) + ")")
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
            if node.func.id in ("version", "depends_on"):
                print(node.func.id, const(node.args[0]))
    for fn in [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "install"]:
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                print("call", node.func.id, *[ast.unparse(a) for a in node.args])
"#;

fn recipe_facts() -> Vec<String> {
    let recipe = repo().join("packaging/spack/package.py");
    let out = Command::new("python3")
        .arg("-c")
        .arg(FACTS)
        .arg(&recipe)
        .output()
        .unwrap_or_else(|e| panic!("python3 (needed to parse {}): {e}", recipe.display()));
    assert!(
        out.status.success(),
        "{} does not parse as Python:\n{}",
        recipe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn spack_recipe_parses_and_names_the_version_of_scr_h() {
    let facts = recipe_facts();
    let has = |f: &str| facts.iter().any(|x| x == f);
    assert!(has("class Scr(Package)"), "{facts:#?}");
    let version = header_version();
    assert!(
        has(&format!("version {version}")),
        "the recipe's versions are not scr.h's {version}: {facts:#?}"
    );
    for dep in ["mpi", "cmake@3.16:"] {
        assert!(
            has(&format!("depends_on {dep}")),
            "no depends_on({dep:?}): {facts:#?}"
        );
    }
    assert!(
        has("call bash 'ci/install' prefix"),
        "install() does not run ci/install PREFIX: {facts:#?}"
    );
}

#[test]
fn spack_recipe_asks_for_the_workspaces_rust_version() {
    let manifest = repo().join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).expect("Cargo.toml");
    let wanted = text
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|v| v.strip_suffix('"'))
        .expect("rust-version in the workspace's Cargo.toml");
    let facts = recipe_facts();
    assert!(
        facts
            .iter()
            .any(|f| f == &format!("depends_on rust@{wanted}:")),
        "the recipe's rust is not the workspace's rust-version {wanted}: {facts:#?}"
    );
}
