//! Choosing the next token from the logits: greedily, or drawn at a
//! temperature from a seeded generator.

use rand::SeedableRng;
use rand::distr::Distribution;
use rand::distr::weighted::WeightedIndex;
use rand::rngs::StdRng;

/// Draws tokens from `softmax(logits / temperature)` with a seeded
/// generator: what candle-transformers' `LogitsProcessor` does for a
/// temperature without top-p, on the logits as they are (masked ones,
/// `-inf`, are never drawn).
pub(super) struct Sampler {
    rng: StdRng,
}

impl Sampler {
    pub(super) fn new(seed: u64) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
        }
    }

    pub(super) fn sample(&mut self, logits: &[f32], temperature: f64) -> Result<u32, String> {
        let max = logits
            .iter()
            .copied()
            .filter(|l| l.is_finite())
            .fold(f32::NEG_INFINITY, f32::max);
        if !max.is_finite() {
            return Err("no token can follow".into());
        }
        let weights = logits.iter().map(|&l| {
            if l.is_finite() {
                f64::from(l - max) / temperature
            } else {
                f64::NEG_INFINITY
            }
            .exp()
        });
        let drawn = WeightedIndex::new(weights)
            .map_err(|e| format!("cannot sample: {e}"))?
            .sample(&mut self.rng);
        u32::try_from(drawn).map_err(|_| "a token id beyond u32".into())
    }
}

pub(super) fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    let mut best_value = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_value {
            best = i;
            best_value = v;
        }
    }
    best as u32
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn sampling_follows_the_temperature_and_never_draws_a_masked_token() {
        let logits = [1.0, f32::NEG_INFINITY, 3.0, 2.0, f32::NEG_INFINITY];
        let draw = |seed, t| {
            let mut sampler = Sampler::new(seed);
            (0..400)
                .map(|_| sampler.sample(&logits, t).unwrap())
                .collect::<Vec<_>>()
        };
        // The same seed draws the same tokens.
        assert_eq!(draw(7, 1.0), draw(7, 1.0));
        let hot = draw(7, 1.0);
        assert!(hot.iter().all(|t| [0, 2, 3].contains(t)), "{hot:?}");
        // At temperature 1 token 2 has e^3 / (e + e^3 + e^2) = 0.67.
        let share = hot.iter().filter(|&&t| t == 2).count() as f64 / hot.len() as f64;
        assert!((0.55..0.8).contains(&share), "{share}");
        // Near zero it is the argmax.
        assert!(draw(3, 0.01).iter().all(|&t| t == 2));
        let mut sampler = Sampler::new(1);
        assert!(sampler.sample(&[f32::NEG_INFINITY; 3], 1.0).is_err());
        assert!(sampler.sample(&[], 1.0).is_err());
    }
}
