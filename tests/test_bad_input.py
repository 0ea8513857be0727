"""Bad run settings are refused before anything starts: one line naming the fix, exit 2, no rank."""
import pytest

from tests.conftest import our_processes


@pytest.mark.parametrize("args, message", [
    (["--hardware", "/etc/passwd"], "cannot read hardware file /etc/passwd"),
    (["--hardware", "tpu-v9"], "unknown hardware 'tpu-v9'"),
    (["--network", "notacidr"], "--network 'notacidr' is not a CIDR"),
    (["--step-timeout", "0"], "--step-timeout must be a positive number"),
    (["--strategy", "ralp", "--cut", "nosuchlayer"], "cannot cut alexnet_cifar after 'nosuchlayer'; valid cut points"),
    (["--repeats", "0"], "--repeats must be a positive integer"),
    (["--horovod-cycle-ms", "0"], "--horovod-cycle-ms > 0"),
    (["--ps-placement", "colocated", "--ps", "2"], "drop --ps 2"),
    (["--target-ci", "5"], "--target-ci is a share of the median"),
    (["--steps", "10", "--max-steps", "5", "--target-ci", "0.05"], "--max-steps (5) must be at least --steps (10)"),
    (["--strategy", "single", "--compression", "int8"], "single does not support --compression"),
    (["--strategy", "horovod", "--micro-batches", "2"], "--micro-batches pipelines ralp-hybrid's batches"),
    (["--strategy", "horovod", "--horovod-hierarchical"], "--horovod-hierarchical needs --horovod-ops mpi"),
    (["--strategy", "horovod", "--horovod-hierarchical", "--horovod-ops", "mpi", "--compression", "int8"],
     "--compression int8 may be all-gathered: use none or fp16"),
    # this machine's Horovod has Gloo CPU collectives only (ci/setup.sh): refused before launch
    (["--strategy", "ps,horovod", "--horovod-hierarchical", "--horovod-ops", "mpi"],
     "--horovod-hierarchical needs Horovod built with NCCL"),
    (["--strategy", "ralp-hybrid", "--micro-batches", "3"], "does not split into 3 equal micro-batches"),
    (["--strategy", "ralp-hybrid", "--ps", "2", "--model", "tests/bn_head_model.py:build"],
     "cannot shard tests/bn_head_model.py:build's head over --ps 2 PS tasks: the head after 'flatten' has a BatchNormalization"),
])
def test_bad_run_settings_exit_2_with_one_line_before_any_rank(cli, args, message):
    proc = cli("run", "--cluster", "local", "--no-store", "--quiet", *args, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("ralp-bench: error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and our_processes() == []
