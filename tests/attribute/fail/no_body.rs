trait Handler {
    #[resizealloc::region]
    fn handle(&self, body: &str) -> String;
}

fn main() {}
