#!/bin/bash
# Build QEMU with interrupt skid (qemu/patches/qemu-skid.patch) from Debian's source of
# the qemu-system-arm the machine has, for aarch64-softmmu only, cached by a hash of the
# patch, the source version and the compiler's. Prints the path of the binary.
#
#   qemu/build-qemu.sh
#
# The patched QEMU raises the PMU overflow interrupt a drawn delay after the overflow
# flag is set (PMUSTRESS_QEMU_SKID=fixed:N|uniform:N|tail:N in its environment, ns of
# virtual time: instructions under -icount shift=0; unset, QEMU's own behaviour), as a
# real core takes it hundreds to thousands of events late. About 4 minutes on 2 CPUs.
# The source comes from deb.debian.org through a deb-src list of its own (the machine's
# apt configuration is left as it is).
#
# Environment: PMUSTRESS_QEMU_CACHE (default ~/.cache/pmustress-qemu),
# PMUSTRESS_KERNEL_JOBS (default 3).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SKID_PATCH=$QEMU_DIR/patches/qemu-skid.patch

# The version of Debian's qemu source to build: the installed qemu-system-arm's.
source_version() {
    dpkg-query -W -f='${source:Version}' qemu-system-arm
}

qemu_key() {
    {
        cat "$SKID_PATCH"
        echo "qemu $(source_version)"
        echo "gcc $(dpkg-query -W -f='${Version}' gcc)"
    } | sha256sum | cut -c1-16
}

# fetch_source DIR: Debian's qemu source at source_version, unpacked with Debian's
# patches into DIR.
fetch_source() {
    local dir=$1 apt=$CACHE/qemu/apt ver
    ver=$(source_version)
    mkdir -p "$apt/parts" "$apt/lists/partial" "$apt/download"
    cat >"$apt/parts/debian-src.sources" <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    local opts=(-o Dir::Etc::SourceParts="$apt/parts" -o Dir::Etc::SourceList=/dev/null
        -o Dir::State::Lists="$apt/lists")
    log "fetching Debian's qemu $ver source"
    apt-get "${opts[@]}" update -q >&2
    (cd "$apt/download" && apt-get "${opts[@]}" source --download-only "qemu=$ver" >&2)
    rm -rf "$dir"
    dpkg-source -x "$apt/download/qemu_${ver#*:}.dsc" "$dir" >&2
}

build() {
    local key=$1 out=$2 work=$CACHE/qemu/work-$1 start=$SECONDS
    rm -rf "$work"
    mkdir -p "$work"
    fetch_source "$work/src"
    log "applying ${SKID_PATCH##*/}"
    patch -s -p1 -d "$work/src" --no-backup-if-mismatch <"$SKID_PATCH" >&2 ||
        die "${SKID_PATCH##*/} does not apply to qemu $(source_version)"
    mkdir -p "$work/build"
    log "configuring QEMU for aarch64-softmmu"
    (cd "$work/build" && ../src/configure --target-list=aarch64-softmmu --disable-docs \
        --disable-tools --disable-install-blobs --disable-werror --disable-user \
        --disable-slirp --disable-vnc --disable-sdl --disable-gtk --disable-opengl \
        --disable-capstone >"$work/configure.log" 2>&1) ||
        { tail -n 20 "$work/configure.log" >&2; die "QEMU's configure failed"; }
    log "building qemu-system-aarch64 with -j$KERNEL_JOBS (about 4 minutes on 2 CPUs)"
    nice -n 10 ninja -C "$work/build" -j"$KERNEL_JOBS" qemu-system-aarch64 >"$work/build.log" 2>&1 ||
        { tail -n 30 "$work/build.log" >&2; die "building QEMU failed (see $work/build.log)"; }
    if grep -E 'target/arm/(helper|cpu)\.c.*warning:' "$work/build.log" >&2; then
        die "the compiler warns about a file qemu-skid.patch changes"
    fi
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    strip -o "$out.tmp/qemu-system-aarch64" "$work/build/qemu-system-aarch64"
    cp "$SKID_PATCH" "$out.tmp/"
    source_version >"$out.tmp/source-version"
    mv "$out.tmp" "$out"
    rm -rf "$work"
    log "QEMU built in $((SECONDS - start)) s: $out/qemu-system-aarch64"
}

build_if_missing() {
    [[ -x $2/qemu-system-aarch64 ]] || build "$@"
}

main() {
    ensure_pkgs qemu-system-arm dpkg-dev ninja-build meson pkg-config libglib2.0-dev \
        libpixman-1-dev libfdt-dev zlib1g-dev python3-venv gcc binutils patch xz-utils
    local key out
    key=$(qemu_key)
    out=$CACHE/qemu/skid-7.2-$key
    with_lock "$CACHE/qemu/lock" build_if_missing "$key" "$out"
    printf '%s\n' "$out/qemu-system-aarch64"
}

main "$@"
