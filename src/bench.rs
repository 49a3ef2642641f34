//! The A/B benchmark: ORT's CPU EP and Rivet in one process on the same model and
//! inputs, interleaved rounds (ORT, Rivet, ORT, Rivet, ...), p50/p90 per arm, the
//! Rivet/ORT ratio, ORT's own drift between rounds, and rounds won.

use std::fmt::Write as _;
use std::time::Duration;

use crate::harness::{self, Arm, HostTensor, SessionOpts};
use crate::model::{Attr, Dim, ModelBuilder, FLOAT};

/// One benchmark case: a model and its inputs.
pub struct Case {
    pub name: String,
    pub model: Vec<u8>,
    pub inputs: Vec<HostTensor>,
    /// `Some(1)`: one intra-op thread; `None`: ORT's default (all cores).
    pub threads: Option<usize>,
    /// Nodes in the model (for per-node figures).
    pub nodes: usize,
    /// Rivet's session keeps ORT's CPU EP for the nodes Rivet does not claim (the
    /// `int8_*/fallback` cases: Rivet must not slow ORT's int8 kernels down).
    pub fallback: bool,
}

impl Case {
    /// The bytes to create sessions from: the project's real models (`real_*`) sit in the
    /// grid stripped, a few KB each, and are refilled here, one case at a time.
    pub fn session_model(&self) -> Result<std::borrow::Cow<'_, [u8]>, String> {
        if self.name.starts_with("real_") {
            crate::real_models::refill(&self.model).map(Into::into).map_err(|e| format!("{}: {e}", self.name))
        } else {
            Ok((&self.model[..]).into())
        }
    }
}

/// The unary ops of the grid, with the attributes they run with.
pub fn unary_ops() -> Vec<(&'static str, Vec<(&'static str, Attr)>)> {
    let plain = |op| (op, vec![]);
    vec![
        plain("Relu"),
        plain("Sigmoid"),
        plain("Tanh"),
        plain("Erf"),
        plain("Exp"),
        plain("Log"),
        plain("Sqrt"),
        plain("Abs"),
        plain("Neg"),
        plain("Reciprocal"),
        plain("Floor"),
        plain("Ceil"),
        plain("Softplus"),
        plain("Softsign"),
        plain("HardSigmoid"),
        plain("HardSwish"),
        plain("LeakyRelu"),
        plain("Elu"),
        plain("Selu"),
        plain("Celu"),
        plain("ThresholdedRelu"),
        plain("Mish"),
        ("Gelu", vec![]),
        ("Gelu", vec![("approximate", Attr::Str("tanh".into()))]),
    ]
}

fn chain(op: &str, attrs: &[(&str, Attr)], n: usize, dims: &[Dim], opset: i64) -> Vec<u8> {
    let mut b = ModelBuilder::new(opset).input("v0", FLOAT, dims);
    for i in 0..n {
        let (x, y) = (format!("v{i}"), format!("v{}", i + 1));
        b = b.node_with(op, &format!("n{i}"), &[&x], &[&y], attrs);
    }
    b.output(&format!("v{n}"), FLOAT, Some(dims)).build()
}

