"""An onnx.backend backend that runs models on ONNX Runtime with Rivet alone.

Sessions select the device whose ep_name is "Rivet" and set
session.disable_cpu_ep_fallback=1: a model with a node Rivet does not claim fails
session creation with Rivet's message ("Rivet cannot run node ..."), which the runner
reports as unsupported.
"""
import os
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
from onnx.backend.base import Backend, BackendRep

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIB = os.environ.get("RIVET_EP_LIB", str(ROOT / "target/release/librivet_ep.so"))
_registered = False


class Unsupported(Exception):
    """Rivet cannot run some node of the model (with fallback off, the session fails)."""


def _devices():
    global _registered
    if not _registered:
        ort.register_execution_provider_library("rivet_conformance", LIB)
        _registered = True
    devices = [d for d in ort.get_ep_devices() if d.ep_name == "Rivet"]
    assert devices, f"no Rivet device after registering {LIB}"
    return devices


class RivetRep(BackendRep):
    def __init__(self, session):
        self.session = session

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feed = inputs
        else:
            names = [i.name for i in self.session.get_inputs()]
            feed = dict(zip(names, inputs))
        if any(v.type in _BITS or v.type in _PACKED4 for v in self.session.get_inputs() + self.session.get_outputs()):
            return self._run_bits(feed, kwargs["expected"])
        return self.session.run(None, feed)

    def _run_bits(self, feed, expected):
        """ORT's Python API has no numpy type for bfloat16, the 8-bit floats or the 4-bit
        integers: bind the tensors' bits (as uint16 / uint8; the 4-bit ones packed two a
        byte, as ORT holds them, at the start of a byte array of their shape) through
        OrtValues, outputs preallocated at the expected shapes, and read them back as
        ml_dtypes arrays."""
        io = self.session.io_binding()
        for i in self.session.get_inputs():
            a = np.asarray(feed[i.name])
            if i.type in _BITS:
                dtype, bits_type, code = _BITS[i.type]
                bits = np.ascontiguousarray(a.astype(dtype).view(bits_type))
                io.bind_ortvalue_input(i.name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, code))
            elif i.type in _PACKED4:
                dtype, code = _PACKED4[i.type]
                # The low bits of each value: an integer's, a float4's code.
                held = a.astype(dtype)
                bits = held.view(np.uint8) if _is_float4(dtype) else held.astype(np.int8)
                width = _width(dtype)
                per = 8 // width
                parts = (bits.ravel() & ((1 << width) - 1)).astype(np.uint8)
                parts = np.concatenate([parts, np.zeros(-parts.size % per, np.uint8)]).reshape(-1, per)
                packed = np.zeros(parts.shape[0], np.uint8)
                for j in range(per):
                    packed |= parts[:, j] << (width * j)
                buf = np.zeros(a.shape, np.uint8)
                buf.reshape(-1)[: packed.size] = packed
                io.bind_ortvalue_input(i.name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(buf, code))
            else:
                io.bind_cpu_input(i.name, a)
        results = []
        for o, want in zip(self.session.get_outputs(), expected):
            if o.type in _BITS:
                dtype, bits_type, code = _BITS[o.type]
                buf = np.zeros(want.shape, dtype=bits_type)
                io.bind_ortvalue_output(o.name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(buf, code))
                results.append((buf, dtype))
            elif o.type in _PACKED4:
                dtype, code = _PACKED4[o.type]
                buf = np.zeros(want.shape, np.uint8)
                io.bind_ortvalue_output(o.name, ort.OrtValue.ortvalue_from_numpy_with_onnx_type(buf, code))
                results.append((buf, dtype, "packed"))
            else:
                io.bind_output(o.name, "cpu")
                results.append(None)
        self.session.run_with_iobinding(io)
        values = io.get_outputs()
        return [_unpack(r) if r is not None else v.numpy() for r, v in zip(results, values)]


def _is_float4(dtype):
    return np.dtype(dtype).name.startswith("float4")


def _width(dtype):
    """Bits an element of a packed type."""
    return 2 if np.dtype(dtype).name in ("int2", "uint2") else 4


