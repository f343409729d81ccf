#[resizealloc::region(capacity = 4096)]
fn step() {}

fn main() {}
