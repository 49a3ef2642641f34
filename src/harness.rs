//! Sessions on Rivet and on ORT's CPU EP in one process, inputs generated from a model's
//! declared shapes, output comparison and per-Run timing.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ort::environment::Environment;
use ort::session::{Session, SessionInputValue};
use ort::value::{DynValue, Tensor, TensorElementType, ValueType};

use crate::paths;

/// The EP name Rivet registers (part of its public interface).
pub const RIVET_EP: &str = "Rivet";
/// ORT's own CPU EP.
pub const ORT_CPU_EP: &str = "CPUExecutionProvider";
/// The name the harness registers the plugin library under.
pub const REGISTRATION: &str = "rivet";

pub type Error = String;

fn err(e: impl std::fmt::Display) -> Error {
    e.to_string()
}

static ORT_ENV: OnceLock<Result<Environment, Error>> = OnceLock::new();
static PLUGIN: OnceLock<Result<(), Error>> = OnceLock::new();

/// Loads ORT once per process, without registering any plugin. Sessions that do not set
/// their thread count share the environment's pool (ORT's default size, one thread per
/// core): two sessions with pools of their own in one process (an A/B's two arms) slowed
/// each other at two threads here, a worker of one taking the core the other needed
/// (SqueezeNet on ORT alone, two sessions taking turns: 5.3 ms a Run against 3.5 for
/// either alone; 3.5 for both on a shared pool).
pub fn ort_environment() -> Result<&'static Environment, Error> {
    ORT_ENV
        .get_or_init(|| {
            let dylib = paths::ort_dylib()?;
            let builder = ort::init_from(&dylib).map_err(|e| format!("loading {}: {e}", dylib.display()))?;
            // After `init_from`: making the options is the first call into the library.
            let pool = ort::environment::GlobalThreadPoolOptions::default().with_intra_threads(0).map_err(err)?;
            builder.with_name("rivet-harness").with_global_thread_pool(pool).build().map_err(err)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Loads ORT once per process and registers the plugin at `lib` under `REGISTRATION`
/// (the first caller's choice of library wins for the process).
pub fn environment_with(lib: &Path) -> Result<&'static Environment, Error> {
    let env = ort_environment()?;
    PLUGIN
        .get_or_init(|| {
            env.register_ep_library(REGISTRATION, lib).map_err(|e| format!("registering {}: {e}", lib.display()))
        })
        .clone()?;
    Ok(env)
}

/// Loads ORT with the production plugin.
pub fn environment() -> Result<&'static Environment, Error> {
    environment_with(&paths::rivet_lib()?)
}

/// Which EP a session runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arm {
    Rivet,
    OrtCpu,
}

impl Arm {
    pub fn ep_name(self) -> &'static str {
        match self {
            Arm::Rivet => RIVET_EP,
            Arm::OrtCpu => ORT_CPU_EP,
        }
    }
}

/// Session settings beyond the arm.
#[derive(Clone, Debug, Default)]
pub struct SessionOpts {
    /// `session.disable_cpu_ep_fallback=1`: a node Rivet does not claim fails creation.
    pub no_fallback: bool,
    pub intra_threads: Option<usize>,
    /// `session.record_ep_graph_assignment_info=1`.
    pub record_assignment: bool,
    /// Options for the selected EP (ORT prefixes them with `ep.<name>.`).
    pub provider_options: Vec<(String, String)>,
    /// ORT's graph optimizations off (its level-1 rewrites drop a Cast to the same type,
    /// say, before any EP sees it).
    pub no_graph_optimizations: bool,
}

/// Creates a session on `arm` from model bytes. The ORT arm selects the CPU EP's device
/// explicitly: a plain session would pick Rivet once it is registered.
pub fn session(env: &Environment, model: &[u8], arm: Arm, opts: &SessionOpts) -> Result<Session, Error> {
    let devices: Vec<_> = env.devices().filter(|d| d.ep().is_ok_and(|n| n == arm.ep_name())).collect();
    if devices.is_empty() {
        return Err(format!("no device for EP {} (is the plugin registered?)", arm.ep_name()));
    }
    let options = if opts.provider_options.is_empty() { None } else { Some(opts.provider_options.as_slice()) };
    let mut b = Session::builder(env).map_err(err)?.with_devices(devices, options).map_err(err)?;
    if opts.no_fallback {
        b = b.with_config_entry("session.disable_cpu_ep_fallback", "1").map_err(err)?;
    }
    if opts.no_graph_optimizations {
        b = b.with_optimization_level(ort::session::builder::GraphOptimizationLevel::Disable).map_err(err)?;
    }
    if opts.record_assignment {
        b = b.with_config_entry("session.record_ep_graph_assignment_info", "1").map_err(err)?;
    }
    if let Some(n) = opts.intra_threads {
        b = b.with_independent_thread_pool().map_err(err)?.with_intra_threads(n).map_err(err)?;
    }
    b.commit_from_memory(model).map_err(err)
}

