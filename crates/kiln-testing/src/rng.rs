//! Seeded pseudo-random test data.
//!
//! A test takes its seed from [`seed`] (the clock, or `KILN_TEST_SEED` to replay a failing run)
//! or uses a fixed one; the data then follows from the seed alone.

/// The seed of this test: `KILN_TEST_SEED` when set, else the clock. Prints
/// `{tag}: KILN_TEST_SEED={seed}` to stderr so that a failure can be replayed.
pub fn seed(tag: &str) -> u64 {
    let s = std::env::var("KILN_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(fresh_seed);
    eprintln!("{tag}: KILN_TEST_SEED={s}");
    s
}

/// A seed that differs from run to run (the clock in nanoseconds; 1 if the clock is unusable).
pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

/// A 64-bit linear congruential generator (Knuth's MMIX constants): small, fast and the same
/// on every platform, which is all test data needs.
#[derive(Clone, Debug)]
pub struct Lcg(u64);

impl Lcg {
    /// A generator whose stream follows from `seed`.
    pub fn new(seed: u64) -> Self {
        Lcg(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0
    }

    /// The next 64 random bits passed through a finalizer (SplitMix64's), so that the low bits
    /// are as random as the high ones: for `% n`, byte values and the like.
    pub fn mixed_u64(&mut self) -> u64 {
        let mut z = self.next_u64();
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// An integer uniform in [0, `n`) (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.mixed_u64() % n
    }

    /// A float uniform in [0, 1) (24 random bits).
    pub fn unit_f32(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32) / ((1u64 << 24) as f32)
    }

    /// A float uniform in [`lo`, `hi`).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit_f32()
    }

    /// An integer uniform in [`lo`, `hi`] (both ends included; `lo <= hi`).
    pub fn int_in(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo) as u64 + 1;
        lo + ((self.next_u64() >> 16) % span) as i64
    }

    /// `n` floats uniform in [-1, 1).
    pub fn f32s(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.uniform(-1.0, 1.0)).collect()
    }

    /// `n` floats from the nine multiples of 0.25 in [-1, 1] (many ties, for order-sensitive
    /// operators such as argmax and sort).
    pub fn coarse(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| ((self.next_u64() >> 16) % 9) as f32 * 0.25 - 1.0)
            .collect()
    }

    /// `n` integers uniform in [`lo`, `hi`) (`lo < hi`).
    pub fn ints(&mut self, n: usize, lo: i64, hi: i64) -> Vec<i64> {
        (0..n).map(|_| self.int_in(lo, hi - 1)).collect()
    }
}

/// `n` pseudo-random floats in [-1, 1) from `seed`.
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    random_in(n, seed, -1.0, 1.0)
}

/// `n` pseudo-random floats in [`lo`, `hi`) from `seed`.
pub fn random_in(n: usize, seed: u64, lo: f32, hi: f32) -> Vec<f32> {
    let mut g = Lcg::new(seed);
    (0..n).map(|_| g.uniform(lo, hi)).collect()
}

/// `n` pseudo-random integers in [`lo`, `hi`] (both ends included) from `seed`.
pub fn random_ints(n: usize, seed: u64, lo: i64, hi: i64) -> Vec<i64> {
    let mut g = Lcg::new(seed);
    (0..n).map(|_| g.int_in(lo, hi)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_data_in_range() {
        let a = random(1000, 7);
        assert_eq!(a, random(1000, 7));
        assert_ne!(a, random(1000, 8));
        assert!(a.iter().all(|v| (-1.0..1.0).contains(v)));
        let r = random_in(1000, 3, 2.0, 5.0);
        assert!(r.iter().all(|v| (2.0..5.0).contains(v)));
        let i = random_ints(1000, 3, -2, 2);
        assert!(i.iter().all(|v| (-2..=2).contains(v)));
        assert!((-2..=2).all(|k| i.contains(&k)));
    }
}
