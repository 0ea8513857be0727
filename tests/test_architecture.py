"""The architecture the guide asks for, checked rather than hoped for (issue 14).

- import-linter contracts (pyproject.toml [tool.importlinter]) hold: one layers rule over the packages, each
  of which says in its __init__ what it is;
- no module imports itself back through others (an import circle), counting imports inside functions;
- imports sit at the top of their module, where a reader sees them, except TensorFlow, Keras, Horovod
  and mpi4py (loading them starts runtimes, threads or MPI, so only the ranks that need them do) and
  an import that says why on its line or the line above (pandas, pyarrow, matplotlib: commands that
  never read rows or draw must not pay for them);
- a function over 60 lines says why in its docstring ("Long because"); modules are split by concept,
  with no line cap (issue 36: a cap split files by size, not by what they are);
- settings validation and the engine's arithmetic import no TensorFlow;
- one codec parser: a spec the settings accept is understood by the cost model too.
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("bench", "ralp", "strategies")


def _modules():
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def test_import_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "broken" in proc.stdout and " 0 broken" in proc.stdout


def _import_circles(graph):
    """Each import ``(a, b)`` that is part of a circle: ``b`` leads back to ``a`` through imports
    (grimp's own chain search over the graph import-linter builds)."""
    return sorted((a, b) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
                  if graph.find_shortest_chain(importer=b, imported=a) is not None)


def test_no_import_circles():
    import grimp  # import-linter's own graph builder: every import, at the top or inside a function

    # The check itself finds a planted circle, so an empty answer means something.
    planted = grimp.ImportGraph()
    for a, b in (("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")):
        planted.add_import(importer=a, imported=b)
    assert _import_circles(planted) == [("a", "b"), ("b", "c"), ("c", "a")]
    assert _import_circles(grimp.build_graph(*PACKAGES)) == []


def test_every_package_says_what_it_is():
    """One package per layer, each with a paragraph in its __init__ that says what it holds and why
    it stands apart (issue 36 item 2); the layers themselves are the import-linter rule above."""
    bare = [str(init.relative_to(ROOT)) for package in PACKAGES for init in sorted((ROOT / package).rglob("__init__.py"))
            if len((ast.get_docstring(ast.parse(init.read_text())) or "").split()) < 12]
    assert bare == []


LATE_IMPORTS_WITHOUT_A_REASON = ("tensorflow", "keras", "horovod", "mpi4py")


def test_imports_inside_functions_are_the_runtimes_or_say_why():
    unexplained = []
    for path in _modules():
        lines = path.read_text().splitlines()
        for func in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                module = (node.module if isinstance(node, ast.ImportFrom) else node.names[0].name) or ""
                said = "#" in lines[node.lineno - 1] or lines[node.lineno - 2].strip().startswith("#")
                if module.split(".")[0] not in LATE_IMPORTS_WITHOUT_A_REASON and not said:
                    unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert not unexplained, "imports inside functions that do not say why (move them to the top):\n" + \
        "\n".join(unexplained)


def test_long_functions_say_why():
    unexplained = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                if "Long because" not in " ".join((ast.get_docstring(node) or "").split()):
                    unexplained.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert not unexplained


def test_settings_validation_and_the_cost_model_import_no_tensorflow():
    code = ("import sys\nfrom bench.core.config import RunConfig\nfrom ralp.cost_model import predict\n"
            "RunConfig(strategy='ralp', compression='topk:1/100', hardware='v100-10gbe').validate()\n"
            "assert 'tensorflow' not in sys.modules, 'TensorFlow imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_a_ratio_topk_spec_is_understood_by_planning_and_predictions():
    """Defect: topk:1/100 passed validation, then ralp/auto rows failed with "planning failed"
    and ps/horovod rows silently lost their predictions (the cost model parsed floats only)."""
    from bench.core.config import RunConfig
    from bench.driver.planning import predict, resolve

    for strategy in ("ralp", "auto", "ps", "horovod"):
        cfg = RunConfig(model="alexnet_cifar", strategy=strategy, compression="topk:1/100",
                        hardware="v100-10gbe", bandwidth="1gbit").validate()
        plan = resolve(cfg)
        prediction = predict(cfg, plan.strategy, plan.cut)
        same = predict(RunConfig(**{**vars(cfg), "compression": "topk:0.01"}).validate(), plan.strategy, plan.cut)
        assert prediction is not None and prediction.worker_bytes == pytest.approx(same.worker_bytes)


def test_every_rank_setting_reaches_the_ranks():
    """Settings are declared once (RunConfig's fields): what the driver forwards is what a rank parses."""
    from dataclasses import fields

    from bench.core.config import RunConfig
    from bench.driver.harness import rank_argv
    from bench.run import parse

    cfg = RunConfig(model="vgg_cifar", workers=3, ps_placement="colocated", batch_size=8, steps=12, target_ci=0.05,
                    max_steps=30, time_cap=20.0, warmup_steps=5, compression="int8", step_timeout=99.0,
                    hardware="v100-10gbe", bandwidth="1gbit", horovod_fusion_mb=32.0, horovod_cycle_ms=2.0,
                    horovod_autotune=True, cpus_per_host=0.5, dump_weights="/tmp/w.npz").validate()
    ranked = parse(rank_argv(cfg, "ps", "/tmp/out.json"))
    for name in RunConfig.rank_fields():
        assert getattr(ranked, name) == getattr(cfg, name), name
    driver_only = {f.name for f in fields(RunConfig)} - set(RunConfig.rank_fields())
    assert driver_only == {"strategy", "ps_bandwidth", "latency", "network", "out", "extra", "calibrate_on"}


def test_run_settings_are_declared_once_for_flags_ranks_sweeps_and_rows():
    """RunConfig's field metadata makes the flags of both parsers, the sweep keys and the row's
    config columns: a new setting is one field, and none of them can fall out of step."""
    import argparse
    from dataclasses import fields

    from bench.core.config import RunConfig, add_setting_arguments
    from bench.store.schema import FIELD_TYPES
    from bench.run import parse
    from bench.driver.sweep import RUN_KEYS

    declared = {f.name: f.metadata["cli"] for f in fields(RunConfig)}
    for where in ("run", "cluster", "rank"):
        p = argparse.ArgumentParser()
        add_setting_arguments(p, where)
        flags = {a.dest for a in p._actions if a.dest != "help"}
        assert flags == {name for name, cli in declared.items() if where in cli}, where
    assert all(column in FIELD_TYPES for _, column in RunConfig.row_fields())
    assert ("train_to_accuracy", "target_accuracy") in RunConfig.row_fields()
    assert {"model", "input_shape", "compression", "horovod_fusion_mb"} <= RUN_KEYS
    ranked = parse(["--model", "lenet_mnist", "--cpus-per-host", "0.5", "--out", "/tmp/x.json"])
    assert (ranked.model, ranked.cpus_per_host, ranked.out) == ("lenet_mnist", 0.5, "/tmp/x.json")


def test_the_rank_result_is_typed_and_refuses_what_it_does_not_know():
    from bench.rank.result import RankResult

    result = RankResult(plan="ps", cut_layer=None, timed_steps=2, step_times=[0.5, 0.6], per_step_timing=True,
                        losses=[2.3, 2.2], evals=[], setup_s=1.0, train_time_s=1.1,
                        bytes_by_host={"10.0.0.2": [10, 20]}, tcp_by_host={}, ps_hosts=["10.0.0.1"])
    assert RankResult.from_json(result.to_json()) == result
    with pytest.raises(ValueError, match="does not know: bogus"):
        RankResult.from_json(result.to_json()[:-1] + ', "bogus": 1}')
