#!/usr/bin/env bash
# Build the operator image from the repository's Dockerfile with podman: `make image`.
#
# Where no container registry is reachable (this machine class), the Dockerfile's PYTHON_IMAGE
# is replaced by a base made here once: Debian's own python3.11 on a minimal debootstrap of the
# release the host runs, from the Debian archive the host's apt is configured with, imported
# into podman's local storage. Where the Dockerfile's default base can be pulled, it is used.
# LWS_IMAGE_BASE=local|default forces either; the default, auto, tries a pull first.
#
# The image is tagged with a hash of everything the build reads (the Dockerfile, the lock files,
# the package sources, the base), so an unchanged tree reuses the existing image at once, and is
# also saved as a docker-archive in the cache for a containerd node to import. The result is
# written to CACHE/latest.json (and printed): reference, archive, base. The cache and podman's
# storage are the machine's: latest.json names the last build of any work tree.
#
# Environment: LWS_CACHE (default ~/.cache/lws-operator), LWS_IMAGE_REPOSITORY (default
# localhost/lws-operator), LWS_IMAGE_VARIANT (a label that makes a distinct image of the same
# tree, for tests that need a second tag), LWS_IMAGE_BASE.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=${LWS_CACHE:-$HOME/.cache/lws-operator}/image
mkdir -p "$cache"
# One build at a time on a machine (test sessions and work trees share the cache and storage).
exec 9>"$cache/.lock"
flock 9
conf=$(bash hack/image-host.sh)
export CONTAINERS_CONF=$conf
repository=${LWS_IMAGE_REPOSITORY:-localhost/lws-operator}
variant=${LWS_IMAGE_VARIANT:-}
base_mode=${LWS_IMAGE_BASE:-auto}
started=$(date +%s)

log() { echo "image: $*" >&2; }

# --- The base -------------------------------------------------------------------------------
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
base_packages=(python3.11 python3.11-venv python3-venv python-is-python3 ca-certificates)
default_base=$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile | head -n1)

