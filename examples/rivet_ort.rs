//! Rivet from Rust with the `ort` crate: register the plugin, build a session on its
//! devices with CPU fallback off, run a two-node model built in memory, check the result.
//!
//! `cargo run --release --example rivet_ort` (ORT is loaded from `ORT_DYLIB_PATH`, the
//! plugin from `RIVET_EP_LIB` or `target/release/librivet_ep.so`).

use ort::editor::{Graph, Model, Node, Opset, ONNX_DOMAIN};
use ort::session::Session;
use ort::value::{Outlet, Shape, SymbolicDimensions, Tensor, TensorElementType, ValueType};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = ort::init().with_name("rivet-example").build()?; // ORT from ORT_DYLIB_PATH
    let lib = std::env::var("RIVET_EP_LIB").unwrap_or_else(|_| "target/release/librivet_ep.so".into());
    // ORT resolves a relative path against its own directory: pass an absolute one.
    env.register_ep_library("rivet", std::path::absolute(lib)?)?;
    let rivet: Vec<_> = env.devices().filter(|d| d.ep().is_ok_and(|name| name == "Rivet")).collect();

    // y = tanh(x * x) on x[N, 4]
    let x_type = |name: &str| {
        let symbols = SymbolicDimensions::new(["N".to_string(), String::new()]);
        let shape = Shape::new([-1, 4]);
        Outlet::new(name, ValueType::Tensor { ty: TensorElementType::Float32, shape, dimension_symbols: symbols })
    };
    let mut graph = Graph::new()?;
    graph.set_inputs([x_type("x")])?;
    graph.set_outputs([x_type("y")])?;
    graph.add_node(Node::new("Mul", ONNX_DOMAIN, "mul", ["x", "x"], ["x2"], [])?)?;
    graph.add_node(Node::new("Tanh", ONNX_DOMAIN, "tanh", ["x2"], ["y"], [])?)?;
    let mut model = Model::new([Opset::new(ONNX_DOMAIN, 21)?])?;
    model.set_graph(graph)?;

    // Rivet alone, or fail: a node Rivet does not claim makes session creation fail.
    let builder = Session::builder(&env)?.with_devices(rivet, None)?;
    let builder = builder.with_config_entry("session.disable_cpu_ep_fallback", "1")?;
    let mut session = model.into_session(&builder)?;

    let x: Vec<f32> = (0..12).map(|i| -2.0 + 4.0 * i as f32 / 11.0).collect();
    let outputs = session.run(ort::inputs!["x" => Tensor::from_array(([3usize, 4], x.clone()))?])?;
    let (_, y) = outputs["y"].try_extract_tensor::<f32>()?;
    let worst = x.iter().zip(y).map(|(x, y)| (y - (x * x).tanh()).abs()).fold(0.0f32, f32::max);
    println!("max |rivet - reference| {worst:.1e}");
    if worst > 1e-5 {
        return Err(format!("Rivet's output is off by {worst}").into());
    }
    Ok(())
}
