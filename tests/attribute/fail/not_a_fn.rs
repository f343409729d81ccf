#[resizealloc::region]
struct Request {
    body: String,
}

fn main() {}
