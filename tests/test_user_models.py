"""Bring your own model (issue 16): keras:NAME, saved files and functions through analyze,
run and sweep, each rank building the same model; bad models refused before any rank starts."""
import json
import os
import textwrap

import numpy as np
import pytest

from bench.core.config import RunConfig
from bench.core.errors import UserError
from bench.launch.netns import can_emulate
from tests.conftest import ROOT, our_processes
from tests.test_distributed import BATCH, LR, STEPS, WARMUP, assert_same_weights, reference_weights

CUSTOM = "examples/custom_cnn.py:build"


@pytest.mark.parametrize("name", ["MobileNetV2", "EfficientNetB0", "DenseNet121", "Xception"])
def test_keras_applications_outside_the_zoo_are_profiled_by_spelling_alone(name):
    import tensorflow as tf

    from bench.models import MODELS
    from bench.models.build import settled_spec
    from bench.models.sources import get_spec
    from bench.driver.planning import model_profile

    assert name.lower() not in MODELS
    profile = model_profile(settled_spec(get_spec(f"keras:{name}")))
    theirs = getattr(tf.keras.applications, name)(weights=None)
    assert profile.params == theirs.count_params()
    assert profile.input_shape == tuple(theirs.input_shape[1:])
    assert profile.first_dense_cut() in profile.cut_points  # RALP can split it before its classifier


