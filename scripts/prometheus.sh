#!/usr/bin/env bash
# Prometheus, the PromQL engine the dashboard test (examples/tests/grafana_dashboard.rs)
# evaluates every panel of docs/grafana-dashboard.json with.
#
#   bash scripts/prometheus.sh ensure   prints the path of the `prometheus` binary; installs
#                                       Debian's `prometheus` package first when there is none
#
# `PROMETHEUS_BIN` names a binary installed another way (it is then only checked). The
# install (apt-get update, then the package: 10-20 s) happens once; later calls only
# look (well under a second). The test runs its own Prometheus (temp dir, free port) and
# stops it; the package's system service is not used (on a systemd machine the package
# enables and starts it, on :9090).
set -euo pipefail

log() { echo "prometheus.sh: $*" >&2; }
die() {
    echo "prometheus.sh: error: $*" >&2
    exit 1
}

# Prints the binary's path when it runs; fails otherwise.
usable() {
    local bin=$1
    "$bin" --version >/dev/null 2>&1 || return 1
    command -v "$bin"
}

ensure() {
    if [[ -n ${PROMETHEUS_BIN:-} ]]; then
        usable "$PROMETHEUS_BIN" || die "PROMETHEUS_BIN=$PROMETHEUS_BIN does not run (\`$PROMETHEUS_BIN --version\` fails)"
        return
    fi
    if usable prometheus; then
        return
    fi
    command -v apt-get >/dev/null 2>&1 ||
        die "no prometheus on PATH and no apt-get to install it: install Prometheus 2.x by hand, or set PROMETHEUS_BIN"
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 ||
            die "no prometheus on PATH: run this script as root (or install sudo), or apt-get install prometheus"
        sudo=(sudo -n)
    fi
    log "installing Debian's prometheus package (once)"
    local started=$SECONDS apt_log
    apt_log=$(mktemp)
    # shellcheck disable=SC2064 # the path is fixed now
    trap "rm -f '$apt_log'" EXIT
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq </dev/null >"$apt_log" 2>&1 ||
        die "apt-get update failed:"$'\n'"$(tail -n 20 "$apt_log")"
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends prometheus \
        </dev/null >"$apt_log" 2>&1 ||
        die "apt-get install prometheus failed:"$'\n'"$(tail -n 20 "$apt_log")"
    usable prometheus >/dev/null || die "prometheus is still not on PATH after installing the package"
    log "installed $(prometheus --version 2>&1 | head -n1) in $((SECONDS - started)) s"
    command -v prometheus
}

case ${1:-} in
    ensure) ensure ;;
    *) die "usage: bash scripts/prometheus.sh ensure" ;;
esac
