#!/bin/bash
# spec/vm/rig/build.sh: build the project's VM rig (as root, Debian packages only).
#
#   bash spec/vm/rig/build.sh            every step that is out of date
#   bash spec/vm/rig/build.sh STEP...    just those steps (forced)
#   bash spec/vm/rig/build.sh --list     the steps and whether each is current
#   bash spec/vm/rig/build.sh --clean    remove $RIG_DIR (default /var/tmp/ernic-rig)
#
# Steps, in order (each records the hash of its inputs in $RIG_DIR/state and is
# redone when they change: its own code, its package list, the files it
# installs, or a step it builds on):
#   host        the host's own tools (debootstrap, mkfs.ext4, cpio, zstd) via apt-get
#   tools       Debian sid tree with qemu-system-x86 (has vfio-user-pci) and make
#   guest       Debian sid tree: kernel, rdma-core, perftest, rdmacm-utils,
#               nvme-cli, fio, curl, iperf3, ethtool, pciutils, python3 ...
#   ionic-rdma  Debian's kernel ships ionic.ko but not ionic_rdma.ko: build the
#               upstream drivers/infiniband/hw/ionic from linux-source-X.Y
#               against linux-headers-$KVER, install it as updates/ionic_rdma.ko
#   init        the guest's PID 1 (guest-init.sh) and a little configuration
#   boot        kernel + initramfs (busybox, virtio-blk, ext4; initramfs-init.sh)
#   disk        root.ext4 from the guest tree
#
# Environment: RIG_DIR, RIG_SUITE (sid), RIG_MIRROR (http://deb.debian.org/debian).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"
STATE=$RIG_DIR/state

TOOLS_PACKAGES="qemu-system-x86 qemu-utils make xz-utils ca-certificates"
GUEST_PACKAGES="linux-image-amd64 kmod busybox-static iproute2 iputils-ping procps
 pciutils pci.ids ethtool strace python3 rdma-core ibverbs-providers ibverbs-utils
 rdmacm-utils perftest python3-pyverbs nvme-cli fio curl iperf3"

[ "$(id -u)" = 0 ] || { echo "build.sh: run as root (debootstrap, chroot, mounts)" >&2; exit 2; }

# ---- step bookkeeping --------------------------------------------------------
# A step's key hashes its function's text, the extra inputs it names, and the
# keys of the steps it builds on.
key_of() { # STEP [INPUT...]
    local step=$1; shift
    { declare -f "step_${step//-/_}"; printf '%s\n' "$@"; } | sha256sum | cut -c1-16
}
stored_key() { cat "$STATE/$1" 2>/dev/null || true; }
record() { mkdir -p "$STATE"; echo "$2" > "$STATE/$1"; }

# debootstrap a minimal sid tree once; apt settings that suit a throwaway tree.
bootstrap_tree() { # DIR
    local dir=$1
    if [ ! -e "$dir/.rig-bootstrapped" ]; then
        rm -rf "$dir"
        rig_say "debootstrap $RIG_SUITE into $dir"
        debootstrap --variant=minbase "$RIG_SUITE" "$dir" "$RIG_MIRROR" >&2
        touch "$dir/.rig-bootstrapped"
    fi
    printf 'deb %s %s main\n' "$RIG_MIRROR" "$RIG_SUITE" > "$dir/etc/apt/sources.list"
    printf '%s\n' 'APT::Install-Recommends "false";' 'APT::Install-Suggests "false";' \
        'Acquire::Languages "none";' 'Acquire::Check-Valid-Until "false";' \
        > "$dir/etc/apt/apt.conf.d/90rig"
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
}

apt_in() { # TREE PACKAGE...
    local tree=$1; shift
    rig_in "$tree" -- apt-get update -q >&2
    # shellcheck disable=SC2068
    rig_in "$tree" -- apt-get install -y -q $@ >&2
    rig_in "$tree" -- apt-get clean
}

