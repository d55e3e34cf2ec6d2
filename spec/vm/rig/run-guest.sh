#!/bin/bash
# spec/vm/rig/run-guest.sh: boot one rig guest (spec/vm/rig/build.sh makes it),
# run a script in it as root, print what the script printed and exit with its
# status. QEMU runs from the rig's Debian sid tree (it has vfio-user-pci).
#
# Usage: run-guest.sh [options]
#   --script FILE         run FILE in the guest as /job/test.sh (cwd /job; a #!
#                         line is honoured, else bash). Without it: uname + lspci.
#   --socket PATH         add a vfio-user-pci device for this server socket
#                         (repeatable; the server must be listening already).
#   --file SRC[:NAME]     copy SRC to /job/NAME (default its base name; repeatable).
#   --mem SIZE            guest RAM, memfd-backed and shared (default 2G).
#   --smp N               vCPUs (default 2; ionic_rdma wants 4).
#   --timeout SEC         stop QEMU after SEC seconds and exit 124 (default 300).
#   --net                 a virtio NIC on QEMU's user network (restrict=on: no
#                         way out); the guest's eth0 is 10.0.2.15/24.
#   --virtio-tap IFNAME   a virtio-net NIC (QEMU's userspace virtio-net, vnet
#                         header offloads on) on the existing host TAP IFNAME,
#                         MAC 52:54:00:7a:70:01; the guest configures it itself.
#   --virtio-mac MAC      that NIC's MAC instead (two guests on one bridge).
#   --coldplug            load a driver for every device before the script.
#   --append ARGS         more kernel command line.
#   --extra-qemu-args S   more QEMU arguments (split at spaces).
#   --outdir DIR          copy what the script left in $RIG_OUT (/job/out) to DIR.
#   --accel auto|kvm|tcg  default auto: KVM when it works here, else TCG. --tcg = --accel tcg.
#   --console             print the guest's kernel console to stderr at the end.
#   --keep                keep the run directory ($RIG_DIR/runs/run-*).
# Exit status: the script's; 124 on timeout; 125 when the rig itself failed.
# The guest sees RIG_JOB=/job and RIG_OUT=/job/out (also as E2E_JOB, E2E_OUT).
# Environment: RIG_DIR (default /var/tmp/ernic-rig), RIG_ACCEL, RIG_KVM_CPU (host),
# RIG_TCG_CPU (max), RIG_KERNEL (default boot/vmlinux, else boot/bzImage).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

script= mem=2G smp=2 timeout=300 net=0 coldplug=0 append= extra= outdir= vtap= vmac=52:54:00:7a:70:01
accel=${RIG_ACCEL:-auto} console=0 keep=0
sockets=() files=()
fail_rig() { echo "run-guest: $*" >&2; exit 125; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
        --script) script=$2; shift ;;
        --socket) sockets+=("$2"); shift ;;
        --file) files+=("$2"); shift ;;
        --mem) mem=$2; shift ;;
        --smp) smp=$2; shift ;;
        --timeout) timeout=$2; shift ;;
        --net) net=1 ;;
        --virtio-tap) vtap=$2; shift ;;
        --virtio-mac) vmac=$2; shift ;;
        --coldplug) coldplug=1 ;;
        --append) append=$2; shift ;;
        --extra-qemu-args) extra=$2; shift ;;
        --outdir) outdir=$2; shift ;;
        --accel) accel=$2; shift ;;
        --tcg) accel=tcg ;;
        --console) console=1 ;;
        --keep) keep=1 ;;
        -h|--help) usage; exit 0 ;;
        *) fail_rig "unknown option $1 (--help lists them)" ;;
    esac
    shift
done

[ "$(id -u)" = 0 ] || fail_rig "run as root (chroot and mounts)"
for f in bzImage initramfs.img root.ext4; do
    [ -e "$BOOT/$f" ] || fail_rig "$BOOT/$f is missing: run bash spec/vm/rig/build.sh"