/// A pre-LayerNorm transformer encoder layer on `[1, seq, d]` with `heads` heads and a
/// feed-forward width of `ff`: LayerNorm, Q/K/V projections, Attention, the output
/// projection and a residual Add, then LayerNorm, MatMul, Gelu, MatMul and a residual Add.
/// Weights are initializers, as in a model.
pub fn encoder_layer(seq: i64, d: i64, heads: i64, ff: i64) -> (Vec<u8>, Vec<HostTensor>) {
    let w = |seed: u64, n: i64, scale: f64| -> Vec<f32> {
        harness::values(seed, n as usize, -scale, scale).into_iter().map(|v| v as f32).collect()
    };
    let (sd, sf) = (1.0 / (d as f64).sqrt(), 1.0 / (ff as f64).sqrt());
    let mut m = ModelBuilder::new(23).input("x", FLOAT, &[Dim::from(1), Dim::from(seq), Dim::from(d)]);
    for (k, name) in ["wq", "wk", "wv", "wo"].iter().enumerate() {
        m = m.initializer(name, &[d, d], w(10 + k as u64, d * d, sd));
        m = m.initializer(&format!("b{}", &name[1..]), &[d], w(20 + k as u64, d, 0.1));
    }
    m = m
        .initializer("g1", &[d], w(30, d, 1.0).into_iter().map(|v| 1.0 + 0.1 * v).collect())
        .initializer("be1", &[d], w(31, d, 0.1))
        .initializer("g2", &[d], w(32, d, 1.0).into_iter().map(|v| 1.0 + 0.1 * v).collect())
        .initializer("be2", &[d], w(33, d, 0.1))
        .initializer("w1", &[d, ff], w(40, d * ff, sd))
        .initializer("c1", &[ff], w(41, ff, 0.1))
        .initializer("w2", &[ff, d], w(42, ff * d, sf))
        .initializer("c2", &[d], w(43, d, 0.1))
        .node_with("LayerNormalization", "ln1", &["x", "g1", "be1"], &["h"], &[("axis", Attr::Int(-1))]);
    for p in ["q", "k", "v"] {
        m = m.node("MatMul", &format!("mm_{p}"), &["h", &format!("w{p}")], &[&format!("{p}0")]).node(
            "Add",
            &format!("add_{p}"),
            &[&format!("{p}0"), &format!("b{p}")],
            &[p],
        );
    }
    let heads_attrs = [("q_num_heads", Attr::Int(heads)), ("kv_num_heads", Attr::Int(heads))];
    let model = m
        .node_with("Attention", "attention", &["q", "k", "v"], &["a"], &heads_attrs)
        .node("MatMul", "mm_o", &["a", "wo"], &["o0"])
        .node("Add", "add_o", &["o0", "bo"], &["o"])
        .node("Add", "residual1", &["x", "o"], &["r1"])
        .node_with("LayerNormalization", "ln2", &["r1", "g2", "be2"], &["h2"], &[("axis", Attr::Int(-1))])
        .node("MatMul", "mm_1", &["h2", "w1"], &["f0"])
        .node("Add", "add_1", &["f0", "c1"], &["f1"])
        .node("Gelu", "gelu", &["f1"], &["f2"])
        .node("MatMul", "mm_2", &["f2", "w2"], &["f3"])
        .node("Add", "add_2", &["f3", "c2"], &["f4"])
        .node("Add", "residual2", &["r1", "f4"], &["y"])
        .output("y", FLOAT, None)
        .build();
    (model, vec![HostTensor::f32("x", &[1, seq, d], w(1, seq * d, 1.0))])
}

fn input(len: usize) -> Vec<HostTensor> {
    let data = harness::values(11, len, 0.1, 3.0).into_iter().map(|v| v as f32).collect();
    vec![HostTensor::f32("v0", &[len as i64], data)]
}

/// The light CNNs of the onnx wheel, with their input's name ([1, 3, 224, 224] each).
pub const LIGHT_MODELS: [(&str, &str); 9] = [
    ("squeezenet", "data_0"),
    ("inception_v2", "data_0"),
    ("shufflenet", "gpu_0/data_0"),
    ("inception_v1", "data_0"),
    ("resnet50", "gpu_0/data_0"),
    ("densenet121", "data_0"),
    ("vgg19", "data_0"),
    ("bvlc_alexnet", "data_0"),
    ("zfnet512", "gpu_0/data_0"),
];

