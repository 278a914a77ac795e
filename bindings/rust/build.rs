// Finds libbib: the directory in BIB_LIB_DIR, else what `pkg-config --libs
// bib` says. The crate links the shared library (libbib.so.0); the test and
// example binaries of this crate get that directory as their run path.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=BIB_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let dirs: Vec<String> = match env::var("BIB_LIB_DIR") {
        Ok(dir) if !dir.is_empty() => vec![dir],
        _ => match Command::new("pkg-config").args(["--libs-only-L", "bib"]).output() {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
                .split_whitespace()
                .filter_map(|flag| flag.strip_prefix("-L").map(str::to_string))
                .collect(),
            Ok(out) => panic!(
                "libbib not found: set BIB_LIB_DIR to the directory holding libbib.so, \
                 or install BIB (make install) so that pkg-config finds bib.pc: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => panic!(
                "libbib not found: BIB_LIB_DIR is not set and pkg-config cannot run ({e}); \
                 set BIB_LIB_DIR to the directory holding libbib.so"
            ),
        },
    };
    for dir in &dirs {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    println!("cargo:rustc-link-lib=dylib=bib");
}
