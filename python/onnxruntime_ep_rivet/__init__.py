"""Rivet, a CPU execution provider for ONNX Runtime, as a plugin library.

    import onnxruntime as ort
    import onnxruntime_ep_rivet as rivet

    devices = rivet.register()          # or: ort.register_execution_provider_library(
                                        #         "rivet", rivet.get_library_path())
    so = ort.SessionOptions()
    so.add_provider_for_devices(devices, {})

The wheel holds two builds of the library: the production one and the probe build
(`get_library_path(probe=True)`), which counts every ORT call, heap allocation and
status per dispatch phase (see the project README, "Measuring dispatch: the probe").
"""

import os

__all__ = ["get_library_path", "get_ep_name", "register"]

_HERE = os.path.dirname(os.path.abspath(__file__))
_LIBRARY = "librivet_ep.so"
_PROBE_LIBRARY = "librivet_ep_probe.so"


def get_library_path(probe=False):
    """Absolute path of the plugin library (ORT resolves relative paths against its own
    directory, so the path is always absolute). `probe=True` gives the probe build."""
    path = os.path.join(_HERE, _PROBE_LIBRARY if probe else _LIBRARY)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"the Rivet plugin library is missing from the package: {path}")
    return path


def get_ep_name():
    """The execution provider name the library registers devices under."""
    return "Rivet"


def register(ort_module=None, name="rivet", probe=False):
    """Registers the library with ONNX Runtime under `name` and returns the Rivet
    devices, ready for `SessionOptions.add_provider_for_devices`. `ort_module` is the
    `onnxruntime` module to use (imported when omitted). Undo it with
    `ort.unregister_execution_provider_library(name)` once no session uses it."""
    if ort_module is None:
        import onnxruntime as ort_module
    ort_module.register_execution_provider_library(name, get_library_path(probe=probe))
    devices = [d for d in ort_module.get_ep_devices() if d.ep_name == get_ep_name()]
    if not devices:
        raise RuntimeError(f"{get_library_path(probe=probe)} was registered as {name!r} but offers no {get_ep_name()} device")
    return devices
