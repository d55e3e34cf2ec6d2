#!/bin/sh
# /sbin/rig-init: PID 1 of the rig's guest (installed by build.sh; no systemd,
# no udev). It mounts what tools expect, unpacks the job disk (virtio serial
# rig-job, a tar) into /job, runs /job/test.sh as root with its output on the
# second serial port (the host's output.log), writes the exit status there
# between @@RIG-STATUS= and @@, packs /job/out onto the disk with serial
# rig-out if there is one, and powers the machine off.
# Kernel command line: rig.net=1 brings up virtio-net as eth0 (10.0.2.15/24,
# QEMU's user network); rig.coldplug=1 loads a driver for every device.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8
umask 022

note() { echo "rig-init: $*" > /dev/console; }
uptime_s() { read -r up _ < /proc/uptime; echo "$up"; }
power_off() { sync; busybox poweroff -f; echo o > /proc/sysrq-trigger; sleep 30; }

mount -t proc proc /proc
mount -t sysfs sysfs /sys
[ -c /dev/null ] || mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=0620,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t configfs configfs /sys/kernel/config 2>/dev/null
ln -sfn /proc/self/fd /dev/fd
ln -sfn /proc/self/fd/0 /dev/stdin
ln -sfn /proc/self/fd/1 /dev/stdout
ln -sfn /proc/self/fd/2 /dev/stderr
hostname rig-guest
ip link set lo up

want_net=0 want_coldplug=0
for word in $(cat /proc/cmdline); do
    case $word in
        rig.net=1) want_net=1 ;;
        rig.coldplug=1) want_coldplug=1 ;;
    esac
done

# The block device whose virtio serial is $1.
disk_with_serial() {
    for f in /sys/block/vd*/serial; do
        [ -r "$f" ] || continue
        if [ "$(cat "$f")" = "$1" ]; then d=${f%/serial}; echo "/dev/${d##*/}"; return 0; fi
    done
    return 1
}

if [ $want_coldplug = 1 ]; then
    find /sys/devices -name modalias -print0 | xargs -0 cat 2>/dev/null | sort -u | xargs -r modprobe -a -b -q 2>/dev/null
fi
if [ $want_net = 1 ]; then
    modprobe virtio_net
    n=0
    while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 250 ]; do sleep 0.02; n=$((n + 1)); done
    { ip addr add 10.0.2.15/24 dev eth0 && ip link set eth0 up && ip route add default via 10.0.2.2; } ||
        note "eth0 did not come up"
fi

mkdir -p /job
job=$(disk_with_serial rig-job) || { note "no job disk"; power_off; }
tar -x -f "$job" -C /job || note "unpacking $job failed"
export RIG_JOB=/job RIG_OUT=/job/out
# The older E2E_* names, for guest scripts written against them.
export E2E_JOB=$RIG_JOB E2E_OUT=$RIG_OUT
mkdir -p "$RIG_OUT"

exec 9<>/dev/ttyS1
stty raw -echo 115200 <&9
note "RIG-BEGIN uptime=$(uptime_s)"
cd /job
if [ "$(head -c 2 /job/test.sh)" = '#!' ]; then chmod 0755 /job/test.sh; set -- /job/test.sh; else set -- /bin/bash /job/test.sh; fi
# Output through a pipe, not the tty: no terminal processing of the bytes.
{ "$@" 9>&- < /dev/null 2>&1; echo $? > /run/rig-status; } | cat >&9
status=$(cat /run/rig-status 2>/dev/null || echo 255)
cd /
printf '\n@@RIG-STATUS=%s@@\n' "$status" >&9
exec 9>&-
note "RIG-END status=$status uptime=$(uptime_s)"
echo "$status" > "$RIG_OUT/.status"
if out=$(disk_with_serial rig-out); then
    tar -c -f "$out" -C "$RIG_OUT" . || note "writing the out disk failed"
fi
power_off