# The URI of the host's Debian archive for $suite, from apt's one-line or deb822 sources.
debian_archive() {
    local files=() f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    ((${#files[@]})) || return 0
    awk -v suite="$suite" '
        function flush() { if (deb && hit && uris != "") { print uris; found = 1; exit } uris = ""; hit = 0; deb = 0 }
        FNR == 1 { flush() }
        /^[[:space:]]*deb[[:space:]]/ {
            line = $0; sub(/\[[^]]*\]/, "", line); split(line, f, /[[:space:]]+/)
            if (f[3] == suite) { print f[2]; found = 1; exit }
        }
        /^[[:space:]]*$/ { flush() }
        /^Types:/ { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
        /^URIs:/ { uris = $2 }
        /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) hit = 1 }
        END { if (!found) flush() }
' "${files[@]}" | head -n1
}

make_local_base() {
    local key ref root archive
    key=$(printf '%s\n' "debootstrap minbase $suite" "${base_packages[@]}" | sha256sum | cut -c1-12)
    ref=localhost/lws-operator-base:$suite-$key
    if podman image exists "$ref"; then
        echo "$ref"
        return
    fi
    archive=$(debian_archive)
    log "making the base $ref (debootstrap $suite from the archive apt is configured with)"
    root=$(mktemp -d "$cache/rootfs.XXXXXX")
    trap 'rm -rf "$root"' RETURN
    local t0=$SECONDS
    debootstrap --variant=minbase --include="$(IFS=,; echo "${base_packages[*]}")" \
        "$suite" "$root" ${archive:+"$archive"} >"$cache/debootstrap.log" 2>&1 \
        || { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/*
    tar -C "$root" --numeric-owner -c . | podman import \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' - "$ref" >/dev/null
    log "base made in $((SECONDS - t0)) s"
    echo "$ref"
}

base_args=()
base=$default_base
case $base_mode in
default) ;;
local) base=$(make_local_base) ;;
auto)
    if podman image exists "$default_base" \
        || timeout 60 podman pull --quiet "$default_base" >/dev/null 2>&1; then
        :
    else
        log "the Dockerfile's base $default_base cannot be pulled: using a local base"
        base=$(make_local_base)
    fi
    ;;
*) log "LWS_IMAGE_BASE must be auto, local or default"; exit 2 ;;
esac
[ "$base" = "$default_base" ] || base_args=(--build-arg "PYTHON_IMAGE=$base" --pull=never)
base_id=$(podman image inspect --format '{{.Id}}' "$base")

# --- The tag: a hash of the build's inputs ----------------------------------------------------
# README.md is copied in too, but only as the wheel's description: editing it must not cost a
# rebuild, so it is left out.
inputs=(Dockerfile .dockerignore requirements.lock build-requirements.lock pyproject.toml
    hack/image-venv.sh)
tag=$({
    for f in "${inputs[@]}"; do printf '%s\n' "$f"; cat "$f"; done
    find lws_operator -type f ! -path '*/__pycache__/*' ! -name '*.pyc' | LC_ALL=C sort \
        | while read -r f; do printf '%s\n' "$f"; cat "$f"; done
    printf 'base %s\nvariant %s\n' "$base_id" "$variant"
} | sha256sum | cut -c1-16)
reference=$repository:$tag
archive=$cache/lws-operator-$tag.tar

# --- The build --------------------------------------------------------------------------------
# pip inside the build gets the machine's CA bundle and its index settings (`pip config list`,
# files and PIP_* variables merged into one pip.conf mounted for the build only; local paths
# such as find-links are left out). Nothing of it reaches the image.
pip_conf() {
    python3 - <<'EOF'
import configparser, subprocess, sys
try:
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                         text=True, timeout=60).stdout
except (OSError, subprocess.SubprocessError):
    out = ""
keep = {"index-url", "extra-index-url", "trusted-host", "timeout", "default-timeout", "cert",
        "retries", "proxy"}
conf = configparser.ConfigParser()
conf["global"] = {}
env = {}
for line in out.splitlines():
    name, _, value = line.partition("=")
    section, _, key = name.rpartition(".")
    if key not in keep:
        continue
    value = value.strip().strip("'\"")
    if section == ":env:":
        env[key] = value
    elif section in ("global", "install", "download"):
        conf["global"][key] = value
conf["global"].update(env)
conf.write(sys.stdout)
EOF
}

if podman image exists "$reference" && [ -s "$archive" ]; then
    log "$reference is up to date"
    touch "$archive"
else
    volumes=()
    ca=/etc/ssl/certs/ca-certificates.crt
    [ -f "$ca" ] && volumes+=(-v "$ca:$ca:ro")
    pipconf=$(mktemp "$cache/pip.conf.XXXXXX")
    trap 'rm -f "$pipconf"' EXIT
    pip_conf >"$pipconf" 2>/dev/null || : >"$pipconf"
    volumes+=(-v "$pipconf:/etc/pip.conf:ro")
    if ! podman image exists "$reference"; then
        log "building $reference from $base"
        t0=$SECONDS
        podman build --network host --layers "${base_args[@]}" "${volumes[@]}" \
            ${variant:+--label "lws-operator.variant=$variant"} \
            --label "lws-operator.inputs=$tag" -t "$reference" -f Dockerfile . >&2
        log "built in $((SECONDS - t0)) s"
    fi
    t0=$SECONDS
    podman save --quiet --format docker-archive -o "$archive.tmp" "$reference"
    mv "$archive.tmp" "$archive"
    log "saved $archive in $((SECONDS - t0)) s"
    # Archives unused for two days go (work trees on this machine share the cache).
    find "$cache" -maxdepth 1 -name 'lws-operator-*.tar' ! -name "${archive##*/}" -mtime +1 \
        -delete
    # So do images of this repository built over two days ago, and their build stages.
    podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$repository" \
        --filter until=48h | grep -vxF "$reference" | xargs -r podman rmi >/dev/null 2>&1 || :
    podman image prune --force --filter until=48h >/dev/null 2>&1 || :
fi

size=$(podman image inspect --format '{{.Size}}' "$reference")
base_kind=local
[ "$base" = "$default_base" ] && base_kind=default
info=$(printf '{"reference": "%s", "repository": "%s", "tag": "%s", "archive": "%s", "base": "%s", "base_kind": "%s", "size": %s, "containers_conf": "%s", "seconds": %s}' \
    "$reference" "$repository" "$tag" "$archive" "$base" "$base_kind" "$size" "$conf" \
    "$(($(date +%s) - started))")
echo "$info" >"$cache/latest.json"
echo "$info"
