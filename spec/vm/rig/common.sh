# spec/vm/rig/common.sh: sourced by build.sh and run-guest.sh. Where the rig
# keeps its files, and how it runs a program inside one of its Debian trees.
#
# Everything the rig makes lives under $RIG_DIR (default /var/tmp/ernic-rig):
#   tools/     Debian sid tree: QEMU (vfio-user-pci) and the kernel module toolchain
#   guest/     Debian sid tree that becomes the guest's root disk
#   boot/      kernel (bzImage, and vmlinux for PVH boot), initramfs, root.ext4, kernel.version
#   state/     one file per finished build step, holding the hash of its inputs
#   src/       ionic_rdma sources and build
#   runs/      one directory per guest run (kept on failure or with --keep)

RIG_DIR=${RIG_DIR:-/var/tmp/ernic-rig}
RIG_SUITE=${RIG_SUITE:-sid}
RIG_MIRROR=${RIG_MIRROR:-http://deb.debian.org/debian}
TOOLS=$RIG_DIR/tools
GUEST=$RIG_DIR/guest
BOOT=$RIG_DIR/boot

# The virtio-blk serial numbers the initramfs and the guest's init look for.
RIG_ROOT_SERIAL=rig-root
RIG_JOB_SERIAL=rig-job
RIG_OUT_SERIAL=rig-out

rig_say() { printf '[rig %s] %s\n' "$(date +%T)" "$*" >&2; }

# rig_exec TREE [BIND...] -- CMD ARGS: become CMD chrooted in TREE with /proc,
# /sys and /dev mounted and each BIND directory visible at the same path, in a
# mount namespace of its own, so nothing stays mounted when it ends. The
# calling shell is replaced (same pid all the way to CMD); rig_in runs it in a
# subshell and waits.
rig_exec() {
    local tree=$1; shift
    local binds=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do binds+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    exec unshare --mount --propagation private -- /bin/bash -c '
        tree=$1 nb=$2; shift 2
        mount -t proc proc "$tree/proc" || exit 125
        mount -t sysfs sysfs "$tree/sys" || exit 125
        mount --rbind /dev "$tree/dev" || exit 125
        while [ "$nb" -gt 0 ]; do
            mkdir -p "$tree$1" && mount --rbind "$1" "$tree$1" || exit 125
            shift; nb=$((nb - 1))
        done
        exec chroot "$tree" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
            HOME=/root LANG=C.UTF-8 TMPDIR=/var/tmp DEBIAN_FRONTEND=noninteractive "$@"
    ' rig-in "$tree" "${#binds[@]}" "${binds[@]+"${binds[@]}"}" "$@"
}
rig_in() ( rig_exec "$@" )

# The guest kernel's release string (the newest under the guest tree's /lib/modules).
rig_kernel_release() { ls "$GUEST/lib/modules" 2>/dev/null | sort -V | tail -n 1; }
