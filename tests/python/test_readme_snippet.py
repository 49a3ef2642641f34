"""README checks, and Rivet's behaviour with fallback off, against the pinned onnxruntime wheel."""
import os
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


# The Python snippet itself runs through the wheel in a fresh venv: test_wheel.py.


def test_rust_example_in_readme_is_the_example_file():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"<!-- rust-example: (\S+) -->\s*```rust\n(.*?)```", text, re.S)
    assert m, "README has no rust block after <!-- rust-example: PATH -->"
    assert m.group(2) == (ROOT / m.group(1)).read_text(), f"README's Rust example differs from {m.group(1)}"


def test_unclaimed_node_with_fallback_off_fails_naming_the_node():
    import math

    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    lib = os.environ.get("RIVET_EP_LIB", str(ROOT / "target/release/librivet_ep.so"))
    ort.register_execution_provider_library("rivet_py", lib)
    try:
        g = helper.make_graph(
            [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Gelu", ["r"], ["y"], name="the_contrib_gelu", domain="com.microsoft")],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
        so = ort.SessionOptions()
        so.add_provider_for_devices([d for d in ort.get_ep_devices() if d.ep_name == "Rivet"], {})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        try:
            ort.InferenceSession(model.SerializeToString(), sess_options=so)
            raise AssertionError("session creation should fail")
        except Exception as e:  # onnxruntime raises its own exception types
            assert "the_contrib_gelu" in str(e), str(e)
        # With fallback on, the same model runs, split between Rivet and the CPU EP.
        so = ort.SessionOptions()
        so.add_provider_for_devices([d for d in ort.get_ep_devices() if d.ep_name == "Rivet"], {})
        s = ort.InferenceSession(model.SerializeToString(), sess_options=so)
        x = np.array([[1, -2, 3], [-4, 5, 6]], dtype=np.float32)
        r = np.maximum(x, 0)
        want = (r * 0.5 * (1 + np.vectorize(math.erf)(r / math.sqrt(2)))).astype(np.float32)  # Gelu
        np.testing.assert_allclose(s.run(None, {"x": x})[0], want, rtol=1e-5)
    finally:
        ort.unregister_execution_provider_library("rivet_py")
