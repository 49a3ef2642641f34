//! The project's own real models (`tests/models/real/`, made by its `export.py` with
//! torch from seeded random weights): graphs whose large initializers were stripped,
//! each carrying the recipe to refill it (`rivet-fill uniform LO HI SEED` in its
//! `doc_string`: the mean and spread torch's init gave it), so the repository holds
//! kilobytes instead of hundreds of megabytes. Refilling is deterministic and needs no
//! torch; the inputs are made from the `rivet-input:NAME` metadata entries.

use ort::value::TensorElementType;

use crate::harness::{self, HostTensor};

/// The stored models (file stems in `tests/models/real/`), CNNs first, tiny before small.
pub const REAL_MODELS: [&str; 32] = [
    "resnet18_op17",
    "mobilenet_v2_op17",
    "efficientnet_b0_op17",
    "bert_tiny_op17",
    "bert_tiny_op20",
    "bert_tiny_op23",
    "gpt2_tiny_prefill_op17",
    "gpt2_tiny_prefill_op23",
    "gpt2_tiny_decode_op17",
    "gpt2_tiny_decode_op23",
    "llama_tiny_prefill_op17",
    "llama_tiny_prefill_op23",
    "llama_tiny_decode_op17",
    "llama_tiny_decode_op23",
    "vit_tiny_op17",
    "vit_tiny_op20",
    "vit_tiny_op23",
    "whisper_tiny_op17",
    "whisper_tiny_op23",
    "t5_tiny_op17",
    "t5_tiny_op23",
    "lstm_tiny_op17",
    "yolo_tiny_op17",
    "cond_tiny_op17",
    "bert_small_op17",
    "gpt2_small_prefill_op17",
    "gpt2_small_decode_op17",
    "llama_small_prefill_op17",
    "llama_small_decode_op17",
    "vit_small_op17",
    "whisper_small_op17",
    "t5_small_op17",
];

const FILL: &str = "rivet-fill ";

/// A stored model as committed: stripped bytes and the inputs its metadata describes.
pub fn stripped(stem: &str) -> Result<(Vec<u8>, Vec<HostTensor>), String> {
    let path = crate::paths::workspace_root().join("tests/models/real").join(format!("{stem}.onnx"));
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let inputs = inputs(&bytes).map_err(|e| format!("{stem}: {e}"))?;
    Ok((bytes, inputs))
}

/// A stored model with every stripped initializer refilled, and its inputs.
pub fn real_model(stem: &str) -> Result<(Vec<u8>, Vec<HostTensor>), String> {
    let (bytes, inputs) = stripped(stem)?;
    Ok((refill(&bytes).map_err(|e| format!("{stem}: {e}"))?, inputs))
}

/// Writes the refilled model to `DIR/STEM.onnx` (for `rivet run --model` and `rivet
/// profile --model`), unless a file of the same size is there already; returns its path.
pub fn materialise(stem: &str, dir: &std::path::Path) -> Result<std::path::PathBuf, String> {
    let (model, _) = real_model(stem)?;
    let path = dir.join(format!("{stem}.onnx"));
    if std::fs::metadata(&path).map(|m| m.len()).ok() != Some(model.len() as u64) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        std::fs::write(&path, &model).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(path)
}

/// Output by output: rtol 1e-4 and atol 1e-4 of the output's RMS (an absolute atol would
/// hold a unit-scale hidden state and GPT-2's logits, RMS 28, to different standards).
/// Returns the worst |a-b| / (atol + rtol*|b|), as `harness::compare` does.
pub fn compare(got: &[HostTensor], want: &[HostTensor]) -> Result<f64, String> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, expected {}", got.len(), want.len()));
    }
    let mut worst = 0.0f64;
    for (g, w) in got.iter().zip(want) {
        let score = harness::compare(std::slice::from_ref(g), std::slice::from_ref(w), 1e-4, 1e-4 * rms(w))?;
        worst = worst.max(score);
    }
    Ok(worst)
}

/// The largest difference between `got` and `want` over the RMS of `want`'s output it
/// is in, for outputs of a lower precision (bf16) against float32: `harness::compare`
/// with the RMS as the tolerance, so an output off by more than its RMS (or a NaN or
/// infinity where the other has none, a count or shape mismatch) is an error.
pub fn relative_error(got: &[HostTensor], want: &[HostTensor]) -> Result<f64, String> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, expected {}", got.len(), want.len()));
    }
    let mut worst = 0.0f64;
    for (g, w) in got.iter().zip(want) {
        let score = harness::compare(std::slice::from_ref(g), std::slice::from_ref(w), 0.0, rms(w))?;
        worst = worst.max(score);
    }
    Ok(worst)
}

