#!/usr/bin/env bash
# Prepare this machine for `make image`: podman, buildah, runc and debootstrap from the configured
# Debian archive (only the missing ones), and a containers.conf of our own in the cache.
#
# The containers.conf is used through CONTAINERS_CONF (hack/image.sh exports it), so the host's
# own podman configuration is never edited. It selects runc because crun refuses the hybrid
# cgroup hierarchy of this machine class, and sets explicit ulimits because podman's default
# asks for an open-files limit above the hard limit a container may get here.
#
# Prints the path of the containers.conf. Idempotent: a second run installs nothing.
set -euo pipefail

cache=${LWS_CACHE:-$HOME/.cache/lws-operator}/image
mkdir -p "$cache"

missing=()
for pkg in podman buildah runc debootstrap; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$' \
        || missing+=("$pkg")
done
if ((${#missing[@]})); then
    sudo=()
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    echo "image-host: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 update -qq >&2
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# The hard open-files limit of this shell bounds what a container may be given.
hard_nofile=$(ulimit -Hn)
[ "$hard_nofile" = unlimited ] && hard_nofile=1048576
nofile=$((hard_nofile < 1048576 ? hard_nofile : 1048576))

conf=$cache/containers.conf
cat >"$conf.tmp" <<EOF
# Written by hack/image-host.sh; used through CONTAINERS_CONF by hack/image.sh.
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=32768:32768"]

[engine]
runtime = "runc"
EOF
mv "$conf.tmp" "$conf"
echo "$conf"
