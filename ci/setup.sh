#!/usr/bin/env bash
# One-command install for a fresh Debian machine (run as root).
#
# What it does, each step skipped when already satisfied:
#   1. system packages: Open MPI (mpirun + headers for Horovod/mpi4py), iproute2 (ip, tc),
#      openssh-server (sshd on the emulated ssh hosts, bench/launch/ssh_hosts.py),
#      slurm-wlm + munge (the emulated Slurm on those hosts, bench/launch/slurm.py),
#      nftables (the per-run firewall on hosts/Slurm runs, bench/launch/firewall.py),
#      chromium + chromium-driver (tests/test_browser.py opens the published pages)
#   2. a virtual environment in .venv with the pinned requirements
#   3. Horovod 0.28.1 built against that TensorFlow with MPI + Gloo, the wheel
#      cached under $RALP_CACHE (default ~/.cache/ralp-bench) so it is built once
#   4. this project, editable, and a check that Horovod has TensorFlow, MPI, Gloo
# A stamp file keyed on the requirement files makes a second run take seconds.
# --gpu (the default where `nvidia-smi -L` lists a GPU; --cpu forces the above): GPU TensorFlow
# (tensorflow[and-cuda]) and Horovod with NCCL, in their own venv (.venv-gpu, or RALP_VENV); it
# needs a CUDA 12 toolkit on the machine and refuses, before changing anything, without one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${RALP_VENV:-$ROOT/.venv}
CACHE=${RALP_CACHE:-$HOME/.cache/ralp-bench}
PY=${PYTHON:-python3}
HOROVOD_VERSION=0.28.1
say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }

# ---- arguments: the CPU stack above, or the GPU one ---------------------------
mode=auto
for arg in "$@"; do
  case $arg in
    --gpu|--cpu) mode=${arg#--} ;;
    *) die "unknown argument '$arg'; use --gpu (GPU TensorFlow + Horovod with NCCL, in .venv-gpu) or --cpu" ;;
  esac
done
if [ "$mode" = auto ]; then
  listed=$(timeout 20 nvidia-smi -L 2>/dev/null || true)
  case $listed in *"GPU "*) mode=gpu; say "nvidia-smi lists a GPU: setting up the GPU stack (--cpu for the CPU one)" ;; *) mode=cpu ;; esac
fi

