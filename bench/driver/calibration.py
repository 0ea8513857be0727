"""Calibration under an emulated host's CPU quota: this machine's throughput, and a model's own step.

The one owner of the calibration cache and of every measurement of this machine: ``run``'s
predictions (bench/driver/planning.py), ``analyze --hardware local`` and the time-scaled links
(bench/driver/scaling.py) all read it, so a figure measured for one is reused by the others and no
caller can erase another's entries (writes merge under a lock, see ``_store``).

Why: the cost model prices compute with throughputs. On the emulated cluster
each host is capped at ``cpus_per_host`` cores, so the figures must be
measured under that same cap, not on the whole machine, or every compute
term is off by the ratio of the two. Two measurements, each cached per quota
in ``$RALP_CACHE/calibration.json`` (default ``~/.cache/ralp-bench``, the
directory ci/setup.sh caches its wheels in; ``$RALP_CALIBRATION_CACHE`` names another file):
- ``hardware_under(cores)``: conv and matmul FLOP/s (short TensorFlow
  micro-benchmarks) plus one memory-bound pass (``m = a*m + g`` over 4 M
  floats: the unit in which gradient aggregation and updates are priced);
  ``resolve_hardware`` turns ``--hardware local`` into it;
- ``model_timing(...)``: the model's own forward + backward at the run's
  batch, the RALP tower at B and its head at W*B images (what the PS runs),
  so compute terms are this host's for this model, not a FLOP count divided
  by a conv benchmark's rate.
Each runs in a subprocess placed in a temporary cgroup with the quota (the
same mechanism as the hosts: bench/launch/cgroups.py), with the thread
counts a rank on such a host uses. Without cgroups (not root), the figures
are measured uncapped and say so.

On a cluster of other machines (``--cluster hosts`` or ``slurm``) this machine is only the
driver, often a login node with other CPUs than the compute hosts, so the same program runs
on a worker host instead, started as that host's ranks are (``run_on``; issue 34): its own
CPUs, CPU group and environment are what the figures measure, and they are cached under the
machine key and usable cores that host reports for itself (``_host``), so a later run reuses
them without measuring (the steal kept beside them is the driver machine's: the same machine
on emulated hosts, a hint only on a real cluster). Where to measure is a host name on the
run's settings (``RunConfig.calibrate_on``, set by bench/driver/clusters.py apply_cluster); how to
start a program there is registered here by the same function (``register_place``), so the
planning code passes a name through and never sees a launcher.
"""
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Tuple

from bench.core.cache import cache_dir
from bench.core.errors import RunFailed, UserError, one_line
from bench.core.roles import RankLayout
from bench.launch import cgroups as cg
from bench.launch.base import LaunchSpec, run_mpirun
from bench.launch.cgroups import threads_for, usable_cores
from bench.launch.cpu_steal import PROBE_MAX_STEAL, OthersLoad, free_share, measure_quietly
from bench.models import get_model
from bench.models.sources import format_shape, get_spec, model_digest
from bench.store.atomic import write_text_atomic
from bench.store.dirlock import dir_lock
from bench.store.environment import package_version
from ralp.cut import split_model
from ralp.hardware import hardware_from_measurement, load_hardware
from strategies.base import loss_fn

# $RALP_CALIBRATION_CACHE names the file itself: the test suite points it at a cache of its own, so
# figures measured while three test processes share the cores never price a user's later run.
CACHE = Path(os.environ.get("RALP_CALIBRATION_CACHE") or cache_dir() / "calibration.json")
PASS_ELEMENTS = 4 * 1024 * 1024
# A calibration is measured again (up to STEAL_TRIES times, as under steal) while other processes
# left it less than this share of its quota: the user's build or browser would otherwise slow every
# figure, and the cache would keep them for good. $RALP_CALIBRATION_MIN_FREE sets another share
# (0: never measure again); the test suite sets 0, as its three processes always crowd each other.
MIN_FREE_SHARE = 0.9
# Starts the line that carries the program's JSON: mpirun may prefix a rank's lines or put a
# daemon's warning before them, so the driver looks for this, not for a line starting with "{".
MARK = "RALP-CALIBRATION "