def _unpack(r):
    """An output read back: bits viewed as their ml_dtypes type, or packed values unpacked."""
    if len(r) == 2:
        return r[0].view(r[1])
    buf, dtype = r[0], r[1]
    n = buf.size
    width = _width(dtype)
    per = 8 // width
    flat = buf.reshape(-1)[: -(-n // per)]
    mask = (1 << width) - 1
    parts = np.stack([(flat >> (width * j)) & mask for j in range(per)], axis=1).reshape(-1)[:n].astype(np.int16)
    if _is_float4(dtype):
        return parts.astype(np.uint8).view(dtype).reshape(buf.shape)
    if np.dtype(dtype).name in ("int4", "int2"):
        parts = np.where(parts >= (1 << (width - 1)), parts - (1 << width), parts)
    return parts.astype(dtype).reshape(buf.shape)


def _bits_types():
    """ORT's type name -> (ml_dtypes type, the numpy type of its bits, ONNX type code)."""
    import ml_dtypes

    P = onnx.TensorProto
    return {
        "tensor(bfloat16)": (ml_dtypes.bfloat16, np.uint16, P.BFLOAT16),
        "tensor(float8e4m3fn)": (ml_dtypes.float8_e4m3fn, np.uint8, P.FLOAT8E4M3FN),
        "tensor(float8e4m3fnuz)": (ml_dtypes.float8_e4m3fnuz, np.uint8, P.FLOAT8E4M3FNUZ),
        "tensor(float8e5m2)": (ml_dtypes.float8_e5m2, np.uint8, P.FLOAT8E5M2),
        "tensor(float8e5m2fnuz)": (ml_dtypes.float8_e5m2fnuz, np.uint8, P.FLOAT8E5M2FNUZ),
        "tensor(float8e8m0)": (ml_dtypes.float8_e8m0fnu, np.uint8, P.FLOAT8E8M0),
    }


_BITS = _bits_types()


def _packed4_types():
    import ml_dtypes

    P = onnx.TensorProto
    return {
        "tensor(int4)": (ml_dtypes.int4, P.INT4),
        "tensor(uint4)": (ml_dtypes.uint4, P.UINT4),
        "tensor(float4e2m1)": (ml_dtypes.float4_e2m1fn, P.FLOAT4E2M1),
        "tensor(int2)": (ml_dtypes.int2, P.INT2),
        "tensor(uint2)": (ml_dtypes.uint2, P.UINT2),
    }


_PACKED4 = _packed4_types()
_BITS_NAMES = {np.dtype(t[0]).name for t in list(_BITS.values()) + list(_PACKED4.values())}


class RivetBackend(Backend):
    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        so = ort.SessionOptions()
        so.add_provider_for_devices(_devices(), {})
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.log_severity_level = 4
        data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
        try:
            session = ort.InferenceSession(data, sess_options=so)
        except Exception as e:  # onnxruntime raises its own exception classes
            text = str(e)
            if "Rivet cannot run" in text or "fallback to CPU EP has been explicitly disabled" in text:
                raise Unsupported(text) from None
            if "is not a registered function/op" in text:
                raise Unsupported(f"ONNX Runtime itself cannot load it: {text}") from None
            raise
        return RivetRep(session)

    @classmethod
    def supports_device(cls, device):
        return device == "CPU"


def _close(g, w, rtol, atol):
    if g.shape != w.shape:
        return False
    if w.dtype.kind == "f" or w.dtype.name == "bfloat16" or w.dtype.name.startswith("float8"):
        g, w = np.asarray(g).astype(np.float64), np.asarray(w).astype(np.float64)
        return np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    return np.array_equal(g, w)


def _ort_cpu(model, feed):
    """ORT's own CPU EP on the same inputs (None if it cannot run the model)."""
    so = ort.SessionOptions()
    so.log_severity_level = 4
    try:
        s = ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])
        return s.run(None, feed)
    except Exception:  # onnxruntime raises its own exception classes
        return None


_RANDOM_OPS = {"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Bernoulli", "Multinomial"}


def _random_ops(model):
    """The model's random nodes: (any of them, any without a seed)."""
    nodes = [n for n in model.graph.node if n.op_type in _RANDOM_OPS]
    return bool(nodes), any(not any(a.name == "seed" for a in n.attribute) for n in nodes)


