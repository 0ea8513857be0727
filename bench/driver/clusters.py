"""The driver's cluster: which launcher a run or a sweep point gets, and what the analyzer
must assume on it. Shared by `ralp-bench run`, `sweep` and asv; the links are a LinkSpec
(ralp/links.py) built here once, from the flags or a sweep point's keys.
"""
import sys
from dataclasses import replace

from bench.core.errors import UserError
from bench.core.roles import RankLayout
from bench.driver.calibration import register_place
from bench.driver.scaling import scaled_link
from bench.launch.emulated_cluster import default_cpus_per_host
from bench.launch.emulated_launcher import EmulatedLauncher
from bench.launch.hosts import HostsLauncher, parse_env, parse_mpirun_args
from bench.launch.local import LocalLauncher
from bench.launch.netns import can_emulate
from bench.launch.slurm import SlurmLauncher, job_id
from ralp.links import LinkSpec


def link_from_args(args, workers: int, cpus_per_host) -> LinkSpec:
    """--bandwidth/--ps-bandwidth/--latency/--scale-to, parsed once (default 1 Gbit/s)."""
    link = LinkSpec.parse(args.bandwidth or "1gbit", getattr(args, "ps_bandwidth", None),
                          getattr(args, "latency", None))
    if getattr(args, "scale_to", None):
        link = replace(link, worker_bps=scaled_link(args.scale_to, workers, cpus_per_host), scaled_to=args.scale_to)
    return link


def make_launcher(args, workers: int, ps: int):
    """Pick and configure the launcher; errors here come before anything starts."""
    mode = resolve_auto(args.cluster)
    if mode not in ("hosts", "slurm"):
        _refuse_passthrough(args)
    if mode == "local":
        return LocalLauncher()
    if mode in ("hosts", "slurm"):
        link = link_from_args(args, workers, None) if args.bandwidth else None
        passthrough = dict(env=parse_env(getattr(args, "env", None)),
                           mpirun_args=parse_mpirun_args(getattr(args, "mpirun_arg", None)),
                           firewall=not getattr(args, "no_firewall", False))
        if mode == "slurm":
            return SlurmLauncher(args.network, link, **passthrough)
        return HostsLauncher(args.hostfile, args.network, link, **passthrough)
    if mode != "emulated":
        raise UserError(f"--cluster must be auto, emulated, local, hosts or slurm; got {mode!r}")

    cpus = getattr(args, "cpus_per_host", None)
    cpus = default_cpus_per_host(ps + workers) if cpus is None else float(cpus)
    return EmulatedLauncher(workers, ps, link_from_args(args, workers, cpus), cpus_per_host=cpus,
                            link_check=not getattr(args, "no_link_check", False))


def resolve_auto(mode: str) -> str:
    """``auto``: the allocation inside a Slurm job (said in one line), else emulated where this
    machine can, else local; any other mode as given."""
    if mode != "auto":
        return mode

    job = job_id()
    if job:
        print(f"ralp-bench: note: inside Slurm job {job}; running on its nodes (--cluster slurm)",
              file=sys.stderr)
        return "slurm"

    ok, reason = can_emulate()
    if not ok:
        print(f"ralp-bench: note: no emulated cluster ({reason}); running locally over loopback", file=sys.stderr)
    return "emulated" if ok else "local"


def _refuse_passthrough(args):
    """--env/--mpirun-arg only mean something where ranks start on other hosts (over ssh or
    Slurm) with another environment than the driver's."""
    if getattr(args, "no_firewall", False):
        raise UserError("--no-firewall is for --cluster hosts or slurm; as root, local ranks run in a loopback-only "
                        "network namespace and emulated hosts sit on this machine's private bridge")
    for flag in ("env", "mpirun_arg"):
        if getattr(args, flag, None):
            raise UserError(f"--{flag.replace('_', '-')} is for --cluster hosts or slurm (ranks started on other "
                            "hosts); local and emulated ranks inherit the driver's whole environment: set variables "
                            "(OMPI_MCA_* for mpirun) there")


def apply_cluster(cfg, launcher):
    """What the analyzer must assume for ``cfg`` on this cluster: the launcher's links where it
    knows them (emulated: as built, scaled or not; hosts: as stated), else the run's own link
    flags; the per-host CPU quota the calibration runs under; and where it runs (``calibrate_on``).
    Returns the settled configuration (RunConfig is frozen: nothing changes a run's settings behind
    the caller's back)."""
    links = launcher.link.flags() if launcher.link is not None else {}
    cfg = replace(cfg, **links, cpus_per_host=launcher.cluster_fields().get("cpus_per_host"))
    layout = RankLayout.for_run(cfg, "ps")
    return replace(cfg, workers_per_host=launcher.workers_per_host(layout),
                   calibrate_on=_calibration_host(cfg, launcher, layout))


def _calibration_host(cfg, launcher, layout):
    """The host the cost model's compute figures are measured on, registered with how to start a
    program there (bench/driver/calibration.py register_place); None: this machine.

    Why: hosts and Slurm ranks run on other machines, whose CPUs the driver's need not resemble
    (a login node; an emulated ssh host's CPU group), so their first worker host is calibrated,
    started as its ranks are (HostsLauncher.calibration_spec). Local and emulated ranks run on
    this machine, where the calibration reproduces a host's cap itself (a cgroup). A --hardware
    preset or file measures nothing, so it names no host."""
    place = launcher.calibration_spec(layout) if (cfg.hardware or "local") == "local" else None
    if place is None:
        return None

    host, launch = place
    register_place(host, launch)
    return host
