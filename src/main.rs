//! TEMPORARY placeholder for the `cuqr` CLI (being replaced in this session).
fn main() {
    eprintln!("cuqr: CLI under construction");
    std::process::exit(2);
}