/// A light model's bytes and its input: seeded values in [-1, 1), as an image's would
/// be after normalisation.
pub fn light_model(name: &str, input: &str) -> Result<(Vec<u8>, Vec<HostTensor>), String> {
    let path = crate::paths::light_models_dir()?.join(format!("light_{name}.onnx"));
    let model = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let shape = [1i64, 3, 224, 224];
    let data = harness::values(3, 3 * 224 * 224, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
    Ok((model, vec![HostTensor::f32(input, &shape, data)]))
}

/// The whole grid, for one thread and for all threads.
pub fn grid() -> Vec<Case> {
    let mut cases = Vec::new();
    for (threads, tag) in [(Some(1), "t1"), (None, "tall")] {
        let add = |cases: &mut Vec<Case>, name: String, model: Vec<u8>, len: usize, nodes: usize| {
            cases.push(Case {
                name: format!("{name}/{tag}"),
                model,
                inputs: input(len),
                threads,
                nodes,
                fallback: false,
            });
        };
        for (shape, dims_of) in [("static", false), ("symbolic", true)] {
            let dims = |len: usize| if dims_of { vec![Dim::from("N")] } else { vec![Dim::from(len as i64)] };
            for n in [1, 10, 100, 1000] {
                add(&mut cases, format!("relu_{n}_tiny/{shape}"), chain("Relu", &[], n, &dims(8), 21), 8, n);
            }
            for n in [1, 10, 100] {
                add(&mut cases, format!("relu_{n}_4k/{shape}"), chain("Relu", &[], n, &dims(4096), 21), 4096, n);
            }
        }
        for n in [1, 10] {
            add(&mut cases, format!("identity_{n}/static"), chain("Identity", &[], n, &[Dim::from(4096)], 21), 4096, n);
        }
        for (size, len) in [("4k", 4096usize), ("1m", 1 << 20)] {
            let model = ModelBuilder::new(21)
                .input("a", FLOAT, &[Dim::from(len as i64)])
                .input("b", FLOAT, &[Dim::from(len as i64)])
                .node("Add", "add", &["a", "b"], &["y"])
                .output("y", FLOAT, None)
                .build();
            let mut inputs = input(len);
            inputs[0].name = "a".into();
            let mut b = input(len).remove(0);
            b.name = "b".into();
            inputs.push(b);
            cases.push(Case {
                name: format!("add_{size}/static/{tag}"),
                model,
                inputs,
                threads,
                nodes: 1,
                fallback: false,
            });
        }
        {
            let n = 512i64;
            let model = ModelBuilder::new(21)
                .input("a", FLOAT, &[Dim::from(n), Dim::from(n)])
                .input("b", FLOAT, &[Dim::from(n), Dim::from(n)])
                .node("MatMul", "mm", &["a", "b"], &["y"])
                .output("y", FLOAT, None)
                .build();
            let mut inputs = input((n * n) as usize);
            inputs[0].name = "a".into();
            inputs[0].shape = vec![n, n];
            let mut b = inputs[0].clone();
            b.name = "b".into();
            inputs.push(b);
            cases.push(Case {
                name: format!("matmul_512/static/{tag}"),
                model,
                inputs,
                threads,
                nodes: 1,
                fallback: false,
            });
        }
        {
            // Conv 3x3, 64 -> 64 channels on 56x56 (weights an initializer, as in a model).
            let model = ModelBuilder::new(21)
                .input("x", FLOAT, &[Dim::from(1), Dim::from(64), Dim::from(56), Dim::from(56)])
                .initializer(
                    "w",
                    &[64, 64, 3, 3],
                    harness::values(5, 64 * 64 * 9, -0.1, 0.1).into_iter().map(|v| v as f32).collect(),
                )
                .node_with("Conv", "conv", &["x", "w"], &["y"], &[("pads", Attr::Ints(vec![1, 1, 1, 1]))])
                .output("y", FLOAT, None)
                .build();
            let mut inputs = input(64 * 56 * 56);
            inputs[0].name = "x".into();
            inputs[0].shape = vec![1, 64, 56, 56];
            cases.push(Case {
                name: format!("conv3x3_64_56/static/{tag}"),
                model,
                inputs,
                threads,
                nodes: 1,
                fallback: false,
            });
        }
        {
            // A decode step's projection: one row by a constant 4096x4096 weight (64 MiB,
            // read from memory on every Run; `summary` sets it against a copy of as many
            // bytes).
            let (k, n) = (4096i64, 4096i64);
            let w = harness::values(9, (k * n) as usize, -0.02, 0.02).into_iter().map(|v| v as f32).collect();
            let model = ModelBuilder::new(21)
                .input("x", FLOAT, &[Dim::from(1), Dim::from(k)])
                .initializer("w", &[k, n], w)
                .node("MatMul", "mm", &["x", "w"], &["y"])
                .output("y", FLOAT, None)
                .build();
            let mut inputs = input(k as usize);
            inputs[0].name = "x".into();
            inputs[0].shape = vec![1, k];
            cases.push(Case {
                name: format!("gemv_4096x4096/static/{tag}"),
                model,
                inputs,
                threads,
                nodes: 1,
                fallback: false,
            });
        }
        {
            // Einsum as a matrix product, 64x64x64 (on the GEMM since its lowering).
            let model = ModelBuilder::new(12)
                .input("a", FLOAT, &[Dim::from(64), Dim::from(64)])
                .input("b", FLOAT, &[Dim::from(64), Dim::from(64)])
                .node_with("Einsum", "einsum", &["a", "b"], &["y"], &[("equation", Attr::Str("ij,jk->ik".into()))])
                .output("y", FLOAT, None)
                .build();
            let mut inputs = input(64 * 64);
            inputs[0].name = "a".into();
            inputs[0].shape = vec![64, 64];
            let mut b = inputs[0].clone();
            b.name = "b".into();
            inputs.push(b);
            cases.push(Case {
                name: format!("einsum_64/static/{tag}"),
                model,
                inputs,
                threads,
                nodes: 1,
                fallback: false,
            });
        }
        {
            // A transformer encoder layer: 64 tokens, width 256, 4 heads, feed-forward 1024.
            // 18 nodes in the model; ORT's optimizer turns each MatMul + bias Add into
            // Reshape, Gemm, Reshape, so 24 reach Rivet.
            let (model, inputs) = encoder_layer(64, 256, 4, 1024);
            cases.push(Case {
                name: format!("encoder_layer_64x256/static/{tag}"),
                model,
                inputs,
                threads,
                nodes: 24,
                fallback: false,
            });
        }
        // Whole real models, on Rivet alone.
        for (name, input) in LIGHT_MODELS {
            let Ok((model, inputs)) = light_model(name, input) else { continue };
            cases.push(Case { name: format!("model_{name}/{tag}"), model, inputs, threads, nodes: 0, fallback: false });
        }
        // The project's own exported models (tests/models/real), on Rivet alone.
        for stem in crate::real_models::REAL_MODELS {
            let Ok((model, inputs)) = crate::real_models::stripped(stem) else { continue };
            cases.push(Case { name: format!("real_{stem}/{tag}"), model, inputs, threads, nodes: 0, fallback: false });
        }
        // Quantized models (tests/models/make_quantized.py): on Rivet alone, and with Rivet
        // registered and fallback on, against ORT's int8 kernels alone.
        for (file, shape, nodes) in [("qdq_cnn", [1i64, 3, 64, 64].as_slice(), 40), ("dynamic_mlp", &[1, 64, 128], 14)]
        {
            let path = crate::paths::workspace_root().join("tests/models").join(format!("{file}.onnx"));
            let Ok(model) = std::fs::read(&path) else { continue };
            let len = shape.iter().product::<i64>() as usize;
            let data = harness::values(7, len, -2.0, 2.0).into_iter().map(|v| v as f32).collect();
            let inputs = vec![HostTensor::f32("x", shape, data)];
            cases.push(Case {
                name: format!("int8_{file}/alone/{tag}"),
                model: model.clone(),
                inputs: inputs.clone(),
                threads,
                nodes: 0,
                fallback: false,
            });
            cases.push(Case {
                name: format!("int8_{file}/fallback/{tag}"),
                model,
                inputs,
                threads,
                nodes,
                fallback: true,
            });
        }
        // The project's real models quantized by ORT's tool (`int8_models`), both ways.
        for (stem, mode) in crate::int8_models::INT8_MODELS {
            let Ok((model, inputs)) = crate::int8_models::quantized(stem, mode) else { continue };
            let name = |how: &str| format!("int8_{stem}_{}/{how}/{tag}", mode.name());
            let (m, i) = (model.clone(), inputs.clone());
            cases.push(Case { name: name("alone"), model: m, inputs: i, threads, nodes: 0, fallback: false });
            cases.push(Case { name: name("fallback"), model, inputs, threads, nodes: 0, fallback: true });
        }
        for (op, attrs) in unary_ops() {
            let label = if attrs.is_empty() { op.to_lowercase() } else { format!("{}_tanh", op.to_lowercase()) };
            let opset = if op == "Celu" { 12 } else { 21 };
            for (size, len) in [("4k", 4096), ("1m", 1 << 20)] {
                add(
                    &mut cases,
                    format!("{label}_{size}/static"),
                    chain(op, &attrs, 1, &[Dim::from(len as i64)], opset),
                    len,
                    1,
                );
            }
        }
    }
    cases
}

/// Timing of one arm.
#[derive(Clone, Debug, Default)]
pub struct ArmStats {
    pub p50: Duration,
    pub p90: Duration,
    pub round_medians: Vec<Duration>,
}

#[derive(Clone, Debug)]
pub struct CaseResult {
    pub name: String,
    pub nodes: usize,
    pub ort: ArmStats,
    pub rivet: ArmStats,
    pub rounds_won: usize,
}

impl CaseResult {
    pub fn ratio(&self) -> f64 {
        self.rivet.p50.as_secs_f64() / self.ort.p50.as_secs_f64().max(1e-12)
    }
    /// ORT's own spread between its round medians, in percent.
    pub fn ort_drift(&self) -> f64 {
        let lo = self.ort.round_medians.iter().min().copied().unwrap_or_default().as_secs_f64();
        let hi = self.ort.round_medians.iter().max().copied().unwrap_or_default().as_secs_f64();
        (hi / lo.max(1e-12) - 1.0) * 100.0
    }
}

fn stats(all: &[Duration], rounds: Vec<Duration>) -> ArmStats {
    ArmStats { p50: harness::quantile(all, 0.5), p90: harness::quantile(all, 0.9), round_medians: rounds }
}

/// Runs one case: `rounds` interleaved rounds of about `round_ms` each per arm.
pub fn run_case(case: &Case, rounds: usize, round_ms: f64) -> Result<CaseResult, String> {
    run_case_at(case, rounds, round_ms, Precision::Fp32)
}

/// Rivet's provider option `precision` for a bench run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Precision {
    Fp32,
    /// Rivet's products in bfloat16 (against ORT's float32): outputs are checked against
    /// ORT's only within [`BF16_MAX_RELATIVE_ERROR`] of their RMS.
    Bf16,
}

