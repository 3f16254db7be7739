# shellcheck shell=bash
# The one way pmustress is built for another machine: a fully static release
# binary without the default features (no plotting), for x86_64 or aarch64.
# Sourced, not executed, by qemu/lib.sh, for scripts/dist.sh (the release
# binaries) and qemu/run.sh and qemu/bisect-step.sh (the guest's binary).
# Needs log, die, ensure_pkgs and ensure_arm64_arch (qemu/lib.sh) and an
# x86_64 Debian 12 host.

# static_build ARCH SRC TARGET_PREFIX: builds pmustress from the tree SRC for
# ARCH (x86_64 or aarch64) and sets STATIC_BIN to the binary. rustup's cargo
# when its ARCH-unknown-linux-gnu target is installed, else Debian's
# (rustc-web, with the target's libstd-rust-web-dev; apt installs what is
# missing); the cargo target directory is TARGET_PREFIX-rustup or
# TARGET_PREFIX-debian after the toolchain. Static: glibc's own static
# libraries (-C target-feature=+crt-static), linked by the target's gcc.
static_build() {
    local arch=$1 src=$2 prefix=$3 triple debarch cargo rustc target_dir start=$SECONDS
    local env=()
    [[ $(uname -m) == x86_64 ]] || die "static_build runs on x86_64 hosts only, not $(uname -m)"
    case $arch in
    x86_64) debarch=amd64 ;;
    aarch64) debarch=arm64 ;;
    *) die "static_build: no such architecture '$arch' (x86_64, aarch64)" ;;
    esac
    triple=$arch-unknown-linux-gnu
    [[ -f $src/Cargo.toml ]] || die "no Cargo.toml in $src"
    if [[ $arch == aarch64 ]]; then
        ensure_arm64_arch
        ensure_pkgs gcc-aarch64-linux-gnu libc6-dev-arm64-cross
        env+=(CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc)
    fi
    if command -v rustup >/dev/null &&
        rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
        cargo=cargo rustc=rustc target_dir=$prefix-rustup
    else
        ensure_pkgs rustc-web cargo-web "libstd-rust-web-dev:$debarch"
        cargo=/usr/bin/cargo rustc=/usr/bin/rustc target_dir=$prefix-debian
    fi
    log "building pmustress for $triple from $src with $("$rustc" --version)"
    # With --target, RUSTFLAGS reach only the target's code, not build.rs
    # (which must run here, dynamically linked). --no-default-features: no
    # plotters, font or PNG encoder on a machine that only runs tests.
    env "${env[@]}" RUSTFLAGS="-C target-feature=+crt-static" RUSTC="$rustc" \
        nice -n 5 "$cargo" build --release --locked --quiet --no-default-features \
        --manifest-path "$src/Cargo.toml" --target "$triple" \
        --target-dir "$target_dir" >&2
    STATIC_BIN=$target_dir/$triple/release/pmustress
    [[ -x $STATIC_BIN ]] || die "cargo built no $STATIC_BIN"
    log "built $STATIC_BIN in $((SECONDS - start)) s"
}
