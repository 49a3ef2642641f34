//! Non-maximum suppression over boxes, per batch and class (ONNX NonMaxSuppression with
//! ONNX Runtime's order: by batch, then class, then score descending, equal scores by
//! ascending box index).

/// How a box's four numbers are read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BoxFormat {
    /// `[y1, x1, y2, x2]`, either diagonal pair of corners.
    Corners,
    /// `[x_center, y_center, width, height]`.
    Center,
}

/// The selection's parameters.
#[derive(Clone, Copy, Debug)]
pub struct Nms {
    pub batches: usize,
    pub classes: usize,
    pub boxes: usize,
    pub format: BoxFormat,
    /// At most this many boxes per batch and class.
    pub max_per_class: usize,
    pub iou_threshold: f32,
    /// Only boxes scoring strictly above it are candidates.
    pub score_threshold: Option<f32>,
}

/// `(x_min, y_min, x_max, y_max)` of a box.
fn extent(b: &[f32], format: BoxFormat) -> (f32, f32, f32, f32) {
    match format {
        BoxFormat::Corners => (b[1].min(b[3]), b[0].min(b[2]), b[1].max(b[3]), b[0].max(b[2])),
        BoxFormat::Center => {
            let (w, h) = (b[2] / 2.0, b[3] / 2.0);
            (b[0] - w, b[1] - h, b[0] + w, b[1] + h)
        }
    }
}

/// Whether `a` suppresses `b`: their intersection over union exceeds `threshold` (boxes
/// of no area, or that do not overlap, never do).
fn suppresses(a: &[f32], b: &[f32], format: BoxFormat, threshold: f32) -> bool {
    let (ax0, ay0, ax1, ay1) = extent(a, format);
    let (bx0, by0, bx1, by1) = extent(b, format);
    let (ix0, ix1) = (ax0.max(bx0), ax1.min(bx1));
    if ix1 <= ix0 {
        return false;
    }
    let (iy0, iy1) = (ay0.max(by0), ay1.min(by1));
    if iy1 <= iy0 {
        return false;
    }
    let inter = (ix1 - ix0) * (iy1 - iy0);
    let (area_a, area_b) = ((ax1 - ax0) * (ay1 - ay0), (bx1 - bx0) * (by1 - by0));
    let union = area_a + area_b - inter;
    if inter <= 0.0 || area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

impl Nms {
    /// Appends the selected `(batch, class, box)` triples to `out` (cleared first);
    /// `candidates` is working memory. `boxes` is `[batches, boxes, 4]`, `scores`
    /// `[batches, classes, boxes]`. Panics if a length does not match.
    pub fn select(&self, boxes: &[f32], scores: &[f32], candidates: &mut Vec<usize>, out: &mut Vec<i64>) {
        assert_eq!(boxes.len(), self.batches * self.boxes * 4, "nms: boxes");
        assert_eq!(scores.len(), self.batches * self.classes * self.boxes, "nms: scores");
        out.clear();
        if self.max_per_class == 0 {
            return;
        }
        for batch in 0..self.batches {
            let boxes = &boxes[batch * self.boxes * 4..][..self.boxes * 4];
            let the_box = |i: usize| &boxes[i * 4..][..4];
            for class in 0..self.classes {
                let s = &scores[(batch * self.classes + class) * self.boxes..][..self.boxes];
                candidates.clear();
                candidates.extend((0..self.boxes).filter(|&i| self.score_threshold.is_none_or(|t| s[i] > t)));
                // Score descending, then index ascending (a total order: NaN-free scores
                // compare as floats; NaN ones last).
                candidates.sort_unstable_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
                let first = out.len();
                for &i in candidates.iter() {
                    let kept = &out[first..];
                    if kept
                        .chunks_exact(3)
                        .any(|t| suppresses(the_box(t[2] as usize), the_box(i), self.format, self.iou_threshold))
                    {
                        continue;
                    }
                    out.extend_from_slice(&[batch as i64, class as i64, i as i64]);
                    if (out.len() - first) / 3 == self.max_per_class {
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_onnx_suppress_by_iou_example() {
        let boxes = [
            0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, -0.1, 1.0, 0.9, 0.0, 10.0, 1.0, 11.0, 0.0, 10.1, 1.0, 11.1,
            0.0, 100.0, 1.0, 101.0,
        ];
        let scores = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3];
        let nms = Nms {
            batches: 1,
            classes: 1,
            boxes: 6,
            format: BoxFormat::Corners,
            max_per_class: 3,
            iou_threshold: 0.5,
            score_threshold: Some(0.0),
        };
        let mut out = Vec::new();
        nms.select(&boxes, &scores, &mut Vec::new(), &mut out);
        assert_eq!(out, [0, 0, 3, 0, 0, 0, 0, 0, 5]);
    }
}
