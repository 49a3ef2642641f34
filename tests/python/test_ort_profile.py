"""Rivet's inner nodes in ORT's own profile (enable_profiling), from Python, with the
production library: one event per node per Run, named after the node, with durations,
tagged with the fused node whose ORT event they sit in."""
import json
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _model():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu1"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Sigmoid", ["p"], ["y"], name="sig1"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [w, b],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()


def _session(ort, profile_prefix=None):
    so = ort.SessionOptions()
    so.add_provider_for_devices([d for d in ort.get_ep_devices() if d.ep_name == "Rivet"], {})
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(_model(), sess_options=so)


def test_inner_nodes_appear_in_orts_profile_once_per_run(tmp_path):
    import numpy as np
    import onnxruntime as ort

    lib = os.environ.get("RIVET_EP_LIB", str(ROOT / "target/release/librivet_ep.so"))
    ort.register_execution_provider_library("rivet_prof", lib)
    try:
        s = _session(ort, str(tmp_path / "rivet_profile"))
        x = np.linspace(-1, 1, 3 * 64, dtype=np.float32).reshape(1, 3, 8, 8)
        runs = 2
        for _ in range(runs):
            s.run(None, {"x": x})
        path = s.end_profiling()
        events = json.loads(pathlib.Path(path).read_text())
        if isinstance(events, dict):
            events = events["traceEvents"]
        # ORT's own event of the fused node says provider Rivet too; ours are kernel events.
        ours = [e for e in events if e.get("cat") == "Kernel" and e.get("args", {}).get("provider") == "Rivet"]
        names = sorted({e["name"] for e in ours})
        # The Relu is folded into the Conv's epilogue: one step, named for both.
        assert names == sorted(["conv1 (+relu1)", "pool1", "sig1"]), names
        for name in names:
            mine = [e for e in ours if e["name"] == name]
            assert len(mine) == runs, (name, len(mine))
            for e in mine:
                assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0, e
                assert int(e["args"]["dur_ns"]) >= 0, e
        ops = {e["name"]: e["args"]["op_name"] for e in ours}
        assert ops == {"conv1 (+relu1)": "Conv", "pool1": "MaxPool", "sig1": "Sigmoid"}, ops
        # Tagged with the fused node: ORT's own event for it (same process and thread)
        # is there once per Run.
        parents = {e["args"]["parent_name"] for e in ours}
        assert len(parents) == 1, parents
        (parent,) = parents
        fused = [e for e in events if e["name"] == parent and e.get("cat") == "Node"]
        assert len(fused) == runs, [e["name"] for e in events if e.get("cat") == "Node"]
        assert {e["args"]["fused_node"] + "_kernel_time" for e in ours} == {parent}
        for e in ours:
            assert e["pid"] == os.getpid() and e["tid"] == fused[0]["tid"], (e, fused[0])
        # Each Run's nodes in execution order, one after the other.
        ordered = sorted(ours, key=lambda e: e["ts"])
        assert [e["name"] for e in ordered] == ["conv1 (+relu1)", "pool1", "sig1"] * runs, ordered
        for a, b in zip(ordered, ordered[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1, (a, b)

        # Without profiling the same session type records nothing and runs the same.
        plain = _session(ort)
        np.testing.assert_allclose(plain.run(None, {"x": x})[0], s.run(None, {"x": x})[0], rtol=1e-6)
    finally:
        ort.unregister_execution_provider_library("rivet_prof")


def test_unnamed_nodes_are_one_event_each(tmp_path):
    """ONNX allows empty (and repeated empty) node names: a chain of unnamed nodes is
    still one event per node per Run, each with its own op type (not one merged node)."""
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Exp", ["a"], ["b"]), helper.make_node("Tanh", ["b"], ["y"])]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()
    lib = os.environ.get("RIVET_EP_LIB", str(ROOT / "target/release/librivet_ep.so"))
    ort.register_execution_provider_library("rivet_prof2", lib)
    try:
        so = ort.SessionOptions()
        so.add_provider_for_devices([d for d in ort.get_ep_devices() if d.ep_name == "Rivet"], {})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / "unnamed")
        s = ort.InferenceSession(model, sess_options=so)
        s.run(None, {"x": np.ones((4, 8), np.float32)})
        events = json.loads(pathlib.Path(s.end_profiling()).read_text())
        if isinstance(events, dict):
            events = events["traceEvents"]
        ours = [e for e in events if e.get("cat") == "Kernel" and e.get("args", {}).get("provider") == "Rivet"]
        ops = [e["args"]["op_name"] for e in sorted(ours, key=lambda e: e["ts"])]
        assert ops == ["Relu", "Exp", "Tanh"], [(e["name"], e["args"]["op_name"]) for e in ours]
    finally:
        ort.unregister_execution_provider_library("rivet_prof2")
