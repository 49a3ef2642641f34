//! Post transforms of scores, in float32 as ONNX Runtime computes them (its PROBIT uses
//! an approximate inverse error function, which a model's outputs then match).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Post {
    None,
    Logistic,
    Softmax,
    SoftmaxZero,
    Probit,
}

impl Post {
    pub fn parse(s: &str) -> Result<Post, String> {
        Ok(match s {
            "NONE" => Post::None,
            "LOGISTIC" => Post::Logistic,
            "SOFTMAX" => Post::Softmax,
            "SOFTMAX_ZERO" => Post::SoftmaxZero,
            "PROBIT" => Post::Probit,
            _ => return Err(format!("post_transform '{s}' is not NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT")),
        })
    }
}

pub fn logistic(v: f32) -> f32 {
    let e = 1.0 / (1.0 + (-v.abs()).exp());
    if v < 0.0 {
        1.0 - e
    } else {
        e
    }
}

fn erf_inv(x: f32) -> f32 {
    let sgn = if x < 0.0 { -1.0f32 } else { 1.0 };
    let x = (1.0 - x) * (1.0 + x);
    let log = x.ln();
    let v = 2.0 / (std::f32::consts::PI * 0.147) + 0.5 * log;
    let v2 = 1.0 / 0.147f32 * log;
    let v3 = -v + (v * v - v2).sqrt();
    sgn * v3.sqrt()
}

pub fn probit(v: f32) -> f32 {
    std::f32::consts::SQRT_2 * erf_inv(2.0 * v - 1.0)
}

pub fn softmax(v: &mut [f32]) {
    let max = v.iter().fold(-f32::MAX, |m, &x| if x > m { x } else { m });
    let mut sum = 0.0f32;
    for x in v.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    for x in v.iter_mut() {
        *x /= sum;
    }
}

/// Softmax that leaves (near-)zero scores at zero times exp(-max).
pub fn softmax_zero(v: &mut [f32]) {
    let max = v.iter().fold(-f32::MAX, |m, &x| if x > m { x } else { m });
    let exp_neg_max = (-max).exp();
    let mut sum = 0.0f32;
    for x in v.iter_mut() {
        if *x > 0.0000001 || *x < -0.0000001 {
            *x = (*x - max).exp();
            sum += *x;
        } else {
            *x *= exp_neg_max;
        }
    }
    for x in v.iter_mut() {
        *x /= sum;
    }
}

/// Applies `post` to a row of two or more scores.
pub fn apply(post: Post, v: &mut [f32]) {
    match post {
        Post::None => {}
        Post::Logistic => v.iter_mut().for_each(|x| *x = logistic(*x)),
        Post::Probit => v.iter_mut().for_each(|x| *x = probit(*x)),
        Post::Softmax => softmax(v),
        Post::SoftmaxZero => softmax_zero(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transforms_match_their_formulas() {
        assert!((logistic(0.0) - 0.5).abs() < 1e-7 && (logistic(-2.0) - 0.11920292).abs() < 1e-6);
        // ORT's inverse-erf approximation: probit(0.5) = 0, probit(0.8413) ~ 1.
        assert!(probit(0.5).abs() < 1e-6 && (probit(0.8413447) - 1.0).abs() < 5e-3);
        let mut v = [1.0f32, 2.0, 3.0];
        softmax(&mut v);
        assert!((v[2] - 0.66524094).abs() < 1e-6 && (v.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let mut z = [0.0f32, 1.0];
        softmax_zero(&mut z);
        assert_eq!(z[0], 0.0);
        assert!((z[1] - 1.0).abs() < 1e-6);
    }
}