# ---- GPU: the CUDA toolkit Horovod's NCCL build needs, checked before anything changes ----
# Horovod 0.28.1 with HOROVOD_GPU_OPERATIONS=NCCL (its CMakeLists.txt, cmake/Modules/FindNCCL.cmake,
# horovod/common/ops/cuda/CMakeLists.txt) compiles cuda_kernels.cu with $HOROVOD_CUDA_HOME/bin/nvcc,
# links the static CUDA runtime (libcudart_static.a, CMAKE_CUDA_RUNTIME_LIBRARY=Static), and finds nccl.h
# and libnccl through HOROVOD_NCCL_INCLUDE/HOROVOD_NCCL_LIB. NCCL comes from PyPI (nvidia-nccl-cu12, the
# version tensorflow[and-cuda] pins, so the process holds one NCCL); nvcc cannot: nvidia-cuda-nvcc-cu12
# (12.0 to 12.9) ships ptxas but no nvcc, Debian bookworm's nvidia-cuda-toolkit (non-free) is CUDA 11.8,
# and TensorFlow 2.15.1 is built for CUDA 12.2. So the toolkit must be on the machine already.
cuda_release() { "$1/bin/nvcc" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p'; }
cuda_lib() { ls "$1"/lib64/"$2" "$1"/lib/"$2" "$1"/targets/*/lib/"$2" 2>/dev/null | head -1; }
# Sets cuda_home to the first CUDA 12 toolkit with nvcc, cuda_runtime.h and libcudart_static.a, from
# HOROVOD_CUDA_HOME, CUDA_HOME or CUDA_PATH when one is set, else /usr/local/cuda-12*, /usr/local/cuda
# and the nvcc on PATH; cuda_seen lists what was found instead.
find_cuda_home() {
  local home rel homes=() nvcc_path
  cuda_home="" cuda_seen=""
  if [ -n "${HOROVOD_CUDA_HOME:-${CUDA_HOME:-${CUDA_PATH:-}}}" ]; then
    homes=("${HOROVOD_CUDA_HOME:-${CUDA_HOME:-$CUDA_PATH}}")
  else
    homes=(/usr/local/cuda-12* /usr/local/cuda)
    nvcc_path=$(command -v nvcc) && homes+=("$(dirname "$(dirname "$(readlink -f "$nvcc_path")")")")
  fi
  for home in "${homes[@]}"; do
    [ -x "$home/bin/nvcc" ] || continue
    rel=$(cuda_release "$home")
    case $rel in
      12.*) ;;
      *) cuda_seen+="${cuda_seen:+, }CUDA ${rel:-of unknown release} ($home/bin/nvcc)"; continue ;;
    esac
    if [ ! -e "$home/include/cuda_runtime.h" ] || [ -z "$(cuda_lib "$home" libcudart_static.a)" ]; then
      cuda_seen+="${cuda_seen:+, }CUDA $rel at $home without cuda_runtime.h or libcudart_static.a"; continue
    fi
    cuda_home=$home; return 0
  done
}
if [ "$mode" = gpu ]; then
  VENV=${RALP_VENV:-$ROOT/.venv-gpu}
  find_cuda_home
  if [ -z "$cuda_home" ]; then
    cpu_hint=""; [ -n "${listed:-}" ] && cpu_hint="; or ci/setup.sh --cpu for the CPU-only stack"
    die "--gpu needs a CUDA 12 toolkit (nvcc, cuda_runtime.h, libcudart_static.a; TensorFlow 2.15.1 is built for CUDA 12.2) to build Horovod with NCCL, and found ${cuda_seen:-no nvcc}; install NVIDIA's CUDA 12.2 toolkit (https://developer.nvidia.com/cuda-12-2-0-download-archive) and set CUDA_HOME to it (PyPI's nvidia-cuda-nvcc-cu12 ships only ptxas; Debian bookworm's nvidia-cuda-toolkit is CUDA 11.8)$cpu_hint"
  fi
  # the host compiler must suit this nvcc (CUDA 12.0-12.3 take GCC <= 12); where g++ is still to come
  # (step 1 installs it), the build finds out
  if command -v g++ >/dev/null 2>&1; then
    probe=$(mktemp -d)
    printf '__global__ void k(float *x) { x[0] += 1; }\n' > "$probe/k.cu"
    nvcc_err=$("$cuda_home/bin/nvcc" -ccbin g++ -c "$probe/k.cu" -o "$probe/k.o" 2>&1) \
      || { rm -rf "$probe"; die "$cuda_home/bin/nvcc cannot compile a kernel with this g++: $(echo "$nvcc_err" | grep -m1 -i error)"; }
    rm -rf "$probe"
  fi
  say "GPU stack into $VENV with the CUDA $(cuda_release "$cuda_home") toolkit at $cuda_home"
fi

# ---- 1. system packages ----------------------------------------------------
need_apt=()
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin)
[ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || [ -e /usr/include/mpi.h ] \
  || ls /usr/lib/*/openmpi/include/mpi.h >/dev/null 2>&1 || need_apt+=(libopenmpi-dev)
command -v tc >/dev/null 2>&1 || need_apt+=(iproute2)
command -v ping >/dev/null 2>&1 || need_apt+=(iputils-ping)
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
[ -x /usr/sbin/slurmd ] && [ -x /usr/sbin/slurmctld ] || need_apt+=(slurm-wlm)
[ -x /usr/sbin/munged ] || need_apt+=(munge)
[ -x /usr/sbin/nft ] || need_apt+=(nftables)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    die "missing system packages: ${need_apt[*]}; run this script as root (sudo $0) or install them: apt-get install -y ${need_apt[*]}"
  fi
  say "installing system packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# ---- 2. virtual environment --------------------------------------------------
stamp_key=$(cat requirements.txt pyproject.toml ci/setup.sh | sha256sum | cut -c1-16)
stamp=$VENV/.ralp-setup-$stamp_key
if [ -f "$stamp" ]; then
  say "environment up to date ($VENV)"
  exit 0
fi
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PY" -m venv "$VENV"; }
VPY=$VENV/bin/python
"$VPY" -m pip install -q --upgrade pip setuptools wheel 2>&1 | { grep -v "is ignored: it is neither" || true; }

# ---- GPU stack (--gpu): steps 2 to 4 with GPU TensorFlow and Horovod over NCCL, then done ----
if [ "$mode" = gpu ]; then
  pip_quiet() { "$VPY" -m pip install -q "$@" 2>&1 | { grep -v "is ignored: it is neither" || true; }; }
  gpu_reqs=$(mktemp)
  sed 's/^tensorflow-cpu==/tensorflow[and-cuda]==/' requirements.txt > "$gpu_reqs"
  grep -q '^tensorflow\[and-cuda\]==' "$gpu_reqs" || die "requirements.txt has no tensorflow-cpu== pin to swap for tensorflow[and-cuda]"
  say "installing pinned requirements with tensorflow[and-cuda] (CUDA 12.2 libraries, cuDNN and NCCL from PyPI, ~3 GB)"
  pip_quiet -r "$gpu_reqs"; rm -f "$gpu_reqs"
  site=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  nccl_dir=$site/nvidia/nccl nccl_so=$(ls "$site"/nvidia/nccl/lib/libnccl.so.* 2>/dev/null | head -1)
  [ -e "$nccl_dir/include/nccl.h" ] && [ -n "$nccl_so" ] \
    || die "no NCCL in $nccl_dir (nccl.h, lib/libnccl.so.2); $VENV/bin/pip install nvidia-nccl-cu12 and rerun"
  nccl_version=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) *\([0-9]*\).*/\2/p' "$nccl_dir/include/nccl.h" | paste -sd.)
  tf_version=$("$VPY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)
  pyver=$("$VPY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  # the wheel's runpath names this venv's NCCL, so the cache key does too
  wheel_dir=$CACHE/wheels/horovod-$HOROVOD_VERSION-tf$tf_version-$pyver-cuda$(cuda_release "$cuda_home")-nccl$nccl_version-mpi-gloo-$(printf %s "$nccl_dir" | sha256sum | cut -c1-8)
  if ! ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1; then
    say "building Horovod $HOROVOD_VERSION with NCCL $nccl_version (CUDA at $cuda_home) against TensorFlow $tf_version (~10 min, once)"
    mkdir -p "$wheel_dir"
    tmp=$(mktemp -d)
    # FindNCCL looks for libnccl.so; the wheel ships libnccl.so.2 only. PATH: Horovod's build_utils.py asks the
    # first `nvcc` on PATH for the GPU architectures to compile, so it must be the toolkit's own.
    mkdir "$tmp/nccl-lib" && ln -s "$nccl_so" "$tmp/nccl-lib/libnccl.so"
    PATH=$cuda_home/bin:$PATH HOROVOD_CUDA_HOME=$cuda_home HOROVOD_GPU_OPERATIONS=NCCL \
    HOROVOD_NCCL_INCLUDE=$nccl_dir/include HOROVOD_NCCL_LIB=$tmp/nccl-lib HOROVOD_NCCL_LINK=SHARED \
    LDFLAGS="-Wl,-rpath,$nccl_dir/lib" \
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_CPU_OPERATIONS=gloo \
    MAKEFLAGS=-j$(nproc) \
      "$VPY" -m pip wheel -q --no-build-isolation --no-deps --no-cache-dir \
        -w "$tmp" "horovod==$HOROVOD_VERSION" || { rm -rf "$tmp"; die "Horovod's NCCL build failed (see pip output above)"; }
    mv "$tmp"/horovod-*.whl "$wheel_dir"/ && rm -rf "$tmp"
  else
    say "using cached Horovod wheel from $wheel_dir"
  fi
  pip_quiet --no-deps --force-reinstall "$wheel_dir"/horovod-*.whl
  pip_quiet cloudpickle psutil pyyaml packaging
  pip_quiet --no-deps -e .
  missing=$("$VPY" - <<'PY' 2>/dev/null
import tensorflow as tf
import horovod.tensorflow as hvd
print(" ".join(name for name, ok in (("MPI", hvd.mpi_built()), ("Gloo", hvd.gloo_built()), ("NCCL", hvd.nccl_built()),
                                     ("CUDA TensorFlow", tf.test.is_built_with_cuda())) if not ok))
PY
  ) || die "Horovod's TensorFlow extension does not load in $VENV; delete $wheel_dir and rerun"
  [ -z "$missing" ] || die "the GPU stack lacks $missing; delete $wheel_dir and rerun"
  rm -f "$VENV"/.ralp-setup-*
  touch "$stamp"
  say "ready: $VENV (TensorFlow $tf_version with CUDA, Horovod $HOROVOD_VERSION with NCCL $nccl_version + MPI + Gloo); ci/gpu-check tests it on GPUs"
  exit 0
fi
say "installing pinned requirements (TensorFlow is ~600 MB the first time)"
"$VPY" -m pip install -q -r requirements.txt 2>&1 | { grep -v "is ignored: it is neither" || true; }

# ---- 3. Horovod, built once and cached ---------------------------------------
tf_version=$("$VPY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)
pyver=$("$VPY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
wheel_dir=$CACHE/wheels/horovod-$HOROVOD_VERSION-tf$tf_version-$pyver-cpu-mpi-gloo
if ! "$VPY" -c 'import horovod.tensorflow' >/dev/null 2>&1; then
  if ! ls "$wheel_dir"/horovod-*.whl >/dev/null 2>&1; then
    say "building Horovod $HOROVOD_VERSION against TensorFlow $tf_version (MPI + Gloo, ~4 min, once)"
    mkdir -p "$wheel_dir"
    tmp=$(mktemp -d)
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 \
    HOROVOD_WITH_GLOO=1 HOROVOD_WITH_MPI=1 HOROVOD_CPU_OPERATIONS=gloo \
    MAKEFLAGS=-j$(nproc) \
      "$VPY" -m pip wheel -q --no-build-isolation --no-deps --no-cache-dir \
        -w "$tmp" "horovod==$HOROVOD_VERSION" || { rm -rf "$tmp"; die "Horovod build failed (see pip output above)"; }
    mv "$tmp"/horovod-*.whl "$wheel_dir"/ && rm -rf "$tmp"
  else
    say "using cached Horovod wheel from $wheel_dir"
  fi
  "$VPY" -m pip install -q --no-deps "$wheel_dir"/horovod-*.whl 2>&1 | { grep -v "is ignored: it is neither" || true; }
  # horovod's own runtime deps (cloudpickle, psutil, pyyaml, packaging)
  "$VPY" -m pip install -q cloudpickle psutil pyyaml packaging 2>&1 | { grep -v "is ignored: it is neither" || true; }
fi

# ---- 4. the project ----------------------------------------------------------
"$VPY" -m pip install -q --no-deps -e . 2>&1 | { grep -v "is ignored: it is neither" || true; }
# Asked in one process: `horovodrun --check-build` forks a child per check and reads each answer
# from a queue right after join, which can come back empty and print "[ ] MPI" for a good build
# (seen once on a fresh clone whose wheel passes every other time).
missing=$("$VPY" - <<'PY' 2>/dev/null
import horovod.tensorflow as hvd
print(" ".join(name for name, ok in (("MPI", hvd.mpi_built()), ("Gloo", hvd.gloo_built())) if not ok))
PY
) || die "Horovod's TensorFlow extension does not load; delete $wheel_dir and rerun"
[ -z "$missing" ] || die "Horovod was built without $missing; delete $wheel_dir and rerun"
rm -f "$VENV"/.ralp-setup-*
touch "$stamp"
say "ready: $VENV (TensorFlow $tf_version, Horovod $HOROVOD_VERSION with MPI + Gloo)"