done
[ -x "$TOOLS/usr/bin/qemu-system-x86_64" ] || fail_rig "no QEMU in $TOOLS: run bash spec/vm/rig/build.sh"
[[ $timeout =~ ^[0-9]+$ ]] || fail_rig "--timeout wants whole seconds"
[[ $vmac =~ ^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$ ]] || fail_rig "--virtio-mac wants a MAC like 52:54:00:7a:70:02"
[ -z "$script" ] || [ -r "$script" ] || fail_rig "cannot read $script"
for f in "${files[@]+"${files[@]}"}"; do [ -e "${f%%:*}" ] || fail_rig "no file ${f%%:*}"; done
for s in "${sockets[@]+"${sockets[@]}"}"; do
    [ -S "$s" ] || fail_rig "no vfio-user socket at $s (start the server first)"
done

mkdir -p "$RIG_DIR/runs"
run=$(mktemp -d "$RIG_DIR/runs/run-XXXXXX")
mkdir "$run/job"
# The script: copied whole, so a process substitution (<(...)) works too.
if [ -n "$script" ]; then cat "$script" > "$run/job/test.sh"; else printf '#!/bin/sh\nuname -a\nlspci -nn\n' > "$run/job/test.sh"; fi
for f in "${files[@]+"${files[@]}"}"; do
    src=${f%%:*} name=${f#*:}
    [ "$name" = "$f" ] && name=$(basename "$src")
    mkdir -p "$(dirname "$run/job/$name")"
    cp -a "$src" "$run/job/$name"
done
tar -c -f "$run/job.tar" -C "$run/job" .
: > "$run/console.log"
: > "$run/output.log"

# What QEMU must see inside its chroot, at the same paths: /tmp, the rig, and
# the directory of every socket that lies elsewhere.
binds=(/tmp "$RIG_DIR")
for s in "${sockets[@]+"${sockets[@]}"}"; do
    d=$(cd "$(dirname "$s")" && pwd -P)
    case $d/ in /tmp/*|"$RIG_DIR"/*) ;; *) binds+=("$d") ;; esac
done

# The accelerator. A PVM host (/sys/module/kvm_pvm: nested KVM done in
# software) fails a stock kernel early ("KVM internal error ... emulation
# failure"), so auto picks TCG there; elsewhere it asks QEMU whether KVM starts.
cpu=${RIG_TCG_CPU:-max}
chosen=tcg
case $accel in
    tcg) ;;
    kvm) chosen=kvm cpu=${RIG_KVM_CPU:-host} ;;
    auto)
        if [ -d /sys/module/kvm_pvm ]; then
            echo "run-guest: /dev/kvm is PVM here; using TCG" >&2
        elif [ -c /dev/kvm ] && echo quit | rig_in "$TOOLS" -- qemu-system-x86_64 -accel kvm -machine none \
                -nodefaults -display none -monitor stdio > /dev/null 2> "$run/kvm-probe.log"; then
            chosen=kvm cpu=${RIG_KVM_CPU:-host}
        else
            echo "run-guest: no usable KVM; using TCG" >&2
        fi ;;
    *) fail_rig "--accel is auto, kvm or tcg" ;;
esac

kernel=${RIG_KERNEL:-$BOOT/vmlinux}
[ -e "$kernel" ] || kernel=$BOOT/bzImage
cmdline="console=ttyS0,115200 init=/sbin/rig-init panic=-1 quiet loglevel=4 mitigations=off"
[ $net = 1 ] && cmdline+=" rig.net=1"
[ $coldplug = 1 ] && cmdline+=" rig.coldplug=1"
[ -n "$append" ] && cmdline+=" $append"

qemu=(qemu-system-x86_64 -nodefaults -no-user-config -display none -no-reboot
    -machine q35,memory-backend=ram0 -accel "$chosen" -cpu "$cpu" -smp "$smp" -m "$mem"
    -object memory-backend-memfd,id=ram0,size="$mem",share=on
    -kernel "$kernel" -initrd "$BOOT/initramfs.img" -append "$cmdline"
    -drive if=none,id=root,file="$BOOT/root.ext4",format=raw,snapshot=on,cache=unsafe
    -device virtio-blk-pci,drive=root,serial=$RIG_ROOT_SERIAL
    -drive if=none,id=job,file="$run/job.tar",format=raw,readonly=on
    -device virtio-blk-pci,drive=job,serial=$RIG_JOB_SERIAL
    -serial file:"$run/console.log" -serial file:"$run/output.log")
if [ -n "$outdir" ]; then
    truncate -s 1G "$run/out.tar"
    qemu+=(-drive if=none,id=out,file="$run/out.tar",format=raw -device virtio-blk-pci,drive=out,serial=$RIG_OUT_SERIAL)
fi
[ $net = 1 ] && qemu+=(-netdev user,id=net0,restrict=on -device virtio-net-pci,netdev=net0)
if [ -n "$vtap" ]; then
    [ -e "/sys/class/net/$vtap" ] || fail_rig "--virtio-tap $vtap: no such host interface"
    qemu+=(-netdev "tap,id=vtap0,ifname=$vtap,script=no,downscript=no,vhost=off" -device virtio-net-pci,netdev=vtap0,mac=$vmac)
fi
for s in "${sockets[@]+"${sockets[@]}"}"; do
    qemu+=(-device "{\"driver\":\"vfio-user-pci\",\"socket\":{\"path\":\"$s\",\"type\":\"unix\"}}")
done
# shellcheck disable=SC2206
[ -n "$extra" ] && qemu+=($extra)
printf '%q ' "${qemu[@]}" > "$run/qemu.cmd"
echo >> "$run/qemu.cmd"

now() { date +%s.%N; }
t_start=$(now)
( rig_exec "$TOOLS" "${binds[@]}" -- "${qemu[@]}" ) > "$run/qemu.log" 2>&1 &
qpid=$!
trap 'kill -KILL $qpid 2>/dev/null || true' INT TERM
t_script= timed_out=0
deadline=$(( $(date +%s) + timeout ))
while kill -0 $qpid 2>/dev/null; do
    if [ -z "$t_script" ] && grep -q 'RIG-BEGIN' "$run/console.log"; then t_script=$(now); fi
    if [ "$(date +%s)" -ge $deadline ]; then
        timed_out=1
        kill -TERM $qpid 2>/dev/null || true
        sleep 2
        kill -KILL $qpid 2>/dev/null || true
        break
    fi
    sleep 0.1
done
qemu_rc=0
wait $qpid || qemu_rc=$?
t_end=$(now)
[ -z "$t_script" ] && grep -q 'RIG-BEGIN' "$run/console.log" && t_script=$t_end

# The script's output, less the status line (and the newline put before it).
status=$(grep -a -o '@@RIG-STATUS=[0-9]*@@' "$run/output.log" | tail -n 1 | tr -dc '0-9' || true)
sed -e '/^@@RIG-STATUS=[0-9]*@@$/d' "$run/output.log" | awk '
    { lines[n++] = $0 } END { while (n > 0 && lines[n-1] == "") n--; for (i = 0; i < n; i++) print lines[i] }'

if [ -n "$outdir" ] && [ -n "$status" ]; then
    mkdir -p "$outdir"
    tar -x -f "$run/out.tar" -C "$outdir" 2>/dev/null || true
fi
guest_up=$(grep -a -o 'RIG-BEGIN uptime=[0-9.]*' "$run/console.log" | head -n 1 | cut -d= -f2 || true)
awk -v a="$chosen" -v t0="$t_start" -v ts="${t_script:-}" -v t1="$t_end" -v up="${guest_up:-?}" -v st="${status:-none}" \
    'BEGIN { printf "run-guest: accel=%s boot-to-script=%s (guest uptime %ss) total=%.1fs status=%s\n",
             a, ts == "" ? "n/a" : sprintf("%.1fs", ts - t0), up, t1 - t0, st }' >&2

if [ $console = 1 ]; then echo "----- guest console -----" >&2; cat "$run/console.log" >&2; fi
if [ $timed_out = 1 ]; then
    rc=124 keep=1
    echo "run-guest: timed out after ${timeout}s" >&2
elif [ -z "$status" ]; then
    rc=125 keep=1
    echo "run-guest: the guest gave no exit status (QEMU exit $qemu_rc)" >&2
    echo "----- qemu.log (last lines) -----" >&2; tail -n 20 "$run/qemu.log" >&2
    grep -q 'KVM internal error' "$run/qemu.log" && echo "run-guest: KVM failed; try --accel tcg" >&2
    echo "----- console.log (last lines) -----" >&2; tail -n 30 "$run/console.log" >&2
else
    rc=$status
fi
if [ $keep = 1 ]; then echo "run-guest: logs in $run" >&2; else rm -rf "$run"; fi
exit "$rc"
