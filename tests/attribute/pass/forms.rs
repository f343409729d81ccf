//! Every form the attribute takes: free functions, methods with each receiver, generics,
//! `impl Trait` returns, early returns and `?`, async fns (free, methods, in traits).
use resizealloc::region_depth;

struct Parser {
    sep: char,
}

impl Parser {
    #[resizealloc::region]
    fn count(&self, text: &str) -> usize {
        assert_eq!(region_depth(), 1);
        text.split(self.sep).map(str::to_owned).count()
    }

    #[resizealloc::region]
    fn into_sep(self) -> char {
        self.sep
    }

    #[resizealloc::region]
    async fn count_later(&mut self, text: String) -> Result<usize, std::num::ParseIntError> {
        assert_eq!(region_depth(), 1);
        let mut n = 0;
        for w in text.split(self.sep) {
            n += w.parse::<usize>()?;
        }
        Ok(n)
    }
}

#[resizealloc::region]
fn largest<T: Ord + Clone>(items: &[T]) -> Option<T> {
    let mut v = items.to_vec();
    v.sort();
    v.pop()
}

#[resizealloc::region]
fn evens(limit: u32) -> impl Iterator<Item = u32> {
    let all: Vec<u32> = (0..limit).collect();
    all.into_iter().filter(|x| x % 2 == 0)
}

#[resizealloc::region]
fn first_word(text: &str) -> &str {
    if text.is_empty() {
        return "";
    }
    text.split(' ').next().unwrap_or("")
}

#[resizealloc::region]
async fn shout(s: &str) -> String {
    s.to_uppercase()
}

#[resizealloc::region]
async fn nothing() {}

#[resizealloc::region]
async fn digits(n: u32) -> impl Iterator<Item = char> {
    n.to_string().chars().collect::<Vec<_>>().into_iter()
}

#[resizealloc::region]
async fn labelled(n: u32) -> (impl std::fmt::Display, u32) {
    (format!("n={n}"), n)
}

trait Service {
    async fn call(&self, x: u32) -> u32;
}

struct Double;

impl Service for Double {
    #[resizealloc::region]
    async fn call(&self, x: u32) -> u32 {
        let v: Vec<u32> = vec![x; 2];
        v.iter().sum()
    }
}

#[resizealloc::region]
unsafe fn raw_len(p: *const u8, n: usize) -> usize {
    // SAFETY: the caller passes a valid slice.
    unsafe { std::slice::from_raw_parts(p, n) }.len()
}

fn main() {
    let p = Parser { sep: ',' };
    assert_eq!(p.count("a,b,c"), 3);
    assert_eq!(largest(&[3, 9, 4]), Some(9));
    assert_eq!(evens(10).count(), 5);
    assert_eq!(first_word("hello world"), "hello");
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        let mut p = Parser { sep: ' ' };
        assert_eq!(p.count_later("1 2 3".to_string()).await, Ok(6));
        assert!(p.count_later("1 x".to_string()).await.is_err());
        assert_eq!(shout("hi").await, "HI");
        nothing().await;
        assert_eq!(digits(305).await.collect::<String>(), "305");
        let (label, n) = labelled(4).await;
        assert_eq!((label.to_string(), n), ("n=4".to_string(), 4));
        assert_eq!(Double.call(21).await, 42);
    });
    assert_eq!(unsafe { raw_len(b"abc".as_ptr(), 3) }, 3);
    assert_eq!(p.into_sep(), ',');
    assert_eq!(region_depth(), 0);
}
