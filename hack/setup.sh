#!/usr/bin/env bash
# Installs everything the tests and the local run need, idempotently:
# Debian packages (tmux, bubblewrap, curl, util-linux, debootstrap, openssl,
# iproute2, jq, gcc, chromium and chromium-driver; nodejs and npm where npm
# is missing) and the pinned agent CLIs from npm (cached under .cache/). Safe
# to run on every test run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

need_apt=()
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)        # the rich format's terminal test
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap) # the sandbox
command -v curl >/dev/null 2>&1 || need_apt+=(curl)        # the sandbox's network tests
command -v setpriv >/dev/null 2>&1 || need_apt+=(util-linux) # non-root sandbox tests
command -v gcc >/dev/null 2>&1 || need_apt+=(gcc)              # the sandbox's LD_PRELOAD attack builds a library
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap) # the runner image's rootfs
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)      # the local cluster's certificates
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)          # the local cluster's bridges
command -v jq >/dev/null 2>&1 || need_apt+=(jq)                # make test-clis-latest's report
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)       # kubectl agentrun ui's browser tests
command -v chromedriver >/dev/null 2>&1 || need_apt+=(chromium-driver)
# The local cluster fetches containerd, runc and the CNI plugins with
# `apt-get download`, which needs package lists.
if [ "$(id -u)" -eq 0 ] && ! ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1; then
  apt-get update -qq >/dev/null
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing ${need_apt[*]}; install them with: sudo apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
  echo "setup: apt-get install ${need_apt[*]}"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# npm for the agent CLIs: Debian's, only where there is none (a Node.js
# from NodeSource or nvm brings its own, which Debian's npm conflicts with).
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: npm is missing (Node.js with npm is needed for the agent CLIs); install it with: sudo apt-get install -y nodejs npm" >&2
    exit 1
  fi
  echo "setup: apt-get install nodejs npm"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
"$root/hack/install-clis.sh"
