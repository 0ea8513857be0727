"""Zoo models' profiles on disk (bench/driver/profile_cache.py): a driver planning from a warm
cache imports no TensorFlow, and what it reads is the profile a fresh build gives, field by field.

Each test has its own ``$RALP_CACHE``; the profiles compared are built in this process.
"""
import json
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from bench.driver import profile_cache
from bench.models import get_model
from bench.models.sources import get_spec
from ralp.profile import ModelProfile, profile_built
from tests.conftest import ROOT


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RALP_CACHE", str(tmp_path))
    return tmp_path / "profiles"


@pytest.mark.parametrize("name", ["alexnet_cifar", "resnet_cifar"])  # sequential; functional with skips
def test_a_profile_survives_the_round_trip_through_json(name):
    profile = profile_built(lambda: get_model(name))
    assert profile.created and profile._tower_layers  # the fields a plain asdict would lose or garble
    again = ModelProfile.from_json(json.loads(json.dumps(profile.to_json())))
    assert again == profile
    cut = profile.cut_points[len(profile.cut_points) // 2]
    assert again.split_sizes(cut) == profile.split_sizes(cut) and again.variable_sizes == profile.variable_sizes


def test_a_second_process_plans_from_the_disk_without_tensorflow(cache):
    """The first process profiles and keeps the entry; the second reads it, and TensorFlow is
    never imported there (the 4 CPU-s this saves is the point)."""
    code = ("import json, sys; from bench.driver.planning import model_profile; "
            "p = model_profile('lenet_mnist'); "
            "print(json.dumps({'tf': 'tensorflow' in sys.modules, 'profile': p.to_json()}))")
    env = {**os.environ, "RALP_CACHE": str(cache.parent)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                                      timeout=120, check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert [r["tf"] for r in runs] == [True, False]
    assert len(list(cache.glob("lenet_mnist-*.json"))) == 1
    fresh = profile_built(lambda: get_model("lenet_mnist"))
    assert ModelProfile.from_json(runs[1]["profile"]) == fresh


def test_the_key_changes_with_the_spec_and_a_users_model_is_not_kept(cache, tmp_path):
    spec = get_spec("lenet_mnist")
    assert profile_cache.key(spec) == profile_cache.key(get_spec("lenet_mnist"))
    assert profile_cache.key(spec) != profile_cache.key(replace(spec, num_classes=7))
    assert profile_cache.key(spec) != profile_cache.key(get_spec("lenet_mnist", input_shape="32,32,1"))
    calls = []
    user = replace(spec, kind="function", source="mynets:build")
    profile_cache.cached_profile(user, lambda: calls.append(1) or "built")
    profile_cache.cached_profile(user, lambda: calls.append(1) or "built")
    assert calls == [1, 1] and not cache.exists()


def test_an_unreadable_entry_is_profiled_again_and_replaced(cache):
    spec = get_spec("lenet_mnist")
    built = profile_built(lambda: get_model(spec))
    assert profile_cache.cached_profile(spec, lambda: built) == built
    [entry] = cache.glob("*.json")
    entry.write_text('{"name": "half a fi')
    calls = []
    assert profile_cache.cached_profile(spec, lambda: calls.append(1) or built) == built
    assert calls == [1] and ModelProfile.from_json(json.loads(entry.read_text())) == built
    assert not list(cache.glob("*.tmp*"))  # bench/store/atomic.py temp_path