def _reference(model, feed):
    """ONNX's reference implementation on the same inputs (None if it cannot run them)."""
    from onnx.reference import ReferenceEvaluator

    try:
        return ReferenceEvaluator(model).run(None, feed)
    except Exception:  # the reference raises whatever its ops raise
        return None


def _in_support(g, w):
    """Whether every value of `g` is one the expected `w` takes (a Bernoulli output's 0 and
    1), or within `w`'s range when `w` takes many."""
    values = np.unique(np.asarray(w))
    if len(values) <= 16:
        return bool(np.isin(np.asarray(g), values).all())
    return bool(((g >= values[0]) & (g <= values[-1])).all())


def run_node_case(case_dir: pathlib.Path, rtol=1e-3, atol=1e-5):
    """Runs one node case directory. Returns ("pass" | "fail" | "ort-agrees" |
    "reference-agrees" | "random" | "unsupported", detail), none of them but "pass" a pass.
    "ort-agrees": Rivet's values differ from the suite's expected ones but equal what ORT's
    own CPU EP computes for the same inputs (the reference and ORT disagree; Rivet follows
    ORT). For a model with random nodes only: "reference-agrees", its values differ from
    the expected ones but equal, bit for bit, what ONNX's reference implementation computes
    for the same model and inputs (the suite's seeded Bernoulli cases, whose expected
    values come from numpy's global stream, not from the seed); "random", a node draws
    without a seed, so values cannot be compared: every output's shape and type are, and
    its values must be ones the expected output takes (0 and 1 for Bernoulli). Every
    output of every data set is checked before a case is given one of these."""
    from onnx import numpy_helper

    model = onnx.load(str(case_dir / "model.onnx"))
    try:
        rep = RivetBackend.prepare(model)
    except Unsupported as e:
        return "unsupported", str(e).split("\n")[0][:300]
    except Exception as e:
        return "fail", f"session creation: {str(e)[:300]}"
    random, unseeded = _random_ops(model)
    status = ("pass", "")
    for data_set in sorted(case_dir.glob("test_data_set_*")):
        def load(prefix):
            tensors = []
            for p in sorted(data_set.glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1])):
                t = onnx.TensorProto()
                t.ParseFromString(p.read_bytes())
                tensors.append(numpy_helper.to_array(t))
            return tensors

        inputs, expected = load("input"), load("output")
        names = [i.name for i in model.graph.input if i.name not in {x.name for x in model.graph.initializer}]
        feed = dict(zip(names, inputs))
        try:
            got = rep.run(feed, expected=expected)
        except Exception as e:
            return "fail", f"run: {str(e)[:300]}"
        ref = None
        for k, (g, w) in enumerate(zip(got, expected)):
            if g.shape != w.shape:
                return "fail", f"shape {g.shape} != {w.shape}"
            if _close(g, w, rtol, atol):
                continue
            diff = np.nanmax(np.abs(np.asarray(g).astype(np.float64) - np.asarray(w).astype(np.float64)))
            if not random:
                theirs = None if any(x.dtype.name in _BITS_NAMES for x in inputs) else _ort_cpu(model, feed)
                if theirs is not None and len(theirs) == len(got) and all(
                    _close(a, b, rtol, atol) for a, b in zip(got, theirs)
                ):
                    return "ort-agrees", f"values differ from the expected ones (max abs diff {diff:.3g}) as ORT's CPU EP's do"
                return "fail", f"values differ (max abs diff {diff:.3g})"
            if unseeded:
                if g.dtype != w.dtype or not _in_support(g, w):
                    return "fail", f"output {k}: an unseeded draw of another type or outside the expected values"
                status = ("random", "an unseeded draw: shapes, types and the values' support checked")
                continue
            ref = _reference(model, feed) if ref is None else ref
            if ref is None or len(ref) != len(got) or g.dtype != ref[k].dtype or not np.array_equal(g, ref[k]):
                return "fail", f"output {k}: values differ (max abs diff {diff:.3g}), and from the reference's"
            if status[0] == "pass":
                status = ("reference-agrees", (
                    f"values differ from the expected ones (max abs diff {diff:.3g}); "
                    "they are ONNX's reference implementation's, bit for bit"
                ))
    return status