def _machine_key() -> str:
    return f"{platform.node()}|{platform.machine()}|{os.cpu_count()}|tf{package_version('tensorflow', 'tensorflow-cpu')}"


def _load() -> Dict:
    """The cache's keyed entries; anything else in the file (an unreadable file, the flat
    single-entry format an older ``analyze --hardware local`` wrote) reads as no entry."""
    try:
        data = json.loads(CACHE.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _store(key: str, value: Dict):
    """Add one entry. Read, merge and replace under the cache directory's lock: two processes
    calibrating at once (a sweep's driver and an ``analyze``) each keep the other's entries, and
    a reader sees the old file or the new one, never half of one (bench/store/atomic.py)."""
    with dir_lock(CACHE.parent):
        data = _load()
        data[key] = value
        write_text_atomic(CACHE, json.dumps(data, indent=1, sort_keys=True))


def _cached(key: str, measure) -> Dict:
    """The cached figures for ``key``, else measured now. Every prediction of this machine is
    built on them, and a cache keeps them for good: so they are measured again (up to
    bench/cpu_steal.STEAL_TRIES times) while the hypervisor steals more CPU than the probes
    allow or other processes leave them under ``min_free_share()`` of their quota, and keep the
    steal and the load they were measured under (``steal``, ``free_share``, ``others_cores``)."""
    data = _load().get(key)
    if data is None:
        least = min_free_share()
        figures, steal = measure_quietly(measure, PROBE_MAX_STEAL,
                                         crowded=lambda figures: (figures.get("free_share") is not None
                                                                  and figures["free_share"] < least))
        data = dict(figures, measured_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
                    steal=None if steal is None else round(steal, 3))
        _store(key, data)
    return data


def min_free_share() -> float:
    """The least share of its quota a calibration may be left by other processes (``MIN_FREE_SHARE``,
    or ``$RALP_CALIBRATION_MIN_FREE``)."""
    text = os.environ.get("RALP_CALIBRATION_MIN_FREE", "").strip()
    if not text:
        return MIN_FREE_SHARE
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise UserError(f"RALP_CALIBRATION_MIN_FREE must be a share between 0 and 1 (e.g. 0.9; 0: never measure "
                        f"again), got {text!r}")
    return value


def _provenance(data: Dict) -> str:
    steal, free = data.get("steal"), data.get("free_share")
    under = f" under {steal:.0%} CPU steal" if steal is not None else ""
    if free is not None and free < 0.995:
        under += f", other processes leaving it {free:.0%} of its cores"
    return f"{data['measured_at']}{under}"


def run_capped(cores: Optional[float], argv, timeout_s: float = 600) -> Dict:
    """Run ``python -m bench.driver.calibration ARGV`` in a fresh group capped at ``cores``; its JSON."""
    group = None
    if cores and cg.available()[0]:
        group = cg.create(f"{cg.PREFIX}calib{os.getpid()}-h0", cores)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
    try:
        cmd = [sys.executable, "-m", "bench.driver.calibration", *map(str, argv)]
        if group:
            cmd = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', group.procs_file] + cmd
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    finally:
        if group:
            cg.remove(group.path)
    result = parse_output(out.stdout)
    if out.returncode != 0 or result is None:
        raise UserError(f"calibration {' '.join(map(str, argv))} failed: {_reason(out)}")
    return result


def _reason(out) -> str:
    """Why the subprocess failed, in one line: its last line on stderr (main's message, or the
    exception line that ends a traceback), never a fragment of the traceback (its stderr also
    carries Keras warnings, so the last line, not the whole text)."""
    lines = out.stderr.strip().splitlines()
    return lines[-1][-300:] if lines else f"exit status {out.returncode} and no output"


def parse_output(text: str) -> Optional[Dict]:
    """The object the calibration program printed after ``MARK`` in ``text`` (its own stdout,
    or mpirun's), the last one if several; None if none is whole. The marker is found wherever
    it starts on its line (mpirun's ``--tag-output`` prefix, a warning written just before it)
    and the object is read up to its own end (``raw_decode``), whatever follows it; a line cut
    or mixed with another's text is skipped, not half read."""
    decoder = json.JSONDecoder()
    found = None
    for line in text.splitlines():
        at = line.rfind(MARK)
        if at < 0:
            continue
        try:
            value, _ = decoder.raw_decode(line, at + len(MARK))
        except ValueError:
            continue
        if isinstance(value, dict):
            found = value
    return found


# Where calibration runs when not on this machine: host name -> the mpirun (a LaunchSpec whose
# argv lacks only the program) that starts one process there, as the launcher starts ranks.
_PLACES: Dict = {}
# host name -> (machine key, usable cores) that host reported for itself, asked once per process
_HOSTS: Dict[str, Tuple[str, float]] = {}


def register_place(host: str, launch) -> None:
    """Say how to start a program on ``host``: ``launch`` is a bench.launch.base.LaunchSpec whose
    argv ends where the program's begins, with the environment mpirun forwards (``-x``) to it.

    Why a registry beside the setting: the run's settings say WHERE (``calibrate_on``, a host
    name: printable, stored in rows, never sent to ranks), this says HOW, which a setting must
    not carry (the forwarded variables' values may be secrets, and settings are printed, swept
    and stored). bench/driver/clusters.py apply_cluster fills both from the launcher, so planning
    passes a name through and knows no launcher. Registering a host again (the next cluster of
    a sweep) replaces it and forgets the machine key it reported."""
    _PLACES[host] = launch
    _HOSTS.pop(host, None)


def run_on(host: str, argv, timeout_s: float = 600) -> Dict:
    """Run ``python -m bench.driver.calibration ARGV`` on ``host`` through its registered mpirun; its JSON.
    No cgroup of ours: the host's own CPUs are what counts (an emulated ssh host's CPU group
    holds whatever its sshd starts). The shared runner (bench/launch/base.py run_mpirun) gives
    the deadline, the one-line failure with its log, and no process left behind."""
    launch = _PLACES.get(host)
    if launch is None:
        raise UserError(f"cannot calibrate on {host}: no launcher in this process reaches it; run with "
                        "--cluster hosts or slurm, or give --hardware PRESET_OR_FILE")
    program = [sys.executable, "-m", "bench.driver.calibration", *map(str, argv)]
    what = f"calibration {' '.join(map(str, argv))} on {host}"
    try:
        output = run_mpirun(LaunchSpec(list(launch.argv) + program, env=dict(launch.env)), timeout_s=timeout_s,
                            layout=RankLayout(1, 0, tf=False), log_label=f"calibration-{host}")
    except RunFailed as exc:
        raise UserError(f"{what} failed: {one_line(str(exc))}") from None
    result = parse_output(output)
    if result is None:
        raise UserError(f"{what} printed no {MARK.strip()} line; its last output: {one_line(output[-300:])}")
    return result


def _host(where: str) -> Tuple[str, float]:
    """The machine key and usable cores host ``where`` reports for itself: what its figures are
    cached under (one short launch per process, no TensorFlow). The cores count because its own
    limits (an emulated host's CPU group, a container's quota) are what it calibrates under,
    and they can change while the machine does not (another emulated cluster's cap)."""
    if where not in _HOSTS:
        answer = run_on(where, ["key"], timeout_s=120)
        _HOSTS[where] = (answer["machine"], float(answer["cores"]))
    return _HOSTS[where]


def _measure_at(where: Optional[str], cores: Optional[float], argv) -> Dict:
    """The calibration program's figures: on host ``where`` as its ranks run, else here under a
    quota of ``cores``. A host that answers as another machine than it did when asked for its
    key (``_host``) is refused: its figures would be cached under the wrong machine."""
    if where is None:
        return run_capped(cores, argv)
    result = run_on(where, argv)
    machine = _host(where)[0]
    if result.get("machine") != machine:
        raise UserError(f"calibration on {where} ran on {result.get('machine')!r}, not on {machine!r}; "
                        "check the hostfile names one machine per host")
    return result


def _quota_label(cores: Optional[float]) -> str:
    return f"{cores:.3f}" if cores else "all"


def _entry_key(what: str, cores: Optional[float], where: Optional[str]) -> str:
    """A cache key: the measured machine's key, what was measured, and the quota it ran under:
    ``cores`` here, or on host ``where`` (which runs under no quota of ours) the cores it may use."""
    if where is None:
        return f"{_machine_key()}|{what}|{_quota_label(cores)}"
    machine, usable = _host(where)
    return f"{machine}|{what}|{_quota_label(usable)}"


def hardware_key(cores: Optional[float], where: Optional[str] = None) -> str:
    """The cache key of ``hardware_under(cores, where)``."""
    return _entry_key("hardware", cores, where)


def hardware_under(cores: Optional[float], where: Optional[str] = None):
    """ralp.hardware.Hardware measured under a quota of ``cores`` (None: this whole machine), or
    on cluster host ``where`` (registered with ``register_place``) as its ranks run there."""
    data = _cached(hardware_key(cores, where), lambda: _measure_at(where, cores, ["hardware"]))
    if where:
        machine, usable = _host(where)
        place = f"on host {where} ({machine}, {usable:.2f} usable cores: started as its ranks are)"
    else:
        place = f"under {cores:.2f} cores per host (cgroup quota)" if cores else "under the whole machine"
    return hardware_from_measurement(data, f"calibrated {place}, {_provenance(data)}, cached in {CACHE}")


def resolve_hardware(spec: Optional[str], cores: Optional[float] = None, where: Optional[str] = None, **links):
    """The analyzer's Hardware for ``--hardware SPEC``: 'local' is this machine measured under a
    quota of ``cores`` (None: the whole machine) or cluster host ``where`` (``hardware_under``),
    anything else a preset or a JSON file (ralp.hardware.load_hardware, which measures nothing:
    the engine imports no harness); ``links`` are load_hardware's bandwidth/ps_bandwidth/latency
    overrides."""
    return load_hardware(hardware_under(cores, where) if spec == "local" else spec, **links)


def model_key(spec, batch_size: int, workers: int, cut: Optional[str], cores: Optional[float],
              where: Optional[str] = None) -> str:
    """The cache key of ``model_timing`` for a ModelSpec: a user's model is keyed by its shape,
    classes and file hash too."""
    name = spec.name if spec.kind == "zoo" and spec == get_spec(spec.name) else f"{_described(spec)}|{model_digest(spec)}"
    return _entry_key(f"model|{name}|B{batch_size}|W{workers}|{cut}", cores, where)


def _described(spec) -> str:
    return json.dumps([spec.name, format_shape(spec.input_shape), spec.num_classes])


def model_timing(model, batch_size: int, workers: int, cut: Optional[str], cores: Optional[float],
                 where: Optional[str] = None) -> Dict:
    """Seconds of one training step of ``model`` (a zoo name or ModelSpec) under the quota, or on
    cluster host ``where``: full model at B, tower at B and head at W*B for ``cut`` (omitted when
    None). Keys: full_s, tower_s, head_s."""
    spec = get_spec(model) if isinstance(model, str) else model
    argv = ["model", _described(spec), batch_size, workers, cut or "-"]
    return _cached(model_key(spec, batch_size, workers, cut, cores, where), lambda: _measure_at(where, cores, argv))


# ---- what runs inside the capped subprocess, or on a cluster host ---------------------------

def _threads():
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads_for(usable_cores()))
    tf.config.threading.set_inter_op_parallelism_threads(2)
    return tf


