//! A monotone piecewise cubic through condensed clock points: Hermite segments with tangents
//! chosen by Fritsch and Carlson ("Monotone piecewise cubic interpolation", SIAM J. Numer.
//! Anal. 17(2), 1980). The curve passes through every point, its first derivative is continuous,
//! and it never decreases where the points increase. Outside the first and last point it goes
//! on linearly with the end tangents, so the derivative stays continuous there too. Building is
//! O(n), evaluation O(log n) (or O(1) with a cursor when times come in order).

/// The interpolating curve y(x).
#[derive(Debug, Clone, PartialEq)]
pub struct MonotoneSpline {
    x: Vec<f64>,
    y: Vec<f64>,
    /// Tangent dy/dx at each point.
    m: Vec<f64>,
}

impl MonotoneSpline {
    /// A spline through points with strictly increasing x and strictly increasing y; None when
    /// there are fewer than 2 points or the points are not strictly increasing in both.
    pub fn new(points: &[(f64, f64)]) -> Option<Self> {
        let n = points.len();
        if n < 2 || points.windows(2).any(|w| !(w[1].0 > w[0].0 && w[1].1 > w[0].1)) {
            return None;
        }
        let x: Vec<f64> = points.iter().map(|p| p.0).collect();
        let y: Vec<f64> = points.iter().map(|p| p.1).collect();
        let secant: Vec<f64> = (0..n - 1).map(|k| (y[k + 1] - y[k]) / (x[k + 1] - x[k])).collect();
        let mut m = vec![0.0; n];
        m[0] = secant[0];
        m[n - 1] = secant[n - 2];
        for k in 1..n - 1 {
            m[k] = (secant[k - 1] + secant[k]) / 2.0;
        }
        // Fritsch-Carlson: keep (alpha, beta) = (m_k, m_k+1) / secant_k inside the circle of
        // radius 3, which is sufficient for monotonicity.
        for k in 0..n - 1 {
            let alpha = m[k] / secant[k];
            let beta = m[k + 1] / secant[k];
            let r = alpha.hypot(beta);
            if r > 3.0 {
                let tau = 3.0 / r;
                m[k] = tau * alpha * secant[k];
                m[k + 1] = tau * beta * secant[k];
            }
        }
        Some(MonotoneSpline { x, y, m })
    }

    pub fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.x.iter().copied().zip(self.y.iter().copied())
    }

    /// Number of points.
    pub fn len(&self) -> usize {
        self.x.len()
    }

    pub fn is_empty(&self) -> bool {
        self.x.is_empty()
    }

    /// Tangent at point k.
    pub fn tangent(&self, k: usize) -> f64 {
        self.m[k]
    }

    /// The segment holding x: 0 before the first point, k for [x_{k-1}, x_k), len() after the
    /// last point.
    pub fn segment_of(&self, x: f64) -> usize {
        self.x.partition_point(|&p| p <= x)
    }

    /// y at x, looking the segment up.
    pub fn eval(&self, x: f64) -> f64 {
        self.eval_in(self.segment_of(x), x)
    }

    /// y at x, which lies in segment `seg` (see `segment_of`).
    #[inline]
    pub fn eval_in(&self, seg: usize, x: f64) -> f64 {
        let n = self.x.len();
        if seg == 0 {
            return self.y[0] + self.m[0] * (x - self.x[0]);
        }
        if seg >= n {
            return self.y[n - 1] + self.m[n - 1] * (x - self.x[n - 1]);
        }
        let k = seg - 1;
        let h = self.x[k + 1] - self.x[k];
        let t = (x - self.x[k]) / h;
        let t2 = t * t;
        let t3 = t2 * t;
        let h00 = 2.0 * t3 - 3.0 * t2 + 1.0;
        let h10 = t3 - 2.0 * t2 + t;
        let h01 = -2.0 * t3 + 3.0 * t2;
        let h11 = t3 - t2;
        h00 * self.y[k] + h10 * h * self.m[k] + h01 * self.y[k + 1] + h11 * h * self.m[k + 1]
    }

    /// dy/dx at x.
    pub fn derivative(&self, x: f64) -> f64 {
        let n = self.x.len();
        let seg = self.segment_of(x);
        if seg == 0 {
            return self.m[0];
        }
        if seg >= n {
            return self.m[n - 1];
        }
        let k = seg - 1;
        let h = self.x[k + 1] - self.x[k];
        let t = (x - self.x[k]) / h;
        let t2 = t * t;
        let d00 = 6.0 * t2 - 6.0 * t;
        let d10 = 3.0 * t2 - 4.0 * t + 1.0;
        let d01 = -6.0 * t2 + 6.0 * t;
        let d11 = 3.0 * t2 - 2.0 * t;
        (d00 * self.y[k] + d01 * self.y[k + 1]) / h + d10 * self.m[k] + d11 * self.m[k + 1]
    }

    /// The start of segment `seg` (None before the first point).
    pub fn segment_start(&self, seg: usize) -> Option<f64> {
        seg.checked_sub(1).map(|k| self.x[k])
    }

    /// The end of segment `seg` (None after the last point).
    pub fn segment_end(&self, seg: usize) -> Option<f64> {
        self.x.get(seg).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_through_points_with_continuous_positive_derivative() {
        let pts = [(0.0, 5.0), (1e9, 1e9 + 7.0), (2e9, 2e9 + 30.0), (3e9, 3e9 + 31.0), (5e9, 5e9 + 90.0)];
        let s = MonotoneSpline::new(&pts).unwrap();
        for &(x, y) in &pts {
            assert!((s.eval(x) - y).abs() < 1e-6, "{x}");
        }
        for &(x, _) in &pts {
            let left = s.derivative(x - 1.0);
            let right = s.derivative(x + 1.0);
            assert!((left - right).abs() < 1e-6, "derivative jumps at {x}: {left} {right}");
        }
        let mut prev = f64::NEG_INFINITY;
        for i in -100..700 {
            let x = f64::from(i) * 1e7;
            assert!(s.derivative(x) > 0.0);
            let y = s.eval(x);
            assert!(y > prev);
            prev = y;
        }
    }

    #[test]
    fn limits_tangents_to_stay_monotone() {
        // A steep step between flat parts overshoots with plain averaged tangents.
        let pts = [(0.0, 0.0), (1.0, 0.01), (2.0, 10.0), (3.0, 10.01)];
        let s = MonotoneSpline::new(&pts).unwrap();
        let mut prev = f64::NEG_INFINITY;
        for i in 0..=300 {
            let y = s.eval(f64::from(i) / 100.0);
            assert!(y >= prev - 1e-12 && y <= 10.01 + 1e-9, "{i} {y}");
            prev = y;
        }
    }

    #[test]
    fn rejects_too_few_or_unordered_points() {
        assert!(MonotoneSpline::new(&[(0.0, 0.0)]).is_none());
        assert!(MonotoneSpline::new(&[(0.0, 0.0), (1.0, 1.0), (1.0, 2.0)]).is_none());
        assert!(MonotoneSpline::new(&[(0.0, 0.0), (1.0, 1.0), (2.0, 0.5)]).is_none());
    }
}