/// The largest error of a bf16 run's output, over the RMS of ORT's float32 output, that
/// the bench accepts as the same answer. (A wrong product is off by about the RMS.)
pub const BF16_MAX_RELATIVE_ERROR: f64 = 0.1;

/// The largest difference, over the output's RMS, accepted between Rivet alone and ORT
/// on a quantized model.
pub const INT8_MAX_RELATIVE_ERROR: f64 = 0.1;

/// [`run_case`] with Rivet at `precision`.
pub fn run_case_at(case: &Case, rounds: usize, round_ms: f64, precision: Precision) -> Result<CaseResult, String> {
    let env = harness::environment()?;
    let opts = SessionOpts { intra_threads: case.threads, ..Default::default() };
    let mut strict = SessionOpts { no_fallback: !case.fallback, ..opts.clone() };
    if precision == Precision::Bf16 {
        strict.provider_options.push(("Rivet.precision".into(), "bf16".into()));
    }
    let model = case.session_model()?;
    let mut ort = harness::session(env, &model, Arm::OrtCpu, &opts)?;
    let mut rivet = harness::session(env, &model, Arm::Rivet, &strict)?;
    drop(model);
    let inputs = harness::prepare(&case.inputs)?;
    // Same answer first.
    let want = harness::run_prepared(&mut ort, &inputs)?;
    let got = harness::run_prepared(&mut rivet, &inputs)?;
    let same = if precision == Precision::Bf16 {
        let err = crate::real_models::relative_error(&got, &want)?;
        if err > BF16_MAX_RELATIVE_ERROR {
            Err(format!("bf16 output off by {err:.3} of its RMS"))
        } else {
            eprintln!("{}: bf16 error {err:.2e} of the output's RMS", case.name);
            Ok(err)
        }
    } else if case.name.starts_with("int8_") && !case.fallback {
        // ORT fuses each Q/DQ group into an int8 kernel that rounds once; Rivet rounds at
        // each Q and DQ node of the group: a few quantization steps apart.
        let err = crate::real_models::relative_error(&got, &want)?;
        eprintln!("{}: error {err:.2e} of the output's RMS against ORT's fused int8", case.name);
        if err > INT8_MAX_RELATIVE_ERROR {
            Err(format!("int8 output off by {err:.3} of its RMS"))
        } else {
            Ok(err)
        }
    } else if case.name.starts_with("real_") {
        crate::real_models::compare(&got, &want)
    } else {
        harness::compare(&got, &want, 1e-4, 1e-5)
    };
    same.map_err(|e| format!("{}: {e}", case.name))?;
    // Calibrate each arm: Runs per round so that its rounds take about `round_ms`. (With
    // ORT's count for both, a case where ORT is 40x slower gave Rivet rounds of 5 Runs,
    // whose median was the Run that woke the pool after the settling pause.)
    let runs_for = |s: &mut ort::session::Session| -> Result<usize, String> {
        let probe = harness::time_runs(s, &inputs, 5, 20)?;
        let per_run = harness::quantile(&probe, 0.5).as_secs_f64().max(1e-7);
        Ok(((round_ms / 1e3) / per_run).clamp(5.0, 20_000.0) as usize)
    };
    let (runs_o, runs_r) = (runs_for(&mut ort)?, runs_for(&mut rivet)?);
    let (mut all_o, mut all_r, mut med_o, mut med_r) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut won = 0;
    // Multi-threaded arms share the environment's pool (`harness::ort_environment`): with
    // a pool each, one arm's worker took the core the other arm's needed (ORT's own
    // SqueezeNet read 5.3 ms a Run against 3.5 alone). The pool's workers spin after each
    // Run; a short idle gap before each round lets them stop (the same for both).
    let settle = || {
        if case.threads != Some(1) {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    for _ in 0..rounds {
        settle();
        let o = harness::time_runs(&mut ort, &inputs, 0, runs_o)?;
        settle();
        let r = harness::time_runs(&mut rivet, &inputs, 0, runs_r)?;
        let (mo, mr) = (harness::quantile(&o, 0.5), harness::quantile(&r, 0.5));
        if mr < mo {
            won += 1;
        }
        med_o.push(mo);
        med_r.push(mr);
        all_o.extend(o);
        all_r.extend(r);
    }
    Ok(CaseResult {
        name: case.name.clone(),
        nodes: case.nodes,
        ort: stats(&all_o, med_o),
        rivet: stats(&all_r, med_r),
        rounds_won: won,
    })
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The terminal table.
pub fn table(results: &[CaseResult], rounds: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<28} {:>10} {:>10} {:>10} {:>10} {:>7} {:>8} {:>6}",
        "case", "ORT p50us", "ORT p90us", "Rvt p50us", "Rvt p90us", "ratio", "drift%", "won"
    );
    for r in results {
        let _ = writeln!(
            out,
            "{:<28} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>7.2} {:>8.1} {:>3}/{:<2}",
            r.name,
            us(r.ort.p50),
            us(r.ort.p90),
            us(r.rivet.p50),
            us(r.rivet.p90),
            r.ratio(),
            r.ort_drift(),
            r.rounds_won,
            rounds
        );
    }
    out
}

pub fn csv(results: &[CaseResult]) -> String {
    let mut out =
        String::from("case,nodes,ort_p50_us,ort_p90_us,rivet_p50_us,rivet_p90_us,ratio,ort_drift_pct,rounds_won\n");
    for r in results {
        let _ = writeln!(
            out,
            "{},{},{:.3},{:.3},{:.3},{:.3},{:.4},{:.2},{}",
            r.name,
            r.nodes,
            us(r.ort.p50),
            us(r.ort.p90),
            us(r.rivet.p50),
            us(r.rivet.p90),
            r.ratio(),
            r.ort_drift(),
            r.rounds_won
        );
    }
    out
}

/// A horizontal bar chart of the ratios, with the 1.0 line.
pub fn svg(results: &[CaseResult]) -> String {
    let row = 18.0;
    let (left, width) = (230.0, 520.0);
    let max = results.iter().map(CaseResult::ratio).fold(1.5f64, f64::max).min(10.0);
    let x = |v: f64| left + width * (v.min(max) / max);
    let height = 40.0 + row * results.len() as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"monospace\" font-size=\"11\">\n",
        left + width + 60.0
    );
    let _ = writeln!(s, "<text x=\"10\" y=\"16\">Rivet / ORT CPU EP, p50 time per Run (lower is better)</text>");
    for (i, r) in results.iter().enumerate() {
        let y = 28.0 + row * i as f64;
        let colour = if r.ratio() <= 1.0 { "#3a7" } else { "#c54" };
        let _ = writeln!(s, "<text x=\"10\" y=\"{}\">{}</text>", y + 12.0, r.name);
        let _ = writeln!(
            s,
            "<rect x=\"{left}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\" fill=\"{colour}\"/>",
            x(r.ratio()) - left,
            row - 4.0
        );
        let _ = writeln!(s, "<text x=\"{:.1}\" y=\"{}\">{:.2}</text>", x(r.ratio()) + 4.0, y + 12.0, r.ratio());
    }
    let _ = writeln!(s, "<line x1=\"{0:.1}\" y1=\"24\" x2=\"{0:.1}\" y2=\"{height}\" stroke=\"#000\"/>", x(1.0));
    s.push_str("</svg>\n");
    s
}

