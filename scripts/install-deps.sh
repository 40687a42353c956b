#!/usr/bin/env bash
# Installs, when missing, the system packages that building and testing this workspace needs.
# Idempotent: with everything present it only checks (well under a second) and touches nothing.
#
#   build-essential  C/C++ compiler and make: librdkafka (rdkafka-sys, bundled), RocksDB, lz4
#   pkg-config       lets libz-sys find the system zlib
#   zlib1g-dev       zlib for librdkafka (rdkafka's default "libz" feature)
#   libssl-dev       OpenSSL for librdkafka's TLS and SASL/SCRAM (rdkafka's "ssl" feature)
#   libclang-dev     libclang for bindgen (rocksdb's "bindgen-runtime" feature)
#   java 17+, maven  the test broker (scripts/kafka.sh resolves Kafka's jars with Maven)
#
# Debian/Ubuntu only (apt-get); elsewhere it says what is missing and stops.
set -euo pipefail

log() { echo "install-deps: $*"; }
die() {
    echo "install-deps: error: $*" >&2
    exit 1
}

# Debian packages needed, each with the command or file that shows it is already there.
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    for pkg in build-essential pkg-config zlib1g-dev libssl-dev libclang-dev; do
        have_pkg "$pkg" || missing+=("$pkg")
    done
else
    for tool in cc c++ make; do
        command -v "$tool" >/dev/null 2>&1 || die "no $tool, and no dpkg to install a C/C++ toolchain: install it by hand"
    done
    log "warning: not a Debian system; make sure pkg-config, zlib and OpenSSL headers and libclang are installed"
fi
# Java and Maven are checked by command, so a JDK or Maven installed another way counts too.
java_ok() {
    command -v java >/dev/null 2>&1 || return 1
    local v
    v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
    [[ -z $v || $v -ge 17 ]]
}
java_ok || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)

if [[ ${#missing[@]} -gt 0 ]]; then
    command -v apt-get >/dev/null 2>&1 ||
        die "missing: ${missing[*]}; there is no apt-get here, install them by hand"
    SUDO=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "missing: ${missing[*]}; run this script as root (or install sudo)"
        SUDO=(sudo)
    fi
    log "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Lists are refreshed once, and only because something is missing.
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=300 update -qq </dev/null
    "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
        "${missing[@]}" </dev/null
fi

java_ok || die "java 17+ not found on PATH after installing: Kafka 4.x needs it (Debian: openjdk-17-jdk-headless)"
command -v mvn >/dev/null 2>&1 || die "mvn not found on PATH after installing: scripts/kafka.sh resolves Kafka with it (Debian: maven)"
command -v cargo >/dev/null 2>&1 || die "cargo not found on PATH: install a Rust toolchain (rustup) first"

# --- Prometheus: the PromQL engine of the dashboard test (examples/tests/grafana_dashboard.rs).
# scripts/prometheus.sh installs Debian's `prometheus` package when it is missing (once).
bash "$(dirname "${BASH_SOURCE[0]}")/prometheus.sh" ensure >/dev/null ||
    die "no Prometheus: scripts/prometheus.sh could not install it (its message is above)"
# --- end Prometheus

# rustfmt and clippy come with the toolchain named in rust-toolchain.toml; only say when absent.
for tool in fmt clippy; do
    if ! cargo "$tool" --version >/dev/null 2>&1; then
        log "warning: 'cargo $tool' is not available (rustup component add ${tool/fmt/rustfmt})"
    fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
    log "installed ${missing[*]}"
else
    log "all system dependencies present"
fi
