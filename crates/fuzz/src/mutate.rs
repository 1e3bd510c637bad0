//! A small seeded random source and the mutators the targets share: byte flips, inserts,
//! deletions, duplications, splices of another seed, truncation, and the tokens parsers trip
//! on (quotes, brackets, comments, escapes, huge numbers, deep nesting).
//!
//! Owns: turning a seed into a case. Must not: know any target.

/// xorshift64*: fast, seeded, good enough to walk input space.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
}

const TOKENS: &[&[u8]] = &[
    b"\"",
    b"'",
    b"`",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"//",
    b"/*",
    b"*/",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"\x00",
    b"\xff",
    b"\xf0\x9f",
    b"null",
    b"true",
    b"-0",
    b"1e999",
    b"18446744073709551616",
    b"NaN",
    b"${",
    b"../",
    b"..\\",
    b"file://",
    b"npm:",
    b"@",
    b"#",
    b"%00",
    b"\r\n",
    b"\n\n",
    b"import(",
    b"require(",
    b"export default ",
    b"=>",
    b"async ",
];

/// One mutation of `seed` (a few edits; sometimes with another seed spliced in).
pub fn mutate(rng: &mut Rng, seed: &[u8], others: &[Vec<u8>]) -> Vec<u8> {
    let mut out = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(9) {
            0 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] ^= 1 << rng.below(8);
            }
            1 => out.insert(at, rng.next() as u8),
            2 if !out.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 if !out.is_empty() => {
                let from = rng.below(out.len());
                let end = (from + 1 + rng.below(64)).min(out.len());
                let piece = out[from..end].to_vec();
                out.splice(at..at, piece);
            }
            4 if !others.is_empty() => {
                let other = rng.pick(others);
                if !other.is_empty() {
                    let from = rng.below(other.len());
                    let end = (from + 1 + rng.below(256)).min(other.len());
                    out.splice(at..at, other[from..end].iter().copied());
                }
            }
            5 => out.truncate(at),
            6 => {
                let depth = 1 + rng.below(2000);
                let open = *rng.pick(&[b"[".as_slice(), b"{\"a\":", b"(", b"{"]);
                let nest: Vec<u8> = open.repeat(depth);
                out.splice(at..at, nest);
            }
            _ => {
                let t = rng.pick(TOKENS);
                out.splice(at..at, t.iter().copied());
            }
        }
    }
    out
}