# ---- steps -------------------------------------------------------------------
step_host() {
    local need=()
    command -v debootstrap >/dev/null || need+=(debootstrap)
    command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
    command -v cpio >/dev/null || need+=(cpio)
    command -v zstd >/dev/null || need+=(zstd)
    command -v xz >/dev/null || need+=(xz-utils)
    command -v unshare >/dev/null || need+=(util-linux)
    [ ${#need[@]} = 0 ] && return 0
    rig_say "apt-get install ${need[*]}"
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >&2
}

step_tools() {
    bootstrap_tree "$TOOLS"
    rig_say "tools tree: $TOOLS_PACKAGES"
    apt_in "$TOOLS" $TOOLS_PACKAGES
    rig_in "$TOOLS" -- qemu-system-x86_64 -device help > "$RIG_DIR/qemu-devices.txt"
    grep -q '"vfio-user-pci"' "$RIG_DIR/qemu-devices.txt" ||
        { echo "build.sh: this QEMU has no vfio-user-pci device" >&2; exit 1; }
    rig_say "$(rig_in "$TOOLS" -- qemu-system-x86_64 --version | head -n 1)"
}

step_guest() {
    bootstrap_tree "$GUEST"
    rig_say "guest tree: $(echo $GUEST_PACKAGES)"
    apt_in "$GUEST" $GUEST_PACKAGES
    # What a throwaway test guest never reads.
    rm -rf "$GUEST"/usr/share/doc/* "$GUEST"/usr/share/man/* "$GUEST"/usr/share/info/* \
        "$GUEST"/var/lib/apt/lists/* "$GUEST"/var/cache/apt/*.bin "$GUEST"/boot/initrd.img-*
    find "$GUEST/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.*' -exec rm -rf {} + 2>/dev/null || true
    [ -n "$(rig_kernel_release)" ] || { echo "build.sh: no kernel in the guest tree" >&2; exit 1; }
}

step_ionic_rdma() {
    local krel series src
    krel=$(rig_kernel_release)
    series=$(echo "$krel" | grep -oE '^[0-9]+\.[0-9]+')
    src=$RIG_DIR/src
    rig_say "ionic_rdma for $krel (linux-source-$series, linux-headers-$krel)"
    apt_in "$TOOLS" "linux-headers-$krel" "linux-source-$series"
    rm -rf "$src"; mkdir -p "$src"
    tar -C "$src" -xJf "$TOOLS/usr/src/linux-source-$series.tar.xz" \
        "linux-source-$series/drivers/infiniband/hw/ionic" \
        "linux-source-$series/drivers/net/ethernet/pensando/ionic"
    local tree=$src/linux-source-$series
    # The driver's own Makefile, with its config symbol made "m" and the
    # include path of the Ethernet driver's headers pointed at our extract
    # (linux-headers has no driver sources).
    sed -e 's/obj-\$(CONFIG_INFINIBAND_IONIC)/obj-m/' \
        -e "s|\$(srctree)/drivers/net/ethernet/pensando/ionic|$tree/drivers/net/ethernet/pensando/ionic|" \
        "$tree/drivers/infiniband/hw/ionic/Makefile" > "$tree/drivers/infiniband/hw/ionic/Kbuild"
    grep -q "$tree/drivers/net" "$tree/drivers/infiniband/hw/ionic/Kbuild" ||
        echo "ccflags-y += -I$tree/drivers/net/ethernet/pensando/ionic" >> "$tree/drivers/infiniband/hw/ionic/Kbuild"
    rig_in "$TOOLS" "$src" -- make -C "/usr/src/linux-headers-$krel" \
        M="$tree/drivers/infiniband/hw/ionic" -j"$(nproc)" modules >&2
    mkdir -p "$GUEST/lib/modules/$krel/updates"
    strip --strip-debug -o "$GUEST/lib/modules/$krel/updates/ionic_rdma.ko" \
        "$tree/drivers/infiniband/hw/ionic/ionic_rdma.ko"
    rig_in "$GUEST" -- depmod -a "$krel"
    rig_say "ionic_rdma depends on: $(rig_in "$GUEST" -- modinfo -k "$krel" -F depends ionic_rdma)"
}

step_init() {
    install -m 0755 "$HERE/guest-init.sh" "$GUEST/sbin/rig-init"
    echo rig-guest > "$GUEST/etc/hostname"
    printf '127.0.0.1 localhost\n127.0.1.1 rig-guest\n::1 localhost ip6-localhost ip6-loopback\n' > "$GUEST/etc/hosts"
    : > "$GUEST/etc/fstab"
    # No password for root: the guest has no login prompt, its consoles are files.
    sed -i 's|^root:[^:]*:|root::|' "$GUEST/etc/shadow"
    mkdir -p "$GUEST/job"
}

step_boot() {
    local krel tree mods m
    krel=$(rig_kernel_release)
    tree=$RIG_DIR/initramfs
    rm -rf "$tree"; mkdir -p "$tree"/{bin,dev,proc,sys,root,modules}
    cp "$GUEST/usr/bin/busybox" "$tree/bin/busybox"
    for m in sh mount umount switch_root insmod sleep cat ls; do ln -s busybox "$tree/bin/$m"; done
    # virtio-blk and ext4 with their dependencies, in load order, uncompressed
    # (busybox insmod does not read compressed modules).
    mods=$(for m in virtio_pci virtio_blk ext4; do
               rig_in "$GUEST" -- modprobe --set-version "$krel" --show-depends "$m" || true
           done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }')
    : > "$tree/modules/order"
    for m in $mods; do
        local base; base=$(basename "$m"); base=${base%.xz}; base=${base%.zst}; base=${base%.gz}
        case $m in
            *.zst) zstd -q -d -c "$GUEST$m" ;;
            *.xz) xz -d -c "$GUEST$m" ;;
            *.gz) gzip -d -c "$GUEST$m" ;;
            *) cat "$GUEST$m" ;;
        esac > "$tree/modules/$base"
        echo "$base" >> "$tree/modules/order"
    done
    install -m 0755 "$HERE/initramfs-init.sh" "$tree/init"
    mkdir -p "$BOOT"
    (cd "$tree" && find . | cpio --quiet -o -H newc) | gzip -1 > "$BOOT/initramfs.img.new"
    mv "$BOOT/initramfs.img.new" "$BOOT/initramfs.img"
    cp "$GUEST/boot/vmlinuz-$krel" "$BOOT/bzImage"
    # QEMU can boot an uncompressed ELF vmlinux directly (PVH), skipping the
    # decompressor: about a second less under TCG. Cut it out of the bzImage
    # at the zstd frame; fall back to the bzImage when that does not work.
    rm -f "$BOOT/vmlinux"
    local off
    off=$(LC_ALL=C grep -obUaP '\x28\xb5\x2f\xfd' "$BOOT/bzImage" | head -n 1 | cut -d: -f1 || true)
    if [ -n "$off" ]; then
        tail -c +"$((off + 1))" "$BOOT/bzImage" | zstd -q -d -c 2>/dev/null > "$BOOT/vmlinux.new" || true
        if [ "$(head -c 4 "$BOOT/vmlinux.new" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
            mv "$BOOT/vmlinux.new" "$BOOT/vmlinux"
        fi
        rm -f "$BOOT/vmlinux.new"
    fi
    [ -e "$BOOT/vmlinux" ] || rig_say "no vmlinux: guests boot the bzImage"
    echo "$krel" > "$BOOT/kernel.version"
    rig_say "initramfs modules: $(tr '\n' ' ' < "$tree/modules/order")"
}

step_disk() {
    local kib mib
    kib=$(du -sk --exclude=./proc --exclude=./sys "$GUEST" | cut -f1)
    mib=$((kib / 1024 * 5 / 4 + 256))
    mkdir -p "$BOOT"
    rm -f "$BOOT/root.ext4.new"
    truncate -s "${mib}M" "$BOOT/root.ext4.new"
    mkfs.ext4 -q -F -L "$RIG_ROOT_SERIAL" -E root_owner=0:0 -d "$GUEST" "$BOOT/root.ext4.new"
    mv "$BOOT/root.ext4.new" "$BOOT/root.ext4"
    rig_say "root.ext4: $mib MiB"
}

# ---- driver --------------------------------------------------------------------
STEPS=(host tools guest ionic-rdma init boot disk)

# The key each step would have now (later steps include earlier keys).
current_key() {
    case $1 in
        host) echo always ;;
        tools) key_of tools "$RIG_SUITE" "$RIG_MIRROR" "$TOOLS_PACKAGES" ;;
        guest) key_of guest "$RIG_SUITE" "$RIG_MIRROR" "$GUEST_PACKAGES" ;;
        ionic-rdma) key_of ionic-rdma "$(stored_key tools)" "$(stored_key guest)" ;;
        init) key_of init "$(sha256sum < "$HERE/guest-init.sh")" "$(stored_key guest)" ;;
        boot) key_of boot "$(sha256sum < "$HERE/initramfs-init.sh")" "$(stored_key guest)" ;;
        disk) key_of disk "$(stored_key guest)" "$(stored_key ionic-rdma)" "$(stored_key init)" ;;
    esac
}

run_step() { # STEP FORCE
    local step=$1 force=$2 want
    want=$(current_key "$step")
    if [ "$step" = host ]; then step_host; return; fi
    if [ "$force" = 0 ] && [ "$(stored_key "$step")" = "$want" ]; then return 0; fi
    rig_say "step $step"
    rm -f "$STATE/$step"
    "step_${step//-/_}"
    # A step's key may include its own inputs only after they exist.
    record "$step" "$(current_key "$step")"
}

case ${1:-} in
    --clean) rm -rf "$RIG_DIR"; exit 0 ;;
    --list)
        for s in "${STEPS[@]}"; do
            [ "$s" = host ] && continue
            if [ "$(stored_key "$s")" = "$(current_key "$s")" ]; then echo "$s: current"; else echo "$s: to do"; fi
        done
        exit 0 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
mkdir -p "$RIG_DIR"
if [ $# -gt 0 ]; then
    for s in "$@"; do
        printf '%s\n' "${STEPS[@]}" | grep -qx -- "$s" || { echo "build.sh: unknown step $s (${STEPS[*]})" >&2; exit 2; }
        run_step "$s" 1
    done
else
    for s in "${STEPS[@]}"; do run_step "$s" 0; done
fi
rig_say "ready: $BOOT ($(cat "$BOOT/kernel.version" 2>/dev/null || echo 'no kernel yet'))"