/// p50 time of copying `bytes` bytes between two preallocated buffers (warm).
pub fn memcpy_p50(bytes: usize, reps: usize) -> Duration {
    let src = vec![1.0f32; bytes / 4];
    let mut dst = vec![0.0f32; bytes / 4];
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps + 5 {
        let t = std::time::Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&dst);
        times.push(t.elapsed());
    }
    harness::quantile(&times[5..], 0.5)
}

/// Memory-bound cases against memcpy, and one thread against all threads at 1 Mi.
pub fn summary(results: &[CaseResult]) -> String {
    let mut out = String::new();
    let find = |name: &str| results.iter().find(|r| r.name == name);
    // Bytes a Run moves: Relu reads and writes 4 MiB; Add reads 8 MiB and writes 4 MiB.
    let copy = memcpy_p50(4 << 20, 200);
    let copy_gbs = (8u64 << 20) as f64 / copy.as_secs_f64() / 1e9;
    for (case, bytes) in [("relu_1m/static/t1", 8u64 << 20), ("add_1m/static/t1", 12u64 << 20)] {
        if let Some(r) = find(case) {
            let gbs = bytes as f64 / r.rivet.p50.as_secs_f64() / 1e9;
            let _ = writeln!(
                out,
                "{case}: Rivet moves {gbs:.1} GB/s per Run, memcpy of 4 MiB {copy_gbs:.1} GB/s: {:.0}% of memcpy",
                100.0 * gbs / copy_gbs
            );
        }
    }
    // A decode step's projection reads its 64 MiB weight once per Run: against a copy of
    // 64 MiB (which moves twice as many bytes: the rate compared is bytes moved).
    let gemv: Vec<_> =
        ["gemv_4096x4096/static/t1", "gemv_4096x4096/static/tall"].into_iter().filter_map(find).collect();
    if !gemv.is_empty() {
        let bytes = 64u64 << 20;
        let copy_gbs = 2.0 * bytes as f64 / memcpy_p50(bytes as usize, 20).as_secs_f64() / 1e9;
        for r in gemv {
            let (rivet, ort) = (r.rivet.p50.as_secs_f64(), r.ort.p50.as_secs_f64());
            let _ = writeln!(
                out,
                "{}: Rivet reads its weight at {:.1} GB/s, ORT at {:.1}; a one-thread copy of 64 MiB moves {copy_gbs:.1} GB/s: Rivet at {:.0}% of it",
                r.name,
                bytes as f64 / rivet / 1e9,
                bytes as f64 / ort / 1e9,
                100.0 * bytes as f64 / rivet / 1e9 / copy_gbs
            );
        }
    }
    for r in results.iter().filter(|r| r.name.ends_with("_1m/static/t1")) {
        let all = r.name.replace("/t1", "/tall");
        if let Some(a) = find(&all) {
            let _ = writeln!(
                out,
                "{}: all threads {:.2}x faster than one on Rivet ({:.2}x on ORT)",
                r.name.trim_end_matches("/static/t1"),
                r.rivet.p50.as_secs_f64() / a.rivet.p50.as_secs_f64(),
                r.ort.p50.as_secs_f64() / a.ort.p50.as_secs_f64()
            );
        }
    }
    out
}