/// The root mean square of a tensor's values (the smallest positive float for an empty
/// or all-zero one, so that it can divide).
fn rms(t: &HostTensor) -> f64 {
    (t.data.iter().map(|v| v * v).sum::<f64>() / t.data.len().max(1) as f64).sqrt().max(f64::MIN_POSITIVE)
}

// ------------------------------------------------------------------ protobuf walking

/// One field of a protobuf message: its number, wire type, payload and raw bytes.
struct Field<'a> {
    number: u64,
    wire: u8,
    /// The varint value, or the payload of a length-delimited field.
    varint: u64,
    payload: &'a [u8],
    raw: &'a [u8],
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

fn fields(buf: &[u8]) -> Result<Vec<Field<'_>>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let start = pos;
        let key = varint(buf, &mut pos)?;
        let (number, wire) = (key >> 3, (key & 7) as u8);
        let (mut value, mut payload) = (0, &buf[0..0]);
        match wire {
            0 => value = varint(buf, &mut pos)?,
            1 => pos += 8,
            2 => {
                let len = varint(buf, &mut pos)? as usize;
                payload = buf.get(pos..pos + len).ok_or("truncated field")?;
                pos += len;
            }
            5 => pos += 4,
            w => return Err(format!("wire type {w} is not handled")),
        }
        let raw = buf.get(start..pos).ok_or("truncated field")?;
        out.push(Field { number, wire, varint: value, payload, raw });
    }
    Ok(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_bytes(out: &mut Vec<u8>, number: u64, payload: &[u8]) {
    put_varint(out, (number << 3) | 2);
    put_varint(out, payload.len() as u64);
    out.extend_from_slice(payload);
}

// ModelProto.graph, GraphProto.initializer, ModelProto.metadata_props and the
// TensorProto fields used here (onnx.proto3).
const MODEL_GRAPH: u64 = 7;
const MODEL_METADATA: u64 = 14;
const GRAPH_INITIALIZER: u64 = 5;
const TENSOR_DIMS: u64 = 1;
const TENSOR_DATA_TYPE: u64 = 2;
const TENSOR_NAME: u64 = 8;
const TENSOR_RAW_DATA: u64 = 9;
const TENSOR_DOC: u64 = 12;

/// The model with each stripped initializer's data generated from its recipe.
pub fn refill(model: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(model.len());
    for f in fields(model)? {
        if f.number == MODEL_GRAPH && f.wire == 2 {
            let mut graph = Vec::new();
            for g in fields(f.payload)? {
                if g.number == GRAPH_INITIALIZER && g.wire == 2 {
                    put_bytes(&mut graph, GRAPH_INITIALIZER, &refill_tensor(g.payload)?);
                } else {
                    graph.extend_from_slice(g.raw);
                }
            }
            put_bytes(&mut out, MODEL_GRAPH, &graph);
        } else {
            out.extend_from_slice(f.raw);
        }
    }
    Ok(out)
}

fn refill_tensor(tensor: &[u8]) -> Result<Vec<u8>, String> {
    let fs = fields(tensor)?;
    let recipe = fs.iter().find(|f| f.number == TENSOR_DOC && f.wire == 2).map(|f| f.payload);
    let Some(recipe) = recipe.and_then(|r| std::str::from_utf8(r).ok()?.strip_prefix(FILL)) else {
        return Ok(tensor.to_vec());
    };
    let name = fs.iter().find(|f| f.number == TENSOR_NAME).map(|f| String::from_utf8_lossy(f.payload));
    let name = name.unwrap_or_default();
    let mut len = 1u64;
    for f in fs.iter().filter(|f| f.number == TENSOR_DIMS) {
        if f.wire == 0 {
            len *= f.varint;
        } else {
            let mut pos = 0;
            while pos < f.payload.len() {
                len *= varint(f.payload, &mut pos)?;
            }
        }
    }
    if fs.iter().find(|f| f.number == TENSOR_DATA_TYPE).map(|f| f.varint) != Some(crate::model::FLOAT as u64) {
        return Err(format!("initializer {name}: only float32 initializers are refilled"));
    }
    let words: Vec<&str> = recipe.split_whitespace().collect();
    let parse = |i: usize| -> Result<f64, String> {
        words.get(i).and_then(|w| w.parse().ok()).ok_or_else(|| format!("initializer {name}: bad recipe '{recipe}'"))
    };
    if words.first() != Some(&"uniform") {
        return Err(format!("initializer {name}: unknown recipe '{recipe}'"));
    }
    let (lo, hi, seed) = (parse(1)?, parse(2)?, parse(3)? as u64);
    let mut out = Vec::with_capacity(tensor.len() + 4 * len as usize + 8);
    for f in fs.iter().filter(|f| f.number != TENSOR_DOC) {
        out.extend_from_slice(f.raw);
    }
    let data: Vec<u8> =
        harness::values(seed, len as usize, lo, hi).into_iter().flat_map(|v| (v as f32).to_le_bytes()).collect();
    put_bytes(&mut out, TENSOR_RAW_DATA, &data);
    Ok(out)
}

/// The inputs the `rivet-input:NAME` entries describe: `DTYPE DIMS KIND A B`.
fn inputs(model: &[u8]) -> Result<Vec<HostTensor>, String> {
    let mut out = Vec::new();
    for f in fields(model)?.iter().filter(|f| f.number == MODEL_METADATA && f.wire == 2) {
        let entry = fields(f.payload)?;
        let text = |n| entry.iter().find(|e| e.number == n).map(|e| String::from_utf8_lossy(e.payload).into_owned());
        let (Some(key), Some(value)) = (text(1), text(2)) else { continue };
        let Some(name) = key.strip_prefix("rivet-input:") else { continue };
        let bad = || format!("input {name}: bad description '{value}'");
        let w: Vec<&str> = value.split_whitespace().collect();
        let [dtype, dims, kind, a, b] = w[..] else { return Err(bad()) };
        let shape: Vec<i64> = dims.split(',').map(str::parse).collect::<Result<_, _>>().map_err(|_| bad())?;
        let (a, b): (f64, f64) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        let n = shape.iter().product::<i64>() as usize;
        let seed = 100 + out.len() as u64;
        let data = match kind {
            "uniform" => harness::values(seed, n, a, b),
            "int" => harness::values(seed, n, a, b).into_iter().map(f64::floor).collect(),
            "ones" => vec![1.0; n],
            "range" => {
                let last = *shape.last().ok_or_else(bad)? as usize;
                (0..n).map(|i| a + (i % last) as f64).collect()
            }
            _ => return Err(bad()),
        };
        let elem = match dtype {
            "float32" => TensorElementType::Float32,
            "int64" => TensorElementType::Int64,
            _ => return Err(bad()),
        };
        out.push(HostTensor::typed(name, elem, &shape, data));
    }
    if out.is_empty() {
        return Err("no rivet-input metadata".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_writes_the_recipe_s_values_and_drops_the_recipe() {
        // TensorProto { dims: [2, 3], data_type: FLOAT, name: "w", doc_string: recipe }
        let mut tensor = vec![0x08, 2, 0x08, 3, 0x10, 1];
        put_bytes(&mut tensor, TENSOR_NAME, b"w");
        put_bytes(&mut tensor, TENSOR_DOC, b"rivet-fill uniform -0.5 0.5 7");
        let mut graph = Vec::new();
        put_bytes(&mut graph, GRAPH_INITIALIZER, &tensor);
        let mut model = vec![0x08, 9]; // ir_version
        put_bytes(&mut model, MODEL_GRAPH, &graph);
        let filled = refill(&model).unwrap();
        let graph = fields(&filled).unwrap().into_iter().find(|f| f.number == MODEL_GRAPH).unwrap().payload;
        let t = fields(graph).unwrap().into_iter().next().unwrap().payload;
        let fs = fields(t).unwrap();
        assert!(fs.iter().all(|f| f.number != TENSOR_DOC));
        let raw = fs.iter().find(|f| f.number == TENSOR_RAW_DATA).unwrap().payload;
        let want: Vec<u8> =
            harness::values(7, 6, -0.5, 0.5).into_iter().flat_map(|v| (v as f32).to_le_bytes()).collect();
        assert_eq!(raw, &want[..]);
        // A model without recipes comes back byte for byte.
        let plain = refill(&model[..2]).unwrap();
        assert_eq!(plain, &model[..2]);
    }
}