/// A host tensor for inputs and outputs, kept as f64 for comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    pub name: String,
    pub elem: TensorElementType,
    pub shape: Vec<i64>,
    pub data: Vec<f64>,
}

impl HostTensor {
    pub fn f32(name: &str, shape: &[i64], data: Vec<f32>) -> Self {
        Self {
            name: name.into(),
            elem: TensorElementType::Float32,
            shape: shape.to_vec(),
            data: data.into_iter().map(f64::from).collect(),
        }
    }

    /// A tensor of any element type the harness handles, from f64 values.
    pub fn typed(name: &str, elem: TensorElementType, shape: &[i64], data: Vec<f64>) -> Self {
        Self { name: name.into(), elem, shape: shape.to_vec(), data }
    }

    fn to_value(&self) -> Result<DynValue, Error> {
        let shape = self.shape.clone();
        macro_rules! make {
            ($t:ty, $conv:expr) => {
                Tensor::from_array((shape, self.data.iter().map($conv).collect::<Vec<$t>>())).map_err(err)?.into_dyn()
            };
        }
        Ok(match self.elem {
            TensorElementType::Float32 => make!(f32, |&v| v as f32),
            TensorElementType::Float64 => make!(f64, |&v| v),
            TensorElementType::Int64 => make!(i64, |&v| v as i64),
            TensorElementType::Int32 => make!(i32, |&v| v as i32),
            TensorElementType::Int16 => make!(i16, |&v| v as i16),
            TensorElementType::Int8 => make!(i8, |&v| v as i8),
            TensorElementType::Uint64 => make!(u64, |&v| v as u64),
            TensorElementType::Uint32 => make!(u32, |&v| v as u32),
            TensorElementType::Uint16 => make!(u16, |&v| v as u16),
            TensorElementType::Uint8 => make!(u8, |&v| v as u8),
            TensorElementType::Bool => make!(bool, |&v| v != 0.0),
            other => return Err(format!("input '{}': the harness cannot make {other:?} tensors", self.name)),
        })
    }

    fn from_value(name: &str, v: &DynValue) -> Result<Self, Error> {
        let elem = match v.dtype() {
            ValueType::Tensor { ty, .. } => *ty,
            other => return Err(format!("output '{name}' is {other:?}, not a tensor")),
        };
        macro_rules! read {
            ($t:ty, $conv:expr) => {{
                let (s, d) = v.try_extract_tensor::<$t>().map_err(err)?;
                (s.to_vec(), d.iter().map($conv).collect())
            }};
        }
        let (shape, data): (Vec<i64>, Vec<f64>) = match elem {
            TensorElementType::Float32 => read!(f32, |&x| f64::from(x)),
            TensorElementType::Float64 => read!(f64, |&x| x),
            TensorElementType::Int64 => read!(i64, |&x| x as f64),
            TensorElementType::Int32 => read!(i32, |&x| f64::from(x)),
            TensorElementType::Int16 => read!(i16, |&x| f64::from(x)),
            TensorElementType::Int8 => read!(i8, |&x| f64::from(x)),
            TensorElementType::Uint64 => read!(u64, |&x| x as f64),
            TensorElementType::Uint32 => read!(u32, |&x| f64::from(x)),
            TensorElementType::Uint16 => read!(u16, |&x| f64::from(x)),
            TensorElementType::Uint8 => read!(u8, |&x| f64::from(x)),
            TensorElementType::Bool => read!(bool, |&x| f64::from(u8::from(x))),
            other => return Err(format!("output '{name}': the harness cannot read {other:?} tensors")),
        };
        Ok(Self { name: name.into(), elem, shape, data })
    }
}

