"""Trains the project's scikit-learn pipelines on seeded synthetic data and converts them
with skl2onnx (`*.onnx` in this folder, stored whole: their weights are node attributes,
tens of KB). The tests never run this script and never need scikit-learn: they load the
files and compare Rivet with ONNX Runtime's CPU EP on inputs they generate
(`tests/e2e_ml.rs`).

To rerun (scikit-learn and skl2onnx are dev-only, never installed into the repo's .venv):

    /work/torchvenv/bin/pip install scikit-learn skl2onnx
    /work/torchvenv/bin/python tests/models/ml/export.py

Every classifier is converted with zipmap=False (probabilities as a tensor, not a
sequence of maps) and integer class labels (classlabels_int64s), so the models are
tensor-only.
"""

import pathlib

import numpy as np
import onnx
from skl2onnx import to_onnx
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import Normalizer, StandardScaler

HERE = pathlib.Path(__file__).parent
OPSETS = {"": 17, "ai.onnx.ml": 3}


def data(n_classes, seed):
    x, y = make_classification(
        n_samples=400, n_features=8, n_informative=5, n_redundant=1, n_classes=n_classes, random_state=seed
    )
    return x.astype(np.float32), y.astype(np.int64)


def save(name, pipe, x):
    clf = pipe.steps[-1][1]
    model = to_onnx(pipe, x[:1], target_opset=OPSETS, options={id(clf): {"zipmap": False}})
    model.producer_name = "rivet tests/models/ml/export.py"
    onnx.checker.check_model(model)
    path = HERE / f"{name}.onnx"
    onnx.save(model, str(path))
    ops = sorted({f"{n.domain or 'ai.onnx'}:{n.op_type}" for n in model.graph.node})
    print(f"{path.name}: {path.stat().st_size} bytes, {ops}")


def main():
    # StandardScaler -> RandomForestClassifier, three classes.
    x, y = data(3, 0)
    forest = make_pipeline(StandardScaler(), RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0))
    save("forest_pipeline", forest.fit(x, y), x)

    # StandardScaler -> GradientBoostingClassifier, two classes (the binary tree path,
    # with base values and a LOGISTIC post transform).
    x, y = data(2, 1)
    gbt = make_pipeline(StandardScaler(), GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0))
    save("boosting_pipeline", gbt.fit(x, y), x)

    # SimpleImputer -> Normalizer -> LogisticRegression, three classes (missing values
    # are NaN).
    x, y = data(3, 2)
    x_missing = x.copy()
    x_missing[np.random.default_rng(0).random(x.shape) < 0.05] = np.nan
    logistic = make_pipeline(SimpleImputer(), Normalizer(norm="l2"), LogisticRegression(max_iter=500))
    save("logistic_pipeline", logistic.fit(x_missing, y), x_missing)


if __name__ == "__main__":
    main()
