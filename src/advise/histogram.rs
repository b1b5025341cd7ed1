//! A classic Prometheus histogram as `advise` reads it (cumulative counts per upper bound,
//! summed over targets), and what can honestly be said from it: quantiles interpolated the
//! way `histogram_quantile` does, and the range the largest observation lies in.

/// Cumulative counts by upper bound (`le`), `+Inf` included; bounds in seconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets {
    /// `(le, count of observations ≤ le)`, sorted by `le`.
    by_bound: Vec<(f64, f64)>,
}

impl Buckets {
    /// Add `count` to the bucket `le` (series of several targets are summed).
    pub fn add(&mut self, le: f64, count: f64) {
        if !le.is_nan() && count.is_finite() {
            match self.by_bound.iter_mut().find(|(b, _)| *b == le) {
                Some((_, c)) => *c += count,
                None => {
                    self.by_bound.push((le, count));
                    self.by_bound.sort_by(|a, b| a.0.total_cmp(&b.0));
                }
            }
        }
    }

    /// Observations in all (the `+Inf` bucket; the largest bucket when `+Inf` is missing).
    pub fn count(&self) -> f64 {
        self.by_bound.last().map_or(0.0, |(_, c)| *c)
    }

    /// The `q` quantile (0 < q < 1), interpolated linearly within its bucket, as
    /// `histogram_quantile` does; in the `+Inf` bucket, the largest finite bound. `None`
    /// without observations.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total <= 0.0 {
            return None;
        }
        let rank = q * total;
        let mut below = (0.0, 0.0);
        for &(le, c) in &self.by_bound {
            if c >= rank {
                if le.is_infinite() {
                    return Some(below.0);
                }
                let inside = c - below.1;
                if inside <= 0.0 {
                    return Some(le);
                }
                return Some(below.0 + (le - below.0) * (rank - below.1) / inside);
            }
            below = (le, c);
        }
        Some(below.0)
    }

    /// Where the largest observation lies: `(lower, upper)` bounds of the highest bucket
    /// that gained observations (`upper` infinite for the `+Inf` bucket). `None` when empty.
    pub fn largest(&self) -> Option<(f64, f64)> {
        let mut below = (0.0, 0.0);
        let mut found = None;
        for &(le, c) in &self.by_bound {
            if c > below.1 + 1e-9 {
                found = Some((below.0, le));
            }
            below = (le, c);
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(counts: &[(f64, f64)]) -> Buckets {
        let mut b = Buckets::default();
        for &(le, c) in counts {
            b.add(le, c);
        }
        b
    }

    #[test]
    fn quantiles_interpolate_like_histogram_quantile() {
        let b = h(&[(1.0, 0.0), (2.0, 10.0), (4.0, 20.0), (f64::INFINITY, 20.0)]);
        assert_eq!(b.count(), 20.0);
        assert_eq!(b.quantile(0.5), Some(2.0));
        assert_eq!(b.quantile(0.25), Some(1.5));
        assert_eq!(b.quantile(0.75), Some(3.0));
        assert_eq!(b.largest(), Some((2.0, 4.0)));
        assert_eq!(Buckets::default().quantile(0.5), None);
        assert_eq!(Buckets::default().largest(), None);
    }

    #[test]
    fn the_inf_bucket_answers_with_the_largest_finite_bound() {
        let b = h(&[(1.0, 1.0), (f64::INFINITY, 3.0)]);
        assert_eq!(b.quantile(0.99), Some(1.0));
        assert_eq!(b.largest(), Some((1.0, f64::INFINITY)));
    }

    #[test]
    fn series_of_several_targets_add_up() {
        let mut b = h(&[(1.0, 1.0), (f64::INFINITY, 2.0)]);
        b.add(1.0, 1.0);
        b.add(f64::INFINITY, 1.0);
        assert_eq!(b.count(), 3.0);
        assert_eq!(b.quantile(0.5), Some(0.75));
    }
}
