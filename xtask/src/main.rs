//! TEMPORARY placeholder (being replaced in this session).
fn main() {
    eprintln!("xtask: under construction");
    std::process::exit(2);
}