def test_analyze_takes_a_spelling_and_a_shape(cli):
    """keras:MobileNetV3Small has no fixed size of its own; --input-shape gives it one."""
    proc = cli("analyze", "--model", "keras:MobileNetV3Small", "--input-shape", "96,96,3", "--classes", "10",
               "--workers", "4", "--json", timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["model"].startswith("MobilenetV3small") and out["plan"]["strategy"] in ("ps", "horovod", "ralp")
    proc = cli("analyze", "--model", "keras:MobileNetV3Small", timeout=300)
    assert proc.returncode == 2 and "pass --input-shape H,W,C" in proc.stderr


def test_models_describe_lists_a_users_file_like_the_zoo(cli):
    proc = cli("models", "--describe", CUSTOM, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "examples/custom_cnn.py:build" in proc.stdout and "417,482" in proc.stdout and "flatten" in proc.stdout


def test_a_saved_model_file_keeps_its_weights_and_its_hash_is_checked(tmp_path):
    from bench.models.build import get_model, settled_spec
    from bench.models.sources import check_digest, model_digest

    path = str(tmp_path / "net.keras")
    original = get_model(CUSTOM.replace("examples", os.path.join(ROOT, "examples")), seed=3)
    original.save(path)
    cfg = RunConfig(model=path, strategy="ps").validate()
    from bench.driver.planning import settle_model

    cfg = settle_model(cfg)
    assert (cfg.input_shape, cfg.classes, cfg.model_sha256) == ("28,28,1", 10, model_digest(cfg.model_spec()))
    loaded = get_model(settled_spec(cfg.model_spec()), seed=0)  # the file's weights, not the seed's
    for a, b in zip(original.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    check_digest(cfg.model_spec(), cfg.model_sha256, "h1")
    with open(path, "ab") as f:
        f.write(b"changed on another host")
    with pytest.raises(UserError, match="differs from the driver's"):
        check_digest(cfg.model_spec(), cfg.model_sha256, "h1")


def test_the_custom_model_is_a_sweep_point():
    from bench.driver.sweep import load_sweep

    sweep = load_sweep(os.path.join(ROOT, "sweeps", "custom-model.toml"))
    assert {p.config.model for p in sweep.points} == {CUSTOM}
    assert {p.config.strategy for p in sweep.points} >= {"ps", "horovod", "ralp"}


BAD_MODULES = {
    "returns_int.py": "def build():\n    return 42\n",
    "subclassed.py": """
        import tensorflow as tf
        class Net(tf.keras.Model):
            def __init__(self):
                super().__init__()
                self.flat, self.out = tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)
            def call(self, x):
                return self.out(self.flat(x))
        def build():
            return Net()
        """,
    "any_size.py": """
        import tensorflow as tf
        def build():
            i = tf.keras.Input((None, None, 3))
            x = tf.keras.layers.GlobalAveragePooling2D()(tf.keras.layers.Conv2D(8, 3)(i))
            return tf.keras.Model(i, tf.keras.layers.Dense(10)(x))
        """,
    "softmax.py": """
        import tensorflow as tf
        def build():
            i = tf.keras.Input((28, 28, 1))
            return tf.keras.Model(i, tf.keras.layers.Dense(10, activation="softmax")(tf.keras.layers.Flatten()(i)))
        """,
    "raises.py": "import no_such_package_anywhere\n",
}


@pytest.mark.parametrize("spelling, extra, message", [
    ("broken.keras", [], "the file does not load as a Keras model"),
    ("returns_int.py:build", [], "build() returned int, not a tf.keras.Model"),
    ("subclassed.py:build", [], "is a subclassed Keras model, whose layers the profiler cannot see; give a functional"),
    ("any_size.py:build", [], "not a fixed HEIGHT,WIDTH,CHANNELS; build it with a fixed shape, or pass --input-shape"),
    ("softmax.py:build", [], "ends in a softmax; end it in logits"),
    ("raises.py:build", [], "importing raises.py failed (ModuleNotFoundError"),
    ("missing.py:build", [], "no file 'missing.py'"),
    (f"{ROOT}/examples/custom_cnn.py:nosuch", [], "has no function 'nosuch'"),
    ("keras:NoSuchNet", [], "tf.keras.applications has no 'NoSuchNet'"),
    (CUSTOM, ["--input-shape", "28,28"], "--input-shape must be HEIGHT,WIDTH,CHANNELS"),
    (CUSTOM, ["--classes", "1"], "--classes must be an integer of at least 2"),
    ("my_net", [], "unknown model 'my_net'; give a zoo name"),
])
def test_bad_models_are_one_line_before_any_rank(cli, tmp_path, spelling, extra, message):
    for name, text in BAD_MODULES.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    (tmp_path / "broken.keras").write_bytes(b"not a zip archive")
    proc = cli("run", "--cluster", "local", "--no-store", "--quiet", "--model", spelling, "--strategy", "ps",
               *extra, timeout=300, cwd=str(tmp_path) if not spelling.startswith("examples") else None)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ralp-bench: error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and our_processes() == []


def test_a_model_without_a_cut_refuses_ralp_with_the_reason_and_still_runs_ps(tmp_path):
    from bench.driver.harness import run_one
    from bench.launch.local import LocalLauncher
    from bench.driver.planning import settle_model

    (tmp_path / "all_conv.py").write_text(textwrap.dedent("""
        import tensorflow as tf
        def build():
            i = tf.keras.Input((28, 28, 1))
            x = tf.keras.layers.Conv2D(10, 3, name="conv")(i)
            return tf.keras.Model(i, tf.keras.layers.GlobalAveragePooling2D(name="gap")(x))
        """))
    spelling = str(tmp_path / "all_conv.py") + ":build"
    rows = {s: run_one(settle_model(RunConfig(model=spelling, strategy=s, workers=2, batch_size=8, steps=1,
                                              warmup_steps=1, dataset="mnist").validate()), LocalLauncher())
            for s in ("ralp", "ps")}
    assert rows["ralp"]["status"] == "failed"
    assert "no cut point before a dense layer; ralp cannot split it (use --strategy ps or horovod)" in \
        rows["ralp"]["failure"]
    assert rows["ps"]["status"] == "ok", rows["ps"]["failure"]
    assert rows["ps"]["model"] == spelling and rows["ps"]["model_sha256"]


OK, WHY = can_emulate()


@pytest.mark.skipif(not OK, reason=f"no emulated cluster here: {WHY}")
def test_a_users_cnn_trains_alike_under_every_strategy_on_the_emulated_cluster(tmp_path):
    """The acceptance run: a CNN from a user's file, ps / horovod / ralp at 2 workers on emulated
    hosts, each at single-process SGD's weights after 4 steps (1 warm-up + 3 timed)."""
    from bench.driver.harness import run_one
    from bench.launch.emulated_launcher import EmulatedLauncher
    from bench.driver.planning import settle_model

    cfg = settle_model(RunConfig(model=CUSTOM, workers=2, batch_size=BATCH, steps=STEPS, warmup_steps=WARMUP,
                                 learning_rate=LR, dataset="mnist").validate())
    reference = reference_weights(WARMUP + STEPS, cfg.model_spec())
    with EmulatedLauncher(2, 1, 1e9, link_check=False) as launcher:
        for strategy in ("ps", "horovod", "ralp"):
            dump = str(tmp_path / f"{strategy}.npz")
            run = RunConfig(**{**vars(cfg), "strategy": strategy, "dump_weights": dump})
            row = run_one(run, launcher)
            assert row["status"] == "ok", row["failure"]
            assert (row["model"], row["input_shape"], row["classes"]) == (CUSTOM, "28,28,1", 10)
            assert_same_weights(dump, reference, strategy)
            if strategy == "ralp":
                assert row["cut_layer"] == "flatten"