def _median_time(fn, repeats: int = 11, budget_s: float = 15.0) -> float:
    fn()
    fn()  # tracing, allocation
    times = []
    start = time.perf_counter()
    while len(times) < repeats and (len(times) < 2 or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _timed_flops(fn, flops_per_call: float, budget_s: float) -> float:
    fn()  # warm-up: tracing and memory allocation
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget_s:
            return flops_per_call * calls / elapsed


def _measure_flops(tf) -> Dict:
    """Conv and matmul FLOP/s, about one second each: what the cost model divides FLOPs by."""
    images = tf.random.normal([8, 56, 56, 64])
    kernel = tf.random.normal([3, 3, 64, 64])
    conv_flops = 2 * 3 * 3 * 64 * 64 * 56 * 56 * 8
    a = tf.random.normal([1024, 1024])
    matmul_flops = 2 * 1024 ** 3
    # Each function returns one element so the timing includes the op, not a large copy back.
    conv = tf.function(lambda: tf.nn.conv2d(images, kernel, 1, "SAME")[0, 0, 0, 0])
    matmul = tf.function(lambda: tf.linalg.matmul(a, a)[0, 0])
    return {
        "worker_conv_flops": _timed_flops(lambda: conv().numpy(), conv_flops, 1.0),
        "worker_dense_flops": _timed_flops(lambda: matmul().numpy(), matmul_flops, 1.0),
    }


def _measure_hardware() -> Dict:
    tf = _threads()
    figures = _measure_flops(tf)
    m = tf.Variable(tf.zeros([PASS_ELEMENTS]))
    g = tf.random.normal([PASS_ELEMENTS])
    update = tf.function(lambda: m.assign(0.9 * m + g)[0])
    # One pass: read two operands, write one (what a momentum update or a gradient sum does).
    figures["pass_s"] = _median_time(lambda: update().numpy()) / PASS_ELEMENTS
    return figures


def _measure_model(described: str, batch: int, workers: int, cut: Optional[str]) -> Dict:
    tf = _threads()

    name, shape, classes = json.loads(described)
    model = get_model(get_spec(name, shape, classes), seed=0)
    shape = tuple(model.inputs[0].shape[1:])
    classes = int(model.outputs[0].shape[-1])

    def step_of(net, inputs_shape, n, part):
        """One training step's compute: the full model and the head (PS) end in the loss; the
        head also yields the activation gradients it sends back; the tower (worker) gets
        those as its upstream gradient."""
        x = tf.random.normal((n,) + tuple(inputs_shape))
        y = tf.random.uniform([n], 0, classes, tf.int32)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                out = net(x, training=True)
                loss = loss_fn(y, out) if part != "tower" else tf.reduce_sum(out * 1e-3)
            sources = net.trainable_variables + ([x] if part == "head" else [])
            grads = tape.gradient(loss, sources)
            return tf.add_n([tf.reduce_sum(g) for g in grads if g is not None])

        return lambda: step().numpy()

    timing = {"full_s": _median_time(step_of(model, shape, batch, "full"))}
    if cut:
        tower, head = split_model(model, cut)
        timing["tower_s"] = _median_time(step_of(tower, shape, batch, "tower"))
        timing["head_s"] = _median_time(step_of(head, tuple(tower.outputs[0].shape[1:]), batch * workers, "head"))
    return timing


def _beside_load(measure) -> Dict:
    """``measure()``'s figures, with what the rest of this machine took meanwhile: the cores it
    kept busy (``others_cores``) and the share of this program's quota it left (``free_share``)."""
    with OthersLoad() as others:
        figures = measure()
    if others.cores is not None:
        figures.update(others_cores=round(others.cores, 3),
                       free_share=round(free_share(others.cores, usable_cores()), 3))
    return figures


def emit(result: Dict) -> str:
    """The line that carries ``result`` to the driver (``parse_output`` reads it back)."""
    return MARK + json.dumps(result, sort_keys=True) + "\n"


def main(argv=None):
    """``key``: this machine's key only (no TensorFlow: the driver asks a host before looking in
    its cache); ``hardware`` and ``model ...``: the figures, with the key of the machine that
    measured them (``machine``). Under mpirun the first line is the phase line the shared runner
    waits for (bench/launch/base.py STARTUP_S); the result is one write, whole on mpirun's pipe."""
    argv = sys.argv[1:] if argv is None else argv
    os.write(1, b"RALP-PHASE 0 calibrating\n")
    try:
        if argv[:1] == ["key"]:
            result = {"cores": usable_cores()}
        elif argv[:1] == ["hardware"]:
            result = _beside_load(_measure_hardware)
        elif argv[:1] == ["model"] and len(argv) == 5:
            result = _beside_load(lambda: _measure_model(argv[1], int(argv[2]), int(argv[3]),
                                                         None if argv[4] == "-" else argv[4]))
        else:
            raise SystemExit('usage: python -m bench.driver.calibration key | hardware | model \'["NAME", "H,W,C", CLASSES]\' '
                             'BATCH WORKERS CUT')
    except UserError as exc:  # the driver shows this line (run_capped, run_on), not a traceback
        print(exc, file=sys.stderr)
        raise SystemExit(exc.exit_code)
    os.write(1, emit({**result, "machine": _machine_key()}).encode())


if __name__ == "__main__":
    main()