/// Deterministic pseudo-random values in [lo, hi).
pub fn values(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// Inputs for every model input, shaped from the declared dims; `dims` gives symbolic ones.
pub fn generate_inputs(session: &Session, dims: &HashMap<String, i64>) -> Result<Vec<HostTensor>, Error> {
    let mut out = Vec::new();
    for (k, input) in session.inputs().iter().enumerate() {
        let ValueType::Tensor { ty, shape, dimension_symbols } = input.dtype() else {
            return Err(format!("input '{}' is not a tensor", input.name()));
        };
        let mut real = Vec::with_capacity(shape.len());
        for (i, &d) in shape.iter().enumerate() {
            if d >= 0 {
                real.push(d);
                continue;
            }
            let sym = dimension_symbols.get(i).map(String::as_str).unwrap_or("");
            match dims.get(sym) {
                Some(&v) => real.push(v),
                None if sym.is_empty() => {
                    return Err(format!(
                        "input '{}' dim {i} is unknown and unnamed: it cannot be given with --dim",
                        input.name()
                    ))
                }
                None => {
                    return Err(format!(
                        "input '{}' has symbolic dim '{sym}': give it with --dim {sym}=VALUE",
                        input.name()
                    ))
                }
            }
        }
        let n: i64 = real.iter().product();
        let (lo, hi) = match ty {
            TensorElementType::Int64 | TensorElementType::Int32 => (0.0, 4.0),
            _ => (-3.0, 3.0),
        };
        let mut data = values(k as u64 + 1, n as usize, lo, hi);
        if matches!(ty, TensorElementType::Int64 | TensorElementType::Int32) {
            data.iter_mut().for_each(|v| *v = v.floor());
        }
        out.push(HostTensor { name: input.name().to_string(), elem: *ty, shape: real, data });
    }
    Ok(out)
}

/// Pre-built ORT values for repeated Runs.
pub struct PreparedInputs(Vec<(String, DynValue)>);

impl PreparedInputs {
    /// The (name, value) pairs.
    pub fn into_values(self) -> Vec<(String, DynValue)> {
        self.0
    }
}

pub fn prepare(inputs: &[HostTensor]) -> Result<PreparedInputs, Error> {
    Ok(PreparedInputs(inputs.iter().map(|t| Ok((t.name.clone(), t.to_value()?))).collect::<Result<_, Error>>()?))
}

/// One Run; returns the outputs in the session's output order.
pub fn run_prepared(session: &mut Session, inputs: &PreparedInputs) -> Result<Vec<HostTensor>, Error> {
    let values: Vec<(&str, SessionInputValue<'_>)> =
        inputs.0.iter().map(|(n, v)| (n.as_str(), SessionInputValue::from(v))).collect();
    let names: Vec<String> = session.outputs().iter().map(|o| o.name().to_string()).collect();
    let outputs = session.run(values).map_err(err)?;
    names.iter().map(|n| HostTensor::from_value(n, &outputs[n.as_str()])).collect()
}

/// One Run from host tensors.
pub fn run(session: &mut Session, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Error> {
    run_prepared(session, &prepare(inputs)?)
}

/// The prepared values in the session's input order, bound once for repeated Runs.
fn ordered_inputs<'v>(session: &Session, inputs: &'v PreparedInputs) -> Result<Vec<SessionInputValue<'v>>, Error> {
    session
        .inputs()
        .iter()
        .map(|input| {
            let (_, v) = inputs
                .0
                .iter()
                .find(|(n, _)| n == input.name())
                .ok_or_else(|| format!("no value for input '{}'", input.name()))?;
            Ok(SessionInputValue::from(v))
        })
        .collect()
}

/// Times `iters` Runs (after `warmup`), returning each Run's duration. Inputs are bound
/// once, in the session's input order, so the loop does no per-Run harness work beyond
/// what ORT's `run` needs.
pub fn time_runs(
    session: &mut Session,
    inputs: &PreparedInputs,
    warmup: usize,
    iters: usize,
) -> Result<Vec<Duration>, Error> {
    let ordered = ordered_inputs(session, inputs)?;
    for _ in 0..warmup {
        session.run(&ordered[..]).map_err(err)?;
    }
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        let out = session.run(&ordered[..]).map_err(err)?;
        drop(out);
        times.push(t.elapsed());
    }
    Ok(times)
}

/// `runs` Runs and nothing else: the function callgrind collects in (keep its name).
#[inline(never)]
pub fn measured_runs(session: &mut Session, inputs: &PreparedInputs, runs: usize) -> Result<(), Error> {
    let ordered = ordered_inputs(session, inputs)?;
    for _ in 0..runs {
        drop(session.run(&ordered[..]).map_err(err)?);
    }
    Ok(())
}

/// The `q`-quantile (0..=1) of durations.
pub fn quantile(times: &[Duration], q: f64) -> Duration {
    let mut v = times.to_vec();
    v.sort();
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// Largest difference, as |a-b| / (atol + rtol*|b|) (≤ 1 means within tolerance), and
/// a description of the worst element. NaN must match NaN; infinities must match exactly.
pub fn compare(got: &[HostTensor], want: &[HostTensor], rtol: f64, atol: f64) -> Result<f64, Error> {
    if got.len() != want.len() {
        return Err(format!("{} outputs, expected {}", got.len(), want.len()));
    }
    let mut worst = 0.0f64;
    for (g, w) in got.iter().zip(want) {
        if g.shape != w.shape {
            return Err(format!("output '{}': shape {:?}, expected {:?}", w.name, g.shape, w.shape));
        }
        for (i, (&a, &b)) in g.data.iter().zip(&w.data).enumerate() {
            let score = if a.is_nan() || b.is_nan() {
                if a.is_nan() && b.is_nan() {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else if a.is_infinite() || b.is_infinite() {
                if a == b {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                (a - b).abs() / (atol + rtol * b.abs())
            };
            if score > 1.0 && score > worst {
                return Err(format!(
                    "output '{}' element {i}: got {a}, expected {b} (rtol {rtol}, atol {atol})",
                    w.name
                ));
            }
            worst = worst.max(score);
        }
    }
    Ok(worst)
}
