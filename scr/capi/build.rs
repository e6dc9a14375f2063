//! SCR_Configf is C-variadic, which stable Rust cannot define: a few lines
//! of C format the string and call SCR_Config (defined in Rust).
fn main() {
    println!("cargo:rerun-if-changed=csrc/configf.c");
    println!("cargo:rerun-if-changed=include/scr.h");
    cc::Build::new()
        .file("csrc/configf.c")
        .include("include")
        .warnings(true)
        .compile("scr_configf");
}
